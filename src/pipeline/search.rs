//! Search: embed the query, ask the index for candidates, and serve only
//! those D1 holds as live. The index is eventually consistent and may hold
//! old or orphan vectors; they are dropped here, never served. A search is
//! a tenant's: the index is asked for its namespace only, and D1 serves
//! only its chunks (two fences, so neither alone decides isolation).
//!
//! Beside the vector ranking, the keyword index (FTS5 in D1, holding only
//! live chunks; see migration 0010) ranks the same fenced chunks by bm25.
//! A hybrid search (the default) fuses the two by reciprocal rank.

use super::Pipeline;
use crate::bugs::Bug;
use crate::core::failure::FailureBucket;
use crate::core::ids::{split_key, DocId, DocKey, TenantId};
use crate::core::keyword;
use crate::core::metadata::value_eq;
use crate::core::terms;
use crate::ports::{Clock, Database, Embedder, JobQueue, MetadataFilter, PortError, VectorIndex};
use crate::store::LiveChunkRow;
use serde::Serialize;
use std::collections::HashMap;

/// How a search ranks: by both rankings fused (the default), by vector
/// similarity alone, or by the keyword index (bm25) alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    #[default]
    Hybrid,
    Vector,
    Keyword,
}

impl SearchMode {
    pub fn parse(s: &str) -> Option<SearchMode> {
        match s {
            "hybrid" => Some(SearchMode::Hybrid),
            "vector" => Some(SearchMode::Vector),
            "keyword" => Some(SearchMode::Keyword),
            _ => None,
        }
    }
    fn uses_vectors(self) -> bool {
        self != SearchMode::Keyword
    }
    fn uses_keywords(self) -> bool {
        self != SearchMode::Vector
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    pub top_k: usize,
    pub doc_id: Option<String>,
    pub metadata: MetadataFilter,
    pub mode: SearchMode,
    /// Whether each hit carries a snippet with the query's terms marked.
    pub highlight: bool,
}

/// A hit's scores: its vector similarity and its keyword (bm25) score, each
/// if the hit is in that ranking, and its fused (reciprocal rank) score
/// over the rankings the mode uses.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scores {
    pub vector: Option<f32>,
    pub keyword: Option<f32>,
    pub fused: f32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    pub doc_id: String,
    /// The live version (the chunk's row may have been written by an
    /// earlier version that held the same chunk).
    pub version: u32,
    /// The chunk's place in its document: an order key (0, 1, 2, … in a
    /// document's first version; a chunk inserted later gets a key between
    /// its neighbours', so no other chunk's key changes).
    #[serde(serialize_with = "order_key")]
    pub chunk: f64,
    /// The index generation served (the active one).
    pub generation: u32,
    pub text: String,
    /// What the results are ordered by: the fused score (hybrid), the
    /// vector similarity (vector) or the bm25 score (keyword).
    pub score: f32,
    pub scores: Scores,
    /// The chunk's text around the query's terms, HTML-escaped, the terms
    /// in `<mark>` (`"highlight": true` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// An order key as JSON: a whole number as an integer (`3`, not `3.0`:
/// most keys are, and clients that read `chunk` as an integer keep doing
/// so), any other as a number with its fraction.
fn order_key<S: serde::Serializer>(key: &f64, s: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact
    if key.fract() == 0.0 && key.abs() < EXACT {
        s.serialize_i64(*key as i64)
    } else {
        s.serialize_f64(*key)
    }
}

impl SearchRequest {
    /// A hybrid search for `query`, unfiltered, without highlights.
    pub fn new(query: impl Into<String>, top_k: usize) -> SearchRequest {
        SearchRequest {
            query: query.into(),
            top_k,
            doc_id: None,
            metadata: MetadataFilter::new(),
            mode: SearchMode::Hybrid,
            highlight: false,
        }
    }

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
    req.metadata
        .iter()
        .all(|(k, v)| metadata.get(k).is_some_and(|have| value_eq(have, v)))
}

/// A served candidate of one ranking: a live chunk of the request's
/// tenant and generation that matches it exactly, with its score there.
struct Candidate {
    row: LiveChunkRow,
    score: f32,
}

/// A search's answer: its hits, and the query's terms the keyword ranking
/// left out, the commonest of the tenant's (`KEYWORD_MATCHES_MAX`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchAnswer {
    pub results: Vec<SearchHit>,
    pub keyword_terms_skipped: Vec<String>,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// The hits of [`Pipeline::answer`].
    pub async fn search(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
    ) -> Result<Vec<SearchHit>, PortError> {
        Ok(self.answer(tenant, req).await?.results)
    }

    /// A search of `tenant`'s live chunks: the hits, and the terms the
    /// keyword ranking left out.
    pub async fn answer(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
    ) -> Result<SearchAnswer, PortError> {
        // Search serves exactly one generation: the active one.
        let active = self.store.active_generation().await?.ok_or(PortError::new(
            FailureBucket::Internal,
            "no_active_generation",
        ))?;
        // Each ranking's candidates: as many as the results wanted in a
        // single-ranking mode; a pool to fuse from in hybrid mode.
        let pool = match req.mode {
            SearchMode::Hybrid => (req.top_k * self.cfg.search_overfetch_factor)
                .min(self.cfg.index_query_top_k_max)
                .max(req.top_k),
            SearchMode::Vector | SearchMode::Keyword => req.top_k,
        };
        let vector = match req.mode.uses_vectors() {
            true => self.vector_candidates(tenant, req, &active, pool).await?,
            false => Vec::new(),
        };
        let (keyword, keyword_terms_skipped) = match req.mode.uses_keywords() {
            true => self.keyword_candidates(tenant, req, &active, pool).await?,
            false => (Vec::new(), Vec::new()),
        };
        Ok(SearchAnswer {
            results: self.fused(req, vector, keyword),
            keyword_terms_skipped,
        })
    }

    /// The vector ranking: the index's nearest candidates, in order, that
    /// D1 serves, at most `want`.
    async fn vector_candidates(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
        active: &crate::store::GenerationRow,
        wanted: usize,
    ) -> Result<Vec<Candidate>, PortError> {
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
        let first = (wanted * self.cfg.search_overfetch_factor)
            .min(self.cfg.index_query_top_k_max)
            .max(wanted);
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
            let hits = self
                .serve(tenant, req, active.generation, matches, wanted)
                .await?;
            let widest = want >= self.cfg.index_query_top_k_max;
            if hits.len() >= wanted || exhausted || widest {
                return Ok(hits);
            }
            want = self.cfg.index_query_top_k_max;
        }
    }

    /// Of the index's candidates, in order, the live chunks of the active
    /// generation that match the request exactly, at most `wanted`.
    async fn serve(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
        generation: u32,
        matches: Vec<crate::ports::VectorMatch>,
        wanted: usize,
    ) -> Result<Vec<Candidate>, PortError> {
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
            hits.push(Candidate {
                row,
                score: m.score,
            });
            if hits.len() == wanted {
                break;
            }
        }
        Ok(hits)
    }

    /// The keyword ranking: the keyword index's best matches (bm25) among
    /// the tenant's live chunks of the active generation that match the
    /// request exactly, at most `wanted`, and the query's terms it left
    /// out (`KEYWORD_MATCHES_MAX`). A query with nothing to match (no
    /// letter or number) has none. No embedder or index call.
    async fn keyword_candidates(
        &self,
        tenant: &TenantId,
        req: &SearchRequest,
        active: &crate::store::GenerationRow,
        wanted: usize,
    ) -> Result<(Vec<Candidate>, Vec<String>), PortError> {
        let terms = terms::query_terms(&req.query, self.cfg.search_keyword_phrases_max);
        if terms.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let doc_key = match &req.doc_id {
            None => None,
            Some(d) => match DocId::parse(d) {
                Ok(d) => Some(DocKey::new(tenant, &d)),
                // The API admits valid IDs only; no document has another.
                Err(_) => return Ok((Vec::new(), Vec::new())),
            },
        };
        let matches_max = self.cfg.keyword_matches_max;
        let weights = self
            .store
            .keyword_weights(&terms, tenant.as_str(), matches_max, self.bugs)
            .await?;
        let Some(weights) = weights else {
            return Ok((Vec::new(), Vec::new()));
        };
        let mut limit = wanted;
        loop {
            let rows = self
                .store
                .keyword_chunks(
                    &weights,
                    active.generation,
                    tenant.as_str(),
                    doc_key.as_ref().map(DocKey::as_str),
                    limit,
                    self.bugs,
                )
                .await?;
            let exhausted = rows.len() < limit;
            let boost = self.cfg.search_keyword_phrase_boost_percent;
            let mut scored: Vec<(f64, crate::store::KeywordChunkRow)> = rows
                .into_iter()
                .map(|r| {
                    let s = keyword::phrase_boosted(r.score, &r.chunk.text, &req.query, boost);
                    (s, r)
                })
                .collect();
            // Stable: equal scores keep the index's order.
            scored.sort_by(|a, b| b.0.total_cmp(&a.0));
            let hits: Vec<Candidate> = scored
                .into_iter()
                .filter(|(_, r)| matches_exactly(req, &r.chunk))
                .take(wanted)
                .map(|(score, r)| Candidate {
                    row: r.chunk,
                    score: score as f32,
                })
                .collect();
            // Rows dropped by the metadata filter: one second, wider read.
            let widest = limit >= self.cfg.index_query_top_k_max;
            if hits.len() >= wanted || exhausted || widest {
                return Ok((hits, weights.skipped));
            }
            limit = self.cfg.index_query_top_k_max;
        }
    }

    /// The results: the rankings fused by reciprocal rank (each ranking
    /// the mode uses, weighted as configured), at most `top_k`.
    fn fused(
        &self,
        req: &SearchRequest,
        vector: Vec<Candidate>,
        keyword: Vec<Candidate>,
    ) -> Vec<SearchHit> {
        let ids = |c: &[Candidate]| -> Vec<String> {
            c.iter().map(|c| c.row.vector_id.clone()).collect()
        };
        let (vector_ids, keyword_ids) = (ids(&vector), ids(&keyword));
        // Hybrid's third ranking: the candidates that hold the query
        // verbatim, keyword matches first (in their order), then vector ones.
        let verbatim_ids: Vec<String> = match req.mode {
            SearchMode::Hybrid => keyword
                .iter()
                .chain(&vector)
                .filter(|c| keyword::contains_verbatim(&c.row.text, &req.query))
                .map(|c| c.row.vector_id.clone())
                .collect(),
            SearchMode::Vector | SearchMode::Keyword => Vec::new(),
        };
        let percent = |p: u32| f64::from(p) / 100.0;
        let lists = [
            (
                percent(self.cfg.search_vector_weight_percent),
                &vector_ids[..],
            ),
            (
                percent(self.cfg.search_keyword_weight_percent),
                &keyword_ids[..],
            ),
            (
                percent(self.cfg.search_verbatim_weight_percent),
                &verbatim_ids[..],
            ),
        ];
        let fused = keyword::fuse(&lists, f64::from(self.cfg.search_rrf_k));
        let mut rows: HashMap<String, LiveChunkRow> = HashMap::new();
        let mut vector_scores = HashMap::new();
        let mut keyword_scores = HashMap::new();
        for c in vector {
            vector_scores.insert(c.row.vector_id.clone(), c.score);
            rows.insert(c.row.vector_id.clone(), c.row);
        }
        for c in keyword {
            keyword_scores.insert(c.row.vector_id.clone(), c.score);
            rows.entry(c.row.vector_id.clone()).or_insert(c.row);
        }
        fused
            .into_iter()
            .take(req.top_k)
            .filter_map(|(id, fused)| {
                let row = rows.remove(&id)?;
                let scores = Scores {
                    vector: vector_scores.get(&id).copied(),
                    keyword: keyword_scores.get(&id).copied(),
                    fused: fused as f32,
                };
                let score = match req.mode {
                    SearchMode::Hybrid => scores.fused,
                    SearchMode::Vector => scores.vector.unwrap_or_default(),
                    SearchMode::Keyword => scores.keyword.unwrap_or_default(),
                };
                let snippet = req.highlight.then(|| {
                    keyword::snippet(&row.text, &req.query, self.cfg.search_snippet_chars)
                });
                Some(SearchHit {
                    doc_id: split_key(&row.doc_id).1.to_string(),
                    version: row.version,
                    chunk: row.ord,
                    generation: row.generation,
                    text: row.text,
                    score,
                    scores,
                    snippet,
                })
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use super::{Scores, SearchHit};

    fn hit(chunk: f64) -> serde_json::Value {
        let h = SearchHit {
            doc_id: "d".into(),
            version: 1,
            chunk,
            generation: 1,
            text: "t".into(),
            score: 0.5,
            scores: Scores {
                vector: None,
                keyword: None,
                fused: 0.5,
            },
            snippet: None,
        };
        serde_json::to_value(h).unwrap()["chunk"].clone()
    }

    #[test]
    fn a_whole_order_key_is_an_integer_in_json_and_a_fraction_keeps_its_fraction() {
        assert_eq!(hit(3.0).to_string(), "3");
        assert_eq!(hit(-2.0).to_string(), "-2");
        assert_eq!(hit(600.5).to_string(), "600.5");
    }
}
