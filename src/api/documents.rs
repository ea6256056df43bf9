//! Documents and their jobs: write one (`PUT`, `POST`), a batch (`POST`
//! with `documents`), delete one, read one's state, list the tenant's
//! (`GET /v1/documents`), reindex one, and read a job. Each route parses
//! with `&Config` (through `fields`), applies (calls the pipeline), and
//! renders.
//!
//! May import: `config`, `core`, `pipeline`, `ports`, and `super` (errors,
//! shared validation).

use super::body::{Shape, METADATA};
use super::fields::{
    json_body, object, only_fields, parse_doc_id, parse_metadata, parse_query, path_doc_id,
    percent_decode, query_int, query_limit, truncate, Query,
};
use super::{ok, refused, to_json, ApiError, ApiRequest, ApiResponse};
use crate::config::Config;
use crate::core::chunk::ContentType;
use crate::core::ids::{DocId, DocKey, TenantId};
use crate::pipeline::{
    DocumentFilter, DocumentInput, DocumentState, DocumentView, IntakeError, IntakeItem,
    IntakeOutcome, IntakeScope, Pipeline, Quota, Refused, SourceWrite,
};
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use serde_json::{json, Map, Value};

/// The `Retry-After` of a storage quota's 429: the quota frees only when
/// the tenant deletes documents or the operator raises it, so a client
/// should not retry soon.
const QUOTA_RETRY_AFTER_SECONDS: u64 = 3600;

/// `PUT /v1/documents/{doc_id}`.
pub(super) async fn put<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    req: &ApiRequest<'_>,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let doc_id = path_doc_id(id)?;
    let body = json_body(&p.cfg, req, &DOCUMENT)?;
    let input = parse_document(&p.cfg, &body, Some(doc_id))?;
    let scope = parse_source_write(object(&body)?)?;
    write_one(p, tenant, IntakeItem::Put(input), scope.as_ref()).await
}

/// `POST /v1/documents`: one document, or a batch (`{"documents": [...]}`).
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
    let body = json_body(&p.cfg, req, &POST_DOCUMENTS)?;
    if body.get("documents").is_some() {
        return batch(p, tenant, &body).await;
    }
    let input = parse_document(&p.cfg, &body, None)?;
    let scope = parse_source_write(object(&body)?)?;
    write_one(p, tenant, IntakeItem::Put(input), scope.as_ref()).await
}

/// `DELETE /v1/documents/{doc_id}`.
pub(super) async fn delete<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let doc_id = path_doc_id(id)?;
    write_one(p, tenant, IntakeItem::Delete(doc_id), None).await
}

/// `GET /v1/documents/{doc_id}`.
pub(super) async fn get<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let doc_id = path_doc_id(id)?;
    let view = p
        .document(&DocKey::new(tenant, &doc_id))
        .await
        .map_err(ApiError::from_port)?;
    match view {
        Some(view) => Ok(ok(200, to_json(view)?)),
        None => Err(refused(Refused::DocumentNotFound)),
    }
}

/// `GET /v1/documents?state=&source=&updated_since=&cursor=&limit=`: a page
/// of the tenant's own documents in doc_id order, each as `get` shows it
/// (see `TenantDocumentPage` for what a page scans and shows). Parameters
/// other than these are ignored, as the other listings do.
pub(super) async fn list<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    query: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let q = parse_query(query)?;
    let filter = DocumentFilter {
        state: query_state(&q)?,
        source: q.get("source").map(|s| parse_source(s)).transpose()?,
        updated_since: query_int(&q, "updated_since")?,
    };
    let cursor = q
        .get("cursor")
        .map(|c| parse_doc_id(c, "cursor"))
        .transpose()?;
    let limit = query_limit(&q, p.cfg.listing_page_default, p.cfg.listing_page_max)?;
    let page = p
        .tenant_documents(tenant, &filter, cursor.as_ref(), limit)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(page)?))
}

/// The `state` filter of a document listing (absent: any state).
pub(super) fn query_state(q: &Query) -> Result<Option<DocumentState>, ApiError> {
    q.get("state")
        .map(|s| {
            DocumentState::parse(s).ok_or_else(|| {
                ApiError::field(
                    "state",
                    "must be one of queued, indexing, indexed, partially_indexed, repair_needed, failed, deleted",
                )
            })
        })
        .transpose()
}

/// `POST /v1/documents/{doc_id}/reindex`.
pub(super) async fn reindex<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let doc_id = path_doc_id(id)?;
    let out = p
        .reindex_document(&DocKey::new(tenant, &doc_id))
        .await
        .map_err(ApiError::from_port)?;
    let (version, job_id) = out.map_err(refused)?;
    Ok(ok(
        202,
        json!({ "doc_id": doc_id.as_str(), "version": version, "job_id": job_id }),
    ))
}

/// `GET /v1/jobs/{job_id}`.
pub(super) async fn job<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let job_id = percent_decode(id)?;
    // Another tenant's job answers as if absent.
    let view = p.job(tenant, &job_id).await.map_err(ApiError::from_port)?;
    match view {
        Some(view) => Ok(ok(200, to_json(view)?)),
        None => Err(ApiError::new(404, "job_not_found", "no such job")),
    }
}

/// A document's body (`PUT`, or an item of a batch).
const DOCUMENT: Shape = Shape::Object(&[
    ("doc_id", Shape::Scalar),
    ("text", Shape::Scalar),
    ("metadata", METADATA),
    ("content_type", Shape::Scalar),
    ("source", Shape::Scalar),
    ("sync_id", Shape::Scalar),
]);

/// `POST /v1/documents`: one document, or a batch of them.
const POST_DOCUMENTS: Shape = Shape::Object(&[
    (
        "documents",
        Shape::Array {
            max: batch_documents_max,
            item: &DOCUMENT,
        },
    ),
    ("doc_id", Shape::Scalar),
    ("text", Shape::Scalar),
    ("metadata", METADATA),
    ("content_type", Shape::Scalar),
    ("source", Shape::Scalar),
    ("sync_id", Shape::Scalar),
]);

/// Items of a batch (and of a sync's `seen`).
pub(super) fn batch_documents_max(cfg: &Config) -> usize {
    cfg.intake_batch_documents_max
}

/// Validates one document object. `path_doc_id` is the ID from the URL (PUT).
fn parse_document(
    cfg: &Config,
    body: &Value,
    path_doc_id: Option<DocId>,
) -> Result<DocumentInput, ApiError> {
    let obj = object(body)?;
    only_fields(
        obj,
        &[
            "doc_id",
            "text",
            "metadata",
            "content_type",
            "source",
            "sync_id",
        ],
        "",
    )?;
    let doc_id = match (path_doc_id, obj.get("doc_id")) {
        (Some(id), None) => id,
        (Some(id), Some(Value::String(s))) if s == id.as_str() => id,
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "doc_id",
                "must match the document ID in the path",
            ))
        }
        (None, Some(Value::String(s))) => parse_doc_id(s, "doc_id")?,
        (None, Some(_)) => return Err(ApiError::field("doc_id", "must be a string")),
        (None, None) => return Err(ApiError::field("doc_id", "is required")),
    };
    Ok(DocumentInput {
        doc_id,
        text: parse_text(cfg, obj)?,
        content_type: parse_content_type(obj)?,
        metadata: match obj.get("metadata") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => parse_metadata(cfg, m, "metadata")?,
            Some(_) => return Err(ApiError::field("metadata", "must be an object")),
        },
    })
}

/// A document's `source` and `sync_id` (a sync session of that source),
/// if given: a source is 1 to `SOURCE_BYTES_MAX` bytes of UTF-8 without
/// control characters; a session needs its source.
pub(super) fn parse_source_write(
    obj: &Map<String, Value>,
) -> Result<Option<SourceWrite>, ApiError> {
    let sync_id = match obj.get("sync_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Some(s.clone())
        }
        Some(_) => {
            return Err(ApiError::field(
                "sync_id",
                "must be a sync session's ID (1 to 64 printable ASCII characters)",
            ))
        }
    };
    let source = match obj.get("source") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(parse_source(s)?),
        Some(_) => return Err(ApiError::field("source", "must be a string")),
    };
    match (source, sync_id) {
        (Some(source), sync_id) => Ok(Some(SourceWrite { source, sync_id })),
        (None, Some(_)) => Err(ApiError::field(
            "source",
            "is required with sync_id (the session's source)",
        )),
        (None, None) => Ok(None),
    }
}

/// Bytes of UTF-8 a source name may hold.
pub(super) const SOURCE_BYTES_MAX: usize = 128;

/// A source name: 1 to `SOURCE_BYTES_MAX` bytes, no control characters.
pub(super) fn parse_source(s: &str) -> Result<String, ApiError> {
    if s.is_empty() || s.len() > SOURCE_BYTES_MAX {
        return Err(ApiError::field("source", "must be 1 to 128 bytes of UTF-8"));
    }
    if s.chars().any(char::is_control) {
        return Err(ApiError::field(
            "source",
            "must not contain control characters",
        ));
    }
    Ok(s.to_string())
}

/// A document's `text`: a string within `DOCUMENT_BYTES_MAX`, not blank.
fn parse_text(cfg: &Config, obj: &Map<String, Value>) -> Result<String, ApiError> {
    let text = match obj.get("text") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ApiError::field("text", "must be a string")),
        None => return Err(ApiError::field("text", "is required")),
    };
    if text.len() > cfg.document_bytes_max {
        return Err(ApiError::new(
            413,
            "document_too_large",
            format!(
                "text is {} bytes; the limit is {} bytes",
                text.len(),
                cfg.document_bytes_max
            ),
        ));
    }
    if text.trim().is_empty() {
        return Err(ApiError::field(
            "text",
            "must contain non-whitespace characters",
        ));
    }
    Ok(text)
}

fn parse_content_type(obj: &Map<String, Value>) -> Result<ContentType, ApiError> {
    match obj.get("content_type") {
        None | Some(Value::Null) => Ok(ContentType::Plain),
        Some(Value::String(s)) => ContentType::parse(s).ok_or_else(|| {
            ApiError::new(
                415,
                "unsupported_content_type",
                "content_type must be text/plain or text/markdown",
            )
        }),
        Some(_) => Err(ApiError::field("content_type", "must be a string")),
    }
}

/// Writes one item and answers its outcome.
async fn write_one<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    item: IntakeItem,
    scope: Option<&SourceWrite>,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let out = intake(p, tenant, &[item], scope).await?;
    let out = out
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::new(500, "internal", "the intake returned no outcome"))?;
    let views = unchanged_views(p, tenant, std::slice::from_ref(&out)).await?;
    let (status, body) = render_outcome(out, &views);
    Ok(ok(status, body))
}

async fn intake<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    items: &[IntakeItem],
    scope: Option<&SourceWrite>,
) -> Result<Vec<IntakeOutcome>, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let scope = scope.map_or(IntakeScope::Plain, IntakeScope::Source);
    p.intake_in(tenant, items, scope)
        .await
        .map_err(|e| match e {
            IntakeError::SyncNotOpen => refused(Refused::SyncNotOpen),
            IntakeError::TenantMoving => refused(Refused::TenantMoving),
            IntakeError::Conflict => ApiError::new(
                409,
                "conflict",
                "a concurrent write to the same document won; retry",
            ),
            IntakeError::QuotaExceeded(Quota::Documents) => ApiError::too_many(
                "document_quota_exceeded",
                "the tenant stores as many documents as its quota allows; nothing was written",
                QUOTA_RETRY_AFTER_SECONDS,
            ),
            IntakeError::QuotaExceeded(Quota::Bytes) => ApiError::too_many(
                "byte_quota_exceeded",
                "the tenant stores as many text bytes as its quota allows; nothing was written",
                QUOTA_RETRY_AFTER_SECONDS,
            ),
            IntakeError::Port(e) => ApiError::from_port(e),
        })
}

/// The current state of the documents an intake left unchanged (read only
/// if there is one).
async fn unchanged_views<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    outcomes: &[IntakeOutcome],
) -> Result<Vec<DocumentView>, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let unchanged: Vec<DocKey> = outcomes
        .iter()
        .filter_map(|o| match o {
            IntakeOutcome::Unchanged { doc_id, .. } => DocId::parse(doc_id).ok(),
            _ => None,
        })
        .map(|d| DocKey::new(tenant, &d))
        .collect();
    if unchanged.is_empty() {
        return Ok(Vec::new());
    }
    p.documents(&unchanged).await.map_err(ApiError::from_port)
}

/// One intake outcome as a status and body, with the document's current
/// state for an unchanged one.
fn render_outcome(out: IntakeOutcome, views: &[DocumentView]) -> (u16, Value) {
    match out {
        IntakeOutcome::Queued {
            doc_id,
            version,
            job_id,
        } => (
            202,
            json!({ "doc_id": doc_id, "version": version, "job_id": job_id, "state": "queued" }),
        ),
        IntakeOutcome::Unchanged { doc_id, version } => {
            let state = views.iter().find(|v| v.doc_id == doc_id).map(|v| v.state);
            (
                200,
                json!({ "doc_id": doc_id, "version": version, "state": state, "unchanged": true }),
            )
        }
        IntakeOutcome::NotFound { .. } => {
            let e = refused(Refused::DocumentNotFound);
            (e.status, e.body())
        }
    }
}

/// `POST /v1/documents` with `{"documents": [...]}`: every item validated
/// first, the valid ones written in one batch, one result per item.
async fn batch<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    tenant: &TenantId,
    body: &Value,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let docs = parse_batch(&p.cfg, body)?;
    // Each item's slot: its index among the valid items, or why it is not.
    let mut slots: Vec<Result<usize, ApiError>> = Vec::with_capacity(docs.len());
    let mut items = Vec::new();
    // The batch's source and session: the first valid item's, which every
    // other item must share (one intake writes one source).
    let mut scope: Option<Option<SourceWrite>> = None;
    for d in docs {
        let parsed = parse_document(&p.cfg, d, None).and_then(|input| {
            let own = parse_source_write(object(d)?)?;
            match &scope {
                Some(first) if *first != own => Err(ApiError::field(
                    "source",
                    "every document of a batch must have the same source and sync_id",
                )),
                _ => Ok((input, own)),
            }
        });
        match parsed {
            Ok((input, own)) => {
                scope.get_or_insert(own);
                slots.push(Ok(items.len()));
                items.push(IntakeItem::Put(input));
            }
            Err(e) => slots.push(Err(e)),
        }
    }
    let scope = scope.flatten();
    let outcomes = if items.is_empty() {
        Vec::new()
    } else {
        intake(p, tenant, &items, scope.as_ref()).await?
    };
    let views = unchanged_views(p, tenant, &outcomes).await?;
    let results: Vec<Value> = slots
        .into_iter()
        .zip(docs)
        .map(|(slot, raw)| render_item(slot, raw, &outcomes, &views))
        .collect();
    Ok(ok(200, json!({ "results": results })))
}

/// A batch body: only `documents`, a non-empty array within
/// `INTAKE_BATCH_DOCUMENTS_MAX`.
fn parse_batch<'a>(cfg: &Config, body: &'a Value) -> Result<&'a Vec<Value>, ApiError> {
    let obj = object(body)?;
    only_fields(obj, &["documents"], "")?;
    let Some(Value::Array(docs)) = obj.get("documents") else {
        return Err(ApiError::field("documents", "must be an array"));
    };
    if docs.is_empty() {
        return Err(ApiError::field("documents", "must not be empty"));
    }
    if docs.len() > cfg.intake_batch_documents_max {
        return Err(ApiError::new(
            413,
            "batch_too_large",
            format!(
                "a batch holds at most {} documents",
                cfg.intake_batch_documents_max
            ),
        ));
    }
    Ok(docs)
}

/// One batch item's result: its outcome, or its validation error, with its
/// status (and the `doc_id` it gave, for an invalid one).
fn render_item(
    slot: Result<usize, ApiError>,
    raw: &Value,
    outcomes: &[IntakeOutcome],
    views: &[DocumentView],
) -> Value {
    match slot {
        Ok(i) => match outcomes.get(i) {
            Some(o) => {
                let (status, mut body) = render_outcome(o.clone(), views);
                if let Some(obj) = body.as_object_mut() {
                    obj.insert("status".into(), json!(status));
                }
                body
            }
            None => {
                json!({ "status": 500, "error": { "code": "internal", "message": "no outcome for this item" } })
            }
        },
        Err(e) => {
            let mut body = e.body();
            if let Some(obj) = body.as_object_mut() {
                obj.insert("status".into(), json!(e.status));
                if let Some(id) = raw.get("doc_id").and_then(Value::as_str) {
                    obj.insert("doc_id".into(), json!(truncate(id, 256)));
                }
            }
            body
        }
    }
}
