//! The invariants: [`Monitor`], checked after every step (I1–I4, I8,
//! I10), and R, checked after a redrive scenario quiesced (see
//! `docs/ARCHITECTURE.md`). What they read of the ledger comes from the
//! oracle.
//!
//! May import `world` (the ledger, the index, search) and the oracle; not
//! the executor.

use super::world::{Op, Script, Violation, World};
use crate::native::oracle;
use crate::pipeline::SearchRequest;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

pub(super) struct Monitor {
    max_live: RefCell<BTreeMap<String, u32>>,
    max_generation: Cell<u32>,
    queries: Vec<String>,
}

impl Monitor {
    pub(super) fn new(script: &Script) -> Monitor {
        let mut queries: Vec<String> = script
            .docs
            .iter()
            .flat_map(|(_, ops)| ops.iter())
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

    /// I1–I4, checked after every step.
    pub(super) fn check_step(&self, w: &World) -> Result<(), Violation> {
        let index: BTreeSet<String> = w.index.ids().into_iter().collect();
        // I1: every chunk search may serve (a live version's, in the active
        // generation) has its vector in the index.
        if let Some(missing) = oracle::served_vector_ids(&w.db)
            .into_iter()
            .find(|id| !index.contains(id))
        {
            return Err(Violation {
                invariant: "I1",
                detail: format!("live chunk {missing} has no vector"),
            });
        }
        // I2: live_version never decreases (so a tombstone stays until newer).
        for (doc, live) in oracle::live_versions(&w.db) {
            let mut max = self.max_live.borrow_mut();
            let prev = max.get(&doc).copied();
            match (prev, live) {
                (Some(p), None) => {
                    return Err(Violation {
                        invariant: "I2",
                        detail: format!("{doc}: live {p} -> none"),
                    });
                }
                (Some(p), Some(l)) if l < p => {
                    return Err(Violation {
                        invariant: "I2",
                        detail: format!("{doc}: live {p} -> {l}"),
                    });
                }
                (_, Some(l)) => {
                    max.insert(doc, l);
                }
                _ => {}
            }
        }
        // I3: every vector in the index is known to D1.
        let known = oracle::known_vector_ids(&w.db);
        if let Some(orphan) = index.iter().find(|id| !known.contains(*id)) {
            return Err(Violation {
                invariant: "I3",
                detail: format!("vector {orphan} unknown to D1"),
            });
        }
        // I8: the active generation only moves forward (no rollback here).
        let active = oracle::active_generation(&w.db);
        if active < self.max_generation.get() {
            return Err(Violation {
                invariant: "I8",
                detail: format!(
                    "active generation {} -> {active}",
                    self.max_generation.get()
                ),
            });
        }
        self.max_generation.set(active);
        // I10: a generation is built only by a backfill (created with it, in
        // one batch).
        if let Some(g) = oracle::generations_without_backfill(&w.db).first() {
            return Err(Violation {
                invariant: "I10",
                detail: format!("generation {g} is building without a backfill"),
            });
        }
        // I4: search serves only chunks D1 holds as live, of one generation: the active one.
        let live = oracle::live_versions(&w.db);
        let p = w.direct();
        for q in &self.queries {
            let req = SearchRequest {
                query: q.clone(),
                top_k: 10,
                doc_id: None,
                metadata: Default::default(),
            };
            let hits = futures::executor::block_on(p.search(&req)).map_err(|e| Violation {
                invariant: "I4",
                detail: format!("search failed: {e}"),
            })?;
            for h in hits {
                if h.generation != active {
                    return Err(Violation {
                        invariant: "I4",
                        detail: format!(
                            "served generation {} while {active} is active",
                            h.generation
                        ),
                    });
                }
                if live.get(&h.doc_id).copied().flatten() != Some(h.version) {
                    return Err(Violation {
                        invariant: "I4",
                        detail: format!(
                            "served {}@{} while live is {:?}",
                            h.doc_id,
                            h.version,
                            live.get(&h.doc_id)
                        ),
                    });
                }
            }
        }
        Ok(())
    }
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
    for (doc, ops) in &script.docs {
        let Some(Op::Put(text)) = ops.iter().rev().find(|o| !matches!(o, Op::Settle)) else {
            continue;
        };
        let rows = oracle::live_text(&w.db, doc);
        let ok = rows.first().is_some_and(|r| {
            r["live_version"] == r["latest_version"] && r["text"].as_str() == Some(text.as_str())
        });
        if !ok {
            return Err(v(format!("{doc} not indexed after the redrive: {rows:?}")));
        }
    }
    Ok(())
}
