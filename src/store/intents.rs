//! Cleanup intents: due intents, their completion and back-off, and the
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
    pub async fn intents_due_for_doc(
        &self,
        doc_id: &str,
        now: i64,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::INTENTS_DUE_FOR_DOC,
                vec![doc_id.into(), int(now), int(limit as i64)],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    pub async fn intents_due(&self, now: i64, limit: usize) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::INTENTS_DUE,
                vec![int(now), int(limit as i64)],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    /// After the index deleted `ids`: drop their non-live chunk rows and the intents.
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

    pub async fn sweep_abandoned(
        &self,
        now: i64,
        limit: usize,
        bugs: Bugs,
    ) -> Result<u64, PortError> {
        let sweep = if bugs.has(Bug::SweepIgnoresLease) {
            bugs::sql::SWEEP_IGNORING_LEASE
        } else {
            sql::SWEEP_ABANDONED
        };
        self.db
            .execute(Stmt::new(sweep, vec![int(now), int(limit as i64)]))
            .await
    }

    /// `DeleteBeforeReplace` only: the replaced version's intents, ahead of the replace.
    pub async fn bug_intents_for_replaced(
        &self,
        doc_id: &str,
        version: u32,
        now: i64,
    ) -> Result<(), PortError> {
        let stmt = Stmt::new(
            sql::COMMIT_INTENTS_FOR_REPLACED,
            vec![doc_id.into(), version.into(), int(now)],
        );
        self.db.execute(stmt).await.map(|_| ())
    }
}
