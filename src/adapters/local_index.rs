//! The offline stand-in for Vectorize (`INDEX_BACKEND=local-d1`): vectors in
//! a separate database (`VECTORS_DB`, schema in `migrations-local-index/`).
//! It enforces the same batch, ID, dimension, metadata and topK limits as
//! Vectorize, so code that passes locally respects them in production.
//!
//! Each vector is stored as the base64 of its `f32`s with its norm
//! (`core::vector_codes` says why base64 text rather than a BLOB, with the
//! figures). A namespace of at most `LOCAL_INDEX_EXHAUSTIVE_MAX` vectors is
//! searched exhaustively, exact cosine over every vector, as this index
//! always did; past it, its vectors are also kept quantized in blocks
//! stored by dimension (`local_blocks.rs`), and a query reads only its own
//! largest dimensions of them, then scores its best candidates exactly:
//! the same scores, the best matches among the candidates read, filtered
//! as before. A `doc_id` filter reads that document's vectors, exactly.
//! Figures: docs/performance.md, "The offline vector index at 100,000
//! vectors".

use super::local_blocks::{lost_race, WRITE_ATTEMPTS};
use super::IndexLimits;
use crate::config::Config;
use crate::core::failure::FailureBucket;
use crate::core::vector_codes;
use crate::ports::{
    Database, MetadataFilter, PortError, VectorIndex, VectorMatch, VectorMetadata, VectorRecord,
};
use crate::store::vector_rows::{self, ScoredRow, VectorRowIn, VectorRowOut};
use std::collections::BTreeSet;

pub struct LocalIndex<D> {
    pub db: D,
    pub limits: IndexLimits,
    pub tuning: LocalIndexTuning,
    pub json_param_bytes_max: usize,
    /// Local fault injection for end-to-end tests and drills
    /// (`LOCAL_INDEX_REJECT_DOC_PREFIX`): upserts of vectors whose `doc_id`
    /// starts with this prefix are rejected as Vectorize would reject a bad
    /// request (a permanent `index_rejected`). `None` in normal use.
    pub reject_doc_prefix: Option<String>,
}

/// How the local index stores and searches (`LOCAL_INDEX_*` settings,
/// `docs/configuration.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalIndexTuning {
    /// A namespace without blocks is searched exhaustively up to this many
    /// vectors; past it, its next upsert places its vectors in blocks.
    pub exhaustive_max: usize,
    /// Vectors (slots) per block: per row of codes.
    pub block_vectors: usize,
    /// Dimensions of a query (its largest) the first pass reads.
    pub query_dims_max: usize,
    /// Candidates of the first pass scored exactly (at least `top_k`).
    pub rerank: usize,
    /// Vectors one call places at most (and rows one round of a filtered
    /// query reads at most).
    pub maintain_rows_max: usize,
}

impl LocalIndexTuning {
    pub fn from_config(cfg: &Config) -> LocalIndexTuning {
        LocalIndexTuning {
            exhaustive_max: cfg.local_index_exhaustive_max,
            block_vectors: cfg.local_index_block_vectors,
            query_dims_max: cfg.local_index_query_dims_max,
            rerank: cfg.local_index_rerank,
            maintain_rows_max: cfg.local_index_maintain_rows_max,
        }
    }
}

impl Default for LocalIndexTuning {
    fn default() -> LocalIndexTuning {
        LocalIndexTuning::from_config(&Config::default())
    }
}

/// A row that does not decode: the index's data is broken, as unavailable.
pub(super) fn bad_row() -> PortError {
    PortError::new(FailureBucket::IndexUnavailable, "local_index_row")
}

/// A failure of the table is the index's: unavailable, with the database's code.
pub(super) fn unavailable(e: PortError) -> PortError {
    PortError::new(FailureBucket::IndexUnavailable, e.code)
}

/// A stored vector's values and norm, from base64 (`norm` stored) or from
/// the JSON of a row written before migration 0003 (`norm` NULL).
pub(super) fn values_of(vec: &str, norm: Option<f64>) -> Result<(Vec<f32>, f32), PortError> {
    match norm {
        Some(n) => Ok((
            vector_codes::decode_vector(vec).ok_or_else(bad_row)?,
            n as f32,
        )),
        None => {
            let v: Vec<f32> = serde_json::from_str(vec).map_err(|_| bad_row())?;
            let n = vector_codes::norm(&v);
            Ok((v, n))
        }
    }
}

fn decode(row: VectorRowOut) -> Result<VectorRecord, PortError> {
    Ok(VectorRecord {
        id: row.id,
        namespace: row.namespace,
        values: values_of(&row.vec, row.norm)?.0,
        metadata: serde_json::from_str(&row.metadata).map_err(|_| bad_row())?,
    })
}

/// The exact scores of those of `rows` that match `filter`. The metadata
/// is parsed only when there is a filter to check.
pub(super) fn score_rows(
    q: &[f32],
    rows: Vec<ScoredRow>,
    filter: &MetadataFilter,
) -> Result<Vec<VectorMatch>, PortError> {
    let q_norm = vector_codes::norm(q);
    let mut scored = Vec::with_capacity(rows.len());
    for row in rows {
        if !filter.is_empty() {
            let metadata: VectorMetadata =
                serde_json::from_str(&row.metadata).map_err(|_| bad_row())?;
            if !super::filter_matches(&metadata, filter) {
                continue;
            }
        }
        let (values, norm) = values_of(&row.vec, row.norm)?;
        scored.push(VectorMatch {
            score: vector_codes::cosine_normed(q, q_norm, &values, norm),
            id: row.id,
        });
    }
    Ok(scored)
}

/// The `top_k` best of `scored`, ties broken by ID, so results are
/// deterministic.
fn best(mut scored: Vec<VectorMatch>, top_k: usize) -> Vec<VectorMatch> {
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    scored.truncate(top_k);
    scored
}

impl<D: Database> LocalIndex<D> {
    /// `v` as a row, if it is within Vectorize's limits (without a slot:
    /// the caller places it).
    fn row_of<'a>(&self, v: &'a VectorRecord) -> Result<VectorRowIn<'a>, PortError> {
        let reject = |code| PortError::new(FailureBucket::IndexRejected, code);
        if v.id.is_empty() || v.id.len() > self.limits.id_bytes_max {
            return Err(reject("vector_id_length"));
        }
        if v.values.len() != self.limits.dimensions {
            return Err(reject("dimensions"));
        }
        let Some(doc_id) = v.metadata.get("doc_id").and_then(|d| d.as_str()) else {
            return Err(reject("metadata_doc_id"));
        };
        if self
            .reject_doc_prefix
            .as_deref()
            .is_some_and(|p| !p.is_empty() && doc_id.starts_with(p))
        {
            return Err(reject("injected_rejection"));
        }
        let metadata = serde_json::to_string(&v.metadata).map_err(|_| reject("metadata"))?;
        if metadata.len() > 10 * 1024 {
            return Err(reject("metadata_too_large"));
        }
        Ok(VectorRowIn {
            id: &v.id,
            namespace: &v.namespace,
            doc_id,
            vec: vector_codes::encode_vector(&v.values),
            norm: f64::from(vector_codes::norm(&v.values)),
            slot: None,
            metadata,
        })
    }

    /// A query without a `doc_id`: exhaustive while the namespace has no
    /// blocks, else through them. A namespace with vectors due to be placed
    /// (rows from before migration 0003, or past the threshold without an
    /// upsert since) is given one bounded placement step first.
    async fn search(
        &self,
        q: &[f32],
        namespace: &str,
        filter: &MetadataFilter,
        top_k: usize,
    ) -> Result<Vec<VectorMatch>, PortError> {
        let mut space = vector_rows::space(&self.db, namespace).await?;
        if self.placement_due(&space) {
            // A placement that kept losing to writes leaves the vectors
            // unplaced, which this query reads exactly: it still answers.
            match self.maintain(namespace).await {
                Err(e) if !lost_race(&e) => return Err(e),
                _ => {}
            }
            space = vector_rows::space(&self.db, namespace).await?;
        }
        if space.slots == 0 {
            let rows = vector_rows::scan(&self.db, namespace, None).await?;
            return score_rows(q, rows, filter);
        }
        self.search_blocks(q, namespace, &space, filter, top_k)
            .await
    }

    async fn upsert_once(
        &self,
        vectors: &[VectorRecord],
        rows: &mut [VectorRowIn<'_>],
    ) -> Result<(), PortError> {
        let mut attempt = 1;
        loop {
            match self.try_upsert(vectors, rows).await {
                Err(e) if lost_race(&e) && attempt < WRITE_ATTEMPTS => attempt += 1,
                other => return other.map_err(unavailable),
            }
        }
    }
}

impl<D: Database> VectorIndex for LocalIndex<D> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        if vectors.len() > self.limits.upsert_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "upsert_batch_too_large",
            ));
        }
        // Every record is checked; of an ID given twice the last wins (as
        // this table's upsert always had it) and is placed once.
        for v in vectors {
            self.row_of(v)?;
        }
        let mut seen = BTreeSet::new();
        let mut last: Vec<VectorRecord> = Vec::with_capacity(vectors.len());
        for v in vectors.iter().rev() {
            if seen.insert(v.id.as_str()) {
                last.push(v.clone());
            }
        }
        last.reverse();
        let mut rows = last
            .iter()
            .map(|v| self.row_of(v))
            .collect::<Result<Vec<_>, _>>()?;
        self.upsert_once(&last, &mut rows).await?;
        let namespaces: BTreeSet<&str> = last.iter().map(|v| v.namespace.as_str()).collect();
        for ns in namespaces {
            self.maintain(ns).await?;
        }
        Ok(())
    }

    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if ids.len() > self.limits.delete_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "delete_batch_too_large",
            ));
        }
        let mut attempt = 1;
        loop {
            match self.try_delete(ids).await {
                Err(e) if lost_race(&e) && attempt < WRITE_ATTEMPTS => attempt += 1,
                other => return other.map_err(unavailable),
            }
        }
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        if top_k == 0 || top_k > self.limits.top_k_max {
            return Err(PortError::new(FailureBucket::IndexRejected, "top_k"));
        }
        if vector.len() != self.limits.dimensions {
            return Err(PortError::new(FailureBucket::IndexRejected, "dimensions"));
        }
        let scored = match filter.get("doc_id").and_then(|d| d.as_str()) {
            Some(doc_id) => match vector_rows::scan(&self.db, namespace, Some(doc_id)).await {
                Ok(rows) => score_rows(vector, rows, filter),
                Err(e) => Err(e),
            },
            None => self.search(vector, namespace, filter, top_k).await,
        }
        .map_err(unavailable)?;
        Ok(best(scored, top_k))
    }

    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        if ids.len() > self.limits.get_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "get_batch_too_large",
            ));
        }
        let rows = vector_rows::get(&self.db, ids).await.map_err(unavailable)?;
        rows.into_iter().map(decode).collect()
    }
}
