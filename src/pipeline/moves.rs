//! Moving a tenant between shards online (issue 37; docs/ARCHITECTURE.md,
//! "Moving a tenant"). A move is recorded on shard 0 and advanced by cron,
//! a page of documents at a time, within its share of the run's budget:
//!
//! 1. `copying`: the tenant keeps working on the shard it leaves (marked
//!    `copying`: no new sync session); each page of its documents is copied
//!    to the new shard (marked `moving_in`: nothing served, nothing
//!    claimed): its rows as stored, its live chunk rows under their IDs
//!    there, with keyword entries under its key there, then their vectors,
//!    read by ID and upserted (nothing embedded again). A document whose
//!    copy already matches (its mark) is skipped.
//! 2. the fence, once no sync session of it is open: the shard it leaves
//!    takes no write of it (intake's guard, in the same batch as a write),
//!    and claims none of its jobs; reads go on there.
//! 3. `catching_up`: the documents again; only those that changed since
//!    their copy are copied again; then its state, quotas and tokens.
//! 4. the switch, one batch on shard 0: the directory names the new shard
//!    and the move is `switched`; then the copy is served (its mark
//!    cleared) and the shard left says `moved`, which sends any request
//!    that reaches it (a stale cache) back to the directory. Jobs that had
//!    not ended were copied to run again; cron sends them.
//! 5. `cleaning`, once every cache and lease that named the shard left has
//!    expired (`Config::move_cleanup_delay_ms`): its vectors, then its rows,
//!    a page at a time, then its row. `completed`.
//!
//! Before the switch a move may be paused (while copying) or cancelled: the
//! fence is lifted and the copy removed the same way (`cancelling`).

use super::budget::{Budget, MeteredPipeline, Usage};
use super::fleet::{home, Shards};
use super::{log_event, Outcome, Pipeline, Refused};
use crate::core::failure::FailureBucket;
use crate::core::ids::{occurrences, vector_id, DocKey, TenantId};
use crate::core::shards::ShardId;
use crate::core::state::{JobState, MoveState, TenantMoveState};
use crate::core::terms;
use crate::ports::{
    Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex, VectorRecord,
};
use crate::store::{CopiedChunk, LiveChunk, MoveDocRow, MoveRow, RawRow};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// What an operator asks of a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveAction {
    Pause,
    Resume,
    Cancel,
}

impl MoveAction {
    pub fn parse(s: &str) -> Option<MoveAction> {
        match s {
            "pause" => Some(MoveAction::Pause),
            "resume" => Some(MoveAction::Resume),
            "cancel" => Some(MoveAction::Cancel),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MoveAction::Pause => "pause",
            MoveAction::Resume => "resume",
            MoveAction::Cancel => "cancel",
        }
    }
}

/// What a scheduled run did to the moves.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MovesReport {
    /// Moves advanced (a step taken, even one that only waited).
    pub advanced: u64,
    pub copied: u64,
    pub recopied: u64,
    pub vectors: u64,
    pub removed: u64,
    /// A step that failed, by bucket (it is taken again next run).
    pub failures: Vec<&'static str>,
    pub budget_hit: bool,
}

/// A move's ID: 24 hex digits of the request's entropy.
fn move_id(entropy: &[u8; 32]) -> String {
    entropy[..12].iter().map(|b| format!("{b:02x}")).collect()
}

fn internal(code: &'static str) -> PortError {
    PortError::new(FailureBucket::Internal, code)
}

/// Starts moving `tenant` to shard `to`: refused unless the deployment has
/// that shard and it is another, no other tenant has it dedicated, the
/// tenant is placed and not moving, and both shards serve the same index
/// configuration with no generation being built on the new one.
pub async fn start_move<S: Shards>(
    s: &S,
    tenant: &TenantId,
    to: u16,
    entropy: &[u8; 32],
) -> Result<Outcome<MoveRow>, PortError> {
    let control = s.control();
    let Some(from) = control.store.placement_of(tenant.as_str()).await? else {
        return Ok(Err(if s.count() == 1 {
            Refused::MoveShardInvalid
        } else {
            Refused::TenantNotFound
        }));
    };
    let Some(dst) = s.shard(ShardId(to)).filter(|_| to != from.0) else {
        return Ok(Err(Refused::MoveShardInvalid));
    };
    let src = home(s, from)?;
    let dedicated = control.store.dedicated_shards().await?;
    if dedicated
        .iter()
        .any(|d| d.shard == to && d.tenant_id != tenant.as_str())
    {
        return Ok(Err(Refused::ShardDedicated));
    }
    if src.store.move_tenant(tenant.as_str()).await?.is_none() {
        return Ok(Err(Refused::TenantNotFound));
    }
    if !same_index(src, dst).await? {
        return Ok(Err(Refused::MoveConfigMismatch));
    }
    // A backfill pages one shard's documents: the moving tenant's would be
    // refused (fenced), or gone, or arrive behind its cursor.
    if src.backfill_open().await? || dst.backfill_open().await? {
        return Ok(Err(Refused::BackfillOpen));
    }
    let now = control.clock.now_ms();
    let m = MoveRow {
        move_id: move_id(entropy),
        tenant_id: tenant.as_str().to_string(),
        from_shard: from.0,
        to_shard: to,
        state: MoveState::Copying,
        cursor: String::new(),
        copied: 0,
        recopied: 0,
        vectors: 0,
        removed: 0,
        waiting_for: None,
        created_at: now,
        switched_at: None,
        updated_at: now,
    };
    if !control.store.move_insert(&m).await? {
        return Ok(Err(Refused::TenantMoving));
    }
    // The marks on both shards; the first step makes them again if a
    // crash comes between (each is idempotent).
    begin(src, dst, tenant.as_str(), now).await?;
    log_event(
        "move_started",
        json!({ "move_id": m.move_id, "tenant_id": m.tenant_id, "from": m.from_shard, "to": m.to_shard }),
    );
    Ok(Ok(m))
}

/// Whether both shards serve one index configuration (a new shard's first
/// generation takes the one it is given), and the new one builds none.
async fn same_index<D, V, E, Q, C, D2, V2, E2, Q2, C2>(
    src: &Pipeline<D, V, E, Q, C>,
    dst: &Pipeline<D2, V2, E2, Q2, C2>,
) -> Result<bool, PortError>
where
    D: Database,
    D2: Database,
{
    let from = src.store.active_generation().await?;
    let to = dst.store.target_generations().await?;
    let Some(from) = from else { return Ok(false) };
    let building = to
        .iter()
        .any(|g| g.state == crate::core::state::GenerationState::Building);
    let active = to
        .iter()
        .find(|g| g.state == crate::core::state::GenerationState::Active);
    Ok(!building
        && active.is_some_and(|g| g.index_config == from.index_config || g.index_config.is_empty()))
}

/// The tenant arrives on the new shard (moving in) and is marked as moving
/// out on the shard it leaves.
async fn begin<D: Database, V, E, Q, C, D2: Database, V2, E2, Q2, C2>(
    src: &Pipeline<D, V, E, Q, C>,
    dst: &Pipeline<D2, V2, E2, Q2, C2>,
    tenant: &str,
    now: i64,
) -> Result<(), PortError> {
    let Some(settings) = src.store.move_tenant(tenant).await? else {
        return Err(internal("move_tenant_missing"));
    };
    dst.store.move_tenant_arrive(tenant, &settings, now).await?;
    src.store
        .move_mark(tenant, None, Some(TenantMoveState::Copying))
        .await?;
    Ok(())
}

/// A move by its ID.
pub async fn get_move<S: Shards>(s: &S, move_id: &str) -> Result<Outcome<MoveRow>, PortError> {
    Ok(s.control()
        .store
        .move_get(move_id)
        .await?
        .ok_or(Refused::MoveNotFound))
}

/// Moves, newest first.
pub async fn moves<S: Shards>(s: &S, limit: usize) -> Result<Vec<MoveRow>, PortError> {
    s.control().store.moves_page(limit).await
}

/// Pauses (while copying), resumes or cancels (before the switch) a move.
pub async fn act_on_move<S: Shards>(
    s: &S,
    move_id: &str,
    action: MoveAction,
) -> Result<Outcome<MoveRow>, PortError> {
    let control = s.control();
    let Some(m) = control.store.move_get(move_id).await? else {
        return Ok(Err(Refused::MoveNotFound));
    };
    let (from, to) = match (action, m.state) {
        (MoveAction::Pause, MoveState::Copying) => (MoveState::Copying, MoveState::Paused),
        (MoveAction::Resume, MoveState::Paused) => (MoveState::Paused, MoveState::Copying),
        (
            MoveAction::Cancel,
            st @ (MoveState::Copying | MoveState::Paused | MoveState::CatchingUp),
        ) => (st, MoveState::Cancelling),
        (_, state) => {
            return Ok(Err(Refused::MoveState {
                state,
                action: action.as_str(),
            }))
        }
    };
    let now = control.clock.now_ms();
    if !control.store.move_set_state(move_id, from, to, now).await? {
        // It moved on meanwhile: say what it is now.
        let state = control
            .store
            .move_get(move_id)
            .await?
            .map_or(from, |m| m.state);
        return Ok(Err(Refused::MoveState {
            state,
            action: action.as_str(),
        }));
    }
    let src = &home(s, ShardId(m.from_shard))?.store;
    match action {
        // A step that fenced as the pause came lifts its fence itself; one
        // that fenced before it is lifted here (a paused tenant writes).
        MoveAction::Pause => {
            src.move_lift_fence(&m.tenant_id).await?;
        }
        // The tenant writes and syncs at once; the copy goes with cron.
        MoveAction::Cancel => src.move_stay(&m.tenant_id).await?,
        MoveAction::Resume => {}
    }
    log_event(
        "move_action",
        json!({ "move_id": move_id, "tenant_id": m.tenant_id, "action": action.as_str() }),
    );
    get_move(s, move_id).await
}

/// One scheduled run's share of work on the moves (`Config::cron_shares`):
/// each open move advanced in turn while the share lasts.
pub async fn advance_moves<S: Shards>(s: &S) -> MovesReport {
    let mut report = MovesReport::default();
    if s.count() < 2 {
        return report;
    }
    let control = s.control();
    let cfg = &control.cfg;
    let shares = cfg.cron_shares();
    let budget = Budget {
        subrequests_max: cfg.cron_subrequests_max / shares,
        started_ms: control.clock.now_ms(),
        wall_ms: i64::from(cfg.cron_wall_seconds_max) * 1000 / shares as i64,
    };
    let usage = Usage::default();
    let open = match control.metered(&usage).store.moves_active(8).await {
        Ok(open) => open,
        Err(e) => {
            report.failures.push(e.bucket.as_str());
            return report;
        }
    };
    for mut m in open {
        if !budget.allows(&usage, control.clock.now_ms(), 1, 0) {
            report.budget_hit = true;
            break;
        }
        report.advanced += 1;
        if let Err(e) = step_move(s, &mut m, &budget, &usage, &mut report).await {
            log_event(
                "move_step_failed",
                json!({ "move_id": m.move_id, "state": m.state.as_str(), "bucket": e.bucket.as_str(), "code": e.code }),
            );
            report.failures.push(e.bucket.as_str());
        }
    }
    report
}

/// A shard's pipeline, metered in a step's usage.
type Side<'a, S> = MeteredPipeline<
    'a,
    <S as Shards>::D,
    <S as Shards>::V,
    <S as Shards>::E,
    <S as Shards>::Q,
    <S as Shards>::C,
>;

/// The ports of one step: shard 0, the shard left and the shard reached,
/// each metered in the step's usage.
struct Sides<'a, S: Shards> {
    control: Side<'a, S>,
    src: Side<'a, S>,
    dst: Side<'a, S>,
    budget: &'a Budget,
    usage: &'a Usage,
}

/// Advances one move as far as the budget goes.
pub async fn step_move<S: Shards>(
    s: &S,
    m: &mut MoveRow,
    budget: &Budget,
    usage: &Usage,
    report: &mut MovesReport,
) -> Result<(), PortError> {
    let sides = Sides::<S> {
        control: s.control().metered(usage),
        src: home(s, ShardId(m.from_shard))?.metered(usage),
        dst: home(s, ShardId(m.to_shard))?.metered(usage),
        budget,
        usage,
    };
    match m.state {
        MoveState::Copying | MoveState::CatchingUp => copy_pass(&sides, m, report).await,
        MoveState::Paused => {
            // A fence a step left as the move was paused is lifted.
            sides
                .src
                .store
                .move_lift_fence(&m.tenant_id)
                .await
                .map(drop)
        }
        MoveState::Switched => after_switch(&sides, m).await,
        MoveState::Cleaning => {
            clean(
                &sides.control,
                &sides.src,
                m,
                TenantMoveState::Moved,
                budget,
                usage,
                report,
            )
            .await
        }
        MoveState::Cancelling => {
            sides.src.store.move_stay(&m.tenant_id).await?;
            clean(
                &sides.control,
                &sides.dst,
                m,
                TenantMoveState::MovingIn,
                budget,
                usage,
                report,
            )
            .await
        }
        MoveState::Completed | MoveState::Cancelled => Ok(()),
    }
}

/// The cost of the next page at worst, from the last one's (and a floor
/// that covers a page's reads and writes).
fn next_page_cost(last: u64) -> u64 {
    (last * 2).max(16)
}

/// Copies pages of the tenant's documents (the first pass, or the
/// catch-up), then moves the move on: fenced and catching up, or switched.
async fn copy_pass<S: Shards>(
    sides: &Sides<'_, S>,
    m: &mut MoveRow,
    report: &mut MovesReport,
) -> Result<(), PortError> {
    let (src, dst) = (&sides.src, &sides.dst);
    let tenant = m.tenant_id.clone();
    let now = sides.control.clock.now_ms();
    if m.state == MoveState::Copying {
        begin(src, dst, &tenant, now).await?;
    }
    let from_gen = src
        .store
        .active_generation()
        .await?
        .ok_or(internal("no_active_generation"))?;
    let to_gen = dst
        .store
        .active_generation()
        .await?
        .ok_or(internal("no_active_generation"))?;
    let key = dst
        .store
        .move_tenant(&tenant)
        .await?
        .and_then(|t| t.keyword_key)
        .ok_or(internal("move_tenant_missing"))?;
    let copy = CopyOf {
        tenant: &tenant,
        from_generation: from_gen.generation,
        to_generation: to_gen.generation,
        keyword_key: key,
    };
    let cfg = &sides.control.cfg;
    let mut last_cost = 0;
    loop {
        if !sides
            .budget
            .allows(sides.usage, sides.control.clock.now_ms(), 4, 0)
        {
            report.budget_hit = true;
            return Ok(());
        }
        // The marks of a page of documents on both shards (two reads),
        // then the copy of those that differ, a page at a time.
        let page = src
            .store
            .move_docs_page(&tenant, &m.cursor, cfg.move_marks_page)
            .await?;
        let Some(last) = page.last() else {
            let was = m.state;
            end_of_pass(sides, m).await?;
            if was == MoveState::Copying && m.state == MoveState::CatchingUp {
                // Fenced: the catch-up at once, in this run's budget.
                continue;
            }
            return Ok(());
        };
        let cursor = last.doc_id.clone();
        let ids: Vec<&str> = page.iter().map(|d| d.doc_id.as_str()).collect();
        let there: HashMap<String, String> = dst
            .store
            .move_docs_by_ids(&ids)
            .await?
            .into_iter()
            .map(|d| (d.doc_id, d.mark))
            .collect();
        let changed: Vec<MoveDocRow> = page
            .into_iter()
            .filter(|d| there.get(&d.doc_id) != Some(&d.mark))
            .collect();
        for docs in changed.chunks(cfg.move_page_documents) {
            let now = sides.control.clock.now_ms();
            if !sides
                .budget
                .allows(sides.usage, now, next_page_cost(last_cost), 0)
            {
                // The next run reads the marks again from the last page
                // copied.
                report.budget_hit = true;
                return Ok(());
            }
            let before = sides.usage.total();
            let again = docs
                .iter()
                .filter(|d| there.contains_key(&d.doc_id))
                .count() as u64;
            let added = docs.len() as u64 - again;
            let vectors = match copy_docs(src, dst, &copy, docs.to_vec()).await {
                Ok(n) => n,
                // A drain's delete of a vector the copy refers to is in
                // flight (or a cancel removed the copy): the next run.
                Err(e) if e.code == "db_constraint" => {
                    m.waiting_for = Some("vector_delete_in_flight".into());
                    sides.control.store.move_progress(m, [0; 4], now).await?;
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            // Past these (in key order): the documents before them in the
            // page matched their copies when read, and a pass never waits
            // for a whole page of a tenant that keeps writing.
            if let Some(last) = docs.last() {
                m.cursor.clone_from(&last.doc_id);
            }
            m.waiting_for = None;
            let at = sides.control.clock.now_ms();
            if !sides
                .control
                .store
                .move_progress(m, [added, again, vectors, 0], at)
                .await?
            {
                return Ok(()); // paused or cancelled meanwhile
            }
            report.copied += added;
            report.recopied += again;
            report.vectors += vectors;
            last_cost = sides.usage.total() - before;
        }
        m.cursor = cursor;
        m.waiting_for = None;
        let at = sides.control.clock.now_ms();
        if !sides.control.store.move_progress(m, [0; 4], at).await? {
            return Ok(());
        }
    }
}

/// What one copy needs to know besides its documents.
struct CopyOf<'a> {
    tenant: &'a str,
    from_generation: u32,
    to_generation: u32,
    /// The tenant's keyword key on the new shard.
    keyword_key: i64,
}

/// Copies `docs` (as the shard left holds them) to the new shard: their
/// rows in one batch, then their vectors. Returns the vectors upserted.
async fn copy_docs<P1, P2>(
    src: &P1,
    dst: &P2,
    c: &CopyOf<'_>,
    docs: Vec<MoveDocRow>,
) -> Result<u64, PortError>
where
    P1: MovePorts,
    P2: MovePorts,
{
    let ids: Vec<&str> = docs.iter().map(|d| d.doc_id.as_str()).collect();
    let (mut copy, live) = src.store().move_read(&ids, c.from_generation).await?;
    copy.generation = c.to_generation;
    copy.jobs = carried_jobs(std::mem::take(&mut copy.jobs));
    let metadata = live_metadata(&docs, &copy.versions);
    let (chunks, old_ids) = copied_chunks(live, &metadata, c)?;
    copy.chunks = chunks;
    copy.docs = docs;
    // The vectors before the rows that refer to them (the consumer's
    // order, invariant 1): first their IDs as intents, due after a lease,
    // so that a crash before the rows leaves nothing the drain cannot
    // find; the rows' batch makes them referenced (cron retires them).
    // Only the batch makes a copy's mark match: a page cut short by a
    // crash is copied again, vectors first.
    let now = dst.now_ms();
    let due = now + i64::from(dst.cfg().job_lease_seconds) * 1000;
    dst.store()
        .move_pending_vectors(&copy.chunks, now, due)
        .await?;
    let lost = copy_vectors(src, dst, c, &copy.chunks, &old_ids).await?;
    if !lost.is_empty() {
        // A vector the index left did not return: the copy is marked for
        // repair (re-run there once it is served), as cron's verification
        // would have marked the original.
        for d in copy.docs.iter_mut().filter(|d| lost.contains(&d.doc_id)) {
            d.repair_needed = 1;
        }
        log_event(
            "move_vectors_missing",
            json!({ "tenant_id": c.tenant, "documents": lost.len() }),
        );
    }
    dst.store()
        .move_write(c.tenant, &copy, dst.now_ms())
        .await?;
    Ok(copy.chunks.len() as u64)
}

/// The jobs a copy carries: every job of the documents but a backfill's
/// builds (the new shard has its own generations); one not ended runs
/// again from its start on the new shard, sent by cron once the copy is
/// served (its last change is set long ago).
fn carried_jobs(jobs: Vec<RawRow>) -> Vec<RawRow> {
    jobs.into_iter()
        .filter(|j| j.get("build_generation").is_none_or(Value::is_null))
        .map(|mut j| {
            let ended = j
                .get("state")
                .and_then(Value::as_str)
                .and_then(JobState::parse)
                .is_none_or(|s| !s.is_open());
            if !ended {
                for (k, v) in [
                    ("state", json!("queued")),
                    ("step", json!("queued")),
                    ("lease_until", Value::Null),
                    ("lease_owner", Value::Null),
                    ("next_attempt_at", Value::Null),
                    ("chunks_done", json!(0)),
                    ("updated_at", json!(0)),
                ] {
                    j.insert(k.into(), v);
                }
            }
            j
        })
        .collect()
}

/// Each document's metadata at its live version (what its vector IDs
/// hold), from the versions read.
fn live_metadata(docs: &[MoveDocRow], versions: &[RawRow]) -> HashMap<String, String> {
    let live: HashMap<&str, u32> = docs
        .iter()
        .filter_map(|d| Some((d.doc_id.as_str(), d.live_version?)))
        .collect();
    versions
        .iter()
        .filter_map(|v| {
            let doc = v.get("doc_id")?.as_str()?;
            let version = u32::try_from(v.get("version")?.as_u64()?).ok()?;
            (live.get(doc) == Some(&version))
                .then(|| Some((doc.to_string(), v.get("metadata")?.as_str()?.to_string())))?
        })
        .collect()
}

/// The live rows as the new shard holds them: their IDs there (the
/// generation is part of a vector's ID) and their keyword terms under the
/// tenant's key there; with each one's ID on the shard left, in order.
fn copied_chunks(
    live: Vec<LiveChunk>,
    metadata: &HashMap<String, String>,
    c: &CopyOf<'_>,
) -> Result<(Vec<CopiedChunk>, Vec<String>), PortError> {
    let mut out = Vec::with_capacity(live.len());
    let mut old = Vec::with_capacity(live.len());
    let mut start = 0;
    while start < live.len() {
        let doc = live[start].doc_id.clone();
        let end = start + live[start..].iter().take_while(|r| r.doc_id == doc).count();
        let rows = &live[start..end];
        let key = DocKey::from_stored(&doc).ok_or(internal("doc_id"))?;
        let meta = metadata
            .get(&doc)
            .ok_or(internal("move_live_version_missing"))?;
        let occ = occurrences(rows.iter().map(|r| r.content_hash.as_str()));
        for (r, k) in rows.iter().zip(occ) {
            let (terms, n) = terms::index_document(c.keyword_key, &r.text);
            out.push(CopiedChunk {
                doc_id: doc.clone(),
                v: r.version,
                o: r.ord,
                id: vector_id(&key, c.to_generation, &r.content_hash, k, meta),
                h: r.content_hash.clone(),
                t: r.text.clone(),
                k: terms,
                n,
            });
            old.push(r.vector_id.clone());
        }
        start = end;
    }
    Ok((out, old))
}

/// Reads the copied rows' vectors from the index left (by their IDs
/// there) and upserts them into the new one under their IDs there, with
/// the generation there. Returns the documents a vector of which the
/// index left did not return.
async fn copy_vectors<P1: MovePorts, P2: MovePorts>(
    src: &P1,
    dst: &P2,
    c: &CopyOf<'_>,
    chunks: &[CopiedChunk],
    old_ids: &[String],
) -> Result<HashSet<String>, PortError> {
    let get_max = src.cfg().delete_batch_size.max(1);
    let upsert_max = dst.cfg().upsert_batch_size.max(1);
    let mut lost = HashSet::new();
    let mut records = Vec::new();
    for (olds, news) in old_ids.chunks(get_max).zip(chunks.chunks(get_max)) {
        let got: HashMap<String, VectorRecord> = src
            .get_vectors(olds)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        for (old, new) in olds.iter().zip(news) {
            let Some(r) = got.get(old) else {
                lost.insert(new.doc_id.clone());
                continue;
            };
            let mut metadata = r.metadata.clone();
            metadata.insert("generation".into(), json!(c.to_generation));
            records.push(VectorRecord {
                id: new.id.clone(),
                namespace: c.tenant.to_string(),
                values: r.values.clone(),
                metadata,
            });
        }
        if records.len() >= upsert_max {
            for page in records.chunks(upsert_max) {
                dst.put_vectors(page).await?;
            }
            records.clear();
        }
    }
    for page in records.chunks(upsert_max) {
        dst.put_vectors(page).await?;
    }
    Ok(lost)
}

/// The end of a pass: after the first, the fence (once no sync session is
/// open) and the catch-up; after the catch-up, the tenant's settings and
/// tokens, then the switch.
async fn end_of_pass<S: Shards>(sides: &Sides<'_, S>, m: &mut MoveRow) -> Result<(), PortError> {
    let now = sides.control.clock.now_ms();
    let tenant = m.tenant_id.as_str();
    match m.state {
        MoveState::Copying => {
            let fenced = sides.src.bugs.has(crate::bugs::Bug::MoveWithoutFence)
                || sides.src.store.move_fence(tenant).await?
                || sides
                    .src
                    .store
                    .move_tenant(tenant)
                    .await?
                    .and_then(|t| t.move_state)
                    == Some(TenantMoveState::Fenced);
            if !fenced {
                m.waiting_for = Some("sync_sessions".into());
                sides.control.store.move_progress(m, [0; 4], now).await?;
                return Ok(());
            }
            if !sides
                .control
                .store
                .move_set_state(&m.move_id, MoveState::Copying, MoveState::CatchingUp, now)
                .await?
            {
                // Paused or cancelled as it fenced: the fence is lifted.
                sides.src.store.move_lift_fence(tenant).await?;
                return Ok(());
            }
            log_event(
                "move_fenced",
                json!({ "move_id": m.move_id, "tenant_id": tenant }),
            );
            m.state = MoveState::CatchingUp;
            m.cursor.clear();
            m.waiting_for = None;
            Ok(())
        }
        MoveState::CatchingUp => {
            if sides.src.bugs.has(crate::bugs::Bug::MoveWithoutFence) {
                // The seeded bug fences only now, after the catch-up.
                sides.src.store.move_fence(tenant).await?;
            }
            let settings = sides
                .src
                .store
                .move_tenant(tenant)
                .await?
                .ok_or(internal("move_tenant_missing"))?;
            let tokens = sides.src.store.move_tokens(tenant).await?;
            sides
                .dst
                .store
                .move_tenant_settle(tenant, &settings, &tokens, now)
                .await?;
            if !sides.control.store.move_switch(m, now).await? {
                return Ok(()); // cancelled meanwhile
            }
            m.state = MoveState::Switched;
            m.switched_at = Some(now);
            m.cursor.clear();
            m.waiting_for = None;
            log_event(
                "move_switched",
                json!({ "move_id": m.move_id, "tenant_id": tenant, "to": m.to_shard }),
            );
            after_switch(sides, m).await
        }
        _ => Ok(()),
    }
}

/// After the switch: the copy served, the shard left sending requests
/// back to the directory; its rows removed once no cache or lease can
/// name it any more.
async fn after_switch<S: Shards>(sides: &Sides<'_, S>, m: &mut MoveRow) -> Result<(), PortError> {
    let tenant = m.tenant_id.as_str();
    sides
        .dst
        .store
        .move_mark(tenant, Some(TenantMoveState::MovingIn), None)
        .await?;
    sides
        .src
        .store
        .move_mark(
            tenant,
            Some(TenantMoveState::Fenced),
            Some(TenantMoveState::Moved),
        )
        .await?;
    // The jobs the copy carried, sent now rather than when cron finds
    // them stalled (a page of documents a call: the cursor of this state).
    if m.waiting_for.as_deref() != Some("directory_caches") {
        loop {
            let (last, jobs) = sides
                .dst
                .store
                .move_carried_jobs(tenant, &m.cursor, sides.control.cfg.move_marks_page)
                .await?;
            let Some(last) = last else { break };
            send_carried(&sides.dst, &jobs).await?;
            m.cursor = last;
            let at = sides.control.clock.now_ms();
            if !sides.control.store.move_progress(m, [0; 4], at).await? {
                return Ok(());
            }
        }
    }
    let now = sides.control.clock.now_ms();
    let due = m.switched_at.unwrap_or(now) + sides.control.cfg.move_cleanup_delay_ms();
    if now < due {
        if m.waiting_for.as_deref() != Some("directory_caches") {
            m.waiting_for = Some("directory_caches".into());
            sides.control.store.move_progress(m, [0; 4], now).await?;
        }
        return Ok(());
    }
    sides
        .control
        .store
        .move_set_state(&m.move_id, MoveState::Switched, MoveState::Cleaning, now)
        .await?;
    Ok(())
}

/// Sends the carried jobs' messages on the new shard, then marks them
/// sent (cron re-sends one whose message is lost, once stalled).
async fn send_carried<P: MovePorts>(
    p: &P,
    jobs: &[(String, String, u32)],
) -> Result<(), PortError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let messages: Vec<JobMessage> = jobs
        .iter()
        .map(|(job, doc, version)| JobMessage::new(job.clone(), doc.clone(), *version))
        .collect();
    for page in messages.chunks(100) {
        p.send(page).await?;
    }
    let ids: Vec<&str> = jobs.iter().map(|(job, ..)| job.as_str()).collect();
    p.store().touch_jobs(&ids, p.now_ms()).await
}

/// Removes the tenant from `p` (the shard it left, or a cancelled copy):
/// a page of documents at a time, their vectors first, then their rows;
/// then its row (if its move state is `expect`), and the move ends.
async fn clean<P, C>(
    control: &C,
    p: &P,
    m: &mut MoveRow,
    expect: TenantMoveState,
    budget: &Budget,
    usage: &Usage,
    report: &mut MovesReport,
) -> Result<(), PortError>
where
    P: MovePorts,
    C: MovePorts,
{
    let page_max = p.cfg().move_page_documents;
    let mut last_cost = 0;
    loop {
        let now = control.now_ms();
        if !budget.allows(usage, now, next_page_cost(last_cost), 0) {
            report.budget_hit = true;
            return Ok(());
        }
        let before = usage.total();
        let page = p.store().move_docs_page(&m.tenant_id, "", page_max).await?;
        if page.is_empty() {
            // Intents left of a copy cut short before its rows: their
            // vectors, then them (a page a call).
            let ids = p
                .store()
                .move_tenant_intents(&m.tenant_id, p.cfg().delete_batch_size.max(1))
                .await?;
            if !ids.is_empty() {
                p.delete_vectors(&ids).await?;
                p.store().move_delete_intents(&ids).await?;
                last_cost = usage.total() - before;
                continue;
            }
            p.store().move_tenant_remove(&m.tenant_id, expect).await?;
            let (from, to) = match expect {
                TenantMoveState::Moved => (MoveState::Cleaning, MoveState::Completed),
                _ => (MoveState::Cancelling, MoveState::Cancelled),
            };
            control
                .store()
                .move_set_state(&m.move_id, from, to, now)
                .await?;
            log_event(
                "move_ended",
                json!({ "move_id": m.move_id, "tenant_id": m.tenant_id, "state": to.as_str() }),
            );
            return Ok(());
        }
        let ids: Vec<&str> = page.iter().map(|d| d.doc_id.as_str()).collect();
        let vectors = p.store().move_vector_ids(&ids).await?;
        for batch in vectors.chunks(p.cfg().delete_batch_size.max(1)) {
            p.delete_vectors(batch).await?;
        }
        p.store().move_delete_docs(&m.tenant_id, &ids).await?;
        let removed = ids.len() as u64;
        if !control
            .store()
            .move_progress(m, [0, 0, 0, removed], now)
            .await?
        {
            return Ok(());
        }
        report.removed += removed;
        last_cost = usage.total() - before;
    }
}

/// What the copy and the cleanup use of a shard's pipeline.
trait MovePorts {
    type D: Database;
    fn store(&self) -> &crate::store::Store<Self::D>;
    fn cfg(&self) -> &crate::config::Config;
    fn now_ms(&self) -> i64;
    async fn get_vectors(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError>;
    async fn put_vectors(&self, records: &[VectorRecord]) -> Result<(), PortError>;
    async fn delete_vectors(&self, ids: &[String]) -> Result<(), PortError>;
    async fn send(&self, messages: &[JobMessage]) -> Result<(), PortError>;
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> MovePorts
    for Pipeline<D, V, E, Q, C>
{
    type D = D;
    fn store(&self) -> &crate::store::Store<D> {
        &self.store
    }
    fn cfg(&self) -> &crate::config::Config {
        &self.cfg
    }
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    async fn get_vectors(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        self.index.get_by_ids(ids).await
    }
    async fn put_vectors(&self, records: &[VectorRecord]) -> Result<(), PortError> {
        self.index.upsert(records).await
    }
    async fn delete_vectors(&self, ids: &[String]) -> Result<(), PortError> {
        self.index.delete_by_ids(ids).await
    }
    async fn send(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        self.queue.send_batch(messages).await
    }
}
