//! The operator's tenant routes under `/v1/admin/tenants`: create, list,
//! read (with usage), disable and enable a tenant, replace its quotas
//! (`PUT …/quotas`: the body's, each absent or null one the default);
//! mint, list and revoke its tokens. Each parses (through `fields`), applies, and renders.
//!
//! May import: `config`, `core`, `pipeline`, `ports`, and `super` (errors,
//! refusals, shared validation).

use super::body::Shape;
use super::fields::{json_body, object, only_fields, parse_query, percent_decode, query_limit};
use super::{ok, refused, to_json, unrouted, ApiError, ApiRequest, ApiResponse};
use crate::config::Config;
use crate::core::credentials::Scopes;
use crate::core::ids::{TenantId, TENANT_ID_BYTES_MAX};
use crate::core::shards::{PlacementRequest, ShardId};
use crate::core::state::TenantState;
use crate::pipeline::fleet::{self, ShardPipeline, Shards};
use crate::pipeline::Quotas;
use serde_json::{json, Map, Value};

/// The tenant route table; `segments` follow `tenants`. Each tenant's
/// rows are read and written on its own shard; creation places it first.
pub(super) async fn route<S: Shards>(
    s: &S,
    req: &ApiRequest<'_>,
    segments: &[&str],
    query: &str,
) -> Result<ApiResponse, ApiError> {
    let port = ApiError::from_port;
    match (req.method, segments) {
        ("POST", []) => create(s, req).await,
        ("GET", []) => list(s, query).await,
        ("GET", [id]) => {
            let tenant = path_tenant(id)?;
            let view = home_of(s, &tenant)
                .await?
                .tenant(&tenant)
                .await
                .map_err(port)?;
            match view {
                Some(v) => Ok(ok(200, to_json(v)?)),
                None => Err(refused(crate::pipeline::Refused::TenantNotFound)),
            }
        }
        ("POST", [id, action @ ("disable" | "enable")]) => {
            let tenant = path_tenant(id)?;
            let state = if *action == "disable" {
                TenantState::Disabled
            } else {
                TenantState::Active
            };
            let p = home_of(s, &tenant).await?;
            let out = p.set_tenant_state(&tenant, state).await.map_err(port)?;
            Ok(ok(200, to_json(out.map_err(refused)?)?))
        }
        ("PUT", [id, "quotas"]) => {
            let tenant = path_tenant(id)?;
            let p = home_of(s, &tenant).await?;
            let body = json_body(&p.cfg, req, &QUOTAS)?;
            let quotas = parse_quotas(object(&body)?)?;
            let out = p.set_tenant_quotas(&tenant, &quotas).await.map_err(port)?;
            Ok(ok(200, to_json(out.map_err(refused)?)?))
        }
        ("POST", [id, "tokens"]) => mint(s, req, id).await,
        ("POST", [id, "move"]) => start_move(s, req, id).await,
        ("GET", [id, "tokens"]) => {
            let tenant = path_tenant(id)?;
            let out = home_of(s, &tenant)
                .await?
                .tokens(&tenant)
                .await
                .map_err(port)?;
            Ok(ok(200, json!({ "tokens": out.map_err(refused)? })))
        }
        ("DELETE", [id, "tokens", token_id]) => {
            let tenant = path_tenant(id)?;
            let token_id = percent_decode(token_id)?;
            let out = fleet::revoke_token(s, &tenant, &token_id)
                .await
                .map_err(port)?;
            Ok(ok(200, to_json(out.map_err(refused)?)?))
        }
        (_, segments) => Err(unrouted(allow(segments))),
    }
}

/// The pipeline of the shard that holds `tenant`, as the directory says
/// now (not the cache: an operator's change follows a move at once).
async fn home_of<'a, S: Shards>(
    s: &'a S,
    tenant: &TenantId,
) -> Result<&'a ShardPipeline<S>, ApiError> {
    let shard = fleet::tenant_shard_uncached(s, tenant)
        .await
        .map_err(ApiError::from_port)?;
    fleet::home(s, shard).map_err(ApiError::from_port)
}

/// The methods each path of [`route`]'s table takes (`None`: not a route).
fn allow(segments: &[&str]) -> Option<&'static str> {
    Some(match segments {
        [] => "GET, POST",
        [_] => "GET",
        [_, "disable" | "enable"] => "POST",
        [_, "tokens"] => "GET, POST",
        [_, "quotas"] => "PUT",
        [_, "tokens", _] => "DELETE",
        [_, "move"] => "POST",
        _ => return None,
    })
}

pub(super) fn tenant_id_error(field: &str) -> ApiError {
    ApiError::field(
        field,
        &format!("must be 1..={TENANT_ID_BYTES_MAX} bytes of [a-z0-9_-]"),
    )
}

fn path_tenant(segment: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(&percent_decode(segment)?).ok_or_else(|| tenant_id_error("tenant_id"))
}

/// `POST tenants {"tenant_id", "quotas"?: {"documents_max"?, "bytes_max"?,
/// "requests_per_minute_max"?}, "shard"?, "dedicated"?}` → 201: placed on
/// `shard` if given (`dedicated`: as its only tenant), else where the
/// placement policy says.
async fn create<S: Shards>(s: &S, req: &ApiRequest<'_>) -> Result<ApiResponse, ApiError> {
    let fields = ["tenant_id", "quotas", "shard", "dedicated"];
    let body = json_body(
        &s.control().cfg,
        req,
        &Shape::Object(&[
            ("tenant_id", Shape::Scalar),
            ("quotas", QUOTAS),
            ("shard", Shape::Scalar),
            ("dedicated", Shape::Scalar),
        ]),
    )?;
    let obj = object(&body)?;
    only_fields(obj, &fields, "")?;
    let tenant = match obj.get("tenant_id") {
        Some(Value::String(s)) => TenantId::parse(s).ok_or_else(|| tenant_id_error("tenant_id"))?,
        Some(_) => return Err(ApiError::field("tenant_id", "must be a string")),
        None => return Err(ApiError::field("tenant_id", "is required")),
    };
    let quotas = match obj.get("quotas") {
        None | Some(Value::Null) => Quotas::default(),
        Some(Value::Object(q)) => parse_quotas(q)?,
        Some(_) => return Err(ApiError::field("quotas", "must be an object")),
    };
    let placement = parse_placement(obj, s.count())?;
    let out = fleet::create_tenant(s, &tenant, &quotas, placement)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(201, to_json(out.map_err(refused)?)?))
}

/// `POST tenants/{id}/move {"shard"}` → 202: starts moving the tenant to
/// `shard` (cron advances it: `GET /v1/admin/moves/{move_id}`).
async fn start_move<S: Shards>(
    s: &S,
    req: &ApiRequest<'_>,
    id: &str,
) -> Result<ApiResponse, ApiError> {
    let tenant = path_tenant(id)?;
    let body = json_body(
        &s.control().cfg,
        req,
        &Shape::Object(&[("shard", Shape::Scalar)]),
    )?;
    let obj = object(&body)?;
    only_fields(obj, &["shard"], "")?;
    let count = s.count();
    let shard = obj
        .get("shard")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| *n < count)
        .ok_or_else(|| {
            ApiError::field(
                "shard",
                &format!("is required: an integer in 0..={}", count - 1),
            )
        })?;
    let out = crate::pipeline::moves::start_move(s, &tenant, shard, &req.entropy)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(202, to_json(out.map_err(refused)?)?))
}

/// `shard` and `dedicated` of a tenant's creation.
fn parse_placement(obj: &Map<String, Value>, count: u16) -> Result<PlacementRequest, ApiError> {
    let dedicated = match obj.get("dedicated") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::field("dedicated", "must be a boolean")),
    };
    let shard = match obj.get("shard") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n < count)
                .map(ShardId)
                .ok_or_else(|| {
                    ApiError::field(
                        "shard",
                        &format!("must name a shard: an integer in 0..={}", count - 1),
                    )
                })?,
        ),
    };
    match (shard, dedicated) {
        (Some(shard), dedicated) => Ok(PlacementRequest::Pinned { shard, dedicated }),
        (None, false) => Ok(PlacementRequest::Auto),
        (None, true) => Err(ApiError::field(
            "dedicated",
            "needs a shard: a dedicated tenant is pinned to the shard named",
        )),
    }
}

/// A tenant's quotas (`PUT …/quotas`, and within a tenant's creation).
const QUOTAS: Shape = Shape::Object(&[
    ("documents_max", Shape::Scalar),
    ("bytes_max", Shape::Scalar),
    ("requests_per_minute_max", Shape::Scalar),
]);

/// The body of `POST …/tokens`: a few scopes (more than there are is
/// refused by the route).
const MINT: Shape = Shape::Object(&[(
    "scopes",
    Shape::Array {
        max: scopes_max,
        item: &Shape::Scalar,
    },
)]);

fn scopes_max(_: &Config) -> usize {
    8
}

/// Quotas a tenant is created with; an absent or null one is the default.
fn parse_quotas(q: &Map<String, Value>) -> Result<Quotas, ApiError> {
    only_fields(
        q,
        &["documents_max", "bytes_max", "requests_per_minute_max"],
        "quotas.",
    )?;
    // Within D1's exact integers (2^53).
    const MAX: u64 = 1 << 53;
    let get = |name: &str| -> Result<Option<u64>, ApiError> {
        match q.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= MAX => Ok(Some(n)),
                _ => Err(ApiError::field(
                    &format!("quotas.{name}"),
                    &format!("must be an integer in 0..={MAX}"),
                )),
            },
        }
    };
    Ok(Quotas {
        documents_max: get("documents_max")?,
        bytes_max: get("bytes_max")?,
        requests_per_minute_max: get("requests_per_minute_max")?,
    })
}

/// `GET tenants?cursor=&limit=`: tenants in ID order, each with its shard.
async fn list<S: Shards>(s: &S, query: &str) -> Result<ApiResponse, ApiError> {
    let q = parse_query(query)?;
    let limit = query_limit(&q, 100, 1000)?;
    let cursor = q.get("cursor").map_or("", String::as_str);
    let tenants = fleet::tenants_page(s, cursor, limit)
        .await
        .map_err(ApiError::from_port)?;
    let next_cursor = if tenants.len() == limit {
        tenants.last().map(|t| t.tenant_id.clone())
    } else {
        None
    };
    Ok(ok(
        200,
        json!({ "tenants": tenants, "next_cursor": next_cursor }),
    ))
}

/// `POST tenants/{id}/tokens {"scopes": ["ingest", "search"]}` → 201 with
/// the token, shown this once.
async fn mint<S: Shards>(s: &S, req: &ApiRequest<'_>, id: &str) -> Result<ApiResponse, ApiError> {
    let tenant = path_tenant(id)?;
    let body = json_body(&s.control().cfg, req, &MINT)?;
    let obj = object(&body)?;
    only_fields(obj, &["scopes"], "")?;
    let bad = || {
        ApiError::field(
            "scopes",
            "must be a non-empty array of distinct scopes: \"ingest\", \"search\"",
        )
    };
    let names: Vec<&str> = match obj.get("scopes") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad()),
        None => return Err(ApiError::field("scopes", "is required")),
    };
    let scopes = Scopes::from_names(names)
        .filter(|s| !s.is_empty())
        .ok_or_else(bad)?;
    let out = fleet::mint_token(s, &tenant, &scopes, &req.entropy)
        .await
        .map_err(ApiError::from_port)?;
    Ok(ok(201, to_json(out.map_err(refused)?)?))
}
