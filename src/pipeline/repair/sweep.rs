//! Steps 1 and 1b: chunk rows of abandoned versions, and of retiring or
//! abandoned generations, become cleanup intents (drained in step 2).

use super::drain::DRAIN_BATCH_CALLS;
use super::Run;
use crate::config::Config;

/// Calls of step 1: the page, and the batch that makes its intents and
/// moves the cursor (at most).
const SWEEP_CALLS: u64 = 2;
/// Calls of step 1b: the page of documents, and the batch that moves the
/// cursor, writes the intents and retires (at most; one when none is
/// retiring).
const RETIRE_CALLS: u64 = 2;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 1: of a page of `CRON_ABANDONED_CHUNKS_MAX` closed chunk rows
    /// after the sweep's cursor, those of abandoned versions become
    /// intents (`SWEEP_PAGE`, `SWEEP_ABANDONED`).
    pub(super) async fn sweep_abandoned(&self, run: &mut Run<'_>) {
        if !self.allows(run, SWEEP_CALLS) {
            return;
        }
        let page_rows = self.cfg.cron_abandoned_chunks_max;
        let swept = match self.store.sweep_page(page_rows).await {
            Ok(page) => {
                let next = page.next_cursor(page_rows);
                self.store
                    .sweep_abandoned(self.clock.now_ms(), &page, &next)
                    .await
            }
            Err(e) => Err(e),
        };
        match swept {
            Ok(n) => {
                run.report.abandoned_chunks_swept += n;
                run.cleanup_left |= n as usize >= self.cfg.cron_abandoned_chunks_max;
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Step 1b: rows of retiring generations, a page of documents at a
    /// time, become intents. Whether the round has more pages (a page
    /// that gave no row still moved the cursor on).
    pub(super) async fn retire_rows(&self, run: &mut Run<'_>) -> bool {
        if !self.allows(run, RETIRE_CALLS) {
            return false;
        }
        match self
            .retire_generations(self.cfg.cron_abandoned_chunks_max)
            .await
        {
            Ok((n, more)) => {
                run.report.generation_rows_retired += n;
                run.cleanup_left |= more;
                more
            }
            Err(e) => {
                run.report.failed(e.bucket);
                false
            }
        }
    }

    /// Step 8: what the other steps left of the budget goes to more
    /// cleanup, a pass (1, 1b, 2) at a time, while the last pass filled a
    /// page and the next one's worst case fits. A retired generation's rows
    /// then drain at the budget's pace rather than one page a run (63,000
    /// rows took 60 runs, five hours at production's schedule).
    pub(super) async fn cleanup_with_what_is_left(&self, run: &mut Run<'_>) {
        while run.cleanup_left && self.allows(run, cleanup_pass_calls(&self.cfg)) {
            run.cleanup_left = false;
            let done = |r: &Run<'_>| {
                r.report.abandoned_chunks_swept
                    + r.report.generation_rows_retired
                    + r.report.intents_deleted
                    + r.report.intents_retired
            };
            let before = done(run);
            run.report.cleanup_passes += 1;
            self.sweep_abandoned(run).await;
            let more_pages = self.retire_rows(run).await;
            self.drain_intents(run).await;
            if done(run) == before && !more_pages {
                // Nothing moved (a failure, reported by its step): no point
                // in asking again within this run.
                break;
            }
        }
    }
}

/// The worst case of one cleanup pass in calls: step 1, step 1b, and step
/// 2's retire statement and its batches for a full page.
pub fn cleanup_pass_calls(cfg: &Config) -> u64 {
    let batches = cfg
        .cron_cleanup_intents_max
        .div_ceil(cfg.delete_batch_size.max(1)) as u64;
    SWEEP_CALLS + RETIRE_CALLS + 1 + batches * DRAIN_BATCH_CALLS
}

/// Rows of a retiring generation one cron run turns into intents and
/// deletes, at most: its whole subrequest budget in cleanup passes, each
/// a page of the smaller of the two cleanup caps. An estimate: the other
/// steps' work and the wall time can only lower it.
pub fn cleanup_rows_per_run(cfg: &Config) -> u64 {
    let passes = (cfg.cron_subrequests_max / cleanup_pass_calls(cfg)).max(1);
    passes
        * cfg
            .cron_abandoned_chunks_max
            .min(cfg.cron_cleanup_intents_max) as u64
}
