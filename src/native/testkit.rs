//! A test world: the real pipeline on real SQLite (same migrations) with
//! in-memory fakes of the index and queue, the local embedder, and a manual
//! clock. Shared by the scenario, SQL and API tests.
#![allow(dead_code)]

use futures::executor::block_on;
use ingest_pipeline::adapters::local_embedder::LocalEmbedder;
use ingest_pipeline::config::Config;
use ingest_pipeline::core::chunk::ContentType;
use ingest_pipeline::core::ids::DocId;
use ingest_pipeline::native::{
    CountingEmbedder, CountingIndex, ManualClock, MemIndex, MemQueue, SqliteDb,
};
use ingest_pipeline::pipeline::{
    ConsumeOutcome, DocumentInput, DocumentState, IntakeItem, IntakeOutcome, Pipeline,
};
use ingest_pipeline::ports::VectorIndex;
use ingest_pipeline::ports::{JobMessage, SqlValue};
use serde::Deserialize;
use std::collections::BTreeSet;

pub type P<'a> =
    Pipeline<&'a SqliteDb, &'a MemIndex, &'a LocalEmbedder, &'a MemQueue, &'a ManualClock>;

pub struct World {
    pub cfg: Config,
    pub db: SqliteDb,
    pub index: MemIndex,
    pub embedder: LocalEmbedder,
    pub queue: MemQueue,
    pub clock: ManualClock,
}

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

#[derive(Deserialize, Debug, PartialEq)]
pub struct IdRow {
    pub vector_id: String,
}

impl World {
    pub fn new() -> World {
        World::with(Config {
            chunk_size_max_tokens: 160,
            chunk_overlap_tokens: 16,
            embedding_dimensions: 64,
            ..Config::default()
        })
    }

    pub fn with(cfg: Config) -> World {
        cfg.validate().unwrap();
        World {
            db: SqliteDb::ledger(),
            index: MemIndex::new(cfg.embedding_dimensions),
            embedder: LocalEmbedder {
                dimensions: cfg.embedding_dimensions,
                batch_size_max: cfg.embed_batch_size,
            },
            queue: MemQueue::default(),
            clock: ManualClock::new(T0),
            cfg,
        }
    }

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

    pub fn put(&self, doc: &str, text: &str) -> IntakeOutcome {
        self.put_with(doc, text, serde_json::Map::new(), ContentType::Plain)
    }

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
        block_on(self.p().intake(&[item])).unwrap().remove(0)
    }

    pub fn delete(&self, doc: &str) -> IntakeOutcome {
        block_on(
            self.p()
                .intake(&[IntakeItem::Delete(DocId::parse(doc).unwrap())]),
        )
        .unwrap()
        .remove(0)
    }

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
        let mut outcomes = Vec::new();
        for _ in 0..1000 {
            let batch = self.queue.take_all();
            if batch.is_empty() {
                return outcomes;
            }
            for m in batch {
                let o = self.consume(&m);
                if let ConsumeOutcome::Retry { delay_seconds } = o {
                    self.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    self.queue.sent.borrow_mut().push_back(m);
                }
                outcomes.push(o);
            }
        }
        panic!("the queue did not drain");
    }

    pub fn cron(&self) -> ingest_pipeline::pipeline::RepairReport {
        block_on(self.p().repair())
    }

    pub fn state(&self, doc: &str) -> DocumentState {
        block_on(self.p().document(doc))
            .unwrap()
            .expect("document exists")
            .state
    }

    pub fn live_vector_ids(&self) -> Vec<String> {
        let rows: Vec<IdRow> = self.db.inspect(
            "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version ORDER BY c.vector_id",
            vec![],
        );
        rows.into_iter().map(|r| r.vector_id).collect()
    }

    pub fn count(&self, sql: &str) -> i64 {
        #[derive(Deserialize)]
        struct N {
            n: i64,
        }
        self.db.inspect::<N>(sql, Vec::<SqlValue>::new())[0].n
    }

    pub fn search(&self, q: &str, top_k: usize) -> Vec<ingest_pipeline::pipeline::SearchHit> {
        let req = ingest_pipeline::pipeline::SearchRequest {
            query: q.into(),
            top_k,
            doc_id: None,
            metadata: Default::default(),
        };
        block_on(self.p().search(&req)).unwrap()
    }
}

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

pub fn document(paragraphs: usize, changed: Option<(usize, &str)>) -> String {
    (0..paragraphs)
        .map(|i| match changed {
            Some((k, text)) if k == i => text.to_string(),
            _ => paragraph(i),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

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

/// The world's ports, wrapped to count what reaches the embedder and the index.
pub struct Counted<'a, V: VectorIndex = &'a MemIndex> {
    pub w: &'a World,
    pub embedder: CountingEmbedder<&'a LocalEmbedder>,
    pub index: CountingIndex<V>,
}

pub fn counted(w: &World) -> Counted<'_> {
    Counted {
        w,
        embedder: CountingEmbedder::new(&w.embedder),
        index: CountingIndex::new(&w.index),
    }
}

impl<'a, V: VectorIndex> Counted<'a, V> {
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
        let mut out = Vec::new();
        for _ in 0..100 {
            let batch = self.w.queue.take_all();
            if batch.is_empty() {
                return out;
            }
            for m in batch {
                let o = block_on(self.p().consume(&m));
                if let ConsumeOutcome::Retry { delay_seconds } = o {
                    self.w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    self.w.queue.sent.borrow_mut().push_back(m);
                }
                out.push(o);
            }
        }
        panic!("the queue did not drain");
    }
}

/// A database that lets another task run before each of its calls, so two
/// operator requests run interleaved, call by call.
pub struct Interleaved<'a>(pub &'a ingest_pipeline::native::SqliteDb);

/// As [`Interleaved`], but letting others run `1` time before a read and
/// `.1` times before a write: a task whose writes are slower than its reads
/// (D1's latencies differ), so interleavings vary.
pub struct Uneven<'a>(pub &'a ingest_pipeline::native::SqliteDb, pub usize);

impl ingest_pipeline::ports::Database for Uneven<'_> {
    async fn query<T: serde::de::DeserializeOwned>(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<Vec<T>, ingest_pipeline::ports::PortError> {
        yield_now().await;
        self.0.query(stmt).await
    }
    async fn execute(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<u64, ingest_pipeline::ports::PortError> {
        for _ in 0..self.1 {
            yield_now().await;
        }
        self.0.execute(stmt).await
    }
    async fn batch(
        &self,
        stmts: Vec<ingest_pipeline::ports::Stmt>,
    ) -> Result<Vec<u64>, ingest_pipeline::ports::PortError> {
        yield_now().await;
        self.0.batch(stmts).await
    }
}

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

impl ingest_pipeline::ports::Database for Interleaved<'_> {
    async fn query<T: serde::de::DeserializeOwned>(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<Vec<T>, ingest_pipeline::ports::PortError> {
        yield_now().await;
        self.0.query(stmt).await
    }
    async fn execute(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<u64, ingest_pipeline::ports::PortError> {
        yield_now().await;
        self.0.execute(stmt).await
    }
    async fn batch(
        &self,
        stmts: Vec<ingest_pipeline::ports::Stmt>,
    ) -> Result<Vec<u64>, ingest_pipeline::ports::PortError> {
        yield_now().await;
        self.0.batch(stmts).await
    }
}

/// A database that runs `hook` (raw SQL through `SqliteDb::inspect`) just
/// before the first batch that holds statement `before`: what another
/// writer does between a task's read and its write.
pub struct Hooked<'a> {
    pub db: &'a ingest_pipeline::native::SqliteDb,
    pub before: &'static str,
    pub hook: std::cell::RefCell<Option<Box<dyn FnOnce(&ingest_pipeline::native::SqliteDb) + 'a>>>,
}

impl ingest_pipeline::ports::Database for Hooked<'_> {
    async fn query<T: serde::de::DeserializeOwned>(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<Vec<T>, ingest_pipeline::ports::PortError> {
        self.db.query(stmt).await
    }
    async fn execute(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<u64, ingest_pipeline::ports::PortError> {
        self.db.execute(stmt).await
    }
    async fn batch(
        &self,
        stmts: Vec<ingest_pipeline::ports::Stmt>,
    ) -> Result<Vec<u64>, ingest_pipeline::ports::PortError> {
        if stmts.iter().any(|s| s.sql == self.before) {
            if let Some(hook) = self.hook.borrow_mut().take() {
                hook(self.db);
            }
        }
        self.db.batch(stmts).await
    }
}

/// A database on which every call carrying the statement `sql` fails
/// (transiently, before its effect).
pub struct FailOn<'a> {
    pub db: &'a ingest_pipeline::native::SqliteDb,
    pub sql: &'static str,
}

impl FailOn<'_> {
    fn check(
        &self,
        stmts: &[&ingest_pipeline::ports::Stmt],
    ) -> Result<(), ingest_pipeline::ports::PortError> {
        if stmts.iter().any(|s| s.sql == self.sql) {
            return Err(ingest_pipeline::ports::PortError::new(
                ingest_pipeline::core::failure::FailureBucket::DbBusy,
                "injected",
            ));
        }
        Ok(())
    }
}

impl ingest_pipeline::ports::Database for FailOn<'_> {
    async fn query<T: serde::de::DeserializeOwned>(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<Vec<T>, ingest_pipeline::ports::PortError> {
        self.check(&[&stmt])?;
        self.db.query(stmt).await
    }
    async fn execute(
        &self,
        stmt: ingest_pipeline::ports::Stmt,
    ) -> Result<u64, ingest_pipeline::ports::PortError> {
        self.check(&[&stmt])?;
        self.db.execute(stmt).await
    }
    async fn batch(
        &self,
        stmts: Vec<ingest_pipeline::ports::Stmt>,
    ) -> Result<Vec<u64>, ingest_pipeline::ports::PortError> {
        self.check(&stmts.iter().collect::<Vec<_>>())?;
        self.db.batch(stmts).await
    }
}
