//! Search: `POST /v1/search` parses the request with `&Config` (query within
//! the embedding model's token bound, `top_k`, the mode, highlights, a
//! filter within the index's limit), applies it (the pipeline serves only what D1 holds as live), and
//! renders the hits.
//!
//! May import: `config`, `pipeline`, `ports`, and `super` (errors, shared
//! validation).

use super::body::{Shape, METADATA};
use super::fields::{json_body, object, only_fields, parse_doc_id, parse_metadata};
use super::{ok, to_json, ApiError, ApiRequest, ApiResponse};
use crate::config::Config;
use crate::core::ids::TenantId;
use crate::pipeline::{Pipeline, SearchMode, SearchRequest};
use crate::ports::{Clock, Database, Embedder, JobQueue, MetadataFilter, VectorIndex};
use serde_json::{Map, Value};

/// `POST /v1/search`.
pub(super) async fn post<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    req: &ApiRequest<'_>,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let body = json_body(&p.cfg, req, &SEARCH)?;
    let sreq = parse_search(&p.cfg, &body)?;
    let answer = p.answer(tenant, &sreq).await.map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(answer)?))
}

/// `{"query", "top_k"?, "mode"?, "highlight"?, "filter"?: {"doc_id"?, "metadata"?}}`.
/// The body of `POST /v1/search`.
const SEARCH: Shape = Shape::Object(&[
    ("query", Shape::Scalar),
    ("top_k", Shape::Scalar),
    ("mode", Shape::Scalar),
    ("highlight", Shape::Scalar),
    (
        "filter",
        Shape::Object(&[("doc_id", Shape::Scalar), ("metadata", METADATA)]),
    ),
]);

fn parse_search(cfg: &Config, body: &Value) -> Result<SearchRequest, ApiError> {
    let obj = object(body)?;
    only_fields(obj, &["query", "top_k", "mode", "highlight", "filter"], "")?;
    let top_k = match obj.get("top_k") {
        None | Some(Value::Null) => cfg.search_top_k_default,
        Some(v) => match v.as_u64() {
            Some(k) if k >= 1 && k as usize <= cfg.search_top_k_max => k as usize,
            _ => {
                return Err(ApiError::field(
                    "top_k",
                    &format!("must be an integer in 1..={}", cfg.search_top_k_max),
                ))
            }
        },
    };
    let (doc_id, metadata) = match obj.get("filter") {
        None | Some(Value::Null) => (None, MetadataFilter::new()),
        Some(Value::Object(f)) => parse_filter(cfg, f)?,
        Some(_) => return Err(ApiError::field("filter", "must be an object")),
    };
    let mode = match obj.get("mode") {
        None | Some(Value::Null) => SearchMode::default(),
        Some(Value::String(m)) => SearchMode::parse(m).ok_or_else(|| {
            ApiError::field("mode", "must be \"hybrid\", \"vector\" or \"keyword\"")
        })?,
        Some(_) => return Err(ApiError::field("mode", "must be a string")),
    };
    let query = parse_query_text(cfg, obj, mode)?;
    let highlight = match obj.get("highlight") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::field("highlight", "must be a boolean")),
    };
    let req = SearchRequest {
        query,
        top_k,
        doc_id,
        metadata,
        mode,
        highlight,
    };
    // The filter as the index gets it (with the largest generation number):
    // over the index's limit it would be refused, not a 500.
    let filter_bytes =
        serde_json::to_string(&req.index_filter(u32::MAX)).map_or(usize::MAX, |f| f.len());
    if filter_bytes > cfg.index_filter_bytes_max {
        return Err(ApiError::field(
            "filter",
            &format!(
                "is {filter_bytes} bytes for the index, over its {} (INDEX_FILTER_BYTES_MAX)",
                cfg.index_filter_bytes_max
            ),
        ));
    }
    Ok(req)
}

/// The query: 1 to `SEARCH_QUERY_BYTES_MAX` bytes, not blank. A mode that
/// embeds the query (`hybrid`, `vector`) also needs it within the tokens
/// the embedding model takes (the model would truncate or refuse a longer
/// one: refused here, never silently); `keyword` makes no embedder call, so
/// the model's limit is not its limit.
fn parse_query_text(
    cfg: &Config,
    obj: &Map<String, Value>,
    mode: SearchMode,
) -> Result<String, ApiError> {
    let max = cfg.search_query_bytes_max;
    let query = match obj.get("query") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= max => s.clone(),
        Some(Value::String(_)) => {
            return Err(ApiError::field(
                "query",
                &format!("must be 1-{max} bytes (SEARCH_QUERY_BYTES_MAX) and not blank"),
            ))
        }
        Some(_) => return Err(ApiError::field("query", "must be a string")),
        None => return Err(ApiError::field("query", "is required")),
    };
    if mode == SearchMode::Keyword {
        return Ok(query);
    }
    let tokens = cfg.embedding_tokenizer.count(&query);
    let tokens_max = cfg.query_tokens_max();
    if tokens > tokens_max {
        // The count is an upper bound: scale the query's length by it to
        // say how long a query fits.
        let fits_chars = query.chars().count() * tokens_max / tokens;
        return Err(ApiError::new(
            422,
            "query_too_long",
            format!(
                "the query is too long for the embedding model: it counts as up to {tokens} tokens and the model takes {tokens_max}; \
                 shorten it to about {fits_chars} characters, or search with \"mode\": \"keyword\", which does not embed the query"
            ),
        ));
    }
    Ok(query)
}

/// The search filter: `doc_id` and `metadata` equalities.
fn parse_filter(
    cfg: &Config,
    f: &Map<String, Value>,
) -> Result<(Option<String>, MetadataFilter), ApiError> {
    let mut doc_id = None;
    let mut metadata = MetadataFilter::new();
    for (k, v) in f {
        match (k.as_str(), v) {
            ("doc_id", Value::String(s)) => {
                doc_id = Some(parse_doc_id(s, "filter.doc_id")?.as_str().to_string())
            }
            ("doc_id", _) => return Err(ApiError::field("filter.doc_id", "must be a string")),
            ("metadata", Value::Object(m)) => {
                metadata = parse_metadata(cfg, m, "filter.metadata")?
                    .into_iter()
                    .collect();
            }
            ("metadata", _) => return Err(ApiError::field("filter.metadata", "must be an object")),
            _ => return Err(ApiError::unknown_field("filter.", k)),
        }
    }
    Ok((doc_id, metadata))
}
