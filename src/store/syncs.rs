//! Source sync sessions: a session's row, what it saw, which source each
//! document belongs to, and a commit's plan of deletes.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{int, json_pages, sql, Store};
use crate::core::state::{SyncDeleteState, SyncState};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct SyncRow {
    /// The order of sessions (later: larger); a listing's cursor.
    pub seq: i64,
    pub sync_id: String,
    pub tenant_id: String,
    pub source: String,
    pub state: SyncState,
    pub created_at: i64,
    pub expires_at: i64,
    pub committed_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// Set when the commit begins (`seen_now` counts until then).
    pub seen: u64,
    pub to_delete: u64,
    pub deleted: u64,
    pub kept: u64,
    pub seen_now: u64,
    pub pending: u64,
}

/// A source's documents and how many of them a session has not seen.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct SourceCounts {
    pub documents: u64,
    pub to_delete: u64,
}

/// A planned delete: the document's key, the version the plan saw, and
/// whether to keep it after all.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct SyncDeleteRow {
    pub doc_id: String,
    pub version: u32,
    pub keep: i64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CommittingRow {
    pub sync_id: String,
    pub tenant_id: String,
}

/// What a write into a source adds to intake's batch: the documents'
/// membership of the source and, in a session, the guard that it is open
/// and the marks that it saw them.
pub struct SyncWriteRows<'a> {
    pub tenant_id: &'a str,
    pub source: &'a str,
    pub sync_id: Option<&'a str>,
    /// Keys of the documents written (or found unchanged).
    pub doc_ids: &'a [&'a str],
    pub now: i64,
}

impl SyncWriteRows<'_> {
    /// The statements, guard first.
    pub fn stmts(&self, json_bytes_max: usize) -> Vec<Stmt> {
        let mut stmts = Vec::new();
        if let Some(sync_id) = self.sync_id {
            stmts.push(Stmt::new(
                sql::SYNC_WRITE_GUARD,
                vec![
                    sync_id.into(),
                    self.tenant_id.into(),
                    self.source.into(),
                    int(self.now),
                ],
            ));
        }
        for page in json_pages(self.doc_ids, json_bytes_max) {
            if let Some(sync_id) = self.sync_id {
                stmts.push(Stmt::new(
                    sql::SYNC_MARK_SEEN,
                    vec![sync_id.into(), page.clone().into()],
                ));
            }
            let plain = SqlValue::Int(i64::from(self.sync_id.is_none()));
            stmts.push(Stmt::new(
                sql::SOURCE_SET_DOCUMENTS,
                vec![
                    self.tenant_id.into(),
                    self.source.into(),
                    page.into(),
                    plain,
                ],
            ));
        }
        stmts
    }
}

/// The guard of a batch of session `sync_id`'s tombstones of `keys`
/// (`SYNC_RETIRE_GUARD`, in pages): it aborts the batch if a write outside
/// any session touched one of them since the session opened.
pub fn retire_guard_stmts(sync_id: &str, keys: &[&str], json_bytes_max: usize) -> Vec<Stmt> {
    json_pages(keys, json_bytes_max)
        .into_iter()
        .map(|page| Stmt::new(sql::SYNC_RETIRE_GUARD, vec![sync_id.into(), page.into()]))
        .collect()
}

/// The statement that settles session `sync_id`'s planned deletes of `keys`
/// as `state` (in pages).
pub fn settle_deletes_stmts(
    sync_id: &str,
    state: SyncDeleteState,
    keys: &[&str],
    json_bytes_max: usize,
) -> Vec<Stmt> {
    json_pages(keys, json_bytes_max)
        .into_iter()
        .map(|page| {
            Stmt::new(
                sql::SYNC_DELETES_SETTLE,
                vec![sync_id.into(), state.as_str().into(), page.into()],
            )
        })
        .collect()
}

impl<D: Database> Store<D> {
    pub async fn insert_sync(
        &self,
        sync_id: &str,
        tenant_id: &str,
        source: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool, PortError> {
        self.db
            .execute(Stmt::new(
                sql::SYNC_INSERT,
                vec![
                    sync_id.into(),
                    tenant_id.into(),
                    source.into(),
                    int(now),
                    int(expires_at),
                ],
            ))
            .await
            .map(|n| n == 1)
    }

    /// Tenant `tenant_id`'s session `sync_id`, if it has one.
    pub async fn sync(&self, sync_id: &str, tenant_id: &str) -> Result<Option<SyncRow>, PortError> {
        let rows: Vec<SyncRow> = self
            .db
            .query(Stmt::new(
                sql::SYNC_GET,
                vec![sync_id.into(), tenant_id.into()],
            ))
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Up to `limit` of tenant `tenant_id`'s sessions before `seq`
    /// `before`, newest first; with `source`, only that source's.
    pub async fn syncs_page(
        &self,
        tenant_id: &str,
        source: Option<&str>,
        before: i64,
        limit: usize,
    ) -> Result<Vec<SyncRow>, PortError> {
        let limit = int(limit as i64);
        let stmt = match source {
            None => Stmt::new(sql::SYNCS_PAGE, vec![tenant_id.into(), int(before), limit]),
            Some(source) => Stmt::new(
                sql::SOURCE_SYNCS_PAGE,
                vec![tenant_id.into(), source.into(), int(before), limit],
            ),
        };
        self.db.query(stmt).await
    }

    /// A write into a source that wrote no new version (every document
    /// unchanged): its guard, seen marks and membership alone.
    pub async fn record_sync_write(&self, rows: &SyncWriteRows<'_>) -> Result<(), PortError> {
        let stmts = rows.stmts(self.json_param_bytes_max);
        if stmts.is_empty() {
            return Ok(());
        }
        self.db.batch(stmts).await.map(|_| ())
    }

    /// Open sessions past their time expire. Returns how many.
    pub async fn expire_syncs(&self, now: i64) -> Result<u64, PortError> {
        self.db
            .execute(Stmt::new(sql::SYNC_EXPIRE_DUE, vec![int(now)]))
            .await
    }

    pub async fn source_counts(
        &self,
        sync_id: &str,
        tenant_id: &str,
        source: &str,
    ) -> Result<SourceCounts, PortError> {
        let rows: Vec<SourceCounts> = self
            .db
            .query(Stmt::new(
                sql::SYNC_SOURCE_COUNTS,
                vec![sync_id.into(), tenant_id.into(), source.into()],
            ))
            .await?;
        Ok(rows.into_iter().next().unwrap_or(SourceCounts {
            documents: 0,
            to_delete: 0,
        }))
    }

    /// Begins session `s`'s commit in one batch, if it is open at `now`:
    /// the mass-delete guard (unless `allow_mass_delete`), the plan of
    /// deletes, the earlier open sessions superseded, the state. A guard
    /// that refuses aborts it all (a constraint error).
    pub async fn begin_sync_commit(
        &self,
        s: &SyncRow,
        share_max_percent: u32,
        allow_mass_delete: bool,
        now: i64,
    ) -> Result<(), PortError> {
        let id = || SqlValue::from(s.sync_id.as_str());
        let stmts = vec![
            Stmt::new(
                sql::SYNC_DELETE_GUARD,
                vec![
                    id(),
                    s.tenant_id.as_str().into(),
                    s.source.as_str().into(),
                    int(i64::from(share_max_percent)),
                    int(i64::from(allow_mass_delete)),
                ],
            ),
            Stmt::new(
                sql::SYNC_PLAN_DELETES,
                vec![
                    id(),
                    s.tenant_id.as_str().into(),
                    s.source.as_str().into(),
                    int(now),
                ],
            ),
            Stmt::new(sql::SYNC_SUPERSEDE_EARLIER, vec![id(), int(now)]),
            Stmt::new(sql::SYNC_BEGIN_COMMIT, vec![id(), int(now)]),
        ];
        self.db.batch(stmts).await.map(|_| ())
    }

    pub async fn sync_deletes_page(
        &self,
        sync_id: &str,
        limit: u32,
    ) -> Result<Vec<SyncDeleteRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::SYNC_DELETES_PAGE,
                vec![sync_id.into(), limit.into()],
            ))
            .await
    }

    /// After a page: `kept` settled, then the session's figures (and its
    /// end, once nothing is pending), in one batch.
    pub async fn sync_page_done(
        &self,
        sync_id: &str,
        kept: &[&str],
        now: i64,
    ) -> Result<(), PortError> {
        let mut stmts = settle_deletes_stmts(
            sync_id,
            SyncDeleteState::Kept,
            kept,
            self.json_param_bytes_max,
        );
        stmts.push(Stmt::new(
            sql::SYNC_PAGE_DONE,
            vec![sync_id.into(), int(now)],
        ));
        self.db.batch(stmts).await.map(|_| ())
    }

    pub async fn committing_syncs(&self, limit: u32) -> Result<Vec<CommittingRow>, PortError> {
        self.db
            .query(Stmt::new(sql::SYNCS_COMMITTING, vec![limit.into()]))
            .await
    }
}
