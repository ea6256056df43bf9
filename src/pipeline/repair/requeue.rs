//! Step 3: jobs stalled past `JOB_STALL_SECONDS` (a lost message, a dead
//! invocation: running past their lease) are sent again, or end `dead` once
//! their attempts are used up (`CRON_REQUEUE_JOBS_MAX` per run).

use super::Run;
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, VectorIndex};
use crate::store::StalledJobRow;
use serde_json::json;

/// Calls that end a stalled job `dead` (exact): one batch, its end and
/// its letter.
const END_STALLED_CALLS: u64 = 1;
/// Calls that send the requeued jobs (exact): the send and their touch,
/// kept free from the start of the step on.
const SEND_STALLED_CALLS: u64 = 2;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 3: the stalled jobs, each ended `dead` (with its dead letter) or
    /// sent again in one batch.
    pub(super) async fn requeue_stalled(&self, run: &mut Run<'_>) {
        let now = self.clock.now_ms();
        let stalled_before = now - i64::from(self.cfg.job_stall_seconds) * 1000;
        // The read, and the send of what it finds.
        let stalled = if self.allows(run, 1 + SEND_STALLED_CALLS) {
            self.store
                .stalled_jobs(now, stalled_before, self.cfg.cron_requeue_jobs_max)
                .await
        } else {
            Ok(Vec::new())
        };
        match stalled {
            Ok(rows) => {
                let mut messages = Vec::new();
                let mut moving = Vec::new();
                for r in rows {
                    // The send and the touch of the requeued ones stay reserved.
                    if !self.allows(run, END_STALLED_CALLS + SEND_STALLED_CALLS) {
                        break;
                    }
                    if r.moving != 0 {
                        // Its consumer would acknowledge it unrun, and its
                        // end belongs to the shard the tenant moves to
                        // (which sends it at the switch): touched only.
                        moving.push(r.job_id);
                    } else if r.attempts >= self.cfg.job_attempts_max {
                        self.end_stalled(run, &r, now).await;
                    } else {
                        messages.push(JobMessage::new(r.job_id, r.doc_id, r.version));
                    }
                }
                if !messages.is_empty() || !moving.is_empty() {
                    self.send_stalled(run, &messages, &moving, now).await;
                }
            }
            Err(e) => run.report.failed(e.bucket),
        }
        run.report.budget_hit |= run.report.jobs_requeued + run.report.jobs_dead
            >= self.cfg.cron_requeue_jobs_max as u64;
    }

    /// A stalled job with its attempts used up ends `dead` with its letter
    /// archived like any dead-lettered job's, in one batch: a failure
    /// leaves it stalled, and the next run ends it.
    async fn end_stalled(&self, run: &mut Run<'_>, r: &StalledJobRow, now: i64) {
        let message_id = format!("cron:{}", r.job_id);
        match self.store.job_stalled_dead(r, &message_id, now).await {
            Ok(()) => {
                run.report.jobs_dead += 1;
                run.report.tenant_of(&r.doc_id).jobs_dead += 1;
                log_event(
                    "dead_letter_archived",
                    json!({ "job_id": r.job_id, "message_id": message_id }),
                );
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Sends the stalled jobs again in one batch, then marks them touched,
    /// with those of a moving tenant (`moving`, not sent) in the same write.
    async fn send_stalled(
        &self,
        run: &mut Run<'_>,
        messages: &[JobMessage],
        moving: &[String],
        now: i64,
    ) {
        let sent = if messages.is_empty() {
            Ok(())
        } else {
            self.queue.send_batch(messages).await
        };
        let mut ids: Vec<&str> = moving.iter().map(String::as_str).collect();
        if let Err(e) = &sent {
            run.report.failed(e.bucket);
        } else {
            ids.extend(messages.iter().map(|m| m.job_id.as_str()));
        }
        if ids.is_empty() {
            return;
        }
        match self.store.touch_jobs(&ids, now).await {
            Ok(()) if sent.is_ok() => {
                run.report.jobs_requeued = messages.len() as u64;
                for m in messages {
                    run.report.tenant_of(&m.doc_id).jobs_requeued += 1;
                }
            }
            Ok(()) => {}
            Err(e) => run.report.failed(e.bucket),
        }
    }
}
