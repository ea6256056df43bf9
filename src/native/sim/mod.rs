//! The deterministic simulation of the protocol.
//!
//! It runs the real pipeline (intake, consume, repair, search) on real
//! SQLite and in-memory fakes, under a seeded scheduler that interleaves
//! tasks at port-call granularity and injects faults at port calls:
//!
//! - `FailBefore`: the call fails and has no effect;
//! - `FailAfter`: the effect applies, the caller sees a failure;
//! - `CrashAfter`: the effect applies and the task never resumes (the
//!   invocation died); its message is redelivered.
//!
//! The queue broker redelivers, duplicates and reorders messages; the cron
//! handler runs at arbitrary points; the clock is injected and a task that
//! outlives the platform's wall-clock limit is killed. The clients write
//! as two tenants (the built-in `default` and `acme`, which the world
//! creates), with the same document IDs in both and texts of disjoint
//! words. After every step that changed the ledger or the index the
//! invariants I1–I4, I8, I10 and I11 (tenant isolation: no search hit,
//! document view or job of one tenant reaches the other) are checked;
//! after quiescence I5–I7, I9, for a redrive R, and for a source sync I14
//! (see `docs/ARCHITECTURE.md`).
//!
//! The rooms, in layers: each may import the ones above it (and the
//! native fakes, the test kit, the oracle and the pipeline), never one
//! below:
//!
//! - `rng`: the seeded generator;
//! - `faults`: fault kinds and plans, outages, and the scheduler [`Sched`];
//! - `wrappers`: the port wrappers and the queue [`Broker`];
//! - `world`: the script's types, the tenants, the configurations and the
//!   [`World`] of a run;
//! - `invariants`: the checks after every step and after quiescence;
//! - `actors`: the clients' and the operator's tasks;
//! - `reference`: the fault-free reference run of I6;
//! - `executor`: [`run`]: setup, the step loop, quiescence, final checks;
//! - `scripts`: random scripts and cases per seed, the exhaustive flows;
//! - `moves`: tenants moved between two shards ([`run_move_seed`]: its
//!   own runs over a two-shard deployment, and invariants M1–M4).

mod actors;
mod executor;
mod faults;
mod invariants;
mod moves;
mod reference;
mod rng;
mod scripts;
mod world;
mod wrappers;

pub use actors::redrive_request;
pub use executor::{run, Mode, RunReport};
pub use faults::{CallKind, FaultKind, FaultPlan, Outage, Port, Sched};
pub use invariants::QUIESCENCE_TICKS_MAX;
pub use moves::{run_move_seed, MoveRunReport};
pub use rng::Rng;
pub use scripts::{
    case_for_seed, count_calls, flow, random_script, run_flow, run_seed, Case, FLOWS,
    RANDOM_FAULTS_PER_MILLE,
};
pub use world::{
    reindex_config, sim_config, sim_config_for_seed, sim_configs, tenants, DocClient, NoQueue, Op,
    Operator, Script, Violation, World, OTHER_TENANT,
};
pub use wrappers::{Broker, Queued, SimDb, SimEmbedder, SimIndex, SimQueue, QUEUE_MAX_RETRIES};

/// The simulated clock's start (ms since the epoch): every run begins
/// where the test kit's clock does.
pub use crate::native::testkit::T0;
