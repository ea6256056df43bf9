//! A deployment of several shards in memory, for tests to drive by hand:
//! each shard its own SQLite ledger and index, one queue and one clock for
//! all (as a Worker with `SHARDS = n` has one queue and one clock).

use super::testkit::{local_embedder, T0, TEST_ADMIN_TOKEN, TEST_INGEST_TOKEN};
use super::{ManualClock, MemIndex, MemQueue, SqliteDb};
use crate::adapters::local_embedder::LocalEmbedder;
use crate::adapters::ShardQueue;
use crate::api::{ApiRequest, ApiResponse, Secrets};
use crate::bugs::Bugs;
use crate::config::Config;
use crate::core::shards::ShardId;
use crate::pipeline::fleet::{DirectoryCache, Fleet};
use crate::pipeline::moves::{advance_moves, MovesReport};
use crate::pipeline::{ConsumeOutcome, Pipeline, RepairReport};
use crate::ports::Database;
use futures::executor::block_on;
use std::rc::Rc;

/// One shard's ports.
pub struct Shard {
    pub db: SqliteDb,
    pub index: MemIndex,
}

/// The shards, and the ports they share.
pub struct Cluster {
    pub cfg: Config,
    pub shards: Vec<Shard>,
    pub embedder: LocalEmbedder,
    pub queue: MemQueue,
    pub clock: ManualClock,
    /// The directory cache the deployment keeps (one per isolate in the
    /// Worker; one per cluster here).
    pub directory: Rc<DirectoryCache>,
    /// Seeded protocol bugs every shard's pipeline runs with (none but in
    /// the tests of the tester).
    pub bugs: Bugs,
}

/// The deployment over a [`Cluster`]'s ports.
pub type ClusterFleet<'a> =
    Fleet<&'a SqliteDb, &'a MemIndex, &'a LocalEmbedder, ShardQueue<&'a MemQueue>, &'a ManualClock>;

impl Cluster {
    /// `cfg.shards` shards under `cfg`, which must be valid.
    pub fn with(cfg: Config) -> Cluster {
        cfg.validate().unwrap();
        Cluster {
            shards: (0..cfg.shards)
                .map(|_| Shard {
                    db: SqliteDb::ledger(),
                    index: MemIndex::new(cfg.embedding_dimensions),
                })
                .collect(),
            embedder: local_embedder(&cfg),
            queue: MemQueue::default(),
            clock: ManualClock::new(T0),
            directory: Rc::default(),
            bugs: Bugs::default(),
            cfg,
        }
    }

    /// Every shard's pipeline, as the Worker builds them.
    pub fn fleet(&self) -> ClusterFleet<'_> {
        self.fleet_over(self.shards.iter().map(|s| &s.db).collect())
    }

    /// [`Self::fleet`] over `ledgers` (shard n's ledger n: the shards'
    /// own, or wrapped, as the bench times them), with the cluster's
    /// directory cache.
    pub fn fleet_over<D: Database>(
        &self,
        ledgers: Vec<D>,
    ) -> Fleet<D, &MemIndex, &LocalEmbedder, ShardQueue<&MemQueue>, &ManualClock> {
        let mut pipelines =
            ledgers
                .into_iter()
                .zip(&self.shards)
                .enumerate()
                .map(|(n, (db, s))| {
                    let mut p = Pipeline::new(
                        self.cfg.clone(),
                        db,
                        &s.index,
                        &self.embedder,
                        ShardQueue {
                            inner: &self.queue,
                            shard: ShardId(u16::try_from(n).unwrap()),
                        },
                        &self.clock,
                    );
                    p.bugs = self.bugs;
                    p
                });
        let control = pipelines.next().expect("at least one shard");
        Fleet::new(control, pipelines.collect()).with_cache(Rc::clone(&self.directory))
    }

    /// One JSON request through the API with bearer token `auth`, with
    /// the test tokens configured and `entropy` as the request's random
    /// bytes.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        auth: &str,
        body: Option<&serde_json::Value>,
        entropy: u8,
    ) -> ApiResponse {
        let secrets = Secrets {
            ingest_token: Some(TEST_INGEST_TOKEN.into()),
            admin_token: Some(TEST_ADMIN_TOKEN.into()),
        };
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let req = ApiRequest {
            method,
            path,
            authorization: Some(&format!("Bearer {auth}")),
            content_type: Some("application/json"),
            body: bytes.as_bytes(),
            entropy: [entropy; 32],
        };
        block_on(crate::api::handle(&self.fleet(), &secrets, req))
    }

    /// Delivers every queued message to the shard it names (and what they
    /// cause) until the queue is empty; a retried message is delivered
    /// again after its delay. Returns each outcome with its shard.
    pub fn deliver_all(&self) -> Vec<(u16, ConsumeOutcome)> {
        let fleet = self.fleet();
        let mut outcomes = Vec::new();
        for _ in 0..1000 {
            let batch = self.queue.take_all();
            if batch.is_empty() {
                return outcomes;
            }
            for m in batch {
                let p = &fleet.all()[usize::from(m.shard)];
                let o = block_on(p.consume(&m));
                if let ConsumeOutcome::Retry { delay_seconds } = o {
                    self.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    self.queue.sent.borrow_mut().push_back(m.clone());
                }
                outcomes.push((m.shard, o));
            }
        }
        panic!("the queue did not drain");
    }

    /// One scheduled run: every shard repaired in turn, then the moves
    /// advanced (as the Worker's scheduled handler does).
    pub fn cron(&self) -> Vec<RepairReport> {
        self.cron_with_moves().0
    }

    /// [`Self::cron`], with what it did to the moves.
    pub fn cron_with_moves(&self) -> (Vec<RepairReport>, MovesReport) {
        let fleet = self.fleet();
        let repairs = fleet.all().iter().map(|p| block_on(p.repair())).collect();
        (repairs, block_on(advance_moves(&fleet)))
    }
}
