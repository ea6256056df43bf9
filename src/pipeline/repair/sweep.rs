//! Steps 1 and 1b: chunk rows of abandoned versions, and of retiring or
//! abandoned generations, become cleanup intents (drained in step 2).

use super::Run;
use crate::config::Config;

/// Calls of step 1: one statement (exact).
const SWEEP_CALLS: u64 = 1;
/// Calls of step 1b: the intents statement and the retire statement (exact).
const RETIRE_CALLS: u64 = 2;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 1: up to `CRON_ABANDONED_CHUNKS_MAX` chunk rows of abandoned
    /// versions become intents (`SWEEP_ABANDONED`).
    pub(super) async fn sweep_abandoned(&self, run: &mut Run<'_>) {
        if !self.allows(run, SWEEP_CALLS) {
            return;
        }
        match self
            .store
            .sweep_abandoned(self.clock.now_ms(), self.cfg.cron_abandoned_chunks_max)
            .await
        {
            Ok(n) => {
                run.report.abandoned_chunks_swept += n;
                run.cleanup_left |= n as usize >= self.cfg.cron_abandoned_chunks_max;
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Step 1b: rows of retiring generations become intents.
    pub(super) async fn retire_rows(&self, run: &mut Run<'_>) {
        if !self.allows(run, RETIRE_CALLS) {
            return;
        }
        match self
            .retire_generations(self.cfg.cron_abandoned_chunks_max)
            .await
        {
            Ok(n) => {
                run.report.generation_rows_retired += n;
                run.cleanup_left |= n as usize >= self.cfg.cron_abandoned_chunks_max;
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }
}

/// Rows of a retiring generation one cron run turns into intents and
/// deletes, at most: one cleanup pass, a page of the smaller of the two
/// cleanup caps. (Spending the rest of the run's budget on more passes was
/// tried and reverted: the simulation caught a live vector deleted, seed
/// 540; issue 34, item 8, stays open.)
pub fn cleanup_rows_per_run(cfg: &Config) -> u64 {
    cfg.cron_abandoned_chunks_max
        .min(cfg.cron_cleanup_intents_max) as u64
}
