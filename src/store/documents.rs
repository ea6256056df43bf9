//! Documents and their versions as intake and the API read them: latest
//! versions, document views, a version's text.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{json_array, sql, Store};
use crate::core::failure::FailureBucket;
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct LatestVersionRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub content_hash: String,
    pub is_delete: i64,
    /// The latest version's job ended `failed` or `dead` (and it is not live).
    pub latest_failed: i64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DocumentViewRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    pub repair_needed: i64,
    pub live_is_delete: Option<i64>,
    pub live_chunk_count: Option<u32>,
    pub live_index_config: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub job_id: Option<String>,
    pub job_state: Option<String>,
    pub job_step: Option<String>,
    pub job_chunks_done: Option<u32>,
    pub last_failure_bucket: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct TextRow {
    text: String,
}

impl<D: Database> Store<D> {
    pub async fn latest_versions(
        &self,
        doc_ids: &[&str],
    ) -> Result<Vec<LatestVersionRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::LATEST_VERSIONS,
                vec![json_array(doc_ids).into()],
            ))
            .await
    }

    pub async fn document_views(
        &self,
        doc_ids: &[&str],
    ) -> Result<Vec<DocumentViewRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::DOCUMENT_VIEWS,
                vec![json_array(doc_ids).into()],
            ))
            .await
    }

    pub async fn load_text(
        &self,
        doc_id: &str,
        version: u32,
        part_count: u32,
    ) -> Result<String, PortError> {
        let rows: Vec<TextRow> = self
            .db
            .query(Stmt::new(
                sql::CONSUME_LOAD_PARTS,
                vec![doc_id.into(), version.into()],
            ))
            .await?;
        if rows.len() != part_count as usize {
            // The version row promises parts the ledger does not hold.
            return Err(PortError::new(FailureBucket::Internal, "parts_missing"));
        }
        Ok(rows.into_iter().map(|r| r.text).collect())
    }
}
