//! Search: embed the query, ask the index for candidates, and serve only
//! those D1 holds as live. The index is eventually consistent and may hold
//! old or orphan vectors; they are dropped here, never served.

use super::Pipeline;
use crate::core::failure::FailureBucket;
use crate::ports::{Clock, Database, Embedder, JobQueue, MetadataFilter, PortError, VectorIndex};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    pub top_k: usize,
    pub doc_id: Option<String>,
    pub metadata: MetadataFilter,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    pub doc_id: String,
    pub version: u32,
    pub chunk: u32,
    /// The index generation served (the active one).
    pub generation: u32,
    pub text: String,
    pub score: f32,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn search(&self, req: &SearchRequest) -> Result<Vec<SearchHit>, PortError> {
        // Search serves exactly one generation: the active one.
        let active = self
            .store
            .active_generation()
            .await?
            .ok_or(PortError::new(FailureBucket::Internal, "no_active_generation"))?;
        if !self.cfg.embeds_like(&active.index_config) {
            // The query would be embedded by another model than the vectors.
            return Err(PortError::new(FailureBucket::IndexMisconfigured, "generation_embedder_mismatch"));
        }
        let vectors = self
            .embedder
            .embed(std::slice::from_ref(&req.query))
            .await?;
        let [vector] = vectors.as_slice() else {
            return Err(PortError::new(FailureBucket::EmbedRejected, "embed_shape"));
        };
        let mut filter = req.metadata.clone();
        if let Some(d) = &req.doc_id {
            filter.insert("doc_id".into(), serde_json::Value::String(d.clone()));
        }
        // Vectors of generation 1 may predate the `generation` metadata
        // field: they are not filtered on it (D1 drops any other
        // generation's candidates below); later generations are.
        if active.generation > 1 {
            filter.insert("generation".into(), serde_json::json!(active.generation));
        }
        let want = (req.top_k * self.cfg.search_overfetch_factor)
            .min(self.cfg.index_query_top_k_max)
            .max(req.top_k);
        let matches = self.index.query(vector, want, &filter).await?;
        if matches.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = matches.iter().map(|m| m.id.clone()).collect();
        let mut live: HashMap<String, _> = self
            .store
            .live_chunks(&ids, active.generation, self.bugs)
            .await?
            .into_iter()
            .map(|r| (r.vector_id.clone(), r))
            .collect();
        let mut hits = Vec::new();
        for m in matches {
            if let Some(row) = live.remove(&m.id) {
                // Vectorize compares string filters on their first 64 bytes:
                // check the exact doc_id against D1.
                if req.doc_id.as_ref().is_some_and(|d| *d != row.doc_id) {
                    continue;
                }
                hits.push(SearchHit {
                    doc_id: row.doc_id,
                    version: row.version,
                    chunk: row.chunk_index,
                    generation: row.generation,
                    text: row.text,
                    score: m.score,
                });
                if hits.len() == req.top_k {
                    break;
                }
            }
        }
        Ok(hits)
    }
}
