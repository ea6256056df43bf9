//! The queue consumer: one message, one job, as far as one invocation's
//! budget goes (`pipeline/budget.rs`); a job too large for one invocation
//! checkpoints in D1 and continues in a new message.
//!
//! The protocol (its side effects in order, and what a crash right after
//! each leaves behind) is written once, in `docs/ARCHITECTURE.md`, "The
//! consumer's side effects"; the step numbers here are that table's. This
//! file keeps the order of the steps ([`Pipeline::consume`],
//! `consume_inner`, `run_claimed`); each step lives in its own file:
//!
//! - `claim.rs` — 0–1: load the job, refuse stale work, claim the lease;
//! - `stage.rs` — 2: the generations to write, chunking, one staging batch;
//! - `page.rs` — 3–4: a page of staged rows, embedded or reused, upserted;
//! - `checkpoint.rs` — 4a–4b: the checkpoint and its continuation message;
//! - `replace.rs` — 5: the replace (or a build's finish);
//! - `cleanup.rs` — 6: deleting intents' vectors (cron's drain uses it too);
//! - `fail.rs` — a failed attempt (retry or end), and a crashed delivery.
//!
//! The order upsert (4) → replace (5) → cleanup (6) is the design's first
//! rule: never break the derived index before the source of truth.
//!
//! May import: the rest of `pipeline` (`budget`, `log_event`), `store`,
//! `ports`, `core`, `config`, `bugs`; nothing above the pipeline.

mod checkpoint;
mod claim;
mod cleanup;
mod fail;
mod page;
mod replace;
mod stage;

use super::budget::{Budget, Usage};
use super::{log_event, Pipeline};
use crate::bugs::Bug;
use crate::config::CONSUME_RESERVE;
use crate::core::failure::FailureBucket;
use crate::core::ids::DocKey;
use crate::core::state::JobKind;
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{ClaimRow, ConsumeRow};
use serde_json::json;
use std::cell::Cell;
use std::ops::ControlFlow;

/// What the entry point must do with the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeOutcome {
    /// Acknowledge: the job reached a final state, or the message is stale,
    /// duplicate or unknown. `reason` is a static, loggable code.
    Ack { reason: &'static str },
    /// Ask Queues to deliver the message again after `delay_seconds`.
    Retry { delay_seconds: u32 },
    /// The job ended `failed` or `dead`: send the message to the dead-letter
    /// queue (the evidence), then acknowledge it. Redelivery repeats this.
    DeadLetter { reason: &'static str },
}

/// How far one invocation got with its job.
enum Progress {
    /// The replace step committed: the job ended.
    Committed,
    /// The budget ran out: the chunks counted as done have their vectors;
    /// the next invocation continues from there.
    Checkpoint,
}

/// The chunks a claim says are done already: kept by a checkpoint and by a
/// retry, once the version is staged.
fn resumed_from(claim: &ClaimRow) -> u32 {
    if claim.step == "staged" {
        claim.chunks_done
    } else {
        0
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Handles one delivery within one invocation's budget
    /// (`CONSUME_SUBREQUESTS_MAX`, `CONSUME_WALL_SECONDS_MAX`): every port
    /// call is counted, and the job checkpoints before a step that would
    /// not fit.
    pub async fn consume(&self, msg: &JobMessage) -> ConsumeOutcome {
        self.consume_after(msg, 0).await
    }

    /// [`Self::consume`] in an invocation that already made `prior_index_calls`
    /// index subrequests (the entry point's index check), counted against
    /// the budget.
    pub async fn consume_after(&self, msg: &JobMessage, prior_index_calls: u64) -> ConsumeOutcome {
        let usage = Usage::default();
        usage.index.set(prior_index_calls);
        let budget = Budget {
            subrequests_max: self.cfg.consume_subrequests_max,
            started_ms: self.clock.now_ms(),
            wall_ms: i64::from(self.cfg.consume_wall_seconds_max) * 1000,
        };
        let outcome = match self
            .metered(&usage)
            .consume_inner(msg, &budget, &usage)
            .await
        {
            Ok(o) => o,
            // D1 failed before the job could record anything: nothing changed,
            // retry the message (its lease, if any, protects the job).
            Err(e) => {
                log_event(
                    "consume_ledger_unavailable",
                    json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code }),
                );
                ConsumeOutcome::Retry {
                    delay_seconds: self.cfg.retry_base_delay_seconds,
                }
            }
        };
        log_outcome(msg, outcome, &usage);
        outcome
    }

    /// Steps 0–1, then the claimed job's steps, then how the delivery ends:
    /// committed, checkpointed (4a–4b) or failed.
    async fn consume_inner(
        &self,
        msg: &JobMessage,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        // 0. load: a job already ended, or a pointer that is not its own, ends here.
        let job = match self.load(msg).await? {
            ControlFlow::Continue(job) => job,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        // 1. claim, unless the version is stale or another delivery holds it.
        let claim = match self.claim(msg, &job).await? {
            ControlFlow::Continue(claim) => claim,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        // How far this attempt got: kept by a retry, too.
        let done = Cell::new(resumed_from(&claim));
        match self.run_claimed(&job, &claim, &done, budget, usage).await {
            Ok(Progress::Committed) => Ok(ConsumeOutcome::Ack {
                reason: "committed",
            }),
            Ok(Progress::Checkpoint) => self.checkpoint(msg, done.get(), usage).await,
            Err(e) => self.fail_attempt(&job, &claim, done.get(), e, usage).await,
        }
    }

    /// Steps 2–6 for a job this delivery holds, as far as the budget goes.
    /// `done` counts the chunks whose vectors are written, in chunk order.
    async fn run_claimed(
        &self,
        job: &ConsumeRow,
        claim: &ClaimRow,
        done: &Cell<u32>,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<Progress, PortError> {
        let doc_id = DocKey::from_stored(&job.doc_id)
            .ok_or(PortError::new(FailureBucket::InputInvalid, "doc_id"))?;
        // An index or embedder known to refuse every call (its start-up
        // check failed) ends the attempt before anything is spent on it.
        if let Some(e) = self.index.refusal().or(self.embedder.refusal()) {
            return Err(e);
        }
        if job.kind == JobKind::Index {
            // 2. stage (unless a previous attempt did).
            let Some((chunk_count, models)) =
                self.staged(job, claim, &doc_id, budget, usage).await?
            else {
                return Ok(Progress::Checkpoint);
            };
            // 3 + 4. embed (or reuse) and upsert, page by page, while the
            // budget lasts, each generation with its own model.
            if !self
                .write_pages(job, chunk_count, models, done, budget, usage)
                .await?
            {
                return Ok(Progress::Checkpoint);
            }
        }
        if self.bugs.has(Bug::DeleteBeforeReplace) {
            let ids = self
                .store
                .bug_replaced_vector_ids(&job.doc_id, job.version)
                .await?;
            if !ids.is_empty() {
                self.index.delete_by_ids(&ids).await?;
            }
        }
        // 5. replace (the reserve still covers a failure of it).
        if !budget.allows(usage, self.clock.now_ms(), 1, CONSUME_RESERVE) {
            return Ok(Progress::Checkpoint);
        }
        let at_commit = usage.snapshot(1, 0);
        if job.build_generation.is_some() {
            // A build ends the job only: the version is live already.
            self.build_finish(job, &at_commit).await?;
            self.record_after_commit(job, &at_commit, budget, usage, false)
                .await;
            return Ok(Progress::Committed);
        }
        self.replace(job, &at_commit, usage).await?;
        // 6. cleanup: best effort, in the budget left.
        self.cleanup_replaced(job, &at_commit, budget, usage).await;
        Ok(Progress::Committed)
    }
}

/// The delivery's one summary line: its outcome and the subrequests it made.
fn log_outcome(msg: &JobMessage, outcome: ConsumeOutcome, usage: &Usage) {
    let used = json!({ "d1": usage.d1.get(), "embed": usage.embed.get(), "index": usage.index.get(), "queue": usage.queue.get() });
    match outcome {
        ConsumeOutcome::Ack { reason } => log_event(
            "consume_ack",
            json!({ "job_id": msg.job_id, "reason": reason, "subrequests": used }),
        ),
        ConsumeOutcome::DeadLetter { reason } => log_event(
            "consume_dead_letter",
            json!({ "job_id": msg.job_id, "reason": reason, "subrequests": used }),
        ),
        ConsumeOutcome::Retry { delay_seconds } => log_event(
            "consume_retry",
            json!({ "job_id": msg.job_id, "delay_seconds": delay_seconds, "subrequests": used }),
        ),
    }
}
