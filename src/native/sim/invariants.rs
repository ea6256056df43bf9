//! The invariants checked after every step: [`Monitor`] (I1–I4, I8, I10;
//! see `docs/ARCHITECTURE.md`).
//!
//! May import `world` (to read the ledger, the index and search); not the
//! executor.

use super::world::{Op, Script, Violation, World};
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
        if let Some(missing) = w
            .served_vector_ids()
            .into_iter()
            .find(|id| !index.contains(id))
        {
            return Err(Violation {
                invariant: "I1",
                detail: format!("live chunk {missing} has no vector"),
            });
        }
        // I2: live_version never decreases (so a tombstone stays until newer).
        for (doc, live) in w.live_versions() {
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
        let known = w.known_vector_ids();
        if let Some(orphan) = index.iter().find(|id| !known.contains(*id)) {
            return Err(Violation {
                invariant: "I3",
                detail: format!("vector {orphan} unknown to D1"),
            });
        }
        // I8: the active generation only moves forward (no rollback here).
        let active = w.active_generation();
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
        if let Some(g) = w.generations_without_backfill().first() {
            return Err(Violation {
                invariant: "I10",
                detail: format!("generation {g} is building without a backfill"),
            });
        }
        // I4: search serves only chunks D1 holds as live, of one generation: the active one.
        let live = w.live_versions();
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
