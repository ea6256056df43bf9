//! Crash-safe document ingestion pipeline for Cloudflare Workers.
//!
//! D1 is the source of truth, the vector index is derived from it, Queues only
//! carry pointers (`{job_id, doc_id, version}`), and the cron handler repairs.
//!
//! Crate map (see `docs/ARCHITECTURE.md` for the whole picture):
//!
//! - [`config`]: every tunable and platform limit, in one place, with defaults.
//! - [`bugs`]: deliberate protocol bugs for testing the simulation (not in
//!   the Worker's build; inert in a native one unless a test switches one on).
//! - [`log`]: the structured log line and its sink, installed by the entry
//!   points (a leaf).
//! - [`core`]: pure code, no I/O, no async: identifiers, chunking, the local
//!   embedder, failure buckets and the retry policy.
//! - [`ports`]: the small traits the pipeline is generic over (database,
//!   vector index, embedder, queue, clock) and their obligations.
//! - [`store`]: every SQL statement the Worker runs, written once.
//! - [`pipeline`]: intake, consume, repair and search, written once over the ports.
//! - [`api`]: the HTTP contract, platform-independent (request in, JSON out).
//! - [`adapters`]: port implementations that run everywhere (the local vector
//!   index over any [`ports::Database`]).
//! - `wasm` (wasm32 only): Worker entry points and the D1 / Queues adapters.
//! - `native` (not wasm32): rusqlite and in-memory adapters, the oracle
//!   (the ledger's inspection queries), the test kit and the simulation,
//!   for tests, simulation and benchmarks.

pub mod adapters;
pub mod api;
pub mod bugs;
pub mod config;
pub mod core;
pub mod log;
pub mod pipeline;
pub mod ports;
pub mod store;

#[cfg(not(target_arch = "wasm32"))]
pub mod native;

#[cfg(target_arch = "wasm32")]
mod wasm;
