//! Settling a delivery: what the entry point does with a queue message once
//! the pipeline has decided, dead letters included. Written here, over the
//! ports, so that the simulation enumerates faults in it too; the Worker
//! only turns a [`Settle`] into `ack()` or `retry()`.
//!
//! A job that ended `failed` or `dead` is evidence: first archived in D1
//! (the ledger), then its pointer sent to the dead-letter queue, marked
//! `archived`, and only then is the delivery acknowledged. A failure of
//! either redelivers, which repeats both (the archive is idempotent per job).
//! The dead-letter queue's consumer archives every letter Queues forwarded
//! itself (a message that used up `max_retries`), and only confirms one the
//! consumer sent (already archived: not counted twice). It retries a letter
//! it could not archive with a delay that grows with the letter's age, so
//! that an outage of D1 of days, not minutes, loses nothing.

use super::{log_event, ConsumeOutcome, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, VectorIndex};
use serde_json::json;

/// What the entry point does with the delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    Ack,
    Retry { delay_seconds: u32 },
}

/// Delay before a dead letter that could not be archived is tried again:
/// half its age, within [`DLQ_RETRY_DELAY_MIN_SECONDS`, `DEAD_LETTER_RETRY_MAX_DELAY_SECONDS`].
/// Queues counts at most 100 deliveries; growing by half the age each time,
/// 100 of them span about 90 hours at a one-hour cap.
pub const DLQ_RETRY_DELAY_MIN_SECONDS: u32 = 60;

pub fn dead_letter_retry_delay(age_ms: i64, max_delay_seconds: u32) -> u32 {
    let half_age = u32::try_from((age_ms.max(0) / 1000) / 2).unwrap_or(u32::MAX);
    half_age.clamp(
        DLQ_RETRY_DELAY_MIN_SECONDS,
        max_delay_seconds.max(DLQ_RETRY_DELAY_MIN_SECONDS),
    )
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Settles an ingest delivery (`message_id`) as `outcome` says.
    pub async fn settle(
        &self,
        message_id: &str,
        msg: &JobMessage,
        outcome: ConsumeOutcome,
    ) -> Settle {
        match outcome {
            ConsumeOutcome::Ack { .. } => Settle::Ack,
            ConsumeOutcome::Retry { delay_seconds } => Settle::Retry { delay_seconds },
            ConsumeOutcome::DeadLetter { reason } => {
                let retry = Settle::Retry {
                    delay_seconds: self.cfg.retry_base_delay_seconds,
                };
                if let Err(e) = self.archive_dead_letter(message_id, msg).await {
                    log_event(
                        "dead_letter_deferred",
                        json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code, "step": "archive" }),
                    );
                    return retry;
                }
                // A redelivery of a job that had already failed was sent by
                // the first delivery; a misrouted dead-letter queue must not
                // loop.
                if reason == "already_failed" {
                    return Settle::Ack;
                }
                let letter = JobMessage {
                    archived: true,
                    ..msg.clone()
                };
                match self.queue.send_dead_letter(&letter).await {
                    Ok(()) => Settle::Ack,
                    Err(e) => {
                        log_event(
                            "dead_letter_deferred",
                            json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code, "step": "send" }),
                        );
                        retry
                    }
                }
            }
        }
    }

    /// Settles a delivery of the dead-letter queue. `sent_ms` is when the
    /// letter was first enqueued (its age sets the retry delay); `msg` is
    /// `None` for a body that is not a pointer (kept as evidence anyway).
    pub async fn consume_dead_letter(
        &self,
        message_id: &str,
        msg: Option<&JobMessage>,
        sent_ms: i64,
    ) -> Settle {
        let malformed;
        let msg = match msg {
            Some(m) => m,
            None => {
                malformed = JobMessage::new(format!("malformed:{message_id}"), "", 0);
                &malformed
            }
        };
        if !msg.archived && self.bugs.has(crate::bugs::Bug::DeadLetterNotArchived) {
            return Settle::Ack;
        }
        let archived = if msg.archived {
            self.confirm_dead_letter(message_id, msg).await
        } else {
            self.archive_dead_letter(message_id, msg).await
        };
        match archived {
            Ok(()) => {
                log_event(
                    "dead_letter_received",
                    json!({ "job_id": msg.job_id, "message_id": message_id, "archived_before": msg.archived }),
                );
                Settle::Ack
            }
            Err(e) => {
                let delay_seconds = dead_letter_retry_delay(
                    self.clock.now_ms() - sent_ms,
                    self.cfg.dead_letter_retry_max_delay_seconds,
                );
                log_event(
                    "dead_letter_deferred",
                    json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code, "step": "dlq_archive", "delay_seconds": delay_seconds }),
                );
                Settle::Retry { delay_seconds }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_retries_grow_with_age_and_span_days() {
        assert_eq!(dead_letter_retry_delay(0, 3600), 60);
        assert_eq!(dead_letter_retry_delay(600_000, 3600), 300);
        assert_eq!(dead_letter_retry_delay(86_400_000, 3600), 3600);
        // 100 deliveries (Queues' most), each after the delay its age gives.
        let mut age_ms = 0i64;
        for _ in 0..100 {
            age_ms += i64::from(dead_letter_retry_delay(age_ms, 3600)) * 1000;
        }
        assert!(age_ms > 72 * 3_600_000, "{} h", age_ms / 3_600_000);
    }
}
