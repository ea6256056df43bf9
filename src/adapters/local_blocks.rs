//! The local index's blocks: where a vector's codes go, how a query's first
//! pass reads them, and the bounded placement an upsert (or a query) runs.
//!
//! A namespace's vectors with a slot are quantized (`core::vector_codes`)
//! into blocks of `block_vectors` slots, one row per dimension per block,
//! plus a row of factors (-1: a free slot). A query reads the factor rows
//! and the rows of its largest dimensions, ranks every slot by the
//! approximate cosine, then scores the `rerank` best exactly from their
//! rows (and more, while a filter leaves fewer than `top_k`).
//!
//! - A namespace starts without blocks: every vector unplaced, every query
//!   exhaustive (exact, as this index always was). Once it holds more than
//!   `exhaustive_max` vectors, the next upsert places them, and from then
//!   on each upsert places its own vectors.
//! - A slot is live (one row holds it, its factor is at least 0) or free
//!   (no row, factor -1). Deleting or changing a vector frees its slot in
//!   its block's factor row only. New vectors fill the block with the most
//!   free slots if it has at least an eighth of a block free (or enough
//!   for all of them), else go after the last slot: an upsert rewrites
//!   one or two blocks whatever the namespace holds, and at most an eighth
//!   of a block's slots stay free for long.
//! - An upsert of a vector the index holds, unchanged, in the same
//!   namespace keeps its slot and writes no block.
//! - Every write reads, then runs one batch whose first statements check
//!   the namespace's revision (`vector_spaces.rev`): a write that another
//!   came between fails whole and starts again (`WRITE_ATTEMPTS`).

use super::local_index::{bad_row, score_rows, unavailable, values_of, LocalIndex};
use crate::core::vector_codes::{self, FREE};
use crate::ports::{Database, MetadataFilter, PortError, VectorMatch, VectorRecord};
use crate::store::vector_rows::{self, BlockRow, PlaceIn, Space, VectorRowIn, Write};
use std::collections::{BTreeMap, BTreeSet};

/// Times a write is tried when another write came between its reads and
/// its batch.
pub(super) const WRITE_ATTEMPTS: usize = 5;

/// Whether a failed write lost a race (its guard, or a slot taken since
/// its reads): it is tried again from its reads.
pub(super) fn lost_race(e: &PortError) -> bool {
    e.code == "db_constraint"
}

/// A block being rewritten: each slot's factor and, when the block is
/// rewritten whole, each dimension's codes (else only its factors).
struct Block {
    factors: Vec<f32>,
    codes: Option<Vec<Vec<u8>>>,
}

/// The blocks an edit of one namespace reads and rewrites.
struct Edit {
    block_vectors: i64,
    blocks: BTreeMap<i64, Block>,
    /// Slots the blocks hold after the edit.
    slots: i64,
}

impl Edit {
    fn position(&self, slot: i64) -> (i64, usize) {
        let b = self.block_vectors.max(1);
        (slot / b, usize::try_from(slot % b).unwrap_or(0))
    }

    /// The slots block `block` holds after the edit.
    fn len_of(&self, block: i64) -> usize {
        let b = self.block_vectors.max(1);
        usize::try_from((self.slots - block * b).clamp(0, b)).unwrap_or(0)
    }

    fn free(&mut self, slot: i64) {
        let (block, at) = self.position(slot);
        if let Some(f) = self
            .blocks
            .get_mut(&block)
            .and_then(|b| b.factors.get_mut(at))
        {
            *f = FREE;
        }
    }

    fn put(&mut self, slot: i64, values: &[f32]) {
        let (block, at) = self.position(slot);
        let (factor, codes) = vector_codes::quantize(values);
        let Some(b) = self.blocks.get_mut(&block) else {
            return;
        };
        if let Some(f) = b.factors.get_mut(at) {
            *f = factor;
        }
        for (dim, code) in b.codes.iter_mut().flatten().zip(codes) {
            if let Some(c) = dim.get_mut(at) {
                *c = code as u8;
            }
        }
    }

    fn rows(&self) -> Vec<BlockRow> {
        let mut out = Vec::new();
        for (&block, b) in &self.blocks {
            let codes = vector_codes::encode_vector(&b.factors);
            out.push(BlockRow {
                dim: -1,
                block,
                codes,
            });
            for (dim, codes) in b.codes.iter().flatten().enumerate() {
                let dim = i64::try_from(dim).unwrap_or(0);
                let codes = vector_codes::encode_bytes(codes);
                out.push(BlockRow { dim, block, codes });
            }
        }
        out
    }
}

/// Of the factor rows `heads`, the slots `n` new vectors take: the free
/// slots (not in `busy`) of the block with the most, if it has enough,
/// then slots after the last.
fn allocate(
    heads: &BTreeMap<i64, Vec<f32>>,
    slots: i64,
    b: i64,
    n: usize,
    busy: &BTreeSet<i64>,
) -> Vec<i64> {
    let free_in = |block: i64, factors: &[f32]| -> Vec<i64> {
        (0..factors.len())
            .filter(|&i| factors.get(i).is_some_and(|f| *f < 0.0))
            .map(|i| block * b + i64::try_from(i).unwrap_or(0))
            .filter(|s| *s < slots && !busy.contains(s))
            .collect()
    };
    let best = heads
        .iter()
        .map(|(&block, f)| free_in(block, f))
        .max_by(|a, b| a.len().cmp(&b.len()).then(b.first().cmp(&a.first())));
    let enough = n.min(usize::try_from(b / 8).unwrap_or(1).max(1));
    let mut out: Vec<i64> = best
        .filter(|free| free.len() >= enough)
        .unwrap_or_default()
        .into_iter()
        .take(n)
        .collect();
    let mut next = slots;
    while out.len() < n {
        out.push(next);
        next += 1;
    }
    out
}

impl<D: Database> LocalIndex<D> {
    /// Reads what an edit of `namespace` needs: every factor row, and every
    /// row of the blocks new vectors go to. Returns the edit and the slots
    /// of `adds` (none of `frees`, which stay live until the batch runs).
    async fn edit(
        &self,
        namespace: &str,
        space: &Space,
        adds: usize,
        frees: &[i64],
    ) -> Result<(Edit, Vec<i64>), PortError> {
        let b = i64::try_from(self.tuning.block_vectors).unwrap_or(1).max(1);
        let heads: BTreeMap<i64, Vec<f32>> = vector_rows::dims(&self.db, namespace, &[-1])
            .await?
            .into_iter()
            .map(|r| {
                Ok((
                    r.block,
                    vector_codes::decode_vector(&r.codes).ok_or_else(bad_row)?,
                ))
            })
            .collect::<Result<_, PortError>>()?;
        let busy: BTreeSet<i64> = frees.iter().copied().collect();
        let slots = allocate(&heads, space.slots, b, adds, &busy);
        let after = slots
            .iter()
            .map(|s| s + 1)
            .max()
            .unwrap_or(0)
            .max(space.slots);
        let whole: BTreeSet<i64> = slots.iter().map(|s| s / b).collect();
        let rows = vector_rows::blocks(
            &self.db,
            namespace,
            &whole.iter().copied().collect::<Vec<_>>(),
        )
        .await?;
        let mut edit = Edit {
            block_vectors: b,
            blocks: BTreeMap::new(),
            slots: after,
        };
        let dims = self.limits.dimensions;
        let freed: BTreeSet<i64> = busy.iter().map(|s| s / b).collect();
        for &block in whole.iter().chain(&freed) {
            let len = edit.len_of(block);
            let mut factors = heads.get(&block).cloned().unwrap_or_default();
            factors.resize(len, FREE);
            let codes = whole.contains(&block).then(|| vec![vec![0u8; len]; dims]);
            edit.blocks.entry(block).or_insert(Block { factors, codes });
        }
        for r in rows {
            let codes = vector_codes::decode_bytes(&r.codes).ok_or_else(bad_row)?;
            let Some(b) = edit.blocks.get_mut(&r.block) else {
                continue;
            };
            let slot = usize::try_from(r.dim)
                .ok()
                .and_then(|d| b.codes.as_mut()?.get_mut(d));
            if let Some(dim) = slot {
                dim.iter_mut().zip(codes).for_each(|(c, v)| *c = v);
            }
        }
        for &s in frees {
            edit.free(s);
        }
        Ok((edit, slots))
    }

    /// One attempt at an upsert of `rows` (the records `vectors`, checked):
    /// places each in its namespace's blocks if it has any, frees the slots
    /// the vectors held, all in one guarded batch.
    pub(super) async fn try_upsert(
        &self,
        vectors: &[VectorRecord],
        rows: &mut [VectorRowIn<'_>],
    ) -> Result<(), PortError> {
        // An attempt that lost a race may have placed some: start again.
        rows.iter_mut().for_each(|r| r.slot = None);
        let ids: Vec<String> = vectors.iter().map(|v| v.id.clone()).collect();
        let held: BTreeMap<String, vector_rows::VectorRowOut> = vector_rows::get(&self.db, &ids)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        let mut namespaces: BTreeSet<&str> = vectors.iter().map(|v| v.namespace.as_str()).collect();
        namespaces.extend(held.values().map(|r| r.namespace.as_str()));
        let mut w = Write::default();
        for ns in namespaces {
            let space = vector_rows::space(&self.db, ns).await?;
            w.guard(ns, space.rev);
            // Rows that keep their slot: the same vector, in the same namespace.
            let mut frees = Vec::new();
            let mut adds = Vec::new();
            for (i, row) in rows.iter_mut().enumerate() {
                let old = held.get(row.id);
                let old_slot = old.filter(|o| o.namespace == ns).and_then(|o| o.slot);
                let same = old.is_some_and(|o| {
                    o.namespace == row.namespace && o.vec == row.vec && o.norm == Some(row.norm)
                });
                if same && row.namespace == ns && old_slot.is_some() {
                    row.slot = old_slot;
                    continue;
                }
                frees.extend(old_slot);
                if row.namespace == ns && space.slots > 0 {
                    adds.push(i);
                }
            }
            if adds.is_empty() && frees.is_empty() {
                continue;
            }
            let (mut edit, slots) = self.edit(ns, &space, adds.len(), &frees).await?;
            for (&i, &slot) in adds.iter().zip(&slots) {
                let (Some(row), Some(v)) = (rows.get_mut(i), vectors.get(i)) else {
                    continue;
                };
                row.slot = Some(slot);
                edit.put(slot, &v.values);
            }
            w.blocks(ns, &edit.rows(), edit.slots, self.json_param_bytes_max);
        }
        w.upsert(rows, self.json_param_bytes_max);
        vector_rows::write(&self.db, w).await
    }

    /// One attempt at deleting `ids`: their rows, and their slots freed.
    pub(super) async fn try_delete(&self, ids: &[String]) -> Result<(), PortError> {
        let held = vector_rows::get(&self.db, ids).await?;
        if held.is_empty() {
            return Ok(());
        }
        let mut by_ns: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for r in &held {
            by_ns
                .entry(r.namespace.as_str())
                .or_default()
                .extend(r.slot);
        }
        let mut w = Write::default();
        for (ns, frees) in by_ns {
            let space = vector_rows::space(&self.db, ns).await?;
            w.guard(ns, space.rev);
            if !frees.is_empty() {
                let (edit, _) = self.edit(ns, &space, 0, &frees).await?;
                w.blocks(ns, &edit.rows(), edit.slots, self.json_param_bytes_max);
            }
        }
        w.delete(ids);
        vector_rows::write(&self.db, w).await
    }

    /// Whether `namespace` has vectors to place: past the threshold without
    /// blocks, or with blocks and vectors not in them (rows from before
    /// migration 0003, or written while the blocks were being built).
    pub(super) fn placement_due(&self, space: &Space) -> bool {
        let threshold = i64::try_from(self.tuning.exhaustive_max).unwrap_or(i64::MAX);
        (space.slots == 0 && space.vectors > threshold) || (space.slots > 0 && space.unplaced > 0)
    }

    /// Places up to `maintain_rows_max` of `namespace`'s unplaced vectors,
    /// if placement is due (a write that lost a race starts again).
    pub(super) async fn maintain(&self, namespace: &str) -> Result<(), PortError> {
        let mut attempt = 1;
        loop {
            match self.try_place(namespace).await {
                Err(e) if lost_race(&e) && attempt < WRITE_ATTEMPTS => attempt += 1,
                other => return other.map_err(unavailable),
            }
        }
    }

    async fn try_place(&self, namespace: &str) -> Result<(), PortError> {
        let space = vector_rows::space(&self.db, namespace).await?;
        if !self.placement_due(&space) {
            return Ok(());
        }
        let rows =
            vector_rows::unplaced(&self.db, namespace, self.tuning.maintain_rows_max).await?;
        let values = rows
            .iter()
            .map(|r| values_of(&r.vec, r.norm).map(|(v, _)| v))
            .collect::<Result<Vec<_>, _>>()?;
        let (mut edit, slots) = self.edit(namespace, &space, rows.len(), &[]).await?;
        let mut places = Vec::with_capacity(rows.len());
        for ((row, v), &slot) in rows.iter().zip(&values).zip(&slots) {
            edit.put(slot, v);
            let legacy = row.norm.is_none();
            places.push(PlaceIn {
                id: &row.id,
                slot,
                vec: legacy.then(|| vector_codes::encode_vector(v)),
                norm: legacy.then(|| f64::from(vector_codes::norm(v))),
            });
        }
        let mut w = Write::default();
        w.guard(namespace, space.rev);
        w.place(namespace, &places, self.json_param_bytes_max);
        w.blocks(
            namespace,
            &edit.rows(),
            edit.slots,
            self.json_param_bytes_max,
        );
        vector_rows::write(&self.db, w).await
    }

    /// The first pass over `namespace`'s blocks: every live slot with its
    /// approximate score (the cosine's ranking: factor × Σ q_d·code_d over
    /// the query's largest dimensions), best first (ties: the lower slot).
    async fn first_pass(&self, q: &[f32], namespace: &str) -> Result<Vec<(f32, i64)>, PortError> {
        let dims = vector_codes::query_dims(q, self.tuning.query_dims_max);
        let mut want = vec![-1];
        want.extend(dims.iter().map(|&d| i64::try_from(d).unwrap_or(0)));
        let rows = vector_rows::dims(&self.db, namespace, &want).await?;
        let mut heads: BTreeMap<i64, Vec<f32>> = BTreeMap::new();
        let mut acc: BTreeMap<i64, Vec<f32>> = BTreeMap::new();
        for r in rows {
            if r.dim < 0 {
                heads.insert(
                    r.block,
                    vector_codes::decode_vector(&r.codes).ok_or_else(bad_row)?,
                );
                continue;
            }
            let codes = vector_codes::decode_bytes(&r.codes).ok_or_else(bad_row)?;
            let weight = usize::try_from(r.dim)
                .ok()
                .and_then(|d| q.get(d))
                .copied()
                .unwrap_or(0.0);
            let a = acc.entry(r.block).or_default();
            if a.len() < codes.len() {
                a.resize(codes.len(), 0.0);
            }
            vector_codes::accumulate(a, weight, &codes);
        }
        let b = i64::try_from(self.tuning.block_vectors).unwrap_or(1);
        let mut scored = Vec::new();
        for (block, factors) in heads {
            let a = acc.get(&block);
            for (i, &f) in factors.iter().enumerate().filter(|(_, f)| **f >= 0.0) {
                let sum = a.and_then(|a| a.get(i)).copied().unwrap_or(0.0);
                scored.push((sum * f, block * b + i64::try_from(i).unwrap_or(0)));
            }
        }
        Ok(scored)
    }

    /// A query of a namespace with blocks: the first pass, then exact scores
    /// of its best `rerank` slots and of the unplaced vectors; while a
    /// filter leaves fewer than `top_k`, the next slots, twice as many each
    /// round (at most `maintain_rows_max` a round).
    pub(super) async fn search_blocks(
        &self,
        q: &[f32],
        namespace: &str,
        space: &Space,
        filter: &MetadataFilter,
        top_k: usize,
    ) -> Result<Vec<VectorMatch>, PortError> {
        let mut order = self.first_pass(q, namespace).await?;
        let by_score = |a: &(f32, i64), b: &(f32, i64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let mut found = if space.unplaced > 0 {
            score_rows(
                q,
                vector_rows::unplaced(&self.db, namespace, usize::MAX).await?,
                filter,
            )?
        } else {
            Vec::new()
        };
        let mut round = self.tuning.rerank.max(top_k).max(1);
        let mut taken = 0;
        let mut sorted = 0;
        while taken < order.len() {
            let end = (taken + round).min(order.len());
            if sorted < end {
                // Sort only as far as the rounds go: most queries take one.
                let rest = order.get_mut(sorted..).unwrap_or_default();
                if end - sorted < rest.len() {
                    rest.select_nth_unstable_by(end - sorted, by_score);
                }
                rest.get_mut(..end - sorted)
                    .unwrap_or_default()
                    .sort_by(by_score);
                sorted = end;
            }
            let slots: Vec<i64> = order
                .get(taken..end)
                .unwrap_or_default()
                .iter()
                .map(|s| s.1)
                .collect();
            found.extend(score_rows(
                q,
                vector_rows::by_slots(&self.db, namespace, &slots).await?,
                filter,
            )?);
            taken = end;
            if found.len() >= top_k {
                break;
            }
            round = (round * 2).min(self.tuning.maintain_rows_max.max(1));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_vectors_fill_the_emptiest_block_or_go_after_the_last() {
        let live = 0.5;
        let mut heads = BTreeMap::new();
        // Block 0: 2 free of 8; block 1: 5 free of 8 (slots 8..16), 16 slots.
        heads.insert(0, vec![live, FREE, live, live, FREE, live, live, live]);
        heads.insert(1, vec![FREE, FREE, live, FREE, FREE, live, FREE, live]);
        let none = BTreeSet::new();
        assert_eq!(allocate(&heads, 16, 8, 3, &none), vec![8, 9, 11]);
        assert_eq!(
            allocate(&heads, 16, 8, 7, &none),
            vec![8, 9, 11, 12, 14, 16, 17]
        );
        // A slot freed in the same batch is not reused.
        let busy: BTreeSet<i64> = [8, 9].into_iter().collect();
        assert_eq!(allocate(&heads, 16, 8, 2, &busy), vec![11, 12]);
        // Fewer free slots than an eighth of a block (and than needed): appended.
        let mut sparse = BTreeMap::new();
        sparse.insert(
            0,
            vec![live; 63].into_iter().chain([FREE]).collect::<Vec<_>>(),
        );
        assert_eq!(
            allocate(&sparse, 64, 64, 9, &none),
            (64..73).collect::<Vec<_>>()
        );
        assert_eq!(allocate(&sparse, 64, 64, 1, &none), vec![63]);
        assert_eq!(allocate(&BTreeMap::new(), 0, 64, 2, &none), vec![0, 1]);
    }
}
