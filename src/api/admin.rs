//! The operators' routes under `/v1/admin/`: tenants (`tenants.rs`), repair-run reports, the
//! dead-letter archive and redrives, index generations, and backfills
//! (`reindex`). The route table is [`route`]; each route parses with
//! `&Config` (through `fields`), applies (calls the pipeline), and renders.
//!
//! May import: `config`, `core`, `pipeline`, `ports`, and `super` (errors,
//! refusals, shared validation).

use super::body::{Shape, METADATA};
use super::fields::{
    json_body, object, only_fields, parse_doc_id, parse_metadata, parse_query, percent_decode,
    query_int, query_limit, uint_field, Query,
};
use super::{not_found, ok, refused, to_json, unrouted, ApiError, ApiRequest, ApiResponse};
use crate::config::Config;
use crate::core::failure::FailureBucket;
use crate::core::ids::{DocId, DocKey, TenantId};
use crate::core::shards::ShardId;
use crate::pipeline::fleet::{self, ShardPipeline, Shards};
use crate::pipeline::moves::{self, MoveAction};
use crate::pipeline::{
    BackfillAction, BackfillScope, LetterFilter, Pipeline, RedriveRequest, Refused,
};
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use serde_json::{json, Map, Value};

/// The admin route table. `path` is after `/v1/admin/`, `query` the query
/// string (auth was checked).
pub(super) async fn route<S: Shards>(
    s: &S,
    req: &ApiRequest<'_>,
    path: &str,
    query: &str,
) -> Result<ApiResponse, ApiError> {
    let q = parse_query(query)?;
    let segments: Vec<&str> = path.split('/').collect();
    match (req.method, segments.as_slice()) {
        (_, ["tenants", rest @ ..]) => super::tenants::route(s, req, rest, query).await,
        ("GET", ["shards"]) => shards(s).await,
        ("GET", ["moves"]) => {
            let limit = query_limit(&q, 20, 200)?;
            let moves = moves::moves(s, limit).await.map_err(ApiError::from_port)?;
            Ok(ok(200, json!({ "moves": to_json(moves)? })))
        }
        ("GET", ["moves", id]) => {
            let out = moves::get_move(s, id).await.map_err(ApiError::from_port)?;
            Ok(ok(200, to_json(out.map_err(refused)?)?))
        }
        ("POST", ["moves", id, action]) => {
            let Some(action) = MoveAction::parse(action) else {
                return Err(unrouted(None));
            };
            let out = moves::act_on_move(s, id, action)
                .await
                .map_err(ApiError::from_port)?;
            Ok(ok(200, to_json(out.map_err(refused)?)?))
        }
        (_, segments) => shard_route(s, req, segments, &q).await,
    }
}

/// The shard `?shard=` names (default 0): every admin route but tenants
/// and shards acts on one shard's ledger and index.
fn shard_of<'a, S: Shards>(s: &'a S, q: &Query) -> Result<&'a ShardPipeline<S>, ApiError> {
    let shard = match q.get("shard") {
        None => ShardId::CONTROL,
        Some(raw) => ShardId::parse(raw, s.count()).ok_or_else(|| {
            ApiError::field(
                "shard",
                &format!("must name a shard: an integer in 0..={}", s.count() - 1),
            )
        })?,
    };
    fleet::home(s, shard).map_err(ApiError::from_port)
}

/// `GET /v1/admin/shards`: every shard's size, tenants and dedication.
async fn shards<S: Shards>(s: &S) -> Result<ApiResponse, ApiError> {
    let shards = fleet::shards_view(s).await.map_err(ApiError::from_port)?;
    Ok(ok(200, json!({ "shards": to_json(shards)? })))
}

/// The routes that act on one shard (`?shard=`).
async fn shard_route<S: Shards>(
    s: &S,
    req: &ApiRequest<'_>,
    segments: &[&str],
    q: &Query,
) -> Result<ApiResponse, ApiError> {
    if allow(segments).is_none() {
        return Err(unrouted(None));
    }
    let p = shard_of(s, q)?;
    let q = q.clone();
    match (req.method, segments) {
        ("GET", ["documents", "summary"]) => document_summary(p, &q).await,
        ("GET", ["documents"]) => document_page(p, &q).await,
        ("GET", ["jobs", "timeline"]) => job_timeline(p, &q).await,
        ("GET", ["repair", "runs"]) => repair_runs(p, &q).await,
        ("GET", ["dead-letters", "summary"]) => dead_letter_summary(p, &q).await,
        ("GET", ["dead-letters"]) => dead_letters(p, &q).await,
        ("POST", ["redrives"]) => redrive(p, req).await,
        ("GET", ["redrives", id]) => redrive_get(p, id).await,
        ("GET", ["generations"]) => generations(p).await,
        ("POST", ["generations", n, action @ ("activate" | "retire")]) => {
            generation_action(p, n, action).await
        }
        ("POST", ["reindex"]) => reindex_start(p, req).await,
        ("GET", ["reindex"]) => reindex_list(p, &q).await,
        ("GET", ["reindex", id]) => reindex_get(p, id).await,
        ("POST", ["reindex", id, action]) => match parse_backfill_action(action) {
            Some(action) => reindex_action(p, id, action).await,
            // An action the API does not know is no route, whatever the method.
            None => Err(not_found()),
        },
        (_, segments) => Err(unrouted(allow(segments))),
    }
}

/// The methods each path of [`route`]'s table takes (`None`: not a route;
/// `tenants/…` is `tenants.rs`'s).
fn allow(segments: &[&str]) -> Option<&'static str> {
    Some(match segments {
        ["documents"] | ["documents", "summary"] | ["jobs", "timeline"] => "GET",
        ["repair", "runs"] | ["dead-letters"] | ["dead-letters", "summary"] => "GET",
        ["redrives"] => "POST",
        ["redrives", _] => "GET",
        ["generations"] | ["shards"] | ["moves"] | ["moves", _] => "GET",
        ["moves", _, action] if MoveAction::parse(action).is_some() => "POST",
        ["generations", _, "activate" | "retire"] => "POST",
        ["reindex"] => "GET, POST",
        ["reindex", _] => "GET",
        ["reindex", _, action] if parse_backfill_action(action).is_some() => "POST",
        _ => return None,
    })
}

/// `GET repair/runs?limit=&tenant_id=`: the latest cron runs (with
/// `tenant_id`: those that touched its documents or jobs).
async fn repair_runs<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let limit = query_limit(q, 20, 200)?;
    let tenant = query_tenant(q)?;
    let runs = p
        .repair_runs(limit, tenant.as_ref().map(TenantId::as_str))
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, json!({ "runs": runs })))
}

/// `GET documents/summary?tenant_id=`: documents by state, and those not
/// served as written by their last failure bucket.
async fn document_summary<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let tenant = query_tenant(q)?;
    let summary = p
        .document_summary(tenant.as_ref())
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(summary)?))
}

/// `GET documents?tenant_id=&state=&cursor=&limit=`: a page of documents
/// in key order (each with its tenant), those in `state` if given.
async fn document_page<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let tenant = query_tenant(q)?;
    let state = super::documents::query_state(q)?;
    let limit = query_limit(q, p.cfg.listing_page_default, p.cfg.listing_page_max)?;
    let page = p
        .document_page(
            tenant.as_ref(),
            state,
            q.get("cursor").map(String::as_str),
            limit,
        )
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(page)?))
}

/// `GET jobs/timeline?since=&until=&bucket_seconds=&tenant_id=`: jobs by
/// their current state per time bucket of their last change (default: the
/// last 24 hours in hours; `TIMELINE_BUCKETS_MAX` buckets at most).
async fn job_timeline<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let tenant = query_tenant(q)?;
    let bucket_seconds = query_int(q, "bucket_seconds")?.unwrap_or(3600);
    if bucket_seconds < 1 {
        return Err(ApiError::field("bucket_seconds", "must be at least 1"));
    }
    let until = match query_int(q, "until")? {
        Some(u) => u,
        None => p.clock.now_ms(),
    };
    let since = query_int(q, "since")?.unwrap_or(until.saturating_sub(24 * 3600 * 1000));
    if since >= until {
        return Err(ApiError::field("since", "must be before until"));
    }
    let width = bucket_seconds.saturating_mul(1000);
    let max = p.cfg.timeline_buckets_max;
    if until.saturating_sub(since).saturating_add(width - 1) / width > i64::from(max) {
        return Err(ApiError::field(
            "bucket_seconds",
            &format!("gives more than {max} buckets between since and until"),
        ));
    }
    let timeline = p
        .job_timeline(tenant.as_ref(), since, until, bucket_seconds)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(timeline)?))
}

/// The `tenant_id` filter of an operator's listing (absent: every tenant).
fn query_tenant(q: &Query) -> Result<Option<TenantId>, ApiError> {
    q.get("tenant_id")
        .map(|t| TenantId::parse(t).ok_or_else(|| super::tenants::tenant_id_error("tenant_id")))
        .transpose()
}

/// A document ID given to an operator's filter: the document of
/// `tenant` (absent: the default tenant's), as its stored key.
fn filter_key(doc: &DocId, tenant: Option<&TenantId>) -> String {
    let default = TenantId::default_tenant();
    DocKey::new(tenant.unwrap_or(&default), doc)
        .as_str()
        .to_string()
}

/// `GET dead-letters/summary?tenant_id=`: the archive grouped for diagnosis
/// (by tenant first).
async fn dead_letter_summary<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let tenant = query_tenant(q)?;
    let groups = p
        .dead_letter_summary(tenant.as_ref().map(TenantId::as_str))
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, json!({ "groups": groups })))
}

/// `GET dead-letters?tenant_id=&bucket=&doc_id=&since=&until=&cursor=&limit=`
/// (`doc_id`: of `tenant_id`, or of the default tenant).
async fn dead_letters<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let tenant = query_tenant(q)?;
    let doc = q
        .get("doc_id")
        .map(|d| parse_doc_id(d, "doc_id"))
        .transpose()?;
    let f = LetterFilter {
        bucket: q.get("bucket").cloned(),
        doc_id: doc.map(|d| filter_key(&d, tenant.as_ref())),
        tenant_id: tenant.map(|t| t.as_str().to_string()),
        since: query_int(q, "since")?,
        until: query_int(q, "until")?,
        cursor: q.get("cursor").cloned(),
        limit: query_limit(q, 50, 500)?,
    };
    let page = p.dead_letters(&f).await.map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(page)?))
}

/// `POST redrives`: the preflight (no `plan_id`), or the execution of a plan.
async fn redrive<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    req: &ApiRequest<'_>,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let body = json_body(&p.cfg, req, &REDRIVE)?;
    let (rreq, plan_id) = parse_redrive(&body)?;
    let Some(plan_id) = plan_id else {
        let plan = p.redrive_plan(&rreq).await.map_err(ApiError::from_port)?;
        return Ok(ok(200, json!({ "preflight": true, "plan": plan })));
    };
    let out = p
        .redrive_execute(&rreq, &plan_id)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(202, to_json(out.map_err(refused)?)?))
}

/// `GET redrives/{id}`. Polling also moves the redrive on.
async fn redrive_get<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
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
    p.redrive_advance(&id).await.map_err(ApiError::from_port)?;
    match p.redrive_view(&id).await.map_err(ApiError::from_port)? {
        Some(view) => Ok(ok(200, to_json(view)?)),
        None => Err(ApiError::new(404, "redrive_not_found", "no such redrive")),
    }
}

/// `GET generations`.
async fn generations<D, V, E, Q, C>(p: &Pipeline<D, V, E, Q, C>) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let view = p.generations_view().await.map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(view)?))
}

/// `POST generations/{n}/activate` or `…/retire`.
async fn generation_action<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    n: &str,
    action: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let g: u32 = n
        .parse()
        .map_err(|_| ApiError::new(404, "generation_not_found", "no such generation"))?;
    let out = if action == "activate" {
        p.activate_generation(g).await
    } else {
        p.retire_generation(g).await
    };
    let view = out.map_err(ApiError::from_port)?.map_err(refused)?;
    Ok(ok(200, to_json(view)?))
}

/// `POST reindex`: starts a backfill.
async fn reindex_start<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    req: &ApiRequest<'_>,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let body = json_body(&p.cfg, req, &REINDEX)?;
    let (scope, page_size, tenant) = parse_backfill(&p.cfg, &body)?;
    let out = p
        .start_backfill_in(&scope, page_size, tenant.as_ref())
        .await
        .map_err(ApiError::from_port)?;
    let view = out.map_err(refused)?;
    Ok(ok(202, json!({ "backfill": to_json(view)? })))
}

/// `GET reindex?limit=&tenant_id=`: the latest backfills, newest first (with
/// `tenant_id`: those that covered its documents).
async fn reindex_list<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    q: &Query,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let limit = query_limit(q, 20, 200)?;
    let tenant = query_tenant(q)?;
    let backfills = p
        .backfills_in(limit, tenant.as_ref())
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, json!({ "backfills": to_json(backfills)? })))
}

/// `GET reindex/{id}`.
async fn reindex_get<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    id: &str,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let view = p
        .backfill_view(&percent_decode(id)?)
        .await
        .map_err(ApiError::from_port)?;
    match view {
        Some(view) => Ok(ok(200, to_json(view)?)),
        None => Err(refused(Refused::BackfillNotFound)),
    }
}

/// `POST reindex/{id}/pause`, `…/resume` or `…/cancel`.
async fn reindex_action<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    id: &str,
    action: BackfillAction,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let out = p
        .backfill_transition(&percent_decode(id)?, action)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(200, to_json(out.map_err(refused)?)?))
}

/// The action of `POST reindex/{id}/{action}`; `None`: not one.
fn parse_backfill_action(action: &str) -> Option<BackfillAction> {
    match action {
        "pause" => Some(BackfillAction::Pause),
        "resume" => Some(BackfillAction::Resume),
        "cancel" => Some(BackfillAction::Cancel),
        _ => None,
    }
}

/// The body of `POST reindex`.
const REINDEX: Shape = Shape::Object(&[
    ("scope", Shape::Scalar),
    ("filter", METADATA),
    ("page_size", Shape::Scalar),
    ("tenant_id", Shape::Scalar),
]);

/// The body of `POST redrives`.
const REDRIVE: Shape = Shape::Object(&[
    (
        "filter",
        Shape::Object(&[
            ("bucket", Shape::Scalar),
            ("since", Shape::Scalar),
            ("until", Shape::Scalar),
            (
                "doc_ids",
                Shape::Array {
                    max: redrive_doc_ids_max,
                    item: &Shape::Scalar,
                },
            ),
            ("tenant_id", Shape::Scalar),
        ]),
    ),
    ("canary_size", Shape::Scalar),
    ("max_failed_canaries", Shape::Scalar),
    ("max_failure_ratio", Shape::Scalar),
    ("batch_size", Shape::Scalar),
    ("plan_id", Shape::Scalar),
]);

/// Document IDs a redrive's filter may name.
const REDRIVE_DOC_IDS_MAX: usize = 100;

fn redrive_doc_ids_max(_: &Config) -> usize {
    REDRIVE_DOC_IDS_MAX
}

/// The body of `POST reindex`: `{"scope": "all" | "filter" | "config",
/// "filter": {...} (scope filter only), "page_size": 1..=100,
/// "tenant_id"?: one tenant's documents only (not with scope config)}`.
fn parse_backfill(
    cfg: &Config,
    body: &Value,
) -> Result<(BackfillScope, u32, Option<TenantId>), ApiError> {
    let obj = object(body)?;
    only_fields(obj, &["scope", "filter", "page_size", "tenant_id"], "")?;
    let tenant = match obj.get("tenant_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => {
            Some(TenantId::parse(t).ok_or_else(|| super::tenants::tenant_id_error("tenant_id"))?)
        }
        Some(_) => return Err(ApiError::field("tenant_id", "must be a string")),
    };
    let scope = match (obj.get("scope").and_then(Value::as_str), obj.get("filter")) {
        (Some("all"), None) => BackfillScope::All,
        (Some("config"), None) => BackfillScope::Config,
        (Some("filter"), Some(Value::Object(f))) if !f.is_empty() => {
            BackfillScope::Filter(parse_metadata(cfg, f, "filter")?)
        }
        (Some("filter"), _) => {
            return Err(ApiError::field(
                "filter",
                "scope filter needs a non-empty object of metadata keys and values",
            ))
        }
        (Some("all" | "config"), Some(_)) => {
            return Err(ApiError::field(
                "filter",
                "only scope filter takes a filter",
            ))
        }
        _ => {
            return Err(ApiError::field(
                "scope",
                "must be \"all\", \"filter\" or \"config\"",
            ))
        }
    };
    let page_size = match obj.get("page_size") {
        None | Some(Value::Null) => cfg.backfill_page_size,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=100).contains(&n) => n as u32,
            _ => {
                return Err(ApiError::field(
                    "page_size",
                    "must be an integer in 1..=100",
                ))
            }
        },
    };
    Ok((scope, page_size, tenant))
}

/// The body of `POST redrives`: `{"filter": {"bucket"?, "since"?, "until"?,
/// "doc_ids"? (of `tenant_id`, or of the default tenant), "tenant_id"?},
/// "canary_size"? (3-5), "max_failed_canaries"?,
/// "max_failure_ratio"?, "batch_size"?, "plan_id"?}`.
fn parse_redrive(body: &Value) -> Result<(RedriveRequest, Option<String>), ApiError> {
    let obj = object(body)?;
    only_fields(
        obj,
        &[
            "filter",
            "canary_size",
            "max_failed_canaries",
            "max_failure_ratio",
            "batch_size",
            "plan_id",
        ],
        "",
    )?;
    let canary_size = uint_field(obj, "canary_size", 3, 3..=5)?;
    let max_failed_canaries = uint_field(obj, "max_failed_canaries", 0, 0..=5)?;
    let batch_size = uint_field(obj, "batch_size", 10, 1..=100)?;
    let max_failure_ratio = match obj.get("max_failure_ratio") {
        None | Some(Value::Null) => 0.2,
        Some(v) => match v.as_f64() {
            Some(r) if (0.0..=1.0).contains(&r) => r,
            _ => {
                return Err(ApiError::field(
                    "max_failure_ratio",
                    "must be a number in 0..=1",
                ))
            }
        },
    };
    let mut rreq = RedriveRequest {
        bucket: None,
        since: None,
        until: None,
        doc_ids: None,
        tenant_id: None,
        canary_size,
        max_failed_canaries,
        max_failure_ratio,
        batch_size,
    };
    match obj.get("filter") {
        None | Some(Value::Null) => {}
        Some(Value::Object(f)) => parse_letter_filter(f, &mut rreq)?,
        Some(_) => return Err(ApiError::field("filter", "must be an object")),
    }
    let plan_id = match obj.get("plan_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(s.clone())
        }
        Some(_) => {
            return Err(ApiError::field(
                "plan_id",
                "must be a plan id from a preflight",
            ))
        }
    };
    Ok((rreq, plan_id))
}

/// A redrive's letter filter, into `rreq`.
fn parse_letter_filter(f: &Map<String, Value>, rreq: &mut RedriveRequest) -> Result<(), ApiError> {
    for (k, v) in f {
        match (k.as_str(), v) {
            ("bucket", Value::String(s)) if FailureBucket::parse(s).is_some() => {
                rreq.bucket = Some(s.clone())
            }
            ("bucket", _) => {
                return Err(ApiError::field("filter.bucket", "must be a failure bucket"))
            }
            ("since", v) if v.as_i64().is_some() => rreq.since = v.as_i64(),
            ("until", v) if v.as_i64().is_some() => rreq.until = v.as_i64(),
            ("since" | "until", _) => {
                return Err(ApiError::field(
                    "filter.since/until",
                    "must be milliseconds since the epoch",
                ))
            }
            ("doc_ids", Value::Array(ids)) if ids.len() <= REDRIVE_DOC_IDS_MAX => {
                rreq.doc_ids = Some(parse_doc_ids(ids)?);
            }
            ("tenant_id", Value::String(t)) if TenantId::parse(t).is_some() => {
                rreq.tenant_id = Some(t.clone());
            }
            ("tenant_id", _) => return Err(super::tenants::tenant_id_error("filter.tenant_id")),
            ("doc_ids", _) => {
                return Err(ApiError::field(
                    "filter.doc_ids",
                    "must be an array of at most 100 ids",
                ))
            }
            _ => return Err(ApiError::unknown_field("filter.", k)),
        }
    }
    // The document IDs are of the filter's tenant (or the default one).
    let tenant = rreq.tenant_id.as_deref().and_then(TenantId::parse);
    if let Some(ids) = &mut rreq.doc_ids {
        for id in ids.iter_mut() {
            if let Ok(doc) = DocId::parse(id) {
                *id = filter_key(&doc, tenant.as_ref());
            }
        }
    }
    Ok(())
}

fn parse_doc_ids(ids: &[Value]) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(s) = id.as_str() else {
            return Err(ApiError::field("filter.doc_ids", "must be strings"));
        };
        out.push(parse_doc_id(s, "filter.doc_ids")?.as_str().to_string());
    }
    Ok(out)
}
