//! Step 6, cleanup: claims the document's due intents whose vector nothing
//! refers to (deletes by reference: `INTENTS_CLAIM_DOC`), deletes their
//! vectors from the index in bounded batches, then removes the intents
//! (cron's drain runs the same `claim_intents` and `delete_vectors`, after
//! retiring the intents whose vector is still referenced).

use crate::bugs::Bug;
use crate::pipeline::budget::{Budget, Usage};
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use crate::store::{ConsumeRow, UsageSnapshot};
use serde_json::json;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// After a replace: deletes the replaced version's vectors, best effort,
    /// in the budget left (each batch: read the intents, delete, record;
    /// then one statement records the usage). A first version replaced
    /// nothing: the lookup is skipped.
    pub(super) async fn cleanup_replaced(
        &self,
        job: &ConsumeRow,
        at_commit: &UsageSnapshot,
        budget: &Budget,
        usage: &Usage,
    ) {
        let batches = if job.live_version.is_some() {
            budget.left(usage, self.clock.now_ms(), 1) / 3
        } else {
            0
        };
        let attempted = self.cleanup_doc(&job.doc_id, batches as usize).await;
        self.record_after_commit(job, at_commit, budget, usage, attempted > 0)
            .await;
    }

    /// Records what the invocation used since the statement that ended its
    /// job (`at_commit`): the calls made since, and the D1 rows that
    /// statement's batch and those calls were billed, which are known only
    /// once they ran. One more D1 call, made when it fits in the budget
    /// and there is something to record (`made_calls`: calls were made).
    pub(super) async fn record_after_commit(
        &self,
        job: &ConsumeRow,
        at_commit: &UsageSnapshot,
        budget: &Budget,
        usage: &Usage,
        made_calls: bool,
    ) {
        let since = usage.snapshot(1, 0).minus(at_commit);
        let billed = since.d1_rows_read + since.d1_rows_written > 0;
        if (made_calls || billed) && budget.allows(usage, self.clock.now_ms(), 1, 0) {
            let _ = self.store.add_usage(&job.job_id, &since).await;
        }
    }

    /// Deletes the vectors of this document's due cleanup intents that
    /// nothing refers to any more, in at most `batches` bounded batches.
    /// Returns the batches attempted. (Intents whose vector is still
    /// referenced are left to cron's drain, which retires them in bulk;
    /// the replace makes none.)
    pub(in crate::pipeline) async fn cleanup_doc(&self, doc_id: &str, batches: usize) -> usize {
        let mut budget = self.cfg.cron_cleanup_intents_max;
        let mut attempted = 0;
        while budget > 0 && attempted < batches {
            let limit = self.cfg.delete_batch_size.min(budget);
            attempted += 1;
            let ids = match self.claim_intents(Some(doc_id), limit).await {
                Ok(ids) if !ids.is_empty() => ids,
                _ => return attempted,
            };
            budget = budget.saturating_sub(ids.len());
            if !self.delete_vectors(&ids).await || ids.len() < limit {
                // A short claim took every intent there was to take.
                return attempted;
            }
        }
        attempted
    }

    /// Claims up to `limit` due intents (of `doc_id`, or of any document)
    /// whose vectors nothing refers to, for one lease (`JOB_LEASE_SECONDS`:
    /// longer than this invocation can live).
    pub(in crate::pipeline) async fn claim_intents(
        &self,
        doc_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, crate::ports::PortError> {
        let now = self.clock.now_ms();
        let until = now + i64::from(self.cfg.job_lease_seconds) * 1000;
        self.store
            .claim_intents(doc_id, now, until, limit, self.bugs)
            .await
    }

    /// Deletes `ids` from the index, then removes their intents; on a
    /// failure, backs the intents off. Returns whether it succeeded.
    pub(in crate::pipeline) async fn delete_vectors(&self, ids: &[String]) -> bool {
        let now = self.clock.now_ms();
        if self.bugs.has(Bug::IntentRemovedBeforeDelete)
            && self.store.intents_done(ids).await.is_err()
        {
            return false;
        }
        match self.index.delete_by_ids(ids).await {
            Ok(()) => match self.store.intents_done(ids).await {
                Ok(()) => true,
                Err(e) => {
                    log_event(
                        "cleanup_ledger_failed",
                        json!({ "bucket": e.bucket.as_str(), "code": e.code }),
                    );
                    false
                }
            },
            Err(e) => {
                log_event(
                    "cleanup_delete_failed",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": ids.len() }),
                );
                let not_before = now + i64::from(self.cfg.retry_base_delay_seconds) * 1000;
                let _ = self.store.intents_back_off(ids, not_before).await;
                false
            }
        }
    }
}
