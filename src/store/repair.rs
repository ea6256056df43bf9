//! What cron's repair reads and marks: its cursors, the live chunks to
//! verify against the index, documents that need a repair, and the
//! reports of its runs.
//!
//! May import: `ports`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

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

/// One recorded cron run (`repair_runs`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct RepairRunRow {
    pub run_id: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub report: String,
    pub budget_hit: i64,
}

impl<D: Database> Store<D> {
    /// Stores the report (JSON) of one scheduled run.
    pub async fn record_repair_run(
        &self,
        started_at: i64,
        finished_at: i64,
        report: &str,
        budget_hit: bool,
    ) -> Result<(), PortError> {
        let params = vec![
            SqlValue::Int(started_at),
            SqlValue::Int(finished_at),
            report.into(),
            SqlValue::Int(i64::from(budget_hit)),
        ];
        self.db
            .execute(Stmt::new(sql::REPAIR_RUN_INSERT, params))
            .await
            .map(|_| ())
    }

    /// The newest `limit` run reports.
    /// The latest runs (that touched `tenant_id`'s documents, if given).
    pub async fn repair_runs(
        &self,
        limit: usize,
        tenant_id: Option<&str>,
    ) -> Result<Vec<RepairRunRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::REPAIR_RUNS_LIST,
                vec![SqlValue::Int(limit as i64), tenant_id.into()],
            ))
            .await
    }

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
