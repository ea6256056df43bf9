//! The port wrappers and the queue broker: [`SimDb`], [`SimIndex`],
//! [`SimEmbedder`] and [`SimQueue`] put every call the pipeline makes
//! through [`Sched`]'s yield point and fault decision; [`Broker`] is the
//! queue service [`SimQueue`] sends to, which the executor delivers from in
//! the order the scheduler picks, and which takes back the message a
//! delivery held ([`Held`]) when it settles or dies.
//!
//! May import `faults`, the native fakes (`SqliteDb`, `MemIndex`,
//! `ManualClock`), the local embedder, the ports and the pipeline's
//! settlement; not the world or any room after it.

use super::faults::{CallKind, Sched};
use crate::adapters::local_embedder::LocalEmbedder;
use crate::core::index_config::EmbedModel;
use crate::native::{ManualClock, MemIndex, SqliteDb};
use crate::pipeline::Settle;
use crate::ports::{
    Database, Embedder, JobMessage, JobQueue, MetadataFilter, PortError, Rows, Stmt, VectorIndex,
    VectorMatch, VectorRecord,
};
use serde::de::DeserializeOwned;
use std::cell::{Cell, RefCell};

pub struct SimDb<'a>(pub &'a SqliteDb, pub &'a Sched);
/// The index, through the scheduler; each delete first checks I13 against
/// the ledger (`db`) and records the vectors it finds held in
/// `deleted_while_held` (the monitor reports them).
pub struct SimIndex<'a> {
    pub index: &'a MemIndex,
    pub sched: &'a Sched,
    pub db: &'a SqliteDb,
    pub deleted_while_held: &'a RefCell<Vec<String>>,
}
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
    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        self.note(&[&probe]);
        self.1
            .call(CallKind::DbQuery, self.0.size_after(probe))
            .await
    }
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        self.note(&[&stmt]);
        self.1
            .call(CallKind::DbQuery, self.0.query_billed(stmt))
            .await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        self.note(&[&stmt]);
        self.1
            .call(CallKind::DbExecute, self.0.execute_billed(stmt))
            .await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        self.note(&stmts.iter().collect::<Vec<_>>());
        let out = self
            .1
            .call(CallKind::DbBatch, self.0.batch_billed(stmts))
            .await;
        if out.as_ref().is_err_and(|e| e.code == "db_constraint") {
            let refused = &self.1.constraint_refusals;
            refused.set(refused.get() + 1);
        }
        out
    }
}

impl VectorIndex for SimIndex<'_> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        if self.sched.verbose.get() {
            self.sched.trace.borrow_mut().push(format!(
                "   upsert {:?}",
                vectors.iter().map(|v| v.id.as_str()).collect::<Vec<_>>()
            ));
        }
        let out = self
            .sched
            .call(CallKind::IndexUpsert, self.index.upsert(vectors))
            .await;
        let delay = self.sched.index_delay_ms.get();
        if delay > 0 {
            // Visible a while after the call (whatever the caller was told).
            let at = self.sched.now_ms.get() + delay;
            let mut visible_at = self.sched.visible_at.borrow_mut();
            for v in vectors {
                visible_at.insert(v.id.clone(), at);
            }
        }
        out
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if self.sched.verbose.get() {
            self.sched
                .trace
                .borrow_mut()
                .push(format!("   delete {ids:?}"));
        }
        // I13, before the delete applies (or fails: deciding to delete a
        // held vector is the violation).
        let held = crate::native::oracle::held_references(self.db, ids);
        self.deleted_while_held.borrow_mut().extend(held);
        self.sched
            .call(CallKind::IndexDelete, self.index.delete_by_ids(ids))
            .await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        let matches = self
            .sched
            .call(
                CallKind::IndexQuery,
                self.index.query(vector, top_k, namespace, filter),
            )
            .await?;
        Ok(matches
            .into_iter()
            .filter(|m| self.sched.visible(&m.id))
            .collect())
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        let records = self
            .sched
            .call(CallKind::IndexGet, self.index.get_by_ids(ids))
            .await?;
        Ok(records
            .into_iter()
            .filter(|r| self.sched.visible(&r.id))
            .collect())
    }
    fn refusal(&self) -> Option<PortError> {
        self.index.refusal()
    }
}

impl Embedder for SimEmbedder<'_> {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        self.1
            .call(CallKind::Embed, self.0.embed(model, texts))
            .await
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
    pub(super) fn take(queue: &RefCell<Vec<Queued>>, i: usize, duplicate: bool) -> Queued {
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
    pub(super) fn available(&self, now: i64) -> Vec<usize> {
        self.available_in(&self.pending, now)
    }
    pub(super) fn dead_available(&self, now: i64) -> Vec<usize> {
        self.available_in(&self.dead, now)
    }
    /// When the next message can be delivered (`now` or later).
    pub(super) fn earliest(&self, now: i64) -> Option<i64> {
        self.pending
            .borrow()
            .iter()
            .chain(self.dead.borrow().iter())
            .map(|q| self.deliverable_at(q.at, now))
            .min()
    }
    pub(super) fn is_empty(&self) -> bool {
        self.pending.borrow().is_empty() && self.dead.borrow().is_empty()
    }
}

/// Redelivery delay of a message whose invocation died.
pub(super) const CRASH_REDELIVERY_MS: i64 = 30_000;

/// The message a delivery task holds (redelivered if the task dies).
pub(super) enum Held {
    Nothing,
    Ingest(Queued),
    DeadLetter(Queued),
}

impl Broker {
    /// Applies a delivery's settlement at `now` to the queue it came from
    /// (the acknowledgement itself can fail: then the message is
    /// redelivered, as Queues would).
    pub(super) fn settle(&self, sched: &Sched, held: Held, settled: Settle, now: i64) {
        let again = |q: Queued, at: i64, dead: bool| {
            if dead {
                self.redeliver_dead(q, at)
            } else {
                self.redeliver(q, at)
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
            Settle::Retry { delay_seconds } => {
                again(q, now + i64::from(delay_seconds) * 1000, dead)
            }
        }
    }

    /// The task holding `held` died at `now`: its message (if any) comes
    /// back after the visibility timeout.
    pub(super) fn return_held(&self, held: Held, now: i64) {
        let at = now + CRASH_REDELIVERY_MS;
        match held {
            Held::Nothing => {}
            Held::Ingest(q) => self.redeliver(q, at),
            Held::DeadLetter(q) => self.redeliver_dead(q, at),
        }
    }
}
