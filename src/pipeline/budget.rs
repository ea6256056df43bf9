//! What one invocation may spend, and what it did spend.
//!
//! The platform counts subrequests per invocation (every D1, Vectorize,
//! Workers AI and Queues call), and bounds its wall time. The consumer wraps
//! its ports in [`Metered`], so every call is counted by kind without the
//! pipeline code having to remember to; before each step it asks the
//! [`Usage`] whether the step still fits. Cron's run (`pipeline/repair/`) is
//! metered the same way.
//!
//! May import: `ports`, `store` (the usage snapshot), the pipeline itself.

use super::Pipeline;
use crate::core::index_config::EmbedModel;
use crate::ports::{
    Clock, Database, Embedder, JobMessage, JobQueue, MetadataFilter, PortError, Rows, Stmt,
    VectorIndex, VectorMatch, VectorRecord,
};
use serde::de::DeserializeOwned;
use std::cell::Cell;

/// Subrequests by kind, made so far by one invocation.
#[derive(Debug, Default)]
pub struct Usage {
    pub d1: Cell<u64>,
    pub embed: Cell<u64>,
    pub index: Cell<u64>,
    pub queue: Cell<u64>,
    /// Chunks embedded and reused by this invocation, and those it found
    /// with their vector in the index already (kept).
    pub embedded: Cell<u64>,
    pub reused: Cell<u64>,
    pub kept: Cell<u64>,
    /// What D1 billed this invocation's calls so far, as it reported them
    /// (`ports::Rows`: rows read and written).
    pub d1_rows_read: Cell<u64>,
    pub d1_rows_written: Cell<u64>,
}

fn bump(c: &Cell<u64>, n: u64) {
    c.set(c.get() + n);
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.d1.get() + self.embed.get() + self.index.get() + self.queue.get()
    }

    /// The counts as they will be once the invocation made `extra_d1` and
    /// `extra_queue` more calls: the statement recording them, and what
    /// must follow it (a continuation message, a dead letter).
    pub fn snapshot(&self, extra_d1: u64, extra_queue: u64) -> UsageSnapshot {
        let (d1, queue) = (self.d1.get() + extra_d1, self.queue.get() + extra_queue);
        UsageSnapshot {
            d1,
            embed: self.embed.get(),
            index: self.index.get(),
            queue,
            embedded: self.embedded.get(),
            reused: self.reused.get(),
            kept: self.kept.get(),
            d1_rows_read: self.d1_rows_read.get(),
            d1_rows_written: self.d1_rows_written.get(),
            peak: d1 + self.embed.get() + self.index.get() + queue,
        }
    }
}

pub use crate::store::UsageSnapshot;

/// The budget of one invocation against which [`Usage`] is checked.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub subrequests_max: u64,
    pub started_ms: i64,
    pub wall_ms: i64,
}

impl Budget {
    /// Whether `next` more subrequests fit, keeping `reserve` free, and
    /// wall time is left.
    pub fn allows(&self, usage: &Usage, now_ms: i64, next: u64, reserve: u64) -> bool {
        usage.total() + next + reserve <= self.subrequests_max
            && now_ms - self.started_ms < self.wall_ms
    }

    /// Subrequests left once `reserve` is kept free (0 when out of time).
    pub fn left(&self, usage: &Usage, now_ms: i64, reserve: u64) -> u64 {
        if now_ms - self.started_ms >= self.wall_ms {
            return 0;
        }
        self.subrequests_max.saturating_sub(usage.total() + reserve)
    }
}

/// A port whose calls are counted in a [`Usage`].
pub struct Metered<'u, P> {
    pub inner: P,
    pub usage: &'u Usage,
}

/// A pipeline whose every port call is counted in one [`Usage`].
pub type MeteredPipeline<'a, D, V, E, Q, C> =
    Pipeline<Metered<'a, &'a D>, Metered<'a, &'a V>, Metered<'a, &'a E>, Metered<'a, &'a Q>, &'a C>;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// This pipeline with its ports wrapped in [`Metered`], counting every
    /// D1, index, embedder and queue call in `usage`: how the consumer and
    /// cron meter an invocation without the protocol code counting.
    pub fn metered<'a>(&'a self, usage: &'a Usage) -> MeteredPipeline<'a, D, V, E, Q, C> {
        Pipeline {
            cfg: self.cfg.clone(),
            store: self.store.wrap(|db| Metered { inner: db, usage }),
            index: Metered {
                inner: &self.index,
                usage,
            },
            embedder: Metered {
                inner: &self.embedder,
                usage,
            },
            queue: Metered {
                inner: &self.queue,
                usage,
            },
            clock: &self.clock,
            shard: self.shard,
            bugs: self.bugs,
            delivery: self.delivery.clone(),
        }
    }
}

impl Usage {
    /// Adds what D1 billed a call that succeeded.
    fn bill<T>(&self, out: &Result<(T, Rows), PortError>) {
        if let Ok((_, rows)) = out {
            bump(&self.d1_rows_read, rows.read);
            bump(&self.d1_rows_written, rows.written);
        }
    }
}

impl<P: Database> Database for Metered<'_, P> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        bump(&self.usage.d1, 1);
        let out = self.inner.query_billed(stmt).await;
        self.usage.bill(&out);
        out
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        bump(&self.usage.d1, 1);
        let out = self.inner.execute_billed(stmt).await;
        self.usage.bill(&out);
        out
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        bump(&self.usage.d1, 1);
        let out = self.inner.batch_billed(stmts).await;
        self.usage.bill(&out);
        out
    }
    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        bump(&self.usage.d1, 1);
        self.inner.size_after(probe).await
    }
}

impl<P: VectorIndex> VectorIndex for Metered<'_, P> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        bump(&self.usage.index, 1);
        self.inner.upsert(vectors).await
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        bump(&self.usage.index, 1);
        self.inner.delete_by_ids(ids).await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        bump(&self.usage.index, 1);
        self.inner.query(vector, top_k, namespace, filter).await
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        bump(&self.usage.index, 1);
        self.inner.get_by_ids(ids).await
    }
    fn refusal(&self) -> Option<PortError> {
        self.inner.refusal()
    }
}

impl<P: Embedder> Embedder for Metered<'_, P> {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        bump(&self.usage.embed, 1);
        self.inner.embed(model, texts).await
    }
    fn refusal(&self) -> Option<PortError> {
        self.inner.refusal()
    }
}

impl<P: JobQueue> JobQueue for Metered<'_, P> {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        bump(&self.usage.queue, 1);
        self.inner.send_batch(messages).await
    }
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        bump(&self.usage.queue, 1);
        self.inner.send_dead_letter(message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_keeps_the_reserve_and_stops_at_the_wall() {
        let u = Usage::default();
        u.d1.set(5);
        u.embed.set(2);
        let b = Budget {
            subrequests_max: 10,
            started_ms: 0,
            wall_ms: 1000,
        };
        assert!(b.allows(&u, 0, 1, 2));
        assert!(!b.allows(&u, 0, 2, 2));
        assert_eq!(b.left(&u, 0, 2), 1);
        assert!(!b.allows(&u, 1000, 0, 0), "out of wall time");
        assert_eq!(b.left(&u, 1000, 0), 0);
        let s = u.snapshot(1, 1);
        assert_eq!(
            s,
            UsageSnapshot {
                d1: 6,
                embed: 2,
                queue: 1,
                peak: 9,
                ..UsageSnapshot::default()
            }
        );
        u.index.set(4);
        let later = u.snapshot(1, 0);
        assert_eq!(
            later.minus(&u.snapshot(0, 0)),
            UsageSnapshot {
                d1: 1,
                peak: 12,
                ..UsageSnapshot::default()
            }
        );
    }
}
