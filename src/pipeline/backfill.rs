//! Reindexing: one document, or a backfill over many, and index generations.
//!
//! A backfill is the same job run again for many keys: a record in D1 with
//! a cursor (doc_id order), advanced a page at a time by the request that
//! starts it and then by cron, pausable and cancellable, each page one D1
//! batch (jobs, items, cursor) before its queue messages. Scope `all` and
//! `filter` re-run each live version as a new version (same content,
//! through the normal protocol). Scope `config` builds every live version's
//! vectors in a new generation (the running configuration) alongside the
//! active one, which search keeps serving; when every live document has
//! them, one D1 batch switches generations. The previous generation is
//! retained (and still written) until it is retired, so the switch can be
//! rolled back; retiring turns its chunk rows into cleanup intents.

use super::{log_event, BackfillView, GenerationsView, Outcome, Pipeline, Refused, Rerun};
use crate::bugs::Bug;
use crate::core::failure::FailureBucket;
use crate::core::ids::{job_id, DocKey, TenantId};
use crate::core::state::{BackfillState, GenerationState, JobState};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{BackfillCounts, BackfillRow, NewBackfill, PageCounts, PageDoc};
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

impl BackfillScope {
    /// The scope's name and filter (JSON) as the backfill's record holds them.
    fn record(&self) -> (&'static str, Option<String>) {
        match self {
            BackfillScope::All => ("all", None),
            BackfillScope::Filter(f) => ("filter", Some(Value::Object(f.clone()).to_string())),
            BackfillScope::Config => ("config", None),
        }
    }
}

/// What an operator does to a backfill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackfillAction {
    /// A running backfill stops enqueueing pages (its jobs go on).
    Pause,
    /// A paused backfill goes on from its cursor.
    Resume,
    /// A running or paused backfill ends; the generation it built is abandoned.
    Cancel,
}

impl BackfillAction {
    pub fn as_str(self) -> &'static str {
        match self {
            BackfillAction::Pause => "pause",
            BackfillAction::Resume => "resume",
            BackfillAction::Cancel => "cancel",
        }
    }

    /// The state the action moves to, and the states it moves from.
    fn transition(self) -> (BackfillState, &'static [BackfillState]) {
        use BackfillState::{Cancelled, Paused, Running};
        match self {
            BackfillAction::Pause => (Paused, &[Running]),
            BackfillAction::Resume => (Running, &[Paused]),
            BackfillAction::Cancel => (Cancelled, &[Running, Paused]),
        }
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// The generations, the active one and the running configuration.
    pub async fn generations_view(&self) -> Result<GenerationsView, PortError> {
        let rows = self.store.generations_list().await?;
        let retire = (
            super::repair::cleanup_rows_per_run(&self.cfg),
            self.cfg.cron_interval_seconds,
        );
        Ok(GenerationsView::new(rows, &self.cfg.index_config(), retire))
    }

    /// Makes a retained generation active again (a rollback, or forward
    /// again after one). Answers the generations as they are then.
    pub async fn activate_generation(
        &self,
        generation: u32,
    ) -> Result<Outcome<GenerationsView>, PortError> {
        let Some(state) = self.generation_state(generation).await? else {
            return Ok(Err(Refused::GenerationNotFound { generation }));
        };
        if state != GenerationState::Retained {
            return Ok(Err(Refused::GenerationNotRetained { generation, state }));
        }
        if !self.switch_to(generation, None).await? {
            return Ok(Err(Refused::GenerationIncomplete { generation }));
        }
        Ok(Ok(self.generations_view().await?))
    }

    /// Retires a retained or abandoned generation: cron deletes its vectors.
    pub async fn retire_generation(
        &self,
        generation: u32,
    ) -> Result<Outcome<GenerationsView>, PortError> {
        let Some(state) = self.generation_state(generation).await? else {
            return Ok(Err(Refused::GenerationNotFound { generation }));
        };
        let now = self.clock.now_ms();
        let changed = self.store.generation_retire(generation, now).await?;
        if !changed && !matches!(state, GenerationState::Retiring | GenerationState::Retired) {
            return Ok(Err(Refused::GenerationInUse { generation, state }));
        }
        Ok(Ok(self.generations_view().await?))
    }

    async fn generation_state(
        &self,
        generation: u32,
    ) -> Result<Option<GenerationState>, PortError> {
        let rows = self.store.generations_list().await?;
        Ok(rows
            .iter()
            .find(|r| r.generation == generation)
            .map(|r| r.state))
    }

    /// The switch: `generation` (being built, or retained) becomes active,
    /// the active one retained, in one D1 batch whose statements re-check
    /// that every live document has its vectors there; with `backfill` (its
    /// ID and pass), the backfill that built it completes in the same
    /// batch. Returns whether it switched.
    async fn switch_to(
        &self,
        generation: u32,
        backfill: Option<(&str, u32)>,
    ) -> Result<bool, PortError> {
        let switched = self
            .store
            .generation_switch(generation, backfill, self.clock.now_ms())
            .await?;
        if switched {
            log_event("generation_switched", json!({ "active": generation }));
        }
        Ok(switched)
    }

    /// Reindexes one document: its live version re-run as a new version
    /// through the queue. Returns (new version, job id).
    pub async fn reindex_document(
        &self,
        key: &DocKey,
    ) -> Result<Outcome<(u32, String)>, PortError> {
        let doc_id = key.as_str();
        let rows = self.store.document_views(&[doc_id]).await?;
        let Some(d) = rows.into_iter().next() else {
            return Ok(Err(Refused::DocumentNotFound));
        };
        // A latest version that failed (not live) is re-run itself: the
        // client's way to resubmit it.
        let latest_failed = d.job_state.is_some_and(JobState::is_failure)
            && d.live_version.is_none_or(|l| l < d.latest_version);
        if latest_failed {
            let rerun = self.rerun_version(doc_id, d.latest_version).await?;
            return Ok(reindexed(rerun));
        }
        let (Some(live), Some(0)) = (d.live_version, d.live_is_delete) else {
            return Ok(Err(Refused::DocumentNotIndexed));
        };
        if d.latest_version != live {
            return Ok(Err(Refused::VersionIndexing {
                version: d.latest_version,
            }));
        }
        let rerun = self.rerun_live_version(doc_id, live).await?;
        Ok(reindexed(rerun))
    }

    /// Starts a backfill and enqueues its first page. Answers the backfill
    /// as it is then (`None` only if its row could not be read back, which
    /// the ledger never does: backfills are never deleted).
    pub async fn start_backfill(
        &self,
        scope: &BackfillScope,
        page_size: u32,
    ) -> Result<Outcome<Option<BackfillView>>, PortError> {
        self.start_backfill_in(scope, page_size, None).await
    }

    /// As [`Self::start_backfill`], over `tenant`'s documents only (`None`:
    /// every tenant's). A `config` backfill builds a generation, which
    /// serves every tenant: it is never scoped to one.
    pub async fn start_backfill_in(
        &self,
        scope: &BackfillScope,
        page_size: u32,
        tenant: Option<&TenantId>,
    ) -> Result<Outcome<Option<BackfillView>>, PortError> {
        if tenant.is_some() && matches!(scope, BackfillScope::Config) {
            return Ok(Err(Refused::BackfillConfigScoped));
        }
        if self.backfill_open().await? {
            return Ok(Err(Refused::BackfillOpen));
        }
        // A tenant in a move: its documents here are being copied, fenced
        // or gone, and a backfill does not follow it to its new shard.
        if let Some(t) = tenant {
            let usage = self.store.tenant_usage(t.as_str(), 0, 0).await?;
            if usage.is_some_and(|u| u.move_state.is_some()) {
                return Ok(Err(Refused::TenantMoving));
            }
        }
        let now = self.clock.now_ms();
        let (scope_name, filter) = scope.record();
        let generation_built = match scope {
            BackfillScope::Config => match self.generation_to_build().await? {
                Ok(g) => Some(g),
                Err(refused) => return Ok(Err(refused)),
            },
            BackfillScope::All | BackfillScope::Filter(_) => None,
        };
        let to = generation_built.as_ref().map(|g| g.1);
        let id = backfill_id(now, scope_name, filter.as_deref(), to);
        // Once per backfill (an operator's action): each pass's walk
        // counts them again as it goes.
        let total = self
            .store
            .backfill_total(filter.as_deref(), tenant.map(TenantId::as_str))
            .await?;
        let new = NewBackfill {
            backfill_id: &id,
            scope: scope_name,
            filter: filter.as_deref(),
            tenant_id: tenant.map(TenantId::as_str),
            page_size,
            generation: generation_built
                .as_ref()
                .map(|(c, g, a)| (c.as_str(), *g, *a)),
            total,
        };
        let inserted = self
            .store
            .backfill_start(&new, now, self.bugs.has(Bug::GenerationBeforeBackfill))
            .await?;
        if !inserted {
            // Another start (a concurrent or retried request) won: it
            // started a backfill, or even finished it.
            return Ok(Err(Refused::BackfillStartedMeanwhile));
        }
        log_event(
            "backfill_started",
            json!({ "backfill_id": id, "scope": scope_name, "generation": to }),
        );
        self.advance_backfill_page(&id, true).await?;
        Ok(Ok(self.backfill_view(&id).await?))
    }

    /// Whether a backfill is running or paused (one at a time).
    pub(crate) async fn backfill_open(&self) -> Result<bool, PortError> {
        let open = self.store.backfill_running().await?;
        let paused = self.store.backfills(20, None).await?;
        Ok(open.is_some() || paused.iter().any(|b| b.state == BackfillState::Paused))
    }

    /// The generation a `config` backfill builds: (the running
    /// configuration, its number, the active generation's number).
    async fn generation_to_build(&self) -> Result<Outcome<(String, u32, u32)>, PortError> {
        let active = self.store.active_generation().await?.ok_or(PortError::new(
            FailureBucket::Internal,
            "no_active_generation",
        ))?;
        let ours = self.cfg.index_config();
        if active.index_config.is_empty() || active.index_config == ours {
            return Ok(Err(Refused::ConfigUnchanged));
        }
        // The generation and its backfill are written in one batch, so
        // that no generation is ever building without a backfill (a
        // start that failed between the two left one behind, which a
        // retry then found with the configuration already active).
        // One being built already, without a backfill (left by an older
        // release), is built if it is this configuration's.
        let targets = self.store.target_generations().await?;
        // Rolling forward after a rollback: the generation built with this
        // configuration is still there (retained, so still written), and a
        // new one would duplicate it (its rows and vectors, and another
        // retire to clean up).
        if let Some(g) = targets
            .iter()
            .find(|g| g.state == GenerationState::Retained && g.index_config == ours)
        {
            return Ok(Err(Refused::ConfigRetained {
                generation: g.generation,
            }));
        }
        let generation = match targets
            .iter()
            .find(|g| g.state == GenerationState::Building)
        {
            Some(g) if g.index_config == ours => g.generation,
            Some(_) => return Ok(Err(Refused::GenerationBuilding)),
            None => self.store.generation_max().await? + 1,
        };
        Ok(Ok((ours, generation, active.generation)))
    }

    /// Pauses, resumes or cancels a backfill. Answers it as it is then
    /// (`None`: as for [`Self::start_backfill`]).
    pub async fn backfill_transition(
        &self,
        id: &str,
        action: BackfillAction,
    ) -> Result<Outcome<Option<BackfillView>>, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(Err(Refused::BackfillNotFound));
        };
        let (to, from) = action.transition();
        let now = self.clock.now_ms();
        // A cancel gives up the generation in the same batch: a crash
        // between the two would leave it building for good, written by
        // every index job and never switched to.
        let abandon = if action == BackfillAction::Cancel {
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
            return Ok(Err(Refused::BackfillState {
                state: b.state,
                action,
            }));
        }
        log_event("backfill_state", json!({ "backfill_id": id, "state": to }));
        Ok(Ok(self.backfill_view(id).await?))
    }

    async fn backfill_row(&self, id: &str) -> Result<Option<BackfillRow>, PortError> {
        self.store.backfill(id).await
    }

    /// A backfill and its progress.
    pub async fn backfill_view(&self, id: &str) -> Result<Option<BackfillView>, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(None);
        };
        Ok(Some(self.view_of(&b).await?))
    }

    async fn view_of(&self, b: &BackfillRow) -> Result<BackfillView, PortError> {
        // A completed or failed backfill has no job in flight (it ends only
        // once none is); a cancelled one may still.
        let pending = match b.state {
            BackfillState::Completed | BackfillState::Failed => 0,
            _ => self.store.backfill_pending(&b.backfill_id).await?,
        };
        let c = BackfillCounts {
            enqueued: b.enqueued,
            pending,
            failed: b.failed,
        };
        Ok(BackfillView::new(b, &c, b.total))
    }

    /// The latest backfills, newest first.
    pub async fn backfills(&self, limit: usize) -> Result<Vec<BackfillView>, PortError> {
        self.backfills_in(limit, None).await
    }

    /// The latest backfills that covered `tenant`'s documents (its own and
    /// those of every tenant), newest first; `None`: all of them.
    pub async fn backfills_in(
        &self,
        limit: usize,
        tenant: Option<&TenantId>,
    ) -> Result<Vec<BackfillView>, PortError> {
        let rows = self
            .store
            .backfills(limit, tenant.map(TenantId::as_str))
            .await?;
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

    /// What a page that enqueued nothing costs in subrequests: the
    /// backfill's row, the page, the batch that moves the cursor.
    const WALK_PAGE_COST: u64 = 3;

    /// Cron: advances the running backfill by up to `BACKFILL_PAGES_PER_RUN`
    /// pages that enqueue jobs, as many as `subrequests` allow at its own
    /// page size; pages that walk past documents needing nothing (a later
    /// pass, a narrow filter) cost a few calls and go on while the budget
    /// lasts. Returns the pages walked (what they cost is metered by the
    /// caller).
    pub async fn advance_backfills(&self, subrequests: u64) -> Result<u64, PortError> {
        let Some(b) = self.store.backfill_running().await? else {
            return Ok(0);
        };
        let cost = Self::backfill_page_cost(b.page_size);
        if subrequests < cost {
            // No room for a page: only the end-of-pass step (a few reads and
            // the switch batch), if the pass is at its end.
            self.advance_backfill_page(&b.backfill_id, false).await?;
            return Ok(0);
        }
        let (mut left, mut enqueuing, mut walked) = (subrequests, 0, 0);
        while left >= cost && enqueuing < self.cfg.backfill_pages_per_run {
            let Some(enqueued) = self.advance_backfill_page(&b.backfill_id, true).await? else {
                break;
            };
            walked += 1;
            if enqueued > 0 {
                enqueuing += 1;
                left = left.saturating_sub(cost);
            } else {
                left = left.saturating_sub(Self::WALK_PAGE_COST);
            }
        }
        Ok(walked)
    }

    /// One step of a backfill: enqueue the next page (if `may_enqueue`), or
    /// at the end of a pass, complete it (scope `config`: switch) or start
    /// another pass. Returns the documents the page enqueued (`None`: no
    /// page walked).
    async fn advance_backfill_page(
        &self,
        id: &str,
        may_enqueue: bool,
    ) -> Result<Option<u64>, PortError> {
        let Some(b) = self.backfill_row(id).await? else {
            return Ok(None);
        };
        if b.state != BackfillState::Running {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        if let (Some(g), true) = (b.to_generation, b.cursor.is_empty()) {
            // A pass of scope `config` starts only once no index job in
            // flight lacks rows in the generation: a delivery that read its
            // target generations before this one existed may still make a
            // version live without it, after the pass checked its document.
            // Any delivery after this moment writes it (the switch's proof,
            // docs/ARCHITECTURE.md).
            if !self.bugs.has(Bug::PassWithoutWaiting)
                && self.store.generation_in_flight(g).await?.unstaged > 0
            {
                return Ok(None);
            }
        }
        let page = self
            .store
            .backfill_page(&b, self.cfg.backfill_walk_max)
            .await?;
        let Some(cursor) = page.walked_to.as_deref() else {
            self.end_pass(&b, now).await?;
            return Ok(None);
        };
        if !may_enqueue {
            return Ok(None);
        }
        let enqueued = page.docs.len() as u64;
        let counts = PageCounts {
            from: &b.cursor,
            to: cursor,
            missing: page.missing,
            enqueued: 0,
            scoped: page.scoped,
        };
        match b.to_generation {
            Some(g) => {
                self.enqueue_build_page(&b, g, &page.docs, counts, now)
                    .await?
            }
            None => self.enqueue_rerun_page(&b, &page.docs, counts, now).await?,
        }
        Ok(Some(enqueued))
    }

    /// A page of a `config` backfill: a build job per document into
    /// generation `g`. Jobs, items and cursor in one batch, then the sends
    /// (a lost send: cron's stall check sends it again).
    async fn enqueue_build_page(
        &self,
        b: &BackfillRow,
        g: u32,
        page: &[PageDoc],
        counts: PageCounts<'_>,
        now: i64,
    ) -> Result<(), PortError> {
        let mut jobs = Vec::with_capacity(page.len());
        let mut messages = Vec::with_capacity(page.len());
        for d in page {
            let Some(doc) = DocKey::from_stored(&d.doc_id) else {
                continue;
            };
            let job = job_id(&doc, d.version, &format!("build-g{g}"), b.passes);
            jobs.push(json!({ "job": job, "doc": d.doc_id, "version": d.version }));
            messages.push(JobMessage::new(job, d.doc_id.clone(), d.version));
        }
        let counts = PageCounts {
            enqueued: jobs.len() as u64,
            ..counts
        };
        let jobs = Value::Array(jobs).to_string();
        self.store
            .backfill_build_page(&b.backfill_id, b.passes, g, &jobs, &counts, now)
            .await?;
        for batch in messages.chunks(100) {
            if let Err(e) = self.queue.send_batch(batch).await {
                log_event(
                    "enqueue_deferred",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code, "jobs": batch.len() }),
                );
            }
        }
        Ok(())
    }

    /// A page of an `all` or `filter` backfill: each live version re-run.
    /// Each re-run is its own batch and send; a failure before the cursor
    /// moves re-runs those documents once more.
    async fn enqueue_rerun_page(
        &self,
        b: &BackfillRow,
        page: &[PageDoc],
        counts: PageCounts<'_>,
        now: i64,
    ) -> Result<(), PortError> {
        let mut items = Vec::new();
        for d in page {
            // Not re-run: a newer version arrived, or the document's tenant
            // is fenced for a move (or gone from this shard). Neither is
            // enqueued; a backfill does not follow a tenant to its new shard.
            if let Rerun::Sent { job_id, .. } =
                self.rerun_live_version(&d.doc_id, d.version).await?
            {
                items.push(json!({ "doc": d.doc_id, "job": job_id }));
            }
        }
        let counts = PageCounts {
            enqueued: items.len() as u64,
            ..counts
        };
        let items = Value::Array(items).to_string();
        self.store
            .backfill_rerun_page(&b.backfill_id, b.passes, &items, &counts, now)
            .await
    }

    /// The end of a pass: once its jobs ended, complete the backfill (scope
    /// `config`: switch generations in the same batch), or start another
    /// pass for the documents still missing, or give up after the last.
    async fn end_pass(&self, b: &BackfillRow, now: i64) -> Result<(), PortError> {
        let id = b.backfill_id.as_str();
        if self.store.backfill_pending(id).await? > 0 {
            return Ok(());
        }
        let Some(g) = b.to_generation else {
            return self.store.backfill_complete(id, now).await;
        };
        if self
            .store
            .active_generation()
            .await?
            .is_some_and(|a| a.generation == g)
        {
            // Switched already (by a run that ended before completing
            // it, or a rollback and forth): complete.
            return self.store.backfill_complete(id, now).await;
        }
        let in_flight = self.store.generation_in_flight(g).await?;
        if in_flight.unstaged > 0 || in_flight.building > 0 {
            // Jobs still writing: look again on the next run.
            return Ok(());
        }
        if b.pass_missing == 0 && self.switch_to(g, Some((id, b.passes))).await? {
            // Switched and completed in one batch.
        } else if b.passes >= self.cfg.backfill_passes_max {
            self.store
                .backfill_set_state(
                    id,
                    &[BackfillState::Running],
                    BackfillState::Failed,
                    None,
                    now,
                    false,
                )
                .await?;
            log_event(
                "backfill_failed",
                json!({ "backfill_id": id, "missing": b.pass_missing, "passes": b.passes }),
            );
        } else {
            // Documents the pass could not build (a failed build, one
            // still running when the pass reached it, a staging without
            // the generation): another pass, which finds them missing.
            self.store.backfill_next_pass(id, b.passes, now).await?;
        }
        Ok(())
    }

    /// Cron: chunk rows of retiring and abandoned generations, a page of
    /// documents at a time, become cleanup intents (drained like any
    /// other); a generation with none left is retired. Returns the rows
    /// turned into intents, and whether the round over the documents has
    /// more pages.
    pub async fn retire_generations(&self, limit: usize) -> Result<(u64, bool), PortError> {
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

/// A one-document reindex's answer from its re-run.
fn reindexed(rerun: Rerun) -> Outcome<(u32, String)> {
    match rerun {
        Rerun::Sent { version, job_id } => Ok((version, job_id)),
        Rerun::NotApplicable => Err(Refused::NewerVersionArrived),
        Rerun::TenantMoving => Err(Refused::TenantMoving),
    }
}
