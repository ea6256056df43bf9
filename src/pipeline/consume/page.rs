//! Steps 3 and 4, page by page: read a page of the staged rows whose vector
//! the index does not hold yet (`CONSUME_PAGE`: an unchanged chunk has the
//! live version's vector ID, so it is kept, and costs nothing), keep the
//! prefix that fits in the budget, reuse the live version's vector values
//! where the same text has another ID (`get_by_ids`, reads only), embed the
//! rest, each row with its generation's model (one embed call per model and
//! batch), and upsert the page.

use crate::config::CONSUME_RESERVE;
use crate::core::failure::FailureBucket;
use crate::core::ids::split_key;
use crate::core::index_config::EmbedModel;
use crate::pipeline::budget::{Budget, Usage};
use crate::pipeline::{log_event, Pipeline};
use crate::ports::{
    Clock, Database, Embedder, JobQueue, PortError, VectorIndex, VectorMetadata, VectorRecord,
};
use crate::store::{ConsumeRow, GenerationRow, PageRow};
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::BTreeMap;

/// The model of each generation still written (by number), as this Worker
/// embeds for it; `None`: one it cannot embed for. A generation absent is
/// no longer written (retiring, retired or abandoned since the staging):
/// its rows are never served and become cleanup intents, so they are not
/// written.
pub(super) type Models = BTreeMap<u32, Option<EmbedModel>>;

/// Where a page starts (after position `from`) among the version's
/// `rows_total` rows.
#[derive(Clone, Copy)]
struct PageAt {
    from: u32,
    rows_total: u32,
}

/// What a page does with one row: embed or reuse it for a model, or skip it.
type RowModels<'m> = Vec<Option<&'m EmbedModel>>;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Steps 3 and 4 for every chunk from `done` on, page by page, while
    /// the budget lasts, with the model of each generation (`models`, from
    /// the staging; `None`: an earlier invocation staged, so they are read
    /// once, one D1 read). `done` is a position among the `chunk_count`
    /// rows, in (generation, chunk) order: every row up to it has its
    /// vector. Returns whether all are written (`false`: checkpoint).
    pub(super) async fn write_pages(
        &self,
        job: &ConsumeRow,
        chunk_count: u32,
        models: Option<Models>,
        done: &Cell<u32>,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<bool, PortError> {
        if done.get() >= chunk_count {
            return Ok(true);
        }
        let models = match models {
            Some(m) => m,
            None => {
                // The read, and a page after it.
                if !budget.allows(usage, self.clock.now_ms(), 4, CONSUME_RESERVE) {
                    return Ok(false);
                }
                self.models_of(&self.store.target_generations().await?)
            }
        };
        let base_metadata = self.vector_metadata(job)?;
        while done.get() < chunk_count {
            if !budget.allows(usage, self.clock.now_ms(), 3, CONSUME_RESERVE) {
                return Ok(false);
            }
            let page = PageAt {
                from: done.get(),
                rows_total: chunk_count,
            };
            match self
                .embed_and_upsert_page(job, page, &models, &base_metadata, budget, usage)
                .await?
            {
                None => return Ok(false),
                Some(to) => done.set(to),
            }
        }
        Ok(true)
    }

    /// The model this Worker embeds with for each of `generations`.
    pub(super) fn models_of(&self, generations: &[GenerationRow]) -> Models {
        generations
            .iter()
            .map(|g| (g.generation, self.cfg.embed_model_for(&g.index_config)))
            .collect()
    }

    /// Steps 3 and 4 for the rows after position `page.from`: reads a page
    /// of the rows whose vector is to write, keeps the prefix whose reads,
    /// embeddings and upsert fit in the budget, and upserts it. Returns the
    /// position every row up to which now has its vector (the rows between
    /// kept theirs), or `None`: nothing fit (checkpoint).
    async fn embed_and_upsert_page(
        &self,
        job: &ConsumeRow,
        page: PageAt,
        models: &Models,
        base_metadata: &VectorMetadata,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<Option<u32>, PortError> {
        let PageAt { from, rows_total } = page;
        let limit = self.cfg.upsert_batch_size;
        let mut rows = self
            .store
            .consume_page(&job.doc_id, job.version, from, limit, job.build_generation)
            .await?;
        let Some(first) = rows.first() else {
            // Every row left keeps its vector.
            usage
                .kept
                .set(usage.kept.get() + u64::from(rows_total - from));
            return Ok(Some(rows_total));
        };
        if first.rows_now != rows_total {
            // The version's chunk count promises rows the ledger does not hold.
            return Err(PortError::new(FailureBucket::Internal, "chunks_missing"));
        }
        // The page holds every row to write after `from`.
        let last_page = rows.len() < limit;
        let read = rows.len();
        let mut row_models = row_models(&rows, models)?;
        // Keep the longest prefix whose get and embed calls fit, with the upsert.
        let left = budget.left(usage, self.clock.now_ms(), CONSUME_RESERVE + 1);
        let keep = self.fitting_prefix(&rows, &row_models, left);
        rows.truncate(keep);
        row_models.truncate(keep);
        if rows.is_empty() {
            return Ok(None);
        }
        let mut values = self.reused_values(&rows, &row_models).await;
        let copied: Vec<bool> = values.iter().map(Option::is_some).collect();
        self.embed_misses(&rows, &row_models, &mut values, budget, usage)
            .await?;
        // The page is cut before the first row to write left without a vector.
        let cut = values
            .iter()
            .zip(&row_models)
            .position(|(v, m)| v.is_none() && m.is_some())
            .unwrap_or(values.len());
        if cut == 0 {
            return Ok(None);
        }
        let reached = match last_page && cut == read {
            true => rows_total,
            false => rows[cut - 1].position,
        };
        let reused_here = copied[..cut].iter().filter(|&&c| c).count() as u64;
        let records: Vec<VectorRecord> = rows[..cut]
            .iter()
            .zip(values)
            .filter_map(|(r, v)| v.map(|v| (r, v)))
            .map(|(r, v)| {
                let mut metadata = base_metadata.clone();
                metadata.insert("generation".into(), json!(r.generation));
                VectorRecord {
                    id: r.vector_id.clone(),
                    namespace: split_key(&job.doc_id).0.to_string(),
                    values: v,
                    metadata,
                }
            })
            .collect();
        if !records.is_empty() {
            self.index.upsert(&records).await?;
        }
        usage.reused.set(usage.reused.get() + reused_here);
        // The rows passed over, not in the page, kept their vectors.
        let kept = u64::from(reached - from).saturating_sub(cut as u64);
        usage.kept.set(usage.kept.get() + kept);
        Ok(Some(reached))
    }

    /// The length of the longest prefix of `rows` whose `get_by_ids` calls
    /// (for the chunks to reuse) and embed calls (for the rest: calls per
    /// model) fit in `left` subrequests. Rows to skip cost nothing.
    fn fitting_prefix(&self, rows: &[PageRow], row_models: &RowModels<'_>, left: u64) -> usize {
        let (get_max, embed_max) = (
            self.get_batch_size() as u64,
            self.cfg.embed_batch_size as u64,
        );
        let (mut reuse, mut keep) = (0u64, 0usize);
        // Texts to embed per model, in the order the models appear.
        let mut fresh: Vec<(&EmbedModel, u64)> = Vec::new();
        for (r, model) in rows.iter().zip(row_models) {
            let Some(model) = *model else {
                keep += 1;
                continue;
            };
            let mut fresh2 = fresh.clone();
            let reuse2 = if r.reuse_id.is_some() {
                reuse + 1
            } else {
                match fresh2.iter_mut().find(|(m, _)| *m == model) {
                    Some((_, n)) => *n += 1,
                    None => fresh2.push((model, 1)),
                }
                reuse
            };
            let embeds: u64 = fresh2.iter().map(|(_, n)| n.div_ceil(embed_max)).sum();
            if reuse2.div_ceil(get_max) + embeds > left {
                break;
            }
            (reuse, fresh, keep) = (reuse2, fresh2, keep + 1);
        }
        keep
    }

    /// Embeds the chunks of `rows` to write that have no value yet, model
    /// by model (in the order the models appear), in calls of at most
    /// `EMBED_BATCH_SIZE`; a reuse that failed makes more to embed than
    /// planned, so each call asks the budget again, and the page is cut (by
    /// the caller) before the first chunk left without a vector.
    async fn embed_misses(
        &self,
        rows: &[PageRow],
        row_models: &RowModels<'_>,
        values: &mut [Option<Vec<f32>>],
        budget: &Budget,
        usage: &Usage,
    ) -> Result<(), PortError> {
        let mut groups: Vec<(&EmbedModel, Vec<usize>)> = Vec::new();
        for (k, model) in row_models.iter().enumerate() {
            let Some(model) = *model else { continue };
            if values[k].is_some() {
                continue;
            }
            match groups.iter_mut().find(|(m, _)| *m == model) {
                Some((_, ks)) => ks.push(k),
                None => groups.push((model, vec![k])),
            }
        }
        for (model, misses) in &groups {
            for batch in misses.chunks(self.cfg.embed_batch_size) {
                if !budget.allows(usage, self.clock.now_ms(), 2, CONSUME_RESERVE) {
                    return Ok(());
                }
                let texts: Vec<String> = batch.iter().map(|&k| rows[k].text.clone()).collect();
                let vectors = self.embedder.embed(model, &texts).await?;
                if vectors.len() != texts.len()
                    || vectors.iter().any(|v| v.len() != model.dimensions)
                {
                    return Err(PortError::new(FailureBucket::EmbedRejected, "embed_shape"));
                }
                usage
                    .embedded
                    .set(usage.embedded.get() + texts.len() as u64);
                for (&k, v) in batch.iter().zip(vectors) {
                    values[k] = Some(v);
                }
            }
        }
        Ok(())
    }

    /// The values of the live vectors that the chunks in `rows` can reuse
    /// (`reuse_id`), fetched from the index in batches the index accepts;
    /// `None` for a chunk to embed. A vector the index does not return (not
    /// visible yet, or gone), returns malformed, or a failed fetch, only
    /// means embedding that chunk: reuse is an optimization, never a reason
    /// for the job to fail.
    async fn reused_values(
        &self,
        rows: &[PageRow],
        row_models: &RowModels<'_>,
    ) -> Vec<Option<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; rows.len()];
        // Live vector ID → positions in this page (a text may repeat); the
        // live vector is of the same generation, so of the same model.
        let mut wanted: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (k, (r, model)) in rows.iter().zip(row_models).enumerate() {
            if let (Some(id), Some(_)) = (&r.reuse_id, model) {
                wanted.entry(id.as_str()).or_default().push(k);
            }
        }
        let wanted_ids: Vec<String> = wanted.keys().map(|id| id.to_string()).collect();
        for batch in wanted_ids.chunks(self.get_batch_size()) {
            let found = match self.index.get_by_ids(batch).await {
                Ok(found) => found,
                Err(e) => {
                    log_event(
                        "reuse_get_failed",
                        json!({ "bucket": e.bucket.as_str(), "code": e.code, "ids": batch.len() }),
                    );
                    break;
                }
            };
            for rec in found {
                let ok = rec.values.len() == self.cfg.embedding_dimensions
                    && rec.values.iter().all(|x| x.is_finite());
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

    /// The metadata every vector of this version carries: `doc_id` and the
    /// document's own (scalar) metadata, both part of the vector's identity
    /// (`core::ids::vector_id`); never the version or the chunk's position,
    /// which a vector shared by several versions does not have.
    pub(super) fn vector_metadata(&self, job: &ConsumeRow) -> Result<VectorMetadata, PortError> {
        let user: serde_json::Map<String, Value> = serde_json::from_str(&job.metadata)
            .map_err(|_| PortError::new(FailureBucket::InputInvalid, "metadata"))?;
        let mut m: VectorMetadata = user.into_iter().collect();
        // The document's own ID: the tenant is the vector's namespace.
        m.insert("doc_id".into(), json!(split_key(&job.doc_id).1));
        Ok(m)
    }
}

/// Per row of a page, the model to write it with (`None`: its generation is
/// no longer written, so the row is skipped), or `IndexMisconfigured` for a
/// row of a generation still written that this Worker cannot embed for (the
/// configuration changed since the staging: a deploy fixes it).
fn row_models<'m>(rows: &[PageRow], models: &'m Models) -> Result<RowModels<'m>, PortError> {
    rows.iter()
        .map(|r| match models.get(&r.generation) {
            None => Ok(None),
            Some(Some(model)) => Ok(Some(model)),
            Some(None) => Err(PortError::new(
                FailureBucket::IndexMisconfigured,
                "generation_embedder_mismatch",
            )),
        })
        .collect()
}
