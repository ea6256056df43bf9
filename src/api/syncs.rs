//! Source sync sessions: open one (`POST /v1/syncs`), list them (`GET
//! /v1/syncs`), read one, mark
//! documents seen by content hash (`POST /v1/syncs/{id}/seen`), and commit
//! (`POST /v1/syncs/{id}/commit`). Documents are written into a session
//! by `documents.rs` (`source` and `sync_id` fields).
//!
//! May import: `config`, `core`, `pipeline`, `ports`, and `super` (errors,
//! shared validation).

use super::body::Shape;
use super::documents::{batch_documents_max, parse_source};
use super::fields::{
    json_body, object, only_fields, parse_doc_id, parse_query, percent_decode, query_limit,
};
use super::{ok, refused, to_json, ApiError, ApiRequest, ApiResponse};
use crate::core::ids::TenantId;
use crate::core::state::SyncState;
use crate::pipeline::{Pipeline, SeenClaim, SYNC_CURSOR_MAX};
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use serde_json::{json, Value};

/// `POST /v1/syncs` `{"source"}`: a new open session.
pub(super) async fn open<D, V, E, Q, C>(
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
    let body = json_body(&p.cfg, req, &Shape::Object(&[("source", Shape::Scalar)]))?;
    let obj = object(&body)?;
    only_fields(obj, &["source"], "")?;
    let source = match obj.get("source") {
        Some(Value::String(s)) => parse_source(s)?,
        Some(_) => return Err(ApiError::field("source", "must be a string")),
        None => return Err(ApiError::field("source", "is required")),
    };
    let view = p
        .open_sync(tenant, &source, &req.entropy)
        .await
        .map_err(ApiError::from_port)?
        .map_err(refused)?;
    Ok(ok(201, to_json(view)?))
}

/// `GET /v1/syncs?source=&state=&cursor=&limit=`: a page of the tenant's
/// sessions, newest first, each as `get` shows it (see `SyncPage` for what
/// a page scans and shows). Parameters other than these are ignored, as
/// the other listings do.
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
    let source = q.get("source").map(|s| parse_source(s)).transpose()?;
    let state = q
        .get("state")
        .map(|s| {
            SyncState::parse(s).ok_or_else(|| {
                ApiError::field(
                    "state",
                    "must be one of open, committing, committed, expired, superseded",
                )
            })
        })
        .transpose()?;
    // The cursor is a session's `seq` as an earlier page gave it.
    let before = q
        .get("cursor")
        .map(|c| match c.parse::<i64>() {
            Ok(n) if (1..=SYNC_CURSOR_MAX).contains(&n) && !c.starts_with('+') => Ok(n),
            _ => Err(ApiError::field(
                "cursor",
                "must be a next_cursor of this listing",
            )),
        })
        .transpose()?;
    let limit = query_limit(&q, p.cfg.listing_page_default, p.cfg.listing_page_max)?;
    let page = p
        .sync_page(tenant, source.as_deref(), state, before, limit)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(page)?))
}

/// `GET /v1/syncs/{id}`.
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
    let id = percent_decode(id)?;
    let view = p
        .sync_view(tenant, &id)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(view.map_err(refused)?)?))
}

/// `POST /v1/syncs/{id}/commit` `{"allow_mass_delete"?}` (an empty body is
/// `{}`): `202` with the session's state and figures, while it deletes in
/// the background or once it has.
pub(super) async fn commit<D, V, E, Q, C>(
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
    let id = percent_decode(id)?;
    let body = if req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        json_body(
            &p.cfg,
            req,
            &Shape::Object(&[("allow_mass_delete", Shape::Scalar)]),
        )?
    };
    let obj = object(&body)?;
    only_fields(obj, &["allow_mass_delete"], "")?;
    let allow = match obj.get("allow_mass_delete") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::field("allow_mass_delete", "must be a boolean")),
    };
    let view = p
        .commit_sync(tenant, &id, allow)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(202, to_json(view.map_err(refused)?)?))
}

/// The body of `POST /v1/syncs/{id}/seen`.
const SEEN: Shape = Shape::Object(&[(
    "documents",
    Shape::Array {
        max: batch_documents_max,
        item: &Shape::Object(&[("doc_id", Shape::Scalar), ("content_hash", Shape::Scalar)]),
    },
)]);

/// `POST /v1/syncs/{id}/seen` `{"documents": [{"doc_id", "content_hash"}]}`:
/// those the ledger holds with that content hash count as seen, without
/// their text; `{"results": [{"doc_id", "seen"}]}` says which, and the
/// client sends the others.
pub(super) async fn seen<D, V, E, Q, C>(
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
    let id = percent_decode(id)?;
    let body = json_body(&p.cfg, req, &SEEN)?;
    let obj = object(&body)?;
    only_fields(obj, &["documents"], "")?;
    let Some(Value::Array(docs)) = obj.get("documents") else {
        return Err(ApiError::field("documents", "must be an array"));
    };
    if docs.is_empty() || docs.len() > p.cfg.intake_batch_documents_max {
        return Err(ApiError::field(
            "documents",
            &format!(
                "must hold 1 to {} documents",
                p.cfg.intake_batch_documents_max
            ),
        ));
    }
    let mut claims = Vec::with_capacity(docs.len());
    for d in docs {
        let o = object(d)?;
        only_fields(o, &["doc_id", "content_hash"], "documents[].")?;
        let doc_id = match o.get("doc_id") {
            Some(Value::String(s)) => parse_doc_id(s, "documents[].doc_id")?,
            _ => return Err(ApiError::field("documents[].doc_id", "must be a string")),
        };
        let content_hash = match o.get("content_hash") {
            Some(Value::String(h))
                if h.len() == 64
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
            {
                h.clone()
            }
            _ => {
                return Err(ApiError::field(
                    "documents[].content_hash",
                    "must be 64 lowercase hex digits (SHA-256)",
                ))
            }
        };
        claims.push(SeenClaim {
            doc_id,
            content_hash,
        });
    }
    let seen = p
        .sync_mark_seen(tenant, &id, &claims)
        .await
        .map_err(ApiError::from_port)?
        .map_err(refused)?;
    let results: Vec<Value> = claims
        .iter()
        .zip(seen)
        .map(|(c, s)| json!({ "doc_id": c.doc_id.as_str(), "seen": s }))
        .collect();
    Ok(ok(200, json!({ "results": results })))
}
