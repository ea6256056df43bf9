//! The world: what a run runs ([`Script`] of client [`Op`]s, an
//! [`Operator`], an outage), the simulation's configurations, and
//! [`World`], the ledger, index, embedder, broker and clock of one run,
//! with the pipelines over them (through the port wrappers, or direct for
//! the monitor's fault-free reads).
//!
//! May import `faults`, `wrappers`, the native fakes, the pipeline and the
//! configuration; not the invariants or the executor.

use super::faults::{Outage, Sched};
use super::wrappers::{Broker, SimDb, SimEmbedder, SimIndex, SimQueue, QUEUE_MAX_RETRIES};
use super::T0;
use crate::adapters::local_embedder::LocalEmbedder;
use crate::config::Config;
use crate::native::{ManualClock, MemIndex, SqliteDb};
use crate::pipeline::bugs::Bugs;
use crate::pipeline::Pipeline;
use crate::ports::{Database, JobMessage, JobQueue, PortError};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

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
pub(super) enum Reference {
    Clients,
    Reindexed,
    Cancelled,
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
pub(super) const INVOCATION_WALL_MS: i64 = 15 * 60 * 1000;
/// Redelivery delay of a message whose invocation died.
pub(super) const CRASH_REDELIVERY_MS: i64 = 30_000;

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

pub(super) type Direct<'a> =
    Pipeline<&'a SqliteDb, &'a MemIndex, &'a LocalEmbedder, &'a NoQueue, &'a ManualClock>;
pub(super) type Simulated<'a> =
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

    pub(super) fn simulated<'a>(&'a self, s: &'a Sched) -> Simulated<'a> {
        self.simulated_with(self.cfg.clone(), s)
    }

    pub(super) fn simulated_with<'a>(&'a self, cfg: Config, s: &'a Sched) -> Simulated<'a> {
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

    pub(super) fn direct(&self) -> Direct<'_> {
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
    pub(super) fn open_backfills(&self) -> i64 {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM backfills WHERE state IN ('running', 'paused')",
            vec![],
        );
        rows[0]["n"].as_i64().unwrap_or(0)
    }

    pub(super) fn known_vector_ids(&self) -> BTreeSet<String> {
        let rows: Vec<IdRow> = self.db.inspect(
            "SELECT vector_id FROM chunks UNION SELECT vector_id FROM cleanup_intents",
            vec![],
        );
        rows.into_iter().map(|r| r.vector_id).collect()
    }

    pub(super) fn live_versions(&self) -> BTreeMap<String, Option<u32>> {
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
    pub(super) fn open_jobs(&self) -> i64 {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running', 'up_for_retry')",
            vec![],
        );
        rows[0]["n"].as_i64().unwrap_or(0)
    }

    /// Whether the run's backfill ended cancelled.
    pub(super) fn backfill_cancelled(&self) -> bool {
        let rows: Vec<serde_json::Value> = self.db.inspect(
            "SELECT count(*) AS n FROM backfills WHERE state = 'cancelled'",
            vec![],
        );
        rows[0]["n"].as_i64().unwrap_or(0) > 0
    }

    /// Jobs that ended `failed` or `dead` whose letter is not archived with
    /// that ending (the evidence an operator redrives from).
    /// Job ids of the archived dead letters.
    pub(super) fn archived_letters(&self) -> Vec<String> {
        let rows: Vec<serde_json::Value> =
            self.db.inspect("SELECT job_id FROM dead_letters", vec![]);
        rows.iter()
            .filter_map(|r| r["job_id"].as_str().map(str::to_string))
            .collect()
    }

    pub(super) fn failed_jobs_without_evidence(&self) -> Vec<String> {
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
    pub(super) fn check_redrives(&self, script: &Script) -> Result<(), Violation> {
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

    pub(super) fn unfinished_jobs(&self) -> i64 {
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
