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
//! invariants I1–I4, I8 and I10 are checked; after quiescence I5–I7, I9
//! and, for a redrive, R (see
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
    /// A lasting outage of one port, over a span of simulated time.
    pub outage: Cell<Option<Outage>>,
    /// The simulated time, as of the scheduler's last step (for the outage).
    pub now_ms: Cell<i64>,
    /// Calls that failed because of the outage.
    pub outage_faults: Cell<u64>,
}

/// The ports an outage can take down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    Db,
    Index,
    Embed,
    Queue,
}

impl Port {
    pub const ALL: [Port; 4] = [Port::Db, Port::Index, Port::Embed, Port::Queue];

    fn serves(self, kind: CallKind) -> bool {
        match self {
            Port::Db => matches!(
                kind,
                CallKind::DbQuery | CallKind::DbExecute | CallKind::DbBatch
            ),
            Port::Index => matches!(
                kind,
                CallKind::IndexUpsert
                    | CallKind::IndexDelete
                    | CallKind::IndexQuery
                    | CallKind::IndexGet
            ),
            Port::Embed => kind == CallKind::Embed,
            Port::Queue => matches!(kind, CallKind::QueueSend | CallKind::Ack),
        }
    }
}

/// One port fails every call (before its effect) from `from_ms` until
/// `until_ms`, in simulated time: an incident, not independent faults. An
/// outage of the queue service also stops its deliveries (the broker
/// delivers again when it ends); an acknowledgement under way fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    pub port: Port,
    pub from_ms: i64,
    pub until_ms: i64,
}

impl Outage {
    fn covers(&self, kind: CallKind, now_ms: i64) -> bool {
        self.port.serves(kind) && (self.from_ms..self.until_ms).contains(&now_ms)
    }
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
            outage: Cell::new(None),
            now_ms: Cell::new(T0),
            outage_faults: Cell::new(0),
        }
    }

    /// Whether the outage (if any) is still going on at the scheduler's time.
    pub fn in_outage(&self) -> bool {
        self.outage
            .get()
            .is_some_and(|o| (o.from_ms..o.until_ms).contains(&self.now_ms.get()))
    }

    fn decide(&self, kind: CallKind) -> Option<FaultKind> {
        let n = self.calls.get();
        self.calls.set(n + 1);
        self.kinds_seen.borrow_mut().insert(kind);
        if self
            .outage
            .get()
            .is_some_and(|o| o.covers(kind, self.now_ms.get()))
        {
            self.outage_faults.set(self.outage_faults.get() + 1);
            if self.verbose.get() {
                self.trace.borrow_mut().push(format!(
                    "call {n} {kind:?} task {} -> outage",
                    self.current_task.get()
                ));
            }
            return Some(FaultKind::FailBefore);
        }
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
                self.0.push_dead(message.clone(), self.1 .0.get());
                Ok(())
            })
            .await
    }
}

/// The queue: messages become available at a time; delivery order is the
/// scheduler's choice (so messages are reordered), and a delivered message
/// may stay behind as a duplicate. Like Queues, it counts each message's
/// deliveries and moves one that used up `max_retries` to the dead-letter
/// queue, whose own consumer retries a letter at most
/// `dead_max_retries` times (100, as deployed); a letter past that is lost
/// (an invariant forbids it).
pub struct Broker {
    pub pending: RefCell<Vec<Queued>>,
    /// The dead-letter queue's messages not yet consumed.
    pub dead: RefCell<Vec<Queued>>,
    /// Every message that reached the dead-letter queue (sent or forwarded).
    pub dead_log: RefCell<Vec<JobMessage>>,
    /// Letters the dead-letter queue dropped after its own `max_retries`.
    pub lost: RefCell<Vec<JobMessage>>,
    pub max_retries: u32,
    pub dead_max_retries: u32,
    /// An outage of the queue service, `[from, until)`: it delivers nothing
    /// then (a delivery under way may still fail to be acknowledged).
    pub paused: Cell<Option<(i64, i64)>>,
}

/// A message in a queue: when it is available, how often it was delivered,
/// and when it was first enqueued there (a letter's age).
#[derive(Clone, Debug)]
pub struct Queued {
    pub at: i64,
    pub msg: JobMessage,
    pub deliveries: u32,
    pub sent_ms: i64,
}

/// Queues' `max_retries` in production (`wrangler.toml`, both queues).
pub const QUEUE_MAX_RETRIES: u32 = 100;

impl Default for Broker {
    fn default() -> Broker {
        Broker::new(QUEUE_MAX_RETRIES)
    }
}

impl Broker {
    pub fn new(max_retries: u32) -> Broker {
        Broker {
            pending: RefCell::new(Vec::new()),
            dead: RefCell::new(Vec::new()),
            dead_log: RefCell::new(Vec::new()),
            lost: RefCell::new(Vec::new()),
            max_retries,
            dead_max_retries: QUEUE_MAX_RETRIES,
            paused: Cell::new(None),
        }
    }
    /// When a message due at `at` can be delivered, at `now` or later.
    fn deliverable_at(&self, at: i64, now: i64) -> i64 {
        let t = at.max(now);
        match self.paused.get() {
            Some((from, until)) if (from..until).contains(&t) => until,
            _ => t,
        }
    }
    pub fn push(&self, m: JobMessage, available_at: i64) {
        self.pending.borrow_mut().push(Queued {
            at: available_at,
            msg: m,
            deliveries: 0,
            sent_ms: available_at,
        });
    }
    /// A sent letter (by the consumer's settlement).
    pub fn push_dead(&self, m: JobMessage, now: i64) {
        self.dead_log.borrow_mut().push(m.clone());
        self.dead.borrow_mut().push(Queued {
            at: now,
            msg: m,
            deliveries: 0,
            sent_ms: now,
        });
    }
    /// A delivered message comes back (retried, or its invocation died), or
    /// moves to the dead-letter queue once it used up `max_retries`.
    pub fn redeliver(&self, q: Queued, at: i64) {
        if q.deliveries > self.max_retries {
            self.push_dead(q.msg, at);
        } else {
            self.pending.borrow_mut().push(Queued { at, ..q });
        }
    }
    /// A delivered letter comes back, or is lost past `max_retries`.
    pub fn redeliver_dead(&self, q: Queued, at: i64) {
        if q.deliveries > self.dead_max_retries {
            self.lost.borrow_mut().push(q.msg);
        } else {
            self.dead.borrow_mut().push(Queued { at, ..q });
        }
    }
    /// Takes (or, for a duplicate, copies) the `i`-th message of `queue`,
    /// counting the delivery.
    fn take(queue: &RefCell<Vec<Queued>>, i: usize, duplicate: bool) -> Queued {
        let mut q = if duplicate {
            queue.borrow()[i].clone()
        } else {
            queue.borrow_mut().remove(i)
        };
        q.deliveries += 1;
        q
    }
    fn available_in(&self, queue: &RefCell<Vec<Queued>>, now: i64) -> Vec<usize> {
        queue
            .borrow()
            .iter()
            .enumerate()
            .filter(|(_, q)| self.deliverable_at(q.at, now) <= now)
            .map(|(i, _)| i)
            .collect()
    }
    fn available(&self, now: i64) -> Vec<usize> {
        self.available_in(&self.pending, now)
    }
    fn dead_available(&self, now: i64) -> Vec<usize> {
        self.available_in(&self.dead, now)
    }
    /// When the next message can be delivered (`now` or later).
    fn earliest(&self, now: i64) -> Option<i64> {
        self.pending
            .borrow()
            .iter()
            .chain(self.dead.borrow().iter())
            .map(|q| self.deliverable_at(q.at, now))
            .min()
    }
    fn is_empty(&self) -> bool {
        self.pending.borrow().is_empty() && self.dead.borrow().is_empty()
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
/// client sends the next one after the previous answered); what an
/// operator does meanwhile; and an outage, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    pub docs: Vec<(String, Vec<Op>)>,
    pub operator: Operator,
    pub outage: Option<Outage>,
    /// The ingest queue's `max_retries` (the dead-letter queue's is 100).
    pub queue_max_retries: u32,
}

impl Script {
    /// Clients only: no operator, no outage, production queues.
    pub fn clients(docs: Vec<(String, Vec<Op>)>) -> Script {
        Script {
            docs,
            operator: Operator::None,
            outage: None,
            queue_max_retries: QUEUE_MAX_RETRIES,
        }
    }
}

/// What an operator does, concurrently with the clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    None,
    /// Changes the chunk size and starts a backfill to a new generation
    /// (the reference run starts it after the clients); cron advances it to
    /// the switch.
    Reindex,
    /// The same, with two identical `POST /v1/admin/reindex` at once (a
    /// client retrying after a timeout).
    ReindexTwice,
    /// Starts the backfill, then cancels it at a random moment, maybe while
    /// cron switches. The run must end as the reference run of whichever
    /// happened first: the switch (a completed reindex) or the cancel.
    ReindexCancel,
    /// The embedder is down longer than the retry window, so jobs fail and
    /// are dead-lettered; once it is back the operator redrives every
    /// letter and polls the redrive while cron advances it too. Every
    /// document must end indexed, with every redrive item accounted for.
    Redrive,
}

/// The reference run's operator for what a run's operator did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reference {
    Clients,
    Reindexed,
    Cancelled,
}

/// One seed's case: the script, the configuration and the faults.
pub struct Case {
    pub script: Script,
    pub cfg: Config,
    pub plan: FaultPlan,
}

/// Random faults per mille of port calls, in most cases.
pub const RANDOM_FAULTS_PER_MILLE: u64 = 60;
/// In the cases with the production retry policy or a redrive, where a
/// job may really fail: rare enough that none fails but by the outage.
const RARE_FAULTS_PER_MILLE: u64 = 10;

/// The case a random seed runs.
pub fn case_for_seed(seed: u64) -> Case {
    let script = random_script(seed);
    let mut cfg = sim_config_for_seed(seed);
    let mut per_mille = RANDOM_FAULTS_PER_MILLE;
    if script.outage.is_some() {
        // Retries of a job a few minutes apart: an outage of under an hour
        // fits in its attempts (the production policy, below, has a window).
        cfg.retry_max_delay_seconds = 300;
    }
    if script.operator == Operator::Redrive {
        // Jobs give up a minute into the outage.
        cfg.job_retry_window_seconds = 60;
        per_mille = RARE_FAULTS_PER_MILLE;
    } else if script.outage.is_some() && seed % 3 == 0 {
        // The production retry policy: a job outlives an outage shorter
        // than its window (an hour), with capped exponential backoff.
        let d = Config::default();
        cfg.job_attempts_max = d.job_attempts_max;
        cfg.job_retry_window_seconds = d.job_retry_window_seconds;
        cfg.retry_base_delay_seconds = d.retry_base_delay_seconds;
        cfg.retry_max_delay_seconds = d.retry_max_delay_seconds;
        per_mille = RARE_FAULTS_PER_MILLE;
    }
    Case {
        script,
        cfg,
        plan: FaultPlan::Random { per_mille },
    }
}

/// Runs the case of `seed` (the scheduler's faults seeded by it too).
pub fn run_seed(
    seed: u64,
    bugs: Bugs,
    verbose: bool,
) -> (Case, Sched, Result<RunReport, Violation>) {
    let case = case_for_seed(seed);
    let sched = Sched::new(seed, case.plan.clone());
    sched.verbose.set(verbose);
    let result = run(&case.script, &case.cfg, bugs, &sched, Mode::Random);
    (case, sched, result)
}

/// The configuration the reindexing operator deploys: a smaller chunk size,
/// so the new generation's chunks differ.
pub fn reindex_config(cfg: &Config) -> Config {
    Config {
        chunk_size_max_tokens: cfg.chunk_size_max_tokens * 2 / 3,
        chunk_overlap_tokens: cfg.chunk_overlap_tokens / 2,
        ..cfg.clone()
    }
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
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT generation FROM generations WHERE state = 'active'",
            vec![],
        );
        rows.first()
            .and_then(|r| r["generation"].as_u64())
            .unwrap_or(0) as u32
    }

    /// Generations being built that no backfill builds: nothing would ever
    /// drive them to a switch or an end, and a reindex to another
    /// configuration is refused while one exists.
    pub fn generations_without_backfill(&self) -> Vec<u32> {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT g.generation AS generation FROM generations g WHERE g.state = 'building'
             AND NOT EXISTS (SELECT 1 FROM backfills b WHERE b.to_generation = g.generation)",
            vec![],
        );
        rows.iter()
            .filter_map(|r| r["generation"].as_u64())
            .map(|g| g as u32)
            .collect()
    }

    /// Backfills still running or paused.
    fn open_backfills(&self) -> i64 {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM backfills WHERE state IN ('running', 'paused')",
            vec![],
        );
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

    /// Jobs not yet ended.
    fn open_jobs(&self) -> i64 {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running', 'up_for_retry')",
            vec![],
        );
        rows[0]["n"].as_i64().unwrap_or(0)
    }

    /// Whether the run's backfill ended cancelled.
    fn backfill_cancelled(&self) -> bool {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM backfills WHERE state = 'cancelled'",
            vec![],
        );
        rows[0]["n"].as_i64().unwrap_or(0) > 0
    }

    /// Jobs that ended `failed` or `dead` whose letter is not archived with
    /// that ending (the evidence an operator redrives from).
    /// Job ids of the archived dead letters.
    fn archived_letters(&self) -> Vec<String> {
        let rows: Vec<serde_json::Value> =
            self.db.inspect("SELECT job_id FROM dead_letters", vec![]);
        rows.iter()
            .filter_map(|r| r["job_id"].as_str().map(str::to_string))
            .collect()
    }

    fn failed_jobs_without_evidence(&self) -> Vec<String> {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT j.job_id FROM jobs j WHERE j.state IN ('failed', 'dead')
               AND NOT EXISTS (SELECT 1 FROM dead_letters l WHERE l.job_id = j.job_id AND l.job_state IN ('failed', 'dead'))",
            vec![],
        );
        rows.iter()
            .filter_map(|r| r["job_id"].as_str().map(str::to_string))
            .collect()
    }

    /// After a redrive scenario: every redrive ended (completed, or stopped
    /// with a reason), no item left pending or sent, no item skipped whose
    /// version was re-run anyway (an untracked re-run: the scenario's
    /// documents are written once, so a later version is a re-run), and
    /// every document indexed with its text.
    fn check_redrives(&self, script: &Script) -> Result<(), Violation> {
        let v = |detail: String| Violation {
            invariant: "R",
            detail,
        };
        let open: Vec<serde_json::Value> = self.db.inspect(
            "SELECT redrive_id, state FROM redrives WHERE state NOT IN ('completed', 'stopped')",
            vec![],
        );
        if let Some(r) = open.first() {
            return Err(v(format!(
                "redrive {} left {}",
                r["redrive_id"], r["state"]
            )));
        }
        let items: Vec<serde_json::Value> = self.db.inspect(
            "SELECT i.redrive_id, i.letter_job_id, i.state, i.version, d.latest_version FROM redrive_items i
             JOIN redrives r ON r.redrive_id = i.redrive_id JOIN documents d ON d.doc_id = i.doc_id
             WHERE i.state IN ('pending', 'sent') AND r.state = 'completed'
                OR i.state = 'skipped' AND d.latest_version > i.version",
            vec![],
        );
        if let Some(i) = items.first() {
            return Err(v(format!(
                "item {} of {} is {} (letter version {}, latest {})",
                i["letter_job_id"], i["redrive_id"], i["state"], i["version"], i["latest_version"]
            )));
        }
        for (doc, ops) in &script.docs {
            let Some(Op::Put(text)) = ops.iter().rev().find(|o| !matches!(o, Op::Settle)) else {
                continue;
            };
            let rows: Vec<serde_json::Value> = self.db.inspect(
                "SELECT d.live_version, d.latest_version, (SELECT group_concat(p.text, '') FROM
                   (SELECT text FROM version_parts WHERE doc_id = d.doc_id AND version = d.live_version ORDER BY part) p) AS text
                 FROM documents d WHERE d.doc_id = ?1",
                vec![doc.as_str().into()],
            );
            let ok = rows.first().is_some_and(|r| {
                r["live_version"] == r["latest_version"]
                    && r["text"].as_str() == Some(text.as_str())
            });
            if !ok {
                return Err(v(format!("{doc} not indexed after the redrive: {rows:?}")));
            }
        }
        Ok(())
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
                detail: format!(
                    "active generation {} -> {active}",
                    self.max_generation.get()
                ),
            });
        }
        self.max_generation.set(active);
        // I10: a generation is built only by a backfill (created with it, in
        // one batch).
        if let Some(g) = w.generations_without_backfill().first() {
            return Err(Violation {
                invariant: "I10",
                detail: format!("generation {g} is building without a backfill"),
            });
        }
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
                        detail: format!(
                            "served generation {} while {active} is active",
                            h.generation
                        ),
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
    Delivered(Settle),
    /// A client finished all its operations, a cron run finished.
    Done,
}

/// The message a delivery task holds (redelivered if the task dies).
enum Held {
    Nothing,
    Ingest(Queued),
    DeadLetter(Queued),
}

struct Task<'a> {
    id: usize,
    fut: TaskFuture<'a>,
    started_ms: i64,
    held: Held,
    is_cron: bool,
    is_client: bool,
    /// For a client task, its waiting flag: its document's index in the
    /// script, or one past the last for the operator.
    client: Option<usize>,
}

impl Task<'_> {
    fn is_delivery(&self) -> bool {
        !matches!(self.held, Held::Nothing)
    }
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
    /// Calls failed by the outage.
    pub outage_faults: u64,
    /// Messages the queue moved (or the consumer sent) to the dead-letter queue.
    pub dead_letters: u64,
    /// Redrive items that ran, and backfills that ended cancelled.
    pub redriven: u64,
    pub cancelled: u64,
    pub operator: Option<Operator>,
}

pub const QUIESCENCE_TICKS_MAX: u32 = 8;
const STEPS_MAX: u64 = 40_000;

/// Yields until the simulated time reaches `at_ms` (a client waiting
/// before it tries again; the scheduler moves the clock).
async fn sleep_until(sched: &Sched, at_ms: i64) {
    while sched.now_ms.get() < at_ms {
        YieldOnce(false).await;
    }
}

/// A client's pause before it repeats a failed request: none in the
/// exhaustive runs (a single fault), growing to a minute in an outage.
async fn back_off(sched: &Sched, attempt: u32) {
    if sched.outage.get().is_some() {
        let seconds = 1i64 << attempt.min(6);
        sleep_until(sched, sched.now_ms.get() + seconds * 1000).await;
    }
}

/// Starts the backfill to the reindex configuration, retried until the
/// request is answered.
async fn start_reindex(p: &Simulated<'_>, sched: &Sched) {
    for attempt in 0.. {
        assert!(attempt < 1000, "the backfill could never be started");
        match p
            .start_backfill(&crate::pipeline::BackfillScope::Config, 1)
            .await
        {
            Ok(Ok(_)) => break,
            // An earlier attempt (or the other request) started it, or even
            // finished it (the switch), then failed to answer.
            Ok(Err((_, "backfill_active" | "config_unchanged", _))) => break,
            Ok(Err(refusal)) => panic!("backfill refused: {refusal:?}"),
            Err(_) => back_off(sched, attempt).await,
        }
    }
}

/// Retries a read-only or idempotent admin call until it answers.
async fn answered<T, F: Future<Output = Result<T, PortError>>>(
    sched: &Sched,
    mut call: impl FnMut() -> F,
) -> T {
    for attempt in 0.. {
        assert!(attempt < 1000, "an admin request was never answered");
        if let Ok(v) = call().await {
            return v;
        }
        back_off(sched, attempt).await;
    }
    unreachable!()
}

/// The request a redriving operator sends: every letter, the API's
/// smallest canary (3), batches of two, no failure tolerated.
pub fn redrive_request() -> crate::pipeline::RedriveRequest {
    crate::pipeline::RedriveRequest {
        bucket: None,
        since: None,
        until: None,
        doc_ids: None,
        canary_size: 3,
        max_failed_canaries: 0,
        max_failure_ratio: 0.0,
        batch_size: 2,
    }
}

/// Redrive rounds an operator runs at most (a redriven job that failed
/// again is redriven in the next one).
const REDRIVE_ROUNDS_MAX: usize = 4;

/// The redriving operator: once the outage is over and the clients'
/// writes were answered, waits for every job and message to end, then plans and
/// executes a redrive of every eligible letter and polls it (the console's
/// `GET`) until it ends, while cron advances it too; again until nothing
/// is eligible.
async fn redrive(
    p: &Simulated<'_>,
    w: &World,
    sched: &Sched,
    writers: &Cell<usize>,
    writers_total: usize,
    in_flight: &Cell<usize>,
) -> u64 {
    let req = redrive_request();
    let mut redriven = 0;
    for _ in 0..REDRIVE_ROUNDS_MAX {
        // Quiet: no job open, no message queued or being delivered (a
        // failed job's letter may still be on its way to the archive).
        while sched.in_outage()
            || writers.get() < writers_total
            || w.open_jobs() > 0
            || !w.broker.is_empty()
            || in_flight.get() > 0
        {
            YieldOnce(false).await;
        }
        let id = loop {
            let plan = answered(sched, || p.redrive_plan(&req)).await;
            if plan.eligible.is_empty() {
                return redriven;
            }
            let n = plan.eligible.len() as u64;
            match p.redrive_execute(&req, &plan.plan_id).await {
                Ok(Some(view)) => {
                    redriven += n;
                    break view["redrive_id"].as_str().unwrap_or_default().to_string();
                }
                // The plan changed (an earlier attempt of this request
                // executed it), or the answer was lost: plan again.
                Ok(None) | Err(_) => back_off(sched, 0).await,
            }
        };
        loop {
            // Polling advances it, like cron.
            let _ = p.redrive_advance(&id).await;
            let state = match p.redrive_view(&id).await {
                Ok(Some(v)) => v["state"].as_str().unwrap_or_default().to_string(),
                _ => String::new(),
            };
            if state == "completed" || state == "stopped" {
                break;
            }
            sleep_until(sched, sched.now_ms.get() + 1000).await;
        }
    }
    redriven
}

/// Runs `script` under `sched` and checks every invariant. On a violation,
/// returns it with the trace tail.
pub fn run(
    script: &Script,
    cfg: &Config,
    bugs: Bugs,
    sched: &Sched,
    mode: Mode,
) -> Result<RunReport, Violation> {
    let mut w = World::new(cfg.clone(), bugs);
    w.broker = Broker::new(script.queue_max_retries);
    if let Some(o) = script.outage.filter(|o| o.port == Port::Queue) {
        w.broker.paused.set(Some((o.from_ms, o.until_ms)));
    }
    let w = w;
    sched.outage.set(script.outage);
    sched.now_ms.set(w.clock.0.get());
    let monitor = Monitor::new(script);
    let mut report = RunReport {
        operator: Some(script.operator),
        ..RunReport::default()
    };
    let mut tasks: Vec<Task<'_>> = Vec::new();
    let mut next_id = 0usize;
    let finished_clients = Rc::new(Cell::new(0usize));
    let finished_writers = Rc::new(Cell::new(0usize));
    let redriven = Rc::new(Cell::new(0u64));
    // Deliveries in flight, and whether each client is waiting (Op::Settle).
    let in_flight = Rc::new(Cell::new(0usize));
    // (One flag per document's client, then one for the operator.)
    let waiting: Vec<Rc<Cell<bool>>> = (0..=script.docs.len())
        .map(|_| Rc::new(Cell::new(false)))
        .collect();
    let operator_waits = waiting[script.docs.len()].clone();

    // Clients: one task per document, operations in order, each retried
    // until it is accepted (as an HTTP client would on a 5xx).
    for (k, (doc, ops)) in script.docs.iter().enumerate() {
        let p = w.simulated(sched);
        let doc = DocId::parse(doc).expect("valid doc id");
        let ops = ops.clone();
        let done = finished_clients.clone();
        let written = finished_writers.clone();
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
                    back_off(sched, attempt).await;
                }
            }
            written.set(written.get() + 1);
            done.set(done.get() + 1);
            TaskEnd::Done
        });
        sched.clients.borrow_mut().insert(next_id);
        tasks.push(Task {
            id: next_id,
            fut,
            started_ms: T0,
            held: Held::Nothing,
            is_cron: false,
            is_client: true,
            client: Some(k),
        });
        next_id += 1;
    }
    // The operator's requests, each its own client task.
    let mut operator_tasks: Vec<TaskFuture<'_>> = Vec::new();
    match script.operator {
        Operator::None => {}
        Operator::Reindex | Operator::ReindexTwice => {
            let requests = if script.operator == Operator::ReindexTwice {
                2
            } else {
                1
            };
            for _ in 0..requests {
                let p = w.simulated_with(reindex_config(cfg), sched);
                operator_tasks.push(Box::pin(async move {
                    start_reindex(&p, sched).await;
                    TaskEnd::Done
                }));
            }
        }
        Operator::ReindexCancel => {
            let p = w.simulated_with(reindex_config(cfg), sched);
            // At once in the exhaustive runs (their clock does not move while a task can run).
            let wait_ms = match mode {
                Mode::Sequential => 0,
                Mode::Random => sched.rng.borrow_mut().below(40 * 60_000) as i64,
            };
            let w = &w;
            operator_tasks.push(Box::pin(async move {
                if mode == Mode::Sequential {
                    // The exhaustive flow cancels a build, not a switch
                    // that an empty index allows at once.
                    while w.live_versions().values().all(Option::is_none) {
                        operator_waits.set(true);
                        YieldOnce(false).await;
                    }
                    operator_waits.set(false);
                }
                start_reindex(&p, sched).await;
                let list = answered(sched, || p.backfills(1)).await;
                let id = list
                    .first()
                    .and_then(|b| b["backfill_id"].as_str())
                    .expect("the backfill started")
                    .to_string();
                sleep_until(sched, sched.now_ms.get() + wait_ms).await;
                // Cancelled, or refused: it completed (or was cancelled by an
                // earlier attempt whose answer was lost).
                let _ = answered(sched, || p.backfill_transition(&id, "cancel")).await;
                TaskEnd::Done
            }));
        }
        Operator::Redrive => {
            let p = w.simulated(sched);
            let w = &w;
            let writers = finished_writers.clone();
            let total = script.docs.len();
            let redriven = redriven.clone();
            let in_flight = in_flight.clone();
            operator_tasks.push(Box::pin(async move {
                redriven.set(redrive(&p, w, sched, &writers, total, &in_flight).await);
                TaskEnd::Done
            }));
        }
    }
    for fut in operator_tasks {
        let done = finished_clients.clone();
        let fut: TaskFuture<'_> = Box::pin(async move {
            let end = fut.await;
            done.set(done.get() + 1);
            end
        });
        sched.clients.borrow_mut().insert(next_id);
        tasks.push(Task {
            id: next_id,
            fut,
            started_ms: T0,
            held: Held::Nothing,
            is_cron: false,
            is_client: true,
            client: Some(script.docs.len()),
        });
        next_id += 1;
    }
    let clients = tasks.len();
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);

    // ---- main phase: faults on
    loop {
        report.steps += 1;
        if report.steps > STEPS_MAX {
            return Err(with_trace(
                Violation {
                    invariant: "I7",
                    detail: format!(
                        "the main phase did not finish ({} of {clients} clients done)",
                        finished_clients.get()
                    ),
                },
                sched,
            ));
        }
        let now = w.clock.0.get();
        sched.now_ms.set(now);
        let all_clients_done = finished_clients.get() == clients;
        let avail = w.broker.available(now);
        let dead_avail = w.broker.dead_available(now);
        let running_deliveries = tasks.iter().filter(|t| t.is_delivery()).count();
        if all_clients_done && tasks.is_empty() && avail.is_empty() && dead_avail.is_empty() {
            break;
        }
        // Pick the next step.
        enum Step {
            Poll(usize),
            Deliver(usize, bool),
            DeliverDead(usize),
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
                } else if let Some(&i) = dead_avail.first() {
                    Step::DeliverDead(i)
                } else if let Some(at) = w.broker.earliest(now) {
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
                let deliverable = avail.len() + dead_avail.len();
                if !tasks.is_empty() && r < 60 {
                    Step::Poll(rng.below(tasks.len() as u64) as usize)
                } else if deliverable > 0 && running_deliveries < 3 && r < 85 {
                    let k = rng.below(deliverable as u64) as usize;
                    match avail.get(k) {
                        Some(&i) => Step::Deliver(i, rng.chance(100)),
                        None => Step::DeliverDead(dead_avail[k - avail.len()]),
                    }
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
                        if t.is_delivery() {
                            in_flight.set(in_flight.get() - 1);
                        }
                        if let TaskEnd::Delivered(outcome) = end {
                            settle(&w, sched, t.held, outcome);
                        }
                    }
                    Poll::Pending if killed => {
                        report.crashes += 1;
                        let t = tasks.remove(i);
                        if t.is_delivery() {
                            in_flight.set(in_flight.get() - 1);
                        }
                        kill(&w, sched, t.id, t.held);
                    }
                    Poll::Pending => {}
                }
            }
            Step::Deliver(i, duplicate) => {
                report.duplicates += u64::from(duplicate);
                let q = Broker::take(&w.broker.pending, i, duplicate);
                let p = w.simulated(sched);
                let msg = q.msg.clone();
                let fut: TaskFuture<'_> = Box::pin(async move {
                    let o = p.consume(&msg).await;
                    TaskEnd::Delivered(p.settle(&msg.job_id, &msg, o).await)
                });
                in_flight.set(in_flight.get() + 1);
                tasks.push(Task {
                    id: next_id,
                    fut,
                    started_ms: now,
                    held: Held::Ingest(q),
                    is_cron: false,
                    is_client: false,
                    client: None,
                });
                next_id += 1;
            }
            Step::DeliverDead(i) => {
                let q = Broker::take(&w.broker.dead, i, false);
                let p = w.simulated(sched);
                let (msg, sent_ms) = (q.msg.clone(), q.sent_ms);
                let fut: TaskFuture<'_> = Box::pin(async move {
                    TaskEnd::Delivered(
                        p.consume_dead_letter(&format!("dlq:{}", msg.job_id), Some(&msg), sent_ms)
                            .await,
                    )
                });
                in_flight.set(in_flight.get() + 1);
                tasks.push(Task {
                    id: next_id,
                    fut,
                    started_ms: now,
                    held: Held::DeadLetter(q),
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
                    held: Held::Nothing,
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
                    if t.is_delivery() {
                        in_flight.set(in_flight.get() - 1);
                    }
                    kill(&w, sched, t.id, t.held);
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
    // the exhaustive enumeration also covers the cron runs; an outage lasts
    // its span), deliver everything, run cron to a fixed point.
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
                    if let TaskEnd::Delivered(outcome) = end {
                        settle(&w, sched, t.held, outcome);
                    }
                    break;
                }
                if sched.killed.borrow_mut().remove(&t.id) {
                    report.crashes += 1;
                    kill(&w, sched, t.id, t.held);
                    break;
                }
                monitor.check_step(&w).map_err(|v| with_trace(v, sched))?;
            }
        }
        let mut deliveries = 0;
        while let Some(at) = w.broker.earliest(w.clock.0.get()) {
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
            let now = w.clock.0.get();
            sched.now_ms.set(now);
            let p = w.simulated(sched);
            let id = next_id;
            next_id += 1;
            let (held, settled) = if let Some(&i) = w.broker.available(now).first() {
                let q = Broker::take(&w.broker.pending, i, false);
                let m = q.msg.clone();
                let delivery = async {
                    let o = p.consume(&m).await;
                    p.settle(&m.job_id, &m, o).await
                };
                let settled = drive(sched, id, delivery, &mut |_| monitor.check_step(&w))
                    .map_err(|v| with_trace(v, sched))?;
                (Held::Ingest(q), settled)
            } else {
                let i = w.broker.dead_available(now)[0];
                let q = Broker::take(&w.broker.dead, i, false);
                let m = q.msg.clone();
                let message_id = format!("dlq:{}", m.job_id);
                let delivery = p.consume_dead_letter(&message_id, Some(&m), q.sent_ms);
                let settled = drive(sched, id, delivery, &mut |_| monitor.check_step(&w))
                    .map_err(|v| with_trace(v, sched))?;
                (Held::DeadLetter(q), settled)
            };
            match settled {
                Some(settled) => settle(&w, sched, held, settled),
                None => {
                    report.crashes += 1;
                    kill(&w, sched, id, held);
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
        sched.now_ms.set(w.clock.0.get());
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
            && !sched.in_outage()
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
    // I9: no dead letter is lost, and every job that ended failed or dead
    // has its evidence archived as such.
    if let Some(m) = w.broker.lost.borrow().first() {
        return Err(with_trace(
            Violation {
                invariant: "I9",
                detail: format!("the dead-letter queue dropped the letter of {}", m.job_id),
            },
            sched,
        ));
    }
    // Every message that reached the dead-letter queue (sent by the
    // consumer, or forwarded by the queue after its max_retries) is archived.
    let archived: BTreeSet<String> = w.archived_letters().into_iter().collect();
    if let Some(m) = w
        .broker
        .dead_log
        .borrow()
        .iter()
        .find(|m| !archived.contains(&m.job_id))
    {
        return Err(with_trace(
            Violation {
                invariant: "I9",
                detail: format!(
                    "the letter of {} reached the dead-letter queue but is not archived",
                    m.job_id
                ),
            },
            sched,
        ));
    }
    if let Some(job) = w.failed_jobs_without_evidence().first() {
        return Err(with_trace(
            Violation {
                invariant: "I9",
                detail: format!("job {job} ended failed or dead with no archived evidence"),
            },
            sched,
        ));
    }
    report.dead_letters = w.broker.dead_log.borrow().len() as u64;
    match script.operator {
        Operator::Redrive => {
            // R: every document indexed, every redrive item accounted for.
            report.redriven = redriven.get();
            w.check_redrives(script).map_err(|v| with_trace(v, sched))?;
        }
        op => {
            // I6: D1 equals the fault-free run of the same inputs (for a
            // cancel, of whichever came first).
            let reference = match op {
                Operator::None => Reference::Clients,
                Operator::ReindexCancel if w.backfill_cancelled() => {
                    report.cancelled = 1;
                    Reference::Cancelled
                }
                _ => Reference::Reindexed,
            };
            let expected = reference_dump(script, reference, cfg, bugs);
            let dump = w.canonical_dump();
            if dump != expected {
                let mut diff = first_difference(&expected, &dump);
                if op != Operator::None {
                    let g: Vec<serde_json::Value> =
                        w.db.inspect("SELECT generation, state FROM generations", vec![]);
                    let b: Vec<serde_json::Value> =
                        w.db.inspect("SELECT state, to_generation FROM backfills", vec![]);
                    diff.push_str(&format!(" (against the {reference:?} reference; generations {g:?}, backfills {b:?})"));
                }
                return Err(with_trace(
                    Violation {
                        invariant: "I6",
                        detail: diff,
                    },
                    sched,
                ));
            }
        }
    }
    report.calls = sched.calls.get();
    report.faults = sched.faults_injected.get();
    report.outage_faults = sched.outage_faults.get();
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

/// Applies a settled delivery to its queue (the acknowledgement itself
/// can fail: then the message is redelivered, as Queues would).
fn settle(w: &World, sched: &Sched, held: Held, settled: Settle) {
    let now = w.clock.0.get();
    let again = |q: Queued, at: i64, dead: bool| {
        if dead {
            w.broker.redeliver_dead(q, at)
        } else {
            w.broker.redeliver(q, at)
        }
    };
    let (q, dead) = match held {
        Held::Nothing => return,
        Held::Ingest(q) => (q, false),
        Held::DeadLetter(q) => (q, true),
    };
    match settled {
        Settle::Ack => {
            if sched.ack_fault().is_some() {
                again(q, now + CRASH_REDELIVERY_MS, dead);
            }
        }
        Settle::Retry { delay_seconds } => again(q, now + i64::from(delay_seconds) * 1000, dead),
    }
}

/// A task died: its message (if any) comes back after the visibility timeout.
fn kill(w: &World, sched: &Sched, id: usize, held: Held) {
    sched.trace.borrow_mut().push(format!("task {id} died"));
    let at = w.clock.0.get() + CRASH_REDELIVERY_MS;
    match held {
        Held::Nothing => {}
        Held::Ingest(q) => w.broker.redeliver(q, at),
        Held::DeadLetter(q) => w.broker.redeliver_dead(q, at),
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
fn reference_dump(script: &Script, reference: Reference, cfg: &Config, bugs: Bugs) -> String {
    thread_local! {
        static CACHE: RefCell<BTreeMap<String, String>> = RefCell::new(BTreeMap::new());
    }
    let key = format!("{:?}{reference:?}{cfg:?}{bugs:?}", script.docs);
    if let Some(d) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return d;
    }
    let w = World::new(cfg.clone(), bugs);
    let sched = Sched::new(0, FaultPlan::None);
    let p = w.simulated(&sched);
    let deliver_all = || {
        while let Some(at) = w.broker.earliest(w.clock.0.get()) {
            if at > w.clock.0.get() {
                w.clock.0.set(at);
            }
            let i = w.broker.available(w.clock.0.get())[0];
            let q = Broker::take(&w.broker.pending, i, false);
            let o = futures::executor::block_on(p.consume(&q.msg));
            let settled = futures::executor::block_on(p.settle(&q.msg.job_id, &q.msg, o));
            settle(&w, &sched, Held::Ingest(q), settled);
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
    if reference == Reference::Reindexed {
        let p2 = w.simulated_with(reindex_config(cfg), &sched);
        futures::executor::block_on(p2.start_backfill(&crate::pipeline::BackfillScope::Config, 1))
            .expect("no fault")
            .expect("the backfill starts");
    }
    for _ in 0..=QUIESCENCE_TICKS_MAX {
        deliver_all();
        w.clock
            .advance_ms(i64::from(cfg.job_lease_seconds.max(cfg.job_stall_seconds)) * 1000 + 1);
        if !futures::executor::block_on(p.repair()).did_work()
            && w.broker.is_empty()
            && w.open_backfills() == 0
        {
            break;
        }
    }
    if reference == Reference::Cancelled {
        // A cancelled backfill leaves its generation retired, with no rows,
        // and everything else as if it had never started.
        let cfg2 = reindex_config(cfg).index_config();
        futures::executor::block_on(w.db.execute(Stmt::new(
            "INSERT INTO generations (generation, index_config, state, created_at, updated_at) VALUES (2, ?1, 'retired', 0, 0)",
            vec![cfg2.into()],
        )))
        .expect("the generation row");
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

/// A random script: 1–3 documents (4–5 for a redrive), each with 1–4 operations (puts and
/// deletes), so versions of one document and a delete run interleaved; an
/// operator in some; an outage of one port in some; in some, queues that
/// give up on a message after a few deliveries (so that live jobs' messages
/// reach the dead-letter queue).
pub fn random_script(seed: u64) -> Script {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    let operator = match rng.below(100) {
        0..=54 => Operator::None,
        55..=69 => Operator::Reindex,
        70..=79 => Operator::ReindexTwice,
        80..=89 => Operator::ReindexCancel,
        _ => Operator::Redrive,
    };
    // A redrive has letters beyond its canaries (3), to send in batches.
    let docs = if operator == Operator::Redrive {
        4 + rng.below(2)
    } else {
        1 + rng.below(3)
    };
    let mut out = Vec::new();
    for d in 0..docs {
        // A redrive's documents are written once: any later version is a re-run.
        let n = if operator == Operator::Redrive {
            1
        } else {
            1 + rng.below(4)
        };
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
    let minute = 60_000;
    let outage = if operator == Operator::Redrive {
        Some(Outage {
            port: Port::Embed,
            from_ms: T0,
            until_ms: T0 + (30 + rng.below(30) as i64) * minute,
        })
    } else if rng.chance(250) {
        let port = Port::ALL[rng.below(4) as usize];
        let from_ms = T0 + rng.below(10 * minute as u64) as i64;
        // Under an hour (the production retry window), with a margin.
        let until_ms = from_ms + minute + rng.below(54 * minute as u64) as i64;
        Some(Outage {
            port,
            from_ms,
            until_ms,
        })
    } else {
        None
    };
    let queue_max_retries = if rng.chance(300) {
        3
    } else {
        QUEUE_MAX_RETRIES
    };
    Script {
        docs: out,
        operator,
        outage,
        queue_max_retries,
    }
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
        "reindex" | "cancel" => vec![Op::Put(v1), Op::Settle, Op::Put(v2)],
        other => panic!("unknown flow {other}"),
    };
    Script {
        operator: match name {
            "reindex" => Operator::Reindex,
            "cancel" => Operator::ReindexCancel,
            _ => Operator::None,
        },
        ..Script::clients(vec![("doc".into(), ops)])
    }
}

/// `single`: one version; `update`: v1 indexed, then v2 replaces it;
/// `delete`: v1 indexed, then deleted; `overtake`: v2 arrives before v1 ran;
/// `reindex`: an update during a backfill to a new generation; `cancel`:
/// the same backfill, cancelled by the operator.
pub const FLOWS: [&str; 6] = [
    "single", "update", "delete", "overtake", "reindex", "cancel",
];

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
