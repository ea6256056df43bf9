//! The queue consumer: one message, one job, one invocation.
//!
//! Side effects, in order, and what a crash right after each leaves behind
//! (the crash tests and `docs/ARCHITECTURE.md` enumerate exactly these):
//!
//! 1. **claim** (D1): job `running`, attempts + 1, lease set. Crash: the job
//!    stays `running` until its lease expires; the redelivered message (or
//!    cron, for a lost one) claims it again.
//! 2. **stage** (D1 batch): chunk rows with their vector IDs, chunk count,
//!    step `staged`. Crash: D1 knows every vector ID this version may write;
//!    none is written yet. A rerun stages the same rows (`INSERT OR IGNORE`).
//! 3. **embed** (embedder, no lasting effect). Chunks whose text the live
//!    version also holds, indexed with the same configuration
//!    (`versions.index_config`), are not embedded again: the live vectors'
//!    values are read (one D1 query, index `get_by_ids`) and written in 4
//!    under this version's own IDs. A vector the index does not return is
//!    embedded instead. Reads only: no lasting effect either.
//! 4. **upsert** (index, in batches): new vectors under IDs no other version
//!    uses. Crash: the index holds vectors of a version that is not live;
//!    search filters them out against D1; a rerun overwrites them with the
//!    same values; if the version is abandoned, cron sweeps them.
//! 5. **replace** (D1 batch, atomic): intents for the old live version's
//!    vectors, compare-and-set of `live_version`, intents for our own vectors
//!    if we lost, job `succeeded`/`superseded`. Crash: the new version is
//!    live and served; the old vectors are no longer served and are recorded
//!    as intents.
//! 6. **cleanup** (index deletes, then D1): old vectors deleted in bounded
//!    batches, then their intents and chunk rows removed. Crash: intents
//!    remain and cron drains them; deleting twice is harmless.
//! 7. **ack**: only after 5 committed. A crash before it redelivers the
//!    message, which finds the job `succeeded` and acks.
//!
//! The order upsert → replace → cleanup is the design's first invariant:
//! never break the derived index before the source of truth.

use super::bugs::Bug;
use super::{log_event, Pipeline};
use crate::core::chunk::{chunk_text, ContentType};
use crate::core::failure::{FailureBucket, RetryDecision};
use crate::core::ids::{sha256_hex, vector_id, DocId};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex, VectorMetadata, VectorRecord};
use crate::store::{ConsumeRow, StagedChunk};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// What happened to the chunks of one version: vectors computed by the
/// embedder, and vectors copied from the live version (embedding reuse).
#[derive(Clone, Copy, Debug, Default)]
struct VectorCounts {
    embedded: usize,
    reused: usize,
}

/// A job is stale when its version is no longer the latest, or is not newer
/// than the live one: it must never write again.
fn is_stale(job: &ConsumeRow) -> bool {
    job.version < job.latest_version || job.live_version.is_some_and(|l| l >= job.version)
}

/// What the entry point must do with the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeOutcome {
    /// Acknowledge: the job reached a final state, or the message is stale,
    /// duplicate or unknown. `reason` is a static, loggable code.
    Ack { reason: &'static str },
    /// Ask Queues to deliver the message again after `delay_seconds`.
    Retry { delay_seconds: u32 },
    /// The job ended `failed` or `dead`: send the message to the dead-letter
    /// queue (the evidence), then acknowledge it. Redelivery repeats this.
    DeadLetter { reason: &'static str },
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn consume(&self, msg: &JobMessage) -> ConsumeOutcome {
        let outcome = match self.consume_inner(msg).await {
            Ok(o) => o,
            // D1 failed before the job could record anything: nothing changed,
            // retry the message (its lease, if any, protects the job).
            Err(e) => {
                log_event("consume_ledger_unavailable", json!({ "job_id": msg.job_id, "bucket": e.bucket.as_str(), "code": e.code }));
                ConsumeOutcome::Retry { delay_seconds: self.cfg.retry_base_delay_seconds }
            }
        };
        match outcome {
            ConsumeOutcome::Ack { reason } => log_event("consume_ack", json!({ "job_id": msg.job_id, "reason": reason })),
            ConsumeOutcome::DeadLetter { reason } => {
                log_event("consume_dead_letter", json!({ "job_id": msg.job_id, "reason": reason }))
            }
            ConsumeOutcome::Retry { delay_seconds } => {
                log_event("consume_retry", json!({ "job_id": msg.job_id, "delay_seconds": delay_seconds }))
            }
        }
        outcome
    }

    async fn consume_inner(&self, msg: &JobMessage) -> Result<ConsumeOutcome, PortError> {
        let Some(job) = self.store.consume_load(&msg.job_id).await? else {
            return Ok(ConsumeOutcome::Ack { reason: "unknown_job" });
        };
        if job.doc_id != msg.doc_id || job.version != msg.version {
            return Ok(ConsumeOutcome::Ack { reason: "pointer_mismatch" });
        }
        match job.state.as_str() {
            "succeeded" | "superseded" => return Ok(ConsumeOutcome::Ack { reason: "already_final" }),
            "failed" | "dead" => return Ok(ConsumeOutcome::DeadLetter { reason: "already_failed" }),
            _ => {}
        }
        let now = self.clock.now_ms();
        // Stale work is rejected before anything is written.
        if is_stale(&job) {
            return self.supersede(&job, now).await;
        }
        let lease_until = now + i64::from(self.cfg.job_lease_seconds) * 1000;
        let Some(attempt) = self.store.claim(&job.job_id, now, lease_until).await? else {
            // The claim also refuses a version that became stale since the
            // load; tell the two cases apart.
            return match self.store.consume_load(&msg.job_id).await? {
                Some(again) if is_stale(&again) => self.supersede(&again, now).await,
                // Another delivery holds the lease (or just finished): look again later.
                _ => Ok(ConsumeOutcome::Retry { delay_seconds: self.cfg.claim_busy_retry_seconds }),
            };
        };
        match self.run_claimed(&job).await {
            Ok(()) => Ok(ConsumeOutcome::Ack { reason: "committed" }),
            Err(e) => self.fail_attempt(&job, attempt, e).await,
        }
    }

    async fn supersede(&self, job: &ConsumeRow, now: i64) -> Result<ConsumeOutcome, PortError> {
        if self.store.supersede(&job.job_id, now).await? {
            Ok(ConsumeOutcome::Ack { reason: "superseded" })
        } else {
            // A live delivery holds it and will lose the compare-and-set, or
            // it already ended: either way, look once more later.
            Ok(ConsumeOutcome::Retry { delay_seconds: self.cfg.claim_busy_retry_seconds })
        }
    }

    /// Steps 2–6 for a job this delivery holds.
    async fn run_claimed(&self, job: &ConsumeRow) -> Result<(), PortError> {
        let doc_id = DocId::parse(&job.doc_id).map_err(|_| PortError::new(FailureBucket::InputInvalid, "doc_id"))?;
        let mut counts = VectorCounts::default();
        if job.kind == "index" {
            let text = self.store.load_text(&job.doc_id, job.version, job.part_count).await?;
            let content_type = ContentType::parse(&job.content_type)
                .ok_or(PortError::new(FailureBucket::InputInvalid, "content_type"))?;
            let chunks = chunk_text(&text, content_type, self.chunk_config());
            let ids: Vec<String> = chunks.iter().map(|c| vector_id(&doc_id, job.version, c.index)).collect();
            if ids.iter().any(|id| id.len() > self.cfg.vector_id_bytes_max) {
                return Err(PortError::new(FailureBucket::InputInvalid, "vector_id_too_long"));
            }
            let hashes: Vec<String> = chunks.iter().map(|c| sha256_hex(c.text.as_bytes())).collect();
            let staged: Vec<StagedChunk> = chunks
                .iter()
                .zip(ids.iter().zip(&hashes))
                .map(|(c, (id, h))| StagedChunk { i: c.index, id, s: c.start, e: c.end, h, t: c.text })
                .collect();
            let index_config = self.cfg.index_config();
            // 2. stage
            if !self.bugs.has(Bug::UpsertBeforeStage) {
                self.store.stage_chunks(&job.job_id, &job.doc_id, job.version, &staged, &index_config, self.clock.now_ms()).await?;
            }

            // Embedding reuse: chunks whose text the live version holds,
            // embedded with the same configuration, keep their vectors.
            let reusable: HashMap<String, String> = if job.live_version.is_some() {
                let rows = self.store.reusable_vectors(&job.doc_id, job.version, &index_config).await?;
                rows.into_iter().map(|r| (r.content_hash, r.vector_id)).collect()
            } else {
                HashMap::new()
            };

            let base_metadata = self.vector_metadata(job)?;
            // 3 + 4. embed (or reuse) and upsert, in bounded batches.
            for (page_no, page) in chunks.chunks(self.cfg.upsert_batch_size).enumerate() {
                let offset = page_no * self.cfg.upsert_batch_size;
                let mut values = self.reused_values(&hashes[offset..offset + page.len()], &reusable).await;
                counts.reused += values.iter().filter(|v| v.is_some()).count();
                let misses: Vec<usize> = (0..page.len()).filter(|&k| values[k].is_none()).collect();
                for batch in misses.chunks(self.cfg.embed_batch_size) {
                    let texts: Vec<String> = batch.iter().map(|&k| page[k].text.to_string()).collect();
                    let vectors = self.embedder.embed(&texts).await?;
                    if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != self.cfg.embedding_dimensions) {
                        return Err(PortError::new(FailureBucket::EmbedRejected, "embed_shape"));
                    }
                    counts.embedded += texts.len();
                    for (&k, v) in batch.iter().zip(vectors) {
                        values[k] = Some(v);
                    }
                }
                let records: Vec<VectorRecord> = page
                    .iter()
                    .zip(values)
                    .enumerate()
                    .map(|(k, (c, v))| {
                        let mut metadata = base_metadata.clone();
                        metadata.insert("chunk".into(), json!(c.index));
                        VectorRecord { id: ids[offset + k].clone(), values: v.expect("every chunk has a vector"), metadata }
                    })
                    .collect();
                self.index.upsert(&records).await?;
            }
            if self.bugs.has(Bug::UpsertBeforeStage) {
                self.store.stage_chunks(&job.job_id, &job.doc_id, job.version, &staged, &index_config, self.clock.now_ms()).await?;
            }
            self.store.set_step(&job.job_id, "upserted", self.clock.now_ms()).await?;
        }
        if self.bugs.has(Bug::DeleteBeforeReplace) {
            self.store.bug_intents_for_replaced(&job.doc_id, job.version, self.clock.now_ms()).await?;
            self.cleanup_doc(&job.doc_id).await;
        }
        // 5. replace
        let live = self.store.commit(&job.job_id, &job.doc_id, job.version, self.clock.now_ms(), self.bugs).await?;
        log_event(
            "job_committed",
            json!({ "job_id": job.job_id, "live": live, "embedded": counts.embedded, "reused": counts.reused }),
        );
        // 6. cleanup: best effort here; what is left is drained by cron.
        self.cleanup_doc(&job.doc_id).await;
        Ok(())
    }

    /// The values of the live vectors that chunks with these `hashes` can
    /// reuse (`reusable`: content hash → live vector ID), fetched from the
    /// index in batches the index accepts; `None` for a chunk to embed. A
    /// vector the index does not return (not visible yet, or gone), returns
    /// malformed, or a failed fetch, only means embedding that chunk: reuse
    /// is an optimization, never a reason for the job to fail.
    async fn reused_values(&self, hashes: &[String], reusable: &HashMap<String, String>) -> Vec<Option<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; hashes.len()];
        // Live vector ID → positions in this page (a text may repeat).
        let mut wanted: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (k, h) in hashes.iter().enumerate() {
            if let Some(id) = reusable.get(h) {
                wanted.entry(id.as_str()).or_default().push(k);
            }
        }
        let wanted_ids: Vec<String> = wanted.keys().map(|id| id.to_string()).collect();
        for batch in wanted_ids.chunks(self.get_batch_size()) {
            let found = match self.index.get_by_ids(batch).await {
                Ok(found) => found,
                Err(e) => {
                    log_event("reuse_get_failed", json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": batch.len() }));
                    break;
                }
            };
            for rec in found {
                let ok = rec.values.len() == self.cfg.embedding_dimensions && rec.values.iter().all(|x| x.is_finite());
                if let (true, Some(positions)) = (ok, wanted.get(rec.id.as_str())) {
                    for &k in positions {
                        out[k] = Some(rec.values.clone());
                    }
                }
            }
        }
        out
    }

    /// IDs per `get_by_ids` call: the limit the index adapters enforce
    /// (`src/wasm/mod.rs` sets their `get_batch_max` to `DELETE_BATCH_SIZE`;
    /// Vectorize documents none, 100 is safe).
    fn get_batch_size(&self) -> usize {
        self.cfg.delete_batch_size.max(1)
    }

    /// The metadata every vector of this version carries: `doc_id`,
    /// `version` and the document's own (scalar) metadata.
    fn vector_metadata(&self, job: &ConsumeRow) -> Result<VectorMetadata, PortError> {
        let user: serde_json::Map<String, Value> =
            serde_json::from_str(&job.metadata).map_err(|_| PortError::new(FailureBucket::InputInvalid, "metadata"))?;
        let mut m: VectorMetadata = user.into_iter().collect();
        m.insert("doc_id".into(), json!(job.doc_id));
        m.insert("version".into(), json!(job.version));
        Ok(m)
    }

    /// Deletes this document's due cleanup intents, in bounded batches.
    pub(super) async fn cleanup_doc(&self, doc_id: &str) {
        let mut budget = self.cfg.cron_cleanup_intents_max;
        while budget > 0 {
            let now = self.clock.now_ms();
            let limit = self.cfg.delete_batch_size.min(budget);
            let ids = match self.store.intents_due_for_doc(doc_id, now, limit).await {
                Ok(ids) if !ids.is_empty() => ids,
                _ => return,
            };
            budget = budget.saturating_sub(ids.len());
            if !self.delete_vectors(&ids).await {
                return;
            }
        }
    }

    /// Deletes `ids` from the index, then removes their intents; on a
    /// failure, backs the intents off. Returns whether it succeeded.
    pub(super) async fn delete_vectors(&self, ids: &[String]) -> bool {
        let now = self.clock.now_ms();
        if self.bugs.has(Bug::IntentRemovedBeforeDelete) {
            if self.store.intents_done(ids).await.is_err() {
                return false;
            }
        }
        match self.index.delete_by_ids(ids).await {
            Ok(()) => match self.store.intents_done(ids).await {
                Ok(()) => true,
                Err(e) => {
                    log_event("cleanup_ledger_failed", json!({ "bucket": e.bucket.as_str(), "code": e.code }));
                    false
                }
            },
            Err(e) => {
                log_event("cleanup_delete_failed", json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": ids.len() }));
                let not_before = now + i64::from(self.cfg.retry_base_delay_seconds) * 1000;
                let _ = self.store.intents_back_off(ids, not_before).await;
                false
            }
        }
    }

    async fn fail_attempt(&self, job: &ConsumeRow, attempt: u32, e: PortError) -> Result<ConsumeOutcome, PortError> {
        let now = self.clock.now_ms();
        let decision = self.retry_policy().decide(e.bucket, &job.job_id, attempt);
        log_event(
            "job_attempt_failed",
            json!({ "job_id": job.job_id, "attempt": attempt, "bucket": e.bucket.as_str(), "code": e.code,
                    "decision": match decision { RetryDecision::RetryAfter { .. } => "retry", RetryDecision::Fail => "failed", RetryDecision::GiveUp => "dead" } }),
        );
        match decision {
            RetryDecision::RetryAfter { delay_seconds } => {
                let next_at = now + i64::from(delay_seconds) * 1000;
                self.store.job_up_for_retry(&job.job_id, e.bucket, now, next_at).await?;
                Ok(ConsumeOutcome::Retry { delay_seconds })
            }
            RetryDecision::Fail => {
                self.store.job_end_failed(&job.job_id, &job.doc_id, job.version, e.bucket, "failed", now).await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "failed" })
            }
            RetryDecision::GiveUp => {
                self.store.job_end_failed(&job.job_id, &job.doc_id, job.version, e.bucket, "dead", now).await?;
                Ok(ConsumeOutcome::DeadLetter { reason: "dead" })
            }
        }
    }
}
