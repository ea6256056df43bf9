//! Typed access to the ledger: each function builds statements from
//! [`sql`] and runs them through the [`Database`] port.
//!
//! Here: `sql.rs` (every statement's text, with the invariant it holds),
//! and one file per aggregate with its row types and typed functions on
//! [`Store`]: documents (versions, views, the intake batch), jobs, chunks,
//! intents, generations, backfills, redrives, dead letters, the shard
//! directory, repair, retention, syncs, tenants, usage,
//! and the offline index's rows (`vector_rows`). The database handle is
//! private: nothing outside builds a statement.
//!
//! May import: `ports`, `core` and the seeded `bugs`; never
//! `pipeline`, `api` or an adapter.

pub mod sql;

mod backfills;
mod chunks;
mod dead_letters;
mod directory;
mod documents;
mod generations;
mod intents;
mod jobs;
mod moves;
mod redrives;
mod repair;
mod retention;
mod syncs;
mod tenants;
mod usage;
pub mod vector_rows;

pub use backfills::{
    BackfillCounts, BackfillPage, BackfillRow, InFlight, NewBackfill, PageCounts, PageDoc,
};
pub use chunks::{
    KeywordChunkRow, KeywordWeights, LiveChunkRow, OpenRows, PageRow, StagedChunk, Staging,
};
pub use dead_letters::{LetterFilter, LetterGroupRow, LetterRow};
pub use directory::{DedicatedRow, NewPlacement, PlacementRow, TokenPlacementRow};
pub use documents::{
    DocRow, DocumentCountRow, DocumentStateGroupRow, DocumentViewRow, JobRow, KeyTimeRow,
    LatestVersionRow, NewVersions, PartClose, PartRow, RunningDocumentRow, VersionRow,
};
pub use generations::{GenerationListRow, GenerationRow};
pub use jobs::{AttemptEnd, ClaimRow, ConsumeRow, JobViewRow, StalledJobRow, TimelineRow};
pub use moves::{CopiedChunk, DocsCopy, LiveChunk, MoveDocRow, MoveRow, RawRow, TenantSettingsRow};
pub use redrives::{AuditRow, Candidate, CandidateFilter, ItemRow, NewItem, RedriveRow, RerunOf};
pub use repair::{RepairRunRow, VerifyRow};
pub use retention::{History, PrunedVersion};
pub use syncs::{
    retire_guard_stmts, settle_deletes_stmts, CommittingRow, SourceCounts, SyncDeleteRow, SyncRow,
    SyncWriteRows,
};
pub use tenants::{Quotas, Taken, TenantRow, TenantUsageRow, TokenAuthRow, TokenRow, UsageDelta};
pub use usage::UsageSnapshot;

use crate::ports::{Database, SqlValue};
use serde::Serialize;

/// Splits serializable rows into JSON arrays of at most `bytes_max` bytes
/// each (one `json_each` parameter apiece). A single row larger than the
/// limit travels alone.
pub fn json_pages<T: Serialize>(
    rows: impl IntoIterator<Item = T>,
    bytes_max: usize,
) -> Vec<String> {
    let mut pages = Vec::new();
    let mut cur = String::from("[");
    for row in rows {
        let item = serde_json::to_string(&row).expect("rows serialize");
        if cur.len() > 1 && cur.len() + item.len() + 2 > bytes_max {
            cur.push(']');
            pages.push(std::mem::replace(&mut cur, String::from("[")));
        }
        if cur.len() > 1 {
            cur.push(',');
        }
        cur.push_str(&item);
    }
    if cur.len() > 1 {
        cur.push(']');
        pages.push(cur);
    }
    pages
}

pub fn json_array<T: Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).expect("items serialize")
}

/// The ledger, over any [`Database`]. Its handle is private: the rest of
/// the crate reads and writes the ledger through the typed functions of
/// this module's aggregates.
pub struct Store<D> {
    db: D,
    pub json_param_bytes_max: usize,
}

pub(crate) fn int(v: i64) -> SqlValue {
    SqlValue::Int(v)
}

impl<D: Database> Store<D> {
    pub fn new(db: D, json_param_bytes_max: usize) -> Store<D> {
        Store {
            db,
            json_param_bytes_max,
        }
    }

    /// The same ledger through `wrap` applied to this store's handle (the
    /// pipeline's metering, `pipeline/budget.rs`): the only way to reach
    /// the handle from outside `store/`.
    pub fn wrap<'a, W: Database>(&'a self, wrap: impl FnOnce(&'a D) -> W) -> Store<W> {
        Store {
            db: wrap(&self.db),
            json_param_bytes_max: self.json_param_bytes_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_pages_respect_the_limit_and_keep_every_row() {
        let rows: Vec<String> = (0..100).map(|i| "x".repeat(i)).collect();
        let pages = json_pages(&rows, 300);
        let mut back = Vec::new();
        for p in &pages {
            let v: Vec<String> = serde_json::from_str(p).unwrap();
            assert!(
                p.len() <= 300 || v.len() == 1,
                "page of {} bytes holds {} rows",
                p.len(),
                v.len()
            );
            back.extend(v);
        }
        assert_eq!(back, rows);
        assert!(json_pages::<&String>(&[], 300).is_empty());
    }
}
