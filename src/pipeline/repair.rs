//! The cron handler: bounded repair work on every scheduled run.
//!
//! 1. sweep: chunk rows of abandoned versions become cleanup intents;
//! 2. drain: due cleanup intents are deleted from the index, in bounded batches;
//! 3. requeue: jobs that stalled (lost message, dead invocation) are sent
//!    again, or end `dead` once their attempts are used up.

use super::{log_event, Pipeline};
use crate::core::failure::FailureBucket;
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};

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
    /// Live chunks checked against the index (getByIds).
    pub chunks_verified: u64,
    /// Documents whose live vectors were missing: marked `repair_needed`
    /// and re-run as a new version.
    pub documents_repaired: u64,
    /// Active redrives advanced.
    pub redrives_advanced: u64,
    /// Chunk rows of retiring or abandoned generations turned into intents.
    pub generation_rows_retired: u64,
    /// Pages the running backfill enqueued.
    pub backfill_pages: u64,
    /// Whether a step stopped at its per-run cap, or the run at its
    /// subrequest or wall-time budget (work is left for the next run).
    pub budget_hit: bool,
    /// Subrequests (D1, index and queue calls) the run made, as counted
    /// against `CRON_SUBREQUESTS_MAX` (for the redrive and backfill steps,
    /// whose cost depends on what they find, an upper bound).
    pub subrequests_used: u64,
    /// Wall time of the run, in milliseconds (by the injected clock).
    pub elapsed_ms: i64,
    /// Buckets of the steps that failed in this run (each at most once).
    pub failures: Vec<FailureBucket>,
}

impl RepairReport {
    /// Whether the run changed or found anything (verifying chunks that
    /// were all present does not count).
    pub fn did_work(&self) -> bool {
        self.abandoned_chunks_swept
            + self.intents_deleted
            + self.intents_failed
            + self.jobs_requeued
            + self.jobs_dead
            + self.documents_repaired
            + self.redrives_advanced
            + self.generation_rows_retired
            + self.backfill_pages
            > 0
            || !self.failures.is_empty()
    }
}

/// The budget of one scheduled run: subrequests and wall time. Steps ask
/// before they start and stop between batches once it is spent.
struct Meter {
    used: std::cell::Cell<u64>,
    max: u64,
    started_ms: i64,
    wall_ms: i64,
}

impl Meter {
    fn spend(&self, n: u64) {
        self.used.set(self.used.get() + n);
    }

    /// Whether `next` more subrequests fit, and time is left.
    fn allows(&self, now_ms: i64, next: u64) -> bool {
        self.used.get() + next <= self.max && now_ms - self.started_ms < self.wall_ms
    }
}

/// Redrives advanced per scheduled run.
const REDRIVES_PER_RUN_MAX: usize = 10;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Checks the next page of live chunks (older than the visibility
    /// window) against the index, continuing from a cursor kept in D1. A
    /// document with a missing vector is marked `repair_needed` and its live
    /// version re-run. Returns (chunks checked, documents repaired).
    async fn verify_sample(&self) -> Result<(u64, u64), PortError> {
        if self.cfg.cron_verify_chunks_max == 0 {
            return Ok((0, 0));
        }
        let now = self.clock.now_ms();
        let live_before = now - i64::from(self.cfg.index_visibility_window_seconds) * 1000;
        let after = self.store.cursor("verify").await?;
        let rows = self
            .store
            .live_chunks_to_verify(live_before, &after, self.cfg.cron_verify_chunks_max)
            .await?;
        // The next run starts after the last chunk checked, or from the top.
        let next = if rows.len() < self.cfg.cron_verify_chunks_max {
            String::new()
        } else {
            rows.last().map(|r| r.vector_id.clone()).unwrap_or_default()
        };
        let mut missing: Vec<(String, u32)> = Vec::new();
        for page in rows.chunks(100) {
            let ids: Vec<String> = page.iter().map(|r| r.vector_id.clone()).collect();
            let found: std::collections::HashSet<String> = self
                .index
                .get_by_ids(&ids)
                .await?
                .into_iter()
                .map(|v| v.id)
                .collect();
            for r in page.iter().filter(|r| !found.contains(&r.vector_id)) {
                if !missing
                    .iter()
                    .any(|(d, v)| *d == r.doc_id && *v == r.version)
                {
                    missing.push((r.doc_id.clone(), r.version));
                }
            }
        }
        for (doc_id, version) in &missing {
            log_event(
                "repair_missing_vectors",
                json!({ "doc_id": doc_id, "version": version }),
            );
            self.store.mark_repair_needed(doc_id, *version).await?;
            self.rerun_live_version(doc_id, *version).await?;
        }
        self.store.set_cursor("verify", &next).await?;
        Ok((rows.len() as u64, missing.len() as u64))
    }

    pub async fn repair(&self) -> RepairReport {
        let started_at = self.clock.now_ms();
        let mut report = RepairReport::default();
        let meter = Meter {
            used: std::cell::Cell::new(0),
            max: self.cfg.cron_subrequests_max,
            started_ms: started_at,
            wall_ms: i64::from(self.cfg.cron_wall_seconds_max) * 1000,
        };
        // Asks the meter; a refusal marks the run as having hit its budget.
        let allows = |report: &mut RepairReport, next: u64| {
            let ok = meter.allows(self.clock.now_ms(), next);
            report.budget_hit |= !ok;
            ok
        };
        let failed = |report: &mut RepairReport, b: FailureBucket| {
            if !report.failures.contains(&b) {
                report.failures.push(b);
            }
        };

        // 1. sweep
        if allows(&mut report, 1) {
            meter.spend(1);
            match self
                .store
                .sweep_abandoned(
                    self.clock.now_ms(),
                    self.cfg.cron_abandoned_chunks_max,
                    self.bugs,
                )
                .await
            {
                Ok(n) => {
                    report.abandoned_chunks_swept = n;
                    report.budget_hit |= n as usize >= self.cfg.cron_abandoned_chunks_max;
                }
                Err(e) => failed(&mut report, e.bucket),
            }
        }

        // 1b. retire: rows of retiring generations become intents (drained next).
        if allows(&mut report, 2) {
            meter.spend(2);
            match self
                .retire_generations(self.cfg.cron_abandoned_chunks_max)
                .await
            {
                Ok(n) => {
                    report.generation_rows_retired = n;
                    report.budget_hit |= n as usize >= self.cfg.cron_abandoned_chunks_max;
                }
                Err(e) => failed(&mut report, e.bucket),
            }
        }

        // 2. drain
        let mut budget = self.cfg.cron_cleanup_intents_max;
        // Each batch: the due intents, the index delete, the ledger update.
        while budget > 0 && allows(&mut report, 3) {
            let limit = self.cfg.delete_batch_size.min(budget);
            meter.spend(1);
            let ids = match self.store.intents_due(self.clock.now_ms(), limit).await {
                Ok(ids) if ids.is_empty() => break,
                Ok(ids) => ids,
                Err(e) => {
                    failed(&mut report, e.bucket);
                    break;
                }
            };
            budget = budget.saturating_sub(ids.len());
            meter.spend(2);
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
        let stalled = if allows(&mut report, 3) {
            meter.spend(1);
            self.store
                .stalled_jobs(now, stalled_before, self.cfg.cron_requeue_jobs_max)
                .await
        } else {
            Ok(Vec::new())
        };
        match stalled {
            Ok(rows) => {
                let mut messages = Vec::new();
                for r in rows {
                    // The send and the touch of the requeued ones stay reserved.
                    if !allows(&mut report, 2 + 2) {
                        break;
                    }
                    if r.attempts >= self.cfg.job_attempts_max {
                        meter.spend(2);
                        match self.store.job_stalled_dead(&r, now).await {
                            Ok(()) => {
                                report.jobs_dead += 1;
                                // Its evidence, like any dead-lettered job's.
                                let msg =
                                    JobMessage::new(r.job_id.clone(), r.doc_id.clone(), r.version);
                                if let Err(e) = self
                                    .archive_dead_letter(&format!("cron:{}", r.job_id), &msg)
                                    .await
                                {
                                    failed(&mut report, e.bucket);
                                }
                            }
                            Err(e) => failed(&mut report, e.bucket),
                        }
                    } else {
                        messages.push(JobMessage::new(r.job_id, r.doc_id, r.version));
                    }
                }
                if !messages.is_empty() {
                    meter.spend(2);
                    match self.queue.send_batch(&messages).await {
                        Ok(()) => {
                            let ids: Vec<&str> =
                                messages.iter().map(|m| m.job_id.as_str()).collect();
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

        // 4. verify a bounded sample of live chunks against the index:
        // cursor, page, getByIds per 100, cursor update (repairs counted after).
        let verify_cost = 3 + (self.cfg.cron_verify_chunks_max as u64).div_ceil(100);
        if allows(&mut report, verify_cost) {
            match self.verify_sample().await {
                Ok((checked, missing_docs)) => {
                    report.chunks_verified = checked;
                    report.documents_repaired = missing_docs;
                    // Each repair: mark, the version's kind, the re-run batch, the send.
                    meter.spend(3 + checked.div_ceil(100) + 4 * missing_docs);
                }
                Err(e) => {
                    meter.spend(verify_cost);
                    failed(&mut report, e.bucket);
                }
            }
        }

        // 5. redrives in progress (a redrive's advance is a few reads and
        // writes plus one re-run per item it sends).
        let per_redrive = 6 + 4 * 100;
        if allows(&mut report, 1 + per_redrive) {
            let n = (meter.max.saturating_sub(meter.used.get() + 1) / per_redrive)
                .min(REDRIVES_PER_RUN_MAX as u64) as usize;
            meter.spend(1);
            match self.advance_redrives(n.max(1)).await {
                Ok(n) => {
                    report.redrives_advanced = n as u64;
                    meter.spend(6 * n as u64);
                }
                Err(e) => failed(&mut report, e.bucket),
            }
        }
        // 6. the running backfill: as many pages as the budget left allows
        // (at least the end-of-pass step: a few reads and the switch batch).
        if allows(&mut report, 8) {
            let left = meter.max.saturating_sub(meter.used.get() + 2);
            meter.spend(2);
            match self.advance_backfills(left).await {
                Ok((pages, cost)) => {
                    report.backfill_pages = pages;
                    meter.spend(cost + 6);
                }
                Err(e) => failed(&mut report, e.bucket),
            }
        }

        report.budget_hit |= budget == 0
            || report.jobs_requeued + report.jobs_dead >= self.cfg.cron_requeue_jobs_max as u64;
        report.subrequests_used = meter.used.get();
        report.elapsed_ms = self.clock.now_ms() - started_at;

        log_event("repair_run", json!(report));
        // A run that did nothing is not recorded (cron runs every few minutes).
        if report.did_work() {
            if let Err(e) = self.record_repair_run(started_at, &report).await {
                log_event(
                    "repair_run_not_recorded",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code }),
                );
            }
        }
        report
    }
}
