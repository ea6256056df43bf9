//! What the API shows of documents and jobs.

use super::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::DocumentViewRow;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentState {
    /// The latest version waits for its job.
    Queued,
    /// The latest version's job is running.
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
            match (r.job_state.as_deref(), r.job_step.as_deref()) {
                (Some("running"), _) => DocumentState::Indexing,
                (Some("up_for_retry"), Some("upserted")) => DocumentState::PartiallyIndexed,
                (Some("failed" | "dead"), _) => DocumentState::Failed,
                _ => DocumentState::Queued,
            }
        };
        DocumentView {
            doc_id: r.doc_id,
            latest_version: r.latest_version,
            live_version: r.live_version,
            state,
            chunk_count: if deleted { 0 } else { r.live_chunk_count.unwrap_or(0) },
            deleted,
            job_id: r.job_id,
            job_state: r.job_state,
            job_step: r.job_step,
            last_failure_bucket: r.last_failure_bucket,
            index_config: r.live_index_config.as_deref().and_then(|c| serde_json::from_str(c).ok()),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn document(&self, doc_id: &str) -> Result<Option<DocumentView>, PortError> {
        Ok(self.store.document_views(&[doc_id]).await?.into_iter().next().map(DocumentView::from_row))
    }

    pub async fn documents(&self, doc_ids: &[&str]) -> Result<Vec<DocumentView>, PortError> {
        Ok(self.store.document_views(doc_ids).await?.into_iter().map(DocumentView::from_row).collect())
    }
}
