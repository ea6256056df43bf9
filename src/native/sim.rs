//! The deterministic simulation of the protocol.
//!
//! It runs the real pipeline (intake, consume, repair, search) on real
//! SQLite and in-memory fakes, under a seeded scheduler that interleaves
//! tasks at port-call granularity and injects faults at port calls:
//!
//! - `FailBefore`: the call fails and has no effect;
//! - `FailAfter`: the effect applies, the caller sees a failure;
//! - `CrashAfter`: the effect applies and the task never resumes (the
//!   invocation died); its message is redelivered.
//!
//! The queue broker redelivers, duplicates and reorders messages; the cron
//! handler runs at arbitrary points; the clock is injected and a task that
//! outlives the platform's wall-clock limit is killed. After every step the
//! invariants I1–I4 are checked; after quiescence I5–I7 (see
//! `docs/ARCHITECTURE.md`).

use super::{ManualClock, MemIndex, SqliteDb};
use crate::adapters::local_embedder::LocalEmbedder;
use crate::config::Config;
use crate::core::chunk::ContentType;
use crate::core::failure::FailureBucket;
use crate::core::ids::DocId;
use crate::pipeline::bugs::Bugs;
use crate::pipeline::{DocumentInput, IntakeItem, Pipeline, SearchRequest, Settle};
use crate::ports::{
    Database, Embedder, JobMessage, JobQueue, MetadataFilter, PortError, Stmt, VectorIndex,
    VectorMatch, VectorRecord,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

// ------------------------------------------------------------------ randomness

/// SplitMix64: small, seedable, good enough to drive a schedule.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

// ------------------------------------------------------------------ faults

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    FailBefore,
    FailAfter,
    CrashAfter,
}

impl FaultKind {
    pub const ALL: [FaultKind; 3] = [
        FaultKind::FailBefore,
        FaultKind::FailAfter,
        FaultKind::CrashAfter,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::FailBefore => "fail_before",
            FaultKind::FailAfter => "fail_after",
            FaultKind::CrashAfter => "crash_after",
        }
    }
    pub fn parse(s: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// The kinds of port call, for coverage figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    DbQuery,
    DbExecute,
    DbBatch,
    IndexUpsert,
    IndexDelete,
    IndexQuery,
    IndexGet,
    Embed,
    QueueSend,
    Ack,
}

#[derive(Clone, Debug)]
pub enum FaultPlan {
    None,
    /// Fault exactly the `at`-th port call (0-based, in call order).
    At {
        at: u64,
        kind: FaultKind,
    },
    /// Fault each call with this probability, in per mille.
    Random {
        per_mille: u64,
    },
}

/// Shared state of one simulated run: the schedule, the faults, the trace.
pub struct Sched {
    pub rng: RefCell<Rng>,
    pub plan: RefCell<FaultPlan>,
    pub calls: Cell<u64>,
    pub current_task: Cell<usize>,
    pub killed: RefCell<BTreeSet<usize>>,
    /// (call kind, fault kind) pairs injected, for the coverage summary.
    pub injected: RefCell<BTreeSet<(CallKind, FaultKind)>>,
    pub faults_injected: Cell<u64>,
    pub kinds_seen: RefCell<BTreeSet<CallKind>>,
    pub trace: RefCell<Vec<String>>,
    /// Client tasks: an HTTP request that dies after its effect is, for the
    /// client, a failed request it retries, so their crashes are failures.
    pub clients: RefCell<BTreeSet<usize>>,
    /// Records every call in the trace, not only faults (for replays).
    pub verbose: Cell<bool>,
}

impl Sched {
    pub fn new(seed: u64, plan: FaultPlan) -> Sched {
        Sched {
            rng: RefCell::new(Rng::new(seed)),
            plan: RefCell::new(plan),
            calls: Cell::new(0),
            current_task: Cell::new(0),
            killed: RefCell::new(BTreeSet::new()),
            injected: RefCell::new(BTreeSet::new()),
            faults_injected: Cell::new(0),
            kinds_seen: RefCell::new(BTreeSet::new()),
            trace: RefCell::new(Vec::new()),
            clients: RefCell::new(BTreeSet::new()),
            verbose: Cell::new(false),
        }
    }

    fn decide(&self, kind: CallKind) -> Option<FaultKind> {
        let n = self.calls.get();
        self.calls.set(n + 1);
        self.kinds_seen.borrow_mut().insert(kind);
        let fault = match &*self.plan.borrow() {
            FaultPlan::None => None,
            FaultPlan::At { at, kind } => (*at == n).then_some(*kind),
            FaultPlan::Random { per_mille } => {
                let mut rng = self.rng.borrow_mut();
                if rng.chance(*per_mille) {
                    Some(FaultKind::ALL[rng.below(3) as usize])
                } else {
                    None
                }
            }
        };
        if self.verbose.get() {
            self.trace.borrow_mut().push(format!(
                "call {n} {kind:?} task {}",
                self.current_task.get()
            ));
        }
        if let Some(f) = fault {
            self.injected.borrow_mut().insert((kind, f));
            self.faults_injected.set(self.faults_injected.get() + 1);
            self.trace.borrow_mut().push(format!(
                "call {n} {kind:?} task {} -> {}",
                self.current_task.get(),
                f.name()
            ));
        }
        fault
    }

    /// Wraps one port call: a yield point (so another task may run), then
    /// the fault decision around the effect.
    async fn call<T>(
        &self,
        kind: CallKind,
        effect: impl Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        YieldOnce(false).await;
        let fault = self.decide(kind);
        let injected = PortError::new(transient_bucket(kind), "injected");
        if fault == Some(FaultKind::FailBefore) {
            return Err(injected);
        }
        let result = effect.await;
        let is_client = self.clients.borrow().contains(&self.current_task.get());
        match fault {
            Some(FaultKind::FailAfter) => Err(injected),
            Some(FaultKind::CrashAfter) if is_client => Err(injected),
            Some(FaultKind::CrashAfter) => {
                self.killed.borrow_mut().insert(self.current_task.get());
                std::future::pending().await
            }
            _ => result,
        }
    }

    /// A fault decision for an acknowledgement (no effect of its own to wrap).
    fn ack_fault(&self) -> Option<FaultKind> {
        self.decide(CallKind::Ack)
    }
}

fn transient_bucket(kind: CallKind) -> FailureBucket {
    match kind {
        CallKind::DbQuery | CallKind::DbExecute | CallKind::DbBatch => FailureBucket::DbBusy,
        CallKind::IndexUpsert
        | CallKind::IndexDelete
        | CallKind::IndexQuery
        | CallKind::IndexGet => FailureBucket::IndexUnavailable,
        CallKind::Embed => FailureBucket::EmbedUnavailable,
        CallKind::QueueSend | CallKind::Ack => FailureBucket::QueueUnavailable,
    }
}

struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

// ------------------------------------------------------------------ port wrappers

pub struct SimDb<'a>(pub &'a SqliteDb, pub &'a Sched);
pub struct SimIndex<'a>(pub &'a MemIndex, pub &'a Sched);
pub struct SimEmbedder<'a>(pub &'a LocalEmbedder, pub &'a Sched);
pub struct SimQueue<'a>(pub &'a Broker, pub &'a ManualClock, pub &'a Sched);

impl SimDb<'_> {
    fn note(&self, stmts: &[&Stmt]) {
        if self.1.verbose.get() {
            for s in stmts {
                let head: String = s
                    .sql
                    .split_whitespace()
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(" ");
                self.1.trace.borrow_mut().push(format!(
                    "   sql {head} {:?}",
                    s.params.iter().take(3).collect::<Vec<_>>()
                ));
            }
        }
    }
}

impl Database for SimDb<'_> {
    async fn query<T: DeserializeOwned>(&self, stmt: Stmt) -> Result<Vec<T>, PortError> {
        self.note(&[&stmt]);
        self.1.call(CallKind::DbQuery, self.0.query(stmt)).await
    }
    async fn execute(&self, stmt: Stmt) -> Result<u64, PortError> {
        self.note(&[&stmt]);
        self.1.call(CallKind::DbExecute, self.0.execute(stmt)).await
    }
    async fn batch(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>, PortError> {
        self.note(&stmts.iter().collect::<Vec<_>>());
        self.1.call(CallKind::DbBatch, self.0.batch(stmts)).await
    }
}

impl VectorIndex for SimIndex<'_> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        if self.1.verbose.get() {
            self.1.trace.borrow_mut().push(format!(
                "   upsert {:?}",
                vectors.iter().map(|v| v.id.as_str()).collect::<Vec<_>>()
            ));
        }
        self.1
            .call(CallKind::IndexUpsert, self.0.upsert(vectors))
            .await
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if self.1.verbose.get() {
            self.1.trace.borrow_mut().push(format!("   delete {ids:?}"));
        }
        self.1
            .call(CallKind::IndexDelete, self.0.delete_by_ids(ids))
            .await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        self.1
            .call(CallKind::IndexQuery, self.0.query(vector, top_k, filter))
            .await
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        self.1
            .call(CallKind::IndexGet, self.0.get_by_ids(ids))
            .await
    }
    fn refusal(&self) -> Option<PortError> {
        self.0.refusal()
    }
}

impl Embedder for SimEmbedder<'_> {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.1.call(CallKind::Embed, self.0.embed(texts)).await
    }
    fn refusal(&self) -> Option<PortError> {
        self.0.refusal()
    }
}

impl JobQueue for SimQueue<'_> {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        let now = self.1 .0.get();
        self.2
            .call(CallKind::QueueSend, async {
                for m in messages {
                    self.0.push(m.clone(), now);
                }
                Ok(())
            })
            .await
    }
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        self.2
            .call(CallKind::QueueSend, async {
                self.0.dead.borrow_mut().push(message.clone());
                Ok(())
            })
            .await
    }
}

/// The queue: messages become available at a time; delivery order is the
/// scheduler's choice (so messages are reordered), and a delivered message
/// may stay behind as a duplicate.
#[derive(Default)]
pub struct Broker {
    pub pending: RefCell<Vec<(i64, JobMessage)>>,
    /// The dead-letter queue: what was sent to it (or forwarded to it).
    pub dead: RefCell<Vec<JobMessage>>,
}

impl Broker {
    pub fn push(&self, m: JobMessage, available_at: i64) {
        self.pending.borrow_mut().push((available_at, m));
    }
    fn available(&self, now: i64) -> Vec<usize> {
        self.pending
            .borrow()
            .iter()
            .enumerate()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(i, _)| i)
            .collect()
    }
    fn earliest(&self) -> Option<i64> {
        self.pending.borrow().iter().map(|(t, _)| *t).min()
    }
    fn is_empty(&self) -> bool {
        self.pending.borrow().is_empty()
    }
}

// ------------------------------------------------------------------ the world

/// One operation of a client on one document.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Put(String),
    Delete,
    /// Wait until every message so far was delivered (the client waits for
    /// indexing before its next write).
    Settle,
}

/// What the clients do: per document, operations applied in order (a
/// client sends the next one after the previous answered).
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    pub docs: Vec<(String, Vec<Op>)>,
    /// An operator changes the chunk size and starts a backfill to a new
    /// generation, concurrently with the clients (the reference run starts
    /// it after them); cron advances it to the switch.
    pub reindex: bool,
}

/// The configuration the reindexing operator deploys: a smaller chunk size,
/// so the new generation's chunks differ.
pub fn reindex_config(cfg: &Config) -> Config {
    Config { chunk_size_max_tokens: cfg.chunk_size_max_tokens * 2 / 3, chunk_overlap_tokens: cfg.chunk_overlap_tokens / 2, ..cfg.clone() }
}

/// What a run checks and found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

pub struct World {
    pub cfg: Config,
    pub db: SqliteDb,
    pub index: MemIndex,
    pub embedder: LocalEmbedder,
    pub broker: Broker,
    pub clock: ManualClock,
    pub bugs: Bugs,
}

/// The platform's wall-clock limit for a queue or cron invocation.
const INVOCATION_WALL_MS: i64 = 15 * 60 * 1000;
/// Redelivery delay of a message whose invocation died.
const CRASH_REDELIVERY_MS: i64 = 30_000;
pub const T0: i64 = 1_700_000_000_000;

pub fn sim_config() -> Config {
    Config {
        chunk_size_max_tokens: 40,
        chunk_overlap_tokens: 8,
        embedding_dimensions: 16,
        embed_batch_size: 3,
        upsert_batch_size: 4,
        delete_batch_size: 3,
        // Transient faults only, and enough attempts that none runs out:
        // the fault-free run and the faulty run must end in the same state.
        job_attempts_max: 90,
        job_retry_window_seconds: 7 * 86_400,
        retry_base_delay_seconds: 1,
        retry_max_delay_seconds: 60,
        claim_busy_retry_seconds: 30,
        cron_cleanup_intents_max: 12,
        cron_abandoned_chunks_max: 12,
        ..Config::default()
    }
}

/// The simulation's configurations: the default consumer budget (a sim
/// version fits one invocation) and the smallest one (most versions span
/// several invocations: checkpoints and continuation messages).
pub fn sim_configs() -> [Config; 2] {
    let tight = Config {
        consume_subrequests_max: crate::pipeline::CONSUME_SUBREQUESTS_MIN,
        ..sim_config()
    };
    [sim_config(), tight]
}

/// The configuration a random seed runs under: both, alternately.
pub fn sim_config_for_seed(seed: u64) -> Config {
    let [roomy, tight] = sim_configs();
    if seed % 2 == 0 {
        roomy
    } else {
        tight
    }
}

type Direct<'a> =
    Pipeline<&'a SqliteDb, &'a MemIndex, &'a LocalEmbedder, &'a NoQueue, &'a ManualClock>;
type Simulated<'a> =
    Pipeline<SimDb<'a>, SimIndex<'a>, SimEmbedder<'a>, SimQueue<'a>, &'a ManualClock>;

/// A queue for fault-free reads (search, views) that never sends.
pub struct NoQueue;
impl JobQueue for NoQueue {
    async fn send_batch(&self, _: &[JobMessage]) -> Result<(), PortError> {
        Ok(())
    }
    async fn send_dead_letter(&self, _: &JobMessage) -> Result<(), PortError> {
        Ok(())
    }
}

#[derive(Deserialize)]
struct LiveRow {
    doc_id: String,
    live_version: Option<u32>,
}

#[derive(Deserialize)]
struct IdRow {
    vector_id: String,
}

impl World {
    pub fn new(cfg: Config, bugs: Bugs) -> World {
        // Generation 1 records the configuration from the start, so that a
        // backfill may begin before anything was staged.
        let db = SqliteDb::ledger();
        futures::executor::block_on(db.execute(crate::ports::Stmt::new(
            crate::store::sql::GENERATION_ADOPT,
            vec![cfg.index_config().into(), T0.into()],
        )))
        .expect("generation 1 adopts the configuration");
        World {
            db,
            index: MemIndex::new(cfg.embedding_dimensions),
            embedder: LocalEmbedder {
                dimensions: cfg.embedding_dimensions,
                batch_size_max: cfg.embed_batch_size,
            },
            broker: Broker::default(),
            clock: ManualClock::new(T0),
            cfg,
            bugs,
        }
    }

    fn simulated<'a>(&'a self, s: &'a Sched) -> Simulated<'a> {
        self.simulated_with(self.cfg.clone(), s)
    }

    fn simulated_with<'a>(&'a self, cfg: Config, s: &'a Sched) -> Simulated<'a> {
        let mut p = Pipeline::new(
            cfg,
            SimDb(&self.db, s),
            SimIndex(&self.index, s),
            SimEmbedder(&self.embedder, s),
            SimQueue(&self.broker, &self.clock, s),
            &self.clock,
        );
        p.bugs = self.bugs;
        p
    }

    fn direct(&self) -> Direct<'_> {
        let mut p = Pipeline::new(
            self.cfg.clone(),
            &self.db,
            &self.index,
            &self.embedder,
            &NoQueue,
            &self.clock,
        );
        p.bugs = self.bugs;
        p
    }

    /// Vectors of live chunks in every generation still written (active,
    /// building, retained): what the index must hold once work quiesces.
    pub fn live_vector_ids(&self) -> BTreeSet<String> {
        let rows: Vec<IdRow> = self.db.inspect(
            "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version
             JOIN generations g ON g.generation = c.generation WHERE g.state IN ('active', 'building', 'retained')",
            vec![],
        );
        rows.into_iter().map(|r| r.vector_id).collect()
    }

    /// Vectors of live chunks in the active generation: what search serves.
    pub fn served_vector_ids(&self) -> BTreeSet<String> {
        let rows: Vec<IdRow> = self.db.inspect(
            "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version
             JOIN generations g ON g.generation = c.generation WHERE g.state = 'active'",
            vec![],
        );
        rows.into_iter().map(|r| r.vector_id).collect()
    }

    /// The active generation.
    pub fn active_generation(&self) -> u32 {
        let rows: Vec<serde_json::Value> =
            self.db.inspect("SELECT generation FROM generations WHERE state = 'active'", vec![]);
        rows.first().and_then(|r| r["generation"].as_u64()).unwrap_or(0) as u32
    }

    /// Backfills still running or paused.
    fn open_backfills(&self) -> i64 {
        let rows: Vec<serde_json::Value> =
            self.db.inspect("SELECT count(*) AS n FROM backfills WHERE state IN ('running', 'paused')", vec![]);
        rows[0]["n"].as_i64().unwrap_or(0)
    }

    fn known_vector_ids(&self) -> BTreeSet<String> {
        let rows: Vec<IdRow> = self.db.inspect(
            "SELECT vector_id FROM chunks UNION SELECT vector_id FROM cleanup_intents",
            vec![],
        );
        rows.into_iter().map(|r| r.vector_id).collect()
    }

    fn live_versions(&self) -> BTreeMap<String, Option<u32>> {
        let rows: Vec<LiveRow> = self
            .db
            .inspect("SELECT doc_id, live_version FROM documents", vec![]);
        rows.into_iter()
            .map(|r| (r.doc_id, r.live_version))
            .collect()
    }

    /// The state that must not depend on faults or timing: document and
    /// version rows, live chunks, intents, and each job's outcome class
    /// (`succeeded` and `superseded` both mean "done without failure").
    pub fn canonical_dump(&self) -> String {
        let queries = [
            "SELECT doc_id, latest_version, live_version, repair_needed FROM documents ORDER BY doc_id",
            "SELECT v.doc_id, v.version, v.is_delete, v.content_hash, v.content_type, v.metadata, v.text_bytes, v.part_count
             FROM versions v JOIN documents d ON d.doc_id = v.doc_id ORDER BY v.doc_id, v.version",
            "SELECT doc_id, version, part, text FROM version_parts ORDER BY doc_id, version, part",
            "SELECT doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text FROM chunks ORDER BY vector_id",
            "SELECT generation, index_config, state FROM generations ORDER BY generation",
            "SELECT vector_id, doc_id, version, reason FROM cleanup_intents ORDER BY vector_id",
            "SELECT job_id, doc_id, version, kind,
                    CASE WHEN state IN ('succeeded', 'superseded') THEN 'done' ELSE state END AS outcome
             FROM jobs WHERE build_generation IS NULL ORDER BY job_id",
        ];
        let mut out = String::new();
        for q in queries {
            for row in self.db.inspect::<serde_json::Value>(q, vec![]) {
                out.push_str(&row.to_string());
                out.push('\n');
            }
            out.push_str("--\n");
        }
        out
    }

    fn unfinished_jobs(&self) -> i64 {
        #[derive(Deserialize)]
        struct N {
            n: i64,
        }
        self.db.inspect::<N>(
            "SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running', 'up_for_retry')",
            vec![],
        )[0]
        .n + self
            .db
            .inspect::<N>("SELECT count(*) AS n FROM cleanup_intents", vec![])[0]
            .n
    }
}

// ------------------------------------------------------------------ invariants

struct Monitor {
    max_live: RefCell<BTreeMap<String, u32>>,
    max_generation: Cell<u32>,
    queries: Vec<String>,
}

impl Monitor {
    fn new(script: &Script) -> Monitor {
        let mut queries: Vec<String> = script
            .docs
            .iter()
            .flat_map(|(_, ops)| ops.iter())
            .filter_map(|op| match op {
                Op::Put(t) => t.split_whitespace().next().map(str::to_string),
                Op::Delete | Op::Settle => None,
            })
            .collect();
        queries.sort();
        queries.dedup();
        queries.truncate(2);
        Monitor {
            max_live: RefCell::new(BTreeMap::new()),
            max_generation: Cell::new(0),
            queries,
        }
    }

    /// I1–I4, checked after every step.
    fn check_step(&self, w: &World) -> Result<(), Violation> {
        let index: BTreeSet<String> = w.index.ids().into_iter().collect();
        // I1: every chunk search may serve (a live version's, in the active
        // generation) has its vector in the index.
        if let Some(missing) = w
            .served_vector_ids()
            .into_iter()
            .find(|id| !index.contains(id))
        {
            return Err(Violation {
                invariant: "I1",
                detail: format!("live chunk {missing} has no vector"),
            });
        }
        // I2: live_version never decreases (so a tombstone stays until newer).
        for (doc, live) in w.live_versions() {
            let mut max = self.max_live.borrow_mut();
            let prev = max.get(&doc).copied();
            match (prev, live) {
                (Some(p), None) => {
                    return Err(Violation {
                        invariant: "I2",
                        detail: format!("{doc}: live {p} -> none"),
                    });
                }
                (Some(p), Some(l)) if l < p => {
                    return Err(Violation {
                        invariant: "I2",
                        detail: format!("{doc}: live {p} -> {l}"),
                    });
                }
                (_, Some(l)) => {
                    max.insert(doc, l);
                }
                _ => {}
            }
        }
        // I3: every vector in the index is known to D1.
        let known = w.known_vector_ids();
        if let Some(orphan) = index.iter().find(|id| !known.contains(*id)) {
            return Err(Violation {
                invariant: "I3",
                detail: format!("vector {orphan} unknown to D1"),
            });
        }
        // I8: the active generation only moves forward (no rollback here).
        let active = w.active_generation();
        if active < self.max_generation.get() {
            return Err(Violation {
                invariant: "I8",
                detail: format!("active generation {} -> {active}", self.max_generation.get()),
            });
        }
        self.max_generation.set(active);
        // I4: search serves only chunks D1 holds as live, of one generation: the active one.
        let live = w.live_versions();
        let p = w.direct();
        for q in &self.queries {
            let req = SearchRequest {
                query: q.clone(),
                top_k: 10,
                doc_id: None,
                metadata: Default::default(),
            };
            let hits = futures::executor::block_on(p.search(&req)).map_err(|e| Violation {
                invariant: "I4",
                detail: format!("search failed: {e}"),
            })?;
            for h in hits {
                if h.generation != active {
                    return Err(Violation {
                        invariant: "I4",
                        detail: format!("served generation {} while {active} is active", h.generation),
                    });
                }
                if live.get(&h.doc_id).copied().flatten() != Some(h.version) {
                    return Err(Violation {
                        invariant: "I4",
                        detail: format!(
                            "served {}@{} while live is {:?}",
                            h.doc_id,
                            h.version,
                            live.get(&h.doc_id)
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ executor

type TaskFuture<'a> = Pin<Box<dyn Future<Output = TaskEnd> + 'a>>;

enum TaskEnd {
    /// A delivery finished and was settled (dead letters included):
    /// what to do with its message.
    Delivered(JobMessage, Settle),
    /// A client finished all its operations, a cron run finished.
    Done,
}

struct Task<'a> {
    id: usize,
    fut: TaskFuture<'a>,
    started_ms: i64,
    /// The message a delivery task holds (redelivered if the task dies).
    message: Option<JobMessage>,
    is_cron: bool,
    is_client: bool,
    /// For a client task, its index in the script.
    client: Option<usize>,
}

fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        |_| RawWaker::new(std::ptr::null(), &VTABLE),
        |_| {},
        |_| {},
        |_| {},
    );
    // SAFETY: every function of the vtable ignores its data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

/// How the scheduler picks the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One task at a time, in order: clients, then deliveries (FIFO), then cron.
    Sequential,
    /// Random interleaving, delivery order, duplicates, cron and time.
    Random,
}

/// The result of one run.
#[derive(Debug, Default)]
pub struct RunReport {
    pub steps: u64,
    pub calls: u64,
    pub faults: u64,
    pub crashes: u64,
    pub duplicates: u64,
    pub max_concurrency: usize,
    pub cron_ticks_to_quiesce: u32,
    pub injected: BTreeSet<(CallKind, FaultKind)>,
    pub kinds_seen: BTreeSet<CallKind>,
}

pub const QUIESCENCE_TICKS_MAX: u32 = 8;
const STEPS_MAX: u64 = 20_000;

/// Runs `script` under `sched` and checks every invariant. On a violation,
/// returns it with the trace tail.
pub fn run(
    script: &Script,
    cfg: &Config,
    bugs: Bugs,
    sched: &Sched,
    mode: Mode,
) -> Result<RunReport, Violation> {
    let w = World::new(cfg.clone(), bugs);
    let monitor = Monitor::new(script);
    let mut report = RunReport::default();
    let mut tasks: Vec<Task<'_>> = Vec::new();
    let mut next_id = 0usize;
    let finished_clients = Rc::new(Cell::new(0usize));
    // Deliveries in flight, and whether each client is waiting (Op::Settle).
    let in_flight = Rc::new(Cell::new(0usize));
    let waiting: Vec<Rc<Cell<bool>>> = script
        .docs
        .iter()
        .map(|_| Rc::new(Cell::new(false)))
        .collect();

    // Clients: one task per document, operations in order, each retried
    // until it is accepted (as an HTTP client would on a 5xx).
    for (k, (doc, ops)) in script.docs.iter().enumerate() {
        let p = w.simulated(sched);
        let doc = DocId::parse(doc).expect("valid doc id");
        let ops = ops.clone();
        let done = finished_clients.clone();
        let wait = waiting[k].clone();
        let in_flight = in_flight.clone();
        let broker = &w.broker;
        let fut: TaskFuture<'_> = Box::pin(async move {
            for op in ops {
                let item = match op {
                    Op::Settle => {
                        while !(broker.is_empty() && in_flight.get() == 0) {
                            wait.set(true);
                            YieldOnce(false).await;
                        }
                        wait.set(false);
                        continue;
                    }
                    Op::Put(text) => IntakeItem::Put(DocumentInput {
                        doc_id: doc.clone(),
                        text,
                        metadata: Default::default(),
                        content_type: ContentType::Plain,
                    }),
                    Op::Delete => IntakeItem::Delete(doc.clone()),
                };
                for attempt in 0.. {
                    assert!(
                        attempt < 1000,
                        "a client could never get its write accepted"
                    );
                    if p.intake(std::slice::from_ref(&item)).await.is_ok() {
                        break;
                    }
                }
            }
            done.set(done.get() + 1);
            TaskEnd::Done
        });
        sched.clients.borrow_mut().insert(next_id);
        tasks.push(Task {
            id: next_id,
            fut,
            started_ms: T0,
            message: None,
            is_cron: false,
            is_client: true,
            client: Some(k),
        });
        next_id += 1;
    }
    // The operator: deploys a smaller chunk size and starts a backfill to a
    // new generation, retried until the request is answered.
    if script.reindex {
        let p = w.simulated_with(reindex_config(cfg), sched);
        let done = finished_clients.clone();
        let fut: TaskFuture<'_> = Box::pin(async move {
            for attempt in 0.. {
                assert!(attempt < 1000, "the backfill could never be started");
                match p.start_backfill(&crate::pipeline::BackfillScope::Config, 1).await {
                    Ok(Ok(_)) => break,
                    // An earlier attempt started it (or even finished it:
                    // the switch), then failed to answer.
                    Ok(Err((_, "backfill_active" | "config_unchanged", _))) => break,
                    Ok(Err(refusal)) => panic!("backfill refused: {refusal:?}"),
                    Err(_) => continue,
                }
            }
            done.set(done.get() + 1);
            TaskEnd::Done
        });
        sched.clients.borrow_mut().insert(next_id);
        tasks.push(Task {
            id: next_id,
            fut,
            started_ms: T0,
            message: None,
            is_cron: false,
            is_client: true,
            client: None,
        });
        next_id += 1;
    }
    let clients = script.docs.len() + usize::from(script.reindex);
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);

    // ---- main phase: faults on
    loop {
        report.steps += 1;
        if report.steps > STEPS_MAX {
            return Err(Violation {
                invariant: "I7",
                detail: "the main phase did not finish".into(),
            });
        }
        let now = w.clock.0.get();
        let all_clients_done = finished_clients.get() == clients;
        let avail = w.broker.available(now);
        let running_deliveries = tasks.iter().filter(|t| t.message.is_some()).count();
        if all_clients_done && tasks.is_empty() && avail.is_empty() {
            break;
        }
        // Pick the next step.
        enum Step {
            Poll(usize),
            Deliver(usize, bool),
            Cron,
            Advance(i64),
        }
        let step = match mode {
            Mode::Sequential => {
                let is_waiting = |t: &Task<'_>| t.client.is_some_and(|k| waiting[k].get());
                if let Some(i) = tasks.iter().position(|t| !is_waiting(t)) {
                    Step::Poll(i)
                } else if let Some(&i) = avail.first() {
                    Step::Deliver(i, false)
                } else if let Some(at) = w.broker.earliest() {
                    Step::Advance(at - now)
                } else if !tasks.is_empty() {
                    // Only waiting clients, and nothing left to deliver: they may go on.
                    Step::Poll(0)
                } else {
                    break;
                }
            }
            Mode::Random => {
                let mut rng = sched.rng.borrow_mut();
                let r = rng.below(100);
                if !tasks.is_empty() && r < 60 {
                    Step::Poll(rng.below(tasks.len() as u64) as usize)
                } else if !avail.is_empty() && running_deliveries < 3 && r < 85 {
                    let i = avail[rng.below(avail.len() as u64) as usize];
                    Step::Deliver(i, rng.chance(100))
                } else if r < 88 && !tasks.iter().any(|t| t.is_cron) {
                    Step::Cron
                } else if rng.chance(50) {
                    Step::Advance(i64::from(cfg.job_lease_seconds) * 1000 + 1)
                } else {
                    Step::Advance(1 + rng.below(5_000) as i64)
                }
            }
        };
        let stepped = matches!(step, Step::Poll(_));
        match step {
            Step::Poll(i) => {
                let id = tasks[i].id;
                sched.current_task.set(id);
                let polled = tasks[i].fut.as_mut().poll(&mut cx);
                let killed = sched.killed.borrow_mut().remove(&id);
                match polled {
                    Poll::Ready(end) => {
                        let t = tasks.remove(i);
                        if t.message.is_some() {
                            in_flight.set(in_flight.get() - 1);
                        }
                        if let TaskEnd::Delivered(m, outcome) = end {
                            settle(&w, sched, m, outcome);
                        }
                    }
                    Poll::Pending if killed => {
                        report.crashes += 1;
                        let t = tasks.remove(i);
                        if t.message.is_some() {
                            in_flight.set(in_flight.get() - 1);
                        }
                        kill(&w, sched, t);
                    }
                    Poll::Pending => {}
                }
            }
            Step::Deliver(i, duplicate) => {
                let (_, m) = if duplicate {
                    report.duplicates += 1;
                    w.broker.pending.borrow()[i].clone()
                } else {
                    w.broker.pending.borrow_mut().remove(i)
                };
                let p = w.simulated(sched);
                let msg = m.clone();
                let fut: TaskFuture<'_> = Box::pin(async move {
                    let o = p.consume(&msg).await;
                    let settled = p.settle(&msg.job_id, &msg, o).await;
                    TaskEnd::Delivered(msg, settled)
                });
                in_flight.set(in_flight.get() + 1);
                tasks.push(Task {
                    id: next_id,
                    fut,
                    started_ms: now,
                    message: Some(m),
                    is_cron: false,
                    is_client: false,
                    client: None,
                });
                next_id += 1;
            }
            Step::Cron => {
                let p = w.simulated(sched);
                let fut: TaskFuture<'_> = Box::pin(async move {
                    p.repair().await;
                    TaskEnd::Done
                });
                tasks.push(Task {
                    id: next_id,
                    fut,
                    started_ms: now,
                    message: None,
                    is_cron: true,
                    is_client: false,
                    client: None,
                });
                next_id += 1;
            }
            Step::Advance(ms) => {
                w.clock.advance_ms(ms);
                // The platform kills an invocation past its wall-clock limit.
                let now = w.clock.0.get();
                let (dead, alive): (Vec<Task<'_>>, Vec<Task<'_>>) = tasks
                    .drain(..)
                    .partition(|t| !t.is_client && now - t.started_ms > INVOCATION_WALL_MS);
                tasks = alive;
                for t in dead {
                    report.crashes += 1;
                    if t.message.is_some() {
                        in_flight.set(in_flight.get() - 1);
                    }
                    kill(&w, sched, t);
                }
            }
        }
        report.max_concurrency = report.max_concurrency.max(tasks.len());
        // Only a poll runs port calls (the effects); starting a task or
        // moving the clock changes nothing the invariants look at.
        if stepped {
            monitor.check_step(&w).map_err(|v| with_trace(v, sched))?;
        }
    }

    // ---- quiescence: random faults off (a single planned fault stays, so
    // the exhaustive enumeration also covers the cron runs), deliver
    // everything, run cron to a fixed point.
    if matches!(*sched.plan.borrow(), FaultPlan::Random { .. }) {
        *sched.plan.borrow_mut() = FaultPlan::None;
    }
    let mut ticks = 0;
    loop {
        // Tasks still parked (sequential mode stops early) run to the end.
        while let Some(mut t) = tasks.pop() {
            sched.current_task.set(t.id);
            loop {
                if let Poll::Ready(end) = t.fut.as_mut().poll(&mut cx) {
                    if let TaskEnd::Delivered(m, outcome) = end {
                        settle(&w, sched, m, outcome);
                    }
                    break;
                }
                if sched.killed.borrow_mut().remove(&t.id) {
                    report.crashes += 1;
                    kill(&w, sched, t);
                    break;
                }
                monitor.check_step(&w).map_err(|v| with_trace(v, sched))?;
            }
        }
        let mut deliveries = 0;
        while let Some(at) = w.broker.earliest() {
            deliveries += 1;
            if deliveries > 10_000 {
                return Err(with_trace(
                    Violation {
                        invariant: "I7",
                        detail: "messages never stop".into(),
                    },
                    sched,
                ));
            }
            if at > w.clock.0.get() {
                w.clock.0.set(at);
            }
            let i = w.broker.available(w.clock.0.get())[0];
            let (_, m) = w.broker.pending.borrow_mut().remove(i);
            let p = w.simulated(sched);
            let id = next_id;
            next_id += 1;
            let delivery = async {
                let o = p.consume(&m).await;
                p.settle(&m.job_id, &m, o).await
            };
            match drive(sched, id, delivery, &mut |_| monitor.check_step(&w))
                .map_err(|v| with_trace(v, sched))?
            {
                Some(settled) => settle(&w, sched, m, settled),
                None => {
                    report.crashes += 1;
                    w.broker.push(m, w.clock.0.get() + CRASH_REDELIVERY_MS);
                }
            }
        }
        ticks += 1;
        if ticks > QUIESCENCE_TICKS_MAX {
            return Err(with_trace(
                Violation {
                    invariant: "I7",
                    detail: format!(
                        "not quiescent after {QUIESCENCE_TICKS_MAX} cron ticks ({} open)",
                        w.unfinished_jobs()
                    ),
                },
                sched,
            ));
        }
        // Let every lease and stall deadline pass, then one cron run; the
        // system is quiescent when a cron run finds nothing to do.
        w.clock
            .advance_ms(i64::from(cfg.job_lease_seconds.max(cfg.job_stall_seconds)) * 1000 + 1);
        let id = next_id;
        next_id += 1;
        let did = drive(sched, id, w.simulated(sched).repair(), &mut |_| {
            monitor.check_step(&w)
        })
        .map_err(|v| with_trace(v, sched))?;
        monitor.check_step(&w).map_err(|v| with_trace(v, sched))?;
        // A cron run that died did something unknown: run another.
        if did.is_some_and(|r| !r.did_work())
            && w.broker.is_empty()
            && w.unfinished_jobs() == 0
            && w.open_backfills() == 0
        {
            break;
        }
    }
    report.cron_ticks_to_quiesce = ticks;

    // I5: the index holds exactly the vectors of live chunks.
    let index: BTreeSet<String> = w.index.ids().into_iter().collect();
    let live = w.live_vector_ids();
    if index != live {
        let orphans: Vec<_> = index.difference(&live).take(3).collect();
        let holes: Vec<_> = live.difference(&index).take(3).collect();
        return Err(with_trace(
            Violation {
                invariant: "I5",
                detail: format!("orphans {orphans:?}, holes {holes:?}"),
            },
            sched,
        ));
    }
    // I6: D1 equals the fault-free run of the same inputs.
    let reference = reference_dump(script, cfg, bugs);
    let dump = w.canonical_dump();
    if dump != reference {
        let diff = first_difference(&reference, &dump);
        return Err(with_trace(
            Violation {
                invariant: "I6",
                detail: diff,
            },
            sched,
        ));
    }
    report.calls = sched.calls.get();
    report.faults = sched.faults_injected.get();
    report.injected = sched.injected.borrow().clone();
    report.kinds_seen = sched.kinds_seen.borrow().clone();
    Ok(report)
}

/// Runs one task to its end on its own, checking after every step; `None`
/// if it died (a crash fault).
fn drive<T>(
    sched: &Sched,
    id: usize,
    fut: impl Future<Output = T>,
    check: &mut dyn FnMut(()) -> Result<(), Violation>,
) -> Result<Option<T>, Violation> {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    sched.current_task.set(id);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return Ok(Some(v)),
            Poll::Pending => {
                if sched.killed.borrow_mut().remove(&id) {
                    sched.trace.borrow_mut().push(format!("task {id} died"));
                    return Ok(None);
                }
                check(())?;
            }
        }
    }
}

/// Applies a settled delivery to the broker (the acknowledgement itself
/// can fail: then the message is redelivered, as Queues would).
fn settle(w: &World, sched: &Sched, m: JobMessage, settled: Settle) {
    let now = w.clock.0.get();
    match settled {
        Settle::Ack => {
            if sched.ack_fault().is_some() {
                w.broker.push(m, now + CRASH_REDELIVERY_MS);
            }
        }
        Settle::Retry { delay_seconds } => w.broker.push(m, now + i64::from(delay_seconds) * 1000),
    }
}

/// A task died: its message (if any) comes back after the visibility timeout.
fn kill(w: &World, sched: &Sched, t: Task<'_>) {
    sched.trace.borrow_mut().push(format!("task {} died", t.id));
    if let Some(m) = t.message {
        w.broker.push(m, w.clock.0.get() + CRASH_REDELIVERY_MS);
    }
}

fn with_trace(mut v: Violation, sched: &Sched) -> Violation {
    let trace = sched.trace.borrow();
    let tail: Vec<&String> = trace
        .iter()
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    v.detail = format!("{}\n  trace tail: {tail:?}", v.detail);
    v
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {i}: expected {x} got {y}");
        }
    }
    format!(
        "dumps differ in length: {} vs {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

/// The canonical dump of a fault-free, sequential run of the same script.
pub fn reference_dump(script: &Script, cfg: &Config, bugs: Bugs) -> String {
    thread_local! {
        static CACHE: RefCell<BTreeMap<String, String>> = RefCell::new(BTreeMap::new());
    }
    let key = format!("{script:?}{cfg:?}{bugs:?}");
    if let Some(d) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return d;
    }
    let w = World::new(cfg.clone(), bugs);
    let sched = Sched::new(0, FaultPlan::None);
    let p = w.simulated(&sched);
    let deliver_all = || {
        while let Some(at) = w.broker.earliest() {
            if at > w.clock.0.get() {
                w.clock.0.set(at);
            }
            let i = w.broker.available(w.clock.0.get())[0];
            let (_, m) = w.broker.pending.borrow_mut().remove(i);
            let o = futures::executor::block_on(p.consume(&m));
            let settled = futures::executor::block_on(p.settle(&m.job_id, &m, o));
            settle(&w, &sched, m, settled);
        }
    };
    for (doc, ops) in &script.docs {
        let doc = DocId::parse(doc).unwrap();
        for op in ops {
            let item = match op {
                Op::Settle => {
                    deliver_all();
                    continue;
                }
                Op::Put(t) => IntakeItem::Put(DocumentInput {
                    doc_id: doc.clone(),
                    text: t.clone(),
                    metadata: Default::default(),
                    content_type: ContentType::Plain,
                }),
                Op::Delete => IntakeItem::Delete(doc.clone()),
            };
            futures::executor::block_on(p.intake(&[item])).unwrap();
        }
    }
    if script.reindex {
        let p2 = w.simulated_with(reindex_config(cfg), &sched);
        futures::executor::block_on(p2.start_backfill(&crate::pipeline::BackfillScope::Config, 1))
            .expect("no fault")
            .expect("the backfill starts");
    }
    for _ in 0..=QUIESCENCE_TICKS_MAX {
        deliver_all();
        w.clock
            .advance_ms(i64::from(cfg.job_lease_seconds.max(cfg.job_stall_seconds)) * 1000 + 1);
        if !futures::executor::block_on(p.repair()).did_work() && w.broker.is_empty() && w.open_backfills() == 0 {
            break;
        }
    }
    let d = w.canonical_dump();
    CACHE.with(|c| c.borrow_mut().insert(key, d.clone()));
    d
}

// ------------------------------------------------------------------ scripts

const WORDS: [&str; 12] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima",
];

/// A text of a few sentences, from a word pool, long enough for several chunks.
fn text(rng: &mut Rng) -> String {
    let first = WORDS[rng.below(WORDS.len() as u64) as usize];
    let n = 2 + rng.below(12);
    let mut s = String::from(first);
    for _ in 0..n {
        s.push(' ');
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        if rng.chance(200) {
            s.push('.');
        }
    }
    s
}

/// A random script: 1–3 documents, each with 1–4 operations (puts and
/// deletes), so versions of one document and a delete run interleaved.
pub fn random_script(seed: u64) -> Script {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    let docs = 1 + rng.below(3);
    let mut out = Vec::new();
    for d in 0..docs {
        let n = 1 + rng.below(4);
        let mut ops = Vec::new();
        for i in 0..n {
            if i > 0 && rng.chance(300) {
                ops.push(Op::Settle);
            }
            if i > 0 && rng.chance(250) {
                ops.push(Op::Delete);
            } else {
                ops.push(Op::Put(text(&mut rng)));
            }
        }
        out.push((format!("doc-{d}"), ops));
    }
    let reindex = rng.chance(300);
    Script { docs: out, reindex }
}

/// The three flows the exhaustive enumeration covers.
pub fn flow(name: &str) -> Script {
    let v1 =
        "alpha bravo charlie delta. echo foxtrot golf hotel. india juliet kilo lima alpha bravo"
            .to_string();
    let v2 = "kilo lima hotel. golf india. charlie echo delta".to_string();
    let ops = match name {
        "single" => vec![Op::Put(v1)],
        "update" => vec![Op::Put(v1), Op::Settle, Op::Put(v2)],
        "delete" => vec![Op::Put(v1), Op::Settle, Op::Delete],
        "overtake" => vec![Op::Put(v1), Op::Put(v2)],
        "reindex" => vec![Op::Put(v1), Op::Settle, Op::Put(v2)],
        other => panic!("unknown flow {other}"),
    };
    Script {
        reindex: name == "reindex",
        docs: vec![("doc".into(), ops)],
    }
}

/// `single`: one version; `update`: v1 indexed, then v2 replaces it;
/// `delete`: v1 indexed, then deleted; `overtake`: v2 arrives before v1 ran.
pub const FLOWS: [&str; 5] = ["single", "update", "delete", "overtake", "reindex"];

/// Runs a flow sequentially (the exhaustive enumeration's schedule).
pub fn run_flow(
    name: &str,
    cfg: &Config,
    bugs: Bugs,
    sched: &Sched,
) -> Result<RunReport, Violation> {
    run(&flow(name), cfg, bugs, sched, Mode::Sequential)
}

/// How many port calls a fault-free run of a flow makes.
pub fn count_calls(name: &str, cfg: &Config, bugs: Bugs) -> u64 {
    let sched = Sched::new(0, FaultPlan::None);
    run_flow(name, cfg, bugs, &sched).expect("the fault-free flow holds every invariant");
    sched.calls.get()
}
