//! Steps 4a and 4b: when the next step does not fit in the budget, the
//! checkpoint (D1) and the continuation message (queue).

use super::ConsumeOutcome;
use crate::pipeline::budget::Usage;
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use serde_json::json;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Hands the job to a later invocation: records the checkpoint and this
    /// invocation's usage, then sends the continuation message. If the send
    /// fails (or the invocation dies before it), the job is `queued` with no
    /// message, and cron re-enqueues it after `JOB_STALL_SECONDS`.
    pub(super) async fn checkpoint(
        &self,
        msg: &JobMessage,
        chunks_done: u32,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        let now = self.clock.now_ms();
        self.store
            .checkpoint(&msg.job_id, now, chunks_done, &usage.snapshot(1, 1))
            .await?;
        log_event(
            "job_checkpoint",
            json!({ "job_id": msg.job_id, "chunks_done": chunks_done }),
        );
        if let Err(e) = self.queue.send_batch(std::slice::from_ref(msg)).await {
            log_event(
                "continuation_send_failed",
                json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code }),
            );
        }
        Ok(ConsumeOutcome::Ack {
            reason: "checkpointed",
        })
    }
}
