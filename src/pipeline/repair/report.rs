//! What one cron run did ([`RepairReport`]), and the run's last step: the
//! report logged, and recorded when the run did anything.

use crate::core::failure::FailureBucket;
use crate::core::ids::split_key;
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

fn is_control(shard: &u16) -> bool {
    *shard == 0
}

/// What one scheduled run did. Logged as one line; counts only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// The shard repaired (absent from the log line: shard 0).
    #[serde(skip_serializing_if = "is_control")]
    pub shard: u16,
    pub abandoned_chunks_swept: u64,
    pub intents_deleted: u64,
    /// Intents retired without an index call: their vector is still
    /// referenced by a row that may be served (an unchanged chunk).
    pub intents_retired: u64,
    pub intents_failed: u64,
    pub jobs_requeued: u64,
    pub jobs_dead: u64,
    /// Live chunks checked against the index (getByIds).
    pub chunks_verified: u64,
    /// Documents whose live vectors were missing: marked `repair_needed`
    /// and re-run as a new version.
    pub documents_repaired: u64,
    /// Active redrives advanced.
    pub redrives_advanced: u64,
    /// Chunk rows of retiring or abandoned generations turned into intents.
    pub generation_rows_retired: u64,
    /// Cleanup passes (steps 1, 1b and 2 again) made on the budget the
    /// other steps left, while a pass filled its page (step 8).
    pub cleanup_passes: u64,
    /// Pages the running backfill enqueued.
    pub backfill_pages: u64,
    /// Open sync sessions that expired.
    pub syncs_expired: u64,
    /// Pages of sync commits settled.
    pub sync_pages: u64,
    /// Superseded versions whose text was pruned (step 9; retention).
    pub texts_pruned: u64,
    /// Superseded versions whose rows were pruned, and their jobs.
    pub versions_pruned: u64,
    pub jobs_pruned: u64,
    /// Finished sync sessions, ended backfills and ended redrives pruned,
    /// and their rows (marks, planned deletes, items, build jobs, audit).
    pub syncs_pruned: u64,
    pub backfills_pruned: u64,
    pub redrives_pruned: u64,
    pub history_rows_pruned: u64,
    /// Repair runs pruned (this run's own report is written after).
    pub repair_runs_pruned: u64,
    /// Revoked tokens pruned.
    pub tokens_pruned: u64,
    /// Chunk rows written before migration 0021 that entered the keyword
    /// index (step 9, after the pruning; none once the upgrade is done).
    pub keyword_rows_indexed: u64,
    /// Whether a step stopped at its per-run cap, or the run at its
    /// subrequest or wall-time budget (work is left for the next run).
    pub budget_hit: bool,
    /// Subrequests (D1, index and queue calls) the run made, counted by its
    /// metered ports against `CRON_SUBREQUESTS_MAX` (the statement recording
    /// this report excepted).
    pub subrequests_used: u64,
    /// Wall time of the run, in milliseconds (by the injected clock).
    pub elapsed_ms: i64,
    /// Buckets of the steps that failed in this run (each at most once).
    pub failures: Vec<FailureBucket>,
    /// What the run did to each tenant's documents and jobs (the counts
    /// above that belong to a document), by tenant ID; tenants it did not
    /// touch are absent.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tenants: BTreeMap<String, TenantRepair>,
}

/// One tenant's part of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantRepair {
    pub jobs_requeued: u64,
    pub jobs_dead: u64,
    pub documents_repaired: u64,
}

impl RepairReport {
    /// Whether the run changed or found anything (verifying chunks that
    /// were all present does not count).
    pub fn did_work(&self) -> bool {
        self.abandoned_chunks_swept
            + self.intents_deleted
            + self.intents_retired
            + self.intents_failed
            + self.jobs_requeued
            + self.jobs_dead
            + self.documents_repaired
            + self.redrives_advanced
            + self.generation_rows_retired
            + self.backfill_pages
            + self.syncs_expired
            + self.sync_pages
            + self.keyword_rows_indexed
            + self.pruned()
            > 0
            || !self.failures.is_empty()
    }

    /// Rows of history the run pruned, of every kind (step 9).
    pub fn pruned(&self) -> u64 {
        self.texts_pruned
            + self.versions_pruned
            + self.jobs_pruned
            + self.syncs_pruned
            + self.backfills_pruned
            + self.redrives_pruned
            + self.history_rows_pruned
            + self.repair_runs_pruned
            + self.tokens_pruned
    }

    /// The part of the run of the tenant of the document `key` (stored).
    pub(super) fn tenant_of(&mut self, key: &str) -> &mut TenantRepair {
        self.tenants
            .entry(split_key(key).0.to_string())
            .or_default()
    }

    /// Records that a step failed with `bucket` (each bucket once).
    pub(super) fn failed(&mut self, bucket: FailureBucket) {
        if !self.failures.contains(&bucket) {
            self.failures.push(bucket);
        }
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// The run's report: logged as one line, and recorded in `repair_runs`
    /// if the run did anything (cron runs every few minutes).
    pub(super) async fn report_run(&self, started_at: i64, report: &RepairReport) {
        log_event("repair_run", json!(report));
        if report.did_work() {
            if let Err(e) = self.record_repair_run(started_at, report).await {
                log_event(
                    "repair_run_not_recorded",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code }),
                );
            }
        }
    }
}
