//! The offline vector index's tables (`VECTORS_DB`, schema in
//! `migrations-local-index/`): `vectors`, each namespace's blocks
//! (`vector_blocks`) and counts (`vector_spaces`), over any database. The
//! local index adapter (`adapters::local_index`) enforces Vectorize's
//! limits, places vectors in blocks and ranks; this file only reads and
//! writes rows.
//!
//! May import: `ports`, `store::sql`.

use super::{json_array, json_pages, sql};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

/// A vector as the table holds it: values as base64 text
/// (`core::vector_codes::encode_vector`) with their norm, metadata as JSON
/// text, and its slot in the namespace's blocks (`None`: not placed).
#[derive(Serialize)]
pub struct VectorRowIn<'a> {
    pub id: &'a str,
    pub namespace: &'a str,
    pub doc_id: &'a str,
    pub vec: String,
    /// As `f64`, so the `f32` comes back exactly from D1's numbers.
    pub norm: f64,
    pub slot: Option<i64>,
    pub metadata: String,
}

/// A stored vector, as read back. `norm` is `None` for a row written
/// before migration 0003, whose `vec` is a JSON array.
#[derive(Deserialize)]
pub struct VectorRowOut {
    pub id: String,
    pub namespace: String,
    pub vec: String,
    pub norm: Option<f64>,
    pub slot: Option<i64>,
    pub metadata: String,
}

/// A vector read to be scored, or placed (its namespace is known).
#[derive(Deserialize)]
pub struct ScoredRow {
    pub id: String,
    pub vec: String,
    pub norm: Option<f64>,
    pub metadata: String,
}

/// A namespace's counts, the slots its blocks hold, its revision (all 0
/// for a namespace never written).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Space {
    pub vectors: i64,
    pub unplaced: i64,
    pub slots: i64,
    pub rev: i64,
}

/// One row of a block: dimension `dim` (-1: the factors) of block `block`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct BlockRow {
    pub dim: i64,
    pub block: i64,
    pub codes: String,
}

/// A vector placed in slot `slot`; a row still in JSON takes `vec` and
/// `norm` (base64 and its norm) on the way.
#[derive(Serialize)]
pub struct PlaceIn<'a> {
    pub id: &'a str,
    pub slot: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vec: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
}

/// `sql` over `rows` in `json_each` pages of at most `bytes_max` bytes,
/// each statement after `first` (a namespace) if given.
fn paged<T: Serialize>(
    sql: &'static str,
    first: Option<&str>,
    rows: impl IntoIterator<Item = T>,
    bytes_max: usize,
) -> Vec<Stmt> {
    json_pages(rows, bytes_max)
        .into_iter()
        .map(|page| {
            let mut params: Vec<SqlValue> = first.map(Into::into).into_iter().collect();
            params.push(page.into());
            Stmt::new(sql, params)
        })
        .collect()
}

/// The statements of one write, run as one batch by [`write`]: each
/// namespace's guard first, then the rest in the order added.
#[derive(Default)]
pub struct Write {
    guards: Vec<Stmt>,
    rest: Vec<Stmt>,
}

impl Write {
    /// Fails the whole batch unless `namespace` is still at revision `rev`.
    pub fn guard(&mut self, namespace: &str, rev: i64) {
        self.guards.push(Stmt::new(
            sql::LOCAL_INDEX_GUARD,
            vec![namespace.into(), rev.into()],
        ));
    }

    pub fn upsert(&mut self, rows: &[VectorRowIn<'_>], bytes_max: usize) {
        self.rest
            .extend(paged(sql::LOCAL_INDEX_UPSERT, None, rows, bytes_max));
    }

    pub fn delete(&mut self, ids: &[String]) {
        self.rest.push(Stmt::new(
            sql::LOCAL_INDEX_DELETE,
            vec![json_array(ids).into()],
        ));
    }

    pub fn place(&mut self, namespace: &str, rows: &[PlaceIn<'_>], bytes_max: usize) {
        self.rest.extend(paged(
            sql::LOCAL_INDEX_PLACE,
            Some(namespace),
            rows,
            bytes_max,
        ));
    }

    /// Writes `rows` of `namespace`'s blocks, which then hold `slots` slots.
    pub fn blocks(&mut self, namespace: &str, rows: &[BlockRow], slots: i64, bytes_max: usize) {
        let arrays = rows.iter().map(|r| (r.dim, r.block, r.codes.as_str()));
        self.rest.extend(paged(
            sql::LOCAL_INDEX_BLOCKS_PUT,
            Some(namespace),
            arrays,
            bytes_max,
        ));
        self.rest.push(Stmt::new(
            sql::LOCAL_INDEX_SLOTS_SET,
            vec![namespace.into(), slots.into()],
        ));
    }
}

/// Runs `w` as one batch: all of it or, if a guard fails, none.
pub async fn write<D: Database>(db: &D, w: Write) -> Result<(), PortError> {
    if w.rest.is_empty() {
        return Ok(());
    }
    let mut stmts = w.guards;
    stmts.extend(w.rest);
    db.batch(stmts).await.map(|_| ())
}

/// Every vector of `namespace`, or those of `doc_id` in it.
pub async fn scan<D: Database>(
    db: &D,
    namespace: &str,
    doc_id: Option<&str>,
) -> Result<Vec<ScoredRow>, PortError> {
    let stmt = match doc_id {
        Some(doc) => Stmt::new(
            sql::LOCAL_INDEX_SCAN_DOC,
            vec![namespace.into(), doc.into()],
        ),
        None => Stmt::new(sql::LOCAL_INDEX_SCAN, vec![namespace.into()]),
    };
    db.query(stmt).await
}

/// The vectors of `namespace` in `slots`.
pub async fn by_slots<D: Database>(
    db: &D,
    namespace: &str,
    slots: &[i64],
) -> Result<Vec<ScoredRow>, PortError> {
    db.query(Stmt::new(
        sql::LOCAL_INDEX_BY_SLOTS,
        vec![namespace.into(), json_array(slots).into()],
    ))
    .await
}

/// At most `limit` vectors of `namespace` not in its blocks, oldest first.
pub async fn unplaced<D: Database>(
    db: &D,
    namespace: &str,
    limit: usize,
) -> Result<Vec<ScoredRow>, PortError> {
    // D1 binds numbers as JS numbers: exact up to 2^53.
    let limit = i64::try_from(limit).unwrap_or(i64::MAX).min(1 << 53);
    db.query(Stmt::new(
        sql::LOCAL_INDEX_UNPLACED,
        vec![namespace.into(), limit.into()],
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

/// `namespace`'s counts and revision (zeros for one never written).
pub async fn space<D: Database>(db: &D, namespace: &str) -> Result<Space, PortError> {
    let rows: Vec<Space> = db
        .query(Stmt::new(sql::LOCAL_INDEX_SPACE, vec![namespace.into()]))
        .await?;
    Ok(rows.into_iter().next().unwrap_or_default())
}

/// The rows of dimensions `dims` (-1: the factors) of every block of `namespace`.
pub async fn dims<D: Database>(
    db: &D,
    namespace: &str,
    dims: &[i64],
) -> Result<Vec<BlockRow>, PortError> {
    db.query(Stmt::new(
        sql::LOCAL_INDEX_BLOCKS_READ,
        vec![namespace.into(), json_array(dims).into()],
    ))
    .await
}

/// Every row of blocks `blocks` of `namespace`.
pub async fn blocks<D: Database>(
    db: &D,
    namespace: &str,
    blocks: &[i64],
) -> Result<Vec<BlockRow>, PortError> {
    db.query(Stmt::new(
        sql::LOCAL_INDEX_BLOCK_ROWS,
        vec![namespace.into(), json_array(blocks).into()],
    ))
    .await
}
