//! Which chunk rows a new version of a document writes.
//!
//! Chunk rows are shared across versions: a row is valid from the version
//! that wrote it until the version that closes it, so a new version that
//! leaves most chunks alone writes only the chunks it changes. Rows are
//! ordered by a floating-point order key (fractional indexing) rather than
//! by the chunk's index: an insertion takes an `ord` between its
//! neighbours' and never renumbers (rewrites) the rows after it.
//!
//! [`plan_rows`] compares the open rows (valid at the newest staged
//! version) with the new version's chunk vector IDs and keeps the largest
//! set of rows it can without reordering them: a longest subsequence of
//! the matched chunks whose ords increase in the new document order.
//! Everything else is a new row with an ord between its kept neighbours;
//! open rows not kept are closed. When floating point has no room left
//! between two neighbours (many insertions at one place), a kept row is
//! demoted to a new row, which widens the gap; so the ords are always
//! strictly increasing and finite, whatever the open rows hold.
//!
//! Pure: no I/O. It runs on every version of documents of up to ~20,000
//! chunks, so it is O(n log n).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

/// A row of the document that is open (valid at the newest staged version), in one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRow<'a> {
    /// The row's key: what a kept chunk refers to and what gets closed.
    pub chunk_id: i64,
    /// The chunk's vector ID: a new chunk with the same one has the same
    /// content, so it can keep this row.
    pub vector_id: &'a str,
    /// The row's order key in the document.
    pub ord: f64,
}

/// What a new version writes in one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPlan {
    /// Per chunk of the new version (same order as `new_ids`): its order key.
    pub ords: Vec<f64>,
    /// Per chunk of the new version: `Some(chunk_id)` of the open row it keeps (nothing written), `None`: a new row is inserted.
    pub kept: Vec<Option<i64>>,
    /// chunk_ids of open rows the new version does not keep (they get closed), in ascending chunk_id order.
    pub close: Vec<i64>,
}

/// A row a chunk can keep: its chunk_id and ord.
type Keep = Option<(i64, f64)>;

/// Plans the rows of a new version whose chunk vector IDs, in document
/// order, are `new_ids`, given the document's open rows (in any order;
/// their `chunk_id`s are distinct, being row keys).
///
/// Keeps a longest run of open rows whose ords already increase in the new
/// order, so an unchanged version writes nothing and an edit writes only
/// what it changed or moved. Defensive about input that should not occur:
/// of open rows sharing a vector ID only the first in (ord, chunk_id)
/// order can be kept, a row whose ord is not finite is never kept, and a
/// vector ID repeated in `new_ids` keeps a row at its first occurrence
/// only.
pub fn plan_rows(open: &[OpenRow<'_>], new_ids: &[&str]) -> RowPlan {
    plan(open, new_ids).0
}

/// [`plan_rows`], and how many kept chunks float exhaustion demoted (the
/// tests bound the rows written with it).
fn plan(open: &[OpenRow<'_>], new_ids: &[&str]) -> (RowPlan, usize) {
    let mut close = Vec::new();
    let mut candidates = candidates(open, &mut close);
    // `remove`: a repeated new ID keeps the row at most once.
    let matched: Vec<Keep> = new_ids.iter().map(|id| candidates.remove(*id)).collect();
    close.extend(candidates.into_values().map(|(chunk_id, _)| chunk_id));
    let mut keep = longest_increasing(matched, &mut close);
    let before = close.len();
    let ords = assign_ords(&mut keep, &mut close);
    let demoted = close.len().saturating_sub(before);
    close.sort_unstable();
    let kept = keep
        .iter()
        .map(|k| k.map(|(chunk_id, _)| chunk_id))
        .collect();
    (RowPlan { ords, kept, close }, demoted)
}

/// The open rows a new chunk may keep, by vector ID. The others (a
/// non-finite ord, or a vector ID an earlier row in ord order has) are
/// pushed to `close`: keeping them could break the ords' order.
fn candidates<'a>(open: &[OpenRow<'a>], close: &mut Vec<i64>) -> HashMap<&'a str, (i64, f64)> {
    let mut by_id: HashMap<&'a str, (i64, f64)> = HashMap::with_capacity(open.len());
    for row in open {
        if !row.ord.is_finite() {
            close.push(row.chunk_id);
            continue;
        }
        match by_id.entry(row.vector_id) {
            Entry::Vacant(slot) => {
                slot.insert((row.chunk_id, row.ord));
            }
            Entry::Occupied(mut slot) => {
                let (chunk_id, ord) = *slot.get();
                if (row.ord, row.chunk_id) < (ord, chunk_id) {
                    close.push(chunk_id);
                    slot.insert((row.chunk_id, row.ord));
                } else {
                    close.push(row.chunk_id);
                }
            }
        }
    }
    by_id
}

/// Keeps a longest subsequence of the matched chunks whose ords strictly
/// increase (patience sorting, O(n log n)), so the fewest chunks move; the
/// rows of the other matched chunks are pushed to `close`.
fn longest_increasing(matched: Vec<Keep>, close: &mut Vec<i64>) -> Vec<Keep> {
    // tails[l]: (ord, position) of the smallest last ord of an increasing
    // subsequence of length l + 1 seen so far; the ords strictly increase.
    let mut tails: Vec<(f64, usize)> = Vec::new();
    // Per position: the position before it in its subsequence.
    let mut prev: Vec<Option<usize>> = vec![None; matched.len()];
    for (pos, m) in matched.iter().enumerate() {
        let Some((_, ord)) = *m else { continue };
        let len = tails.partition_point(|&(tail, _)| tail < ord);
        let before = len.checked_sub(1).and_then(|l| tails.get(l)).map(|t| t.1);
        if let Some(p) = prev.get_mut(pos) {
            *p = before;
        }
        match tails.get_mut(len) {
            Some(tail) => *tail = (ord, pos),
            None => tails.push((ord, pos)),
        }
    }
    let mut in_lis = vec![false; matched.len()];
    let mut at = tails.last().map(|t| t.1);
    while let Some(pos) = at {
        if let Some(flag) = in_lis.get_mut(pos) {
            *flag = true;
        }
        at = prev.get(pos).copied().flatten();
    }
    let mut keep = matched;
    for (k, in_lis) in keep.iter_mut().zip(in_lis) {
        if !in_lis {
            if let Some((chunk_id, _)) = k.take() {
                close.push(chunk_id);
            }
        }
    }
    keep
}

/// The ords of the new version: kept chunks keep theirs, each run of new
/// rows gets ords between its kept neighbours'. When a run does not fit
/// (floating point exhausted), the kept chunk after it is demoted (its row
/// pushed to `close`) and the run retried up to the next one; a run at the
/// end that does not fit demotes the kept chunk before it. Every failure
/// demotes one kept chunk, and a run with no kept chunk at all always
/// fits, so this terminates.
fn assign_ords(keep: &mut [Keep], close: &mut Vec<i64>) -> Vec<f64> {
    let mut ords = Vec::with_capacity(keep.len());
    // The run starts at `start`; `a` is the ord of the kept chunk before it.
    let mut start = 0;
    let mut a = None;
    loop {
        ords.truncate(start);
        let next = next_kept(keep, start);
        let end = next.map_or(keep.len(), |(pos, _)| pos);
        let b = next.map(|(_, ord)| ord);
        if push_run(a, b, end.saturating_sub(start), &mut ords) {
            let Some(b) = b else { return ords };
            ords.push(b);
            start = end.saturating_add(1);
            a = Some(b);
        } else if next.is_some() {
            demote(keep, end, close);
        } else {
            if let Some((pos, _)) = prev_kept(keep, start) {
                demote(keep, pos, close);
            }
            let before = prev_kept(keep, start);
            start = before.map_or(0, |(pos, _)| pos.saturating_add(1));
            a = before.map(|(_, ord)| ord);
        }
    }
}

/// The first kept chunk at or after `start`: its position and ord.
fn next_kept(keep: &[Keep], start: usize) -> Option<(usize, f64)> {
    keep.iter()
        .enumerate()
        .skip(start)
        .find_map(|(pos, k)| k.map(|(_, ord)| (pos, ord)))
}

/// The last kept chunk before `end`: its position and ord.
fn prev_kept(keep: &[Keep], end: usize) -> Option<(usize, f64)> {
    keep.iter()
        .take(end)
        .enumerate()
        .rev()
        .find_map(|(pos, k)| k.map(|(_, ord)| (pos, ord)))
}

/// Turns the kept chunk at `pos` into a new row: its open row is closed.
fn demote(keep: &mut [Keep], pos: usize, close: &mut Vec<i64>) {
    if let Some((chunk_id, _)) = keep.get_mut(pos).and_then(Option::take) {
        close.push(chunk_id);
    }
}

/// Pushes the ords of a run of `k` new rows strictly between `a` and `b`
/// (either may be absent: the start or the end of the document). Returns
/// false, having pushed nothing, when floating point has no room for them.
fn push_run(a: Option<f64>, b: Option<f64>, k: usize, ords: &mut Vec<f64>) -> bool {
    if a.is_none() && b.is_none() {
        // No kept chunk: the chunk indexes, which always fit.
        ords.extend((0..k).map(|j| j as f64));
        return true;
    }
    let len = ords.len();
    let mut last = a;
    for j in 0..k {
        let x = run_ord(a, b, j, k);
        let fits = x.is_finite() && last.is_none_or(|l| l < x) && b.is_none_or(|b| x < b);
        if !fits {
            ords.truncate(len);
            return false;
        }
        ords.push(x);
        last = Some(x);
    }
    true
}

/// The ord of the `j`th of `k` new rows between `a` and `b`: evenly spaced
/// between two kept chunks, a step of 1 before the first or after the
/// last (as the chunk indexes of a first version are).
fn run_ord(a: Option<f64>, b: Option<f64>, j: usize, k: usize) -> f64 {
    let (j, k) = (j as f64, k as f64);
    match (a, b) {
        (Some(a), Some(b)) => a + (b - a) * (j + 1.0) / (k + 1.0),
        (Some(a), None) => a + (j + 1.0),
        (None, Some(b)) => b - (k - j),
        (None, None) => j,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// An owned open row: what a stored row holds.
    #[derive(Debug, Clone)]
    struct Row {
        chunk_id: i64,
        vector_id: String,
        ord: f64,
    }

    fn open_of(rows: &[Row]) -> Vec<OpenRow<'_>> {
        rows.iter()
            .map(|r| OpenRow {
                chunk_id: r.chunk_id,
                vector_id: &r.vector_id,
                ord: r.ord,
            })
            .collect()
    }

    fn refs(ids: &[String]) -> Vec<&str> {
        ids.iter().map(String::as_str).collect()
    }

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// The rows open once `plan` is applied: the new version's, kept or
    /// inserted (with fresh chunk_ids from `next_id`).
    fn apply(new_ids: &[String], plan: &RowPlan, next_id: &mut i64) -> Vec<Row> {
        new_ids
            .iter()
            .zip(&plan.kept)
            .zip(&plan.ords)
            .map(|((id, kept), &ord)| {
                let chunk_id = kept.unwrap_or_else(|| {
                    *next_id += 1;
                    *next_id
                });
                Row {
                    chunk_id,
                    vector_id: id.clone(),
                    ord,
                }
            })
            .collect()
    }

    fn inserted(plan: &RowPlan) -> usize {
        plan.kept.iter().filter(|k| k.is_none()).count()
    }

    /// Every postcondition of a plan, and that re-planning the rows it
    /// leaves open with the same IDs keeps everything.
    fn check(open: &[Row], new_ids: &[String], plan: &RowPlan) -> Result<(), TestCaseError> {
        prop_assert_eq!(plan.ords.len(), new_ids.len());
        prop_assert_eq!(plan.kept.len(), new_ids.len());
        prop_assert!(plan.ords.iter().all(|o| o.is_finite()), "{:?}", plan.ords);
        prop_assert!(plan.ords.windows(2).all(|w| w[0] < w[1]), "{:?}", plan.ords);
        prop_assert!(
            plan.close.windows(2).all(|w| w[0] < w[1]),
            "{:?}",
            plan.close
        );
        let by_id: HashMap<i64, &Row> = open.iter().map(|r| (r.chunk_id, r)).collect();
        let mut kept_ids = HashSet::new();
        for ((kept, id), ord) in plan.kept.iter().zip(new_ids).zip(&plan.ords) {
            let Some(chunk_id) = kept else { continue };
            prop_assert!(kept_ids.insert(*chunk_id), "kept twice: {}", chunk_id);
            let row = by_id.get(chunk_id);
            prop_assert!(row.is_some(), "kept {} is not open", chunk_id);
            let row = row.unwrap();
            prop_assert_eq!(&row.vector_id, id);
            prop_assert_eq!(row.ord.to_bits(), ord.to_bits());
        }
        for row in open {
            let closed = plan.close.binary_search(&row.chunk_id).is_ok();
            prop_assert!(closed != kept_ids.contains(&row.chunk_id), "{:?}", row);
        }
        for chunk_id in &plan.close {
            prop_assert!(
                by_id.contains_key(chunk_id),
                "closed {} is not open",
                chunk_id
            );
        }
        let distinct: HashSet<&String> = new_ids.iter().collect();
        if distinct.len() == new_ids.len() {
            let next = apply(new_ids, plan, &mut 1_000_000_000);
            let again = plan_rows(&open_of(&next), &refs(new_ids));
            let ids: Vec<Option<i64>> = next.iter().map(|r| Some(r.chunk_id)).collect();
            prop_assert_eq!(again.kept, ids);
            prop_assert!(again.close.is_empty());
            prop_assert_eq!(again.ords, plan.ords.clone());
        }
        Ok(())
    }

    /// Plans, checks, and returns the plan with the rows it leaves open.
    fn step(open: &[Row], new_ids: &[String], next_id: &mut i64) -> (RowPlan, Vec<Row>) {
        let plan = plan_rows(&open_of(open), &refs(new_ids));
        check(open, new_ids, &plan).unwrap();
        let rows = apply(new_ids, &plan, next_id);
        (plan, rows)
    }

    fn first_version(names: &[&str], next_id: &mut i64) -> Vec<Row> {
        step(&[], &ids(names), next_id).1
    }

    /// Length of a longest strictly increasing subsequence, quadratically:
    /// the reference the fast one is checked against.
    fn lis_len(ords: &[f64]) -> usize {
        let mut best: Vec<usize> = Vec::with_capacity(ords.len());
        for (i, &x) in ords.iter().enumerate() {
            let b = (0..i)
                .filter(|&j| ords[j] < x)
                .map(|j| best[j])
                .max()
                .unwrap_or(0);
            best.push(b + 1);
        }
        best.into_iter().max().unwrap_or(0)
    }

    #[test]
    fn a_first_version_gets_the_chunk_indexes() {
        let plan = plan_rows(&[], &["a", "b", "c", "d"]);
        assert_eq!(plan.ords, vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(plan.kept, vec![None; 4]);
        assert!(plan.close.is_empty());
        assert_eq!(
            plan_rows(&[], &[]),
            RowPlan {
                ords: vec![],
                kept: vec![],
                close: vec![]
            }
        );
    }

    #[test]
    fn an_unchanged_version_keeps_all_and_closes_none() {
        let mut next_id = 0;
        let open = first_version(&["a", "b", "c", "d", "e"], &mut next_id);
        let (plan, _) = step(&open, &ids(&["a", "b", "c", "d", "e"]), &mut next_id);
        assert_eq!(inserted(&plan), 0);
        assert!(plan.close.is_empty());
        assert_eq!(plan.ords, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        // Open rows in any order plan the same.
        let mut shuffled = open.clone();
        shuffled.reverse();
        assert_eq!(
            plan_rows(&open_of(&shuffled), &["a", "b", "c", "d", "e"]),
            plan
        );
    }

    #[test]
    fn inserting_at_the_top_writes_only_the_new_rows() {
        let mut next_id = 0;
        let open = first_version(&["a", "b", "c"], &mut next_id);
        let (plan, _) = step(&open, &ids(&["x", "y", "z", "a", "b", "c"]), &mut next_id);
        assert_eq!(plan.kept[..3], [None, None, None]);
        assert_eq!(plan.kept[3..], [Some(1), Some(2), Some(3)]);
        assert_eq!(plan.ords, vec![-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]);
        assert!(plan.close.is_empty());
    }

    #[test]
    fn appending_and_inserting_between_space_evenly() {
        let mut next_id = 0;
        let open = first_version(&["a", "b"], &mut next_id);
        let (plan, _) = step(&open, &ids(&["a", "x", "y", "z", "b", "t"]), &mut next_id);
        assert_eq!(plan.ords, vec![0.0, 0.25, 0.5, 0.75, 1.0, 2.0]);
        assert_eq!(inserted(&plan), 4);
        assert!(plan.close.is_empty());
    }

    #[test]
    fn changing_one_chunk_in_the_middle_inserts_one_and_closes_one() {
        let mut next_id = 0;
        let open = first_version(&["a", "b", "c", "d", "e"], &mut next_id);
        let (plan, _) = step(&open, &ids(&["a", "b", "X", "d", "e"]), &mut next_id);
        assert_eq!(plan.kept, vec![Some(1), Some(2), None, Some(4), Some(5)]);
        assert_eq!(plan.ords, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(plan.close, vec![3]);
    }

    #[test]
    fn deleting_one_chunk_closes_one_and_inserts_none() {
        let mut next_id = 0;
        let open = first_version(&["a", "b", "c", "d", "e"], &mut next_id);
        let (plan, _) = step(&open, &ids(&["a", "b", "d", "e"]), &mut next_id);
        assert_eq!(inserted(&plan), 0);
        assert_eq!(plan.ords, vec![0.0, 1.0, 3.0, 4.0]);
        assert_eq!(plan.close, vec![3]);
    }

    #[test]
    fn swapping_paragraphs_moves_the_fewest_chunks() {
        let mut next_id = 0;
        let names = ["a", "b", "c", "d", "e", "f"];
        let open = first_version(&names, &mut next_id);
        // Adjacent swap: one of the two moves.
        let (plan, _) = step(&open, &ids(&["a", "c", "b", "d", "e", "f"]), &mut next_id);
        assert_eq!((inserted(&plan), plan.close.len()), (1, 1));
        // Swapping b and e: both move, c and d stay.
        let (plan, _) = step(&open, &ids(&["a", "e", "c", "d", "b", "f"]), &mut next_id);
        assert_eq!(inserted(&plan), 2);
        assert_eq!(plan.close, vec![2, 5]);
        // Swapping the halves: one half (three chunks) moves.
        let (plan, _) = step(&open, &ids(&["d", "e", "f", "a", "b", "c"]), &mut next_id);
        assert_eq!((inserted(&plan), plan.close.len()), (3, 3));
        // Moving one chunk from the end to the top moves only it.
        let (plan, _) = step(&open, &ids(&["f", "a", "b", "c", "d", "e"]), &mut next_id);
        assert_eq!(plan.close, vec![6]);
        assert_eq!(plan.ords[0], -1.0);
    }

    #[test]
    fn two_hundred_insertions_at_one_place_stay_ordered() {
        let mut next_id = 0;
        let mut names = ids(&["w", "x", "y", "z"]);
        let mut open = step(&[], &names, &mut next_id).1;
        let mut demotions = 0;
        for i in 0..200 {
            // Always right after x: between x and the previous insertion,
            // which halves the gap each time until floats run out.
            names.insert(2, format!("new{i}"));
            let (plan, rows) = step(&open, &names, &mut next_id);
            assert_eq!(plan.kept[1], Some(2), "x stays");
            assert_eq!(
                plan.kept[names.len() - 2..],
                [Some(3), Some(4)],
                "y, z stay"
            );
            // Insert-only: a closed row was demoted.
            assert_eq!(inserted(&plan), 1 + plan.close.len());
            demotions += plan.close.len();
            open = rows;
        }
        assert!(demotions > 0, "floating point never ran out");
        assert!(open.iter().all(|r| (0.0..=3.0).contains(&r.ord)));
    }

    #[test]
    fn floating_point_exhaustion_demotes_the_next_kept_row() {
        let one_up = 1.0f64.next_up();
        let open = vec![
            Row {
                chunk_id: 1,
                vector_id: "a".into(),
                ord: 1.0,
            },
            Row {
                chunk_id: 2,
                vector_id: "b".into(),
                ord: one_up,
            },
            Row {
                chunk_id: 3,
                vector_id: "c".into(),
                ord: 2.0,
            },
        ];
        let new_ids = ids(&["a", "x", "b", "c"]);
        let plan = plan_rows(&open_of(&open), &refs(&new_ids));
        check(&open, &new_ids, &plan).unwrap();
        assert_eq!(plan.kept, vec![Some(1), None, None, Some(3)]);
        assert_eq!(plan.close, vec![2]);
        assert_eq!(plan.ords, vec![1.0, 1.0 + 1.0 / 3.0, 1.0 + 2.0 / 3.0, 2.0]);
    }

    #[test]
    fn no_room_at_either_end_demotes_the_edge_row() {
        for (ord, new_ids) in [
            (1e17, ["a", "x"]),
            (-1e17, ["x", "a"]),
            (f64::MAX, ["a", "x"]),
        ] {
            let open = vec![Row {
                chunk_id: 7,
                vector_id: "a".into(),
                ord,
            }];
            let new_ids = ids(&new_ids);
            let plan = plan_rows(&open_of(&open), &refs(&new_ids));
            check(&open, &new_ids, &plan).unwrap();
            assert_eq!(plan.kept, vec![None, None]);
            assert_eq!(plan.close, vec![7]);
            assert_eq!(plan.ords, vec![0.0, 1.0]);
        }
    }

    #[test]
    fn bad_open_rows_are_closed_not_kept() {
        let row = |chunk_id, vector_id: &str, ord| Row {
            chunk_id,
            vector_id: vector_id.into(),
            ord,
        };
        let open = vec![
            row(1, "a", 0.0),
            row(2, "a", -1.0),
            row(3, "b", f64::NAN),
            row(4, "c", f64::INFINITY),
            row(5, "d", 2.0),
            row(6, "e", 2.0),
        ];
        let new_ids = ids(&["a", "b", "c", "d", "e", "a"]);
        let plan = plan_rows(&open_of(&open), &refs(&new_ids));
        check(&open, &new_ids, &plan).unwrap();
        // The first "a" in ord order is row 2; d and e share an ord, so
        // only one of them is kept; the repeated "a" is a new row.
        assert_eq!(plan.kept[0], Some(2));
        assert_eq!(plan.kept[1..3], [None, None]);
        assert_eq!(plan.kept[3..5].iter().flatten().count(), 1);
        assert_eq!(plan.kept[5], None);
        assert!(plan.close.starts_with(&[1, 3, 4]));
    }

    #[test]
    fn twenty_thousand_chunks_with_a_moved_block() {
        let mut next_id = 0;
        let mut names: Vec<String> = (0..20_000).map(|i| format!("c{i}")).collect();
        let open = step(&[], &names, &mut next_id).1;
        let block: Vec<String> = names.drain(5_000..5_100).collect();
        names.splice(15_000..15_000, block);
        names.insert(100, "new".to_string());
        names.remove(19_000);
        let (plan, _) = step(&open, &names, &mut next_id);
        assert_eq!(inserted(&plan), 101);
        assert_eq!(plan.close.len(), 101);
    }

    /// One edit of a version's chunk IDs; positions are taken modulo the length.
    #[derive(Debug, Clone)]
    enum Edit {
        Insert(usize, usize),
        Delete(usize),
        Replace(usize),
        Move(usize, usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            3 => (any::<usize>(), 1usize..4).prop_map(|(at, n)| Edit::Insert(at, n)),
            2 => any::<usize>().prop_map(Edit::Delete),
            2 => any::<usize>().prop_map(Edit::Replace),
            2 => (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Edit::Move(from, to)),
        ]
    }

    /// Applies `edits` to `names`, with fresh IDs from `fresh`.
    fn edit_ids(names: &mut Vec<String>, edits: &[Edit], fresh: &mut usize) {
        let mut new_id = || {
            *fresh += 1;
            format!("n{fresh}")
        };
        for e in edits {
            let len = names.len();
            match *e {
                Edit::Insert(at, n) => {
                    for _ in 0..n {
                        names.insert(at % (len + 1), new_id());
                    }
                }
                Edit::Delete(at) if len > 0 => {
                    names.remove(at % len);
                }
                Edit::Replace(at) if len > 0 => names[at % len] = new_id(),
                Edit::Move(from, to) if len > 0 => {
                    let id = names.remove(from % len);
                    names.insert(to % len, id);
                }
                _ => {}
            }
        }
    }

    fn config() -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    /// Arbitrary ords, including adjacent floats, huge and non-finite ones.
    fn ord() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => (-5i32..20).prop_map(f64::from),
            2 => (0u32..4).prop_map(|n| (0..n).fold(1.0f64, |x, _| x.next_up())),
            1 => Just(1e17),
            1 => Just(-1e17),
            1 => Just(f64::MAX),
            1 => Just(-0.0),
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
        ]
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn edit_scripts_keep_the_postconditions(
            n in 0usize..30,
            steps in proptest::collection::vec(proptest::collection::vec(edit(), 1..5), 1..8),
        ) {
            let mut next_id = 0;
            let mut fresh = 0;
            let mut names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
            let mut open = apply(&names, &plan_rows(&[], &refs(&names)), &mut next_id);
            for edits in &steps {
                edit_ids(&mut names, edits, &mut fresh);
                let (plan, demoted) = plan(&open_of(&open), &refs(&names));
                check(&open, &names, &plan)?;
                let inserted = inserted(&plan);
                prop_assert!(inserted <= names.len());
                // Kept: a longest increasing run of the matched ords, less demotions.
                let matched: Vec<f64> = names
                    .iter()
                    .filter_map(|id| open.iter().find(|r| &r.vector_id == id).map(|r| r.ord))
                    .collect();
                let lis = lis_len(&matched);
                prop_assert_eq!(names.len() - inserted + demoted, lis);
                let new = names.len() - matched.len();
                prop_assert_eq!(inserted, new + (matched.len() - lis) + demoted);
                if edits.iter().all(|e| matches!(e, Edit::Insert(..))) {
                    prop_assert!(plan.close.len() <= demoted, "{:?}", plan.close);
                    prop_assert_eq!(inserted, new + demoted);
                }
                open = apply(&names, &plan, &mut next_id);
            }
        }

        #[test]
        fn arbitrary_open_rows_keep_the_postconditions(
            rows in proptest::collection::vec((0u8..8, ord()), 0..12),
            new in proptest::collection::vec(0u8..10, 0..12),
        ) {
            let open: Vec<Row> = rows
                .iter()
                .enumerate()
                .map(|(i, (id, ord))| Row { chunk_id: i as i64, vector_id: format!("v{id}"), ord: *ord })
                .collect();
            let new_ids: Vec<String> = new.iter().map(|id| format!("v{id}")).collect();
            let plan = plan_rows(&open_of(&open), &refs(&new_ids));
            check(&open, &new_ids, &plan)?;
        }
    }
}
