//! Step 4: the next `CRON_VERIFY_CHUNKS_MAX` live chunks (of versions live
//! for longer than `INDEX_VISIBILITY_WINDOW_SECONDS`) are checked against
//! the index with `getByIds`, from a cursor kept in D1; a document with a
//! missing vector is marked `repair_needed` and its live version re-run.

use super::Run;
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::VerifyRow;
use serde_json::json;
use std::collections::HashSet;

/// IDs per `getByIds` call of the verification.
const VERIFY_GET_BATCH: usize = 100;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Step 4, if its worst case fits: the cursor, the page, a `getByIds`
    /// per 100 chunks, the cursor update. The repairs are not in it: an
    /// estimate that a sample finds few; each costs 4 calls (the mark, the
    /// version's kind, the re-run batch, the send), which may take the run
    /// past its budget by that much.
    pub(super) async fn verify_step(&self, run: &mut Run<'_>) {
        let worst = 3 + (self.cfg.cron_verify_chunks_max as u64).div_ceil(VERIFY_GET_BATCH as u64);
        if !self.allows(run, worst) {
            return;
        }
        match self.verify_sample().await {
            Ok((checked, repaired)) => {
                run.report.chunks_verified = checked;
                run.report.documents_repaired = repaired.len() as u64;
                for (doc_id, _) in &repaired {
                    run.report.tenant_of(doc_id).documents_repaired += 1;
                }
            }
            Err(e) => run.report.failed(e.bucket),
        }
    }

    /// Checks the next page of live chunks (older than the visibility
    /// window) against the index, continuing from a cursor kept in D1. A
    /// document with a missing vector is marked `repair_needed` and its live
    /// version re-run. Returns (chunks checked, documents repaired).
    async fn verify_sample(&self) -> Result<(u64, Vec<(String, u32)>), PortError> {
        if self.cfg.cron_verify_chunks_max == 0 {
            return Ok((0, Vec::new()));
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
        let missing = self.missing_vectors(&rows).await?;
        for (doc_id, version) in &missing {
            log_event(
                "repair_missing_vectors",
                json!({ "doc_id": doc_id, "version": version }),
            );
            self.store.mark_repair_needed(doc_id, *version).await?;
            self.rerun_live_version(doc_id, *version).await?;
        }
        self.store.set_cursor("verify", &next).await?;
        Ok((rows.len() as u64, missing))
    }

    /// The (document, version) pairs of `rows` with a vector the index does
    /// not return, in first-seen order.
    async fn missing_vectors(&self, rows: &[VerifyRow]) -> Result<Vec<(String, u32)>, PortError> {
        let mut missing: Vec<(String, u32)> = Vec::new();
        for page in rows.chunks(VERIFY_GET_BATCH) {
            let ids: Vec<String> = page.iter().map(|r| r.vector_id.clone()).collect();
            let found: HashSet<String> = self
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
        Ok(missing)
    }
}
