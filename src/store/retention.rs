//! Retention: the pages of history cron prunes (docs/ARCHITECTURE.md,
//! "Retention"). Each prune finds its page through an index and deletes
//! it in one atomic batch whose statements check again, row by row, that
//! the row may go: a page read before a concurrent change prunes nothing
//! it should not.
//!
//! May import: `ports`, `store::sql`, the seeded `bugs`.

use super::{int, json_array, sql, Store};
use crate::bugs::{Bug, Bugs};
use crate::ports::{Database, PortError, Stmt};
use serde::Deserialize;

/// One version a prune's page names.
#[derive(Debug, Clone, Deserialize)]
pub struct PrunedVersion {
    pub doc_id: String,
    pub version: u32,
}

#[derive(Deserialize)]
struct IdRow {
    id: String,
}

/// The kinds of history pruned as a parent row and its children
/// (sessions, backfills, redrives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// Finished sync sessions: their marks, planned deletes, the session.
    Syncs,
    /// Ended backfills: their build jobs, items, the backfill.
    Backfills,
    /// Ended redrives: their audit trail, items, the redrive.
    Redrives,
}

impl History {
    /// The page, the children's statements, the parents' statement.
    fn statements(self) -> (&'static str, [&'static str; 2], &'static str) {
        match self {
            History::Syncs => (
                sql::PRUNE_SYNCS_PAGE,
                [sql::PRUNE_SYNC_SEEN, sql::PRUNE_SYNC_DELETES],
                sql::PRUNE_SYNC_ROWS,
            ),
            History::Backfills => (
                sql::PRUNE_BACKFILLS_PAGE,
                [sql::PRUNE_BACKFILL_JOBS, sql::PRUNE_BACKFILL_ITEMS],
                sql::PRUNE_BACKFILL_ROWS,
            ),
            History::Redrives => (
                sql::PRUNE_REDRIVES_PAGE,
                [sql::PRUNE_REDRIVE_AUDIT, sql::PRUNE_REDRIVE_ITEMS],
                sql::PRUNE_REDRIVE_ROWS,
            ),
        }
    }
}

/// `[[doc_id, version], …]`, the versions parameter of a prune.
fn versions_param(page: &[PrunedVersion]) -> String {
    let pairs: Vec<(&str, u32)> = page
        .iter()
        .map(|v| (v.doc_id.as_str(), v.version))
        .collect();
    json_array(&pairs)
}

impl<D: Database> Store<D> {
    /// Superseded versions, superseded at or before `before`, whose text
    /// may be pruned: at most `limit`, oldest first.
    pub async fn prunable_texts(
        &self,
        before: i64,
        limit: usize,
    ) -> Result<Vec<PrunedVersion>, PortError> {
        self.page(sql::PRUNE_TEXT_PAGE, before, limit).await
    }

    /// Prunes the text of the versions of `page` that may still go, and
    /// gives their tenants the bytes back, atomically. Returns how many
    /// versions' texts went.
    pub async fn prune_texts(&self, page: &[PrunedVersion], bugs: Bugs) -> Result<u64, PortError> {
        if page.is_empty() {
            return Ok(0);
        }
        let p = || vec![versions_param(page).into()];
        // The versions first: a part goes once no version of its range
        // holds text, these included.
        let mut stmts = vec![
            Stmt::new(sql::PRUNE_TEXT_MARK, p()),
            Stmt::new(sql::PRUNE_TEXT_PARTS, p()),
        ];
        if !bugs.has(Bug::UsageDrift) {
            stmts.insert(1, Stmt::new(sql::PRUNE_TEXT_BYTES, p()));
        }
        let changes = self.db.batch(stmts).await?;
        Ok(changes.first().copied().unwrap_or(0))
    }

    /// Superseded versions, superseded at or before `cutoff`, whose rows
    /// may be pruned with their jobs: at most `limit`, oldest first.
    pub async fn prunable_versions(
        &self,
        cutoff: i64,
        limit: usize,
    ) -> Result<Vec<PrunedVersion>, PortError> {
        self.page(sql::PRUNE_VERSIONS_PAGE, cutoff, limit).await
    }

    /// The rows `stmt` reads with a cutoff (`?1`) and a limit (`?2`).
    async fn page<T: serde::de::DeserializeOwned>(
        &self,
        stmt: &'static str,
        cutoff: i64,
        limit: usize,
    ) -> Result<Vec<T>, PortError> {
        self.db
            .query(Stmt::new(stmt, vec![int(cutoff), int(limit as i64)]))
            .await
    }

    /// Runs the delete `stmt` with a cutoff (`?1`) and a limit (`?2`);
    /// returns the rows it deleted.
    async fn delete_page(
        &self,
        stmt: &'static str,
        cutoff: i64,
        limit: usize,
    ) -> Result<u64, PortError> {
        self.db
            .execute(Stmt::new(stmt, vec![int(cutoff), int(limit as i64)]))
            .await
    }

    /// Prunes the rows of the versions of `page` that may still go, with
    /// their jobs, atomically. Returns (versions, jobs) pruned.
    pub async fn prune_versions(
        &self,
        page: &[PrunedVersion],
        cutoff: i64,
    ) -> Result<(u64, u64), PortError> {
        if page.is_empty() {
            return Ok((0, 0));
        }
        let p = || vec![versions_param(page).into(), int(cutoff)];
        let changes = self
            .db
            .batch(vec![
                Stmt::new(sql::PRUNE_VERSION_JOBS, p()),
                Stmt::new(sql::PRUNE_VERSION_ROWS, p()),
            ])
            .await?;
        let got = |i: usize| changes.get(i).copied().unwrap_or(0);
        Ok((got(1), got(0)))
    }

    /// Deletes at most `limit` repair runs that started before `cutoff`.
    pub async fn prune_repair_runs(&self, cutoff: i64, limit: usize) -> Result<u64, PortError> {
        self.delete_page(sql::PRUNE_REPAIR_RUNS, cutoff, limit)
            .await
    }

    /// Deletes at most `limit` tokens revoked before `cutoff`.
    pub async fn prune_revoked_tokens(&self, cutoff: i64, limit: usize) -> Result<u64, PortError> {
        self.delete_page(sql::PRUNE_REVOKED_TOKENS, cutoff, limit)
            .await
    }

    /// One page of `kind`'s history that ended before `cutoff`: at most
    /// `limit` parents, each child statement deleting at most `limit` rows,
    /// then the parents left with no child. Returns (parents, children)
    /// deleted; parents with children left go on the next run.
    pub async fn prune_history(
        &self,
        kind: History,
        cutoff: i64,
        limit: usize,
    ) -> Result<(u64, u64), PortError> {
        let (page, children, parents) = kind.statements();
        let ids: Vec<IdRow> = self.page(page, cutoff, limit).await?;
        if ids.is_empty() {
            return Ok((0, 0));
        }
        let ids: Vec<&str> = ids.iter().map(|r| r.id.as_str()).collect();
        let p = || vec![json_array(&ids).into(), int(limit as i64)];
        let changes = self
            .db
            .batch(vec![
                Stmt::new(children[0], p()),
                Stmt::new(children[1], p()),
                Stmt::new(parents, vec![json_array(&ids).into()]),
            ])
            .await?;
        let got = |i: usize| changes.get(i).copied().unwrap_or(0);
        Ok((got(2), got(0) + got(1)))
    }
}
