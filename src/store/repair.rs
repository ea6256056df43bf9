//! What cron's repair reads and marks: its cursors, the live chunks to
//! verify against the index, and documents that need a repair.
//!
//! May import: `ports`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::Deserialize;

#[derive(Deserialize)]
struct CursorRow {
    value: String,
}

/// A live chunk to check against the index (`VERIFY_LIVE_CHUNKS`).
#[derive(Debug, Clone, Deserialize)]
pub struct VerifyRow {
    pub vector_id: String,
    pub doc_id: String,
    pub version: u32,
}

impl<D: Database> Store<D> {
    /// The value of cron cursor `name` (empty: from the top).
    pub async fn cursor(&self, name: &str) -> Result<String, PortError> {
        let rows: Vec<CursorRow> = self
            .db
            .query(Stmt::new(sql::CURSOR_GET, vec![name.into()]))
            .await?;
        Ok(rows.into_iter().next().map(|c| c.value).unwrap_or_default())
    }

    pub async fn set_cursor(&self, name: &str, value: &str) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(sql::CURSOR_SET, vec![name.into(), value.into()]))
            .await
            .map(|_| ())
    }

    /// Up to `limit` live chunks after `after` (vector id order) of versions
    /// live since before `live_before`.
    pub async fn live_chunks_to_verify(
        &self,
        live_before: i64,
        after: &str,
        limit: usize,
    ) -> Result<Vec<VerifyRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::VERIFY_LIVE_CHUNKS,
                vec![
                    SqlValue::Int(live_before),
                    after.into(),
                    SqlValue::Int(limit as i64),
                ],
            ))
            .await
    }

    pub async fn mark_repair_needed(&self, doc_id: &str, version: u32) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::MARK_REPAIR_NEEDED,
                vec![doc_id.into(), version.into()],
            ))
            .await
            .map(|_| ())
    }
}
