//! The ports: the small traits the pipeline is generic over.
//!
//! Each adapter translates its platform's errors into a [`PortError`] at the
//! edge: a failure bucket plus a static code, never the platform's raw text.
//! Futures are not `Send` (workers-rs futures are not), so neither are these.
#![allow(async_fn_in_trait)]

use crate::core::failure::FailureBucket;
use crate::core::index_config::EmbedModel;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A classified failure of a port call. `code` is a static, allow-listed
/// diagnostic (e.g. `"d1_constraint"`), safe to log and to return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} ({code})", bucket.as_str())]
pub struct PortError {
    pub bucket: FailureBucket,
    pub code: &'static str,
}

impl PortError {
    pub fn new(bucket: FailureBucket, code: &'static str) -> PortError {
        PortError { bucket, code }
    }
}

/// A value bound to a SQL parameter. Integers must stay within ±2^53 (D1
/// passes them as JS numbers).
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Int(v)
    }
}
impl From<u32> for SqlValue {
    fn from(v: u32) -> Self {
        SqlValue::Int(i64::from(v))
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// One statement: SQL text written once in [`crate::store::sql`], and its
/// bound parameters (every value is bound, never spliced into the text).
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub sql: &'static str,
    pub params: Vec<SqlValue>,
}

impl Stmt {
    pub fn new(sql: &'static str, params: Vec<SqlValue>) -> Stmt {
        Stmt { sql, params }
    }
}

/// What D1 bills a call for: the rows its statements read and wrote, as
/// D1 counts them (`meta.rows_read`, `meta.rows_written`: every table row
/// and index entry a statement visits or writes, a trigger's included, and
/// one per row a statement hands to a virtual table such as FTS5; not the
/// virtual table's own internal writes). Zero where a database does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
    pub read: u64,
    pub written: u64,
}

impl Rows {
    pub fn plus(self, other: Rows) -> Rows {
        Rows {
            read: self.read + other.read,
            written: self.written + other.written,
        }
    }
}

/// The source of truth (D1 in production, SQLite in native tests).
///
/// Each call also says what it was billed ([`Rows`]): an adapter implements
/// the `_billed` calls, and every wrapper passes the figure on, so the
/// metering (`pipeline/budget.rs`) sees what D1 itself reported. A failed
/// call reports nothing (D1 returns no meta with an error).
pub trait Database {
    /// Runs a read and deserializes each row (an object keyed by column name).
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError>;
    /// Runs one write; returns the number of rows changed.
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError>;
    /// Runs the statements as one transaction: all commit or none do (D1's
    /// `batch()`). Returns the rows changed by each statement.
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError>;

    /// Runs `probe` (a read) and answers the database's size in bytes
    /// after it, as the database reports it (D1: the query's
    /// `meta.size_after`): what placing a tenant on the least-full shard
    /// compares. A database that cannot say answers an error.
    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        let _ = probe;
        Err(PortError::new(FailureBucket::Internal, "size_unknown"))
    }

    /// [`Database::query_billed`] without the bill.
    async fn query<T: DeserializeOwned>(&self, stmt: Stmt) -> Result<Vec<T>, PortError> {
        self.query_billed(stmt).await.map(|(rows, _)| rows)
    }
    /// [`Database::execute_billed`] without the bill.
    async fn execute(&self, stmt: Stmt) -> Result<u64, PortError> {
        self.execute_billed(stmt).await.map(|(n, _)| n)
    }
    /// [`Database::batch_billed`] without the bill.
    async fn batch(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>, PortError> {
        self.batch_billed(stmts).await.map(|(n, _)| n)
    }
}

/// Metadata stored with a vector: flat scalars only (what Vectorize can
/// filter on), always including `doc_id` and `version`.
pub type VectorMetadata = BTreeMap<String, serde_json::Value>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VectorRecord {
    pub id: String,
    /// The tenant's namespace (its `tenant_id`): a query searches one
    /// namespace. IDs are unique across namespaces.
    #[serde(default)]
    pub namespace: String,
    pub values: Vec<f32>,
    pub metadata: VectorMetadata,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VectorMatch {
    pub id: String,
    pub score: f32,
}

/// An equality filter on vector metadata (`{"doc_id": "a", "lang": "en"}`).
pub type MetadataFilter = BTreeMap<String, serde_json::Value>;

/// The derived search index (Vectorize in production).
///
/// Implementations MUST: make `upsert` idempotent (same ID, same values: no
/// change) and `delete_by_ids` idempotent (unknown IDs are not an error);
/// reject calls over the configured batch limits rather than split them
/// silently (callers bound their batches). Reads MAY lag writes.
pub trait VectorIndex {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError>;
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError>;
    /// The `top_k` nearest vectors of `namespace` that match `filter`.
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError>;
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError>;
    /// Whether every call would fail, known without I/O (a binding missing,
    /// an index that disagrees with the configuration): the consumer then
    /// ends its attempt before spending anything on it.
    fn refusal(&self) -> Option<PortError> {
        None
    }
}

/// Turns texts into vectors, one per text, in order, with the model named
/// per call: each generation's vectors are made (and its queries embedded)
/// by the model its index configuration records
/// ([`crate::config::Config::embed_model_for`]), whatever model the Worker
/// is configured with. The vectors have `model.dimensions`.
///
/// Implementations MUST reject a call over their batch limit, and refuse
/// (never substitute) a model they cannot run.
pub trait Embedder {
    async fn embed(&self, model: &EmbedModel, texts: &[String])
        -> Result<Vec<Vec<f32>>, PortError>;
    /// As [`VectorIndex::refusal`].
    fn refusal(&self) -> Option<PortError> {
        None
    }
}

/// The body of every queue message: a pointer, never data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMessage {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    /// Set on a pointer the consumer sent to the dead-letter queue after
    /// archiving it: the dead-letter consumer only confirms such a letter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// The shard whose ledger holds the job (absent: shard 0, so a
    /// deployment of one shard sends what it always sent). Stamped by the
    /// shard's producer ([`crate::adapters::ShardQueue`]).
    #[serde(default, skip_serializing_if = "is_control")]
    pub shard: u16,
}

fn is_control(shard: &u16) -> bool {
    *shard == 0
}

impl JobMessage {
    pub fn new(job_id: impl Into<String>, doc_id: impl Into<String>, version: u32) -> JobMessage {
        JobMessage {
            job_id: job_id.into(),
            doc_id: doc_id.into(),
            version,
            archived: false,
            shard: 0,
        }
    }
}

/// The queues' producer side: the ingest queue, and the dead-letter queue.
///
/// Implementations MUST deliver each message at least once, in any order.
pub trait JobQueue {
    /// Sends the messages (at most 100) to the ingest queue in one call.
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError>;
    /// Sends one pointer to the dead-letter queue (the evidence queue). A
    /// deployment without one answers `Ok` (the ledger's archive is the
    /// evidence).
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError>;
}

/// The injected clock: milliseconds since the Unix epoch.
pub trait Clock {
    fn now_ms(&self) -> i64;
}

/// Reads rows as `T` from a JSON object per row; shared by native adapters.
pub fn rows_from_json<T: DeserializeOwned>(
    rows: Vec<serde_json::Value>,
) -> Result<Vec<T>, PortError> {
    rows.into_iter()
        .map(|r| {
            serde_json::from_value(r)
                .map_err(|_| PortError::new(FailureBucket::Internal, "row_shape"))
        })
        .collect()
}

// Borrowed ports are ports: tests keep ownership of their fakes and lend them.
impl<T: Database> Database for &T {
    async fn query_billed<R: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<R>, Rows), PortError> {
        (**self).query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        (**self).execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        (**self).batch_billed(stmts).await
    }
    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        (**self).size_after(probe).await
    }
}

impl<T: VectorIndex> VectorIndex for &T {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        (**self).upsert(vectors).await
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        (**self).delete_by_ids(ids).await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        (**self).query(vector, top_k, namespace, filter).await
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        (**self).get_by_ids(ids).await
    }
    fn refusal(&self) -> Option<PortError> {
        (**self).refusal()
    }
}

impl<T: Embedder> Embedder for &T {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        (**self).embed(model, texts).await
    }
    fn refusal(&self) -> Option<PortError> {
        (**self).refusal()
    }
}

impl<T: JobQueue> JobQueue for &T {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        (**self).send_batch(messages).await
    }
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        (**self).send_dead_letter(message).await
    }
}

impl<T: Clock> Clock for &T {
    fn now_ms(&self) -> i64 {
        (**self).now_ms()
    }
}
