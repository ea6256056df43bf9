//! The offline stand-in for Vectorize (`INDEX_BACKEND=local-d1`): vectors in
//! a separate database (`VECTORS_DB`, schema in `migrations-local-index/`),
//! brute-force cosine search. It enforces the same batch and ID limits as
//! Vectorize, so code that passes locally respects them in production.

use super::IndexLimits;
use crate::core::failure::FailureBucket;
use crate::core::local_embed::cosine;
use crate::ports::{
    Database, MetadataFilter, PortError, Stmt, VectorIndex, VectorMatch, VectorRecord,
};
use crate::store::{json_array, json_pages, sql};
use serde::{Deserialize, Serialize};

pub struct LocalIndex<D> {
    pub db: D,
    pub limits: IndexLimits,
    pub json_param_bytes_max: usize,
    /// Local fault injection for end-to-end tests and drills
    /// (`LOCAL_INDEX_REJECT_DOC_PREFIX`): upserts of vectors whose `doc_id`
    /// starts with this prefix are rejected as Vectorize would reject a bad
    /// request (a permanent `index_rejected`). `None` in normal use.
    pub reject_doc_prefix: Option<String>,
}

#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    doc_id: &'a str,
    vec: String,
    metadata: String,
}

#[derive(Deserialize)]
struct StoredRow {
    id: String,
    vec: String,
    metadata: String,
}

impl StoredRow {
    fn decode(self) -> Result<VectorRecord, PortError> {
        let bad = |_| PortError::new(FailureBucket::IndexUnavailable, "local_index_row");
        Ok(VectorRecord {
            id: self.id,
            values: serde_json::from_str(&self.vec).map_err(bad)?,
            metadata: serde_json::from_str(&self.metadata).map_err(bad)?,
        })
    }
}

impl<D: Database> VectorIndex for LocalIndex<D> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        let reject = |code| Err(PortError::new(FailureBucket::IndexRejected, code));
        if vectors.len() > self.limits.upsert_batch_max {
            return reject("upsert_batch_too_large");
        }
        let mut rows = Vec::with_capacity(vectors.len());
        for v in vectors {
            if v.id.is_empty() || v.id.len() > self.limits.id_bytes_max {
                return reject("vector_id_length");
            }
            if v.values.len() != self.limits.dimensions {
                return reject("dimensions");
            }
            let Some(doc_id) = v.metadata.get("doc_id").and_then(|d| d.as_str()) else {
                return reject("metadata_doc_id");
            };
            if self
                .reject_doc_prefix
                .as_deref()
                .is_some_and(|p| !p.is_empty() && doc_id.starts_with(p))
            {
                return reject("injected_rejection");
            }
            let metadata = serde_json::to_string(&v.metadata).expect("metadata serializes");
            if metadata.len() > 10 * 1024 {
                return reject("metadata_too_large");
            }
            rows.push(Row {
                id: &v.id,
                doc_id,
                vec: serde_json::to_string(&v.values).expect("floats serialize"),
                metadata,
            });
        }
        let stmts = json_pages(&rows, self.json_param_bytes_max)
            .into_iter()
            .map(|page| Stmt::new(sql::LOCAL_INDEX_UPSERT, vec![page.into()]))
            .collect::<Vec<_>>();
        if stmts.is_empty() {
            return Ok(());
        }
        self.db
            .batch(stmts)
            .await
            .map(|_| ())
            .map_err(|e| PortError::new(FailureBucket::IndexUnavailable, e.code))
    }

    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if ids.len() > self.limits.delete_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "delete_batch_too_large",
            ));
        }
        self.db
            .execute(Stmt::new(
                sql::LOCAL_INDEX_DELETE,
                vec![json_array(ids).into()],
            ))
            .await
            .map(|_| ())
            .map_err(|e| PortError::new(FailureBucket::IndexUnavailable, e.code))
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        if top_k == 0 || top_k > self.limits.top_k_max {
            return Err(PortError::new(FailureBucket::IndexRejected, "top_k"));
        }
        if vector.len() != self.limits.dimensions {
            return Err(PortError::new(FailureBucket::IndexRejected, "dimensions"));
        }
        let doc_id = filter
            .get("doc_id")
            .and_then(|d| d.as_str())
            .map(str::to_string);
        let rows: Vec<StoredRow> = self
            .db
            .query(Stmt::new(sql::LOCAL_INDEX_SCAN, vec![doc_id.into()]))
            .await
            .map_err(|e| PortError::new(FailureBucket::IndexUnavailable, e.code))?;
        let mut scored = Vec::new();
        for row in rows {
            let rec = row.decode()?;
            if super::filter_matches(&rec.metadata, filter) {
                scored.push(VectorMatch {
                    score: cosine(vector, &rec.values),
                    id: rec.id,
                });
            }
        }
        // Ties broken by ID, so results are deterministic.
        scored.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        scored.truncate(top_k);
        Ok(scored)
    }

    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        if ids.len() > self.limits.get_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "get_batch_too_large",
            ));
        }
        let rows: Vec<StoredRow> = self
            .db
            .query(Stmt::new(
                sql::LOCAL_INDEX_GET,
                vec![json_array(ids).into()],
            ))
            .await
            .map_err(|e| PortError::new(FailureBucket::IndexUnavailable, e.code))?;
        rows.into_iter().map(StoredRow::decode).collect()
    }
}
