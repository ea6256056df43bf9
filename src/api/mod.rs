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
//! (documents and jobs), `search.rs`, `admin.rs` (`/v1/admin/*`), each
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
mod documents;
mod fields;
mod search;

use crate::pipeline::{log_event, Pipeline, Refused};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

pub struct ApiRequest<'a> {
    pub method: &'a str,
    /// The path as received, still percent-encoded.
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    pub status: u16,
    pub body: Value,
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
}

impl ApiError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
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

    fn response(self) -> ApiResponse {
        ApiResponse {
            status: self.status,
            body: self.body(),
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
        BackfillState { state, action } => ApiError::new(
            409,
            "backfill_state",
            format!("a {state} backfill cannot {}", action.as_str()),
        ),
        PlanChanged => ApiError::new(
            409,
            "plan_changed",
            "the letters changed since the preflight; run it again",
        ),
    }
}

fn ok(status: u16, body: Value) -> ApiResponse {
    ApiResponse { status, body }
}

fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such route")
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "method_not_allowed",
        "this method is not allowed on this route",
    )
}

/// A view as JSON (views are plain data; a failure is a bug, answered 500).
fn to_json(view: impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(view)
        .map_err(|_| ApiError::new(500, "internal", "a response could not be rendered"))
}

pub async fn handle<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    secrets: &Secrets,
    req: ApiRequest<'_>,
) -> ApiResponse
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    match route(p, secrets, &req).await {
        Ok(r) => r,
        Err(e) => e.response(),
    }
}

/// The route table: the health check, then (authenticated) `/v1/admin/*`
/// (see `admin::route`) and the rest of `/v1/*`.
async fn route<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    secrets: &Secrets,
    req: &ApiRequest<'_>,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    if path == "/healthz" {
        return health(req.method);
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found());
    };
    check_auth(secrets, path, req.authorization)?;
    if let Some(admin_path) = rest.strip_prefix("admin/") {
        return admin::route(p, req, admin_path, query).await;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    match (req.method, segments.as_slice()) {
        ("PUT", ["documents", id]) => documents::put(p, req, id).await,
        ("GET", ["documents", id]) => documents::get(p, id).await,
        ("DELETE", ["documents", id]) => documents::delete(p, id).await,
        ("POST", ["documents"]) => documents::post(p, req).await,
        ("POST", ["documents", id, "reindex"]) => documents::reindex(p, id).await,
        ("GET", ["jobs", id]) => documents::job(p, id).await,
        ("POST", ["search"]) => search::post(p, req).await,
        (_, ["documents", _]) | (_, ["documents"]) | (_, ["jobs", _]) | (_, ["search"]) => {
            Err(method_not_allowed())
        }
        _ => Err(not_found()),
    }
}

/// `GET /healthz` (or `HEAD`): no auth, no port call.
fn health(method: &str) -> Result<ApiResponse, ApiError> {
    match method {
        "GET" | "HEAD" => Ok(ok(200, json!({ "ok": true }))),
        _ => Err(method_not_allowed()),
    }
}

/// Constant-time check of a bearer token against the configured secret.
fn bearer_matches(header: Option<&str>, secret: &str) -> bool {
    let Some(token) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
        return false;
    };
    // Compare digests: equal length inputs, so the time does not reveal
    // even the length of the secret.
    let a = crate::core::ids::sha256_hex(token.as_bytes());
    let b = crate::core::ids::sha256_hex(secret.as_bytes());
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Whether `authorization` may call `path` (its query string ignored):
/// `/v1/admin/*` needs the admin token (the ingest token gets 403), the
/// rest of `/v1/*` the ingest token; other paths need none. The Worker calls
/// this before it reads a request body, so an unauthenticated client cannot
/// make it read one.
pub fn authenticate(
    secrets: &Secrets,
    path: &str,
    authorization: Option<&str>,
) -> Result<(), ApiResponse> {
    check_auth(secrets, path, authorization).map_err(ApiError::response)
}

fn check_auth(secrets: &Secrets, path: &str, authorization: Option<&str>) -> Result<(), ApiError> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Ok(());
    };
    if rest.starts_with("admin/") {
        // The ingest token is valid but not enough here: 403, not 401.
        return authorize(secrets.admin_token.as_deref(), authorization).map_err(|e| {
            let ingest = secrets
                .ingest_token
                .as_deref()
                .is_some_and(|t| !t.is_empty() && bearer_matches(authorization, t));
            if e.status == 401 && ingest {
                ApiError::new(403, "forbidden", "this route needs the admin token")
            } else {
                e
            }
        });
    }
    authorize(secrets.ingest_token.as_deref(), authorization)
}

fn authorize(secret: Option<&str>, authorization: Option<&str>) -> Result<(), ApiError> {
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        log_event("auth_not_configured", json!({ "bucket": "config_invalid" }));
        return Err(ApiError::new(
            503,
            "auth_not_configured",
            "the service has no credentials configured",
        ));
    };
    if bearer_matches(authorization, secret) {
        Ok(())
    } else {
        Err(ApiError::new(
            401,
            "unauthorized",
            "missing or invalid bearer token",
        ))
    }
}
