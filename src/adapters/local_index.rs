//! The offline stand-in for Vectorize (`INDEX_BACKEND=local-d1`): vectors in
//! a separate database (`VECTORS_DB`, schema in `migrations-local-index/`),
//! brute-force cosine search. It enforces the same batch and ID limits as
//! Vectorize, so code that passes locally respects them in production.

use super::IndexLimits;
use crate::core::failure::FailureBucket;
use crate::core::local_embed::cosine;
use crate::ports::{Database, MetadataFilter, PortError, VectorIndex, VectorMatch, VectorRecord};
use crate::store::vector_rows::{self, VectorRowIn, VectorRowOut};

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

fn decode(row: VectorRowOut) -> Result<VectorRecord, PortError> {
    let bad = |_| PortError::new(FailureBucket::IndexUnavailable, "local_index_row");
    Ok(VectorRecord {
        id: row.id,
        namespace: row.namespace,
        values: serde_json::from_str(&row.vec).map_err(bad)?,
        metadata: serde_json::from_str(&row.metadata).map_err(bad)?,
    })
}

/// A failure of the table is the index's: unavailable, with the database's code.
fn unavailable(e: PortError) -> PortError {
    PortError::new(FailureBucket::IndexUnavailable, e.code)
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
            rows.push(VectorRowIn {
                id: &v.id,
                namespace: &v.namespace,
                doc_id,
                vec: serde_json::to_string(&v.values).expect("floats serialize"),
                metadata,
            });
        }
        vector_rows::upsert(&self.db, &rows, self.json_param_bytes_max)
            .await
            .map_err(unavailable)
    }

    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if ids.len() > self.limits.delete_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "delete_batch_too_large",
            ));
        }
        vector_rows::delete(&self.db, ids)
            .await
            .map_err(unavailable)
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
        let doc_id = filter
            .get("doc_id")
            .and_then(|d| d.as_str())
            .map(str::to_string);
        let rows = vector_rows::scan(&self.db, namespace, doc_id)
            .await
            .map_err(unavailable)?;
        let mut scored = Vec::new();
        for row in rows {
            let rec = decode(row)?;
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
        let rows = vector_rows::get(&self.db, ids).await.map_err(unavailable)?;
        rows.into_iter().map(decode).collect()
    }
}
