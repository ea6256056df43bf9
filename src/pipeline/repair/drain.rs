//! Step 2: of the due intents the claim would read first, those whose
//! vector a row that may be served still refers to are retired (one
//! batch, no index call); the due others are
//! claimed and deleted from the index in batches of `DELETE_BATCH_SIZE`
//! (`CRON_CLEANUP_INTENTS_MAX` per run); a failed delete backs its intents
//! off (`consume/cleanup.rs`'s `delete_vectors`).

use super::Run;
use crate::core::failure::FailureBucket;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

/// Calls of one batch (exact): the claim, the index delete, and the
/// ledger update (the intents done, or backed off after a failed delete).
pub(super) const DRAIN_BATCH_CALLS: u64 = 3;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 2: drains due intents, batch by batch, while the budget and the
    /// per-run cap last.
    pub(super) async fn drain_intents(&self, run: &mut Run<'_>) {
        let mut budget = self.cfg.cron_cleanup_intents_max;
        if self.allows(run, 1) {
            let now = self.clock.now_ms();
            match self.store.retire_referenced_intents(now, budget).await {
                Ok(n) => {
                    run.report.intents_retired += n;
                    budget = budget.saturating_sub(n as usize);
                }
                Err(e) => run.report.failed(e.bucket),
            }
        }
        while budget > 0 && self.allows(run, DRAIN_BATCH_CALLS) {
            let limit = self.cfg.delete_batch_size.min(budget);
            let ids = match self.claim_intents(None, limit).await {
                Ok(ids) if ids.is_empty() => break,
                Ok(ids) => ids,
                Err(e) => {
                    run.report.failed(e.bucket);
                    break;
                }
            };
            budget = budget.saturating_sub(ids.len());
            let short = ids.len() < limit;
            if self.delete_vectors(&ids).await {
                run.report.intents_deleted += ids.len() as u64;
                if short {
                    // A short claim took every intent there was to take.
                    break;
                }
            } else {
                run.report.intents_failed += ids.len() as u64;
                run.report.failed(FailureBucket::IndexUnavailable);
                break;
            }
        }
        // The page filled: intents may be left, for step 8 or the next run.
        run.cleanup_left |= budget == 0;
    }
}
