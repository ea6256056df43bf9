//! The invariants (see `docs/ARCHITECTURE.md`): [`Monitor`], checked
//! after every step (I1–I4, I8, I10), and the checks of a quiescent run
//! (I5, I6 against the reference run's dump, I9, and R after a redrive
//! scenario). What they read of the ledger comes from the oracle; each
//! returns the first violation it finds.
//!
//! May import `world` (the ledger, the index, search) and the oracle; not
//! the actors, the reference run or the executor.

use super::world::{Op, Operator, Reference, Script, Violation, World};
use crate::core::ids::TenantId;
use crate::native::oracle;
use crate::pipeline::SearchRequest;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

/// I7: a run quiesces (every message delivered, cron finding nothing to
/// do) within this many cron ticks.
pub const QUIESCENCE_TICKS_MAX: u32 = 8;

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

// ------------------------------------------------------------------ after every step

/// The step invariants' memory (what a step may not go back on) and the
/// searches I4 runs.
pub(super) struct Monitor {
    max_live: RefCell<BTreeMap<String, u32>>,
    max_generation: Cell<u32>,
    queries: Vec<String>,
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
                Op::Put(t) => t.split_whitespace().next().map(str::to_string),
                Op::Delete | Op::Settle => None,
            })
            .collect();
        queries.sort();
        queries.dedup();
        queries.truncate(2);
        Monitor {
            max_live: RefCell::new(BTreeMap::new()),
            max_generation: Cell::new(0),
            queries,
        }
    }

    /// I1, I2, I3, I8, I10 and I4, in that order, checked after every step.
    pub(super) fn check_step(&self, w: &World) -> Result<(), Violation> {
        let index: BTreeSet<String> = w.index.ids().into_iter().collect();
        served_chunks_have_vectors(w, &index)?;
        self.live_versions_never_decrease(w)?;
        indexed_vectors_are_known(w, &index)?;
        let active = self.active_generation_moves_forward(w)?;
        generations_are_built_by_backfills(w)?;
        self.search_serves_live_chunks(w, active)
    }

    /// I2: `live_version` never decreases (so a tombstone stays until a
    /// newer version).
    fn live_versions_never_decrease(&self, w: &World) -> Result<(), Violation> {
        for (doc, live) in oracle::live_versions(&w.db) {
            let mut max = self.max_live.borrow_mut();
            let prev = max.get(&doc).copied();
            match (prev, live) {
                (Some(p), None) => {
                    return Err(violation("I2", format!("{doc}: live {p} -> none")));
                }
                (Some(p), Some(l)) if l < p => {
                    return Err(violation("I2", format!("{doc}: live {p} -> {l}")));
                }
                (_, Some(l)) => {
                    max.insert(doc, l);
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
        if active < self.max_generation.get() {
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

    /// I4: search serves only chunks D1 holds as live, of one generation:
    /// the `active` one.
    fn search_serves_live_chunks(&self, w: &World, active: u32) -> Result<(), Violation> {
        let live = oracle::live_versions(&w.db);
        let p = w.direct();
        for q in &self.queries {
            let req = SearchRequest {
                query: q.clone(),
                top_k: 10,
                doc_id: None,
                metadata: Default::default(),
            };
            let hits = futures::executor::block_on(p.search(&TenantId::default_tenant(), &req))
                .map_err(|e| violation("I4", format!("search failed: {e}")))?;
            for h in hits {
                if h.generation != active {
                    return Err(violation(
                        "I4",
                        format!(
                            "served generation {} while {active} is active",
                            h.generation
                        ),
                    ));
                }
                if live.get(&h.doc_id).copied().flatten() != Some(h.version) {
                    return Err(violation(
                        "I4",
                        format!(
                            "served {}@{} while live is {:?}",
                            h.doc_id,
                            h.version,
                            live.get(&h.doc_id)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// I1: every chunk search may serve (a live version's, in the active
/// generation) has its vector in the index.
fn served_chunks_have_vectors(w: &World, index: &BTreeSet<String>) -> Result<(), Violation> {
    match oracle::served_vector_ids(&w.db)
        .into_iter()
        .find(|id| !index.contains(id))
    {
        Some(missing) => Err(violation(
            "I1",
            format!("live chunk {missing} has no vector"),
        )),
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
/// batch).
fn generations_are_built_by_backfills(w: &World) -> Result<(), Violation> {
    match oracle::generations_without_backfill(&w.db).first() {
        Some(g) => Err(violation(
            "I10",
            format!("generation {g} is building without a backfill"),
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
            r["live_version"] == r["latest_version"] && r["text"].as_str() == Some(text.as_str())
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
