//! Search: embed the query, ask the index for candidates, and serve only
//! those D1 holds as live. The index is eventually consistent and may hold
//! old or orphan vectors; they are dropped here, never served. A search is
//! a tenant's: the index is asked for its namespace only, and D1 serves
//! only its chunks (two fences, so neither alone decides isolation).

use super::Pipeline;
use crate::bugs::Bug;
use crate::core::failure::FailureBucket;
use crate::core::ids::{split_key, TenantId};
use crate::ports::{Clock, Database, Embedder, JobQueue, MetadataFilter, PortError, VectorIndex};
use crate::store::LiveChunkRow;
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

impl SearchRequest {
    /// The filter sent to the index: the request's metadata equalities,
    /// its `doc_id`, and (from generation 2 on) the generation searched.
    /// Vectors of generation 1 may predate the `generation` metadata field:
    /// they are not filtered on it (D1 drops other generations' candidates).
    pub fn index_filter(&self, generation: u32) -> MetadataFilter {
        let mut filter = self.metadata.clone();
        if let Some(d) = &self.doc_id {
            filter.insert("doc_id".into(), serde_json::Value::String(d.clone()));
        }
        if generation > 1 {
            filter.insert("generation".into(), serde_json::json!(generation));
        }
        filter
    }
}

/// Whether a live chunk's version matches the request exactly: Vectorize
/// compares strings on their first 64 bytes, so every filter is checked
/// again against D1's own values.
fn matches_exactly(req: &SearchRequest, row: &LiveChunkRow) -> bool {
    if req
        .doc_id
        .as_ref()
        .is_some_and(|d| d != split_key(&row.doc_id).1)
    {
        return false;
    }
    if req.metadata.is_empty() {
        return true;
    }
    let metadata: serde_json::Map<String, serde_json::Value> = row
        .metadata
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    req.metadata.iter().all(|(k, v)| metadata.get(k) == Some(v))
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn search(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
    ) -> Result<Vec<SearchHit>, PortError> {
        // Search serves exactly one generation: the active one.
        let active = self.store.active_generation().await?.ok_or(PortError::new(
            FailureBucket::Internal,
            "no_active_generation",
        ))?;
        // The query is embedded by the active generation's own model.
        let Some(model) = self.cfg.embed_model_for(&active.index_config) else {
            // This Worker cannot embed with the model of the vectors.
            return Err(PortError::new(
                FailureBucket::IndexMisconfigured,
                "generation_embedder_mismatch",
            ));
        };
        let query = std::slice::from_ref(&req.query);
        let retries = self.cfg.search_retries_max;
        let vectors = retrying(retries, || self.embedder.embed(&model, query)).await?;
        let [vector] = vectors.as_slice() else {
            return Err(PortError::new(FailureBucket::EmbedRejected, "embed_shape"));
        };
        let filter = req.index_filter(active.generation);
        // Candidates per result wanted: stale and orphan ones are dropped
        // below. If they crowd out the live ones, one second, wider query.
        let first = (req.top_k * self.cfg.search_overfetch_factor)
            .min(self.cfg.index_query_top_k_max)
            .max(req.top_k);
        let mut want = first;
        let namespace = if self.bugs.has(Bug::SearchUnfenced) {
            crate::bugs::EVERY_NAMESPACE
        } else {
            tenant.as_str()
        };
        loop {
            let matches = retrying(retries, || {
                self.index.query(vector, want, namespace, &filter)
            })
            .await?;
            let exhausted = matches.len() < want;
            let hits = self.serve(tenant, req, active.generation, matches).await?;
            let widest = want >= self.cfg.index_query_top_k_max;
            if hits.len() >= req.top_k || exhausted || widest {
                return Ok(hits);
            }
            want = self.cfg.index_query_top_k_max;
        }
    }

    /// Of the index's candidates, in order, the live chunks of the active
    /// generation that match the request exactly, at most `top_k`.
    async fn serve(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
        generation: u32,
        matches: Vec<crate::ports::VectorMatch>,
    ) -> Result<Vec<SearchHit>, PortError> {
        if matches.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = matches.iter().map(|m| m.id.clone()).collect();
        let mut live: HashMap<String, LiveChunkRow> = self
            .store
            .live_chunks(&ids, generation, tenant.as_str(), self.bugs)
            .await?
            .into_iter()
            .map(|r| (r.vector_id.clone(), r))
            .collect();
        if self.bugs.has(Bug::SearchUnfenced) {
            // The seeded bug: the live chunks of every tenant.
            let max = self.cfg.tenants_max as usize;
            for t in self.store.tenants_page("", max).await? {
                let of_t = self
                    .store
                    .live_chunks(&ids, generation, &t.tenant_id, self.bugs);
                live.extend(of_t.await?.into_iter().map(|r| (r.vector_id.clone(), r)));
            }
        }
        let mut hits = Vec::new();
        for m in matches {
            let Some(row) = live.remove(&m.id) else {
                continue;
            };
            if !matches_exactly(req, &row) {
                continue;
            }
            hits.push(SearchHit {
                doc_id: split_key(&row.doc_id).1.to_string(),
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
        Ok(hits)
    }
}

/// Runs `call`, and again up to `retries` times while it fails
/// transiently: a search is one request, so a blip of the embedder or the
/// index gets a bounded retry (no delay) instead of a 5xx. With 20% of calls
/// failing, two retries leave about 1 search in 60 failing (one try: 1 in 3).
async fn retrying<T, F, Fut>(retries: u32, call: F) -> Result<T, PortError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, PortError>>,
{
    let mut left = retries;
    loop {
        match call().await {
            Err(e) if e.bucket.is_transient() && left > 0 => left -= 1,
            other => return other,
        }
    }
}
