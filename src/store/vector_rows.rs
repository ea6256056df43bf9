//! The offline vector index's table (`VECTORS_DB`, schema in
//! `migrations-local-index/`): its four statements, over any database. The
//! local index adapter (`adapters::local_index`) enforces Vectorize's limits
//! and ranks; this file only reads and writes rows.
//!
//! May import: `ports`, `store::sql`.

use super::{json_array, json_pages, sql};
use crate::ports::{Database, PortError, Stmt};
use serde::{Deserialize, Serialize};

/// A vector as the table holds it: values and metadata as JSON text.
#[derive(Serialize)]
pub struct VectorRowIn<'a> {
    pub id: &'a str,
    pub namespace: &'a str,
    pub doc_id: &'a str,
    pub vec: String,
    pub metadata: String,
}

/// A stored vector, as read back.
#[derive(Deserialize)]
pub struct VectorRowOut {
    pub id: String,
    pub namespace: String,
    pub vec: String,
    pub metadata: String,
}

/// Inserts or replaces `rows`, in `json_each` pages of at most `bytes_max`
/// bytes, in one batch.
pub async fn upsert<D: Database>(
    db: &D,
    rows: &[VectorRowIn<'_>],
    bytes_max: usize,
) -> Result<(), PortError> {
    let stmts: Vec<Stmt> = json_pages(rows, bytes_max)
        .into_iter()
        .map(|page| Stmt::new(sql::LOCAL_INDEX_UPSERT, vec![page.into()]))
        .collect();
    if stmts.is_empty() {
        return Ok(());
    }
    db.batch(stmts).await.map(|_| ())
}

pub async fn delete<D: Database>(db: &D, ids: &[String]) -> Result<(), PortError> {
    db.execute(Stmt::new(
        sql::LOCAL_INDEX_DELETE,
        vec![json_array(ids).into()],
    ))
    .await
    .map(|_| ())
}

/// Every row of `namespace`, or those of `doc_id` in it.
pub async fn scan<D: Database>(
    db: &D,
    namespace: &str,
    doc_id: Option<String>,
) -> Result<Vec<VectorRowOut>, PortError> {
    db.query(Stmt::new(
        sql::LOCAL_INDEX_SCAN,
        vec![namespace.into(), doc_id.into()],
    ))
    .await
}

pub async fn get<D: Database>(db: &D, ids: &[String]) -> Result<Vec<VectorRowOut>, PortError> {
    db.query(Stmt::new(
        sql::LOCAL_INDEX_GET,
        vec![json_array(ids).into()],
    ))
    .await
}
