//! How an attempt that failed ends (retry with backoff, or the job `failed`
//! or `dead` and dead-lettered), and a delivery whose consume crashed.

use super::{resumed_from, ConsumeOutcome};
use crate::core::failure::{failing_run_start, FailureBucket, RetryDecision};
use crate::core::state::JobState;
use crate::pipeline::budget::{Usage, UsageSnapshot};
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{AttemptEnd, ClaimRow, ConsumeRow};
use serde_json::json;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Ends an attempt that failed with `e` after writing `chunks_done`
    /// chunks: the retry policy decides between a retry (the checkpoint is
    /// kept) and the job's end (a dead letter).
    pub(super) async fn fail_attempt(
        &self,
        job: &ConsumeRow,
        claim: &ClaimRow,
        chunks_done: u32,
        e: PortError,
        usage: &Usage,
    ) -> Result<ConsumeOutcome, PortError> {
        // An attempt that wrote pages made progress: its window starts now.
        let failing_since = if chunks_done > resumed_from(claim) {
            None
        } else {
            failing_run_start(
                claim.failing_since,
                claim.last_failed_at,
                self.clock.now_ms(),
                self.cfg
                    .retry_max_delay_seconds
                    .saturating_add(self.cfg.job_lease_seconds),
            )
        };
        let now = self.clock.now_ms();
        let failing_for_seconds = failing_since.map_or(0, |since| (now - since).max(0) / 1000);
        let decision =
            self.retry_policy()
                .decide(e.bucket, &job.job_id, claim.attempts, failing_for_seconds);
        log_event(
            "job_attempt_failed",
            json!({ "job_id": job.job_id, "attempt": claim.attempts, "bucket": e.bucket.as_str(), "code": e.code,
                    "decision": match decision { RetryDecision::RetryAfter { .. } => "retry", RetryDecision::Fail => "failed", RetryDecision::GiveUp => "dead" } }),
        );
        match decision {
            RetryDecision::RetryAfter { delay_seconds } => {
                let next_at = now + i64::from(delay_seconds) * 1000;
                let end = AttemptEnd {
                    bucket: e.bucket,
                    now,
                    usage: &usage.snapshot(1, 0),
                };
                self.store
                    .job_up_for_retry(
                        &job.job_id,
                        &end,
                        next_at,
                        chunks_done,
                        failing_since.unwrap_or(now),
                    )
                    .await?;
                Ok(ConsumeOutcome::Retry { delay_seconds })
            }
            RetryDecision::Fail => {
                self.end_failed(job, e.bucket, JobState::Failed, now, &usage.snapshot(2, 1))
                    .await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "failed" })
            }
            RetryDecision::GiveUp => {
                self.end_failed(job, e.bucket, JobState::Dead, now, &usage.snapshot(2, 1))
                    .await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "dead" })
            }
        }
    }

    /// Ends the job `state` (`failed` or `dead`) with `bucket`, recording
    /// `usage` (which counts the dead letter that follows), if this
    /// delivery holds it; returns whether it ended it.
    async fn end_failed(
        &self,
        job: &ConsumeRow,
        bucket: FailureBucket,
        state: JobState,
        now: i64,
        usage: &UsageSnapshot,
    ) -> Result<bool, PortError> {
        let end = AttemptEnd { bucket, now, usage };
        self.store
            .job_end_failed(job, state, &end, self.delivery.as_deref())
            .await
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
                self.end_crashed_job(&job).await
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

    /// [`Self::end_crashed`] for the message's own job, by its state.
    async fn end_crashed_job(&self, job: &ConsumeRow) -> ConsumeOutcome {
        match job.state {
            JobState::Succeeded | JobState::Superseded => ConsumeOutcome::Ack {
                reason: "already_final",
            },
            JobState::Failed | JobState::Dead => ConsumeOutcome::DeadLetter {
                reason: "already_failed",
            },
            // Only the delivery that holds the claim may end it (its token,
            // from the entry point): a panic before the claim leaves a job
            // another delivery of the message runs to that delivery.
            JobState::Running if self.delivery.is_none() => ConsumeOutcome::Retry {
                delay_seconds: self.cfg.claim_busy_retry_seconds,
            },
            JobState::Running => {
                // This invocation's usage: the load, this end, and the dead
                // letter that follows it.
                let usage = UsageSnapshot {
                    d1: 2,
                    queue: 1,
                    peak: 3,
                    ..UsageSnapshot::default()
                };
                let now = self.clock.now_ms();
                match self
                    .end_failed(
                        job,
                        FailureBucket::InternalError,
                        JobState::Failed,
                        now,
                        &usage,
                    )
                    .await
                {
                    Ok(true) => ConsumeOutcome::DeadLetter { reason: "crashed" },
                    // Another delivery holds it: it ends it, one way or another.
                    Ok(false) => ConsumeOutcome::Retry {
                        delay_seconds: self.busy_retry_delay(job.lease_until, now),
                    },
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
}
