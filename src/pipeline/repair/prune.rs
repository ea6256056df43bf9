//! Step 9, retention: history past its retention pruned, a page of each
//! kind per run (`CRON_PRUNE_ROWS_MAX`), on the budget the other steps
//! left (docs/ARCHITECTURE.md, "Retention"). Each kind costs two
//! subrequests at most (its page, its batch; repair runs one): the worst
//! case is exact. Then, as long as rows written before migration 0021 are
//! left, a page of them enters the keyword index (two more).

use super::Run;
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::History;

/// The step's subrequests at worst: texts, versions, sessions, backfills,
/// redrives and the keyword index's upgrade page two each, repair runs and
/// revoked tokens one (and ended moves one more on shard 0 of several:
/// `prunes_moves`).
const PRUNE_STEP_WORST: u64 = 14;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 9: a page of each kind of history, if the whole step fits.
    pub(super) async fn prune_step(&self, run: &mut Run<'_>) {
        if !self.allows(run, PRUNE_STEP_WORST + u64::from(self.prunes_moves())) {
            return;
        }
        if let Err(e) = self.prune(run).await {
            run.report.failed(e.bucket);
        }
    }

    /// Whether this shard holds moves to prune: shard 0, of several.
    fn prunes_moves(&self) -> bool {
        self.cfg.shards > 1 && self.shard == crate::core::shards::ShardId::CONTROL
    }

    async fn prune(&self, run: &mut Run<'_>) -> Result<(), PortError> {
        let now = self.clock.now_ms();
        let seconds = |s: u64| now.saturating_sub((s as i64).saturating_mul(1000));
        let text_before = seconds(self.cfg.text_retention_seconds);
        let history = seconds(self.cfg.history_retention_seconds);
        let redrives = seconds(self.cfg.redrive_retention_seconds);
        let limit = self.cfg.cron_prune_rows_max;
        let r = &mut run.report;

        let texts = self.store.prunable_texts(text_before, limit).await?;
        r.texts_pruned = self.store.prune_texts(&texts, self.bugs).await?;
        let versions = self.store.prunable_versions(history, limit).await?;
        (r.versions_pruned, r.jobs_pruned) = self.store.prune_versions(&versions, history).await?;
        r.repair_runs_pruned = self.store.prune_repair_runs(history, limit).await?;
        r.tokens_pruned = self.store.prune_revoked_tokens(history, limit).await?;
        let (syncs, marks) = self
            .store
            .prune_history(History::Syncs, history, limit)
            .await?;
        let (backfills, items) = self
            .store
            .prune_history(History::Backfills, history, limit)
            .await?;
        let (redrive_rows, redrive_children) = self
            .store
            .prune_history(History::Redrives, redrives, limit)
            .await?;
        r.syncs_pruned = syncs;
        r.backfills_pruned = backfills;
        r.redrives_pruned = redrive_rows;
        r.history_rows_pruned = marks + items + redrive_children;
        // The moves' records, on shard 0 of a deployment of several.
        if self.prunes_moves() {
            r.history_rows_pruned += self.store.prune_moves(history, limit).await?;
        }
        let unindexed = self.store.index_unindexed_rows(limit).await?;
        r.keyword_rows_indexed = unindexed as u64;
        let full = [texts.len(), versions.len(), unindexed].contains(&limit);
        r.budget_hit |= full;
        Ok(())
    }
}
