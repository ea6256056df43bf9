//! The actors a script starts: a client per document, writing its
//! operations in order as the document's tenant and retrying each until it
//! is accepted (as an HTTP client would on a 5xx), and the operator's requests (a reindex, two at
//! once, a reindex then its cancel, or a redrive polled to its end). Each is
//! a future the executor polls; [`Progress`] is what they share with it.
//!
//! May import `faults` (the scheduler's clock and yield point), `wrappers`
//! (the broker a settling client watches), `world` and the oracle; not the
//! invariants, the reference run or the executor.

use super::faults::Sched;
use super::world::{DocClient, Op, Simulated, Violation, World};
use super::wrappers::Broker;
use crate::core::chunk::ContentType;
use crate::native::oracle;
use crate::native::testkit::yield_now;
use crate::pipeline::{BackfillAction, DocumentInput, IntakeItem, Refused};
use crate::ports::PortError;
use std::cell::Cell;
use std::future::Future;

/// What the actors of a run share with the executor.
pub(super) struct Progress {
    /// Client tasks that finished: documents' clients and operator requests.
    pub(super) clients_done: Cell<usize>,
    /// Documents' clients whose writes were all answered.
    pub(super) writers_done: Cell<usize>,
    /// Deliveries in flight (started, not yet ended or killed).
    pub(super) in_flight: Cell<usize>,
    /// Whether each client waits (`Op::Settle`, or the operator waiting for
    /// a live version): one flag per document's client, then one for the
    /// operator. The sequential executor polls a waiting client last.
    pub(super) waiting: Vec<Cell<bool>>,
    /// Letters the redriving operator redrove.
    pub(super) redriven: Cell<u64>,
    /// What an actor found wrong in an answer it got (the executor fails
    /// the run with the first one).
    pub(super) violations: std::cell::RefCell<Vec<Violation>>,
    /// Every write a client saw accepted: the document's key, the version
    /// the answer named, and the content hash of what it sent (a tombstone:
    /// `None`). Checked against the ledger after quiescence (I16).
    pub(super) accepted: std::cell::RefCell<Vec<(String, u32, Option<String>)>>,
    /// Writes answered `conflict` (a concurrent write won every attempt).
    pub(super) conflicts: Cell<u64>,
    /// Backfills the pausing operator paused (not finished first).
    pub(super) paused: Cell<u64>,
    /// Writes refused at a quota (key, content hash: `None` for a delete).
    pub(super) refused: std::cell::RefCell<Vec<(String, Option<String>)>>,
    /// Admissions refused by the rate limit, and by a disabled tenant.
    pub(super) rate_limited: Cell<u64>,
    pub(super) disabled: Cell<u64>,
    /// Whether the other tenant has quotas its writes may meet.
    pub(super) quotas: bool,
    /// Intakes of several documents at once that were answered.
    pub(super) batches: Cell<u64>,
}

impl Progress {
    pub(super) fn new(documents: usize) -> Progress {
        Progress {
            clients_done: Cell::new(0),
            writers_done: Cell::new(0),
            in_flight: Cell::new(0),
            waiting: (0..=documents).map(|_| Cell::new(false)).collect(),
            redriven: Cell::new(0),
            violations: std::cell::RefCell::new(Vec::new()),
            accepted: std::cell::RefCell::new(Vec::new()),
            conflicts: Cell::new(0),
            paused: Cell::new(0),
            refused: std::cell::RefCell::new(Vec::new()),
            rate_limited: Cell::new(0),
            disabled: Cell::new(0),
            quotas: false,
            batches: Cell::new(0),
        }
    }

    /// The operator's waiting flag (after every document's).
    pub(super) fn operator_waits(&self) -> &Cell<bool> {
        &self.waiting[self.waiting.len() - 1]
    }
}

/// Yields until the simulated time reaches `at_ms` (a client waiting
/// before it tries again; the scheduler moves the clock).
async fn sleep_until(sched: &Sched, at_ms: i64) {
    let task = sched.current_task.get();
    while sched.now_ms.get() < at_ms {
        sched.sleeping.borrow_mut().insert(task);
        yield_now().await;
    }
    sched.sleeping.borrow_mut().remove(&task);
}

/// A client's pause before it repeats a failed request: none in the
/// exhaustive runs (a single fault), growing to a minute in an outage.
async fn back_off(sched: &Sched, attempt: u32) {
    if sched.outage.get().is_some() {
        let seconds = 1i64 << attempt.min(6);
        sleep_until(sched, sched.now_ms.get() + seconds * 1000).await;
    }
}

/// The client of document `k` of the script, `doc` of `tenant`: its
/// operations in order, each write (as `tenant`) retried until it is
/// accepted; an `Op::Settle` waits (flagged in `progress`) until no
/// message is queued or being delivered.
pub(super) async fn client(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    broker: &Broker,
    progress: &Progress,
    k: usize,
    client: DocClient,
) {
    let wait = &progress.waiting[k];
    let (tenant, doc) = (client.tenant.clone(), client.doc());
    let last_put = client.ops.iter().rev().find_map(|op| match op {
        Op::Put(t) => Some(t.clone()),
        Op::Batch(puts) => puts.first().cloned(),
        _ => None,
    });
    for op in client.ops {
        let item = match op {
            Op::Settle => {
                while !(broker.is_empty() && progress.in_flight.get() == 0) {
                    wait.set(true);
                    yield_now().await;
                }
                wait.set(false);
                continue;
            }
            Op::Put(put) => IntakeItem::Put(put.input(doc.clone())),
            Op::Delete => IntakeItem::Delete(doc.clone()),
            Op::Batch(puts) => {
                let items = super::world::batch_items(&doc, &puts);
                write_until_accepted(&p, sched, progress, &tenant, &items).await;
                progress.batches.set(progress.batches.get() + 1);
                continue;
            }
            Op::Rerun => continue,
        };
        write_until_accepted(&p, sched, progress, &tenant, std::slice::from_ref(&item)).await;
    }
    progress.writers_done.set(progress.writers_done.get() + 1);
    // A client that sees the service down does not search (its search
    // would only wait for the outage's end).
    if let Some(put) = last_put.filter(|_| !sched.in_outage()) {
        search_as_a_client(&p, w, sched, progress, &tenant, &put).await;
    }
    progress.clients_done.set(progress.clients_done.get() + 1);
}

/// Writes `item` as `tenant`, retrying only what the API says is worth
/// retrying (a 503 of a transient failure, a 409 `conflict`: a concurrent
/// write took the version number), as an HTTP client would; records the
/// accepted write in `progress`. A refusal no client should retry (a quota,
/// a closed session: none applies here) is a violation: a misclassified
/// lost race or failure.
async fn write_until_accepted(
    p: &Simulated<'_>,
    sched: &Sched,
    progress: &Progress,
    tenant: &crate::core::ids::TenantId,
    items: &[IntakeItem],
) {
    let keyed: Vec<(String, Option<String>)> = items
        .iter()
        .map(|item| {
            let key = crate::core::ids::DocKey::new(tenant, item.doc_id());
            let hash = match item {
                IntakeItem::Put(d) => Some(crate::pipeline::content_hash(d)),
                _ => None,
            };
            (key.as_str().to_string(), hash)
        })
        .collect();
    for attempt in 0.. {
        assert!(
            attempt < 1000,
            "a client could never get its write accepted"
        );
        // Admitted first, as the API admits every request.
        match p.admit(tenant).await {
            Ok(crate::pipeline::Admission::Admitted { .. }) => {}
            Ok(crate::pipeline::Admission::RateLimited {
                retry_after_seconds,
            }) => {
                progress.rate_limited.set(progress.rate_limited.get() + 1);
                let at = sched.now_ms.get() + retry_after_seconds as i64 * 1000;
                sleep_until(sched, at).await;
                continue;
            }
            // The simulation's single shard never moves a tenant.
            Ok(crate::pipeline::Admission::TenantDisabled | crate::pipeline::Admission::Moved) => {
                progress.disabled.set(progress.disabled.get() + 1);
                sleep_until(sched, sched.now_ms.get() + 30_000).await;
                continue;
            }
            Err(_) => {
                back_off(sched, attempt).await;
                continue;
            }
        }
        match p.intake(tenant, items).await {
            Ok(outcomes) => {
                for (o, (key, hash)) in outcomes.iter().zip(&keyed) {
                    if let Some(version) = accepted_version(o) {
                        progress
                            .accepted
                            .borrow_mut()
                            .push((key.clone(), version, hash.clone()));
                    }
                }
                return;
            }
            Err(crate::pipeline::IntakeError::Conflict) => {
                progress.conflicts.set(progress.conflicts.get() + 1);
            }
            Err(crate::pipeline::IntakeError::Port(e)) if e.bucket.is_transient() => {}
            // The tenant is at its quota: refused, nothing written (a 429
            // a client does not repeat as is). Only the tenant with quotas
            // gets it; anyone else's is a misclassified refusal.
            Err(crate::pipeline::IntakeError::QuotaExceeded(_))
                if tenant.as_str() == super::world::OTHER_TENANT && progress.quotas =>
            {
                progress.refused.borrow_mut().extend(keyed);
                return;
            }
            Err(e) => {
                progress.violations.borrow_mut().push(Violation {
                    invariant: "I16",
                    detail: format!(
                        "{:?}: a write was refused as {e:?}, which a client does not retry",
                        keyed.first().map(|k| &k.0)
                    ),
                });
                return;
            }
        }
        back_off(sched, attempt).await;
    }
}

/// The version an intake outcome says the write is (a new one, or the
/// latest, unchanged); none for a delete of nothing.
fn accepted_version(o: &crate::pipeline::IntakeOutcome) -> Option<u32> {
    match o {
        crate::pipeline::IntakeOutcome::Queued { version, .. }
        | crate::pipeline::IntakeOutcome::Unchanged { version, .. } => Some(*version),
        crate::pipeline::IntakeOutcome::NotFound { .. } => None,
    }
}

/// A client's search for the first word of what it last wrote, through
/// the faulty ports (retried until answered, as a client would on a 5xx),
/// filtered by its `lang` if it wrote one: every hit must be its tenant's,
/// a chunk of a version of that tenant's document, and with a filter a
/// version of that `lang` (I11, I4 on the answer a client gets; the
/// monitor checks the fault-free reads).
async fn search_as_a_client(
    p: &Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    tenant: &crate::core::ids::TenantId,
    put: &super::world::Put,
) {
    let Some(query) = put.first_word() else {
        return;
    };
    let mut req = crate::pipeline::SearchRequest::new(query, 5);
    if let Some(lang) = &put.lang {
        req.metadata
            .insert("lang".into(), serde_json::Value::String(lang.clone()));
    }
    let hits = loop_until_answered(sched, || p.search(tenant, &req)).await;
    for h in hits {
        let key = crate::core::ids::DocId::parse(&h.doc_id)
            .ok()
            .map(|d| crate::core::ids::DocKey::new(tenant, &d));
        // The version's text, or, once retention pruned it (after the
        // search read the chunk: a later version went live meanwhile), the
        // text a client sent with its content hash.
        let text = key.as_ref().and_then(|key| {
            oracle::version_text(&w.db, key.as_str(), h.version).or_else(|| {
                oracle::version_hash(&w.db, key.as_str(), h.version)
                    .and_then(|hash| w.sent.get(&hash).cloned())
            })
        });
        let lang_fits = put.lang.as_ref().is_none_or(|lang| {
            key.as_ref().is_some_and(|key| {
                oracle::version_metadata(&w.db, key.as_str(), h.version)
                    .is_some_and(|m| m.get("lang").and_then(|l| l.as_str()) == Some(lang))
            })
        });
        if !lang_fits {
            progress.violations.borrow_mut().push(Violation {
                invariant: "I4",
                detail: format!(
                    "{tenant}'s search filtered by lang served {}@{}#{} of another lang",
                    h.doc_id, h.version, h.chunk
                ),
            });
        }
        if !text.is_some_and(|t| t.contains(&h.text)) {
            progress.violations.borrow_mut().push(Violation {
                invariant: "I11",
                detail: format!(
                    "{tenant}'s search (faulty ports) served {}@{}#{}, not a chunk of its own document",
                    h.doc_id, h.version, h.chunk
                ),
            });
        }
    }
}

/// Retries a request until it is answered (its errors are transient
/// faults of the simulation), with a client's back-off.
async fn loop_until_answered<T, F: Future<Output = Result<T, PortError>>>(
    sched: &Sched,
    mut call: impl FnMut() -> F,
) -> T {
    answered(sched, &mut call).await
}

/// Starts the backfill to the reindex configuration (`p` runs it),
/// retried until the request is answered.
pub(super) async fn start_reindex(p: &Simulated<'_>, sched: &Sched) {
    for attempt in 0.. {
        assert!(attempt < 1000, "the backfill could never be started");
        match p
            .start_backfill(&crate::pipeline::BackfillScope::Config, 1)
            .await
        {
            Ok(Ok(_)) => break,
            // An earlier attempt (or the other request) started it, or even
            // finished it (the switch), then failed to answer.
            Ok(Err(
                Refused::BackfillOpen
                | Refused::BackfillStartedMeanwhile
                | Refused::ConfigUnchanged,
            )) => break,
            Ok(Err(refusal)) => panic!("backfill refused: {refusal:?}"),
            Err(_) => back_off(sched, attempt).await,
        }
    }
}

/// The pausing operator: starts the backfill, pauses it `pause_ms` later
/// and resumes it `resume_ms` after that (a refusal: it completed first).
pub(super) async fn reindex_pause_resume(
    p: Simulated<'_>,
    sched: &Sched,
    progress: &Progress,
    pause_ms: i64,
    resume_ms: i64,
) {
    start_reindex(&p, sched).await;
    let list = answered(sched, || p.backfills(1)).await;
    let id = list
        .first()
        .map(|b| b.backfill_id.clone())
        .expect("the backfill started");
    sleep_until(sched, sched.now_ms.get() + pause_ms).await;
    if answered(sched, || p.backfill_transition(&id, BackfillAction::Pause))
        .await
        .is_ok()
    {
        progress.paused.set(progress.paused.get() + 1);
    }
    sleep_until(sched, sched.now_ms.get() + resume_ms).await;
    let _ = answered(sched, || p.backfill_transition(&id, BackfillAction::Resume)).await;
}

/// The rolling-back operator: starts the backfill; once its generation 2
/// serves, the clients are done and nothing is in flight, activates
/// generation 1 again (a rollback; `generation_incomplete` while a version
/// is still being written to it: again once quiet) and retires 2.
pub(super) async fn reindex_then_roll_back(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    writers_total: usize,
) {
    start_reindex(&p, sched).await;
    for round in 0.. {
        assert!(round < 100, "the rollback was never accepted");
        while oracle::active_generation(&w.db) != 2
            || progress.writers_done.get() < writers_total
            || oracle::open_jobs(&w.db) > 0
            || !w.broker.is_empty()
            || progress.in_flight.get() > 0
        {
            progress.operator_waits().set(true);
            yield_now().await;
        }
        progress.operator_waits().set(false);
        match answered(sched, || p.activate_generation(1)).await {
            Ok(_) => break,
            // Its answer was lost after it switched: generation 1 serves.
            Err(Refused::GenerationNotRetained { .. }) if oracle::active_generation(&w.db) == 1 => {
                break
            }
            Err(Refused::GenerationIncomplete { .. }) => yield_now().await,
            Err(refusal) => panic!("rollback refused: {refusal:?}"),
        }
    }
    match answered(sched, || p.retire_generation(2)).await {
        Ok(_) => {}
        Err(refusal) => panic!("retire refused: {refusal:?}"),
    }
}

/// The operator of a backfill of scope `all` or `filter` (`scope`):
/// starts it `after_ms` into the run, while the clients write; cron drives
/// it to its end (its re-runs are new versions of the documents).
pub(super) async fn rerun_backfill(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    scope: crate::pipeline::BackfillScope,
    after_ms: Option<i64>,
) {
    match after_ms {
        Some(ms) => sleep_until(sched, sched.now_ms.get() + ms).await,
        // The exhaustive flows: once a version is live (their clock only
        // moves to deliveries), so that the backfill has one to re-run.
        None => {
            while oracle::live_versions(&w.db).values().all(Option::is_none) {
                progress.operator_waits().set(true);
                yield_now().await;
            }
            progress.operator_waits().set(false);
        }
    }
    for attempt in 0.. {
        assert!(attempt < 1000, "the backfill could never be started");
        match p.start_backfill(&scope, 1).await {
            Ok(Ok(_) | Err(Refused::BackfillOpen | Refused::BackfillStartedMeanwhile)) => break,
            Ok(Err(refusal)) => panic!("backfill refused: {refusal:?}"),
            Err(_) => back_off(sched, attempt).await,
        }
    }
}

/// The operator that reindexes each client's document once: as soon as
/// its version is live and no newer one is being indexed (else the API
/// says `document_indexing`: again later); a deleted or never indexed one
/// is left once the clients are done (`document_not_indexed`). A lost
/// answer of an applied reindex shows as a newer latest version: done.
pub(super) async fn reindex_documents(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    docs: Vec<DocClient>,
) {
    let mut keys: Vec<crate::core::ids::DocKey> = docs.iter().map(DocClient::key).collect();
    keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    keys.dedup();
    let latest = |key: &crate::core::ids::DocKey| {
        oracle::document_versions(&w.db)
            .get(key.as_str())
            .map(|v| v.0)
    };
    for key in keys {
        for attempt in 0.. {
            assert!(attempt < 10_000, "a document's reindex never answered");
            let before = latest(&key);
            match p.reindex_document(&key).await {
                Ok(Ok(_)) => break,
                Err(_) if latest(&key) != before => break,
                Ok(Err(Refused::DocumentNotIndexed | Refused::DocumentNotFound))
                    if progress.writers_done.get() == docs.len()
                        && oracle::open_jobs(&w.db) == 0
                        && w.broker.is_empty()
                        && progress.in_flight.get() == 0 =>
                {
                    break
                }
                Ok(Err(_)) | Err(_) => {
                    progress.operator_waits().set(true);
                    sleep_until(sched, sched.now_ms.get() + 1000).await;
                    progress.operator_waits().set(false);
                }
            }
        }
    }
}

/// The operator of the other tenant: disables it `disable_ms` into the
/// run and enables it again `enable_ms` later (its clients wait).
pub(super) async fn disable_then_enable(
    p: Simulated<'_>,
    sched: &Sched,
    disable_ms: i64,
    enable_ms: i64,
) {
    let other =
        crate::core::ids::TenantId::parse(super::world::OTHER_TENANT).expect("a valid tenant id");
    sleep_until(sched, sched.now_ms.get() + disable_ms).await;
    let disabled = crate::core::state::TenantState::Disabled;
    let _ = answered(sched, || p.set_tenant_state(&other, disabled)).await;
    sleep_until(sched, sched.now_ms.get() + enable_ms).await;
    let active = crate::core::state::TenantState::Active;
    let _ = answered(sched, || p.set_tenant_state(&other, active)).await;
}

/// The index losing a vector: once the clients are done and everything is
/// indexed, one vector a served chunk refers to disappears from the index
/// (recorded in `w.lost`); cron's verification must find it and re-run
/// its document, whose upsert writes it again (same ID).
pub(super) async fn lose_a_vector(w: &World, progress: &Progress, writers_total: usize) {
    while progress.writers_done.get() < writers_total
        || oracle::open_jobs(&w.db) > 0
        || !w.broker.is_empty()
        || progress.in_flight.get() > 0
    {
        progress.operator_waits().set(true);
        yield_now().await;
    }
    progress.operator_waits().set(false);
    if let Some(c) = oracle::served_chunks(&w.db).first() {
        w.lost.borrow_mut().insert(c.vector_id.clone());
        w.index.vectors.borrow_mut().remove(&c.vector_id);
    }
}

/// Retries a read-only or idempotent admin call until it answers.
async fn answered<T, F: Future<Output = Result<T, PortError>>>(
    sched: &Sched,
    mut call: impl FnMut() -> F,
) -> T {
    for attempt in 0.. {
        assert!(attempt < 1000, "an admin request was never answered");
        if let Ok(v) = call().await {
            return v;
        }
        back_off(sched, attempt).await;
    }
    unreachable!()
}

/// The cancelling operator: starts the backfill (`p` runs the reindex
/// configuration), then cancels it `cancel_after_ms` later. With
/// `after_a_live_version` (the exhaustive flow, which cancels a build, not
/// a switch that an empty index allows at once), it first waits for a
/// version to go live.
pub(super) async fn reindex_then_cancel(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    after_a_live_version: bool,
    cancel_after_ms: i64,
) {
    if after_a_live_version {
        while oracle::live_versions(&w.db).values().all(Option::is_none) {
            progress.operator_waits().set(true);
            yield_now().await;
        }
        progress.operator_waits().set(false);
    }
    start_reindex(&p, sched).await;
    let list = answered(sched, || p.backfills(1)).await;
    let id = list
        .first()
        .map(|b| b.backfill_id.as_str())
        .expect("the backfill started")
        .to_string();
    sleep_until(sched, sched.now_ms.get() + cancel_after_ms).await;
    // Cancelled, or refused: it completed (or was cancelled by an
    // earlier attempt whose answer was lost).
    let _ = answered(sched, || p.backfill_transition(&id, BackfillAction::Cancel)).await;
}

/// The request a redriving operator sends: every letter, the API's
/// smallest canary (3), batches of two, no failure tolerated.
pub fn redrive_request() -> crate::pipeline::RedriveRequest {
    crate::pipeline::RedriveRequest {
        tenant_id: None,
        bucket: None,
        since: None,
        until: None,
        doc_ids: None,
        canary_size: 3,
        max_failed_canaries: 0,
        max_failure_ratio: 0.0,
        batch_size: 2,
    }
}

/// Redrive rounds an operator runs at most (a redriven job that failed
/// again is redriven in the next one).
const REDRIVE_ROUNDS_MAX: usize = 8;

/// The redriving operator: once the outage is over and the clients'
/// writes were answered, waits for every job and message to end, then plans and
/// executes a redrive of every eligible letter and polls it (the console's
/// `GET`) until it ends, while cron advances it too; again until nothing
/// is eligible. Records the letters it redrove in `progress`.
pub(super) async fn redrive(
    p: Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    writers_total: usize,
) {
    let redriven = redrive_rounds(&p, w, sched, progress, writers_total).await;
    progress.redriven.set(redriven);
}

/// The rounds of [`redrive`]; returns the letters redriven.
async fn redrive_rounds(
    p: &Simulated<'_>,
    w: &World,
    sched: &Sched,
    progress: &Progress,
    writers_total: usize,
) -> u64 {
    let req = redrive_request();
    let mut redriven = 0;
    for _ in 0..REDRIVE_ROUNDS_MAX {
        // Quiet: no job open, no message queued or being delivered (a
        // failed job's letter may still be on its way to the archive).
        while sched.in_outage()
            || progress.writers_done.get() < writers_total
            || oracle::open_jobs(&w.db) > 0
            || !w.broker.is_empty()
            || progress.in_flight.get() > 0
        {
            progress.operator_waits().set(true);
            yield_now().await;
        }
        progress.operator_waits().set(false);
        let Some(id) = execute_redrive(p, w, sched, &req, &mut redriven).await else {
            return redriven;
        };
        poll_redrive(p, sched, progress, &id).await;
    }
    redriven
}

/// Plans a redrive and executes the plan, again until an execution is
/// answered; adds the letters it covers to `redriven` and returns its id
/// (or that of a redrive still running, whose execution's answer was
/// lost), or `None` if no letter is eligible and none runs.
async fn execute_redrive(
    p: &Simulated<'_>,
    w: &World,
    sched: &Sched,
    req: &crate::pipeline::RedriveRequest,
    redriven: &mut u64,
) -> Option<String> {
    loop {
        let plan = answered(sched, || p.redrive_plan(req)).await;
        if plan.eligible.is_empty() {
            // An execution whose answer was lost started a redrive: its
            // letters are not eligible while it runs; it is followed.
            return oracle::unended_redrives(&w.db)
                .first()
                .and_then(|r| r["redrive_id"].as_str().map(str::to_string));
        }
        let n = plan.eligible.len() as u64;
        match p.redrive_execute(req, &plan.plan_id).await {
            Ok(Ok(view)) => {
                *redriven += n;
                return Some(view.redrive_id);
            }
            // The plan changed (an earlier attempt of this request
            // executed it), or the answer was lost: plan again.
            Ok(Err(_)) | Err(_) => back_off(sched, 0).await,
        }
    }
}

/// Polls redrive `id` (the console's `GET`, which advances it like cron)
/// once a second until it is completed or stopped.
async fn poll_redrive(p: &Simulated<'_>, sched: &Sched, progress: &Progress, id: &str) {
    loop {
        // Polling advances it, like cron.
        let _ = p.redrive_advance(id).await;
        if let Ok(Some(v)) = p.redrive_view(id).await {
            if !v.state.is_open() {
                break;
            }
        }
        // Waiting, so that the sequential schedule delivers what the
        // redrive sent before it polls again.
        progress.operator_waits().set(true);
        sleep_until(sched, sched.now_ms.get() + 1000).await;
        progress.operator_waits().set(false);
    }
}

/// The source the syncing operator syncs.
pub const SYNC_SOURCE: &str = "site";

/// A document written into [`SYNC_SOURCE`] outside any session while the
/// second session is open: that session's commit must keep it (I14).
pub const SYNC_LATE_DOC: &str = "sync-late";

/// The syncing operator's work (flow `sync`), each request retried until
/// answered: a first session writes every document of `docs` again
/// (unchanged: seen, and now of [`SYNC_SOURCE`]) and commits, deleting
/// nothing; a second writes all but the last and commits, which tombstones
/// the last through the protocol, while a plain write puts
/// [`SYNC_LATE_DOC`] into the source, which it keeps. Each document's text
/// is its last `Put`.
/// A session whose opening answer was lost stays open, unseen, until the
/// next commit supersedes it: it deletes nothing.
pub(super) async fn sync_source(p: &Simulated<'_>, sched: &Sched, docs: &[DocClient]) {
    // The source is the `default` tenant's: its sessions are that tenant's.
    let writes: Vec<(DocClient, super::world::Put)> = docs
        .iter()
        .filter(|c| c.tenant.is_default())
        .filter_map(|c| {
            let text = c.ops.iter().rev().find_map(|o| match o {
                Op::Put(t) => Some(t.clone()),
                _ => None,
            })?;
            Some((c.clone(), text))
        })
        .collect();
    let mut draw = 0u8;
    for (round, keep) in [writes.len(), writes.len().saturating_sub(1)]
        .into_iter()
        .enumerate()
    {
        let sync_id = loop {
            draw += 1;
            let tenant = crate::core::ids::TenantId::default_tenant();
            if let Ok(Ok(v)) = p.open_sync(&tenant, SYNC_SOURCE, &[draw; 32]).await {
                break v.sync_id;
            }
            back_off(sched, u32::from(draw)).await;
        };
        if round == 1 {
            plain_write_into_source(p, sched).await;
        }
        let scope = crate::pipeline::SourceWrite {
            source: SYNC_SOURCE.to_string(),
            sync_id: Some(sync_id.clone()),
        };
        for (client, put) in writes.iter().take(keep) {
            let item = IntakeItem::Put(put.input(client.doc()));
            for attempt in 0.. {
                assert!(attempt < 1000, "a sync write was never accepted");
                let scoped = crate::pipeline::IntakeScope::Source(&scope);
                match p
                    .intake_in(&client.tenant, std::slice::from_ref(&item), scoped)
                    .await
                {
                    Ok(_) => break,
                    Err(crate::pipeline::IntakeError::SyncNotOpen) => {
                        panic!("the session closed under its writes")
                    }
                    Err(_) => back_off(sched, attempt).await,
                }
            }
        }
        let tenant = crate::core::ids::TenantId::default_tenant();
        for attempt in 0.. {
            assert!(attempt < 1000, "a sync commit never ended");
            match p.commit_sync(&tenant, &sync_id, false).await {
                Ok(Ok(v)) if v.state == crate::core::state::SyncState::Committed => break,
                Ok(Ok(_)) => yield_now().await,
                Ok(Err(refusal)) => panic!("sync commit refused: {refusal:?}"),
                Err(_) => back_off(sched, attempt).await,
            }
        }
    }
}

/// [`SYNC_LATE_DOC`] written into [`SYNC_SOURCE`] without a session,
/// retried until answered (a retry of a write that landed is unchanged).
async fn plain_write_into_source(p: &Simulated<'_>, sched: &Sched) {
    let item = IntakeItem::Put(DocumentInput {
        doc_id: crate::core::ids::DocId::parse(SYNC_LATE_DOC).expect("a valid ID"),
        text: "written into the source while a session is open".to_string(),
        metadata: Default::default(),
        content_type: ContentType::Plain,
    });
    let scope = crate::pipeline::SourceWrite {
        source: SYNC_SOURCE.to_string(),
        sync_id: None,
    };
    let tenant = crate::core::ids::TenantId::default_tenant();
    for attempt in 0.. {
        assert!(
            attempt < 1000,
            "a plain write into the source was never accepted"
        );
        let scoped = crate::pipeline::IntakeScope::Source(&scope);
        match p
            .intake_in(&tenant, std::slice::from_ref(&item), scoped)
            .await
        {
            Ok(_) => break,
            Err(_) => back_off(sched, attempt).await,
        }
    }
}

/// The syncing operator of a run: waits until every client's writes were
/// answered and delivered, then [`sync_source`].
pub(super) async fn sync_operator(
    p: Simulated<'_>,
    sched: &Sched,
    broker: &Broker,
    progress: &Progress,
    docs: Vec<DocClient>,
) {
    while !(progress.writers_done.get() == docs.len()
        && broker.is_empty()
        && progress.in_flight.get() == 0)
    {
        progress.operator_waits().set(true);
        yield_now().await;
    }
    progress.operator_waits().set(false);
    sync_source(&p, sched, &docs).await;
}
