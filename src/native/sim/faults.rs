//! Faults and the scheduler: what a port call may suffer ([`FaultKind`],
//! planned by a [`FaultPlan`], or a lasting [`Outage`] of one [`Port`]),
//! the kinds of call ([`CallKind`]), and [`Sched`], the state one run
//! shares: it wraps every port call in a yield point and a fault decision,
//! and keeps the trace.
//!
//! May import `rng`, the test kit's time origin `T0` and yield point, the
//! core's failure buckets and the ports' error type; nothing of the
//! pipeline, the world or the executor.

use super::rng::Rng;
use super::T0;
use crate::core::failure::FailureBucket;
use crate::native::testkit::yield_now;
use crate::ports::PortError;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;

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

impl CallKind {
    pub const ALL: [CallKind; 10] = [
        CallKind::DbQuery,
        CallKind::DbExecute,
        CallKind::DbBatch,
        CallKind::IndexUpsert,
        CallKind::IndexDelete,
        CallKind::IndexQuery,
        CallKind::IndexGet,
        CallKind::Embed,
        CallKind::QueueSend,
        CallKind::Ack,
    ];
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
    /// Whether random faults of consumer deliveries may be permanent (a
    /// permanent bucket, or a panic): only in scripts whose operator
    /// redrives what failed, so every document still ends indexed.
    pub permanent: Cell<bool>,
    /// Tasks that are consumer deliveries of the ingest queue.
    pub deliveries: RefCell<BTreeSet<usize>>,
    /// Delivery tasks killed by a panic (not a plain crash): the runtime
    /// calls the consumer again with the crashed message (`end_crashed`).
    pub panicked: RefCell<BTreeSet<usize>>,
    /// Set by a caller that ran this run's flow without faults and with
    /// every check (`count_calls`): up to the planned fault this run is
    /// that run, step for step (the same seed, and a planned fault draws
    /// nothing), so its steps there skip the checks of the current state
    /// alone ([`Sched::in_checked_prefix`]).
    pub prefix_checked: Cell<bool>,
    /// The failure buckets of the faults injected.
    pub buckets_injected: RefCell<BTreeSet<FailureBucket>>,
    /// Tasks sleeping until a time (a client backing off): the sequential
    /// schedule treats them as waiting, so time moves for them.
    pub sleeping: RefCell<BTreeSet<usize>>,
    /// From this port call on, the sequential schedule runs the last
    /// runnable task first instead of the first: the enumeration of the
    /// points where a second writer of a document cuts in.
    pub preempt_at: Cell<Option<u64>>,
    /// Batches D1 refused on a constraint (a lost race for a version
    /// number, a guard: quota, sync session, staging).
    pub constraint_refusals: Cell<u64>,
    /// How long an upserted vector stays invisible to the index's reads
    /// (Vectorize applies mutations asynchronously: a median under 30 s,
    /// p99 under 2 min), and when each becomes visible.
    pub index_delay_ms: Cell<i64>,
    pub visible_at: RefCell<std::collections::BTreeMap<String, i64>>,
    /// Reads of the index that a vector not yet visible was missing from.
    pub invisible_reads: Cell<u64>,
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
            permanent: Cell::new(false),
            deliveries: RefCell::new(BTreeSet::new()),
            panicked: RefCell::new(BTreeSet::new()),
            prefix_checked: Cell::new(false),
            buckets_injected: RefCell::new(BTreeSet::new()),
            sleeping: RefCell::new(BTreeSet::new()),
            preempt_at: Cell::new(None),
            constraint_refusals: Cell::new(0),
            index_delay_ms: Cell::new(0),
            visible_at: RefCell::new(std::collections::BTreeMap::new()),
            invisible_reads: Cell::new(0),
        }
    }

    /// Whether vector `id` is visible to the index's reads now.
    pub fn visible(&self, id: &str) -> bool {
        let at = self.visible_at.borrow().get(id).copied();
        let visible = at.is_none_or(|at| at <= self.now_ms.get());
        if !visible {
            self.invisible_reads.set(self.invisible_reads.get() + 1);
        }
        visible
    }

    /// Whether the outage (if any) is still going on at the scheduler's time.
    pub fn in_outage(&self) -> bool {
        self.outage
            .get()
            .is_some_and(|o| (o.from_ms..o.until_ms).contains(&self.now_ms.get()))
    }

    /// Whether the run is still in the prefix a fault-free run of its flow
    /// checked in full: its planned fault not yet injected.
    pub fn in_checked_prefix(&self) -> bool {
        self.prefix_checked.get()
            && self.faults_injected.get() == 0
            && matches!(*self.plan.borrow(), FaultPlan::At { .. })
    }

    fn decide(&self, kind: CallKind) -> Option<FaultKind> {
        let n = self.calls.get();
        self.calls.set(n + 1);
        self.kinds_seen.borrow_mut().insert(kind);
        // A fault planned at this very call comes first: the exhaustive
        // enumeration faults every call as planned, outage or not.
        let planned = matches!(*self.plan.borrow(), FaultPlan::At { at, .. } if at == n);
        if !planned
            && self
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
    pub(super) async fn call<T>(
        &self,
        kind: CallKind,
        effect: impl Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        yield_now().await;
        let n = self.calls.get();
        let fault = self.decide(kind);
        let injected = fault.map(|f| self.injected_error(kind, f, n));
        if let (Some(FaultKind::FailBefore), Some(e)) = (fault, injected) {
            return Err(e);
        }
        let result = effect.await;
        let task = self.current_task.get();
        let is_client = self.clients.borrow().contains(&task);
        match (fault, injected) {
            (Some(FaultKind::FailAfter), Some(e)) => Err(e),
            (Some(FaultKind::CrashAfter), Some(e)) if is_client => Err(e),
            (Some(FaultKind::CrashAfter), _) => {
                if self.panics(task, n) {
                    self.panicked.borrow_mut().insert(task);
                    self.buckets_injected
                        .borrow_mut()
                        .insert(FailureBucket::InternalError);
                }
                self.killed.borrow_mut().insert(task);
                std::future::pending().await
            }
            _ => result,
        }
    }

    /// Whether a permanent fault may strike the current task's call.
    fn may_be_permanent(&self) -> bool {
        self.permanent.get() && self.deliveries.borrow().contains(&self.current_task.get())
    }

    /// The error a fault of call `n` (of `kind`) returns: a bucket of that
    /// port, transient (one of several, by the call's number, so every
    /// bucket a port can answer is injected) or, where permanent faults
    /// may strike, permanent two times in three, each of the port's
    /// permanent buckets in turn (the index has one, the database and the
    /// embedder two: each is injected as often as the others, so a few
    /// seeds reach them all).
    fn injected_error(&self, kind: CallKind, fault: FaultKind, n: u64) -> PortError {
        let (transient, permanent) = port_buckets(kind);
        let mix = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        let is_permanent = mix % 3 != 2
            && !permanent.is_empty()
            && fault != FaultKind::CrashAfter
            && self.may_be_permanent();
        let bucket = if is_permanent {
            permanent[(mix / 3) % permanent.len()]
        } else {
            transient[(mix / 3) % transient.len()]
        };
        self.buckets_injected.borrow_mut().insert(bucket);
        PortError::new(bucket, "injected")
    }

    /// Whether the crash of task `task` at call `n` is a panic: where
    /// permanent faults may strike, one crash in two.
    fn panics(&self, task: usize, n: u64) -> bool {
        self.may_be_permanent() && self.deliveries.borrow().contains(&task) && n.is_multiple_of(2)
    }

    /// A fault decision for an acknowledgement (no effect of its own to wrap).
    pub(super) fn ack_fault(&self) -> Option<FaultKind> {
        self.decide(CallKind::Ack)
    }
}

/// The buckets a failed call of `kind` may answer with, as its adapter
/// classifies them: the transient ones, and the permanent ones (`Internal`
/// and `InputInvalid` stand for what the consumer itself finds wrong with a
/// row or an input it reads: the same ending by the same path).
fn port_buckets(kind: CallKind) -> (&'static [FailureBucket], &'static [FailureBucket]) {
    use FailureBucket::*;
    match kind {
        CallKind::DbQuery | CallKind::DbExecute | CallKind::DbBatch => {
            (&[DbBusy, DbUnavailable], &[DbRejected, Internal])
        }
        CallKind::IndexUpsert
        | CallKind::IndexDelete
        | CallKind::IndexQuery
        | CallKind::IndexGet => (
            &[IndexUnavailable, IndexRateLimited, IndexMisconfigured],
            &[IndexRejected],
        ),
        CallKind::Embed => (
            &[EmbedUnavailable, EmbedRateLimited, ConfigInvalid],
            &[EmbedRejected, InputInvalid],
        ),
        CallKind::QueueSend | CallKind::Ack => (&[QueueUnavailable], &[]),
    }
}
