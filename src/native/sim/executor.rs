//! The executor: [`run`] starts a script's actors, then steps the world
//! under the scheduler (polls a task, starts a delivery or a cron run,
//! moves the clock and kills what outlives the platform's wall-clock
//! limit), checking the step invariants after every poll; then drives the
//! run to quiescence (I7) and checks the quiescent ledger (I5, I9, and I6
//! against the reference run or R after a redrive).
//!
//! May import every other room of `sim/` but `scripts`.

use super::actors::{self, Progress};
use super::faults::{CallKind, FaultKind, FaultPlan, Port, Sched};
use super::invariants::{self, Monitor, QUIESCENCE_TICKS_MAX};
use super::reference::reference_dump;
use super::world::{reindex_config, Operator, Reference, Script, Violation, World};
use super::wrappers::{Broker, Held};
use super::T0;
use crate::config::Config;
use crate::core::failure::FailureBucket;
use crate::native::oracle;
use crate::pipeline::bugs::Bugs;
use crate::pipeline::{RepairReport, Settle};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

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
    /// Deliveries that panicked (the consumer then ran `end_crashed`).
    pub panics: u64,
    /// Documents two clients wrote at once, and the writes answered
    /// `conflict` (a concurrent writer won every attempt).
    pub races: u64,
    pub conflicts: u64,
    /// Backfills paused (and resumed) by the operator.
    pub paused: u64,
    /// Index reads a vector was missing from, not visible yet.
    pub invisible_reads: u64,
    /// Documents cron's verification re-ran for a lost vector.
    pub repaired: u64,
    /// Cleanup passes cron made on the rest of a run's budget (step 8).
    pub cleanup_passes: u64,
    /// Writes refused at the quota, admissions refused by the rate limit
    /// and by the tenant's disable (each waited out by its client).
    pub quota_refusals: u64,
    /// Intakes of several documents at once.
    pub batches: u64,
    pub rate_limited: u64,
    pub disabled: u64,
    /// Failure buckets injected, and those the ledger recorded (a job's
    /// last failure, a dead letter's).
    pub buckets_injected: BTreeSet<FailureBucket>,
    pub buckets_recorded: BTreeSet<FailureBucket>,
    /// How the run's jobs ended (`succeeded`, `failed`, `dead`,
    /// `superseded`) and its backfills (`completed`, `cancelled`).
    pub endings: BTreeSet<String>,
    /// Redrive items that ran, and backfills that ended cancelled.
    pub redriven: u64,
    pub cancelled: u64,
    pub operator: Option<Operator>,
}

/// Steps of the main phase at most (then I7 fails).
const STEPS_MAX: u64 = 40_000;
/// Deliveries of one quiescence round at most (then I7 fails).
const QUIESCENCE_DELIVERIES_MAX: u32 = 10_000;
/// The platform's wall-clock limit for a queue or cron invocation.
const INVOCATION_WALL_MS: i64 = 15 * 60 * 1000;

/// Runs `script` under `sched` and checks every invariant. On a violation,
/// returns it with the trace tail.
pub fn run(
    script: &Script,
    cfg: &Config,
    bugs: Bugs,
    sched: &Sched,
    mode: Mode,
) -> Result<RunReport, Violation> {
    let w = world_for(script, cfg, bugs, sched);
    let mut progress = Progress::new(script.docs.len());
    progress.quotas = script.operator == Operator::TenantLimits;
    let mut ex = Executor::new(&w, sched, cfg, mode, script, &progress);
    // With a seeded bug on, only the invariant that names it is checked
    // after each step (`Bug::invariant`).
    ex.monitor.only = bugs.active.map(crate::pipeline::bugs::Bug::invariant);
    ex.start_clients(script);
    ex.start_operator(script);
    ex.main_phase()?;
    ex.quiesce()?;
    let mut report = ex.report;
    check_quiescent(&w, script, cfg, bugs, &progress, &mut report)
        .map_err(|v| with_trace(v, sched))?;
    report.calls = sched.calls.get();
    report.faults = sched.faults_injected.get();
    report.outage_faults = sched.outage_faults.get();
    report.injected = sched.injected.borrow().clone();
    report.kinds_seen = sched.kinds_seen.borrow().clone();
    report.buckets_injected = sched.buckets_injected.borrow().clone();
    report.buckets_recorded = oracle::failure_buckets_recorded(&w.db)
        .iter()
        .filter_map(|b| FailureBucket::parse(b))
        .collect();
    report.endings = oracle::endings(&w.db).into_iter().collect();
    report.conflicts = progress.conflicts.get();
    report.paused = progress.paused.get();
    report.invisible_reads = sched.invisible_reads.get();
    report.repaired = oracle::documents_repaired(&w.db);
    report.cleanup_passes = oracle::cleanup_passes(&w.db);
    report.quota_refusals = progress.refused.borrow().len() as u64;
    report.rate_limited = progress.rate_limited.get();
    report.batches = progress.batches.get();
    report.disabled = progress.disabled.get();
    let keys: BTreeSet<String> = script
        .docs
        .iter()
        .map(|c| c.key().as_str().to_string())
        .collect();
    report.races = (script.docs.len() - keys.len()) as u64;
    Ok(report)
}

/// The world of a run of `script` (its queues' `max_retries`, an outage of
/// the queue service pausing the broker), and the scheduler set to its
/// outage and clock.
fn world_for(script: &Script, cfg: &Config, bugs: Bugs, sched: &Sched) -> World {
    let mut w = World::new(cfg.clone(), bugs);
    w.sent = super::world::sent_texts(script);
    w.broker = Broker::new(script.queue_max_retries);
    if let Some(o) = script.outage.filter(|o| o.port == Port::Queue) {
        w.broker.paused.set(Some((o.from_ms, o.until_ms)));
    }
    sched.outage.set(script.outage);
    sched.index_delay_ms.set(script.index_delay_ms);
    // Permanent failures (and panics) end jobs `failed`: only where the
    // operator redrives every letter, so the run still ends indexed.
    sched.permanent.set(script.operator == Operator::Redrive);
    sched.now_ms.set(w.clock.0.get());
    if script.operator == Operator::TenantLimits {
        let other = crate::core::ids::TenantId::parse(super::world::OTHER_TENANT)
            .expect("a valid tenant id");
        let tight = crate::store::Quotas {
            documents_max: Some(1),
            bytes_max: None,
            requests_per_minute_max: Some(3),
        };
        futures::executor::block_on(w.direct().set_tenant_quotas(&other, &tight))
            .expect("the setup is fault-free")
            .expect("the tenant exists");
    }
    w
}

/// The checks of a quiescent run: I5, I9, then R after a redrive or I6
/// against the reference run of whatever the operator did (for a cancel,
/// whichever came first: the switch or the cancel). Records the dead
/// letters, and the letters redriven or the backfill cancelled, in `report`.
fn check_quiescent(
    w: &World,
    script: &Script,
    cfg: &Config,
    bugs: Bugs,
    progress: &Progress,
    report: &mut RunReport,
) -> Result<(), Violation> {
    invariants::index_holds_written_live_chunks(w)?;
    invariants::no_dead_letter_is_lost(w)?;
    invariants::writes_are_what_clients_were_told(w, script, &progress.accepted.borrow())?;
    invariants::refused_writes_wrote_nothing(
        w,
        &progress.accepted.borrow(),
        &progress.refused.borrow(),
    )?;
    report.dead_letters = w.broker.dead_log.borrow().len() as u64;
    match script.operator {
        Operator::Redrive => {
            report.redriven = progress.redriven.get();
            invariants::check_redrives(w, script)
        }
        op => {
            let reference = match op {
                Operator::None => Reference::Clients,
                Operator::Sync => {
                    invariants::syncs_hold(w)?;
                    Reference::Synced
                }
                Operator::ReindexCancel if oracle::any_backfill_cancelled(&w.db) => {
                    report.cancelled = 1;
                    Reference::Cancelled
                }
                Operator::Rollback => Reference::RolledBack,
                Operator::ReindexAll
                | Operator::ReindexFilter
                | Operator::ReindexDocuments
                | Operator::IndexLoss
                | Operator::TenantLimits => Reference::Clients,
                _ => Reference::Reindexed,
            };
            let serialized = super::reference::serialized(script, w);
            let expected = reference_dump(&serialized, reference, cfg, bugs);
            invariants::ledger_equals_reference(w, &expected, reference, op)
        }
    }
}

// ------------------------------------------------------------------ tasks

type TaskFuture<'a> = Pin<Box<dyn Future<Output = TaskEnd> + 'a>>;

enum TaskEnd {
    /// A delivery finished and was settled (dead letters included):
    /// what to do with its message.
    Delivered(Settle),
    /// A client finished all its operations, a cron run finished.
    Done,
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
    /// For a delivery, its token (the entry point's): the claim records it.
    token: Option<String>,
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

/// One step of the main phase.
enum Step {
    /// Poll the `i`-th task.
    Poll(usize),
    /// Deliver the `i`-th available message (a duplicate: leave a copy).
    Deliver(usize, bool),
    /// Deliver the `i`-th available dead letter to the DLQ's consumer.
    DeliverDead(usize),
    /// Start a cron run.
    Cron,
    /// Move the clock by this many milliseconds.
    Advance(i64),
}

/// The running tasks of one run and what it measures.
struct Executor<'a> {
    w: &'a World,
    sched: &'a Sched,
    cfg: &'a Config,
    mode: Mode,
    monitor: Monitor,
    progress: &'a Progress,
    tasks: Vec<Task<'a>>,
    next_id: usize,
    /// Client tasks started: documents' clients and operator requests.
    clients: usize,
    report: RunReport,
    waker: Waker,
    /// The sequential schedule's last poll of waiting tasks only: the
    /// ledger's changes, the tasks and the port calls it saw.
    idle_poll: std::cell::Cell<Option<(u64, usize, u64)>>,
    /// Which waiting task the sequential schedule polls next.
    idle_rotor: std::cell::Cell<usize>,
    /// When the sequential schedule last ran cron for waiting tasks.
    idle_cron_ms: std::cell::Cell<i64>,
}

impl<'a> Executor<'a> {
    fn new(
        w: &'a World,
        sched: &'a Sched,
        cfg: &'a Config,
        mode: Mode,
        script: &Script,
        progress: &'a Progress,
    ) -> Executor<'a> {
        Executor {
            w,
            sched,
            cfg,
            mode,
            monitor: Monitor::new(script),
            progress,
            tasks: Vec::new(),
            next_id: 0,
            clients: 0,
            report: RunReport {
                operator: Some(script.operator),
                ..RunReport::default()
            },
            waker: noop_waker(),
            idle_poll: std::cell::Cell::new(None),
            idle_rotor: std::cell::Cell::new(0),
            idle_cron_ms: std::cell::Cell::new(T0),
        }
    }

    fn take_id(&mut self) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn trace<T>(&self, r: Result<T, Violation>) -> Result<T, Violation> {
        r.map_err(|v| with_trace(v, self.sched))
    }

    // ---------------------------------------------------------------- setup

    /// A client task (its crashes are failed requests, which it retries);
    /// `flag` is its waiting flag in [`Progress::waiting`].
    fn start_client(&mut self, flag: usize, fut: TaskFuture<'a>) {
        let id = self.take_id();
        self.sched.clients.borrow_mut().insert(id);
        self.tasks.push(Task {
            id,
            fut,
            started_ms: T0,
            held: Held::Nothing,
            is_cron: false,
            is_client: true,
            client: Some(flag),
            token: None,
        });
        self.clients += 1;
    }

    /// Clients: one task per document, writing as its tenant, operations
    /// in order, each retried until it is accepted (as an HTTP client would
    /// on a 5xx).
    fn start_clients(&mut self, script: &Script) {
        let (w, sched, progress) = (self.w, self.sched, self.progress);
        for (k, client) in script.docs.iter().enumerate() {
            let p = w.simulated(sched);
            let client = client.clone();
            self.start_client(
                k,
                Box::pin(async move {
                    actors::client(p, w, sched, &w.broker, progress, k, client).await;
                    TaskEnd::Done
                }),
            );
        }
    }

    /// The operator's requests, each its own client task, counted done
    /// when it ends. The cancelling operator's delay is drawn here (a
    /// random run's only draw before its first step).
    fn start_operator(&mut self, script: &Script) {
        let (w, sched, progress, cfg) = (self.w, self.sched, self.progress, self.cfg);
        let requests: Vec<Pin<Box<dyn Future<Output = ()> + 'a>>> = match script.operator {
            Operator::None => Vec::new(),
            Operator::Reindex | Operator::ReindexTwice => {
                let n = if script.operator == Operator::ReindexTwice {
                    2
                } else {
                    1
                };
                (0..n)
                    .map(|_| {
                        let p = w.simulated_with(reindex_config(cfg), sched);
                        Box::pin(async move { actors::start_reindex(&p, sched).await }) as _
                    })
                    .collect()
            }
            Operator::ReindexPause => {
                let p = w.simulated_with(reindex_config(cfg), sched);
                let (pause_ms, resume_ms) = match self.mode {
                    Mode::Sequential => (0, 0),
                    Mode::Random => {
                        let mut rng = sched.rng.borrow_mut();
                        (rng.below(20 * 60_000) as i64, rng.below(20 * 60_000) as i64)
                    }
                };
                vec![Box::pin(actors::reindex_pause_resume(
                    p, sched, progress, pause_ms, resume_ms,
                ))]
            }
            Operator::Rollback => {
                let p = w.simulated_with(reindex_config(cfg), sched);
                let writers = script.docs.len();
                vec![Box::pin(actors::reindex_then_roll_back(
                    p, w, sched, progress, writers,
                ))]
            }
            Operator::ReindexAll | Operator::ReindexFilter => {
                let p = w.simulated(sched);
                let scope = if script.operator == Operator::ReindexAll {
                    crate::pipeline::BackfillScope::All
                } else {
                    let mut f = serde_json::Map::new();
                    f.insert("lang".into(), serde_json::Value::String("en".into()));
                    crate::pipeline::BackfillScope::Filter(f)
                };
                let after_ms = match self.mode {
                    Mode::Sequential => None,
                    Mode::Random => Some(sched.rng.borrow_mut().below(10 * 60_000) as i64),
                };
                vec![Box::pin(actors::rerun_backfill(
                    p, w, sched, progress, scope, after_ms,
                ))]
            }
            Operator::ReindexDocuments => {
                let p = w.simulated(sched);
                let docs = script.docs.clone();
                vec![Box::pin(actors::reindex_documents(
                    p, w, sched, progress, docs,
                ))]
            }
            Operator::IndexLoss => {
                let writers = script.docs.len();
                vec![Box::pin(actors::lose_a_vector(w, progress, writers))]
            }
            Operator::TenantLimits => {
                let p = w.simulated(sched);
                let (disable_ms, enable_ms) = match self.mode {
                    Mode::Sequential => (0, 60_000),
                    Mode::Random => {
                        let mut rng = sched.rng.borrow_mut();
                        (rng.below(10 * 60_000) as i64, rng.below(10 * 60_000) as i64)
                    }
                };
                vec![Box::pin(actors::disable_then_enable(
                    p, sched, disable_ms, enable_ms,
                ))]
            }
            Operator::ReindexCancel => {
                let p = w.simulated_with(reindex_config(cfg), sched);
                // At once in the exhaustive runs (their clock does not move
                // while a task can run), which cancel a build, not a switch.
                let (after_a_live_version, cancel_after_ms) = match self.mode {
                    Mode::Sequential => (true, 0),
                    Mode::Random => (false, sched.rng.borrow_mut().below(40 * 60_000) as i64),
                };
                vec![Box::pin(actors::reindex_then_cancel(
                    p,
                    w,
                    sched,
                    progress,
                    after_a_live_version,
                    cancel_after_ms,
                ))]
            }
            Operator::Sync => {
                let p = w.simulated(sched);
                let docs = script.docs.clone();
                vec![Box::pin(actors::sync_operator(
                    p, sched, &w.broker, progress, docs,
                ))]
            }
            Operator::Redrive => {
                let p = w.simulated(sched);
                let writers = script.docs.len();
                vec![Box::pin(actors::redrive(p, w, sched, progress, writers))]
            }
        };
        for request in requests {
            self.start_client(
                script.docs.len(),
                Box::pin(async move {
                    request.await;
                    progress.clients_done.set(progress.clients_done.get() + 1);
                    TaskEnd::Done
                }),
            );
        }
    }

    // ---------------------------------------------------------------- the main phase

    /// The main phase, faults on: one step at a time until every client is
    /// done, every task ended and no message is available; the step
    /// invariants after every poll.
    fn main_phase(&mut self) -> Result<(), Violation> {
        loop {
            self.report.steps += 1;
            if self.report.steps > STEPS_MAX {
                return Err(with_trace(
                    Violation {
                        invariant: "I7",
                        detail: format!(
                            "the main phase did not finish ({} of {} clients done)",
                            self.progress.clients_done.get(),
                            self.clients
                        ),
                    },
                    self.sched,
                ));
            }
            let now = self.w.clock.0.get();
            self.sched.now_ms.set(now);
            let all_clients_done = self.progress.clients_done.get() == self.clients;
            let avail = self.w.broker.available(now);
            let dead_avail = self.w.broker.dead_available(now);
            if all_clients_done
                && self.tasks.is_empty()
                && avail.is_empty()
                && dead_avail.is_empty()
            {
                return Ok(());
            }
            let step = match self.mode {
                Mode::Sequential => match self.next_in_order(now, &avail, &dead_avail) {
                    Some(step) => step,
                    None => return Ok(()),
                },
                Mode::Random => self.next_at_random(&avail, &dead_avail),
            };
            let stepped = matches!(step, Step::Poll(_));
            match step {
                Step::Poll(i) => self.poll(i),
                Step::Deliver(i, duplicate) => self.deliver(i, duplicate, now),
                Step::DeliverDead(i) => self.deliver_dead(i, now),
                Step::Cron => self.start_cron(now),
                Step::Advance(ms) => self.advance(ms),
            }
            self.report.max_concurrency = self.report.max_concurrency.max(self.tasks.len());
            // Only a poll runs port calls (the effects); starting a task or
            // moving the clock changes nothing the invariants look at.
            if stepped {
                let checked = self.monitor.check_step(self.w, self.sched);
                self.trace(checked)?;
                if let Some(v) = self.progress.violations.borrow_mut().pop() {
                    return Err(with_trace(v, self.sched));
                }
            }
        }
    }

    /// The sequential schedule: the first task not waiting, else the first
    /// message, else the first dead letter, else the clock to the next
    /// message, else a waiting task; `None` when nothing is left.
    fn next_in_order(&self, now: i64, avail: &[usize], dead_avail: &[usize]) -> Option<Step> {
        let waiting = &self.progress.waiting;
        let sleeping = self.sched.sleeping.borrow();
        let is_waiting =
            |t: &Task<'_>| t.client.is_some_and(|k| waiting[k].get()) || sleeping.contains(&t.id);
        let preempted = self
            .sched
            .preempt_at
            .get()
            .is_some_and(|at| self.sched.calls.get() >= at);
        let runnable = if preempted {
            self.tasks.iter().rposition(|t| !is_waiting(t))
        } else {
            self.tasks.iter().position(|t| !is_waiting(t))
        };
        if let Some(i) = runnable {
            Some(Step::Poll(i))
        } else if let Some(&i) = avail.first() {
            Some(Step::Deliver(i, false))
        } else if let Some(&i) = dead_avail.first() {
            Some(Step::DeliverDead(i))
        } else if let Some(at) = self.w.broker.earliest(now) {
            Some(Step::Advance(at - now))
        } else if !self.tasks.is_empty() {
            // Only waiting clients, and nothing left to deliver: they may go
            // on, polled in turn; if a whole round of polls changed nothing
            // (they wait for time to pass: an outage to end, a poll
            // interval, a stalled job that only cron sends again), the
            // clock moves 30 s, and once a stall's time has passed
            // cron runs, as it would in production.
            let n = self.tasks.len();
            let r = self.idle_rotor.get();
            self.idle_rotor.set(r + 1);
            if r.is_multiple_of(n) {
                let state = (self.w.db.total_changes(), n, self.sched.calls.get());
                if self.idle_poll.replace(Some(state)) == Some(state) {
                    self.idle_poll.set(None);
                    let stall_ms = i64::from(self.cfg.job_stall_seconds) * 1000;
                    let cron_due = now - self.idle_cron_ms.get() > stall_ms;
                    if cron_due && !self.tasks.iter().any(|t| t.is_cron) {
                        self.idle_cron_ms.set(now);
                        return Some(Step::Cron);
                    }
                    return Some(Step::Advance(30_000));
                }
            }
            Some(Step::Poll(r % n))
        } else {
            None
        }
    }

    /// The random schedule: 60% a poll of a random task; else (up to three
    /// deliveries running) 25% a delivery of a random message, 10% of them
    /// duplicated; else 3% a cron run (one at a time); else the clock moves,
    /// past a lease 5% of the time, by up to 5 s otherwise.
    fn next_at_random(&self, avail: &[usize], dead_avail: &[usize]) -> Step {
        let running_deliveries = self.tasks.iter().filter(|t| t.is_delivery()).count();
        let mut rng = self.sched.rng.borrow_mut();
        let r = rng.below(100);
        let deliverable = avail.len() + dead_avail.len();
        if !self.tasks.is_empty() && r < 60 {
            Step::Poll(rng.below(self.tasks.len() as u64) as usize)
        } else if deliverable > 0 && running_deliveries < 3 && r < 85 {
            let k = rng.below(deliverable as u64) as usize;
            match avail.get(k) {
                Some(&i) => Step::Deliver(i, rng.chance(100)),
                None => Step::DeliverDead(dead_avail[k - avail.len()]),
            }
        } else if r < 88 && !self.tasks.iter().any(|t| t.is_cron) {
            Step::Cron
        } else if rng.chance(50) {
            Step::Advance(i64::from(self.cfg.job_lease_seconds) * 1000 + 1)
        } else {
            Step::Advance(1 + rng.below(5_000) as i64)
        }
    }

    /// Polls task `i` once; a task that ended settles its message, one that
    /// died (a crash fault) has it redelivered.
    fn poll(&mut self, i: usize) {
        let id = self.tasks[i].id;
        self.sched.current_task.set(id);
        let mut cx = Context::from_waker(&self.waker);
        let polled = self.tasks[i].fut.as_mut().poll(&mut cx);
        let killed = self.sched.killed.borrow_mut().remove(&id);
        match polled {
            Poll::Ready(end) => {
                let t = self.remove_task(i);
                if let TaskEnd::Delivered(outcome) = end {
                    self.settle(t.held, outcome);
                }
            }
            Poll::Pending if killed => {
                self.report.crashes += 1;
                let t = self.remove_task(i);
                if self.sched.panicked.borrow_mut().remove(&t.id) {
                    self.report.panics += 1;
                    self.after_panic(t.held, t.token);
                } else {
                    self.kill(t.id, t.held);
                }
            }
            Poll::Pending => {}
        }
    }

    /// Removes task `i`, ending its delivery if it is one.
    fn remove_task(&mut self, i: usize) -> Task<'a> {
        let t = self.tasks.remove(i);
        self.end_delivery(&t);
        t
    }

    fn end_delivery(&self, t: &Task<'_>) {
        if t.is_delivery() {
            let in_flight = &self.progress.in_flight;
            in_flight.set(in_flight.get() - 1);
        }
    }

    /// A token for the next delivery, as the Worker's entry point gives
    /// each (unique within the run).
    fn delivery_token(&self) -> String {
        format!("delivery-{}", self.next_id)
    }

    fn start_delivery(&mut self, fut: TaskFuture<'a>, held: Held, now: i64, token: Option<String>) {
        self.progress
            .in_flight
            .set(self.progress.in_flight.get() + 1);
        let id = self.take_id();
        if matches!(held, Held::Ingest(_)) {
            self.sched.deliveries.borrow_mut().insert(id);
        }
        self.tasks.push(Task {
            id,
            fut,
            started_ms: now,
            held,
            is_cron: false,
            is_client: false,
            client: None,
            token,
        });
    }

    /// Starts the consumer on the `i`-th available message (a duplicate
    /// leaves the message queued).
    fn deliver(&mut self, i: usize, duplicate: bool, now: i64) {
        self.report.duplicates += u64::from(duplicate);
        let q = Broker::take(&self.w.broker.pending, i, duplicate);
        let token = self.delivery_token();
        let mut p = self.w.simulated(self.sched);
        p.delivery = Some(token.clone());
        let msg = q.msg.clone();
        let fut: TaskFuture<'a> = Box::pin(async move {
            let o = p.consume(&msg).await;
            TaskEnd::Delivered(p.settle(&msg.job_id, &msg, o).await)
        });
        self.start_delivery(fut, Held::Ingest(q), now, Some(token));
    }

    /// A delivery panicked: as the Worker's entry does, the consumer is
    /// called again on a fresh instance with the crashed message, which
    /// ends its job `failed` (`internal_error`) and dead-letters it.
    fn after_panic(&mut self, held: Held, token: Option<String>) {
        let Held::Ingest(q) = held else {
            return self.kill(usize::MAX, held);
        };
        // The same delivery, called again: the same token.
        let mut p = self.w.simulated(self.sched);
        p.delivery = token.clone();
        let msg = q.msg.clone();
        let fut: TaskFuture<'a> = Box::pin(async move {
            let o = p.end_crashed(&msg).await;
            TaskEnd::Delivered(p.settle(&msg.job_id, &msg, o).await)
        });
        let now = self.w.clock.0.get();
        self.start_delivery(fut, Held::Ingest(q), now, token);
    }

    /// Starts the dead-letter queue's consumer on its `i`-th available letter.
    fn deliver_dead(&mut self, i: usize, now: i64) {
        let q = Broker::take(&self.w.broker.dead, i, false);
        let p = self.w.simulated(self.sched);
        let (msg, sent_ms) = (q.msg.clone(), q.sent_ms);
        let fut: TaskFuture<'a> = Box::pin(async move {
            TaskEnd::Delivered(
                p.consume_dead_letter(&format!("dlq:{}", msg.job_id), Some(&msg), sent_ms)
                    .await,
            )
        });
        self.start_delivery(fut, Held::DeadLetter(q), now, None);
    }

    fn start_cron(&mut self, now: i64) {
        let p = self.w.simulated(self.sched);
        let fut: TaskFuture<'a> = Box::pin(async move {
            p.repair().await;
            TaskEnd::Done
        });
        let id = self.take_id();
        self.tasks.push(Task {
            id,
            fut,
            started_ms: now,
            held: Held::Nothing,
            is_cron: true,
            is_client: false,
            client: None,
            token: None,
        });
    }

    /// Moves the clock; the platform kills an invocation past its
    /// wall-clock limit.
    fn advance(&mut self, ms: i64) {
        self.w.clock.advance_ms(ms);
        let now = self.w.clock.0.get();
        let (dead, alive): (Vec<Task<'a>>, Vec<Task<'a>>) = self
            .tasks
            .drain(..)
            .partition(|t| !t.is_client && now - t.started_ms > INVOCATION_WALL_MS);
        self.tasks = alive;
        for t in dead {
            self.report.crashes += 1;
            self.end_delivery(&t);
            self.kill(t.id, t.held);
        }
    }

    /// Applies a settled delivery to its queue.
    fn settle(&self, held: Held, settled: Settle) {
        self.w
            .broker
            .settle(self.sched, held, settled, self.w.clock.0.get());
    }

    /// Task `id` died: its message (if any) comes back after the visibility
    /// timeout.
    fn kill(&self, id: usize, held: Held) {
        self.sched
            .trace
            .borrow_mut()
            .push(format!("task {id} died"));
        self.w.broker.return_held(held, self.w.clock.0.get());
    }

    // ---------------------------------------------------------------- quiescence

    /// Quiescence: random faults off (a single planned fault stays, so the
    /// exhaustive enumeration also covers the cron runs; an outage lasts
    /// its span); tasks still parked run to their end, then rounds of:
    /// deliver everything, let every deadline pass, one cron run, until a
    /// cron run finds nothing to do and nothing is left (I7: within
    /// `QUIESCENCE_TICKS_MAX` rounds).
    fn quiesce(&mut self) -> Result<(), Violation> {
        if matches!(*self.sched.plan.borrow(), FaultPlan::Random { .. }) {
            *self.sched.plan.borrow_mut() = FaultPlan::None;
        }
        let mut ticks = 0;
        loop {
            self.finish_parked_tasks()?;
            self.deliver_everything()?;
            ticks += 1;
            if ticks > QUIESCENCE_TICKS_MAX {
                return Err(with_trace(
                    Violation {
                        invariant: "I7",
                        detail: format!(
                            "not quiescent after {QUIESCENCE_TICKS_MAX} cron ticks ({} open)",
                            oracle::open_jobs_and_intents(&self.w.db)
                        ),
                    },
                    self.sched,
                ));
            }
            let did = self.cron_after_deadlines()?;
            // A cron run that died did something unknown: run another.
            if did.is_some_and(|r| !r.did_work())
                && self.w.broker.is_empty()
                && oracle::open_jobs_and_intents(&self.w.db) == 0
                && oracle::open_backfills(&self.w.db) == 0
                && !self.sched.in_outage()
            {
                break;
            }
        }
        self.report.cron_ticks_to_quiesce = ticks;
        Ok(())
    }

    /// Tasks still parked (sequential mode stops early) run to their end,
    /// last started first, checked after every poll.
    fn finish_parked_tasks(&mut self) -> Result<(), Violation> {
        while let Some(mut t) = self.tasks.pop() {
            self.sched.current_task.set(t.id);
            loop {
                let mut cx = Context::from_waker(&self.waker);
                if let Poll::Ready(end) = t.fut.as_mut().poll(&mut cx) {
                    if let TaskEnd::Delivered(outcome) = end {
                        self.settle(t.held, outcome);
                    }
                    break;
                }
                if self.sched.killed.borrow_mut().remove(&t.id) {
                    self.report.crashes += 1;
                    self.kill(t.id, t.held);
                    break;
                }
                let checked = self.monitor.check_step(self.w, self.sched);
                self.trace(checked)?;
            }
        }
        Ok(())
    }

    /// Delivers every message and dead letter, each when due (the clock
    /// jumps to it), one at a time to its end, checked after every poll.
    fn deliver_everything(&mut self) -> Result<(), Violation> {
        let mut deliveries = 0;
        while let Some(at) = self.w.broker.earliest(self.w.clock.0.get()) {
            deliveries += 1;
            if deliveries > QUIESCENCE_DELIVERIES_MAX {
                return Err(with_trace(
                    Violation {
                        invariant: "I7",
                        detail: "messages never stop".into(),
                    },
                    self.sched,
                ));
            }
            if at > self.w.clock.0.get() {
                self.w.clock.0.set(at);
            }
            let now = self.w.clock.0.get();
            self.sched.now_ms.set(now);
            let id = self.take_id();
            let (held, settled) = self.deliver_to_end(id, now)?;
            match settled {
                Some(settled) => self.settle(held, settled),
                None => {
                    self.report.crashes += 1;
                    self.kill(id, held);
                }
            }
        }
        Ok(())
    }

    /// Delivers the first available message (else dead letter) as task
    /// `id`, to its end; its settlement, or `None` if it died.
    fn deliver_to_end(&self, id: usize, now: i64) -> Result<(Held, Option<Settle>), Violation> {
        let (w, sched, monitor) = (self.w, self.sched, &self.monitor);
        let mut p = w.simulated(sched);
        p.delivery = Some(format!("delivery-{id}"));
        if let Some(&i) = w.broker.available(now).first() {
            let q = Broker::take(&w.broker.pending, i, false);
            let m = q.msg.clone();
            let delivery = async {
                let o = p.consume(&m).await;
                p.settle(&m.job_id, &m, o).await
            };
            let settled = self.trace(drive(sched, id, delivery, &mut |_| {
                monitor.check_step(w, sched)
            }))?;
            Ok((Held::Ingest(q), settled))
        } else {
            let i = w.broker.dead_available(now)[0];
            let q = Broker::take(&w.broker.dead, i, false);
            let m = q.msg.clone();
            let message_id = format!("dlq:{}", m.job_id);
            let delivery = p.consume_dead_letter(&message_id, Some(&m), q.sent_ms);
            let settled = self.trace(drive(sched, id, delivery, &mut |_| {
                monitor.check_step(w, sched)
            }))?;
            Ok((Held::DeadLetter(q), settled))
        }
    }

    /// Lets every lease and stall deadline pass, then runs cron to its end,
    /// checked after every poll and once more after; its report, or `None`
    /// if it died.
    fn cron_after_deadlines(&mut self) -> Result<Option<RepairReport>, Violation> {
        let cfg = self.cfg;
        self.w
            .clock
            .advance_ms(i64::from(cfg.job_lease_seconds.max(cfg.job_stall_seconds)) * 1000 + 1);
        self.sched.now_ms.set(self.w.clock.0.get());
        let id = self.take_id();
        let (w, sched, monitor) = (self.w, self.sched, &self.monitor);
        let did = self.trace(drive(sched, id, w.simulated(sched).repair(), &mut |_| {
            monitor.check_step(w, sched)
        }))?;
        self.trace(monitor.check_step(w, sched))?;
        Ok(did)
    }
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

/// `v` with the last dozen lines of the trace appended.
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
