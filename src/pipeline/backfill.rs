//! Reindexing: one document, or a backfill over many, and index generations.
//!
//! A backfill is the same job run again for many keys: a record in D1 with
//! a cursor (doc_id order), advanced a page at a time by the POST that
//! starts it and then by cron, pausable and cancellable, each page one D1
//! batch (jobs, items, cursor) before its queue messages. Scope `all` and
//! `filter` re-run each live version as a new version (same content,
//! through the normal protocol). Scope `config` builds every live version's
//! vectors in a new generation (the running configuration) alongside the
//! active one, which search keeps serving; when every live document has
//! them, one D1 batch switches generations. The previous generation is
//! retained (and still written) until it is retired, so the switch can be
//! rolled back; retiring turns its chunk rows into cleanup intents.

use super::{log_event, Pipeline};
use crate::bugs::Bug;
use crate::core::failure::FailureBucket;
use crate::core::ids::{job_id, DocId};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{BackfillRow, NewBackfill};
use serde_json::{json, Value};

/// What a backfill covers.
#[derive(Clone, Debug, PartialEq)]
pub enum BackfillScope {
    /// Every live document: re-run as a new version.
    All,
    /// Live documents whose metadata has every key/value of the filter.
    Filter(serde_json::Map<String, Value>),
    /// Every live document, built in a new generation for the running
    /// configuration, then switched to.
    Config,
}

/// Why a request about reindexing was refused: HTTP status, stable code, message.
pub type Refusal = (u16, &'static str, String);

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// `GET /v1/admin/generations`.
    pub async fn generations_view(&self) -> Result<Value, PortError> {
        let rows = self.store.generations_list().await?;
        let ours = self.cfg.index_config();
        let mut active = Value::Null;
        let gens: Vec<Value> = rows
            .into_iter()
            .map(|mut r| {
                if r["state"] == "active" {
                    active = r["generation"].clone();
                }
                // Generation 1 before its first staging: the running configuration.
                let raw = r["index_config"].as_str().unwrap_or_default().to_string();
                let raw = if raw.is_empty() { ours.clone() } else { raw };
                r["index_config"] = serde_json::from_str(&raw).unwrap_or(Value::Null);
                r
            })
            .collect();
        Ok(json!({
            "active": active,
            "configured": serde_json::from_str::<Value>(&ours).unwrap_or(Value::Null),
            "generations": gens,
        }))
    }

    /// Makes a retained generation active again (a rollback, or forward
    /// again after one). `Ok(Err(..))`: refused.
    pub async fn activate_generation(
        &self,
        generation: u32,
    ) -> Result<Result<Value, Refusal>, PortError> {
        let Some(state) = self.generation_state(generation).await? else {
            return Ok(Err((
                404,
                "generation_not_found",
                format!("no generation {generation}"),
            )));
        };
        if state != "retained" {
            return Ok(Err((
                409,
                "generation_not_retained",
                format!("generation {generation} is {state}, not retained"),
            )));
        }
        if !self.switch_to(generation, None).await? {
            return Ok(Err((
                409,
                "generation_incomplete",
                format!("generation {generation} lacks vectors of live documents"),
            )));
        }
        Ok(Ok(self.generations_view().await?))
    }

    /// Retires a retained or abandoned generation: cron deletes its vectors.
    pub async fn retire_generation(
        &self,
        generation: u32,
    ) -> Result<Result<Value, Refusal>, PortError> {
        let Some(state) = self.generation_state(generation).await? else {
            return Ok(Err((
                404,
                "generation_not_found",
                format!("no generation {generation}"),
            )));
        };
        let now = self.clock.now_ms();
        let changed = self.store.generation_retire(generation, now).await?;
        if !changed && !matches!(state.as_str(), "retiring" | "retired") {
            return Ok(Err((
                409,
                "generation_in_use",
                format!(
                    "generation {generation} is {state}; only a retained or abandoned one retires"
                ),
            )));
        }
        Ok(Ok(self.generations_view().await?))
    }

    async fn generation_state(&self, generation: u32) -> Result<Option<String>, PortError> {
        let rows = self.store.generations_list().await?;
        Ok(rows
            .iter()
            .find(|r| r["generation"].as_u64() == Some(u64::from(generation)))
            .and_then(|r| r["state"].as_str().map(str::to_string)))
    }

    /// The switch: `generation` (being built, or retained) becomes active,
    /// the active one retained, in one D1 batch whose statements re-check
    /// that every live document has its vectors there; with `backfill`, the
    /// backfill that built it completes in the same batch. Returns whether
    /// it switched.
    async fn switch_to(&self, generation: u32, backfill: Option<&str>) -> Result<bool, PortError> {
        let switched = self
            .store
            .generation_switch(generation, backfill, self.clock.now_ms())
            .await?;
        if switched {
            log_event("generation_switched", json!({ "active": generation }));
        }
        Ok(switched)
    }

    /// `POST /v1/documents/{doc_id}/reindex`: the live version re-run as a
    /// new version through the queue. Returns (new version, job id).
    pub async fn reindex_document(
        &self,
        doc_id: &str,
    ) -> Result<Result<(u32, String), Refusal>, PortError> {
        let rows = self.store.document_views(&[doc_id]).await?;
        let Some(d) = rows.into_iter().next() else {
            return Ok(Err((404, "document_not_found", "no such document".into())));
        };
        // A latest version that failed (not live) is re-run itself: the
        // client's way to resubmit it.
        let latest_failed = matches!(d.job_state.as_deref(), Some("failed" | "dead"))
            && d.live_version.is_none_or(|l| l < d.latest_version);
        if latest_failed {
            return match self.rerun_version(doc_id, d.latest_version).await? {
                Some(done) => Ok(Ok(done)),
                None => Ok(Err((
                    409,
                    "document_indexing",
                    "a newer version arrived meanwhile".into(),
                ))),
            };
        }
        let (Some(live), Some(0)) = (d.live_version, d.live_is_delete) else {
            return Ok(Err((
                409,
                "document_not_indexed",
                "the document has no live version to reindex".into(),
            )));
        };
        if d.latest_version != live {
            return Ok(Err((
                409,
                "document_indexing",
                format!(
                    "version {} is being indexed; it will use the current configuration",
                    d.latest_version
                ),
            )));
        }
        match self.rerun_live_version(doc_id, live).await? {
            Some(done) => Ok(Ok(done)),
            None => Ok(Err((
                409,
                "document_indexing",
                "a newer version arrived meanwhile".into(),
            ))),
        }
    }

    /// `POST /v1/admin/reindex`: starts a backfill and enqueues its first page.
    pub async fn start_backfill(
        &self,
        scope: &BackfillScope,
        page_size: u32,
    ) -> Result<Result<Value, Refusal>, PortError> {
        let open = self.store.backfill_running().await?;
        let paused = self.store.backfills(20).await?;
        if open.is_some() || paused.iter().any(|b| b.state == "paused") {
            return Ok(Err((
                409,
                "backfill_active",
                "a backfill is running or paused: cancel or finish it first".into(),
            )));
        }
        let now = self.clock.now_ms();
        let (scope_name, filter) = match scope {
            BackfillScope::All => ("all", None),
            BackfillScope::Filter(f) => ("filter", Some(Value::Object(f.clone()).to_string())),
            BackfillScope::Config => ("config", None),
        };
        let mut generation_built = None;
        if *scope == BackfillScope::Config {
            let active = self.store.active_generation().await?.ok_or(PortError::new(
                FailureBucket::Internal,
                "no_active_generation",
            ))?;
            let ours = self.cfg.index_config();
            if active.index_config.is_empty() || active.index_config == ours {
                return Ok(Err((
                    409,
                    "config_unchanged",
                    "the running configuration is the active generation's".into(),
                )));
            }
            // The generation and its backfill are written in one batch, so
            // that no generation is ever building without a backfill (a
            // start that failed between the two left one behind, which a
            // retry then found with the configuration already active).
            // One being built already, without a backfill (left by an older
            // release), is built if it is this configuration's.
            let targets = self.store.target_generations().await?;
            let generation = match targets.iter().find(|g| g.state == "building") {
                Some(g) if g.index_config == ours => g.generation,
                Some(_) => {
                    return Ok(Err((
                        409,
                        "generation_building",
                        "another generation is being built".into(),
                    )))
                }
                None => self.store.generation_max().await? + 1,
            };
            generation_built = Some((ours, generation, active.generation));
        }
        let to = generation_built.as_ref().map(|g| g.1);
        let id = backfill_id(now, scope_name, filter.as_deref(), to);
        let new = NewBackfill {
            backfill_id: &id,
            scope: scope_name,
            filter: filter.as_deref(),
            page_size,
            generation: generation_built
                .as_ref()
                .map(|(c, g, a)| (c.as_str(), *g, *a)),
        };
        let inserted = self
            .store
            .backfill_start(&new, now, self.bugs.has(Bug::GenerationBeforeBackfill))
            .await?;
        if !inserted {
            // Another start (a concurrent or retried request) won: it
            // started a backfill, or even finished it.
            return Ok(Err((
                409,
                "backfill_active",
                "a backfill was started meanwhile".into(),
            )));
        }
        log_event(
            "backfill_started",
            json!({ "backfill_id": id, "scope": scope_name, "generation": to }),
        );
        self.advance_backfill_page(&id, true).await?;
        Ok(Ok(self.backfill_view(&id).await?.unwrap_or(Value::Null)))
    }

    /// Pause, resume or cancel. `Ok(None)`: no such backfill.
    pub async fn backfill_transition(
        &self,
        id: &str,
        action: &str,
    ) -> Result<Option<Result<Value, Refusal>>, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(None);
        };
        let (to, from): (&str, &[&str]) = match action {
            "pause" => ("paused", &["running"]),
            "resume" => ("running", &["paused"]),
            _ => ("cancelled", &["running", "paused"]),
        };
        let now = self.clock.now_ms();
        // A cancel gives up the generation in the same batch: a crash
        // between the two would leave it building for good, written by
        // every index job and never switched to.
        let abandon = if to == "cancelled" {
            b.to_generation
        } else {
            None
        };
        let changed = self
            .store
            .backfill_set_state(
                id,
                from,
                to,
                abandon,
                now,
                self.bugs.has(Bug::CancelInTwoSteps),
            )
            .await?;
        if !changed {
            return Ok(Some(Err((
                409,
                "backfill_state",
                format!("a {} backfill cannot {action}", b.state),
            ))));
        }
        log_event("backfill_state", json!({ "backfill_id": id, "state": to }));
        Ok(Some(Ok(self
            .backfill_view(id)
            .await?
            .unwrap_or(Value::Null))))
    }

    async fn backfill_row(&self, id: &str) -> Result<Option<BackfillRow>, PortError> {
        self.store.backfill(id).await
    }

    /// The progress view. At every moment `enqueued = done + pending +
    /// failed` and `remaining = pending + not_enqueued`.
    pub async fn backfill_view(&self, id: &str) -> Result<Option<Value>, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(None);
        };
        Ok(Some(self.view_of(&b).await?))
    }

    async fn view_of(&self, b: &BackfillRow) -> Result<Value, PortError> {
        let c = self.store.backfill_counts(&b.backfill_id).await?;
        let total = self.store.backfill_total(b.filter.as_deref()).await?;
        let pending = c.enqueued.saturating_sub(c.done + c.failed);
        let open = matches!(b.state.as_str(), "running" | "paused");
        let not_enqueued = if open {
            total.saturating_sub(c.enqueued)
        } else {
            0
        };
        Ok(json!({
            "backfill_id": b.backfill_id,
            "scope": b.scope,
            "filter": b.filter.as_deref().and_then(|f| serde_json::from_str::<Value>(f).ok()),
            "state": b.state,
            "generation": b.to_generation.map(|to| json!({ "from": b.from_generation, "to": to })),
            "cursor": b.cursor,
            "passes": b.passes,
            "page_size": b.page_size,
            "progress": {
                "total": total, "enqueued": c.enqueued, "done": c.done, "pending": pending, "failed": c.failed,
                "not_enqueued": not_enqueued, "remaining": pending + not_enqueued,
            },
            "created_at": b.created_at,
            "updated_at": b.updated_at,
        }))
    }

    /// `GET /v1/admin/reindex`: the latest backfills, newest first.
    pub async fn backfills(&self, limit: usize) -> Result<Vec<Value>, PortError> {
        let rows = self.store.backfills(limit).await?;
        let mut out = Vec::with_capacity(rows.len());
        for b in &rows {
            out.push(self.view_of(b).await?);
        }
        Ok(out)
    }

    /// What one page of a backfill may cost in subrequests: reads, one
    /// batch, the sends; for a re-run scope, a re-run (a few calls) per
    /// document.
    pub fn backfill_page_cost(page_size: u32) -> u64 {
        8 + 4 * u64::from(page_size)
    }

    /// Cron: advances the running backfill by up to `BACKFILL_PAGES_PER_RUN`
    /// pages, as many as `subrequests` allow at its own page size. Returns
    /// (pages enqueued, subrequests they may have cost).
    pub async fn advance_backfills(&self, subrequests: u64) -> Result<(u64, u64), PortError> {
        let Some(b) = self.store.backfill_running().await? else {
            return Ok((0, 0));
        };
        let cost = Self::backfill_page_cost(b.page_size);
        let pages = (subrequests / cost).min(self.cfg.backfill_pages_per_run as u64);
        if pages == 0 {
            // No room for a page: only the end-of-pass step (a few reads and
            // the switch batch), if the pass is at its end.
            self.advance_backfill_page(&b.backfill_id, false).await?;
            return Ok((0, 0));
        }
        let mut advanced = 0;
        for _ in 0..pages {
            if !self.advance_backfill_page(&b.backfill_id, true).await? {
                break;
            }
            advanced += 1;
        }
        Ok((advanced, advanced * cost))
    }

    /// One step of a backfill: enqueue the next page (if `may_enqueue`), or
    /// at the end of a pass, complete it (scope `config`: switch) or start
    /// another pass. Returns whether it enqueued a page.
    async fn advance_backfill_page(&self, id: &str, may_enqueue: bool) -> Result<bool, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(false);
        };
        if b.state != "running" {
            return Ok(false);
        }
        let now = self.clock.now_ms();
        let page = self.store.backfill_page(&b).await?;
        if !page.is_empty() && !may_enqueue {
            return Ok(false);
        }
        if let Some(last) = page.last() {
            let cursor = last.doc_id.as_str();
            match b.to_generation {
                Some(g) => {
                    // Jobs, items and cursor in one batch, then the sends
                    // (a lost send: cron's stall check sends it again).
                    let mut jobs = Vec::with_capacity(page.len());
                    let mut messages = Vec::with_capacity(page.len());
                    for d in &page {
                        let Ok(doc) = DocId::parse(&d.doc_id) else {
                            continue;
                        };
                        let job = job_id(&doc, d.version, &format!("build-g{g}"), b.passes);
                        jobs.push(json!({ "job": job, "doc": d.doc_id, "version": d.version }));
                        messages.push(JobMessage::new(job, d.doc_id.clone(), d.version));
                    }
                    let jobs = Value::Array(jobs).to_string();
                    self.store
                        .backfill_build_page(id, b.passes, g, &jobs, cursor, now)
                        .await?;
                    for batch in messages.chunks(100) {
                        if let Err(e) = self.queue.send_batch(batch).await {
                            log_event(
                                "enqueue_deferred",
                                json!({ "bucket": e.bucket.as_str(), "code": e.code, "jobs": batch.len() }),
                            );
                        }
                    }
                }
                None => {
                    // Each re-run is its own batch and send; a failure before
                    // the cursor moves re-runs those documents once more.
                    let mut items = Vec::new();
                    for d in &page {
                        if let Some((_, job)) =
                            self.rerun_live_version(&d.doc_id, d.version).await?
                        {
                            items.push(json!({ "doc": d.doc_id, "job": job }));
                        }
                    }
                    let items = Value::Array(items).to_string();
                    self.store
                        .backfill_rerun_page(id, b.passes, &items, cursor, now)
                        .await?;
                }
            }
            return Ok(true);
        }
        // The end of a pass: wait for its jobs, then finish.
        let view = self.view_of(&b).await?;
        if view["progress"]["pending"].as_u64().unwrap_or(0) > 0 {
            return Ok(false);
        }
        match b.to_generation {
            None => {
                self.store.backfill_complete(id, now).await?;
            }
            Some(g)
                if self
                    .store
                    .active_generation()
                    .await?
                    .is_some_and(|a| a.generation == g) =>
            {
                // Switched already (by a run that ended before completing
                // it, or a rollback and forth): complete.
                self.store.backfill_complete(id, now).await?;
            }
            Some(g) => {
                let gaps = self.store.generation_gaps(g).await?;
                if gaps.unstaged > 0 || gaps.building > 0 {
                    // Jobs still writing: look again on the next run.
                    return Ok(false);
                }
                if gaps.missing == 0 && self.switch_to(g, Some(id)).await? {
                    // Switched and completed in one batch.
                } else if b.passes >= self.cfg.backfill_passes_max {
                    self.store
                        .backfill_set_state(id, &["running"], "failed", None, now, false)
                        .await?;
                    log_event(
                        "backfill_failed",
                        json!({ "backfill_id": id, "missing": gaps.missing, "passes": b.passes }),
                    );
                } else {
                    // Documents still missing (a failed build, or indexed
                    // before the generation existed): another pass.
                    self.store.backfill_next_pass(id, now).await?;
                }
            }
        }
        Ok(false)
    }

    /// Cron: chunk rows of retiring and abandoned generations become
    /// cleanup intents (drained like any other); a generation with none
    /// left is retired. Returns the rows turned into intents.
    pub async fn retire_generations(&self, limit: usize) -> Result<u64, PortError> {
        self.store
            .retire_generation_rows(self.clock.now_ms(), limit)
            .await
    }
}

/// A backfill's ID: a UUIDv5 of when and what (time is injected).
/// A backfill's id, from what it is: its start time, scope, filter and (for
/// `config`) the generation it builds, so that two starts in the same
/// millisecond after a cancel do not collide on a new generation.
fn backfill_id(now: i64, scope: &str, filter: Option<&str>, generation: Option<u32>) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x2b5e_91c4_0d3a_4e6f_8a17_c3f0_5d92_1b84);
    let g = generation.map_or(String::new(), |g| g.to_string());
    uuid::Uuid::new_v5(
        &NAMESPACE,
        format!("{now}\u{0}{scope}\u{0}{}\u{0}{g}", filter.unwrap_or("")).as_bytes(),
    )
    .to_string()
}
