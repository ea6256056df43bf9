//! Worker entry points and platform adapters (wasm32 only). Thin on
//! purpose: convert platform types, pick the configured backends, call the
//! pipeline, and translate its outcome back. No business logic here.
//!
//! Here: the `fetch`, `queue` and `scheduled` entry points, the log sink
//! and panic hook they install, and the adapters `d1`, `vectorize`,
//! `workers_ai` (and the queue producer and wall clock below).
//!
//! May import: everything but `native` (the top layer, beside it).

mod d1;
mod panic;
mod vectorize;
mod workers_ai;

use crate::adapters::local_embedder::LocalEmbedder;
use crate::adapters::local_index::{LocalIndex, LocalIndexTuning};
use crate::adapters::{IndexLimits, ShardQueue};
use crate::api::{self, ApiRequest, Secrets};
use crate::config::{Config, EmbedderBackend, IndexBackend};
use crate::core::failure::FailureBucket;
use crate::core::index_config::EmbedModel;
use crate::core::shards::ShardId;
use crate::pipeline::fleet::{DirectoryCache, Fleet, Shards};
use crate::pipeline::{log_event, ConsumeOutcome, Pipeline, Settle};
use crate::ports::{
    Clock, Embedder, JobMessage, JobQueue, MetadataFilter, PortError, VectorIndex, VectorMatch,
    VectorRecord,
};
use d1::D1Db;
use js_sys::Reflect;
use serde::Serialize;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use vectorize::{IndexInfo, VectorizeBinding, VectorizeIndex};
use wasm_bindgen::JsValue;
use worker::{
    event, Context, Env, MessageBatch, MessageExt, QueueRetryOptionsBuilder, Request, Response,
    ScheduleContext, ScheduledEvent,
};
use workers_ai::{AiBinding, WorkersAiEmbedder};

/// The index backends this build can use.
enum AnyIndex {
    Local(LocalIndex<D1Db>),
    Vectorize(VectorizeIndex),
    /// Every call fails with this error: a missing binding (`ConfigInvalid`),
    /// or an index that disagrees with the configuration
    /// (`IndexMisconfigured`) or could not be checked. All are transient,
    /// so jobs retry (and a deploy fixes them) instead of writing bad vectors.
    Refused(PortError),
}

impl VectorIndex for AnyIndex {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        match self {
            AnyIndex::Local(i) => i.upsert(vectors).await,
            AnyIndex::Vectorize(i) => i.upsert(vectors).await,
            AnyIndex::Refused(e) => Err(*e),
        }
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        match self {
            AnyIndex::Local(i) => i.delete_by_ids(ids).await,
            AnyIndex::Vectorize(i) => i.delete_by_ids(ids).await,
            AnyIndex::Refused(e) => Err(*e),
        }
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        match self {
            AnyIndex::Local(i) => i.query(vector, top_k, namespace, filter).await,
            AnyIndex::Vectorize(i) => i.query(vector, top_k, namespace, filter).await,
            AnyIndex::Refused(e) => Err(*e),
        }
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        match self {
            AnyIndex::Local(i) => i.get_by_ids(ids).await,
            AnyIndex::Vectorize(i) => i.get_by_ids(ids).await,
            AnyIndex::Refused(e) => Err(*e),
        }
    }
    fn refusal(&self) -> Option<PortError> {
        match self {
            AnyIndex::Refused(e) => Some(*e),
            AnyIndex::Local(_) | AnyIndex::Vectorize(_) => None,
        }
    }
}

/// The embedder backends this build can use.
enum AnyEmbedder {
    Local(LocalEmbedder),
    WorkersAi(WorkersAiEmbedder),
    Refused(PortError),
}

impl Embedder for AnyEmbedder {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        match self {
            AnyEmbedder::Local(e) => e.embed(model, texts).await,
            AnyEmbedder::WorkersAi(e) => e.embed(model, texts).await,
            AnyEmbedder::Refused(e) => Err(*e),
        }
    }
    fn refusal(&self) -> Option<PortError> {
        match self {
            AnyEmbedder::Refused(e) => Some(*e),
            AnyEmbedder::Local(_) | AnyEmbedder::WorkersAi(_) => None,
        }
    }
}

/// The text of a thrown JS value (name, message, code, status, cause), for
/// classification only: it may quote user content and is never logged.
pub(crate) fn js_error_text(e: &JsValue) -> String {
    let mut out = e.as_string().unwrap_or_default();
    let mut read = |obj: &JsValue| {
        for key in ["name", "message", "code", "status"] {
            if let Ok(v) = Reflect::get(obj, &JsValue::from_str(key)) {
                if let Some(s) = v.as_string() {
                    out.push(' ');
                    out.push_str(&s);
                } else if let Some(n) = v.as_f64() {
                    out.push_str(&format!(" {n}"));
                }
            }
        }
    };
    if e.is_object() {
        read(e);
        if let Ok(cause) = Reflect::get(e, &JsValue::from_str("cause")) {
            if cause.is_object() {
                read(&cause);
            }
        }
    }
    out
}

/// The producer bindings: the ingest queue, and the dead-letter queue (if
/// the deployment has one).
struct QueueBindings {
    ingest: Option<worker::Queue>,
    dlq: Option<worker::Queue>,
}

impl JobQueue for QueueBindings {
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        match &self.dlq {
            // No DLQ binding configured: D1 holds the evidence.
            None => Ok(()),
            Some(q) => q
                .send(message.clone())
                .await
                .map_err(|_| PortError::new(FailureBucket::QueueUnavailable, "dlq_send")),
        }
    }

    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        let Some(q) = &self.ingest else {
            return Err(PortError::new(
                FailureBucket::ConfigInvalid,
                "queue_binding_missing",
            ));
        };
        q.send_batch(messages.to_vec())
            .await
            .map_err(|_| PortError::new(FailureBucket::QueueUnavailable, "queue_send"))
    }
}

/// A shard's producer: the bindings, stamping the shard on each message.
type QueueProducer = ShardQueue<QueueBindings>;

struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> i64 {
        worker::Date::now().as_millis() as i64
    }
}

type App = Pipeline<D1Db, AnyIndex, AnyEmbedder, QueueProducer, WallClock>;

/// A Worker variable or secret, as a string.
fn setting(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .ok()
        .map(|v| v.to_string())
        .or_else(|| env.secret(name).ok().map(|v| v.to_string()))
}

/// Every shard's pipeline ([`crate::pipeline::fleet`]): shard 0 first.
type Deployment = Fleet<D1Db, AnyIndex, AnyEmbedder, QueueProducer, WallClock>;

/// The configuration from the Worker's variables. Fails with a bucket and
/// a static code, never with raw text.
fn config(env: &Env) -> Result<Config, PortError> {
    Config::from_lookup(|name| setting(env, name)).map_err(|e| {
        log_event(
            "config_invalid",
            json!({ "bucket": "config_invalid", "setting": e.setting() }),
        );
        PortError::new(FailureBucket::ConfigInvalid, "config_invalid")
    })
}

/// Builds the deployment from the Worker's bindings and variables: one
/// pipeline per shard of `SHARDS`, each over its own ledger and index
/// bindings (`core::shards`). A shard without its ledger's binding fails
/// the whole deployment (`config_invalid`): requests must not reach a
/// shard that is not there.
fn deployment(env: &Env) -> Result<Deployment, PortError> {
    let cfg = config(env)?;
    let mut shards = Vec::with_capacity(usize::from(cfg.shards));
    for n in 0..cfg.shards {
        shards.push(shard_app(env, &cfg, ShardId(n))?);
    }
    let mut all = shards.into_iter();
    let control = all
        .next()
        .ok_or(PortError::new(FailureBucket::ConfigInvalid, "no_shard"))?;
    let cache = DIRECTORY.with(Rc::clone);
    Ok(Fleet::new(control, all.collect()).with_cache(cache))
}

thread_local! {
    /// The isolate's directory cache (`DIRECTORY_CACHE_SECONDS`).
    static DIRECTORY: Rc<DirectoryCache> = Rc::new(DirectoryCache::default());
}

/// One shard's pipeline over its bindings.
fn shard_app(env: &Env, cfg: &Config, shard: ShardId) -> Result<App, PortError> {
    let cfg = cfg.clone();
    let db = env
        .d1(&shard.ledger_binding())
        .map_err(|_| PortError::new(FailureBucket::ConfigInvalid, "db_binding_missing"))?;
    let index = match cfg.index_backend {
        IndexBackend::LocalD1 => match env.d1(&shard.local_index_binding()) {
            Ok(vdb) => AnyIndex::Local(LocalIndex {
                db: D1Db(vdb),
                limits: IndexLimits::from_config(&cfg),
                tuning: LocalIndexTuning::from_config(&cfg),
                json_param_bytes_max: cfg.d1_json_param_bytes_max,
                reject_doc_prefix: setting(env, "LOCAL_INDEX_REJECT_DOC_PREFIX"),
            }),
            Err(_) => AnyIndex::Refused(PortError::new(
                FailureBucket::ConfigInvalid,
                "vectors_db_binding_missing",
            )),
        },
        IndexBackend::Vectorize => {
            match env.get_binding::<VectorizeBinding>(&shard.vectorize_binding()) {
                Ok(binding) => AnyIndex::Vectorize(VectorizeIndex {
                    binding,
                    limits: IndexLimits::from_config(&cfg),
                }),
                Err(_) => AnyIndex::Refused(PortError::new(
                    FailureBucket::ConfigInvalid,
                    "vectorize_binding_missing",
                )),
            }
        }
    };
    let embedder = match cfg.embedder_backend {
        EmbedderBackend::LocalHash => AnyEmbedder::Local(LocalEmbedder {
            batch_size_max: cfg.embed_batch_size,
        }),
        EmbedderBackend::WorkersAi => match env.get_binding::<AiBinding>("AI") {
            Ok(binding) => AnyEmbedder::WorkersAi(WorkersAiEmbedder {
                binding,
                batch_size_max: cfg.embed_batch_size,
            }),
            Err(_) => AnyEmbedder::Refused(PortError::new(
                FailureBucket::ConfigInvalid,
                "ai_binding_missing",
            )),
        },
    };
    // One queue for every shard: each message names its shard.
    let queue = ShardQueue {
        inner: QueueBindings {
            ingest: env.queue("INGEST_QUEUE").ok(),
            dlq: env.queue("DLQ").ok(),
        },
        shard,
    };
    Ok(Pipeline::new(
        cfg,
        D1Db(db),
        index,
        embedder,
        queue,
        WallClock,
    ))
}

fn json_response(status: u16, body: &serde_json::Value) -> worker::Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

/// A static asset ([`api::assets`]) with its type and headers.
fn asset_response(a: &api::assets::Asset, head: bool) -> worker::Result<Response> {
    let out = if head {
        Response::empty()?
    } else {
        Response::ok(a.body)?
    };
    let headers = out.headers();
    headers.set("Content-Type", a.content_type)?;
    for (name, value) in a.headers {
        headers.set(name, value)?;
    }
    Ok(out)
}

/// The API's answer as a response, with its `Retry-After` (a 429) and its
/// `Allow` (a 405).
fn api_response(resp: &api::ApiResponse) -> worker::Result<Response> {
    let out = json_response(resp.status, &resp.body)?;
    if let Some(seconds) = resp.retry_after {
        out.headers().set("Retry-After", &seconds.to_string())?;
    }
    if let Some(methods) = resp.allow {
        out.headers().set("Allow", methods)?;
    }
    Ok(out)
}

/// 32 bytes from the platform's CSPRNG (`crypto.getRandomValues`): the
/// entropy the API mints tokens from. `None` if it is not available.
fn entropy() -> Option<[u8; 32]> {
    let crypto = Reflect::get(&js_sys::global(), &JsValue::from_str("crypto")).ok()?;
    let get = Reflect::get(&crypto, &JsValue::from_str("getRandomValues")).ok()?;
    let get = wasm_bindgen::JsCast::dyn_ref::<js_sys::Function>(&get)?;
    let buf = js_sys::Uint8Array::new_with_length(32);
    get.call1(&crypto, &buf).ok()?;
    let mut out = [0u8; 32];
    buf.copy_to(&mut out);
    Some(out)
}

/// The outcome of comparing the Vectorize index with the configuration.
#[derive(Clone, Debug)]
struct IndexCheck {
    info: IndexInfo,
    verdict: Result<(), &'static str>,
}

thread_local! {
    /// The isolate's last definitive index check and when it was made (ms).
    /// Failed checks (the describe call failed) are not kept.
    /// One per shard, by number.
    static INDEX_CHECK: RefCell<std::collections::BTreeMap<u16, (i64, IndexCheck)>> =
        const { RefCell::new(std::collections::BTreeMap::new()) };
}

/// Describes the Vectorize index (at most once per `INDEX_CHECK_TTL_SECONDS`
/// per isolate) and compares it with the configuration. `Ok(None)` when the
/// index is not Vectorize; `Err` when it could not be described.
async fn check_index(app: &App) -> Result<Option<IndexCheck>, PortError> {
    let AnyIndex::Vectorize(index) = &app.index else {
        return Ok(None);
    };
    let now = WallClock.now_ms();
    let ttl_ms = i64::from(app.cfg.index_check_ttl_seconds) * 1000;
    let shard = app.shard.0;
    let cached = INDEX_CHECK.with(|c| c.borrow().get(&shard).cloned());
    if let Some((at, check)) = cached {
        if now.saturating_sub(at) < ttl_ms {
            return Ok(Some(check));
        }
    }
    let info = index.describe().await?;
    let verdict = info.verify(app.cfg.embedding_dimensions, app.cfg.vectorize_metric);
    let check = IndexCheck { info, verdict };
    if ttl_ms > 0 {
        INDEX_CHECK.with(|c| c.borrow_mut().insert(shard, (now, check.clone())));
    }
    Ok(Some(check))
}

/// Start-up safety for the queue and cron handlers: unless the Vectorize
/// index is known to match the configuration, every index call of this
/// invocation fails (transiently), so nothing is written to a wrong index.
async fn guard_index(app: &mut App, handler: &'static str) {
    match check_index(app).await {
        Ok(None)
        | Ok(Some(IndexCheck {
            verdict: Ok(()), ..
        })) => {}
        Ok(Some(IndexCheck {
            verdict: Err(code),
            info,
        })) => {
            log_event(
                "index_misconfigured",
                json!({ "handler": handler, "bucket": FailureBucket::IndexMisconfigured.as_str(), "code": code,
                        "index_dimensions": info.dimensions, "expected_dimensions": app.cfg.embedding_dimensions }),
            );
            app.index = AnyIndex::Refused(PortError::new(FailureBucket::IndexMisconfigured, code));
        }
        Err(e) => {
            log_event(
                "index_check_failed",
                json!({ "handler": handler, "bucket": e.bucket.as_str(), "code": e.code }),
            );
            app.index = AnyIndex::Refused(e);
        }
    }
}

/// What `GET /healthz?deep=1` reports of the index.
#[derive(Serialize, Default)]
struct IndexHealth {
    backend: &'static str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric_verified: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_dimensions: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_metric: Option<&'static str>,
}

#[derive(Serialize)]
struct EmbedderHealth<'a> {
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pooling: Option<&'static str>,
    dimensions: usize,
}

#[derive(Serialize)]
struct HealthError {
    code: &'static str,
    reason: &'static str,
    message: &'static str,
    /// With more than one shard: the shard whose index failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<u16>,
}

#[derive(Serialize)]
struct DeepHealth<'a> {
    ok: bool,
    /// Shards checked (each one's index: `index` is shard 0's).
    #[serde(skip_serializing_if = "is_one")]
    shards: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<IndexHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedder: Option<EmbedderHealth<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<HealthError>,
}

fn is_one(n: &u16) -> bool {
    *n == 1
}

fn health_failure(
    e: PortError,
    index: Option<IndexHealth>,
    message: &'static str,
) -> worker::Result<Response> {
    shard_health_failure(e, index, message, None)
}

/// [`health_failure`] of one shard's index (`shard`: with more than one).
fn shard_health_failure(
    e: PortError,
    index: Option<IndexHealth>,
    message: &'static str,
    shard: Option<u16>,
) -> worker::Result<Response> {
    let body = DeepHealth {
        ok: false,
        shards: 1,
        index,
        embedder: None,
        error: Some(HealthError {
            code: e.bucket.as_str(),
            reason: e.code,
            message,
            shard,
        }),
    };
    Ok(Response::from_json(&body)?.with_status(503))
}

/// `GET /healthz?deep=1`: the configuration, the bindings and (for
/// Vectorize) the index's dimensions and metric against the configuration.
/// Unauthenticated: it reveals backend names, model, dimensions and metric,
/// nothing else, and describes the index at most once per
/// `INDEX_CHECK_TTL_SECONDS` per isolate, so it cannot be used to load it.
async fn deep_health(env: &Env) -> worker::Result<Response> {
    let fleet = match deployment(env) {
        Ok(a) => a,
        Err(e) => return health_failure(e, None, "the service is misconfigured"),
    };
    let app = fleet.control();
    let embedder = match embedder_health(app) {
        Ok(h) => h,
        Err(e) => return health_failure(e, None, "the embedder is not available"),
    };
    // Every shard's index: the first that fails is the answer, named by
    // its shard when there are several.
    let several = fleet.all().len() > 1;
    let mut indexes = Vec::with_capacity(fleet.all().len());
    for (n, shard) in fleet.all().iter().enumerate() {
        let named = several.then(|| u16::try_from(n).unwrap_or(u16::MAX));
        match index_health(shard, named).await {
            Ok(h) => indexes.push(h),
            Err(refused) => return refused,
        }
    }
    let mut indexes = indexes.into_iter();
    let body = DeepHealth {
        ok: true,
        index: indexes.next(),
        embedder: Some(embedder),
        error: None,
        shards: fleet.count(),
    };
    Ok(Response::from_json(&body)?.with_status(200))
}

/// The embedder's part of the deep health check, or why it is not there.
fn embedder_health(app: &App) -> Result<EmbedderHealth<'_>, PortError> {
    Ok(match &app.embedder {
        AnyEmbedder::Local(_) => EmbedderHealth {
            backend: "local-hash",
            model: None,
            pooling: None,
            dimensions: app.cfg.embedding_dimensions,
        },
        // The configured model: the one new generations are built with.
        AnyEmbedder::WorkersAi(_) => EmbedderHealth {
            backend: "workers-ai",
            model: Some(&app.cfg.embedding_model),
            pooling: Some(app.cfg.embedding_pooling.as_str()),
            dimensions: app.cfg.embedding_dimensions,
        },
        AnyEmbedder::Refused(e) => return Err(*e),
    })
}

/// The index's part of the deep health check (Vectorize: described and
/// compared with the configuration), or the failure response.
async fn index_health(
    app: &App,
    shard: Option<u16>,
) -> Result<IndexHealth, worker::Result<Response>> {
    let cfg = &app.cfg;
    match &app.index {
        AnyIndex::Local(_) => Ok(IndexHealth {
            backend: "local-d1",
            ok: true,
            dimensions: Some(cfg.embedding_dimensions as u64),
            metric: Some("cosine".into()),
            ..IndexHealth::default()
        }),
        AnyIndex::Refused(e) => Err(shard_health_failure(
            *e,
            None,
            "the vector index is not available",
            shard,
        )),
        AnyIndex::Vectorize(_) => vectorize_health(app, shard).await,
    }
}

async fn vectorize_health(
    app: &App,
    shard: Option<u16>,
) -> Result<IndexHealth, worker::Result<Response>> {
    let cfg = &app.cfg;
    let failed = || IndexHealth {
        backend: "vectorize",
        ..IndexHealth::default()
    };
    match check_index(app).await {
        Ok(Some(IndexCheck {
            info,
            verdict: Ok(()),
        })) => Ok(IndexHealth {
            backend: "vectorize",
            ok: true,
            dimensions: info.dimensions,
            metric_verified: Some(info.metric.is_some()),
            metric: Some(
                info.metric
                    .unwrap_or_else(|| cfg.vectorize_metric.as_str().to_string()),
            ),
            ..IndexHealth::default()
        }),
        Ok(Some(IndexCheck {
            info,
            verdict: Err(code),
        })) => {
            let index = IndexHealth {
                dimensions: info.dimensions,
                metric: info.metric,
                expected_dimensions: Some(cfg.embedding_dimensions),
                expected_metric: Some(cfg.vectorize_metric.as_str()),
                ..failed()
            };
            Err(shard_health_failure(
                PortError::new(FailureBucket::IndexMisconfigured, code),
                Some(index),
                "the vector index does not match the configuration; nothing is written to it",
                shard,
            ))
        }
        Ok(None) => unreachable!("the index is Vectorize"),
        Err(e) => Err(shard_health_failure(
            e,
            Some(failed()),
            "the vector index could not be checked",
            shard,
        )),
    }
}

/// Cancels the request body's stream, unread: the runtime would otherwise
/// drain it (however long it is) before the response is delivered.
fn cancel_body(req: &Request) {
    let Ok(body) = Reflect::get(req.inner(), &JsValue::from_str("body")) else {
        return;
    };
    if let Ok(cancel) = Reflect::get(&body, &JsValue::from_str("cancel")) {
        if let Some(f) = wasm_bindgen::JsCast::dyn_ref::<js_sys::Function>(&cancel) {
            let _ = f.call0(&body);
        }
    }
}

/// The request body, read chunk by chunk up to `max` bytes. Past them it
/// is `None`, and the rest is read and dropped within the discard bounds
/// ([`drain`]): nothing past `max` is kept. An unreadable body reads as
/// empty (the API then answers it as malformed).
async fn read_body_capped(req: &mut Request, max: usize, cfg: &Config) -> Option<Vec<u8>> {
    use futures::StreamExt;
    let Ok(mut stream) = req.stream() else {
        return Some(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return Some(Vec::new());
        };
        if body.len() + chunk.len() > max {
            let read = body.len() + chunk.len();
            drop(body);
            drain(&mut stream, read, cfg).await;
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

/// Reads the rest of a refused body and drops it, chunk by chunk, until it
/// ends, `REQUEST_DISCARD_BYTES_MAX` bytes were read in all (`read` so
/// far), or `REQUEST_DISCARD_SECONDS_MAX` passed. A client that sends its
/// whole body before it reads the answer (Python's `http.client`, and so
/// `urllib` and `requests`) then reads the 413 instead of a connection
/// reset: a web server's lingering close.
async fn drain(stream: &mut worker::ByteStream, mut read: usize, cfg: &Config) {
    use futures::future::{select, Either};
    use futures::StreamExt;
    let deadline = worker::Delay::from(std::time::Duration::from_secs(
        cfg.request_discard_seconds_max,
    ));
    futures::pin_mut!(deadline);
    while read <= cfg.request_discard_bytes_max {
        match select(stream.next(), deadline.as_mut()).await {
            Either::Left((Some(Ok(chunk)), _)) => read = read.saturating_add(chunk.len()),
            Either::Left(_) | Either::Right(_) => return,
        }
    }
}

/// The Worker's log sink: `console.log` (Workers Logs).
fn console_sink(line: &str) {
    worker::console_log!("{}", line);
}

/// What every entry point does first: installs the log sink and the
/// content-free panic hook.
fn install() {
    crate::log::set_sink(console_sink);
    panic::install_hook();
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    install();
    let method = req.method().to_string();
    let path = req.url().map(|u| u.path().to_string()).unwrap_or_default();
    // The API sees the query string too (admin listings take filters).
    let path_and_query = req
        .url()
        .map(|u| match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        })
        .unwrap_or_default();
    if path == "/healthz" && method == "GET" {
        return health(&req, &env).await;
    }
    // The console and the contract: static, no credentials, no binding.
    if let Some(asset) = api::assets::asset(&method, &path) {
        return match asset {
            Ok(a) => asset_response(&a, method == "HEAD"),
            Err(e) => api_response(&e.response()),
        };
    }
    let fleet = match deployment(&env) {
        Ok(a) => a,
        Err(e) => {
            return json_response(
                503,
                &json!({ "error": { "code": e.bucket.as_str(), "message": "the service is misconfigured" } }),
            )
        }
    };
    let authorization = req.headers().get("Authorization").ok().flatten();
    let content_type = req.headers().get("Content-Type").ok().flatten();
    let secrets = Secrets {
        ingest_token: setting(&env, "INGEST_TOKEN"),
        admin_token: setting(&env, "ADMIN_TOKEN"),
    };
    // Credentials first: a body is never read for a request that would be
    // refused anyway.
    let cfg = &fleet.control().cfg;
    let caller = match api::authenticate(&fleet, &secrets, &path, authorization.as_deref()).await {
        Ok(caller) => caller,
        Err(refused) => {
            discard_body(&mut req, cfg).await;
            return api_response(&refused);
        }
    };
    let Some(entropy) = entropy() else {
        log_event(
            "entropy_unavailable",
            json!({ "bucket": FailureBucket::Internal.as_str() }),
        );
        return json_response(
            503,
            &json!({ "error": { "code": "internal", "message": "no source of randomness" } }),
        );
    };
    // Each route's own cap (a search's body is kilobytes, a document's
    // megabytes): nothing is read into memory past it.
    let (max, _) = api::body_bytes_max(cfg, &method, &path);
    let Some(body) = request_body(&mut req, &method, max, cfg).await else {
        return api_response(&api::too_large(cfg, &method, &path).response());
    };
    let resp = api::handle_as(
        &fleet,
        &caller,
        ApiRequest {
            method: &method,
            path: &path_and_query,
            authorization: authorization.as_deref(),
            content_type: content_type.as_deref(),
            body: &body,
            entropy,
        },
    )
    .await;
    api_response(&resp)
}

/// `GET /healthz`: plain liveness (no binding is touched, no subrequest is
/// made), or with `deep=1` the deep check.
async fn health(req: &Request, env: &Env) -> worker::Result<Response> {
    let deep = req.url().is_ok_and(|u| {
        u.query_pairs()
            .any(|(k, v)| k == "deep" && (v == "1" || v == "true"))
    });
    if deep {
        return deep_health(env).await;
    }
    json_response(200, &json!({ "ok": true }))
}

/// The length the request declares, if it declares one.
fn declared_length(req: &Request) -> Option<usize> {
    req.headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok())
}

/// Gets rid of a refused request's body, never parsed: read and dropped
/// within the discard bounds ([`drain`]) so that the client reads the
/// answer (cancelling it also made the local dev server fail the
/// connection's next request), or cancelled when its declared length is
/// past them.
async fn discard_body(req: &mut Request, cfg: &Config) {
    match declared_length(req) {
        Some(0) => {}
        Some(n) if n > cfg.request_discard_bytes_max => cancel_body(req),
        _ => match req.stream() {
            Ok(mut stream) => drain(&mut stream, 0, cfg).await,
            Err(_) => cancel_body(req),
        },
    }
}

/// The body of an authenticated request: empty for GET, HEAD and DELETE,
/// else at most `max` bytes whatever the length header says or whether
/// there is one (a chunked body). `None`: it is longer; it was read and
/// dropped ([`discard_body`]), never kept.
async fn request_body(
    req: &mut Request,
    method: &str,
    max: usize,
    cfg: &Config,
) -> Option<Vec<u8>> {
    if declared_length(req).is_some_and(|n| n > max) {
        discard_body(req, cfg).await;
        return None;
    }
    if matches!(method, "GET" | "HEAD" | "DELETE") {
        return Some(Vec::new());
    }
    read_body_capped(req, max, cfg).await
}

/// Acknowledges or retries one delivery as the pipeline settled it.
fn apply(raw: &worker::RawMessage, settle: Settle) {
    match settle {
        Settle::Ack => raw.ack(),
        Settle::Retry { delay_seconds } => raw.retry_with_options(
            &QueueRetryOptionsBuilder::new()
                .with_delay_seconds(delay_seconds)
                .build(),
        ),
    }
}

#[event(queue)]
async fn queue(
    batch: MessageBatch<serde_json::Value>,
    env: Env,
    _ctx: Context,
) -> worker::Result<()> {
    install();
    let mut fleet = match deployment(&env) {
        Ok(a) => a,
        Err(e) => {
            // Nothing can run with a broken configuration: keep the messages.
            log_event(
                "consume_config_invalid",
                json!({ "bucket": e.bucket.as_str(), "code": e.code }),
            );
            batch.retry_all_with_options(
                &QueueRetryOptionsBuilder::new()
                    .with_delay_seconds(60)
                    .build(),
            );
            return Ok(());
        }
    };
    if setting(&env, "DEAD_LETTER_QUEUE").as_deref() == Some(batch.queue().as_str()) {
        consume_dead_letters(&fleet, &batch).await;
        return Ok(());
    }
    // `entry.mjs` calls again with this variable set when a consume of this
    // batch panicked or threw: that message's job ends `failed`; the
    // batch's other messages (none with `max_batch_size = 1`) are retried.
    let crashed = setting(&env, "CONSUME_CRASHED_MESSAGE");
    // The delivery's token (`entry.mjs`, the same in its call after a
    // crash): a claim records it, and a crashed delivery ends only a job
    // it holds.
    let delivery = setting(&env, "CONSUME_DELIVERY");
    for app in fleet.all_mut() {
        app.delivery.clone_from(&delivery);
    }
    // The shards whose index this invocation has checked.
    let mut guarded: Vec<u16> = Vec::new();
    // Raw messages, one by one: a malformed body must not fail the batch.
    for raw in batch.raw_iter() {
        let msg: Result<JobMessage, _> = serde_wasm_bindgen::from_value(raw.body());
        let Ok(msg) = msg else {
            log_event(
                "consume_malformed_message",
                json!({ "bucket": "input_invalid", "message_id": raw.id() }),
            );
            raw.ack();
            continue;
        };
        let Some(n) = shard_of_message(&fleet, &raw, &msg) else {
            continue;
        };
        // The index check may call Vectorize's describe(): count it against
        // the budget of the shard's first message.
        let mut checked = false;
        if crashed.is_none() && !guarded.contains(&msg.shard) {
            guarded.push(msg.shard);
            if let Some(app) = fleet.all_mut().get_mut(n) {
                guard_index(app, "queue").await;
                checked = app.cfg.index_backend == IndexBackend::Vectorize;
            }
        }
        let Some(app) = fleet.all().get(n) else {
            continue;
        };
        let outcome = match &crashed {
            Some(crashed_id) => end_after_crash(app, crashed_id, &raw, &msg).await,
            None => {
                let consume = app.consume_after(&msg, u64::from(checked));
                panic::Tagged::new(raw.id(), consume).await
            }
        };
        apply(&raw, app.settle(&raw.id(), &msg, outcome).await);
    }
    Ok(())
}

/// The index of the shard a message names, or `None` after retrying it
/// later: a shard this deployment does not declare (`SHARDS` lowered, a
/// binding removed) keeps its messages until it is back.
fn shard_of_message(
    fleet: &Deployment,
    raw: &worker::RawMessage,
    msg: &JobMessage,
) -> Option<usize> {
    let n = usize::from(msg.shard);
    if n < fleet.all().len() {
        return Some(n);
    }
    log_event(
        "consume_shard_missing",
        json!({ "bucket": FailureBucket::ConfigInvalid.as_str(), "shard": msg.shard, "message_id": raw.id() }),
    );
    apply(raw, Settle::Retry { delay_seconds: 60 });
    None
}

/// The dead-letter queue's consumer: every letter archived in its shard's
/// ledger (or, if the consumer sent it, confirmed), then acknowledged.
async fn consume_dead_letters(fleet: &Deployment, batch: &MessageBatch<serde_json::Value>) {
    for raw in batch.raw_iter() {
        let msg: Option<JobMessage> = serde_wasm_bindgen::from_value(raw.body()).ok();
        let sent_ms = raw.timestamp().as_millis() as i64;
        // A letter that is not a pointer is archived on shard 0.
        let n = match &msg {
            Some(m) => match shard_of_message(fleet, &raw, m) {
                Some(n) => n,
                None => continue,
            },
            None => 0,
        };
        let Some(app) = fleet.all().get(n) else {
            continue;
        };
        apply(
            &raw,
            app.consume_dead_letter(&raw.id(), msg.as_ref(), sent_ms)
                .await,
        );
    }
}

/// A delivery of a batch whose consume crashed: the crashed message's job
/// ends `failed`, any other message is retried.
async fn end_after_crash(
    app: &App,
    crashed_id: &str,
    raw: &worker::RawMessage,
    msg: &JobMessage,
) -> ConsumeOutcome {
    if crashed_id == raw.id() {
        app.end_crashed(msg).await
    } else {
        ConsumeOutcome::Retry {
            delay_seconds: app.cfg.retry_base_delay_seconds,
        }
    }
}

#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    install();
    match deployment(&env) {
        // Every shard in turn, each within its share of the run's budget
        // (`SHARDS`, `Pipeline::repair`).
        Ok(mut fleet) => {
            for app in fleet.all_mut() {
                guard_index(app, "scheduled").await;
                app.repair().await;
            }
            // Then the tenants' moves between shards, in their own share.
            let moves = crate::pipeline::moves::advance_moves(&fleet).await;
            if moves.advanced > 0 {
                log_event("moves_advanced", json!(moves));
            }
        }
        Err(e) => log_event(
            "repair_config_invalid",
            json!({ "bucket": e.bucket.as_str(), "code": e.code }),
        ),
    }
}
