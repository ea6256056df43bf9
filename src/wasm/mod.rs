//! Worker entry points and platform adapters (wasm32 only). Thin on
//! purpose: convert platform types, pick the configured backends, call the
//! pipeline, and translate its outcome back. No business logic here.

mod d1;

use crate::adapters::local_embedder::LocalEmbedder;
use crate::adapters::local_index::LocalIndex;
use crate::api::{self, ApiRequest, Secrets};
use crate::config::{Config, EmbedderBackend, IndexBackend};
use crate::core::failure::FailureBucket;
use crate::pipeline::{log_event, ConsumeOutcome, Pipeline};
use crate::ports::{Clock, Embedder, JobMessage, JobQueue, MetadataFilter, PortError, VectorIndex, VectorMatch, VectorRecord};
use d1::D1Db;
use serde_json::json;
use worker::{event, Context, Env, MessageBatch, MessageExt, QueueRetryOptionsBuilder, Request, Response, ScheduleContext, ScheduledEvent};

/// The index backends this build can use.
enum AnyIndex {
    Local(LocalIndex<D1Db>),
    /// Configured but not available in this deployment (a missing binding).
    Unavailable(&'static str),
}

impl VectorIndex for AnyIndex {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        match self {
            AnyIndex::Local(i) => i.upsert(vectors).await,
            AnyIndex::Unavailable(code) => Err(PortError::new(FailureBucket::ConfigInvalid, code)),
        }
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        match self {
            AnyIndex::Local(i) => i.delete_by_ids(ids).await,
            AnyIndex::Unavailable(code) => Err(PortError::new(FailureBucket::ConfigInvalid, code)),
        }
    }
    async fn query(&self, vector: &[f32], top_k: usize, filter: &MetadataFilter) -> Result<Vec<VectorMatch>, PortError> {
        match self {
            AnyIndex::Local(i) => i.query(vector, top_k, filter).await,
            AnyIndex::Unavailable(code) => Err(PortError::new(FailureBucket::ConfigInvalid, code)),
        }
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        match self {
            AnyIndex::Local(i) => i.get_by_ids(ids).await,
            AnyIndex::Unavailable(code) => Err(PortError::new(FailureBucket::ConfigInvalid, code)),
        }
    }
}

/// The embedder backends this build can use.
enum AnyEmbedder {
    Local(LocalEmbedder),
    Unavailable(&'static str),
}

impl Embedder for AnyEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        match self {
            AnyEmbedder::Local(e) => e.embed(texts).await,
            AnyEmbedder::Unavailable(code) => Err(PortError::new(FailureBucket::ConfigInvalid, code)),
        }
    }
}

/// The ingest queue's producer binding.
struct QueueProducer(Option<worker::Queue>);

impl JobQueue for QueueProducer {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        let Some(q) = &self.0 else {
            return Err(PortError::new(FailureBucket::ConfigInvalid, "queue_binding_missing"));
        };
        q.send_batch(messages.to_vec()).await.map_err(|_| PortError::new(FailureBucket::QueueUnavailable, "queue_send"))
    }
}

struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> i64 {
        worker::Date::now().as_millis() as i64
    }
}

type App = Pipeline<D1Db, AnyIndex, AnyEmbedder, QueueProducer, WallClock>;

/// A Worker variable or secret, as a string.
fn setting(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string()).or_else(|| env.secret(name).ok().map(|v| v.to_string()))
}

/// Builds the pipeline from the Worker's bindings and variables. Fails with
/// a bucket and a static code, never with raw text.
fn app(env: &Env) -> Result<App, PortError> {
    let cfg = Config::from_lookup(|name| setting(env, name)).map_err(|e| {
        log_event("config_invalid", json!({ "bucket": "config_invalid", "setting": match e {
            crate::config::ConfigError::Unparsable { name } | crate::config::ConfigError::OutOfRange { name, .. } => name,
        } }));
        PortError::new(FailureBucket::ConfigInvalid, "config_invalid")
    })?;
    let db = env.d1("DB").map_err(|_| PortError::new(FailureBucket::ConfigInvalid, "db_binding_missing"))?;
    let index = match cfg.index_backend {
        IndexBackend::LocalD1 => match env.d1("VECTORS_DB") {
            Ok(vdb) => AnyIndex::Local(LocalIndex {
                db: D1Db(vdb),
                dimensions: cfg.embedding_dimensions,
                upsert_batch_max: cfg.upsert_batch_size,
                delete_batch_max: cfg.delete_batch_size,
                get_batch_max: cfg.delete_batch_size,
                id_bytes_max: cfg.vector_id_bytes_max,
                top_k_max: cfg.index_query_top_k_max,
                json_param_bytes_max: cfg.d1_json_param_bytes_max,
            }),
            Err(_) => AnyIndex::Unavailable("vectors_db_binding_missing"),
        },
        IndexBackend::Vectorize => AnyIndex::Unavailable("vectorize_adapter_not_built"),
    };
    let embedder = match cfg.embedder_backend {
        EmbedderBackend::LocalHash => {
            AnyEmbedder::Local(LocalEmbedder { dimensions: cfg.embedding_dimensions, batch_size_max: cfg.embed_batch_size })
        }
        EmbedderBackend::WorkersAi => AnyEmbedder::Unavailable("workers_ai_adapter_not_built"),
    };
    let queue = QueueProducer(env.queue("INGEST_QUEUE").ok());
    Ok(Pipeline::new(cfg, D1Db(db), index, embedder, queue, WallClock))
}

fn json_response(status: u16, body: &serde_json::Value) -> worker::Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    console_error_panic_hook::set_once();
    let method = req.method().to_string();
    let path = req.url().map(|u| u.path().to_string()).unwrap_or_default();
    if path == "/healthz" && method == "GET" {
        return json_response(200, &json!({ "ok": true }));
    }
    let app = match app(&env) {
        Ok(a) => a,
        Err(e) => {
            return json_response(
                503,
                &json!({ "error": { "code": e.bucket.as_str(), "message": "the service is misconfigured" } }),
            )
        }
    };
    // Refuse an oversized body before reading it, when its length is declared.
    let declared = req.headers().get("Content-Length").ok().flatten().and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > app.cfg.request_bytes_max) {
        return json_response(
            413,
            &json!({ "error": { "code": "payload_too_large",
                "message": format!("the request body exceeds {} bytes", app.cfg.request_bytes_max) } }),
        );
    }
    let authorization = req.headers().get("Authorization").ok().flatten();
    let content_type = req.headers().get("Content-Type").ok().flatten();
    let body = if matches!(method.as_str(), "GET" | "HEAD" | "DELETE") { Vec::new() } else { req.bytes().await.unwrap_or_default() };
    let secrets = Secrets { ingest_token: setting(&env, "INGEST_TOKEN"), admin_token: setting(&env, "ADMIN_TOKEN") };
    let resp = api::handle(
        &app,
        &secrets,
        ApiRequest {
            method: &method,
            path: &path,
            authorization: authorization.as_deref(),
            content_type: content_type.as_deref(),
            body: &body,
        },
    )
    .await;
    json_response(resp.status, &resp.body)
}

#[event(queue)]
async fn queue(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> worker::Result<()> {
    console_error_panic_hook::set_once();
    let app = match app(&env) {
        Ok(a) => a,
        Err(e) => {
            // Nothing can run with a broken configuration: keep the messages.
            log_event("consume_config_invalid", json!({ "bucket": e.bucket.as_str(), "code": e.code }));
            batch.retry_all_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(60).build());
            return Ok(());
        }
    };
    // Raw messages, one by one: a malformed body must not fail the batch.
    for raw in batch.raw_iter() {
        let msg: Result<JobMessage, _> = serde_wasm_bindgen::from_value(raw.body());
        let Ok(msg) = msg else {
            log_event("consume_malformed_message", json!({ "bucket": "input_invalid", "message_id": raw.id() }));
            raw.ack();
            continue;
        };
        match app.consume(&msg).await {
            ConsumeOutcome::Ack { .. } => raw.ack(),
            ConsumeOutcome::Retry { delay_seconds } => {
                raw.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(delay_seconds).build())
            }
        }
    }
    Ok(())
}

#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    console_error_panic_hook::set_once();
    match app(&env) {
        Ok(app) => {
            app.repair().await;
        }
        Err(e) => log_event("repair_config_invalid", json!({ "bucket": e.bucket.as_str(), "code": e.code })),
    }
}
