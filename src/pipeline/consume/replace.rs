//! Step 5, the replace: one atomic D1 batch (intents for the old live
//! version's vectors, the compare-and-set of `live_version`, intents for our
//! own vectors if we lost, the job final). A build job only ends its job.

use crate::pipeline::budget::Usage;
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{ConsumeRow, UsageSnapshot};
use serde_json::json;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// The replace of an index or delete job, recording `at_commit` as the
    /// invocation's usage.
    pub(super) async fn replace(
        &self,
        job: &ConsumeRow,
        at_commit: &UsageSnapshot,
        usage: &Usage,
    ) -> Result<(), PortError> {
        let live = self
            .store
            .commit(
                &job.job_id,
                &job.doc_id,
                job.version,
                self.clock.now_ms(),
                at_commit,
                self.bugs,
            )
            .await?;
        log_event(
            "job_committed",
            json!({ "job_id": job.job_id, "live": live, "embedded": usage.embedded.get(), "reused": usage.reused.get() }),
        );
        Ok(())
    }

    /// A build job's end: the version is live already, so only the job ends.
    pub(super) async fn build_finish(
        &self,
        job: &ConsumeRow,
        at_commit: &UsageSnapshot,
    ) -> Result<(), PortError> {
        self.store
            .build_finish(
                &job.job_id,
                &job.doc_id,
                job.version,
                self.clock.now_ms(),
                at_commit,
            )
            .await
    }
}
