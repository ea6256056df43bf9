//! What the API shows of documents and jobs.

use super::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{DocumentViewRow, JobViewRow};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentState {
    /// The latest version waits for its job.
    Queued,
    /// The latest version's job is running, or checkpointed between
    /// invocations (a large version spans several).
    Indexing,
    /// The latest version is live.
    Indexed,
    /// The latest version's job wrote some vectors, then failed transiently
    /// and waits for its retry; an older version (if any) is still served.
    PartiallyIndexed,
    /// The reconciler found the live version's vectors missing from the index.
    RepairNeeded,
    /// The latest version's job failed for good (`failed` or `dead`).
    Failed,
    /// The latest version is a tombstone and it is live: nothing is served.
    Deleted,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DocumentView {
    pub doc_id: String,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    pub state: DocumentState,
    pub chunk_count: u32,
    pub deleted: bool,
    pub job_id: Option<String>,
    pub job_state: Option<String>,
    pub job_step: Option<String>,
    pub last_failure_bucket: Option<String>,
    /// The chunker and embedding configuration that produced the live
    /// version's vectors (model, pooling, dimensions, chunk sizes).
    pub index_config: Option<serde_json::Value>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl DocumentView {
    pub fn from_row(r: DocumentViewRow) -> DocumentView {
        let live_is_latest = r.live_version == Some(r.latest_version);
        let deleted = r.live_is_delete == Some(1);
        let state = if r.repair_needed != 0 {
            DocumentState::RepairNeeded
        } else if live_is_latest {
            if deleted {
                DocumentState::Deleted
            } else {
                DocumentState::Indexed
            }
        } else {
            let wrote =
                r.job_step.as_deref() == Some("staged") && r.job_chunks_done.unwrap_or(0) > 0;
            match (r.job_state.as_deref(), wrote) {
                (Some("running"), _) | (Some("queued"), true) => DocumentState::Indexing,
                (Some("up_for_retry"), true) => DocumentState::PartiallyIndexed,
                (Some("failed" | "dead"), _) => DocumentState::Failed,
                _ => DocumentState::Queued,
            }
        };
        DocumentView {
            doc_id: r.doc_id,
            latest_version: r.latest_version,
            live_version: r.live_version,
            state,
            chunk_count: if deleted {
                0
            } else {
                r.live_chunk_count.unwrap_or(0)
            },
            deleted,
            job_id: r.job_id,
            job_state: r.job_state,
            job_step: r.job_step,
            last_failure_bucket: r.last_failure_bucket,
            index_config: r
                .live_index_config
                .as_deref()
                .and_then(|c| serde_json::from_str(c).ok()),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn document(&self, doc_id: &str) -> Result<Option<DocumentView>, PortError> {
        Ok(self
            .store
            .document_views(&[doc_id])
            .await?
            .into_iter()
            .next()
            .map(DocumentView::from_row))
    }

    pub async fn documents(&self, doc_ids: &[&str]) -> Result<Vec<DocumentView>, PortError> {
        Ok(self
            .store
            .document_views(doc_ids)
            .await?
            .into_iter()
            .map(DocumentView::from_row)
            .collect())
    }
}

/// The API view of one job: its state, its progress through the version's
/// chunks, and what it used (`GET /v1/jobs/{job_id}`).
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: String,
    /// The generation a backfill's build job writes (null: an index job of
    /// a new version, written in every generation in use).
    pub build_generation: Option<u32>,
    pub state: String,
    pub step: String,
    /// Attempts since the job last made progress.
    pub attempts: u32,
    pub last_failure_bucket: Option<String>,
    pub lease_until: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub progress: JobProgress,
    pub usage: JobUsage,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobProgress {
    /// Chunk rows to write, over every generation the job writes (known
    /// once staged).
    pub chunks_total: Option<u32>,
    /// Chunks whose vectors are written (the checkpoint).
    pub chunks_done: u32,
    /// Chunk texts sent to the embedder.
    pub chunks_embedded: u64,
    /// Chunks whose vectors were copied from the live version.
    pub chunks_reused: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobUsage {
    /// Queue invocations that claimed the job.
    pub invocations: u32,
    /// Subrequests the recorded invocations made, by kind.
    pub subrequests: Subrequests,
    /// The most any one invocation made, and the budget it ran under.
    pub subrequests_peak_per_invocation: u64,
    pub subrequests_budget_per_invocation: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subrequests {
    pub d1: u64,
    pub embed: u64,
    pub index: u64,
    pub queue: u64,
    pub total: u64,
}

impl JobView {
    pub fn from_row(r: JobViewRow, budget: u64) -> JobView {
        let total =
            r.subrequests_d1 + r.subrequests_embed + r.subrequests_index + r.subrequests_queue;
        JobView {
            progress: JobProgress {
                chunks_total: if r.kind == "index" {
                    r.chunk_count
                } else {
                    Some(0)
                },
                chunks_done: r.chunks_done,
                chunks_embedded: r.chunks_embedded,
                chunks_reused: r.chunks_reused,
            },
            usage: JobUsage {
                invocations: r.invocations,
                subrequests: Subrequests {
                    d1: r.subrequests_d1,
                    embed: r.subrequests_embed,
                    index: r.subrequests_index,
                    queue: r.subrequests_queue,
                    total,
                },
                subrequests_peak_per_invocation: r.subrequests_peak,
                subrequests_budget_per_invocation: budget,
            },
            job_id: r.job_id,
            doc_id: r.doc_id,
            version: r.version,
            kind: r.kind,
            build_generation: r.build_generation,
            state: r.state,
            step: r.step,
            attempts: r.attempts,
            last_failure_bucket: r.last_failure_bucket,
            lease_until: r.lease_until,
            next_attempt_at: r.next_attempt_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}
