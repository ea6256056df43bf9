//! The invariants (see `docs/ARCHITECTURE.md`): [`Monitor`], checked
//! after every step (I1–I4, I8, I10–I13, I19), and the checks of a quiescent
//! run (I5, I6 against the reference run's dump, I9, and R after a
//! redrive scenario). What they read of the ledger comes from the oracle;
//! each returns the first violation it finds.
//!
//! May import `world` (the ledger, the index, search, the tenants) and the
//! oracle; not the actors, the reference run or the executor.

use super::faults::Sched;
use super::world::{tenants, Op, Operator, Put, Reference, Script, Violation, World};
use crate::core::ids::{split_key, DocId, DocKey, TenantId};
use crate::native::oracle;
use crate::pipeline::{DocumentSummary, DocumentView, SearchHit, SearchMode, SearchRequest};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

/// The search modes the step checks take in turn.
const SEARCH_MODES: [SearchMode; 3] = [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid];

/// I7: a run quiesces (every message delivered, cron finding nothing to
/// do) within this many cron ticks.
pub const QUIESCENCE_TICKS_MAX: u32 = 8;

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

/// The served chunks' texts by document key, live version and order key (its bits).
type Served = BTreeMap<(String, u32, u64), String>;
/// Each document's latest and live version, by key.
type Versions = BTreeMap<String, (u32, Option<u32>)>;
/// Each job's document key and progress, by job ID.
type Jobs = BTreeMap<String, (String, String)>;

// ------------------------------------------------------------------ after every step

/// The step invariants' memory (what a step may not go back on), the
/// searches I4 and I11 run, and the documents and jobs I11 looks up.
pub(super) struct Monitor {
    max_live: RefCell<BTreeMap<String, u32>>,
    max_generation: Cell<u32>,
    queries: Vec<String>,
    /// Every document ID of the script (of either tenant): each tenant
    /// looks up all of them.
    doc_ids: Vec<DocId>,
    /// Each job's progress when I11 last looked it up as every tenant.
    jobs_seen: RefCell<BTreeMap<String, String>>,
    /// The ledger's changes and the index's writes when the monitor last
    /// checked (see [`Monitor::check_step`]).
    checked_at: Cell<Option<(u64, usize)>>,
    /// Checks run so far: their searches take the modes in turn.
    checks: Cell<u64>,
    /// The operator rolls back (I8 then only holds until it does).
    rolls_back: bool,
    /// The one invariant checked after each step, if not all: a search for
    /// a seeded bug counts only the violations of its own (over half of a
    /// run's time went to the others).
    pub(super) only: Option<&'static str>,
}

impl Monitor {
    /// The monitor of `script`: its searches are the first word of up to two
    /// of the texts it writes.
    pub(super) fn new(script: &Script) -> Monitor {
        let mut queries: Vec<String> = script
            .docs
            .iter()
            .flat_map(|c| c.ops.iter())
            .filter_map(|op| match op {
                Op::Put(t) => t.first_word(),
                Op::Batch(puts) => puts.first().and_then(Put::first_word),
                Op::Delete | Op::Settle | Op::Rerun => None,
            })
            .collect();
        queries.sort();
        queries.dedup();
        queries.truncate(2);
        let mut doc_ids: Vec<DocId> = script.docs.iter().map(|c| c.doc()).collect();
        doc_ids.sort();
        doc_ids.dedup();
        Monitor {
            max_live: RefCell::new(BTreeMap::new()),
            max_generation: Cell::new(0),
            queries,
            doc_ids,
            jobs_seen: RefCell::new(BTreeMap::new()),
            checked_at: Cell::new(None),
            checks: Cell::new(0),
            rolls_back: script.operator == Operator::Rollback,
            only: None,
        }
    }

    /// I1, I2, I3, I8, I10, I4 and I11, in that order, checked after every
    /// step. Each is a function of the ledger and the index alone (and of
    /// the monitor's memory, which only they move): after a step that
    /// changed neither (a read, a failed call, a yield), they would find
    /// what they found after the step before, so they are not run again.
    ///
    /// In a run's checked prefix ([`Sched::in_checked_prefix`]) only the
    /// checks with a memory (I2 and I8, which compare with what came
    /// before) run, so that the first steps after the fault are checked
    /// against the same memory as in a run checked throughout: the checks
    /// of the current state alone would find what they found in the
    /// fault-free run. Two thirds of the exhaustive crash points' time
    /// was these repeated checks.
    pub(super) fn check_step(&self, w: &World, sched: &Sched) -> Result<(), Violation> {
        vectors_are_not_deleted_while_held(w)?;
        if sched.in_checked_prefix() {
            return self.remember(w);
        }
        let state = (w.db.total_changes(), w.index.writes());
        if self.checked_at.get() == Some(state) {
            return Ok(());
        }
        self.checks(w)?;
        self.checked_at.set(Some(state));
        Ok(())
    }

    /// The checks with a memory, in a checked prefix. The check count
    /// moves as in [`Monitor::checks`], which turns the search mode by it.
    fn remember(&self, w: &World) -> Result<(), Violation> {
        self.checks.set(self.checks.get() + 1);
        self.live_versions_never_decrease(&oracle::document_versions(&w.db))?;
        self.active_generation_moves_forward(w).map(|_| ())
    }

    fn checks(&self, w: &World) -> Result<(), Violation> {
        self.checks.set(self.checks.get() + 1);
        let wants = |names: &[&str]| self.only.is_none_or(|o| names.contains(&o));
        // I4's search (and the I11 and I19 checks of its hits) needs the
        // served chunks and the versions.
        let searched = wants(&["I4", "I11", "I19"]);
        let index: BTreeSet<String> = w.index.ids().into_iter().collect();
        let chunks = if searched || wants(&["I1"]) {
            oracle::served_chunks(&w.db)
        } else {
            Vec::new()
        };
        if wants(&["I1"]) {
            served_chunks_have_vectors(&chunks, &index, &w.lost.borrow())?;
        }
        let served: Served = chunks
            .into_iter()
            .map(|c| ((c.doc_id, c.version, c.ord.to_bits()), c.text))
            .collect();
        let versions = if searched || wants(&["I2"]) {
            oracle::document_versions(&w.db)
        } else {
            Versions::new()
        };
        if wants(&["I2"]) {
            self.live_versions_never_decrease(&versions)?;
        }
        if wants(&["I3"]) {
            indexed_vectors_are_known(w, &index)?;
        }
        if wants(&["I11"]) {
            vectors_are_in_their_tenants_namespace(w)?;
        }
        if wants(&["I15"]) {
            tenant_usage_is_what_its_documents_hold(w)?;
        }
        if wants(&["I18"]) {
            nothing_reachable_was_pruned(w)?;
        }
        if wants(&["I17"]) {
            quotas_hold(w)?;
        }
        let active = self.active_generation_moves_forward(w)?;
        if wants(&["I10"]) {
            generations_are_built_by_backfills(w)?;
        }
        if wants(&["I12"]) {
            keyword_index_holds_the_chunk_rows(w)?;
        }
        if searched {
            self.search_serves_live_chunks_of_its_tenant(w, active, &versions, &served)?;
        }
        if wants(&["I11"]) {
            self.views_show_only_their_tenant(w, &versions)?;
        }
        Ok(())
    }

    /// I2: `live_version` never decreases (so a tombstone stays until a
    /// newer version).
    fn live_versions_never_decrease(&self, versions: &Versions) -> Result<(), Violation> {
        let mut max = self.max_live.borrow_mut();
        for (doc, &(_, live)) in versions {
            let prev = max.get(doc).copied();
            match (prev, live) {
                (Some(p), None) => {
                    return Err(violation("I2", format!("{}: live {p} -> none", shown(doc))));
                }
                (Some(p), Some(l)) if l < p => {
                    return Err(violation("I2", format!("{}: live {p} -> {l}", shown(doc))));
                }
                (_, Some(l)) => {
                    max.insert(doc.clone(), l);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// I8: the active generation only moves forward (the simulation does not
    /// roll back). Returns it.
    fn active_generation_moves_forward(&self, w: &World) -> Result<u32, Violation> {
        let active = oracle::active_generation(&w.db);
        if active < self.max_generation.get() && !self.rolls_back {
            return Err(violation(
                "I8",
                format!(
                    "active generation {} -> {active}",
                    self.max_generation.get()
                ),
            ));
        }
        self.max_generation.set(active);
        Ok(active)
    }

    /// I4 and I11's searches: each tenant searches with every query. I11: every hit is a served chunk of that tenant's
    /// document, never one of the other tenant's document of the same ID;
    /// I4: only chunks D1 holds as live, of one generation: the `active`
    /// one.
    fn search_serves_live_chunks_of_its_tenant(
        &self,
        w: &World,
        active: u32,
        versions: &Versions,
        served: &Served,
    ) -> Result<(), Violation> {
        let p = w.direct();
        for (tenant, q) in tenants()
            .iter()
            .flat_map(|t| self.queries.iter().map(move |q| (t, q)))
        {
            // The modes in turn, check after check (each ranking's fences
            // on their own, then fused), at the cost of about one ranking
            // per check.
            let req = SearchRequest {
                mode: SEARCH_MODES[(self.checks.get() % 3) as usize],
                ..SearchRequest::new(q.clone(), 10)
            };
            let hits = futures::executor::block_on(p.search(tenant, &req))
                .map_err(|e| violation("I4", format!("search failed: {e}")))?;
            for h in hits {
                hit_is_of_its_tenant(tenant, &h, served)?;
                if req.mode == SearchMode::Keyword {
                    keyword_score_is_the_tenants_own(w, tenant, q, &h)?;
                }
                if h.generation != active {
                    return Err(violation(
                        "I4",
                        format!(
                            "served generation {} while {active} is active",
                            h.generation
                        ),
                    ));
                }
                let key = key_of(tenant, &h.doc_id)?;
                // Its text is the served chunk's, not only its version.
                let at = (key.as_str().to_string(), h.version, h.chunk.to_bits());
                if served.get(&at) != Some(&h.text) {
                    return Err(violation(
                        "I4",
                        format!(
                            "{tenant} was served {}@{}#{} with a text that is not that served chunk's",
                            h.doc_id, h.version, h.chunk
                        ),
                    ));
                }
                let live = versions.get(key.as_str()).and_then(|v| v.1);
                if live != Some(h.version) {
                    return Err(violation(
                        "I4",
                        format!(
                            "served {}@{} of {tenant} while live is {live:?}",
                            h.doc_id, h.version
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// I11, the views: each tenant's view of every document ID of the
    /// script describes that tenant's document (absent if it has none;
    /// else its latest and live versions, and a job of its own); a job is
    /// visible to its tenant and to no other.
    fn views_show_only_their_tenant(
        &self,
        w: &World,
        versions: &Versions,
    ) -> Result<(), Violation> {
        let p = w.direct();
        let jobs = oracle::job_progress(&w.db);
        for tenant in tenants() {
            let keys: Vec<DocKey> = self
                .doc_ids
                .iter()
                .map(|d| DocKey::new(&tenant, d))
                .collect();
            let views = futures::executor::block_on(p.documents(&keys))
                .map_err(|e| isolation(format!("document views failed: {e}")))?;
            let mut by_id: BTreeMap<&str, &DocumentView> = BTreeMap::new();
            for v in &views {
                if by_id.insert(v.doc_id.as_str(), v).is_some() {
                    return Err(isolation(format!("{tenant} sees {} twice", v.doc_id)));
                }
            }
            for key in &keys {
                view_is_of_its_tenant(
                    key,
                    versions.get(key.as_str()),
                    by_id.get(key.doc_id()),
                    &jobs,
                )?;
            }
        }
        self.jobs_are_seen_by_their_tenant_only(w, &jobs)
    }

    /// I11, the jobs: each job is looked up as every tenant whenever its
    /// progress changed (its view reads only its row and its version's, so
    /// it answers the same until then): its own tenant sees it, no other.
    fn jobs_are_seen_by_their_tenant_only(&self, w: &World, jobs: &Jobs) -> Result<(), Violation> {
        let p = w.direct();
        let mut seen = self.jobs_seen.borrow_mut();
        for (id, (key, progress)) in jobs {
            if seen.get(id) == Some(progress) {
                continue;
            }
            let owner = split_key(key).0;
            for tenant in tenants() {
                let view = futures::executor::block_on(p.job(&tenant, id))
                    .map_err(|e| isolation(format!("job view failed: {e}")))?;
                match view {
                    Some(_) if tenant.as_str() != owner => {
                        return Err(isolation(format!(
                            "{tenant} sees job {id} (of {})",
                            shown(key)
                        )))
                    }
                    None if tenant.as_str() == owner => {
                        return Err(isolation(format!("{tenant} does not see its job {id}")))
                    }
                    _ => {}
                }
            }
            seen.insert(id.clone(), progress.clone());
        }
        Ok(())
    }
}

/// I19: a keyword hit's score is bm25 over its tenant's own rows alone
/// (recounted by the oracle from their texts): no other tenant's data
/// moves it, so neither does its order.
fn keyword_score_is_the_tenants_own(
    w: &World,
    tenant: &TenantId,
    q: &str,
    h: &SearchHit,
) -> Result<(), Violation> {
    let terms = crate::core::terms::query_terms(q, w.cfg.search_keyword_phrases_max);
    let key = key_of(tenant, &h.doc_id)?;
    let got = h.scores.keyword.map(f64::from);
    let want = oracle::keyword_score_recount(
        &w.db,
        tenant.as_str(),
        q,
        &terms,
        (key.as_str(), h.chunk, h.generation),
        w.cfg.search_keyword_phrase_boost_percent,
    );
    match (got, want) {
        (Some(g), Some(x)) if (g - x).abs() <= 1e-4 * x.abs().max(1.0) => Ok(()),
        _ => Err(violation(
            "I19",
            format!(
                "{tenant}'s keyword score of {}#{} for {q:?} is {got:?}, its own rows give {want:?}",
                h.doc_id, h.chunk
            ),
        )),
    }
}

/// A violation of I11, tenant isolation.
fn isolation(detail: String) -> Violation {
    violation("I11", detail)
}

/// I11, a document view: what `key`'s tenant sees of `key`'s document ID
/// (`view`) is its own document (`own`: its latest and live versions, if
/// it has one), with a job of its own.
fn view_is_of_its_tenant(
    key: &DocKey,
    own: Option<&(u32, Option<u32>)>,
    view: Option<&&DocumentView>,
    jobs: &Jobs,
) -> Result<(), Violation> {
    let (tenant, doc) = (key.tenant(), key.doc_id());
    match (own, view) {
        (None, None) => Ok(()),
        (None, Some(v)) => Err(isolation(format!(
            "{tenant} sees a document {doc} it never wrote (latest version {})",
            v.latest_version
        ))),
        (Some(_), None) => Err(isolation(format!("{tenant} does not see its {doc}"))),
        (Some(&(latest, live)), Some(v)) => {
            // The job the view names: `None` if it is no job, else its document's key.
            let job_of = v.job_id.as_ref().map(|j| jobs.get(j).map(|r| r.0.as_str()));
            let foreign_job = job_of.is_some_and(|of| of != Some(key.as_str()));
            if (v.latest_version, v.live_version) != (latest, live) || foreign_job {
                return Err(isolation(format!(
                    "{tenant}'s view of {doc} shows versions {}/{:?} and job {:?} (of {:?}); its own are {latest}/{live:?}",
                    v.latest_version,
                    v.live_version,
                    v.job_id,
                    job_of.map(|of| of.map(shown)),
                )));
            }
            Ok(())
        }
    }
}

/// A stored document key as a violation shows it: `<doc_id> of <tenant>`.
fn shown(key: &str) -> String {
    let (tenant, doc) = split_key(key);
    format!("{doc} of {tenant}")
}

/// The key of `tenant`'s document `doc` (a hit's or a view's bare ID).
fn key_of(tenant: &TenantId, doc: &str) -> Result<DocKey, Violation> {
    DocId::parse(doc)
        .map(|d| DocKey::new(tenant, &d))
        .map_err(|e| isolation(format!("{tenant} was served a bad doc id {doc:?}: {e:?}")))
}

/// I11, a search hit: served to `tenant`, it is never a chunk of another
/// tenant's document (of the same ID, version and chunk index, with its
/// text). The simulation's tenants write texts of disjoint words, so no
/// chunk of one can pass for one of the other's; a hit that is not a
/// served chunk at all is I4's.
fn hit_is_of_its_tenant(
    tenant: &TenantId,
    h: &SearchHit,
    served: &Served,
) -> Result<(), Violation> {
    let at = |t: &TenantId| -> Result<Option<&String>, Violation> {
        let key = key_of(t, &h.doc_id)?;
        Ok(served.get(&(key.as_str().to_string(), h.version, h.chunk.to_bits())))
    };
    if at(tenant)? == Some(&h.text) {
        return Ok(());
    }
    for other in tenants().iter().filter(|t| *t != tenant) {
        if at(other)? == Some(&h.text) {
            return Err(isolation(format!(
                "{tenant}'s search was served {other}'s chunk {}@{}#{}",
                h.doc_id, h.version, h.chunk
            )));
        }
    }
    Ok(())
}

/// I1: every chunk search may serve (a live version's, in the active
/// generation) has its vector in the index.
fn served_chunks_have_vectors(
    served: &[oracle::ServedChunk],
    index: &BTreeSet<String>,
    lost: &BTreeSet<String>,
) -> Result<(), Violation> {
    match served
        .iter()
        .find(|c| !index.contains(&c.vector_id) && !lost.contains(&c.vector_id))
    {
        Some(missing) => Err(violation(
            "I1",
            format!("live chunk {} has no vector", missing.vector_id),
        )),
        None => Ok(()),
    }
}

/// I13: no delete was sent for a vector while a chunk row that may be
/// served or written referred to it (recorded by the index wrapper, at the
/// delete).
fn vectors_are_not_deleted_while_held(w: &World) -> Result<(), Violation> {
    let held = w.deleted_while_held.borrow();
    match held.first() {
        None => Ok(()),
        Some(id) => Err(violation(
            "I13",
            format!("a delete of vector {id} was sent while a chunk row held it"),
        )),
    }
}

/// I12: the keyword index holds exactly the chunk rows' entries, each with
/// the terms of its chunk's text scoped to its own tenant (so no tenant's
/// keyword counts, scores or order depend on another's rows), and each
/// tenant's keyword totals are a recount of its rows.
fn keyword_index_holds_the_chunk_rows(w: &World) -> Result<(), Violation> {
    if oracle::keyword_mismatches(&w.db) == 0 {
        return Ok(());
    }
    if let Some(tenant) = oracle::keyword_totals_drift(&w.db).first() {
        return Err(violation(
            "I12",
            format!("tenant {tenant}'s keyword totals differ from a recount of its rows"),
        ));
    }
    let (held, expected) = oracle::keyword_rows(&w.db);
    let ids =
        |rows: &[oracle::KeywordRow]| -> BTreeSet<i64> { rows.iter().map(|r| r.id).collect() };
    let (held_ids, want_ids) = (ids(&held), ids(&expected));
    let detail = match (
        held_ids.difference(&want_ids).next(),
        want_ids.difference(&held_ids).next(),
    ) {
        (Some(extra), _) => format!("keyword index holds row {extra}, not a chunk row's"),
        (None, Some(missing)) => format!("chunk row {missing} missing from the keyword index"),
        (None, None) => "a keyword row's terms differ from its chunk's".to_string(),
    };
    Err(violation("I12", detail))
}

/// I11, the index: every vector is in the namespace of its document's
/// tenant (search asks only the caller's namespace: a vector in another
/// would be invisible to its tenant, or visible to another).
fn vectors_are_in_their_tenants_namespace(w: &World) -> Result<(), Violation> {
    let tenants = oracle::vector_tenants(&w.db);
    for (id, namespace) in w.index.namespaces() {
        if let Some(t) = tenants.get(&id).filter(|t| **t != namespace) {
            return Err(isolation(format!(
                "vector {id} of tenant {t} is in namespace {namespace:?}"
            )));
        }
    }
    Ok(())
}

/// I15: each tenant's recorded usage (documents, bytes: what its quotas
/// count) is what its documents hold, recounted from their latest versions
/// (`UsageDrift`, a shrinking version giving no bytes back, is the seeded
/// bug it catches: the reference run shares it, so I6 cannot).
///
/// Its document counts by state (migration 0026's triggers: what the
/// operators' summary reads) are a recount of its documents, through the
/// same definition of a state as a document's view; and every backfill's
/// counts of its items and their failures (migration 0031) a recount.
fn tenant_usage_is_what_its_documents_hold(w: &World) -> Result<(), Violation> {
    if let Some(row) = oracle::tenant_usage_mismatches(&w.db).first() {
        return Err(violation("I15", format!("tenant usage drifted: {row}")));
    }
    if let Some(row) = oracle::backfill_counts_drift(&w.db).first() {
        return Err(violation("I15", format!("backfill counts drifted: {row}")));
    }
    for tenant in oracle::tenant_ids(&w.db) {
        let id = TenantId::parse(&tenant).expect("a stored tenant ID");
        let counted = futures::executor::block_on(w.direct().document_summary(Some(&id)))
            .map_err(|e| violation("I15", format!("summary of {tenant}: {e}")))?;
        let groups = oracle::document_state_groups(&w.db, &tenant)
            .into_iter()
            .map(|g| serde_json::from_value(g).expect("a recount row"))
            .collect();
        let recount = DocumentSummary::from_groups(Some(tenant.clone()), groups);
        if counted != recount {
            return Err(violation(
                "I15",
                format!("{tenant}'s document counts drifted: {counted:?}, recount {recount:?}"),
            ));
        }
    }
    dead_letter_groups_are_a_recount(w)
}

/// I15, the dead-letter summary (migration 0028's counters): every group's
/// letters and deliveries are a recount of the archive, split by whether
/// the letter's version is its document's latest; its sighting spans at
/// least the letters it holds (a letter that left a group, seen again with
/// its job's ending, leaves the group's span as it was).
fn dead_letter_groups_are_a_recount(w: &World) -> Result<(), Violation> {
    let counted = futures::executor::block_on(w.direct().dead_letter_summary(None))
        .map_err(|e| violation("I15", format!("dead-letter summary: {e}")))?;
    let recount: Vec<crate::store::LetterGroupRow> = oracle::dead_letter_groups(&w.db)
        .into_iter()
        .map(|g| serde_json::from_value(g).expect("a recount row"))
        .collect();
    let key = |g: &crate::store::LetterGroupRow| {
        (
            g.tenant_id.clone(),
            g.failure_bucket.clone(),
            g.version_is_latest,
            g.chunk_count_bucket.clone(),
        )
    };
    let counts = |rows: &[crate::store::LetterGroupRow]| -> BTreeMap<_, _> {
        rows.iter()
            .map(|g| (key(g), (g.letters, g.deliveries)))
            .collect()
    };
    let spans_hold = counted.iter().all(|c| {
        recount
            .iter()
            .filter(|r| key(r) == key(c))
            .all(|r| c.first_seen <= r.first_seen && c.last_seen >= r.last_seen)
    });
    if counts(&counted) != counts(&recount) || !spans_hold {
        return Err(violation(
            "I15",
            format!("dead-letter groups drifted: {counted:?}, recount {recount:?}"),
        ));
    }
    Ok(())
}

/// I18: what retention pruned was unreachable: every version a job may
/// still run, every document's live and latest version, and every version
/// a re-run reads its text from hold their text (every part their
/// manifests name); every dead letter's version row and job are there;
/// and every text part its document's latest version does not name is
/// closed (retention can reach it).
fn nothing_reachable_was_pruned(w: &World) -> Result<(), Violation> {
    if let Some(row) = oracle::reachable_but_pruned(&w.db).first() {
        return Err(violation("I18", format!("pruned while reachable: {row}")));
    }
    // And what it may prune, it can reach: a text part no later version
    // names is closed.
    match oracle::parts_left_open(&w.db).first() {
        Some(row) => Err(violation("I18", format!("a part left open: {row}"))),
        None => Ok(()),
    }
}

/// I3: every vector in the index is known to D1 (a chunk row or an intent).
fn indexed_vectors_are_known(w: &World, index: &BTreeSet<String>) -> Result<(), Violation> {
    let known = oracle::known_vector_ids(&w.db);
    match index.iter().find(|id| !known.contains(*id)) {
        Some(orphan) => Err(violation("I3", format!("vector {orphan} unknown to D1"))),
        None => Ok(()),
    }
}

/// I10: a generation is built only by a backfill (created with it, in one
/// batch), and its count of chunk rows (what retires it and what the
/// console shows) is a recount of them.
fn generations_are_built_by_backfills(w: &World) -> Result<(), Violation> {
    if let Some(g) = oracle::generations_without_backfill(&w.db).first() {
        return Err(violation(
            "I10",
            format!("generation {g} is building without a backfill"),
        ));
    }
    match oracle::generation_rows_drift(&w.db).first() {
        Some(g) => Err(violation(
            "I10",
            format!("generation {g}'s chunk_rows differs from a recount of its rows"),
        )),
        None => Ok(()),
    }
}

// ------------------------------------------------------------------ after quiescence

/// I5: the index holds exactly the vectors of live chunks in the
/// generations still written.
pub(super) fn index_holds_written_live_chunks(w: &World) -> Result<(), Violation> {
    let index: BTreeSet<String> = w.index.ids().into_iter().collect();
    let live = oracle::written_live_vector_ids(&w.db);
    if index != live {
        let orphans: Vec<_> = index.difference(&live).take(3).collect();
        let holes: Vec<_> = live.difference(&index).take(3).collect();
        return Err(violation(
            "I5",
            format!("orphans {orphans:?}, holes {holes:?}"),
        ));
    }
    Ok(())
}

/// I9: no dead letter is lost, every message that reached the dead-letter
/// queue (sent by the consumer, or forwarded by the queue after its
/// `max_retries`) is archived, and every job that ended failed or dead has
/// its evidence archived as such.
/// I14, after a sync scenario: every commit ended (none left committing,
/// no planned delete pending), only a committed session deleted anything,
/// nothing was deleted that a later session of its source saw, and the
/// document written into the source outside any session while a session
/// was open was not deleted (by that session or any other).
pub(super) fn syncs_hold(w: &World) -> Result<(), Violation> {
    let checks = [
        (
            "SELECT count(*) AS n FROM syncs WHERE state = 'committing'",
            "a commit never ended",
        ),
        (
            "SELECT count(*) AS n FROM sync_deletes WHERE state = 'pending'",
            "a planned delete was left pending",
        ),
        (
            "SELECT count(*) AS n FROM sync_deletes d JOIN syncs s ON s.sync_id = d.sync_id
             WHERE d.state = 'deleted' AND s.state <> 'committed'",
            "a session that did not commit deleted a document",
        ),
        (
            "SELECT count(*) AS n FROM sync_deletes d JOIN syncs s ON s.sync_id = d.sync_id
             WHERE d.state = 'deleted' AND EXISTS (
               SELECT 1 FROM sync_seen x JOIN syncs l ON l.sync_id = x.sync_id
               WHERE x.doc_id = d.doc_id AND l.tenant_id = s.tenant_id AND l.source = s.source
                 AND l.seq > s.seq)",
            "a document a later session saw was deleted",
        ),
        // 'sync-late' is actors::SYNC_LATE_DOC, of the default tenant.
        (
            "SELECT count(*) AS n FROM versions WHERE doc_id = 'sync-late' AND is_delete = 1",
            "the document written outside the session while it was open was deleted",
        ),
        (
            "SELECT CASE WHEN count(*) = 0 THEN 1 ELSE 0 END AS n FROM versions WHERE doc_id = 'sync-late'",
            "the document written outside the session was never written",
        ),
        (
            "SELECT count(*) AS n FROM syncs WHERE state = 'committed'",
            "",
        ),
    ];
    for (sql, what) in checks {
        let n = oracle::count(&w.db, sql);
        match what {
            "" if n < 2 => {
                return Err(violation("I14", format!("{n} sessions committed, not 2")));
            }
            "" => {}
            _ if n > 0 => return Err(violation("I14", format!("{what} ({n})"))),
            _ => {}
        }
    }
    Ok(())
}

/// I16, after quiescence: what clients were told is what the ledger holds.
/// Every write a client saw accepted is the version its answer named, with
/// the content it sent (or a tombstone); and every version of a document
/// of the script holds content a client sent for it (or a tombstone, when
/// a client deleted it or a sync retired it). With two clients writing one
/// document at once, this is what tells a lost race from a lost write.
pub(super) fn writes_are_what_clients_were_told(
    w: &World,
    script: &Script,
    accepted: &[(String, u32, Option<String>)],
) -> Result<(), Violation> {
    let log = oracle::version_log(&w.db);
    let held: BTreeMap<(&str, u32), (&str, bool)> = log
        .iter()
        .map(|(k, v, h, d)| ((k.as_str(), *v), (h.as_str(), *d)))
        .collect();
    for (key, version, hash) in accepted {
        let fits = match (held.get(&(key.as_str(), *version)), hash) {
            (Some((h, false)), Some(sent)) => h == sent,
            (Some((_, true)), None) => true,
            _ => false,
        };
        if !fits {
            return Err(violation(
                "I16",
                format!(
                    "{} was told its write is version {version}; the ledger holds {:?}",
                    shown(key),
                    held.get(&(key.as_str(), *version))
                ),
            ));
        }
    }
    let mut sent: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
    for c in &script.docs {
        let entry = sent.entry(c.key().as_str().to_string()).or_default();
        for op in &c.ops {
            match op {
                Op::Put(t) => {
                    entry
                        .0
                        .insert(crate::pipeline::content_hash(&t.input(c.doc())));
                }
                Op::Delete => entry.1 = true,
                Op::Batch(puts) => {
                    // The client's own document's content; the others are
                    // documents of no client (checked by (a) only).
                    if let Some(first) = puts.first() {
                        entry
                            .0
                            .insert(crate::pipeline::content_hash(&first.input(c.doc())));
                    }
                }
                Op::Settle | Op::Rerun => {}
            }
        }
        entry.1 |= script.operator == Operator::Sync;
    }
    for (key, version, hash, is_delete) in &log {
        let Some((hashes, deletes)) = sent.get(key) else {
            continue;
        };
        if !(if *is_delete {
            *deletes
        } else {
            hashes.contains(hash)
        }) {
            return Err(violation(
                "I16",
                format!(
                    "{} version {version} holds content no client sent",
                    shown(key)
                ),
            ));
        }
    }
    Ok(())
}

/// I17, after quiescence: a write refused at a quota wrote nothing: no
/// version of its document holds its content, unless another write of the
/// same content was accepted.
pub(super) fn refused_writes_wrote_nothing(
    w: &World,
    accepted: &[(String, u32, Option<String>)],
    refused: &[(String, Option<String>)],
) -> Result<(), Violation> {
    let log = oracle::version_log(&w.db);
    for (key, hash) in refused {
        let Some(hash) = hash else { continue };
        let also_accepted = accepted
            .iter()
            .any(|(k, _, h)| k == key && h.as_ref() == Some(hash));
        let held = log.iter().any(|(k, _, h, _)| k == key && h == hash);
        if held && !also_accepted {
            return Err(violation(
                "I17",
                format!("{}: a write refused at its quota was recorded", shown(key)),
            ));
        }
    }
    Ok(())
}

/// I17, after every step: no tenant holds more than its quotas allow.
pub(super) fn quotas_hold(w: &World) -> Result<(), Violation> {
    match oracle::tenants_over_quota(&w.db).first() {
        Some(row) => Err(violation(
            "I17",
            format!("a tenant is past its quota: {row}"),
        )),
        None => Ok(()),
    }
}

pub(super) fn no_dead_letter_is_lost(w: &World) -> Result<(), Violation> {
    if let Some(m) = w.broker.lost.borrow().first() {
        return Err(violation(
            "I9",
            format!("the dead-letter queue dropped the letter of {}", m.job_id),
        ));
    }
    let archived: BTreeSet<String> = oracle::archived_letters(&w.db).into_iter().collect();
    if let Some(m) = w
        .broker
        .dead_log
        .borrow()
        .iter()
        .find(|m| !archived.contains(&m.job_id))
    {
        return Err(violation(
            "I9",
            format!(
                "the letter of {} reached the dead-letter queue but is not archived",
                m.job_id
            ),
        ));
    }
    if let Some(job) = oracle::failed_jobs_without_evidence(&w.db).first() {
        return Err(violation(
            "I9",
            format!("job {job} ended failed or dead with no archived evidence"),
        ));
    }
    Ok(())
}

/// I6: D1's canonical dump equals `expected`, the dump of the `reference`
/// run (the fault-free run of the same inputs with what `operator` did).
pub(super) fn ledger_equals_reference(
    w: &World,
    expected: &str,
    reference: Reference,
    operator: Operator,
) -> Result<(), Violation> {
    let dump = oracle::canonical_dump(&w.db);
    if dump == expected {
        return Ok(());
    }
    let mut diff = first_difference(expected, &dump);
    if operator != Operator::None {
        let g: Vec<serde_json::Value> = oracle::generation_states(&w.db);
        let b: Vec<serde_json::Value> = oracle::backfill_states(&w.db);
        diff.push_str(&format!(
            " (against the {reference:?} reference; generations {g:?}, backfills {b:?})"
        ));
    }
    Err(violation("I6", diff))
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {i}: expected {x} got {y}");
        }
    }
    format!(
        "dumps differ in length: {} vs {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

/// R, after a redrive scenario: every redrive ended (completed, or stopped
/// with a reason), no item left pending or sent, no item skipped whose
/// version was re-run anyway (an untracked re-run: the scenario's
/// documents are written once, so a later version is a re-run), and
/// every document indexed with its text.
pub(super) fn check_redrives(w: &World, script: &Script) -> Result<(), Violation> {
    let v = |detail: String| Violation {
        invariant: "R",
        detail,
    };
    if let Some(r) = oracle::unended_redrives(&w.db).first() {
        return Err(v(format!(
            "redrive {} left {}",
            r["redrive_id"], r["state"]
        )));
    }
    if let Some(i) = oracle::unaccounted_redrive_items(&w.db).first() {
        return Err(v(format!(
            "item {} of {} is {} (letter version {}, latest {})",
            i["letter_job_id"], i["redrive_id"], i["state"], i["version"], i["latest_version"]
        )));
    }
    for client in &script.docs {
        let ops = &client.ops;
        let Some(Op::Put(text)) = ops.iter().rev().find(|o| !matches!(o, Op::Settle)) else {
            continue;
        };
        let rows = oracle::live_text(&w.db, client.key().as_str());
        let ok = rows.first().is_some_and(|r| {
            r["live_version"] == r["latest_version"]
                && r["text"].as_str() == Some(text.text.as_str())
        });
        if !ok {
            return Err(v(format!(
                "{} of {} not indexed after the redrive: {rows:?}",
                client.doc_id, client.tenant
            )));
        }
    }
    Ok(())
}
