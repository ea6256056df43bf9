//! The pipeline, written once over the ports: intake, consume, repair and
//! search. The same code runs in workerd (D1, Queues, local or production
//! index) and in native tests (SQLite and in-memory fakes).
//!
//! Here: `intake`, `consume/` (the consumer's steps in protocol order),
//! `settle` (how a delivery ends), `repair/` (cron's steps), `backfill`
//! (reindexing, backfills, generations), `admin` (dead letters, redrives),
//! `search`, `sync` (source sync sessions), `tenants` (tenants, tokens, admission), `budget` (the metered ports), `views` (what operations show,
//! as `Serialize` structs) and `refused` (why an operation says no). It
//! answers in domain terms; only `api` turns them into HTTP.
//!
//! May import: `store`, `ports`, `core`, `config`, `log` and the seeded
//! `bugs`; never `api`, an adapter, `wasm` or `native`.

mod admin;
mod backfill;
mod budget;
mod consume;
pub mod fleet;
mod intake;
pub mod moves;
mod refused;
mod repair;
mod search;
mod settle;
mod sync;
mod tenants;
mod views;

/// The seeded bugs, at their old path (`crate::bugs`).
pub use crate::bugs;
pub use admin::{LetterFilter, Plan, RedriveRequest, Rerun, SkippedItem, REDRIVE_LETTERS_MAX};
pub use backfill::{BackfillAction, BackfillScope};
pub use budget::{Budget, Metered, Usage, UsageSnapshot};
pub use consume::ConsumeOutcome;
// The consumer's fixed budget figures; `config` checks CONSUME_SUBREQUESTS_MAX against them.
pub use crate::config::{CONSUME_RESERVE, CONSUME_SUBREQUESTS_MIN};
/// The log line builder, at its old path (`crate::log`; the entry points
/// install the sink).
pub use crate::log::log_event;
pub use crate::store::Quotas;
pub use intake::{
    content_hash, DocumentInput, IntakeError, IntakeItem, IntakeOutcome, IntakeScope, Quota,
    SourceWrite,
};
pub use refused::{Outcome, Refused};
pub use repair::{cleanup_rows_per_run, RepairReport};
pub use search::{Scores, SearchAnswer, SearchHit, SearchMode, SearchRequest};
pub use settle::{dead_letter_retry_delay, Settle};
pub use sync::{SeenClaim, SyncPage, SyncView, SYNC_CURSOR_MAX};
pub use tenants::{
    Admission, NewToken, QuotasView, TenantUsage, TenantView, TokenGrant, TokenView,
};
pub use views::{
    document_state, BackfillProgress, BackfillView, DocumentFilter, DocumentPage, DocumentState,
    DocumentSummary, DocumentView, FailureCount, GenerationMove, GenerationsView, JobTimeline,
    JobView, LetterPage, RedriveCounts, RedriveView, RepairRunView, TenantDocumentPage,
    TenantDocumentView, TimelineBucket,
};

use crate::config::Config;
use crate::core::failure::RetryPolicy;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};
use crate::store::Store;

/// The pipeline and its ports. Every field is injected: tests control the
/// clock, the queue and the failures of each port.
pub struct Pipeline<D, V, E, Q, C> {
    pub cfg: Config,
    pub store: Store<D>,
    pub index: V,
    pub embedder: E,
    pub queue: Q,
    pub clock: C,
    /// Deliberate protocol bugs (`src/bugs.rs`): none in the Worker, inert
    /// unless a native test switches one on.
    pub bugs: bugs::Bugs,
    /// The queue delivery this pipeline runs for (a token from the Worker's
    /// entry point, the same in its call after a panic): a claim records
    /// it, and a delivery ends only a job it holds (`end_crashed`).
    pub delivery: Option<String>,
    /// The shard this pipeline's ledger and index are ([`fleet`]): views
    /// name it, and its producer stamps it on every message.
    pub shard: crate::core::shards::ShardId,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub fn new(cfg: Config, db: D, index: V, embedder: E, queue: Q, clock: C) -> Self {
        let store = Store::new(db, cfg.d1_json_param_bytes_max);
        Pipeline {
            cfg,
            store,
            index,
            embedder,
            queue,
            clock,
            bugs: bugs::Bugs::default(),
            delivery: None,
            shard: crate::core::shards::ShardId::CONTROL,
        }
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            attempts_max: self.cfg.job_attempts_max,
            base_delay_seconds: self.cfg.retry_base_delay_seconds,
            max_delay_seconds: self.cfg.retry_max_delay_seconds,
            window_seconds: self.cfg.job_retry_window_seconds,
        }
    }
}
