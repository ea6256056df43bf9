//! The queue consumer: one message, one job, as far as one invocation's
//! budget goes (`budget.rs`); a job too large for one invocation
//! checkpoints in D1 and continues in a new message (4a, 4b).
//!
//! Side effects, in order, and what a crash right after each leaves behind
//! (the crash tests and `docs/ARCHITECTURE.md` enumerate exactly these):
//!
//! 1. **claim** (D1): job `running`, attempts + 1, lease set. Crash: the job
//!    stays `running` until its lease expires; the redelivered message (or
//!    cron, for a lost one) claims it again.
//! 2. **stage** (D1 batch): chunk rows with their vector IDs, chunk count,
//!    step `staged`. Crash: D1 knows every vector ID this version may write;
//!    none is written yet. A later claim sees `staged` and goes on to 3.
//! 3. **embed** (embedder, no lasting effect), a page of staged rows at a
//!    time (`CONSUME_PAGE`). Chunks whose text the live version also holds,
//!    indexed with the same configuration (`versions.index_config`), are
//!    not embedded again: the live vectors' values are read (index
//!    `get_by_ids`) and written in 4 under this version's own IDs. A vector
//!    the index does not return is embedded instead. Reads only.
//! 4. **upsert** (index, in batches): new vectors under IDs no other version
//!    uses. Crash: the index holds vectors of a version that is not live;
//!    search filters them out against D1; a rerun overwrites them with the
//!    same values; if the version is abandoned, cron sweeps them.
//! 4a. **checkpoint** (D1 batch), when the next step would not fit the
//!    budget: `chunks_done`, this invocation's usage, job `queued`. Crash:
//!    the next claim continues after the pages already written.
//! 4b. **continuation** (queue send of the same pointer), then ack. Crash
//!    or failed send: the job is `queued` without a message; cron
//!    re-enqueues it after `JOB_STALL_SECONDS`.
//! 5. **replace** (D1 batch, atomic): intents for the old live version's
//!    vectors, compare-and-set of `live_version`, intents for our own vectors
//!    if we lost, job `succeeded`/`superseded`. Crash: the new version is
//!    live and served; the old vectors are no longer served and are recorded
//!    as intents.
//! 6. **cleanup** (index deletes, then D1): old vectors deleted in bounded
//!    batches, then their intents and chunk rows removed. Crash: intents
//!    remain and cron drains them; deleting twice is harmless.
//! 7. **ack**: only after 5 committed. A crash before it redelivers the
//!    message, which finds the job `succeeded` and acks.
//!
//! The order upsert → replace → cleanup is the design's first invariant:
//! never break the derived index before the source of truth.

use super::budget::{Budget, Metered, Usage, UsageSnapshot};
use super::{log_event, Pipeline};
use crate::bugs::Bug;
use crate::config::CONSUME_RESERVE;
use crate::core::chunk::ContentType;
use crate::core::failure::{FailureBucket, RetryDecision};
use crate::core::ids::{sha256_hex, vector_id_in, DocId};
use crate::ports::{
    Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex, VectorMetadata,
    VectorRecord,
};
use crate::store::{ClaimRow, ConsumeRow, PageRow, StagedChunk, Staging, Store};
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::BTreeMap;

/// A job is stale when its version is no longer the latest, or is not newer
/// than the live one: it must never write again.
fn is_stale(job: &ConsumeRow) -> bool {
    if job.build_generation.is_some() {
        // A build writes the live version into a generation still written.
        let written = matches!(
            job.build_generation_state.as_deref(),
            Some("building" | "active" | "retained")
        );
        return job.live_version != Some(job.version) || !written;
    }
    job.version < job.latest_version || job.live_version.is_some_and(|l| l >= job.version)
}

/// Whole seconds from `now_ms` until `at_ms` (rounded up), within the
/// queues' delays: 1 s to 24 h.
fn seconds_until(at_ms: i64, now_ms: i64) -> u32 {
    u32::try_from(((at_ms - now_ms).max(0) + 999) / 1000)
        .unwrap_or(u32::MAX)
        .clamp(1, 86_400)
}

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
        let metered = Pipeline {
            cfg: self.cfg.clone(),
            store: Store::new(
                Metered {
                    inner: &self.store.db,
                    usage: &usage,
                },
                self.store.json_param_bytes_max,
            ),
            index: Metered {
                inner: &self.index,
                usage: &usage,
            },
            embedder: Metered {
                inner: &self.embedder,
                usage: &usage,
            },
            queue: Metered {
                inner: &self.queue,
                usage: &usage,
            },
            clock: &self.clock,
            bugs: self.bugs,
        };
        let outcome = match metered.consume_inner(msg, &budget, &usage).await {
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
        outcome
    }

    /// Ends the job of a delivery whose consume panicked or threw (the
    /// Worker's entry point saw it and calls this on a fresh instance): a
    /// bug, not a transient failure, so the job ends `failed` with
    /// `internal_error` and is dead-lettered at once instead of waiting out
    /// its lease and failing the same way again. Only a `running` job is
    /// ended (the crashed delivery claimed it); a job it never claimed is
    /// left to the next delivery, which ends it the same way if the crash
    /// repeats.
    pub async fn end_crashed(&self, msg: &JobMessage) -> ConsumeOutcome {
        let outcome = match self.store.consume_load(&msg.job_id).await {
            Ok(Some(job)) if job.doc_id == msg.doc_id && job.version == msg.version => {
                match job.state.as_str() {
                    "succeeded" | "superseded" => ConsumeOutcome::Ack {
                        reason: "already_final",
                    },
                    "failed" | "dead" => ConsumeOutcome::DeadLetter {
                        reason: "already_failed",
                    },
                    "running" => {
                        let usage = UsageSnapshot {
                            d1: 2,
                            queue: 1,
                            peak: 3,
                            ..UsageSnapshot::default()
                        };
                        match self
                            .store
                            .job_end_failed(
                                &job.job_id,
                                &job.doc_id,
                                job.version,
                                FailureBucket::InternalError,
                                "failed",
                                self.clock.now_ms(),
                                &usage,
                                job.build_generation,
                            )
                            .await
                        {
                            Ok(()) => ConsumeOutcome::DeadLetter { reason: "crashed" },
                            Err(_) => ConsumeOutcome::Retry {
                                delay_seconds: self.cfg.retry_base_delay_seconds,
                            },
                        }
                    }
                    _ => ConsumeOutcome::Retry {
                        delay_seconds: self.cfg.claim_busy_retry_seconds,
                    },
                }
            }
            Ok(_) => ConsumeOutcome::Ack {
                reason: "unknown_job",
            },
            Err(_) => ConsumeOutcome::Retry {
                delay_seconds: self.cfg.retry_base_delay_seconds,
            },
        };
        log_event(
            "consume_crashed",
            json!({ "job_id": msg.job_id, "bucket": FailureBucket::InternalError.as_str(),
                    "outcome": match outcome { ConsumeOutcome::Ack { .. } => "ack", ConsumeOutcome::Retry { .. } => "retry", ConsumeOutcome::DeadLetter { .. } => "dead_letter" } }),
        );
        outcome
    }

    async fn consume_inner(
        &self,
        msg: &JobMessage,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        let Some(job) = self.store.consume_load(&msg.job_id).await? else {
            return Ok(ConsumeOutcome::Ack {
                reason: "unknown_job",
            });
        };
        if job.doc_id != msg.doc_id || job.version != msg.version {
            return Ok(ConsumeOutcome::Ack {
                reason: "pointer_mismatch",
            });
        }
        match job.state.as_str() {
            "succeeded" | "superseded" => {
                return Ok(ConsumeOutcome::Ack {
                    reason: "already_final",
                })
            }
            "failed" | "dead" => {
                return Ok(ConsumeOutcome::DeadLetter {
                    reason: "already_failed",
                })
            }
            _ => {}
        }
        let now = self.clock.now_ms();
        // Stale work is rejected before anything is written.
        if is_stale(&job) {
            return self.supersede(&job, now).await;
        }
        let lease_until = now + i64::from(self.cfg.job_lease_seconds) * 1000;
        let Some(claim) = self.store.claim(&job.job_id, now, lease_until).await? else {
            // The claim also refuses a version that became stale since the
            // load; tell the two cases apart.
            return match self.store.consume_load(&msg.job_id).await? {
                Some(again) if is_stale(&again) => self.supersede(&again, now).await,
                // Another delivery holds the lease (or just finished): look
                // again when the lease ends. A holder that died (a crash)
                // keeps it that long anyway; retrying sooner would only use
                // up the queue's max_retries and send a live job to the DLQ.
                // A duplicate of a job waiting for its retry waits for the
                // retry time.
                Some(again)
                    if again.state == "up_for_retry"
                        && again.next_attempt_at.is_some_and(|at| at > now) =>
                {
                    Ok(ConsumeOutcome::Retry {
                        delay_seconds: seconds_until(again.next_attempt_at.unwrap_or(now), now),
                    })
                }
                again => Ok(ConsumeOutcome::Retry {
                    delay_seconds: self.busy_retry_delay(again.and_then(|j| j.lease_until), now),
                }),
            };
        };
        // How far this attempt got: kept by a retry, too.
        let done = Cell::new(if claim.step == "staged" {
            claim.chunks_done
        } else {
            0
        });
        match self.run_claimed(&job, &claim, &done, budget, usage).await {
            Ok(Progress::Committed) => Ok(ConsumeOutcome::Ack {
                reason: "committed",
            }),
            Ok(Progress::Checkpoint) => self.checkpoint(msg, done.get(), usage).await,
            Err(e) => {
                // An attempt that wrote pages made progress: its window starts now.
                let before = if claim.step == "staged" {
                    claim.chunks_done
                } else {
                    0
                };
                let progressed = done.get() > before;
                let failing_since = if progressed {
                    None
                } else {
                    crate::core::failure::failing_run_start(
                        claim.failing_since,
                        claim.last_failed_at,
                        self.clock.now_ms(),
                        self.cfg
                            .retry_max_delay_seconds
                            .saturating_add(self.cfg.job_lease_seconds),
                    )
                };
                self.fail_attempt(&job, claim.attempts, failing_since, done.get(), e, usage)
                    .await
            }
        }
    }

    /// Delay before a delivery that found the job leased looks again: until
    /// the lease ends (plus a second), at least `CLAIM_BUSY_RETRY_SECONDS`,
    /// at most the queues' 24 h.
    fn busy_retry_delay(&self, lease_until: Option<i64>, now: i64) -> u32 {
        let left_seconds = lease_until.map_or(0, |l| ((l - now).max(0) + 999) / 1000 + 1);
        u32::try_from(left_seconds)
            .unwrap_or(u32::MAX)
            .clamp(self.cfg.claim_busy_retry_seconds, 86_400)
    }

    async fn supersede(&self, job: &ConsumeRow, now: i64) -> Result<ConsumeOutcome, PortError> {
        if self.store.supersede(&job.job_id, now).await? {
            Ok(ConsumeOutcome::Ack {
                reason: "superseded",
            })
        } else {
            // A live delivery holds it and will lose the compare-and-set, or
            // it already ended: either way, look once more later.
            Ok(ConsumeOutcome::Retry {
                delay_seconds: self.cfg.claim_busy_retry_seconds,
            })
        }
    }

    /// Hands the job to a later invocation: records the checkpoint and this
    /// invocation's usage, then sends the continuation message. If the send
    /// fails (or the invocation dies before it), the job is `queued` with no
    /// message, and cron re-enqueues it after `JOB_STALL_SECONDS`.
    async fn checkpoint(
        &self,
        msg: &JobMessage,
        chunks_done: u32,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        let now = self.clock.now_ms();
        self.store
            .checkpoint(&msg.job_id, now, chunks_done, &usage.snapshot(1, 1))
            .await?;
        log_event(
            "job_checkpoint",
            json!({ "job_id": msg.job_id, "chunks_done": chunks_done }),
        );
        if let Err(e) = self.queue.send_batch(std::slice::from_ref(msg)).await {
            log_event(
                "continuation_send_failed",
                json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code }),
            );
        }
        Ok(ConsumeOutcome::Ack {
            reason: "checkpointed",
        })
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
        let doc_id = DocId::parse(&job.doc_id)
            .map_err(|_| PortError::new(FailureBucket::InputInvalid, "doc_id"))?;
        // An index or embedder known to refuse every call (its start-up
        // check failed) ends the attempt before anything is spent on it.
        if let Some(e) = self.index.refusal().or(self.embedder.refusal()) {
            return Err(e);
        }
        if job.kind == "index" {
            let chunk_count = if claim.step == "staged" {
                claim.rows_total.ok_or(PortError::new(
                    FailureBucket::Internal,
                    "rows_total_missing",
                ))?
            } else {
                // 2. stage: the generations to write, the text, one staging batch.
                if !budget.allows(usage, self.clock.now_ms(), 3, CONSUME_RESERVE) {
                    return Ok(Progress::Checkpoint);
                }
                self.stage(job, &doc_id).await?
            };
            let base_metadata = self.vector_metadata(job)?;
            // 3 + 4. embed (or reuse) and upsert, page by page, while the budget lasts.
            while done.get() < chunk_count {
                if !budget.allows(usage, self.clock.now_ms(), 3, CONSUME_RESERVE) {
                    return Ok(Progress::Checkpoint);
                }
                match self
                    .embed_and_upsert_page(job, done.get(), &base_metadata, budget, usage)
                    .await?
                {
                    0 => return Ok(Progress::Checkpoint),
                    n => done.set(done.get() + n),
                }
            }
        }
        if self.bugs.has(Bug::DeleteBeforeReplace) {
            self.store
                .bug_intents_for_replaced(&job.doc_id, job.version, self.clock.now_ms())
                .await?;
            self.cleanup_doc(&job.doc_id, usize::MAX).await;
        }
        // 5. replace (the reserve still covers a failure of it).
        if !budget.allows(usage, self.clock.now_ms(), 1, CONSUME_RESERVE) {
            return Ok(Progress::Checkpoint);
        }
        let at_commit = usage.snapshot(1, 0);
        if job.build_generation.is_some() {
            // A build ends the job only: the version is live already.
            self.store
                .build_finish(
                    &job.job_id,
                    &job.doc_id,
                    job.version,
                    self.clock.now_ms(),
                    &at_commit,
                )
                .await?;
            return Ok(Progress::Committed);
        }
        let live = self
            .store
            .commit(
                &job.job_id,
                &job.doc_id,
                job.version,
                self.clock.now_ms(),
                &at_commit,
                self.bugs,
            )
            .await?;
        log_event(
            "job_committed",
            json!({ "job_id": job.job_id, "live": live, "embedded": usage.embedded.get(), "reused": usage.reused.get() }),
        );
        // 6. cleanup: best effort, in the budget left (each batch: read the
        // intents, delete, record; then one statement records the usage).
        // A first version replaced nothing: skip the lookup.
        let batches = if job.live_version.is_some() {
            budget.left(usage, self.clock.now_ms(), 1) / 3
        } else {
            0
        };
        if self.cleanup_doc(&job.doc_id, batches as usize).await > 0 {
            let _ = self
                .store
                .add_usage(&job.job_id, &usage.snapshot(1, 0).minus(&at_commit))
                .await;
        }
        Ok(Progress::Committed)
    }

    /// Step 2: chunks the version's text for each generation it is written
    /// in (a build job: its own; an index job: the active one, one being
    /// built, one retained, each with its own chunker, if this Worker's
    /// embedder made it) and stages the chunk rows with their vector IDs,
    /// atomically with the step `staged`. Returns the number of rows.
    async fn stage(&self, job: &ConsumeRow, doc_id: &DocId) -> Result<u32, PortError> {
        let mut generations = self.store.target_generations().await?;
        // Generation 1 with no configuration yet (a ledger from before
        // generations, or a new one): it adopts what its vectors were made
        // with, else this Worker's; this staging already chunks by it.
        let ours = self.cfg.index_config();
        let adopt = match generations
            .iter()
            .any(|g| g.generation == 1 && g.index_config.is_empty())
        {
            true => Some(
                self.store
                    .adoptable_config()
                    .await?
                    .unwrap_or_else(|| ours.clone()),
            ),
            false => None,
        };
        if let Some(config) = &adopt {
            for g in generations
                .iter_mut()
                .filter(|g| g.generation == 1 && g.index_config.is_empty())
            {
                g.index_config = config.clone();
            }
        }
        let targets: Vec<_> = generations
            .iter()
            .filter(|g| job.build_generation.is_none_or(|b| b == g.generation))
            .filter(|g| self.cfg.embeds_like(&g.index_config))
            .collect();
        if targets.is_empty() {
            // The configured embedder made none of the generations in use:
            // a deploy (or a backfill to a new generation) fixes it.
            return Err(PortError::new(
                FailureBucket::IndexMisconfigured,
                "generation_embedder_mismatch",
            ));
        }
        let text = self
            .store
            .load_text(&job.doc_id, job.version, job.part_count)
            .await?;
        #[cfg(feature = "panic-probe")]
        if let Some(at) = text.find("PANIC-PROBE") {
            // Test builds only: a panic whose message quotes the document,
            // to show that no log line carries it (tests/e2e/panic.test.mjs).
            let quoted: String = text[at..].chars().take(200).collect();
            panic!("panic probe in {}: {quoted}", job.doc_id);
        }
        let content_type = ContentType::parse(&job.content_type)
            .ok_or(PortError::new(FailureBucket::InputInvalid, "content_type"))?;
        // Per target: its generation, chunks, IDs and hashes.
        let mut per_target = Vec::with_capacity(targets.len());
        for g in &targets {
            let chunker = self
                .cfg
                .chunking_of(&g.index_config)
                .ok_or(PortError::new(FailureBucket::Internal, "generation_config"))?;
            let chunks = chunker.chunk(&text, content_type);
            let ids: Vec<String> = chunks
                .iter()
                .map(|c| vector_id_in(doc_id, job.version, c.index, g.generation))
                .collect();
            if ids.iter().any(|id| id.len() > self.cfg.vector_id_bytes_max) {
                return Err(PortError::new(
                    FailureBucket::InputInvalid,
                    "vector_id_too_long",
                ));
            }
            let hashes: Vec<String> = chunks
                .iter()
                .map(|c| sha256_hex(c.text.as_bytes()))
                .collect();
            per_target.push((g.generation, chunks, ids, hashes));
        }
        let staged: Vec<StagedChunk> = per_target
            .iter()
            .flat_map(|(g, chunks, ids, hashes)| {
                chunks
                    .iter()
                    .zip(ids.iter().zip(hashes))
                    .map(move |(c, (id, h))| StagedChunk {
                        g: *g,
                        i: c.index,
                        id,
                        s: c.start,
                        e: c.end,
                        h,
                        t: c.text,
                    })
            })
            .collect();
        if self.bugs.has(Bug::UpsertBeforeStage) {
            // The bug: vectors written before D1 knows their IDs.
            let (_, chunks, ids, _) = &per_target[0];
            let page = &chunks[..chunks.len().min(self.cfg.upsert_batch_size)];
            let texts: Vec<String> = page.iter().map(|c| c.text.to_string()).collect();
            let metadata = self.vector_metadata(job)?;
            let records: Vec<VectorRecord> = self
                .embedder
                .embed(&texts)
                .await?
                .into_iter()
                .zip(ids)
                .map(|(values, id)| VectorRecord {
                    id: id.clone(),
                    values,
                    metadata: metadata.clone(),
                })
                .collect();
            self.index.upsert(&records).await?;
        }
        // The version's own chunk count and configuration: those of the
        // generation search serves (the first target if this Worker does not
        // write the active one).
        let recorded = targets
            .iter()
            .position(|g| g.state == "active")
            .unwrap_or(0);
        let (recorded_chunks, recorded_config) =
            match (per_target.get(recorded), targets.get(recorded)) {
                (Some((_, chunks, _, _)), Some(g)) => (chunks.len(), g.index_config.clone()),
                _ => return Err(PortError::new(FailureBucket::Internal, "no_target")),
            };
        let stage = Staging {
            rows: &staged,
            version_chunks: job
                .build_generation
                .is_none()
                .then_some((recorded_chunks, recorded_config.as_str())),
            adopt_config: adopt.as_deref(),
            build_generation: job.build_generation,
        };
        self.store
            .stage_chunks(
                &job.job_id,
                &job.doc_id,
                job.version,
                &stage,
                self.clock.now_ms(),
            )
            .await
    }

    /// Steps 3 and 4 for the chunks from `from` on: reads a page of staged
    /// rows, keeps the prefix whose reads, embeddings and upsert fit in the
    /// budget, and upserts it. Returns how many chunks now have vectors (0:
    /// nothing fit; checkpoint).
    async fn embed_and_upsert_page(
        &self,
        job: &ConsumeRow,
        from: u32,
        base_metadata: &VectorMetadata,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<u32, PortError> {
        let mut rows = self
            .store
            .consume_page(
                &job.doc_id,
                job.version,
                from,
                self.cfg.upsert_batch_size,
                job.build_generation,
            )
            .await?;
        if rows.is_empty() {
            // The version's chunk count promises rows the ledger does not hold.
            return Err(PortError::new(FailureBucket::Internal, "chunks_missing"));
        }
        // Keep the longest prefix whose get and embed calls fit, with the upsert.
        let left = budget.left(usage, self.clock.now_ms(), CONSUME_RESERVE + 1);
        let (get_max, embed_max) = (
            self.get_batch_size() as u64,
            self.cfg.embed_batch_size as u64,
        );
        let (mut reuse, mut fresh, mut keep) = (0u64, 0u64, 0usize);
        for r in &rows {
            let (r2, f2) = if r.reuse_id.is_some() {
                (reuse + 1, fresh)
            } else {
                (reuse, fresh + 1)
            };
            if r2.div_ceil(get_max) + f2.div_ceil(embed_max) > left {
                break;
            }
            (reuse, fresh, keep) = (r2, f2, keep + 1);
        }
        rows.truncate(keep);
        if rows.is_empty() {
            return Ok(0);
        }
        let mut values = self.reused_values(&rows).await;
        let copied: Vec<bool> = values.iter().map(Option::is_some).collect();
        // Embed the rest in order; a reuse that failed makes more to embed
        // than planned, so each call asks the budget again, and the page is
        // cut before the first chunk left without a vector.
        let misses: Vec<usize> = (0..rows.len()).filter(|&k| values[k].is_none()).collect();
        for batch in misses.chunks(self.cfg.embed_batch_size) {
            if !budget.allows(usage, self.clock.now_ms(), 2, CONSUME_RESERVE) {
                break;
            }
            let texts: Vec<String> = batch.iter().map(|&k| rows[k].text.clone()).collect();
            let vectors = self.embedder.embed(&texts).await?;
            if vectors.len() != texts.len()
                || vectors
                    .iter()
                    .any(|v| v.len() != self.cfg.embedding_dimensions)
            {
                return Err(PortError::new(FailureBucket::EmbedRejected, "embed_shape"));
            }
            usage
                .embedded
                .set(usage.embedded.get() + texts.len() as u64);
            for (&k, v) in batch.iter().zip(vectors) {
                values[k] = Some(v);
            }
        }
        let cut = values
            .iter()
            .position(Option::is_none)
            .unwrap_or(values.len());
        if cut == 0 {
            return Ok(0);
        }
        let reused_here = copied[..cut].iter().filter(|&&c| c).count() as u64;
        let records: Vec<VectorRecord> = rows[..cut]
            .iter()
            .zip(values)
            .map(|(r, v)| {
                let mut metadata = base_metadata.clone();
                metadata.insert("chunk".into(), json!(r.chunk_index));
                metadata.insert("generation".into(), json!(r.generation));
                VectorRecord {
                    id: r.vector_id.clone(),
                    values: v.expect("the prefix has vectors"),
                    metadata,
                }
            })
            .collect();
        self.index.upsert(&records).await?;
        usage.reused.set(usage.reused.get() + reused_here);
        Ok(cut as u32)
    }

    /// The values of the live vectors that the chunks in `rows` can reuse
    /// (`reuse_id`), fetched from the index in batches the index accepts;
    /// `None` for a chunk to embed. A vector the index does not return (not
    /// visible yet, or gone), returns malformed, or a failed fetch, only
    /// means embedding that chunk: reuse is an optimization, never a reason
    /// for the job to fail.
    async fn reused_values(&self, rows: &[PageRow]) -> Vec<Option<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; rows.len()];
        // Live vector ID → positions in this page (a text may repeat).
        let mut wanted: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (k, r) in rows.iter().enumerate() {
            if let Some(id) = &r.reuse_id {
                wanted.entry(id.as_str()).or_default().push(k);
            }
        }
        let wanted_ids: Vec<String> = wanted.keys().map(|id| id.to_string()).collect();
        for batch in wanted_ids.chunks(self.get_batch_size()) {
            let found = match self.index.get_by_ids(batch).await {
                Ok(found) => found,
                Err(e) => {
                    log_event(
                        "reuse_get_failed",
                        json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": batch.len() }),
                    );
                    break;
                }
            };
            for rec in found {
                let ok = rec.values.len() == self.cfg.embedding_dimensions
                    && rec.values.iter().all(|x| x.is_finite());
                if let (true, Some(positions)) = (ok, wanted.get(rec.id.as_str())) {
                    for &k in positions {
                        out[k] = Some(rec.values.clone());
                    }
                }
            }
        }
        out
    }

    /// IDs per `get_by_ids` call: the limit the index adapters enforce
    /// (`src/wasm/mod.rs` sets their `get_batch_max` to `DELETE_BATCH_SIZE`;
    /// Vectorize documents none, 100 is safe).
    fn get_batch_size(&self) -> usize {
        self.cfg.delete_batch_size.max(1)
    }

    /// The metadata every vector of this version carries: `doc_id`,
    /// `version` and the document's own (scalar) metadata.
    fn vector_metadata(&self, job: &ConsumeRow) -> Result<VectorMetadata, PortError> {
        let user: serde_json::Map<String, Value> = serde_json::from_str(&job.metadata)
            .map_err(|_| PortError::new(FailureBucket::InputInvalid, "metadata"))?;
        let mut m: VectorMetadata = user.into_iter().collect();
        m.insert("doc_id".into(), json!(job.doc_id));
        m.insert("version".into(), json!(job.version));
        Ok(m)
    }

    /// Deletes this document's due cleanup intents, in at most `batches`
    /// bounded batches. Returns the batches attempted.
    pub(super) async fn cleanup_doc(&self, doc_id: &str, batches: usize) -> usize {
        let mut budget = self.cfg.cron_cleanup_intents_max;
        let mut attempted = 0;
        while budget > 0 && attempted < batches {
            let now = self.clock.now_ms();
            let limit = self.cfg.delete_batch_size.min(budget);
            attempted += 1;
            let ids = match self.store.intents_due_for_doc(doc_id, now, limit).await {
                Ok(ids) if !ids.is_empty() => ids,
                _ => return attempted,
            };
            budget = budget.saturating_sub(ids.len());
            if !self.delete_vectors(&ids).await {
                return attempted;
            }
        }
        attempted
    }

    /// Deletes `ids` from the index, then removes their intents; on a
    /// failure, backs the intents off. Returns whether it succeeded.
    pub(super) async fn delete_vectors(&self, ids: &[String]) -> bool {
        let now = self.clock.now_ms();
        if self.bugs.has(Bug::IntentRemovedBeforeDelete) {
            if self.store.intents_done(ids).await.is_err() {
                return false;
            }
        }
        match self.index.delete_by_ids(ids).await {
            Ok(()) => match self.store.intents_done(ids).await {
                Ok(()) => true,
                Err(e) => {
                    log_event(
                        "cleanup_ledger_failed",
                        json!({ "bucket": e.bucket.as_str(), "code": e.code }),
                    );
                    false
                }
            },
            Err(e) => {
                log_event(
                    "cleanup_delete_failed",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": ids.len() }),
                );
                let not_before = now + i64::from(self.cfg.retry_base_delay_seconds) * 1000;
                let _ = self.store.intents_back_off(ids, not_before).await;
                false
            }
        }
    }

    async fn fail_attempt(
        &self,
        job: &ConsumeRow,
        attempt: u32,
        failing_since: Option<i64>,
        chunks_done: u32,
        e: PortError,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        let now = self.clock.now_ms();
        let failing_for_seconds = failing_since.map_or(0, |since| (now - since).max(0) / 1000);
        let decision =
            self.retry_policy()
                .decide(e.bucket, &job.job_id, attempt, failing_for_seconds);
        log_event(
            "job_attempt_failed",
            json!({ "job_id": job.job_id, "attempt": attempt, "bucket": e.bucket.as_str(), "code": e.code,
                    "decision": match decision { RetryDecision::RetryAfter { .. } => "retry", RetryDecision::Fail => "failed", RetryDecision::GiveUp => "dead" } }),
        );
        match decision {
            RetryDecision::RetryAfter { delay_seconds } => {
                let next_at = now + i64::from(delay_seconds) * 1000;
                self.store
                    .job_up_for_retry(
                        &job.job_id,
                        e.bucket,
                        now,
                        next_at,
                        chunks_done,
                        failing_since.unwrap_or(now),
                        &usage.snapshot(1, 0),
                    )
                    .await?;
                Ok(ConsumeOutcome::Retry { delay_seconds })
            }
            RetryDecision::Fail => {
                let u = usage.snapshot(2, 1);
                self.store
                    .job_end_failed(
                        &job.job_id,
                        &job.doc_id,
                        job.version,
                        e.bucket,
                        "failed",
                        now,
                        &u,
                        job.build_generation,
                    )
                    .await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "failed" })
            }
            RetryDecision::GiveUp => {
                let u = usage.snapshot(2, 1);
                self.store
                    .job_end_failed(
                        &job.job_id,
                        &job.doc_id,
                        job.version,
                        e.bucket,
                        "dead",
                        now,
                        &u,
                        job.build_generation,
                    )
                    .await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "dead" })
            }
        }
    }
}
