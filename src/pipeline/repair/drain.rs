//! Step 2: due cleanup intents are deleted from the index in batches of
//! `DELETE_BATCH_SIZE` (`CRON_CLEANUP_INTENTS_MAX` per run); a failed delete
//! backs its intents off (`consume/cleanup.rs`'s `delete_vectors`).

use super::Run;
use crate::core::failure::FailureBucket;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 2: drains due intents, batch by batch, while the budget and the
    /// per-run cap last.
    pub(super) async fn drain_intents(&self, run: &mut Run) {
        let mut budget = self.cfg.cron_cleanup_intents_max;
        // Each batch: the due intents, the index delete, the ledger update.
        while budget > 0 && self.allows(run, 3) {
            let limit = self.cfg.delete_batch_size.min(budget);
            run.meter.spend(1);
            let ids = match self.store.intents_due(self.clock.now_ms(), limit).await {
                Ok(ids) if ids.is_empty() => break,
                Ok(ids) => ids,
                Err(e) => {
                    run.report.failed(e.bucket);
                    break;
                }
            };
            budget = budget.saturating_sub(ids.len());
            run.meter.spend(2);
            if self.delete_vectors(&ids).await {
                run.report.intents_deleted += ids.len() as u64;
            } else {
                run.report.intents_failed += ids.len() as u64;
                run.report.failed(FailureBucket::IndexUnavailable);
                break;
            }
        }
        // The per-run cap reached: intents are left for the next run.
        run.report.budget_hit |= budget == 0;
    }
}
