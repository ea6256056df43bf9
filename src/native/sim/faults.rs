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
    pub(super) async fn call<T>(
        &self,
        kind: CallKind,
        effect: impl Future<Output = Result<T, PortError>>,
    ) -> Result<T, PortError> {
        yield_now().await;
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
    pub(super) fn ack_fault(&self) -> Option<FaultKind> {
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
