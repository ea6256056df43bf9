//! The world: what a run runs ([`Script`] of client [`Op`]s on documents
//! of the simulation's two [`tenants`], an [`Operator`], an outage), the
//! simulation's configurations, and [`World`], the ledger (with both
//! tenants), index, embedder, broker and clock of one run, with the
//! pipelines over them (through the port wrappers, or direct for the
//! monitor's fault-free reads).
//!
//! May import `faults`, `wrappers`, the native fakes and the test kit's
//! embedder, the pipeline and the configuration; not the invariants, the
//! actors, the reference run or the executor.

use super::faults::{Outage, Sched};
use super::wrappers::{Broker, SimDb, SimEmbedder, SimIndex, SimQueue, QUEUE_MAX_RETRIES};
use super::T0;
use crate::adapters::local_embedder::LocalEmbedder;
use crate::config::Config;
use crate::core::ids::{DocId, DocKey, TenantId};
use crate::native::testkit::local_embedder;
use crate::native::{ManualClock, MemIndex, SqliteDb};
use crate::pipeline::bugs::Bugs;
use crate::pipeline::Pipeline;
use crate::ports::{JobMessage, JobQueue, PortError};
use crate::store::Quotas;

/// A document's content as a client writes it: its text, whether it is
/// Markdown, and a `lang` metadata value if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Put {
    pub text: String,
    pub markdown: bool,
    pub lang: Option<String>,
}

impl From<String> for Put {
    fn from(text: String) -> Put {
        Put {
            text,
            markdown: false,
            lang: None,
        }
    }
}

impl Put {
    /// The content as intake takes it, for document `doc_id`.
    pub fn input(&self, doc_id: DocId) -> crate::pipeline::DocumentInput {
        let mut metadata = serde_json::Map::new();
        if let Some(lang) = &self.lang {
            metadata.insert("lang".into(), serde_json::Value::String(lang.clone()));
        }
        crate::pipeline::DocumentInput {
            doc_id,
            text: self.text.clone(),
            metadata,
            content_type: if self.markdown {
                crate::core::chunk::ContentType::Markdown
            } else {
                crate::core::chunk::ContentType::Plain
            },
        }
    }

    /// Its first word, which searches for it look for.
    pub fn first_word(&self) -> Option<String> {
        self.text
            .split(|c: char| !c.is_alphanumeric())
            .find(|w| !w.is_empty())
            .map(str::to_string)
    }
}

/// The items of a client's `Op::Batch` of document `doc`: `doc` with the
/// first content, `<doc>.b<i>` with the i-th.
pub fn batch_items(doc: &DocId, puts: &[Put]) -> Vec<crate::pipeline::IntakeItem> {
    puts.iter()
        .enumerate()
        .map(|(i, put)| {
            let id = if i == 0 {
                doc.clone()
            } else {
                DocId::parse(&format!("{}.b{i}", doc.as_str())).expect("a valid ID")
            };
            crate::pipeline::IntakeItem::Put(put.input(id))
        })
        .collect()
}

/// One operation of a client on one document.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Put(Put),
    Delete,
    /// Wait until every message so far was delivered (the client waits for
    /// indexing before its next write).
    Settle,
    /// One intake of several documents: the client's own with the first
    /// content, and `<doc>.b<i>` with the i-th (`batch_items`).
    Batch(Vec<Put>),
    /// A re-run of the live version as a new one with the same content (a
    /// reindex of the document): only in a reference's replay of what a
    /// run recorded (a backfill of scope `all` or `filter`, a document's
    /// reindex, a repair); no client sends it.
    Rerun,
}

/// The tenant the world creates besides the built-in `default` one.
pub const OTHER_TENANT: &str = "acme";

/// The simulation's tenants: the built-in `default` and [`OTHER_TENANT`],
/// which every [`World`] creates before a run starts.
pub fn tenants() -> [TenantId; 2] {
    [
        TenantId::default_tenant(),
        TenantId::parse(OTHER_TENANT).expect("a valid tenant id"),
    ]
}

/// One client's document: its tenant, its ID (the same ID may be another
/// tenant's document too), and the operations the client writes as that
/// tenant, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct DocClient {
    pub tenant: TenantId,
    pub doc_id: String,
    pub ops: Vec<Op>,
}

impl DocClient {
    /// The document's ID, checked.
    pub fn doc(&self) -> DocId {
        DocId::parse(&self.doc_id).expect("valid doc id")
    }

    /// The ledger's key of the document (tenant and ID).
    pub fn key(&self) -> DocKey {
        DocKey::new(&self.tenant, &self.doc())
    }
}

/// What the clients do: per document, operations applied in order (a
/// client sends the next one after the previous answered); what an
/// operator does meanwhile; and an outage, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    pub docs: Vec<DocClient>,
    pub operator: Operator,
    pub outage: Option<Outage>,
    /// The ingest queue's `max_retries` (the dead-letter queue's is 100).
    pub queue_max_retries: u32,
    /// How long an upserted vector stays invisible to the index's reads.
    pub index_delay_ms: i64,
}

impl Script {
    /// Clients of the `default` tenant only: no operator, no outage,
    /// production queues.
    pub fn clients(docs: Vec<(String, Vec<Op>)>) -> Script {
        Script::clients_of(
            docs.into_iter()
                .map(|(doc_id, ops)| DocClient {
                    tenant: TenantId::default_tenant(),
                    doc_id,
                    ops,
                })
                .collect(),
        )
    }

    /// Clients of any tenant: no operator, no outage, production queues.
    pub fn clients_of(docs: Vec<DocClient>) -> Script {
        Script {
            docs,
            operator: Operator::None,
            outage: None,
            queue_max_retries: QUEUE_MAX_RETRIES,
            index_delay_ms: 0,
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
    /// Starts the backfill, pauses it at a random moment and resumes it at
    /// another: the run must end as the reference that reindexed.
    ReindexPause,
    /// Reindexes, then once the new generation serves and the clients are
    /// done, rolls back to generation 1 and retires generation 2: the run
    /// must end as the reference that did the same.
    Rollback,
    /// Starts a backfill of scope `all` (every live document re-run) at a
    /// random moment, while the clients write.
    ReindexAll,
    /// The same with scope `filter` (`{"lang": "en"}`).
    ReindexFilter,
    /// Reindexes each client's document once it is indexed
    /// (`POST /v1/documents/{id}/reindex`), while the clients write.
    ReindexDocuments,
    /// The index loses a vector a served chunk refers to once the clients
    /// are done: cron's verification must find it and re-run the document.
    IndexLoss,
    /// The other tenant has tight quotas (one document, three requests a
    /// minute), and is disabled at a random moment and enabled again
    /// later: its clients wait out the rate limit and the disable, and a
    /// write past the quota is refused and writes nothing.
    TenantLimits,
    /// Syncs a source of the `default` tenant's documents once every
    /// client's writes are indexed: a session that sees them all, then one
    /// that sees all but the last (which the commit deletes). The run must
    /// end as the reference run of the clients, then the same syncs.
    Sync,
}

impl Operator {
    /// Every operator: each must be chosen by some random seed of `make
    /// test` (`tests/sim.rs` asserts it).
    pub const ALL: [Operator; 13] = [
        Operator::None,
        Operator::Reindex,
        Operator::ReindexTwice,
        Operator::ReindexCancel,
        Operator::ReindexPause,
        Operator::Rollback,
        Operator::ReindexAll,
        Operator::ReindexFilter,
        Operator::ReindexDocuments,
        Operator::IndexLoss,
        Operator::TenantLimits,
        Operator::Redrive,
        Operator::Sync,
    ];
}

/// The reference run's operator for what a run's operator did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reference {
    Clients,
    Synced,
    Reindexed,
    Cancelled,
    RolledBack,
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
    /// Vectors a delete was sent for while a chunk row held them (I13).
    pub deleted_while_held: std::cell::RefCell<Vec<String>>,
    /// Vectors the index lost (the `IndexLoss` operator): I1 lets a served
    /// chunk miss one until cron's verification re-runs its document.
    pub lost: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// The text of every put the script's clients may send, by content
    /// hash ([`sent_texts`]): what a version held once retention pruned
    /// its text (its row keeps the hash).
    pub sent: std::collections::BTreeMap<String, String>,
}

/// The content of every put of `script`'s clients (a batch's puts
/// included), by content hash.
pub fn sent_texts(script: &Script) -> std::collections::BTreeMap<String, String> {
    let mut texts = std::collections::BTreeMap::new();
    for c in &script.docs {
        for op in &c.ops {
            let puts = match op {
                Op::Put(p) => std::slice::from_ref(p),
                Op::Batch(puts) => puts.as_slice(),
                _ => &[],
            };
            for p in puts {
                let hash = crate::pipeline::content_hash(&p.input(c.doc()));
                texts.insert(hash, p.text.clone());
            }
        }
    }
    texts
}

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
    if seed.is_multiple_of(2) {
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

impl World {
    /// A world whose ledger has both [`tenants`] (the other one created,
    /// fault-free, through the pipeline) and generation 1.
    pub fn new(cfg: Config, bugs: Bugs) -> World {
        // Generation 1 records the configuration from the start, so that a
        // backfill may begin before anything was staged.
        let db = SqliteDb::pooled_ledger();
        crate::native::testkit::adopt_generation_one(&db, cfg.index_config(), T0);
        // Three seeded bugs are a trigger of the ledger, dropped.
        for (bug, drop) in [
            (
                crate::bugs::Bug::KeywordIndexUnmaintained,
                crate::bugs::sql::DROP_KEYWORD_DELETE_TRIGGER,
            ),
            (
                crate::bugs::Bug::DocumentCountsUnmoved,
                crate::bugs::sql::DROP_JOB_COUNT_TRIGGER,
            ),
            (
                crate::bugs::Bug::DeadLetterGroupsUnmoved,
                crate::bugs::sql::DROP_LETTER_GROUP_TRIGGER,
            ),
        ] {
            if bugs.has(bug) {
                let drop = crate::ports::Stmt::new(drop, vec![]);
                futures::executor::block_on(crate::ports::Database::execute(&db, drop))
                    .expect("the seeded bug's setup");
            }
        }
        let w = World {
            db,
            index: MemIndex::new(cfg.embedding_dimensions),
            embedder: local_embedder(&cfg),
            broker: Broker::default(),
            clock: ManualClock::new(T0),
            cfg,
            bugs,
            deleted_while_held: std::cell::RefCell::new(Vec::new()),
            lost: std::cell::RefCell::new(std::collections::BTreeSet::new()),
            sent: std::collections::BTreeMap::new(),
        };
        for t in tenants().iter().filter(|t| !t.is_default()) {
            futures::executor::block_on(w.direct().create_tenant(t, &Quotas::default()))
                .expect("the setup is fault-free")
                .expect("the tenant is created");
        }
        w
    }

    pub(super) fn simulated<'a>(&'a self, s: &'a Sched) -> Simulated<'a> {
        self.simulated_with(self.cfg.clone(), s)
    }

    pub(super) fn simulated_with<'a>(&'a self, cfg: Config, s: &'a Sched) -> Simulated<'a> {
        let mut p = Pipeline::new(
            cfg,
            SimDb(&self.db, s),
            SimIndex {
                index: &self.index,
                sched: s,
                db: &self.db,
                deleted_while_held: &self.deleted_while_held,
            },
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
}
