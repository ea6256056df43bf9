//! The test kit: the one harness of the tests, the simulation and the
//! bench. [`World`] is the real pipeline on real SQLite (same migrations)
//! with in-memory fakes of the index and queue, the local embedder and a
//! manual clock, driven by hand (put, consume, deliver everything, cron);
//! [`Counted`] wraps its embedder and index to count what reaches them;
//! [`ModelEmbedder`] fakes Workers AI (vectors that depend on the model);
//! [`Interleaved`], [`Uneven`], [`Hooked`] and [`FailOn`] wrap its ledger
//! to interleave, intercept or fail calls; and a few text helpers
//! ([`paragraph`], [`document`], [`chunk_texts`], [`changed_chunks`]).
//! What a test checks of the ledger it reads through the oracle.
//!
//! `tests/it/common/mod.rs` re-exports all of it. The simulation shares the
//! time origin [`T0`], [`local_embedder`] and [`yield_now`]; its world is
//! its own (a broker instead of [`MemQueue`], every port wrapped by the
//! scheduler).
//!
//! May import the native fakes and the oracle, the pipeline, the ports, the
//! configuration and the core; not the simulation.

use super::oracle;
use super::{CountingEmbedder, CountingIndex, ManualClock, MemIndex, MemQueue, SqliteDb};
use crate::adapters::local_embedder::LocalEmbedder;
use crate::config::Config;
use crate::core::chunk::ContentType;
use crate::core::failure::FailureBucket;
use crate::core::ids::{DocId, DocKey, TenantId};
use crate::core::index_config::EmbedModel;
use crate::pipeline::{
    ConsumeOutcome, DocumentInput, DocumentState, IntakeItem, IntakeOutcome, Pipeline,
    RepairReport, SearchHit, SearchRequest,
};
use crate::ports::{Database, Embedder, JobMessage, PortError, Rows, Stmt, VectorIndex};
use futures::executor::block_on;
use serde::de::DeserializeOwned;
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The real pipeline's ports, in memory, for a test to drive by hand.
pub struct World {
    pub cfg: Config,
    pub db: SqliteDb,
    pub index: MemIndex,
    pub embedder: LocalEmbedder,
    pub queue: MemQueue,
    pub clock: ManualClock,
}

/// The manual clock's start (ms since the epoch), in every harness.
pub const T0: i64 = 1_700_000_000_000;

/// Columns that record when and how often, not what: left out of dumps
/// compared for equality.
pub const VOLATILE: &[&str] = &[
    "created_at",
    "updated_at",
    "attempts",
    "lease_until",
    "next_attempt_at",
    "not_before",
];

/// The local embedder `cfg` configures (its batch size; each call names
/// the dimensions).
pub fn local_embedder(cfg: &Config) -> LocalEmbedder {
    LocalEmbedder {
        batch_size_max: cfg.embed_batch_size,
    }
}

/// The bearer tokens the native API tests configure ([`World::request`]).
pub const TEST_INGEST_TOKEN: &str = "t-ingest";
pub const TEST_ADMIN_TOKEN: &str = "t-admin";

thread_local! {
    /// Each request's entropy differs, as the Worker's would.
    static DRAWS: std::cell::Cell<u8> = const { std::cell::Cell::new(1) };
}

/// The pipeline over a [`World`]'s ports.
pub type P<'a> =
    Pipeline<&'a SqliteDb, &'a MemIndex, &'a LocalEmbedder, &'a MemQueue, &'a ManualClock>;

impl Default for World {
    fn default() -> World {
        World::new()
    }
}

impl World {
    /// A world with small chunks (160 tokens, 16 of overlap) and 64
    /// dimensions; the other settings are the defaults.
    pub fn new() -> World {
        World::with(Config {
            chunk_size_max_tokens: 160,
            chunk_overlap_tokens: 16,
            embedding_dimensions: 64,
            ..Config::default()
        })
    }

    /// A world under `cfg`, which must be valid.
    pub fn with(cfg: Config) -> World {
        cfg.validate().unwrap();
        World {
            db: SqliteDb::ledger(),
            index: MemIndex::new(cfg.embedding_dimensions),
            embedder: local_embedder(&cfg),
            queue: MemQueue::default(),
            clock: ManualClock::new(T0),
            cfg,
        }
    }

    /// One HTTP request through the API ([`crate::api::handle`]), with
    /// [`TEST_INGEST_TOKEN`] and [`TEST_ADMIN_TOKEN`] configured and fresh
    /// entropy per request.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> crate::api::ApiResponse {
        let n = DRAWS.with(|d| {
            let n = d.get();
            d.set(n.wrapping_add(1));
            n
        });
        let secrets = crate::api::Secrets {
            ingest_token: Some(TEST_INGEST_TOKEN.into()),
            admin_token: Some(TEST_ADMIN_TOKEN.into()),
        };
        let req = crate::api::ApiRequest {
            method,
            path,
            authorization,
            content_type,
            body,
            entropy: [n; 32],
        };
        block_on(crate::api::handle(&self.p(), &secrets, req))
    }

    /// A JSON request (`body` or none) with bearer token `auth`.
    pub fn request_json(
        &self,
        method: &str,
        path: &str,
        auth: &str,
        body: Option<&serde_json::Value>,
    ) -> crate::api::ApiResponse {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        self.request(
            method,
            path,
            Some(auth),
            Some("application/json"),
            bytes.as_bytes(),
        )
    }

    /// The pipeline over the world's ports, under its configuration.
    pub fn p(&self) -> P<'_> {
        Pipeline::new(
            self.cfg.clone(),
            &self.db,
            &self.index,
            &self.embedder,
            &self.queue,
            &self.clock,
        )
    }

    /// The pipeline over the world's ports but `embedder` (a fake such as
    /// [`ModelEmbedder`]), under its configuration.
    pub fn p_with<E: Embedder>(
        &self,
        embedder: E,
    ) -> Pipeline<&SqliteDb, &MemIndex, E, &MemQueue, &ManualClock> {
        Pipeline::new(
            self.cfg.clone(),
            &self.db,
            &self.index,
            embedder,
            &self.queue,
            &self.clock,
        )
    }

    /// The pipeline over `db` (one of the ledger's wrappers: [`Interleaved`],
    /// [`Uneven`], [`Hooked`], [`FailOn`]) and the world's other ports, under
    /// its configuration.
    pub fn p_over<D: Database>(
        &self,
        db: D,
    ) -> Pipeline<D, &MemIndex, &LocalEmbedder, &MemQueue, &ManualClock> {
        Pipeline::new(
            self.cfg.clone(),
            db,
            &self.index,
            &self.embedder,
            &self.queue,
            &self.clock,
        )
    }

    /// Runs cron `runs` times, a minute apart (the clock moves a minute
    /// before each run); returns the last report.
    pub fn cron_runs(&self, runs: usize) -> Option<RepairReport> {
        let mut last = None;
        for _ in 0..runs {
            self.clock.advance_ms(60_000);
            last = Some(self.cron());
        }
        last
    }

    /// Puts plain `text` as document `doc`, without metadata.
    pub fn put(&self, doc: &str, text: &str) -> IntakeOutcome {
        self.put_with(doc, text, serde_json::Map::new(), ContentType::Plain)
    }

    /// Puts `text` as document `doc`, with `metadata` and content type `ct`.
    pub fn put_with(
        &self,
        doc: &str,
        text: &str,
        metadata: serde_json::Map<String, serde_json::Value>,
        ct: ContentType,
    ) -> IntakeOutcome {
        let item = IntakeItem::Put(DocumentInput {
            doc_id: DocId::parse(doc).unwrap(),
            text: text.into(),
            metadata,
            content_type: ct,
        });
        block_on(self.p().intake(&TenantId::default_tenant(), &[item]))
            .unwrap()
            .remove(0)
    }

    /// Deletes document `doc`.
    pub fn delete(&self, doc: &str) -> IntakeOutcome {
        block_on(self.p().intake(
            &TenantId::default_tenant(),
            &[IntakeItem::Delete(DocId::parse(doc).unwrap())],
        ))
        .unwrap()
        .remove(0)
    }

    /// Delivers `m` once.
    pub fn consume(&self, m: &JobMessage) -> ConsumeOutcome {
        block_on(self.p().consume(m))
    }

    /// Consumes `m`, which must be retried, and waits out its delay (as the
    /// queue would before the redelivery).
    pub fn consume_retried(&self, m: &JobMessage) {
        match self.consume(m) {
            ConsumeOutcome::Retry { delay_seconds } => {
                self.clock.advance_ms(i64::from(delay_seconds) * 1000)
            }
            other => panic!("expected a retry, got {other:?}"),
        }
    }

    /// Delivers every queued message (and what they cause) until the queue
    /// is empty; a retried message is delivered again after its delay.
    /// Returns the outcomes in order.
    pub fn deliver_all(&self) -> Vec<ConsumeOutcome> {
        drain(self, 1000, |m| self.consume(m))
    }

    /// [`Self::deliver_all`] through the pipeline over `embedder`
    /// ([`Self::p_with`]).
    pub fn deliver_all_with<E: Embedder>(&self, embedder: &E) -> Vec<ConsumeOutcome> {
        drain(self, 1000, |m| block_on(self.p_with(embedder).consume(m)))
    }

    /// One cron run.
    pub fn cron(&self) -> RepairReport {
        block_on(self.p().repair())
    }

    /// Document `doc`'s state, as the API reports it.
    pub fn state(&self, doc: &str) -> DocumentState {
        let key = DocKey::new(&TenantId::default_tenant(), &DocId::parse(doc).unwrap());
        block_on(self.p().document(&key))
            .unwrap()
            .expect("document exists")
            .state
    }

    /// [`oracle::live_vector_ids`]: live chunks' vectors in every
    /// generation, in order.
    pub fn live_vector_ids(&self) -> Vec<String> {
        oracle::live_vector_ids(&self.db)
    }

    /// [`oracle::count`]: `sql`'s one row's integer `n`.
    pub fn count(&self, sql: &str) -> i64 {
        oracle::count(&self.db, sql)
    }

    /// Searches for `q` (hybrid), over every document.
    pub fn search(&self, q: &str, top_k: usize) -> Vec<SearchHit> {
        self.search_by(&SearchRequest::new(q, top_k))
    }

    /// Runs `req` as the default tenant.
    pub fn search_by(&self, req: &SearchRequest) -> Vec<SearchHit> {
        block_on(self.p().search(&TenantId::default_tenant(), req)).unwrap()
    }
}

/// Delivers every message of `w`'s queue (and what they cause) through
/// `consume`, batch after batch, until it is empty; a retried message is
/// delivered again after its delay (the clock moves by it). Returns the
/// outcomes in order; panics after `batches_max` batches.
fn drain(
    w: &World,
    batches_max: usize,
    consume: impl Fn(&JobMessage) -> ConsumeOutcome,
) -> Vec<ConsumeOutcome> {
    let mut outcomes = Vec::new();
    for _ in 0..batches_max {
        let batch = w.queue.take_all();
        if batch.is_empty() {
            return outcomes;
        }
        for m in batch {
            let o = consume(&m);
            if let ConsumeOutcome::Retry { delay_seconds } = o {
                w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                w.queue.sent.borrow_mut().push_back(m);
            }
            outcomes.push(o);
        }
    }
    panic!("the queue did not drain");
}

/// The version and job id of an outcome that must be `Queued`.
pub fn queued(o: &IntakeOutcome) -> (u32, String) {
    match o {
        IntakeOutcome::Queued {
            version, job_id, ..
        } => (*version, job_id.clone()),
        other => panic!("expected queued, got {other:?}"),
    }
}

const TOPICS: [&str; 8] = [
    "queues", "vectors", "ledgers", "leases", "intents", "batches", "tokens", "chunks",
];

/// Paragraph `i`: about 150 characters, unique, so that with the test
/// world's 200-character chunks each chunk is one paragraph (plus the
/// overlap taken from the end of the previous one).
pub fn paragraph(i: usize) -> String {
    let t = TOPICS[i % TOPICS.len()];
    let u = TOPICS[(i * 5 + 3) % TOPICS.len()];
    format!("Paragraph {i:03} explains how {t} and {u} interact in section {i}; the reader learns rule {i} of the pipeline by heart today.")
}

/// A document of `paragraphs` [`paragraph`]s separated by blank lines,
/// paragraph `k` replaced by `text` if `changed` is `Some((k, text))`.
pub fn document(paragraphs: usize, changed: Option<(usize, &str)>) -> String {
    (0..paragraphs)
        .map(|i| match changed {
            Some((k, text)) if k == i => text.to_string(),
            _ => paragraph(i),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The texts of the chunks `w`'s chunker cuts `text` into.
pub fn chunk_texts(text: &str, w: &World) -> Vec<String> {
    w.cfg
        .chunker()
        .chunk(text, ContentType::Plain)
        .into_iter()
        .map(|c| c.text.to_string())
        .collect()
}

/// Chunks of `new` whose text is not a chunk of `old`: what must be embedded.
pub fn changed_chunks(old: &str, new: &str, w: &World) -> usize {
    let old: BTreeSet<String> = chunk_texts(old, w).into_iter().collect();
    chunk_texts(new, w)
        .iter()
        .filter(|t| !old.contains(*t))
        .count()
}

/// A fake of Workers AI for native tests: it runs any model but the local
/// embedder, and its vectors depend on the model: the local embedder's
/// vector of the text with each coordinate's sign flipped by a stream
/// seeded with the model's name ([`ModelEmbedder::vector`]), so that a query
/// embedded by another model than its document's does not find it (their
/// cosine is near 0), while one embedded by the same model scores as the
/// local embedder would. It records the model of every call.
pub struct ModelEmbedder {
    /// Texts per call (Workers AI: 100).
    pub batch_size_max: usize,
    /// The model of each call, in order.
    pub calls: RefCell<Vec<String>>,
}

impl ModelEmbedder {
    /// The fake with `cfg`'s batch size.
    pub fn new(cfg: &Config) -> ModelEmbedder {
        ModelEmbedder {
            batch_size_max: cfg.embed_batch_size,
            calls: RefCell::new(Vec::new()),
        }
    }

    /// The vector `model` gives `text`.
    pub fn vector(model: &EmbedModel, text: &str) -> Vec<f32> {
        // FNV-1a of the name seeds a SplitMix64 stream: one sign per coordinate.
        let mut state = model.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        crate::core::local_embed::embed(text, model.dimensions)
            .into_iter()
            .map(|x| {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                if (z ^ (z >> 31)) & 1 == 1 {
                    -x
                } else {
                    x
                }
            })
            .collect()
    }

    /// The model of the last call.
    pub fn last_model(&self) -> Option<String> {
        self.calls.borrow().last().cloned()
    }
}

impl Embedder for ModelEmbedder {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        if model.name == crate::core::local_embed::EMBEDDER_ID {
            return Err(PortError::new(
                FailureBucket::ConfigInvalid,
                "embed_model_unsupported",
            ));
        }
        if texts.len() > self.batch_size_max {
            return Err(PortError::new(
                FailureBucket::EmbedRejected,
                "embed_batch_too_large",
            ));
        }
        self.calls.borrow_mut().push(model.name.clone());
        Ok(texts.iter().map(|t| Self::vector(model, t)).collect())
    }
}

/// The world's ports, wrapped to count what reaches the embedder and the index.
pub struct Counted<'a, V: VectorIndex = &'a MemIndex> {
    pub w: &'a World,
    pub embedder: CountingEmbedder<&'a LocalEmbedder>,
    pub index: CountingIndex<V>,
}

/// `w`'s ports, counted from zero.
pub fn counted(w: &World) -> Counted<'_> {
    Counted {
        w,
        embedder: CountingEmbedder::new(&w.embedder),
        index: CountingIndex::new(&w.index),
    }
}

impl<'a, V: VectorIndex> Counted<'a, V> {
    /// The pipeline over the world's ledger, queue and clock and the
    /// counted embedder and index.
    pub fn p(
        &self,
    ) -> Pipeline<
        &SqliteDb,
        &CountingIndex<V>,
        &CountingEmbedder<&'a LocalEmbedder>,
        &MemQueue,
        &ManualClock,
    > {
        Pipeline::new(
            self.w.cfg.clone(),
            &self.w.db,
            &self.index,
            &self.embedder,
            &self.w.queue,
            &self.w.clock,
        )
    }

    /// Delivers every queued message through the counted ports.
    pub fn deliver_all(&self) -> Vec<ConsumeOutcome> {
        drain(self.w, 100, |m| block_on(self.p().consume(m)))
    }
}

/// A database that lets another task run before each of its calls, so two
/// operator requests run interleaved, call by call.
pub struct Interleaved<'a>(pub &'a SqliteDb);

/// As [`Interleaved`], but letting others run `1` time before a read and
/// `.1` times before a write: a task whose writes are slower than its reads
/// (D1's latencies differ), so interleavings vary.
pub struct Uneven<'a>(pub &'a SqliteDb, pub usize);

impl Database for Uneven<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        yield_now().await;
        self.0.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        for _ in 0..self.1 {
            yield_now().await;
        }
        self.0.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        yield_now().await;
        self.0.batch_billed(stmts).await
    }
}

/// Lets another task run: pending once (waking itself at once), then ready.
pub async fn yield_now() {
    let mut yielded = false;
    futures::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

impl Database for Interleaved<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        yield_now().await;
        self.0.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        yield_now().await;
        self.0.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        yield_now().await;
        self.0.batch_billed(stmts).await
    }
}

/// What [`Hooked`] runs: another writer's SQL on the ledger.
pub type Hook<'a> = Box<dyn FnOnce(&SqliteDb) + 'a>;

/// A database that runs `hook` (raw SQL through `SqliteDb::inspect`) just
/// before the first batch that holds statement `before`: what another
/// writer does between a task's read and its write.
pub struct Hooked<'a> {
    pub db: &'a SqliteDb,
    pub before: &'static str,
    pub hook: RefCell<Option<Hook<'a>>>,
}

/// As [`Hooked`], but `hook` runs just after the first batch that holds
/// statement `after` (whatever its result): what another writer does
/// between a task's write and its next call.
pub struct HookedAfter<'a> {
    pub db: &'a SqliteDb,
    pub after: &'static str,
    pub hook: RefCell<Option<Hook<'a>>>,
}

impl Database for HookedAfter<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        self.db.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        self.db.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        let hooked = stmts.iter().any(|s| s.sql == self.after);
        let out = self.db.batch_billed(stmts).await;
        if hooked {
            if let Some(hook) = self.hook.borrow_mut().take() {
                hook(self.db);
            }
        }
        out
    }
}

impl Database for Hooked<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        self.db.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        self.db.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        if stmts.iter().any(|s| s.sql == self.before) {
            if let Some(hook) = self.hook.borrow_mut().take() {
                hook(self.db);
            }
        }
        self.db.batch_billed(stmts).await
    }
}

/// A database on which every call carrying the statement `sql` fails
/// (transiently, before its effect).
pub struct FailOn<'a> {
    pub db: &'a SqliteDb,
    pub sql: &'static str,
}

impl FailOn<'_> {
    fn check(&self, stmts: &[&Stmt]) -> Result<(), PortError> {
        if stmts.iter().any(|s| s.sql == self.sql) {
            return Err(PortError::new(FailureBucket::DbBusy, "injected"));
        }
        Ok(())
    }
}

impl Database for FailOn<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        self.check(&[&stmt])?;
        self.db.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        self.check(&[&stmt])?;
        self.db.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        self.check(&stmts.iter().collect::<Vec<_>>())?;
        self.db.batch_billed(stmts).await
    }
}

/// Generation 1 records `index_config` from the start (as its first
/// staging would adopt it), so that a backfill may begin before anything
/// was staged.
pub fn adopt_generation_one(db: &SqliteDb, index_config: String, at: i64) {
    block_on(db.execute(Stmt::new(
        crate::store::sql::GENERATION_ADOPT,
        vec![index_config.into(), at.into()],
    )))
    .expect("generation 1 adopts the configuration");
}

/// A retired generation row with no chunk rows: what a cancelled build of
/// generation `generation` leaves behind.
pub fn record_retired_generation(db: &SqliteDb, generation: u32, index_config: String) {
    block_on(db.execute(Stmt::new(
        "INSERT INTO generations (generation, index_config, state, created_at, updated_at) VALUES (?1, ?2, 'retired', 0, 0)",
        vec![generation.into(), index_config.into()],
    )))
    .expect("the generation row");
}

/// The default tenant's key of document `doc` (what `INGEST_TOKEN` writes).
pub fn default_key(doc: &str) -> DocKey {
    DocKey::new(&TenantId::default_tenant(), &DocId::parse(doc).unwrap())
}
