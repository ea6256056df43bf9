//! The cron handler: bounded repair work on every scheduled run, within
//! `CRON_SUBREQUESTS_MAX` subrequests and `CRON_WALL_SECONDS_MAX` (see
//! `docs/ARCHITECTURE.md`, "Repair, dead letters and redrives").
//!
//! This file keeps the order of the run's steps ([`Pipeline::repair`]) and
//! its budget. The run goes through [`Pipeline::metered`], as the
//! consumer's invocation does: the budget spent is the count of the calls
//! made, and each step asks, before it starts and between batches, whether
//! its worst case still fits in what is left (each file names its worst
//! cases, and says which are estimates). Each step lives in its own file:
//!
//! - `sweep.rs` — 1: abandoned versions' chunk rows become intents; 1b: so
//!   do retiring generations' rows; 8: the budget the other steps left goes
//!   to more passes of 1, 1b and 2, so a retired generation drains at the
//!   budget's pace, not a page a run;
//! - `drain.rs` — 2: due intents' vectors deleted from the index;
//! - `requeue.rs` — 3: stalled jobs sent again, or ended `dead`;
//! - `verify.rs` — 4: a sample of live chunks checked against the index;
//! - `advance.rs` — 5: active redrives; 6: the running backfill; 7: sync
//!   sessions expired, and committing ones continued;
//! - `prune.rs` — 9: history past its retention pruned, a page of each
//!   kind;
//! - `report.rs` — the run's [`RepairReport`], logged and recorded.
//!
//! May import: the rest of `pipeline` (`consume`'s `delete_vectors`,
//! `admin`, `backfill`, `log_event`), `store`, `ports`, `core`, `config`.

mod advance;
mod drain;
mod prune;
mod report;
mod requeue;
mod sweep;
mod verify;

pub use report::RepairReport;
pub use sweep::cleanup_rows_per_run;

use super::budget::{Budget, Usage};
use super::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

/// One run in progress: its budget (`CRON_SUBREQUESTS_MAX`,
/// `CRON_WALL_SECONDS_MAX`), the calls its metered ports counted, and what
/// it did so far.
struct Run<'u> {
    budget: Budget,
    usage: &'u Usage,
    report: RepairReport,
    /// Whether a cleanup step (1, 1b, 2) filled its page: there may be more,
    /// for step 8.
    cleanup_left: bool,
}

impl Run<'_> {
    /// Subrequests left (the wall time is asked by [`Pipeline::allows`]).
    fn left(&self) -> u64 {
        self.budget
            .subrequests_max
            .saturating_sub(self.usage.total())
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// One scheduled run: the steps in order, each within the budget left;
    /// a step that fails is reported and the run goes on.
    pub async fn repair(&self) -> RepairReport {
        let started_at = self.clock.now_ms();
        let usage = Usage::default();
        // A scheduled run repairs every shard (`SHARDS`): each gets an
        // even share of the run's subrequests and wall time (the moves
        // between them one more, `Config::cron_shares`).
        let shares = self.cfg.cron_shares();
        let mut run = Run {
            budget: Budget {
                subrequests_max: self.cfg.cron_subrequests_max / shares,
                started_ms: started_at,
                wall_ms: i64::from(self.cfg.cron_wall_seconds_max) * 1000 / shares as i64,
            },
            usage: &usage,
            report: RepairReport::default(),
            cleanup_left: false,
        };
        let metered = self.metered(&usage);
        metered.sweep_abandoned(&mut run).await; // 1
        metered.retire_rows(&mut run).await; // 1b
        metered.drain_intents(&mut run).await; // 2
        metered.requeue_stalled(&mut run).await; // 3
        metered.verify_step(&mut run).await; // 4
        metered.advance_redrives_step(&mut run).await; // 5
        metered.advance_backfill_step(&mut run).await; // 6
        metered.advance_syncs_step(&mut run).await; // 7
        metered.cleanup_with_what_is_left(&mut run).await; // 8
        metered.prune_step(&mut run).await; // 9
        run.report.budget_hit |= run.cleanup_left;
        let mut report = run.report;
        report.shard = self.shard.0;
        report.subrequests_used = usage.total();
        report.elapsed_ms = self.clock.now_ms() - started_at;
        metered.report_run(started_at, &report).await;
        report
    }

    /// Asks the run's budget whether `next` more subrequests fit (a step's
    /// worst case), and time is left; a refusal marks the run as having hit
    /// its budget.
    fn allows(&self, run: &mut Run<'_>, next: u64) -> bool {
        let ok = run.budget.allows(run.usage, self.clock.now_ms(), next, 0);
        run.report.budget_hit |= !ok;
        ok
    }
}
