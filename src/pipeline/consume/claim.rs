//! Steps 0 and 1: load the job, refuse stale work before anything is
//! written, and claim the job's lease in D1.

use super::ConsumeOutcome;
use crate::core::state::{GenerationState, JobState, TenantMoveState};
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{ClaimRow, ConsumeRow};
use std::ops::ControlFlow;

/// A job is stale when its version is no longer the latest, or is not newer
/// than the live one: it must never write again.
fn is_stale(job: &ConsumeRow) -> bool {
    if job.build_generation.is_some() {
        // A build writes the live version into a generation still written.
        let written = job
            .build_generation_state
            .is_some_and(GenerationState::is_written);
        return job.live_version != Some(job.version) || !written;
    }
    job.version < job.latest_version || job.live_version.is_some_and(|l| l >= job.version)
}

/// Whether the job's tenant is fenced for a move, moved out or moving in
/// on this shard (migration 0033): nothing of it is claimed here. A job
/// left queued is re-sent by cron if the move is cancelled.
fn is_moving(job: &ConsumeRow) -> bool {
    job.move_state
        .is_some_and(|m| m != TenantMoveState::Copying)
}

/// Whole seconds from `now_ms` until `at_ms` (rounded up), within the
/// queues' delays: 1 s to 24 h.
fn seconds_until(at_ms: i64, now_ms: i64) -> u32 {
    u32::try_from(((at_ms - now_ms).max(0) + 999) / 1000)
        .unwrap_or(u32::MAX)
        .clamp(1, 86_400)
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 0: the message's job, or how the delivery ends without one (an
    /// unknown job, a pointer that is not the job's, a job already final).
    pub(super) async fn load(
        &self,
        msg: &JobMessage,
    ) -> Result<ControlFlow<ConsumeOutcome, ConsumeRow>, PortError> {
        let Some(job) = self.store.consume_load(&msg.job_id).await? else {
            return Ok(ControlFlow::Break(ConsumeOutcome::Ack {
                reason: "unknown_job",
            }));
        };
        if job.doc_id != msg.doc_id || job.version != msg.version {
            return Ok(ControlFlow::Break(ConsumeOutcome::Ack {
                reason: "pointer_mismatch",
            }));
        }
        Ok(match job.state {
            JobState::Succeeded | JobState::Superseded => ControlFlow::Break(ConsumeOutcome::Ack {
                reason: "already_final",
            }),
            JobState::Failed | JobState::Dead => ControlFlow::Break(ConsumeOutcome::DeadLetter {
                reason: "already_failed",
            }),
            _ => ControlFlow::Continue(job),
        })
    }

    /// Step 1: the claim (job `running`, attempts + 1, lease), or how the
    /// delivery ends instead: the version is stale (superseded), another
    /// delivery holds the lease, or the job waits for its retry time.
    pub(super) async fn claim(
        &self,
        msg: &JobMessage,
        job: &ConsumeRow,
    ) -> Result<ControlFlow<ConsumeOutcome, ClaimRow>, PortError> {
        let now = self.clock.now_ms();
        // A tenant moving between shards: its copy runs the job again on
        // the new shard (the claim refuses it too, in case it moved since).
        if is_moving(job) {
            return Ok(ControlFlow::Break(ConsumeOutcome::Ack {
                reason: "tenant_moving",
            }));
        }
        // Stale work is rejected before anything is written.
        if is_stale(job) {
            return self.supersede(job, now).await.map(ControlFlow::Break);
        }
        let lease_until = now + i64::from(self.cfg.job_lease_seconds) * 1000;
        if let Some(claim) = self
            .store
            .claim(&job.job_id, now, lease_until, self.delivery.as_deref())
            .await?
        {
            return Ok(ControlFlow::Continue(claim));
        }
        // The claim also refuses a version that became stale since the
        // load; tell the two cases apart.
        let outcome = match self.store.consume_load(&msg.job_id).await? {
            Some(again) if is_moving(&again) => ConsumeOutcome::Ack {
                reason: "tenant_moving",
            },
            Some(again) if is_stale(&again) => self.supersede(&again, now).await?,
            // Another delivery holds the lease (or just finished): look
            // again when the lease ends. A holder that died (a crash)
            // keeps it that long anyway; retrying sooner would only use
            // up the queue's max_retries and send a live job to the DLQ.
            // A duplicate of a job waiting for its retry waits for the
            // retry time.
            Some(again)
                if again.state == JobState::UpForRetry
                    && again.next_attempt_at.is_some_and(|at| at > now) =>
            {
                ConsumeOutcome::Retry {
                    delay_seconds: seconds_until(again.next_attempt_at.unwrap_or(now), now),
                }
            }
            again => ConsumeOutcome::Retry {
                delay_seconds: self.busy_retry_delay(again.and_then(|j| j.lease_until), now),
            },
        };
        Ok(ControlFlow::Break(outcome))
    }

    /// Delay before a delivery that found the job leased looks again: until
    /// the lease ends (plus a second), at least `CLAIM_BUSY_RETRY_SECONDS`,
    /// at most the queues' 24 h.
    pub(super) fn busy_retry_delay(&self, lease_until: Option<i64>, now: i64) -> u32 {
        let left_seconds = lease_until.map_or(0, |l| ((l - now).max(0) + 999) / 1000 + 1);
        u32::try_from(left_seconds)
            .unwrap_or(u32::MAX)
            .clamp(self.cfg.claim_busy_retry_seconds, 86_400)
    }

    /// Ends a stale job `superseded` (acknowledged), unless a live delivery
    /// holds it.
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
}
