//! The cron handler: bounded repair work on every scheduled run, within
//! `CRON_SUBREQUESTS_MAX` subrequests and `CRON_WALL_SECONDS_MAX` (see
//! `docs/ARCHITECTURE.md`, "Repair, dead letters and redrives").
//!
//! This file keeps the order of the run's steps ([`Pipeline::repair`]) and
//! its budget; each step lives in its own file:
//!
//! - `sweep.rs` — 1: abandoned versions' chunk rows become intents; 1b: so
//!   do retiring generations' rows;
//! - `drain.rs` — 2: due intents' vectors deleted from the index;
//! - `requeue.rs` — 3: stalled jobs sent again, or ended `dead`;
//! - `verify.rs` — 4: a sample of live chunks checked against the index;
//! - `advance.rs` — 5: active redrives; 6: the running backfill;
//! - `report.rs` — the run's [`RepairReport`], logged and recorded.
//!
//! May import: the rest of `pipeline` (`consume`'s `delete_vectors`,
//! `admin`, `backfill`, `log_event`), `store`, `ports`, `core`, `config`.

mod advance;
mod drain;
mod report;
mod requeue;
mod sweep;
mod verify;

pub use report::RepairReport;

use super::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

/// The budget of one scheduled run: subrequests and wall time. Steps ask
/// before they start and stop between batches once it is spent.
struct Meter {
    used: std::cell::Cell<u64>,
    max: u64,
    started_ms: i64,
    wall_ms: i64,
}

impl Meter {
    fn spend(&self, n: u64) {
        self.used.set(self.used.get() + n);
    }

    /// Whether `next` more subrequests fit, and time is left.
    fn allows(&self, now_ms: i64, next: u64) -> bool {
        self.used.get() + next <= self.max && now_ms - self.started_ms < self.wall_ms
    }
}

/// One run in progress: its budget and what it did so far.
struct Run {
    meter: Meter,
    report: RepairReport,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// One scheduled run: the steps in order, each within the budget left;
    /// a step that fails is reported and the run goes on.
    pub async fn repair(&self) -> RepairReport {
        let started_at = self.clock.now_ms();
        let mut run = Run {
            meter: Meter {
                used: std::cell::Cell::new(0),
                max: self.cfg.cron_subrequests_max,
                started_ms: started_at,
                wall_ms: i64::from(self.cfg.cron_wall_seconds_max) * 1000,
            },
            report: RepairReport::default(),
        };
        self.sweep_abandoned(&mut run).await; // 1
        self.retire_rows(&mut run).await; // 1b
        self.drain_intents(&mut run).await; // 2
        self.requeue_stalled(&mut run).await; // 3
        self.verify_step(&mut run).await; // 4
        self.advance_redrives_step(&mut run).await; // 5
        self.advance_backfill_step(&mut run).await; // 6
        let mut report = run.report;
        report.subrequests_used = run.meter.used.get();
        report.elapsed_ms = self.clock.now_ms() - started_at;
        self.report_run(started_at, &report).await;
        report
    }

    /// Asks the run's budget whether `next` more subrequests fit; a refusal
    /// marks the run as having hit its budget.
    fn allows(&self, run: &mut Run, next: u64) -> bool {
        let ok = run.meter.allows(self.clock.now_ms(), next);
        run.report.budget_hit |= !ok;
        ok
    }
}
