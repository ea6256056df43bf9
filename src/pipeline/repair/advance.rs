//! Steps 5 and 6: active redrives, and the running backfill, advanced in
//! the budget left (`pipeline/admin.rs` and `pipeline/backfill.rs` hold
//! what one advance does).

use super::Run;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

/// Redrives advanced per scheduled run.
const REDRIVES_PER_RUN_MAX: usize = 10;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 5: redrives in progress (a redrive's advance is a few reads and
    /// writes plus one re-run per item it sends).
    pub(super) async fn advance_redrives_step(&self, run: &mut Run) {
        let per_redrive = 6 + 4 * 100;
        if !self.allows(run, 1 + per_redrive) {
            return;
        }
        let n = (run.meter.max.saturating_sub(run.meter.used.get() + 1) / per_redrive)
            .min(REDRIVES_PER_RUN_MAX as u64) as usize;
        run.meter.spend(1);
        match self.advance_redrives(n.max(1)).await {
            Ok(n) => {
                run.report.redrives_advanced = n as u64;
                run.meter.spend(6 * n as u64);
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Step 6: the running backfill, as many pages as the budget left allows
    /// (at least the end-of-pass step: a few reads and the switch batch).
    pub(super) async fn advance_backfill_step(&self, run: &mut Run) {
        if !self.allows(run, 8) {
            return;
        }
        let left = run.meter.max.saturating_sub(run.meter.used.get() + 2);
        run.meter.spend(2);
        match self.advance_backfills(left).await {
            Ok((pages, cost)) => {
                run.report.backfill_pages = pages;
                run.meter.spend(cost + 6);
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }
}
