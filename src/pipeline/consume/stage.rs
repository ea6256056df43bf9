//! Step 2, stage: the generations a version is written in, its chunks in
//! each (with that generation's chunker), and one D1 batch that records
//! every chunk row and vector ID before any vector is written.

use super::page::Models;
use crate::bugs::Bug;
use crate::config::CONSUME_RESERVE;
use crate::core::chunk::{Chunk, ContentType};
use crate::core::failure::FailureBucket;
use crate::core::ids::{occurrences, sha256_hex, split_key, vector_id, DocKey};
use crate::core::index_config::EmbedModel;
use crate::core::row_plan::{plan_rows, OpenRow};
use crate::core::state::GenerationState;
use crate::pipeline::budget::{Budget, Usage};
use crate::pipeline::Pipeline;
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex, VectorRecord};
use crate::store::{ClaimRow, ConsumeRow, GenerationRow, OpenRows, StagedChunk, Staging};

/// One target generation's chunks of the version, their vector IDs and
/// content hashes, in chunk order.
struct TargetChunks<'t> {
    generation: u32,
    chunks: Vec<Chunk<'t>>,
    ids: Vec<String>,
    hashes: Vec<String>,
}

/// What a staging writes: the new rows (target by target, each in chunk
/// order), the open rows it closes, how many it keeps, and where its new
/// rows stop being valid.
struct StagePlan<'a> {
    rows: Vec<StagedChunk<'a>>,
    close: Vec<i64>,
    kept: usize,
    to_version: Option<u32>,
}

/// Plans a staging against the document's open rows (`core::row_plan`,
/// per target generation): an unchanged chunk keeps its row, a new one
/// gets a row with an order key between its neighbours', an open row the
/// version lacks is closed. An index job (its version the latest) closes
/// every open row of a generation it does not write; a build job touches
/// its own generation only, and a build of a live version that is no
/// longer the latest writes rows valid at that version only (the open
/// rows are a newer version's).
fn plan_staging<'a>(
    job: &ConsumeRow,
    per_target: &'a [TargetChunks<'a>],
    open: &OpenRows,
) -> StagePlan<'a> {
    let stale_build = job.build_generation.is_some() && open.latest_version != job.version;
    let mut plan = StagePlan {
        rows: Vec::new(),
        close: Vec::new(),
        kept: 0,
        to_version: stale_build.then_some(job.version + 1),
    };
    if job.build_generation.is_none() {
        let targeted = |g: u32| per_target.iter().any(|t| t.generation == g);
        plan.close.extend(
            open.rows
                .iter()
                .filter(|r| r.generation.is_some_and(|g| !targeted(g)))
                .filter_map(|r| r.chunk_id),
        );
    }
    for t in per_target {
        let open_g: Vec<OpenRow<'_>> = open
            .rows
            .iter()
            .filter(|r| !stale_build && r.generation == Some(t.generation))
            .filter_map(|r| {
                Some(OpenRow {
                    chunk_id: r.chunk_id?,
                    vector_id: r.vector_id.as_deref()?,
                    ord: r.ord?,
                })
            })
            .collect();
        let ids: Vec<&str> = t.ids.iter().map(String::as_str).collect();
        let p = plan_rows(&open_g, &ids);
        plan.close.extend(p.close);
        for (i, c) in t.chunks.iter().enumerate() {
            if p.kept[i].is_some() {
                plan.kept += 1;
                continue;
            }
            plan.rows.push(StagedChunk {
                g: t.generation,
                o: p.ords[i],
                id: &t.ids[i],
                h: &t.hashes[i],
                t: c.text,
            });
        }
    }
    plan
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// The number of chunk rows to write: from the claim if an earlier
    /// attempt staged them, else by staging now, with the model of each
    /// generation staged (`None` when an earlier attempt staged: the pages
    /// read them). `None`: staging does not fit in the budget (checkpoint).
    pub(super) async fn staged(
        &self,
        job: &ConsumeRow,
        claim: &ClaimRow,
        doc_id: &DocKey,
        budget: &Budget,
        usage: &Usage,
    ) -> Result<Option<(u32, Option<Models>)>, PortError> {
        if claim.step == "staged" {
            let rows = claim.rows_total.ok_or(PortError::new(
                FailureBucket::Internal,
                "rows_total_missing",
            ))?;
            return Ok(Some((rows, None)));
        }
        // The generations to write, the text, the open rows, one staging batch.
        if !budget.allows(usage, self.clock.now_ms(), 4, CONSUME_RESERVE) {
            return Ok(None);
        }
        let (rows, models) = self.stage(job, doc_id).await?;
        Ok(Some((rows, Some(models))))
    }

    /// Chunks the version's text for each generation it is written in (a
    /// build job: its own; an index job: the active one, one being built,
    /// one retained, each with its own chunker, if this Worker can embed
    /// with its model) and stages the chunk rows with their vector IDs,
    /// atomically with the step `staged`. Returns the number of rows and
    /// each target's model.
    async fn stage(&self, job: &ConsumeRow, doc_id: &DocKey) -> Result<(u32, Models), PortError> {
        let (targets, skipped, adopt) = self.stage_targets(job).await?;
        let models = self.models_of(&targets);
        let text = self
            .store
            .load_text(&job.doc_id, job.text_version, job.part_count)
            .await?;
        #[cfg(feature = "panic-probe")]
        if let Some(at) = text.find("PANIC-PROBE") {
            // Test builds only: a panic whose message quotes the document,
            // to show that no log line carries it (tests/e2e/panic.test.mjs).
            let quoted: String = text[at..].chars().take(200).collect();
            panic!("panic probe in {}: {quoted}", job.doc_id);
        }
        let content_type = ContentType::parse(&job.content_type)
            .ok_or(PortError::new(FailureBucket::InputInvalid, "content_type"))?;
        let metadata = canonical_metadata(&job.metadata)?;
        let per_target = self.chunk_targets(&targets, doc_id, &metadata, &text, content_type)?;
        let open = self.store.open_rows(&job.doc_id).await?;
        let plan = plan_staging(job, &per_target, &open);
        if self.bugs.has(Bug::UpsertBeforeStage) {
            let model = models.get(&per_target[0].generation).cloned().flatten();
            let model = model.ok_or(PortError::new(FailureBucket::Internal, "no_target"))?;
            self.bug_upsert_before_stage(job, &per_target[0], &model)
                .await?;
        }
        // The version's own chunk count and configuration: those of the
        // generation search serves (the first target if this Worker does not
        // write the active one).
        let recorded = targets
            .iter()
            .position(|g| g.state == GenerationState::Active)
            .unwrap_or(0);
        let (recorded_chunks, recorded_config) =
            match (per_target.get(recorded), targets.get(recorded)) {
                (Some(t), Some(g)) => (t.chunks.len(), g.index_config.clone()),
                _ => return Err(PortError::new(FailureBucket::Internal, "no_target")),
            };
        let stage = Staging {
            rows: &plan.rows,
            close: &plan.close,
            kept: plan.kept,
            stamp: open.stamp,
            to_version: plan.to_version,
            version_chunks: job
                .build_generation
                .is_none()
                .then_some((recorded_chunks, recorded_config.as_str())),
            adopt_config: adopt.as_deref(),
            build_generation: job.build_generation,
            keyword_key: open.keyword_key,
            skipped: &skipped,
        };
        let rows = self
            .store
            .stage_chunks(
                &job.job_id,
                &job.doc_id,
                job.version,
                &stage,
                self.clock.now_ms(),
                self.bugs,
            )
            .await?;
        Ok((rows, models))
    }

    /// The generations the job writes (`GENERATIONS_TARGET`, those whose
    /// model this Worker can embed with, `Config::embed_model_for`; a build
    /// job: its own), those it leaves out for want of their model (the
    /// staging records them: migration 0031), and the configuration
    /// generation 1 adopts if it has none yet.
    async fn stage_targets(
        &self,
        job: &ConsumeRow,
    ) -> Result<(Vec<GenerationRow>, Vec<u32>, Option<String>), PortError> {
        let mut generations = self.store.target_generations().await?;
        // Generation 1 with no configuration yet (a ledger from before
        // generations, or a new one): it adopts what its vectors were made
        // with, else this Worker's; this staging already chunks by it.
        let ours = self.cfg.index_config();
        let adopt = match generations
            .iter()
            .any(|g| g.generation == 1 && g.index_config.is_empty())
        {
            true => Some(
                self.store
                    .adoptable_config()
                    .await?
                    .unwrap_or_else(|| ours.clone()),
            ),
            false => None,
        };
        if let Some(config) = &adopt {
            for g in generations
                .iter_mut()
                .filter(|g| g.generation == 1 && g.index_config.is_empty())
            {
                g.index_config = config.clone();
            }
        }
        let (targets, skipped): (Vec<GenerationRow>, Vec<GenerationRow>) = generations
            .into_iter()
            .filter(|g| job.build_generation.is_none_or(|b| b == g.generation))
            .partition(|g| self.cfg.embed_model_for(&g.index_config).is_some());
        if targets.is_empty() {
            // This Worker can embed for none of the generations in use
            // (another backend, other dimensions): a deploy fixes it.
            return Err(PortError::new(
                FailureBucket::IndexMisconfigured,
                "generation_embedder_mismatch",
            ));
        }
        let skipped = skipped.iter().map(|g| g.generation).collect();
        Ok((targets, skipped, adopt))
    }

    /// Per target generation: its chunks of `text` (by the chunker its
    /// recorded configuration names), their content hashes and vector IDs
    /// (from the document, the generation, the content, its occurrence and
    /// the document's canonical `metadata`: `core::ids::vector_id`).
    fn chunk_targets<'t>(
        &self,
        targets: &[GenerationRow],
        doc_id: &DocKey,
        metadata: &str,
        text: &'t str,
        content_type: ContentType,
    ) -> Result<Vec<TargetChunks<'t>>, PortError> {
        let mut per_target = Vec::with_capacity(targets.len());
        for g in targets {
            let chunker = self
                .cfg
                .chunking_of(&g.index_config)
                .ok_or(PortError::new(FailureBucket::Internal, "generation_config"))?;
            let chunks = chunker.chunk(text, content_type);
            let hashes: Vec<String> = chunks
                .iter()
                .map(|c| sha256_hex(c.text.as_bytes()))
                .collect();
            let ids: Vec<String> = hashes
                .iter()
                .zip(occurrences(hashes.iter().map(String::as_str)))
                .map(|(h, k)| vector_id(doc_id, g.generation, h, k, metadata))
                .collect();
            if ids.iter().any(|id| id.len() > self.cfg.vector_id_bytes_max) {
                return Err(PortError::new(
                    FailureBucket::InputInvalid,
                    "vector_id_too_long",
                ));
            }
            per_target.push(TargetChunks {
                generation: g.generation,
                chunks,
                ids,
                hashes,
            });
        }
        Ok(per_target)
    }

    /// The seeded bug `UpsertBeforeStage`: vectors written before D1 knows
    /// their IDs.
    async fn bug_upsert_before_stage(
        &self,
        job: &ConsumeRow,
        target: &TargetChunks<'_>,
        model: &EmbedModel,
    ) -> Result<(), PortError> {
        let page = &target.chunks[..target.chunks.len().min(self.cfg.upsert_batch_size)];
        let texts: Vec<String> = page.iter().map(|c| c.text.to_string()).collect();
        let metadata = self.vector_metadata(job)?;
        let records: Vec<VectorRecord> = self
            .embedder
            .embed(model, &texts)
            .await?
            .into_iter()
            .zip(&target.ids)
            .map(|(values, id)| VectorRecord {
                id: id.clone(),
                namespace: split_key(&job.doc_id).0.to_string(),
                values,
                metadata: metadata.clone(),
            })
            .collect();
        self.index.upsert(&records).await
    }
}

/// A version's user metadata (a JSON object) in canonical form: keys in
/// order, no whitespace. Part of each vector's identity.
fn canonical_metadata(stored: &str) -> Result<String, PortError> {
    let user: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_str(stored)
        .map_err(|_| PortError::new(FailureBucket::InputInvalid, "metadata"))?;
    serde_json::to_string(&user)
        .map_err(|_| PortError::new(FailureBucket::InputInvalid, "metadata"))
}
