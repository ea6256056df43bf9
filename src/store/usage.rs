//! Per-job usage counters (subrequests, embeddings made and reused, vectors kept), recorded in D1
//! with the job's own statements.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, PortError, SqlValue, Stmt};

/// What one invocation used (a copy of `pipeline::Usage`), to record in D1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageSnapshot {
    pub d1: u64,
    pub embed: u64,
    pub index: u64,
    pub queue: u64,
    pub embedded: u64,
    pub reused: u64,
    /// Chunks whose vector the index held already (unchanged: not written).
    pub kept: u64,
    /// The invocation's total subrequests at this point (not a difference).
    pub peak: u64,
    /// D1 rows read and written, as D1 reported them (`ports::Rows`).
    pub d1_rows_read: u64,
    pub d1_rows_written: u64,
}

impl UsageSnapshot {
    /// What was used since `earlier`; `peak` stays this snapshot's.
    pub fn minus(&self, earlier: &UsageSnapshot) -> UsageSnapshot {
        UsageSnapshot {
            d1: self.d1 - earlier.d1,
            embed: self.embed - earlier.embed,
            index: self.index - earlier.index,
            queue: self.queue - earlier.queue,
            embedded: self.embedded - earlier.embedded,
            reused: self.reused - earlier.reused,
            kept: self.kept - earlier.kept,
            d1_rows_read: self.d1_rows_read - earlier.d1_rows_read,
            d1_rows_written: self.d1_rows_written - earlier.d1_rows_written,
            peak: self.peak,
        }
    }
}

/// The parameters `?2`–`?11` of `job_usage!`: what `u` counts.
fn usage_params(u: &UsageSnapshot) -> [SqlValue; 10] {
    let n = |v: u64| SqlValue::Int(v as i64);
    [
        n(u.d1),
        n(u.embed),
        n(u.index),
        n(u.queue),
        n(u.embedded),
        n(u.reused),
        n(u.peak),
        n(u.kept),
        n(u.d1_rows_read),
        n(u.d1_rows_written),
    ]
}

/// Its tenant's share of `u`: the D1 rows (`TENANT_ADD_D1_ROWS`).
fn tenant_rows(job_id: &str, u: &UsageSnapshot) -> Stmt {
    let n = |v: u64| SqlValue::Int(v as i64);
    Stmt::new(
        sql::TENANT_ADD_D1_ROWS,
        vec![job_id.into(), n(u.d1_rows_read), n(u.d1_rows_written)],
    )
}

/// The statements that record `u` for job `job_id`: the job's counters,
/// and its tenant's D1 rows (`TENANT_ADD_D1_ROWS`), in the caller's batch.
pub(super) fn usage_stmts(job_id: &str, u: &UsageSnapshot) -> [Stmt; 2] {
    let mut params = vec![SqlValue::from(job_id)];
    params.extend(usage_params(u));
    [
        Stmt::new(sql::JOB_ADD_USAGE, params),
        tenant_rows(job_id, u),
    ]
}

/// The job's end with `u` recorded (`COMMIT_FINISH_JOB`: one write of the
/// job's row for both), and its tenant's D1 rows.
pub(super) fn finish_stmts(
    job_id: &str,
    doc_id: &str,
    version: u32,
    now: i64,
    u: &UsageSnapshot,
) -> [Stmt; 2] {
    let mut params = vec![SqlValue::from(job_id)];
    params.extend(usage_params(u));
    params.extend([doc_id.into(), version.into(), SqlValue::Int(now)]);
    [
        Stmt::new(sql::COMMIT_FINISH_JOB, params),
        tenant_rows(job_id, u),
    ]
}

impl<D: Database> Store<D> {
    pub async fn add_usage(&self, job_id: &str, usage: &UsageSnapshot) -> Result<(), PortError> {
        self.db
            .batch(usage_stmts(job_id, usage).into())
            .await
            .map(|_| ())
    }
}
