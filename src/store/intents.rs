//! Cleanup intents: retiring those whose vector is still referenced,
//! claiming the rest for a delete, their completion and back-off, and the
//! sweep of abandoned versions into intents.
//!
//! May import: `ports`, `core`, `bugs`, `store::sql`.

use super::{int, json_array, sql, Store};
use crate::bugs::{self, Bug, Bugs};
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
struct VectorIdRow {
    vector_id: String,
}

impl<D: Database> Store<D> {
    /// Of the first `limit` due intents (`now`), retires those whose
    /// vector a row that may be served refers to: their rows that nothing
    /// holds leave with them, no index call (`INTENTS_RETIRE`). Returns
    /// how many intents it retired.
    pub async fn retire_referenced_intents(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<u64, PortError> {
        let p = || vec![int(limit as i64), int(now)];
        let changes = self
            .db
            .batch(vec![
                Stmt::new(sql::INTENTS_RETIRE_ROWS, p()),
                Stmt::new(sql::INTENTS_RETIRE, p()),
            ])
            .await?;
        Ok(changes.get(1).copied().unwrap_or(0))
    }

    /// Claims up to `limit` due intents (of `doc_id`, or of any document)
    /// whose vectors nothing refers to any more, until `claim_until`, and
    /// returns their vector IDs in order (`INTENTS_CLAIM`).
    pub async fn claim_intents(
        &self,
        doc_id: Option<&str>,
        now: i64,
        claim_until: i64,
        limit: usize,
        bugs: Bugs,
    ) -> Result<Vec<String>, PortError> {
        let claim = if bugs.has(Bug::DeleteReferencedVector) {
            bugs::sql::INTENTS_CLAIM_IGNORING_REFERENCES
        } else if doc_id.is_some() {
            sql::INTENTS_CLAIM_DOC
        } else {
            sql::INTENTS_CLAIM
        };
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                claim,
                vec![doc_id.into(), int(now), int(limit as i64), int(claim_until)],
            ))
            .await?;
        let mut ids: Vec<String> = rows.into_iter().map(|r| r.vector_id).collect();
        ids.sort();
        Ok(ids)
    }

    /// After the index deleted `ids`: drop their chunk rows nothing holds, and the intents.
    pub async fn intents_done(&self, ids: &[String]) -> Result<(), PortError> {
        let ids = json_array(ids);
        self.db
            .batch(vec![
                Stmt::new(sql::INTENTS_DONE_DELETE_CHUNKS, vec![ids.clone().into()]),
                Stmt::new(sql::INTENTS_DONE_DELETE, vec![ids.into()]),
            ])
            .await
            .map(|_| ())
    }

    pub async fn intents_back_off(&self, ids: &[String], not_before: i64) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::INTENTS_BACK_OFF,
                vec![json_array(ids).into(), int(not_before)],
            ))
            .await
            .map(|_| ())
    }

    /// The sweep's next page: up to `page` closed rows after its cursor,
    /// in key order, and the cursor as it is.
    pub async fn sweep_page(&self, page: usize) -> Result<SweepPage, PortError> {
        let rows: Vec<SweepRow> = self
            .db
            .query(Stmt::new(sql::SWEEP_PAGE, vec![int(page as i64)]))
            .await?;
        let mut cursor = String::new();
        let mut keys = Vec::new();
        for r in rows {
            match (r.doc_id, r.to_version, r.chunk_id) {
                (Some(d), Some(t), Some(i)) => keys.push((d, t, i)),
                _ => cursor = r.cursor.unwrap_or_default(),
            }
        }
        keys.sort();
        keys.truncate(page);
        Ok(SweepPage { cursor, keys })
    }

    /// The page's rows that nothing may serve or write become intents, and
    /// the cursor moves to `next` (when it changes), in one batch. Returns
    /// the intents made.
    pub async fn sweep_abandoned(
        &self,
        now: i64,
        page: &SweepPage,
        next: &str,
    ) -> Result<u64, PortError> {
        let ids: Vec<i64> = page.keys.iter().map(|k| k.2).collect();
        let mut stmts = Vec::new();
        if !ids.is_empty() {
            stmts.push(Stmt::new(
                sql::SWEEP_ABANDONED,
                vec![int(now), json_array(&ids).into()],
            ));
        }
        if next != page.cursor {
            stmts.push(Stmt::new(
                sql::CURSOR_SET,
                vec![SWEEP_CURSOR.into(), next.into()],
            ));
        }
        if stmts.is_empty() {
            return Ok(0);
        }
        let made = !ids.is_empty();
        let changes = self.db.batch(stmts).await?;
        Ok(if made {
            changes.first().copied().unwrap_or(0)
        } else {
            0
        })
    }

    /// `DeleteBeforeReplace` only: the live version's vectors that
    /// `version` does not hold.
    pub async fn bug_replaced_vector_ids(
        &self,
        doc_id: &str,
        version: u32,
    ) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                bugs::sql::LIVE_VECTORS_NOT_KEPT,
                vec![doc_id.into(), version.into()],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }
}

/// The sweep's cursor's name in `repair_cursors` (`SWEEP_PAGE` reads it).
pub const SWEEP_CURSOR: &str = "sweep_abandoned";

/// A row of `SWEEP_PAGE`: a closed row's key, or (key NULL) the cursor.
#[derive(serde::Deserialize)]
struct SweepRow {
    doc_id: Option<String>,
    to_version: Option<i64>,
    chunk_id: Option<i64>,
    cursor: Option<String>,
}

/// The sweep's page: the cursor it started from (JSON, `""` when unset)
/// and the keys of the closed rows it examines, in key order.
#[derive(Debug)]
pub struct SweepPage {
    pub cursor: String,
    pub keys: Vec<(String, i64, i64)>,
}

impl SweepPage {
    /// Where the cursor goes after this page of at most `page` rows: to
    /// its last row, or back to the start after a shorter page (the next
    /// run begins a new round, which finds the rows a lease kept).
    pub fn next_cursor(&self, page: usize) -> String {
        match self.keys.last() {
            Some((d, t, i)) if self.keys.len() >= page => serde_json::json!([d, t, i]).to_string(),
            _ => SWEEP_START.to_string(),
        }
    }
}

/// The cursor at the start of a round.
pub const SWEEP_START: &str = r#"["",0,0]"#;
