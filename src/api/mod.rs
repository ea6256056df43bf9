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
//! Errors are `{"error": {"code", "message"}}` with a stable snake_case code
//! and a message that never echoes document content or raw platform errors.
//! Bad input is rejected before anything is written.

use crate::core::chunk::ContentType;
use crate::core::ids::{DocId, DocIdError};
use crate::pipeline::{
    log_event, DocumentInput, DocumentView, IntakeError, IntakeItem, IntakeOutcome, LetterFilter,
    Pipeline, RedriveRequest, SearchRequest,
};
use crate::ports::{Clock, Database, Embedder, JobQueue, MetadataFilter, PortError, VectorIndex};
use serde_json::{json, Map, Value};
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
            format!("unknown field {prefix}{:?}", truncate(key, 64)),
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

fn ok(status: u16, body: Value) -> ApiResponse {
    ApiResponse { status, body }
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

fn percent_decode(raw: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::new(
            400,
            "invalid_path",
            "the path is not valid percent-encoded UTF-8",
        )
    };
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = raw.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn parse_doc_id(raw: &str, field: &str) -> Result<DocId, ApiError> {
    DocId::parse(raw).map_err(|e| {
        ApiError::field(
            field,
            match e {
                DocIdError::Empty => "must not be empty",
                DocIdError::TooLong => "must be at most 256 bytes of UTF-8",
                DocIdError::ControlCharacter => "must not contain control characters",
                DocIdError::DotSegment => "must not be . or .. (a URL path cannot address them)",
            },
        )
    })
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
    let (path, query) = match req.path.split_once('?') {
        Some((p, q)) => (p, q),
        None => (req.path, ""),
    };
    if path == "/healthz" {
        return match req.method {
            "GET" | "HEAD" => Ok(ok(200, json!({ "ok": true }))),
            _ => Err(method_not_allowed()),
        };
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(ApiError::new(404, "not_found", "no such route"));
    };
    check_auth(secrets, path, req.authorization)?;
    if let Some(admin_path) = rest.strip_prefix("admin/") {
        return admin_route(p, req, admin_path, query).await;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    match (req.method, segments.as_slice()) {
        ("PUT", ["documents", id]) => {
            let doc_id = parse_doc_id(&percent_decode(id)?, "doc_id")?;
            let body = json_body(p, req)?;
            let input = parse_document(p, &body, Some(doc_id))?;
            let out = intake(p, &[IntakeItem::Put(input)]).await?;
            Ok(outcome_response(p, one_outcome(out)?).await?)
        }
        ("GET", ["documents", id]) => {
            let doc_id = parse_doc_id(&percent_decode(id)?, "doc_id")?;
            match p
                .document(doc_id.as_str())
                .await
                .map_err(ApiError::from_port)?
            {
                Some(view) => Ok(ok(200, to_json(view)?)),
                None => Err(ApiError::new(404, "document_not_found", "no such document")),
            }
        }
        ("DELETE", ["documents", id]) => {
            let doc_id = parse_doc_id(&percent_decode(id)?, "doc_id")?;
            let out = intake(p, &[IntakeItem::Delete(doc_id)]).await?;
            Ok(outcome_response(p, one_outcome(out)?).await?)
        }
        ("POST", ["documents"]) => {
            let body = json_body(p, req)?;
            if body.get("documents").is_some() {
                batch_intake(p, &body).await
            } else {
                let input = parse_document(p, &body, None)?;
                let out = intake(p, &[IntakeItem::Put(input)]).await?;
                Ok(outcome_response(p, one_outcome(out)?).await?)
            }
        }
        ("POST", ["documents", id, "reindex"]) => {
            let doc_id = parse_doc_id(&percent_decode(id)?, "doc_id")?;
            match p
                .reindex_document(doc_id.as_str())
                .await
                .map_err(ApiError::from_port)?
            {
                Ok((version, job_id)) => Ok(ok(
                    202,
                    json!({ "doc_id": doc_id.as_str(), "version": version, "job_id": job_id }),
                )),
                Err(refusal) => Err(refused(refusal)),
            }
        }
        ("GET", ["jobs", id]) => {
            let job_id = percent_decode(id)?;
            match p
                .store
                .job_view(&job_id)
                .await
                .map_err(ApiError::from_port)?
            {
                Some(job) => {
                    let view =
                        crate::pipeline::JobView::from_row(job, p.cfg.consume_subrequests_max);
                    Ok(ok(200, to_json(view)?))
                }
                None => Err(ApiError::new(404, "job_not_found", "no such job")),
            }
        }
        ("POST", ["search"]) => {
            let body = json_body(p, req)?;
            let sreq = parse_search(p, &body)?;
            let hits = p.search(&sreq).await.map_err(ApiError::from_port)?;
            Ok(ok(200, json!({ "results": hits })))
        }
        (_, ["documents", _]) | (_, ["documents"]) | (_, ["jobs", _]) | (_, ["search"]) => {
            Err(method_not_allowed())
        }
        _ => Err(ApiError::new(404, "not_found", "no such route")),
    }
}

async fn admin_route<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    req: &ApiRequest<'_>,
    path: &str,
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
    let segments: Vec<&str> = path.split('/').collect();
    match (req.method, segments.as_slice()) {
        ("GET", ["repair", "runs"]) => {
            let limit = query_limit(&q, 20, 200)?;
            let runs = p.repair_runs(limit).await.map_err(ApiError::from_port)?;
            Ok(ok(200, json!({ "runs": runs })))
        }
        ("GET", ["dead-letters", "summary"]) => {
            let groups = p.dead_letter_summary().await.map_err(ApiError::from_port)?;
            Ok(ok(200, json!({ "groups": groups })))
        }
        ("GET", ["dead-letters"]) => {
            let f = LetterFilter {
                bucket: q.get("bucket").cloned(),
                doc_id: q.get("doc_id").cloned(),
                since: query_int(&q, "since")?,
                until: query_int(&q, "until")?,
                cursor: q.get("cursor").cloned(),
                limit: query_limit(&q, 50, 500)?,
            };
            let (letters, next) = p.dead_letters(&f).await.map_err(ApiError::from_port)?;
            Ok(ok(200, json!({ "letters": letters, "next_cursor": next })))
        }
        ("POST", ["redrives"]) => {
            let body = json_body(p, req)?;
            let (rreq, plan_id) = parse_redrive(&body)?;
            match plan_id {
                None => {
                    let plan = p.redrive_plan(&rreq).await.map_err(ApiError::from_port)?;
                    Ok(ok(200, json!({ "preflight": true, "plan": plan })))
                }
                Some(id) => match p
                    .redrive_execute(&rreq, &id)
                    .await
                    .map_err(ApiError::from_port)?
                {
                    Some(view) => Ok(ok(202, view)),
                    None => Err(ApiError::new(
                        409,
                        "plan_changed",
                        "the letters changed since the preflight; run it again",
                    )),
                },
            }
        }
        ("GET", ["redrives", id]) => {
            let id = percent_decode(id)?;
            // Polling also moves the redrive on.
            p.redrive_advance(&id).await.map_err(ApiError::from_port)?;
            match p.redrive_view(&id).await.map_err(ApiError::from_port)? {
                Some(view) => Ok(ok(200, view)),
                None => Err(ApiError::new(404, "redrive_not_found", "no such redrive")),
            }
        }
        ("GET", ["generations"]) => Ok(ok(
            200,
            p.generations_view().await.map_err(ApiError::from_port)?,
        )),
        ("POST", ["generations", n, action @ ("activate" | "retire")]) => {
            let g: u32 = n
                .parse()
                .map_err(|_| ApiError::new(404, "generation_not_found", "no such generation"))?;
            let out = if *action == "activate" {
                p.activate_generation(g).await
            } else {
                p.retire_generation(g).await
            };
            match out.map_err(ApiError::from_port)? {
                Ok(view) => Ok(ok(200, view)),
                Err(refusal) => Err(refused(refusal)),
            }
        }
        ("POST", ["reindex"]) => {
            let body = json_body(p, req)?;
            let (scope, page_size) = parse_backfill(p, &body)?;
            match p
                .start_backfill(&scope, page_size)
                .await
                .map_err(ApiError::from_port)?
            {
                Ok(view) => Ok(ok(202, json!({ "backfill": view }))),
                Err(refusal) => Err(refused(refusal)),
            }
        }
        ("GET", ["reindex"]) => {
            let limit = query_limit(&q, 20, 200)?;
            Ok(ok(
                200,
                json!({ "backfills": p.backfills(limit).await.map_err(ApiError::from_port)? }),
            ))
        }
        ("GET", ["reindex", id]) => match p
            .backfill_view(&percent_decode(id)?)
            .await
            .map_err(ApiError::from_port)?
        {
            Some(view) => Ok(ok(200, view)),
            None => Err(ApiError::new(404, "backfill_not_found", "no such backfill")),
        },
        ("POST", ["reindex", id, action @ ("pause" | "resume" | "cancel")]) => {
            match p
                .backfill_transition(&percent_decode(id)?, action)
                .await
                .map_err(ApiError::from_port)?
            {
                Some(Ok(view)) => Ok(ok(200, view)),
                Some(Err(refusal)) => Err(refused(refusal)),
                None => Err(ApiError::new(404, "backfill_not_found", "no such backfill")),
            }
        }
        (_, ["generations", ..]) | (_, ["reindex", ..]) => Err(method_not_allowed()),
        (_, ["repair", "runs"]) | (_, ["dead-letters", ..]) | (_, ["redrives", ..]) => {
            Err(method_not_allowed())
        }
        _ => Err(ApiError::new(404, "not_found", "no such route")),
    }
}

fn parse_query(query: &str) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
    let mut out = std::collections::BTreeMap::new();
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(
            percent_decode(&k.replace('+', " "))?,
            percent_decode(&v.replace('+', " "))?,
        );
    }
    Ok(out)
}

fn query_int(
    q: &std::collections::BTreeMap<String, String>,
    name: &str,
) -> Result<Option<i64>, ApiError> {
    q.get(name)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::field(name, "must be an integer (milliseconds since the epoch)")
            })
        })
        .transpose()
}

fn query_limit(
    q: &std::collections::BTreeMap<String, String>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::field(
                "limit",
                &format!("must be an integer in 1..={max}"),
            )),
        },
    }
}

/// `{"filter": {"bucket"?, "since"?, "until"?, "doc_ids"?}, "canary_size"? (3-5),
/// "max_failed_canaries"?, "max_failure_ratio"?, "batch_size"?, "plan_id"?}`
fn parse_redrive(body: &Value) -> Result<(RedriveRequest, Option<String>), ApiError> {
    let Value::Object(obj) = body else {
        return Err(ApiError::new(
            400,
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
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
    let uint = |name: &str,
                default: usize,
                range: std::ops::RangeInclusive<usize>|
     -> Result<usize, ApiError> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => match v.as_u64().map(|n| n as usize) {
                Some(n) if range.contains(&n) => Ok(n),
                _ => Err(ApiError::field(
                    name,
                    &format!("must be an integer in {}..={}", range.start(), range.end()),
                )),
            },
        }
    };
    let canary_size = uint("canary_size", 3, 3..=5)?;
    let max_failed_canaries = uint("max_failed_canaries", 0, 0..=5)?;
    let batch_size = uint("batch_size", 10, 1..=100)?;
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
        canary_size,
        max_failed_canaries,
        max_failure_ratio,
        batch_size,
    };
    match obj.get("filter") {
        None | Some(Value::Null) => {}
        Some(Value::Object(f)) => {
            for (k, v) in f {
                match (k.as_str(), v) {
                    ("bucket", Value::String(s))
                        if crate::core::failure::FailureBucket::parse(s).is_some() =>
                    {
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
                    ("doc_ids", Value::Array(ids)) if ids.len() <= 100 => {
                        let mut out = Vec::new();
                        for id in ids {
                            let Some(s) = id.as_str() else {
                                return Err(ApiError::field("filter.doc_ids", "must be strings"));
                            };
                            out.push(parse_doc_id(s, "filter.doc_ids")?.as_str().to_string());
                        }
                        rreq.doc_ids = Some(out);
                    }
                    ("doc_ids", _) => {
                        return Err(ApiError::field(
                            "filter.doc_ids",
                            "must be an array of at most 100 ids",
                        ))
                    }
                    _ => return Err(ApiError::unknown_field("filter.", k)),
                }
            }
        }
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

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "method_not_allowed",
        "this method is not allowed on this route",
    )
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

fn json_body<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    req: &ApiRequest<'_>,
) -> Result<Value, ApiError> {
    if req.body.len() > p.cfg.request_bytes_max {
        return Err(ApiError::new(
            413,
            "payload_too_large",
            format!("the request body exceeds {} bytes", p.cfg.request_bytes_max),
        ));
    }
    if let Some(ct) = req.content_type {
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" {
            return Err(ApiError::new(
                415,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
    }
    serde_json::from_slice(req.body)
        .map_err(|_| ApiError::new(400, "invalid_json", "the body is not valid JSON"))
}

/// Validates one document object. `path_doc_id` is the ID from the URL (PUT).
fn parse_document<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    body: &Value,
    path_doc_id: Option<DocId>,
) -> Result<DocumentInput, ApiError> {
    let Value::Object(obj) = body else {
        return Err(ApiError::new(
            400,
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
    only_fields(obj, &["doc_id", "text", "metadata", "content_type"], "")?;
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
    let text = match obj.get("text") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ApiError::field("text", "must be a string")),
        None => return Err(ApiError::field("text", "is required")),
    };
    if text.len() > p.cfg.document_bytes_max {
        return Err(ApiError::new(
            413,
            "document_too_large",
            format!(
                "text is {} bytes; the limit is {} bytes",
                text.len(),
                p.cfg.document_bytes_max
            ),
        ));
    }
    if text.trim().is_empty() {
        return Err(ApiError::field(
            "text",
            "must contain non-whitespace characters",
        ));
    }
    let content_type = match obj.get("content_type") {
        None | Some(Value::Null) => ContentType::Plain,
        Some(Value::String(s)) => ContentType::parse(s).ok_or_else(|| {
            ApiError::new(
                415,
                "unsupported_content_type",
                "content_type must be text/plain or text/markdown",
            )
        })?,
        Some(_) => return Err(ApiError::field("content_type", "must be a string")),
    };
    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => parse_metadata(p, m, "metadata")?,
        Some(_) => return Err(ApiError::field("metadata", "must be an object")),
    };
    Ok(DocumentInput {
        doc_id,
        text,
        metadata,
        content_type,
    })
}

/// A refusal from the pipeline as an API error.
fn refused((status, code, message): crate::pipeline::Refusal) -> ApiError {
    ApiError::new(status, code, message)
}

/// The body of `POST /v1/admin/reindex`: `{"scope": "all" | "filter" |
/// "config", "filter": {...} (scope filter only), "page_size": 1..=100}`.
fn parse_backfill<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    body: &Value,
) -> Result<(crate::pipeline::BackfillScope, u32), ApiError> {
    use crate::pipeline::BackfillScope;
    let Some(obj) = body.as_object() else {
        return Err(ApiError::new(
            400,
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
    only_fields(obj, &["scope", "filter", "page_size"], "")?;
    let scope = match (obj.get("scope").and_then(Value::as_str), obj.get("filter")) {
        (Some("all"), None) => BackfillScope::All,
        (Some("config"), None) => BackfillScope::Config,
        (Some("filter"), Some(Value::Object(f))) if !f.is_empty() => {
            let f = parse_metadata(p, f, "filter")?;
            BackfillScope::Filter(f)
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
        None | Some(Value::Null) => p.cfg.backfill_page_size,
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
    Ok((scope, page_size))
}

/// Keys the pipeline puts on every vector; user metadata may not use them.
const RESERVED_METADATA_KEYS: [&str; 4] = ["doc_id", "version", "chunk", "generation"];

fn parse_metadata<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    m: &Map<String, Value>,
    field: &str,
) -> Result<Map<String, Value>, ApiError> {
    if m.len() > 32 {
        return Err(ApiError::field(field, "must have at most 32 keys"));
    }
    for (k, v) in m {
        if k.is_empty()
            || k.len() > 64
            || k.starts_with('$')
            || k.contains('.')
            || k.contains('"')
            || k.chars().any(char::is_control)
        {
            return Err(ApiError::field(
                field,
                "keys must be 1-64 bytes, without '.', a leading '$' or control characters",
            ));
        }
        if RESERVED_METADATA_KEYS.contains(&k.as_str()) {
            return Err(ApiError::field(
                field,
                "keys doc_id, version, chunk and generation are reserved",
            ));
        }
        if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            return Err(ApiError::field(
                field,
                "values must be strings, numbers or booleans",
            ));
        }
    }
    let size = Value::Object(m.clone()).to_string().len();
    if size > p.cfg.metadata_bytes_max {
        return Err(ApiError::field(
            field,
            &format!(
                "must serialize to at most {} bytes",
                p.cfg.metadata_bytes_max
            ),
        ));
    }
    Ok(m.clone())
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

/// Refuses the first key of `obj` not in `allowed` (`prefix` names the
/// enclosing object, e.g. `"filter."`).
fn only_fields(
    obj: &serde_json::Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), ApiError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::unknown_field(prefix, k)),
        None => Ok(()),
    }
}

/// The outcome of a one-item intake.
fn one_outcome(out: Vec<IntakeOutcome>) -> Result<IntakeOutcome, ApiError> {
    out.into_iter()
        .next()
        .ok_or_else(|| ApiError::new(500, "internal", "the intake returned no outcome"))
}

/// A view as JSON (views are plain data; a failure is a bug, answered 500).
fn to_json(view: impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(view)
        .map_err(|_| ApiError::new(500, "internal", "a response could not be rendered"))
}

fn parse_search<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    body: &Value,
) -> Result<SearchRequest, ApiError> {
    let Value::Object(obj) = body else {
        return Err(ApiError::new(
            400,
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
    only_fields(obj, &["query", "top_k", "filter"], "")?;
    let query = match obj.get("query") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 4096 => s.clone(),
        Some(Value::String(_)) => {
            return Err(ApiError::field(
                "query",
                "must be 1-4096 bytes and not blank",
            ))
        }
        Some(_) => return Err(ApiError::field("query", "must be a string")),
        None => return Err(ApiError::field("query", "is required")),
    };
    // The embedding model would truncate (or refuse) a longer query: refuse
    // it here, never silently.
    let tokens = p.cfg.embedding_tokenizer.count(&query);
    if tokens > p.cfg.query_tokens_max() {
        return Err(ApiError::new(
            422,
            "query_too_long",
            format!(
                "the query may be {tokens} tokens for the embedding model ({} tokenizer bound); at most {} are taken",
                p.cfg.embedding_tokenizer.as_str(),
                p.cfg.query_tokens_max()
            ),
        ));
    }
    let top_k = match obj.get("top_k") {
        None | Some(Value::Null) => p.cfg.search_top_k_default,
        Some(v) => match v.as_u64() {
            Some(k) if k >= 1 && k as usize <= p.cfg.search_top_k_max => k as usize,
            _ => {
                return Err(ApiError::field(
                    "top_k",
                    &format!("must be an integer in 1..={}", p.cfg.search_top_k_max),
                ))
            }
        },
    };
    let mut doc_id = None;
    let mut metadata = MetadataFilter::new();
    match obj.get("filter") {
        None | Some(Value::Null) => {}
        Some(Value::Object(f)) => {
            for (k, v) in f {
                match (k.as_str(), v) {
                    ("doc_id", Value::String(s)) => {
                        doc_id = Some(parse_doc_id(s, "filter.doc_id")?.as_str().to_string())
                    }
                    ("doc_id", _) => {
                        return Err(ApiError::field("filter.doc_id", "must be a string"))
                    }
                    ("metadata", Value::Object(m)) => {
                        metadata = parse_metadata(p, m, "filter.metadata")?
                            .into_iter()
                            .collect();
                    }
                    ("metadata", _) => {
                        return Err(ApiError::field("filter.metadata", "must be an object"))
                    }
                    _ => return Err(ApiError::unknown_field("filter.", k)),
                }
            }
        }
        Some(_) => return Err(ApiError::field("filter", "must be an object")),
    }
    let req = SearchRequest {
        query,
        top_k,
        doc_id,
        metadata,
    };
    // The filter as the index gets it (with the largest generation number):
    // over the index's limit it would be refused, not a 500.
    let filter_bytes =
        serde_json::to_string(&req.index_filter(u32::MAX)).map_or(usize::MAX, |f| f.len());
    if filter_bytes > p.cfg.index_filter_bytes_max {
        return Err(ApiError::field(
            "filter",
            &format!(
                "is {filter_bytes} bytes for the index, over its {} (INDEX_FILTER_BYTES_MAX)",
                p.cfg.index_filter_bytes_max
            ),
        ));
    }
    Ok(req)
}

async fn intake<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    items: &[IntakeItem],
) -> Result<Vec<IntakeOutcome>, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    p.intake(items).await.map_err(|e| match e {
        IntakeError::Conflict => ApiError::new(
            409,
            "conflict",
            "a concurrent write to the same document won; retry",
        ),
        IntakeError::Port(e) => ApiError::from_port(e),
    })
}

/// The answer for one intake outcome, with the document's current state
/// for an unchanged one.
async fn outcome_response<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    out: IntakeOutcome,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let views = match &out {
        IntakeOutcome::Unchanged { doc_id, .. } => p
            .documents(&[doc_id.as_str()])
            .await
            .map_err(ApiError::from_port)?,
        _ => Vec::new(),
    };
    let (status, body) = outcome_json(out, &views);
    Ok(ok(status, body))
}

fn outcome_json(out: IntakeOutcome, views: &[DocumentView]) -> (u16, Value) {
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
            let e = ApiError::new(404, "document_not_found", "no such document");
            (404, e.body())
        }
    }
}

async fn batch_intake<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    body: &Value,
) -> Result<ApiResponse, ApiError>
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let Some(obj) = body.as_object() else {
        return Err(ApiError::new(
            400,
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
    // A batch body holds only "documents".
    only_fields(obj, &["documents"], "")?;
    let Some(Value::Array(docs)) = obj.get("documents") else {
        return Err(ApiError::field("documents", "must be an array"));
    };
    if docs.is_empty() {
        return Err(ApiError::field("documents", "must not be empty"));
    }
    if docs.len() > p.cfg.intake_batch_documents_max {
        return Err(ApiError::new(
            413,
            "batch_too_large",
            format!(
                "a batch holds at most {} documents",
                p.cfg.intake_batch_documents_max
            ),
        ));
    }
    // Validate every item first; only valid ones are written, in one batch.
    let mut slots: Vec<Result<usize, ApiError>> = Vec::with_capacity(docs.len());
    let mut items = Vec::new();
    for d in docs {
        match parse_document(p, d, None) {
            Ok(input) => {
                slots.push(Ok(items.len()));
                items.push(IntakeItem::Put(input));
            }
            Err(e) => slots.push(Err(e)),
        }
    }
    let outcomes = if items.is_empty() {
        Vec::new()
    } else {
        intake(p, &items).await?
    };
    let unchanged: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| match o {
            IntakeOutcome::Unchanged { doc_id, .. } => Some(doc_id.as_str()),
            _ => None,
        })
        .collect();
    let views = if unchanged.is_empty() {
        Vec::new()
    } else {
        p.documents(&unchanged).await.map_err(ApiError::from_port)?
    };
    let results: Vec<Value> = slots
        .into_iter()
        .zip(docs)
        .map(|(slot, raw)| match slot {
            Ok(i) => match outcomes.get(i) {
                Some(o) => {
                    let (status, mut body) = outcome_json(o.clone(), &views);
                    if let Some(obj) = body.as_object_mut() {
                        obj.insert("status".into(), json!(status));
                    }
                    body
                }
                None => json!({ "status": 500, "error": { "code": "internal", "message": "no outcome for this item" } }),
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
        })
        .collect();
    Ok(ok(200, json!({ "results": results })))
}
