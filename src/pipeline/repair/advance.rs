//! Steps 5, 6 and 7: active redrives, the running backfill, and source
//! sync sessions (expired, or committing), advanced in the budget left
//! (`pipeline/admin.rs`, `pipeline/backfill.rs` and `pipeline/sync.rs`
//! hold what one advance does). Their worst cases are estimates: what an advance
//! costs depends on what it finds.

use super::Run;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, VectorIndex};

/// Redrives advanced per scheduled run.
const REDRIVES_PER_RUN_MAX: usize = 10;

/// The most items one redrive sends at a time (the API's bound on its
/// `batch_size`; canaries are fewer).
const REDRIVE_BATCH_MAX: u64 = 100;

/// One redrive's advance at worst, an estimate: its row and items, a
/// settle per item sent before (at most a batch), a state change and its
/// audit, a re-run per item it sends (the version's kind, the batch, the
/// send) and the audit of the send: 5 + 4 per item, with one spare.
const fn redrive_advance_worst() -> u64 {
    6 + 4 * REDRIVE_BATCH_MAX
}

/// The backfill step at least, an estimate: the running backfill, and the
/// end of a pass (its row, its page, its progress, the active generation,
/// the gaps, the switch batch). Each page it enqueues is bounded by
/// `backfill_page_cost` (`pipeline/backfill.rs`; also an estimate: 8 + 4
/// per document).
const BACKFILL_STEP_MIN: u64 = 8;

/// One page of a sync commit at worst: the page, the latest versions, the
/// intake batch, the queue send, the page's end; with one spare.
const SYNC_PAGE_WORST: u64 = 6;

/// The sync step's reads before its pages: the expiry, the committing list.
const SYNC_STEP_MIN: u64 = 2;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 5: redrives in progress, as many as fit at their worst after
    /// the read that lists them (at least one, at most
    /// `REDRIVES_PER_RUN_MAX`).
    pub(super) async fn advance_redrives_step(&self, run: &mut Run<'_>) {
        let per_redrive = redrive_advance_worst();
        if !self.allows(run, 1 + per_redrive) {
            return;
        }
        let n =
            (run.left().saturating_sub(1) / per_redrive).min(REDRIVES_PER_RUN_MAX as u64) as usize;
        match self.advance_redrives(n.max(1)).await {
            Ok(n) => run.report.redrives_advanced = n as u64,
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Step 6: the running backfill, as many pages as the budget left allows
    /// at `backfill_page_cost` each (at least the end-of-pass step).
    pub(super) async fn advance_backfill_step(&self, run: &mut Run<'_>) {
        if !self.allows(run, BACKFILL_STEP_MIN) {
            return;
        }
        // Kept out of the pages' share: the running backfill's read, and
        // one call of slack for the pass's end after the last page.
        let left = run.left().saturating_sub(2);
        match self.advance_backfills(left).await {
            Ok(pages) => run.report.backfill_pages = pages,
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Step 7: open sync sessions past their time expire, and committing
    /// ones continue, as many pages as fit (at most `CRON_SYNC_PAGES_MAX`).
    pub(super) async fn advance_syncs_step(&self, run: &mut Run<'_>) {
        if !self.allows(run, SYNC_STEP_MIN) {
            return;
        }
        let fit = run.left().saturating_sub(SYNC_STEP_MIN) / SYNC_PAGE_WORST;
        let pages = fit.min(u64::from(self.cfg.cron_sync_pages_max)) as u32;
        match self.advance_syncs(pages).await {
            Ok((expired, pages)) => {
                run.report.syncs_expired = expired;
                run.report.sync_pages = pages;
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }
}
