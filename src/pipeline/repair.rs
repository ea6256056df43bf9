//! The cron handler: bounded repair work on every scheduled run.
//!
//! 1. sweep: chunk rows of abandoned versions become cleanup intents;
//! 2. drain: due cleanup intents are deleted from the index, in bounded batches;
//! 3. requeue: jobs that stalled (lost message, dead invocation) are sent
//!    again, or end `dead` once their attempts are used up.

use super::{log_event, Pipeline};
use crate::core::failure::FailureBucket;
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, VectorIndex};
use serde::Serialize;
use serde_json::json;

/// What one scheduled run did. Logged as one line; counts only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    pub abandoned_chunks_swept: u64,
    pub intents_deleted: u64,
    pub intents_failed: u64,
    pub jobs_requeued: u64,
    pub jobs_dead: u64,
    /// Buckets of the steps that failed in this run (each at most once).
    pub failures: Vec<FailureBucket>,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn repair(&self) -> RepairReport {
        let mut report = RepairReport::default();
        let failed = |report: &mut RepairReport, b: FailureBucket| {
            if !report.failures.contains(&b) {
                report.failures.push(b);
            }
        };

        // 1. sweep
        match self.store.sweep_abandoned(self.clock.now_ms(), self.cfg.cron_abandoned_chunks_max, self.bugs).await {
            Ok(n) => report.abandoned_chunks_swept = n,
            Err(e) => failed(&mut report, e.bucket),
        }

        // 2. drain
        let mut budget = self.cfg.cron_cleanup_intents_max;
        while budget > 0 {
            let limit = self.cfg.delete_batch_size.min(budget);
            let ids = match self.store.intents_due(self.clock.now_ms(), limit).await {
                Ok(ids) if ids.is_empty() => break,
                Ok(ids) => ids,
                Err(e) => {
                    failed(&mut report, e.bucket);
                    break;
                }
            };
            budget = budget.saturating_sub(ids.len());
            if self.delete_vectors(&ids).await {
                report.intents_deleted += ids.len() as u64;
            } else {
                report.intents_failed += ids.len() as u64;
                failed(&mut report, FailureBucket::IndexUnavailable);
                break;
            }
        }

        // 3. requeue
        let now = self.clock.now_ms();
        let stalled_before = now - i64::from(self.cfg.job_stall_seconds) * 1000;
        match self.store.stalled_jobs(now, stalled_before, self.cfg.cron_requeue_jobs_max).await {
            Ok(rows) => {
                let mut messages = Vec::new();
                for r in rows {
                    if r.attempts >= self.cfg.job_attempts_max {
                        match self.store.job_stalled_dead(&r.job_id, &r.doc_id, r.version, now).await {
                            Ok(()) => report.jobs_dead += 1,
                            Err(e) => failed(&mut report, e.bucket),
                        }
                    } else {
                        messages.push(JobMessage { job_id: r.job_id, doc_id: r.doc_id, version: r.version });
                    }
                }
                if !messages.is_empty() {
                    match self.queue.send_batch(&messages).await {
                        Ok(()) => {
                            let ids: Vec<&str> = messages.iter().map(|m| m.job_id.as_str()).collect();
                            match self.store.touch_jobs(&ids, now).await {
                                Ok(()) => report.jobs_requeued = messages.len() as u64,
                                Err(e) => failed(&mut report, e.bucket),
                            }
                        }
                        Err(e) => failed(&mut report, e.bucket),
                    }
                }
            }
            Err(e) => failed(&mut report, e.bucket),
        }

        log_event("repair_run", json!(report));
        report
    }
}
