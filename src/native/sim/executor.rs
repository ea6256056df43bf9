//! The executor: runs a script's tasks (clients, the operator, deliveries,
//! cron) under the scheduler, moves the clock, kills what outlives the
//! platform's wall-clock limit, drives the run to quiescence and checks
//! the invariants of a quiescent run (I5–I7, I9, R) against the fault-free
//! reference run.
//!
//! May import every other room of `sim/` but `scripts`.

use super::faults::{CallKind, FaultKind};
use super::faults::{FaultPlan, Port, Sched, YieldOnce};
use super::invariants::{check_redrives, Monitor};
use super::world::{
    reindex_config, Op, Operator, Reference, Script, Simulated, Violation, World,
    CRASH_REDELIVERY_MS, INVOCATION_WALL_MS,
};
use super::wrappers::{Broker, Queued};
use super::T0;
use crate::config::Config;
use crate::core::chunk::ContentType;
use crate::core::ids::DocId;
use crate::native::oracle;
use crate::pipeline::bugs::Bugs;
use crate::pipeline::{DocumentInput, IntakeItem, Settle};
use crate::ports::{Database, PortError, Stmt};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

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
            || oracle::open_jobs(&w.db) > 0
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
                    while oracle::live_versions(&w.db).values().all(Option::is_none) {
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
                        oracle::open_jobs_and_intents(&w.db)
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
            && oracle::open_jobs_and_intents(&w.db) == 0
            && oracle::open_backfills(&w.db) == 0
            && !sched.in_outage()
        {
            break;
        }
    }
    report.cron_ticks_to_quiesce = ticks;

    // I5: the index holds exactly the vectors of live chunks.
    let index: BTreeSet<String> = w.index.ids().into_iter().collect();
    let live = oracle::written_live_vector_ids(&w.db);
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
    let archived: BTreeSet<String> = oracle::archived_letters(&w.db).into_iter().collect();
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
    if let Some(job) = oracle::failed_jobs_without_evidence(&w.db).first() {
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
            check_redrives(&w, script).map_err(|v| with_trace(v, sched))?;
        }
        op => {
            // I6: D1 equals the fault-free run of the same inputs (for a
            // cancel, of whichever came first).
            let reference = match op {
                Operator::None => Reference::Clients,
                Operator::ReindexCancel if oracle::any_backfill_cancelled(&w.db) => {
                    report.cancelled = 1;
                    Reference::Cancelled
                }
                _ => Reference::Reindexed,
            };
            let expected = reference_dump(script, reference, cfg, bugs);
            let dump = oracle::canonical_dump(&w.db);
            if dump != expected {
                let mut diff = first_difference(&expected, &dump);
                if op != Operator::None {
                    let g: Vec<serde_json::Value> = oracle::generation_states(&w.db);
                    let b: Vec<serde_json::Value> = oracle::backfill_states(&w.db);
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
            && oracle::open_backfills(&w.db) == 0
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
    let d = oracle::canonical_dump(&w.db);
    CACHE.with(|c| c.borrow_mut().insert(key, d.clone()));
    d
}
