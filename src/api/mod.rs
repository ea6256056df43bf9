#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

//! The HTTP contract, independent of the platform: a request in, a status
//! and a JSON body out. The wasm entry point only converts types; native
//! tests call [`handle`] directly.
//!
//! Here: the route table ([`route`]), authentication, the error type and
//! the one mapping of the pipeline's refusals to statuses ([`refused`]),
//! and the health check. The routes live by resource: `documents.rs`
//! (documents and jobs), `search.rs`, `syncs.rs` (source sync sessions), `admin.rs` (`/v1/admin/*`), each
//! route in one shape: parse (with `&Config`, through the shared
//! validation of `fields.rs`), apply (call the pipeline), render. Only
//! `api` knows statuses.
//!
//! Errors are `{"error": {"code", "message"}}` with a stable snake_case code
//! and a message that never echoes document content or raw platform errors.
//! Bad input is rejected before anything is written. Nothing in `api/` may
//! panic on input: the lints above (no indexing, slicing, `unwrap`, `expect`
//! or `panic!`) apply to every file of the folder.
//!
//! May import: `config`, `core`, `ports`, `pipeline` (and through it what
//! the pipeline shows of `store`'s rows); nothing platform-specific.

mod admin;
pub mod assets;
mod body;
mod documents;
mod fields;
mod search;
mod syncs;
mod tenants;

use crate::core::credentials::{Scope, Scopes};
use crate::core::ids::TenantId;
use crate::core::shards::ShardId;
use crate::pipeline::fleet::{self, Shards};
use crate::pipeline::{log_event, Admission, Refused, TokenGrant};
use crate::ports::PortError;
pub use body::{body_bytes_max, too_large};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

pub struct ApiRequest<'a> {
    pub method: &'a str,
    /// The path as received, still percent-encoded.
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
    /// Fresh random bytes from the entry point (the only randomness the
    /// API uses: a minted token's ID and secret).
    pub entropy: [u8; 32],
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    pub status: u16,
    pub body: Value,
    /// Seconds for a `Retry-After` header (a 429).
    pub retry_after: Option<u64>,
    /// The methods the path takes, for an `Allow` header (a 405).
    pub allow: Option<&'static str>,
}

/// Who is calling, from the bearer token alone (never from the request's
/// body, path or query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A path outside `/v1/`: no credentials needed.
    Anonymous,
    /// The platform operator (`ADMIN_TOKEN`): `/v1/admin/*`.
    Operator,
    /// A tenant's token; `INGEST_TOKEN` is the `default` tenant's, with
    /// every scope.
    Tenant {
        tenant: TenantId,
        scopes: Scopes,
        /// The shard that holds the tenant (where its token was checked).
        shard: ShardId,
    },
}

/// The Worker secrets that guard the API.
pub struct Secrets {
    pub ingest_token: Option<String>,
    pub admin_token: Option<String>,
}

/// A client error: status, stable code, safe message.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
    pub allow: Option<&'static str>,
}

impl ApiError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            allow: None,
        }
    }

    /// A refusal to retry later: `429` with `Retry-After`.
    fn too_many(code: &'static str, message: impl Into<String>, retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(429, code, message)
        }
    }

    fn field(field: &str, why: &str) -> ApiError {
        ApiError::new(422, "invalid_field", format!("{field}: {why}"))
    }

    /// A key the request may not have: `422 unknown_field` on every route.
    fn unknown_field(prefix: &str, key: &str) -> ApiError {
        ApiError::new(
            422,
            "unknown_field",
            format!("unknown field {prefix}{:?}", fields::truncate(key, 64)),
        )
    }

    fn body(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }

    pub fn response(self) -> ApiResponse {
        ApiResponse {
            status: self.status,
            body: self.body(),
            retry_after: self.retry_after,
            allow: self.allow,
        }
    }

    /// A failure of a port, told by its bucket only.
    fn from_port(e: PortError) -> ApiError {
        let status = if e.bucket.is_transient() { 503 } else { 500 };
        log_event(
            "api_port_failure",
            json!({ "bucket": e.bucket.as_str(), "code": e.code }),
        );
        ApiError::new(
            status,
            e.bucket.as_str(),
            "the service could not complete the request; retry later",
        )
    }
}

/// What the API answers for each refusal of the pipeline: status, stable
/// code, message. The one place a domain reason becomes HTTP.
fn refused(r: Refused) -> ApiError {
    use Refused::*;
    match r {
        GenerationNotFound { generation } => ApiError::new(
            404,
            "generation_not_found",
            format!("no generation {generation}"),
        ),
        GenerationNotRetained { generation, state } => ApiError::new(
            409,
            "generation_not_retained",
            format!("generation {generation} is {state}, not retained"),
        ),
        GenerationIncomplete { generation } => ApiError::new(
            409,
            "generation_incomplete",
            format!("generation {generation} lacks vectors of live documents"),
        ),
        GenerationInUse { generation, state } => ApiError::new(
            409,
            "generation_in_use",
            format!("generation {generation} is {state}; only a retained or abandoned one retires"),
        ),
        GenerationBuilding => ApiError::new(
            409,
            "generation_building",
            "another generation is being built",
        ),
        ConfigRetained { generation } => ApiError::new(
            409,
            "config_retained",
            format!(
                "generation {generation} is retained and was built with the running configuration: \
                 activate it (POST /v1/admin/generations/{generation}/activate); if that answers \
                 generation_incomplete, documents changed since: retire it \
                 (POST /v1/admin/generations/{generation}/retire), then start this backfill again"
            ),
        ),
        ConfigUnchanged => ApiError::new(
            409,
            "config_unchanged",
            "the running configuration is the active generation's",
        ),
        DocumentNotFound => ApiError::new(404, "document_not_found", "no such document"),
        DocumentNotIndexed => ApiError::new(
            409,
            "document_not_indexed",
            "the document has no live version to reindex",
        ),
        VersionIndexing { version } => ApiError::new(
            409,
            "document_indexing",
            format!("version {version} is being indexed; it will use the current configuration"),
        ),
        NewerVersionArrived => ApiError::new(
            409,
            "document_indexing",
            "a newer version arrived meanwhile",
        ),
        BackfillOpen => ApiError::new(
            409,
            "backfill_active",
            "a backfill is running or paused: cancel or finish it first",
        ),
        BackfillStartedMeanwhile => {
            ApiError::new(409, "backfill_active", "a backfill was started meanwhile")
        }
        BackfillNotFound => ApiError::new(404, "backfill_not_found", "no such backfill"),
        BackfillConfigScoped => ApiError::field(
            "tenant_id",
            "a config backfill builds a generation for every tenant; it takes no tenant_id",
        ),
        BackfillState { state, action } => ApiError::new(
            409,
            "backfill_state",
            format!("a {state} backfill cannot {}", action.as_str()),
        ),
        TenantExists => ApiError::new(409, "tenant_exists", "a tenant of this ID exists"),
        TenantLimit { max } => ApiError::new(
            409,
            "tenant_limit",
            format!("the platform holds {max} tenants already (TENANTS_MAX)"),
        ),
        TenantNotFound => ApiError::new(404, "tenant_not_found", "no such tenant"),
        ShardDedicated => ApiError::new(
            409,
            "shard_dedicated",
            "the shard is dedicated to another tenant",
        ),
        ShardNotEmpty => ApiError::new(
            409,
            "shard_not_empty",
            "a dedicated shard must hold no other tenant, and this one does",
        ),
        NoShardAvailable => ApiError::new(
            503,
            "no_shard_available",
            "no shard takes new tenants (each is dedicated, unreadable, or at SHARD_FULL_BYTES); add a shard",
        ),
        TokenNotFound => ApiError::new(404, "token_not_found", "the tenant has no such token"),
        PlanChanged => ApiError::new(
            409,
            "plan_changed",
            "the letters changed since the preflight; run it again",
        ),
        SyncNotFound => ApiError::new(404, "sync_not_found", "no such sync session"),
        SyncExpired => ApiError::new(
            409,
            "sync_expired",
            "the sync session expired before its commit; it deleted nothing",
        ),
        SyncSuperseded => ApiError::new(
            409,
            "sync_superseded",
            "a later sync session of this source committed first",
        ),
        SyncNotOpen => ApiError::new(
            409,
            "sync_not_open",
            "the sync session is not open for writes (committed, expired, superseded, or of another source)",
        ),
        SyncDeleteGuard {
            to_delete,
            documents,
            share_max_percent,
        } => ApiError::new(
            409,
            "sync_delete_guard",
            format!(
                "the commit would delete {to_delete} of the source's {documents} documents, more than {share_max_percent}%; commit with allow_mass_delete to proceed"
            ),
        ),
        TenantMoving => tenant_moving(),
        MoveNotFound => ApiError::new(404, "move_not_found", "no such move"),
        MoveState { state, action } => ApiError::new(
            409,
            "move_state",
            format!("a {state} move cannot {action}"),
        ),
        MoveConfigMismatch => ApiError::new(
            409,
            "move_config_mismatch",
            "the shards' active index configurations differ, or the new shard is building a generation: run the same backfill on both first",
        ),
        MoveShardInvalid => ApiError::field(
            "shard",
            "must name another shard this deployment declares",
        ),
    }
}

/// How long a client waits before it retries a write refused while its
/// tenant's move catches up (the fence lasts about as long as the copy of
/// what changed since the first pass).
const TENANT_MOVING_RETRY_SECONDS: u64 = 2;

/// `503 tenant_moving` with `Retry-After`: the tenant is between shards.
fn tenant_moving() -> ApiError {
    ApiError {
        retry_after: Some(TENANT_MOVING_RETRY_SECONDS),
        ..ApiError::new(
            503,
            "tenant_moving",
            "the tenant is moving to another shard and this change waits for the switch; retry after Retry-After seconds",
        )
    }
}

fn ok(status: u16, body: Value) -> ApiResponse {
    ApiResponse {
        status,
        body,
        retry_after: None,
        allow: None,
    }
}

fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such route")
}

/// `405` for a path that takes other methods: `allow` lists them (the
/// `Allow` header every 405 carries, RFC 9110).
fn method_not_allowed(allow: &'static str) -> ApiError {
    ApiError {
        allow: Some(allow),
        ..ApiError::new(
            405,
            "method_not_allowed",
            format!("this method is not allowed on this route; it takes {allow}"),
        )
    }
}

/// What a path of a route table answers when no route of the request's
/// method took it: `405` with `Allow` if the path takes other methods
/// (`allow`: the route table's list of them), else `404 not_found`.
fn unrouted(allow: Option<&'static str>) -> ApiError {
    allow.map_or_else(not_found, method_not_allowed)
}

/// A view as JSON (views are plain data; a failure is a bug, answered 500).
fn to_json(view: impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(view)
        .map_err(|_| ApiError::new(500, "internal", "a response could not be rendered"))
}

/// Authenticates and answers one request (native tests; the Worker calls
/// [`authenticate`] before it reads the body, then [`handle_as`]).
pub async fn handle<S: Shards>(s: &S, secrets: &Secrets, req: ApiRequest<'_>) -> ApiResponse {
    let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
    if path == "/healthz" {
        return health(req.method).unwrap_or_else(ApiError::response);
    }
    match authenticate(s, secrets, req.path, req.authorization).await {
        Ok(caller) => handle_as(s, &caller, req).await,
        Err(refused) => refused,
    }
}

/// Answers a request `caller` made (see [`authenticate`]).
pub async fn handle_as<S: Shards>(s: &S, caller: &Caller, req: ApiRequest<'_>) -> ApiResponse {
    // The route's cap (the Worker reads no more than it; a native caller
    // may hand over anything).
    let cfg = &s.control().cfg;
    if req.body.len() > body_bytes_max(cfg, req.method, req.path).0 {
        return too_large(cfg, req.method, req.path).response();
    }
    match route(s, caller, &req).await {
        Ok(r) => r,
        Err(e) => e.response(),
    }
}

/// The route table: the health check, then `/v1/admin/*` for the operator
/// (see `admin::route`) and the rest of `/v1/*` for a tenant, as its own.
async fn route<S: Shards>(
    s: &S,
    caller: &Caller,
    req: &ApiRequest<'_>,
) -> Result<ApiResponse, ApiError> {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    if path == "/healthz" {
        return health(req.method);
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found());
    };
    let (tenant, shard) = match (caller, rest.strip_prefix("admin/")) {
        (Caller::Operator, Some(admin_path)) => {
            return admin::route(s, req, admin_path, query).await
        }
        (Caller::Tenant { tenant, shard, .. }, None) => (tenant, *shard),
        // `authenticate` lets no other caller this far.
        _ => return Err(unauthorized()),
    };
    // The tenant's own shard, and no other.
    let p = fleet::home(s, shard).map_err(ApiError::from_port)?;
    let segments: Vec<&str> = rest.split('/').collect();
    match (req.method, segments.as_slice()) {
        ("PUT", ["documents", id]) => documents::put(p, tenant, req, id).await,
        ("GET", ["documents", id]) => documents::get(p, tenant, id).await,
        ("DELETE", ["documents", id]) => documents::delete(p, tenant, id).await,
        ("POST", ["documents"]) => documents::post(p, tenant, req).await,
        ("POST", ["documents", id, "reindex"]) => documents::reindex(p, tenant, id).await,
        ("GET", ["jobs", id]) => documents::job(p, tenant, id).await,
        ("POST", ["search"]) => search::post(p, tenant, req).await,
        ("POST", ["syncs"]) => syncs::open(p, tenant, req).await,
        ("GET", ["syncs", id]) => syncs::get(p, tenant, id).await,
        ("POST", ["syncs", id, "commit"]) => syncs::commit(p, tenant, req, id).await,
        ("POST", ["syncs", id, "seen"]) => syncs::seen(p, tenant, req, id).await,
        ("GET", ["documents"]) => documents::list(p, tenant, query).await,
        ("GET", ["syncs"]) => syncs::list(p, tenant, query).await,
        (_, segments) => Err(unrouted(tenant_allow(segments))),
    }
}

/// The methods each path of the tenant route table takes (`None`: not a
/// route). Keep in step with [`route`]'s arms: `tests/it/listings.rs` checks
/// that each method listed is served and each other one is refused.
fn tenant_allow(segments: &[&str]) -> Option<&'static str> {
    Some(match segments {
        ["documents"] => "GET, POST",
        ["documents", _] => "GET, PUT, DELETE",
        ["documents", _, "reindex"] => "POST",
        ["jobs", _] => "GET",
        ["search"] => "POST",
        ["syncs"] => "GET, POST",
        ["syncs", _] => "GET",
        ["syncs", _, "commit" | "seen"] => "POST",
        _ => return None,
    })
}

/// What `/healthz` and the static assets take.
const GET_HEAD: &str = "GET, HEAD";

/// `GET /healthz` (or `HEAD`): no auth, no port call.
fn health(method: &str) -> Result<ApiResponse, ApiError> {
    match method {
        "GET" | "HEAD" => Ok(ok(200, json!({ "ok": true }))),
        _ => Err(method_not_allowed(GET_HEAD)),
    }
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "unauthorized", "missing or invalid bearer token")
}

fn not_configured() -> ApiError {
    log_event("auth_not_configured", json!({ "bucket": "config_invalid" }));
    ApiError::new(
        503,
        "auth_not_configured",
        "the service has no credentials configured",
    )
}

/// Constant-time check of a bearer token against a configured secret.
fn bearer_matches(token: Option<&str>, secret: Option<&str>) -> bool {
    let (Some(token), Some(secret)) = (token, secret.filter(|s| !s.is_empty())) else {
        return false;
    };
    // Compare digests: equal length inputs, so the time does not reveal
    // even the length of the secret.
    let a = crate::core::ids::sha256_hex(token.as_bytes());
    let b = crate::core::ids::sha256_hex(secret.as_bytes());
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Who may call `path` (its query string ignored) with `authorization`:
/// `/v1/admin/*` needs the admin token (a tenant's valid token gets 403),
/// the rest of `/v1/*` a tenant's token with the route's scope (`search`
/// for `POST /v1/search`, `ingest` for the rest), of an active tenant
/// within its requests per minute (429 with `Retry-After` past it).
/// `INGEST_TOKEN` is the `default` tenant's token with every scope. The
/// Worker calls this before it reads a request body, so an unauthenticated
/// client cannot make it read one. A tenant's token is read from D1 on
/// every request (no cache), so a revocation or a disable holds at once.
pub async fn authenticate<S: Shards>(
    s: &S,
    secrets: &Secrets,
    path: &str,
    authorization: Option<&str>,
) -> Result<Caller, ApiResponse> {
    check_auth(s, secrets, path, authorization)
        .await
        .map_err(ApiError::response)
}

async fn check_auth<S: Shards>(
    s: &S,
    secrets: &Secrets,
    path: &str,
    authorization: Option<&str>,
) -> Result<Caller, ApiError> {
    match check_auth_on(s, secrets, path, authorization).await? {
        Checked::Caller(c) => Ok(c),
        // The tenant's shard says it moved (or is fenced for its move):
        // the directory, read again past the cache, names the shard that
        // serves it now; once.
        Checked::AskAgain { tenant, shard } => {
            fleet::forget(
                s,
                &tenant,
                authorization.and_then(|h| h.strip_prefix("Bearer ")),
            );
            let now_on = fleet::tenant_shard(s, &tenant)
                .await
                .map_err(ApiError::from_port)?;
            if now_on == shard {
                return Err(tenant_moving());
            }
            match check_auth_on(s, secrets, path, authorization).await? {
                Checked::Caller(c) => Ok(c),
                Checked::AskAgain { .. } => Err(tenant_moving()),
            }
        }
    }
}

/// What one pass of [`check_auth`] found.
enum Checked {
    Caller(Caller),
    /// The shard named by the directory (or its cache) does not serve
    /// the tenant any more, or is fenced for its move: ask the directory.
    AskAgain {
        tenant: TenantId,
        shard: ShardId,
    },
}

async fn check_auth_on<S: Shards>(
    s: &S,
    secrets: &Secrets,
    path: &str,
    authorization: Option<&str>,
) -> Result<Checked, ApiError> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Ok(Checked::Caller(Caller::Anonymous));
    };
    let bearer = authorization.and_then(|h| h.strip_prefix("Bearer "));
    if rest.starts_with("admin/") {
        if secrets.admin_token.as_deref().is_none_or(str::is_empty) {
            return Err(not_configured());
        }
        if bearer_matches(bearer, secrets.admin_token.as_deref()) {
            return Ok(Checked::Caller(Caller::Operator));
        }
        // A tenant's valid token is not enough here: 403, not 401.
        return match tenant_of(s, secrets, bearer).await? {
            Some(_) => Err(ApiError::new(
                403,
                "forbidden",
                "this route needs the admin token",
            )),
            None => Err(unauthorized()),
        };
    }
    let Some((tenant, scopes, shard)) = tenant_of(s, secrets, bearer).await? else {
        let tenant_shaped =
            bearer.is_some_and(|b| crate::core::credentials::token_id_of(b).is_some());
        if !tenant_shaped && secrets.ingest_token.as_deref().is_none_or(str::is_empty) {
            return Err(not_configured());
        }
        return Err(unauthorized());
    };
    let scope = if rest == "search" {
        Scope::Search
    } else {
        Scope::Ingest
    };
    if !scopes.has(scope) {
        return Err(ApiError::new(
            403,
            "forbidden",
            format!("this route needs a token with the {} scope", scope.as_str()),
        ));
    }
    // Admitted by its own shard, which counts its requests.
    let p = fleet::home(s, shard).map_err(ApiError::from_port)?;
    match p.admit(&tenant).await.map_err(ApiError::from_port)? {
        // Fenced: served here only while the directory still names this
        // shard (a stale cache may not), so it is asked first.
        Admission::Admitted { fenced: true } if s.count() > 1 => {
            let now_on = fleet::tenant_shard_uncached(s, &tenant)
                .await
                .map_err(ApiError::from_port)?;
            if now_on != shard {
                return Ok(Checked::AskAgain { tenant, shard });
            }
            Ok(Checked::Caller(Caller::Tenant {
                tenant,
                scopes,
                shard,
            }))
        }
        Admission::Admitted { .. } => Ok(Checked::Caller(Caller::Tenant {
            tenant,
            scopes,
            shard,
        })),
        Admission::Moved => Ok(Checked::AskAgain { tenant, shard }),
        Admission::TenantDisabled => Err(tenant_disabled()),
        Admission::RateLimited {
            retry_after_seconds,
        } => Err(ApiError::too_many(
            "rate_limited",
            "the tenant's requests per minute are used up; retry after Retry-After seconds",
            retry_after_seconds,
        )),
    }
}

fn tenant_disabled() -> ApiError {
    ApiError::new(401, "tenant_disabled", "the token's tenant is disabled")
}

/// The tenant (and scopes, and shard) `bearer` is a token of:
/// `INGEST_TOKEN` the default tenant's, else a tenant token, found through
/// the directory and checked on its tenant's shard. `None`: neither. A
/// token of a disabled tenant is refused here (401).
async fn tenant_of<S: Shards>(
    s: &S,
    secrets: &Secrets,
    bearer: Option<&str>,
) -> Result<Option<(TenantId, Scopes, ShardId)>, ApiError> {
    if bearer_matches(bearer, secrets.ingest_token.as_deref()) {
        let tenant = TenantId::default_tenant();
        let shard = fleet::tenant_shard(s, &tenant)
            .await
            .map_err(ApiError::from_port)?;
        return Ok(Some((tenant, Scopes::all(), shard)));
    }
    let Some(token) = bearer else {
        return Ok(None);
    };
    let placed = fleet::token_shard(s, token)
        .await
        .map_err(ApiError::from_port)?;
    let Some((listed, shard)) = placed else {
        return Ok(None);
    };
    let p = fleet::home(s, shard).map_err(ApiError::from_port)?;
    match p.token_grant(token).await.map_err(ApiError::from_port)? {
        // The shard's tenant must be the one the directory names (with one
        // shard the directory is not read: `listed` is empty).
        TokenGrant::Granted { tenant, scopes }
            if listed.is_empty() || listed == tenant.as_str() =>
        {
            Ok(Some((tenant, scopes, shard)))
        }
        TokenGrant::Granted { .. } | TokenGrant::Invalid => Ok(None),
        TokenGrant::TenantDisabled => Err(tenant_disabled()),
    }
}
