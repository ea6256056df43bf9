//! Source sync (docs/ARCHITECTURE.md, "Source sync"): a client syncs a
//! whole source in a session, writing (or marking seen) every document it
//! holds, then commits; every document of the source the session did not
//! see gets a tombstone through the normal protocol (intake, queue,
//! consumer), so a deletion at the source reaches the index exactly.
//!
//! A commit, step by step, and what a crash after each step leaves:
//!
//! 1. **Begin** (one batch): the mass-delete guard, the plan (every
//!    unseen document of the source at its latest version, `pending`,
//!    but those a write outside any session touched since the session
//!    opened: their `plain_write_seq` is not below its `seq`), the
//!    earlier open sessions of the source `superseded`, the session
//!    `committing`. Before it: the session still `open`; a retried commit
//!    begins again. After it: the plan is fixed.
//! 2. **Page** (per `SYNC_COMMIT_PAGE_SIZE` planned deletes): read the
//!    pending page; retire each one a later session did not see and that
//!    did not move to another source, through intake, whose batch writes
//!    the tombstones and settles their deletes `deleted` together. After
//!    it: those are done; the rest of the page is still pending and a
//!    retry reads it again (a retire of a version that is no longer the
//!    latest keeps the document). The batch's guard aborts it if a write
//!    outside any session touched one of its documents since the page was
//!    read; the next read keeps that document.
//! 3. **Page done** (one batch): the page's kept deletes settled `kept`,
//!    the figures counted from the plan, `committed` once nothing is
//!    pending. Before it: the page is read again and ends the same.
//!
//! Each step is idempotent: a commit request, a retried one, and the cron
//! all continue the same plan, and the figures are counted from it, not
//! added up. Nothing is deleted that a later session of the source saw.

use super::intake::{IntakeError, IntakeItem, IntakeOutcome, IntakeScope};
use super::{log_event, Outcome, Refused};
use crate::core::failure::FailureBucket;
use crate::core::ids::{DocId, DocKey, TenantId};
use crate::core::state::SyncState;
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{SyncRow, SyncWriteRows};
use serde::Serialize;
use serde_json::json;

/// A sync session as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyncView {
    pub sync_id: String,
    pub source: String,
    /// `expired` as soon as an open session's time is up (the cron records it).
    pub state: SyncState,
    /// Documents the session saw (written, or sent unchanged).
    pub seen: u64,
    /// Documents its commit deletes (set when the commit begins).
    pub to_delete: u64,
    /// Planned deletes done: tombstoned.
    pub deleted: u64,
    /// Planned deletes kept: a later session saw them, a newer version
    /// replaced them, or they moved to another source.
    pub kept: u64,
    /// Planned deletes not settled yet.
    pub pending: u64,
    pub created_at: i64,
    pub expires_at: i64,
    pub committed_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl SyncView {
    fn of(row: SyncRow, now: i64) -> SyncView {
        let state = match row.state {
            SyncState::Open if row.expires_at <= now => SyncState::Expired,
            s => s,
        };
        let seen = if row.state == SyncState::Open {
            row.seen_now
        } else {
            row.seen
        };
        SyncView {
            sync_id: row.sync_id,
            source: row.source,
            state,
            seen,
            to_delete: row.to_delete,
            deleted: row.deleted,
            kept: row.kept,
            pending: row.pending,
            created_at: row.created_at,
            expires_at: row.expires_at,
            committed_at: row.committed_at,
            finished_at: row.finished_at,
        }
    }
}

/// A page of a tenant's sessions, newest first. A page scans `limit`
/// sessions (of the source, with a `source` filter); with a `state` filter
/// it shows those of them in that state (possibly none), and
/// `next_cursor` (null: the scan reached the oldest) continues the scan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyncPage {
    pub syncs: Vec<SyncView>,
    pub next_cursor: Option<String>,
}

/// The largest cursor of a listing of sessions (a `seq`), and the one a
/// first page reads before: the largest integer D1 binds exactly (it binds
/// numbers as doubles), which no `seq` reaches.
pub const SYNC_CURSOR_MAX: i64 = (1 << 53) - 1;

/// A session's ID from 12 of the entry point's random bytes: `sy-` and 24
/// hex digits.
pub fn sync_id(entropy: &[u8; 32]) -> String {
    let mut id = String::from("sy-");
    for b in entropy.iter().take(12) {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// A document a client says it holds unchanged: its ID and the content
/// hash of what it holds (see `intake::content_hash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenClaim {
    pub doc_id: DocId,
    pub content_hash: String,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock>
    super::Pipeline<D, V, E, Q, C>
{
    /// Opens a session of `tenant`'s `source` (validated by the caller).
    pub async fn open_sync(
        &self,
        tenant: &TenantId,
        source: &str,
        entropy: &[u8; 32],
    ) -> Result<Outcome<SyncView>, PortError> {
        let now = self.clock.now_ms();
        let id = sync_id(entropy);
        let ttl_ms = (self.cfg.sync_session_ttl_seconds as i64).saturating_mul(1000);
        let opened = self
            .store
            .insert_sync(
                &id,
                tenant.as_str(),
                source,
                now,
                now.saturating_add(ttl_ms),
            )
            .await?;
        if !opened {
            // The tenant is moving between shards (migration 0033).
            return Ok(Err(Refused::TenantMoving));
        }
        match self.store.sync(&id, tenant.as_str()).await? {
            Some(row) => Ok(Ok(SyncView::of(row, now))),
            None => Err(PortError::new(FailureBucket::Internal, "sync_missing")),
        }
    }

    /// Tenant `tenant`'s session `id` (another tenant's is not found).
    pub async fn sync_view(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Outcome<SyncView>, PortError> {
        let now = self.clock.now_ms();
        Ok(match self.store.sync(id, tenant.as_str()).await? {
            Some(row) => Ok(SyncView::of(row, now)),
            None => Err(Refused::SyncNotFound),
        })
    }

    /// A page of `tenant`'s sessions, newest first: `limit` of them
    /// before the cursor `before` (a `next_cursor`: an earlier page's
    /// oldest `seq`) scanned, of `source` only if given, those in `state`
    /// (as the view shows it: an open session past its time is `expired`)
    /// shown.
    pub async fn sync_page(
        &self,
        tenant: &TenantId,
        source: Option<&str>,
        state: Option<SyncState>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<SyncPage, PortError> {
        let now = self.clock.now_ms();
        let rows = self
            .store
            .syncs_page(
                tenant.as_str(),
                source,
                before.unwrap_or(SYNC_CURSOR_MAX),
                limit,
            )
            .await?;
        let next_cursor = rows
            .last()
            .filter(|_| rows.len() == limit)
            .map(|r| r.seq.to_string());
        let syncs = rows
            .into_iter()
            .map(|r| SyncView::of(r, now))
            .filter(|v| state.is_none_or(|s| v.state == s))
            .collect();
        Ok(SyncPage { syncs, next_cursor })
    }

    /// Of `claims`, those the ledger holds unchanged (latest version of
    /// that content hash, not a delete, not failed) count as seen by open
    /// session `id` and join its source; the rest the client must send.
    /// Returns, per claim, whether it was seen.
    pub async fn sync_mark_seen(
        &self,
        tenant: &TenantId,
        id: &str,
        claims: &[SeenClaim],
    ) -> Result<Outcome<Vec<bool>>, PortError> {
        let now = self.clock.now_ms();
        let Some(row) = self.store.sync(id, tenant.as_str()).await? else {
            return Ok(Err(Refused::SyncNotFound));
        };
        if row.state != SyncState::Open || row.expires_at <= now {
            return Ok(Err(Refused::SyncNotOpen));
        }
        let keys: Vec<DocKey> = claims
            .iter()
            .map(|c| DocKey::new(tenant, &c.doc_id))
            .collect();
        let latest = self.latest_of(&keys).await?;
        let seen: Vec<bool> = claims
            .iter()
            .zip(&keys)
            .map(|(c, k)| {
                latest
                    .get(k.as_str())
                    .is_some_and(|s| !s.is_delete && !s.hash.is_empty() && s.hash == c.content_hash)
            })
            .collect();
        let matched: Vec<&str> = keys
            .iter()
            .zip(&seen)
            .filter(|(_, s)| **s)
            .map(|(k, _)| k.as_str())
            .collect();
        let rows = SyncWriteRows {
            tenant_id: tenant.as_str(),
            source: &row.source,
            sync_id: Some(id),
            doc_ids: &matched,
            now,
        };
        if let Err(e) = self.store.record_sync_write(&rows).await {
            if e.bucket == FailureBucket::DbRejected && e.code == "db_constraint" {
                return Ok(Err(Refused::SyncNotOpen));
            }
            return Err(e);
        }
        Ok(Ok(seen))
    }

    /// Commits session `id`: begins it if open (refused past the
    /// mass-delete guard unless `allow_mass_delete`), then settles up to
    /// `SYNC_COMMIT_PAGES_PER_REQUEST` pages of its deletes. Idempotent: a
    /// committing session continues, a committed one answers as it ended.
    pub async fn commit_sync(
        &self,
        tenant: &TenantId,
        id: &str,
        allow_mass_delete: bool,
    ) -> Result<Outcome<SyncView>, PortError> {
        let now = self.clock.now_ms();
        let Some(mut row) = self.store.sync(id, tenant.as_str()).await? else {
            return Ok(Err(Refused::SyncNotFound));
        };
        if row.state == SyncState::Open && row.expires_at > now {
            let share = self.cfg.sync_delete_share_max_percent;
            let begun = self
                .store
                .begin_sync_commit(&row, share, allow_mass_delete, now)
                .await;
            let refused = match begun {
                Ok(()) => false,
                Err(e) if e.bucket == FailureBucket::DbRejected && e.code == "db_constraint" => {
                    true
                }
                Err(e) => return Err(e),
            };
            row = self.reread(tenant, id).await?;
            if refused && row.state == SyncState::Open && row.expires_at > now {
                let counts = self
                    .store
                    .source_counts(id, &row.tenant_id, &row.source)
                    .await?;
                log_event(
                    "sync_delete_guard",
                    json!({ "tenant_id": tenant.as_str(), "sync_id": id,
                            "to_delete": counts.to_delete, "documents": counts.documents }),
                );
                return Ok(Err(Refused::SyncDeleteGuard {
                    to_delete: counts.to_delete,
                    documents: counts.documents,
                    share_max_percent: share,
                }));
            }
            if !refused && row.state == SyncState::Committing {
                log_event(
                    "sync_commit_begun",
                    json!({ "tenant_id": tenant.as_str(), "sync_id": id,
                            "seen": row.seen, "to_delete": row.to_delete }),
                );
            }
        }
        match SyncView::of(row, now).state {
            SyncState::Expired => return Ok(Err(Refused::SyncExpired)),
            SyncState::Superseded => return Ok(Err(Refused::SyncSuperseded)),
            SyncState::Open => {
                return Err(PortError::new(FailureBucket::Internal, "sync_not_begun"))
            }
            SyncState::Committing => {
                let pages = self.cfg.sync_commit_pages_per_request;
                self.advance_sync(tenant, id, pages).await?;
            }
            SyncState::Committed => {}
        }
        Ok(Ok(SyncView::of(self.reread(tenant, id).await?, now)))
    }

    async fn reread(&self, tenant: &TenantId, id: &str) -> Result<SyncRow, PortError> {
        self.store
            .sync(id, tenant.as_str())
            .await?
            .ok_or_else(|| PortError::new(FailureBucket::Internal, "sync_missing"))
    }

    /// Settles up to `pages` pages of committing session `id`'s deletes
    /// (and ends it once none is pending). Returns the pages of deletes
    /// settled.
    pub(super) async fn advance_sync(
        &self,
        tenant: &TenantId,
        id: &str,
        pages: u32,
    ) -> Result<u64, PortError> {
        let page_size = self.cfg.sync_commit_page_size;
        let mut done = 0;
        for _ in 0..pages {
            let rows = self.store.sync_deletes_page(id, page_size).await?;
            let mut kept: Vec<&str> = Vec::new();
            let mut retire: Vec<(&str, IntakeItem)> = Vec::new();
            for r in &rows {
                let doc = DocKey::from_stored(&r.doc_id)
                    .filter(|k| k.tenant() == tenant.as_str())
                    .and_then(|k| DocId::parse(k.doc_id()).ok());
                match doc {
                    Some(doc_id) if r.keep == 0 => retire.push((
                        &r.doc_id,
                        IntakeItem::Retire {
                            doc_id,
                            version: r.version,
                        },
                    )),
                    _ => kept.push(&r.doc_id),
                }
            }
            if !retire.is_empty() {
                let items: Vec<IntakeItem> = retire.iter().map(|(_, i)| i.clone()).collect();
                let outcomes = match self
                    .intake_in(tenant, &items, IntakeScope::SyncDeletes { sync_id: id })
                    .await
                {
                    Ok(outcomes) => outcomes,
                    // A document of the page changed after it was read (a
                    // new version, or a plain write's mark): the next call
                    // reads the page again, and keeps it.
                    Err(IntakeError::Conflict) => break,
                    Err(e) => return Err(intake_failure(e)),
                };
                for ((key, _), o) in retire.iter().zip(&outcomes) {
                    if !matches!(o, IntakeOutcome::Queued { .. }) {
                        kept.push(key);
                    }
                }
            }
            self.store
                .sync_page_done(id, &kept, self.clock.now_ms())
                .await?;
            if rows.is_empty() {
                break;
            }
            done += 1;
            if rows.len() < page_size as usize {
                break;
            }
        }
        Ok(done)
    }

    /// The cron's step: open sessions past their time expire, and the
    /// committing ones continue, up to `pages_max` pages in all. Returns
    /// (sessions expired, pages settled).
    pub(super) async fn advance_syncs(&self, pages_max: u32) -> Result<(u64, u64), PortError> {
        let expired = self.store.expire_syncs(self.clock.now_ms()).await?;
        let mut pages = 0u64;
        if pages_max == 0 {
            return Ok((expired, 0));
        }
        for s in self.store.committing_syncs(pages_max).await? {
            let left = u64::from(pages_max).saturating_sub(pages);
            if left == 0 {
                break;
            }
            let Some(tenant) = TenantId::parse(&s.tenant_id) else {
                continue;
            };
            pages += self
                .advance_sync(&tenant, &s.sync_id, left.min(u64::from(u32::MAX)) as u32)
                .await?;
        }
        Ok((expired, pages))
    }
}

/// A retire page's intake that failed: as a port error (deletes pass every
/// quota; a lost race is retried by the next call).
fn intake_failure(e: IntakeError) -> PortError {
    match e {
        IntakeError::Port(e) => e,
        IntakeError::Conflict => PortError::new(FailureBucket::DbBusy, "intake_conflict"),
        IntakeError::TenantMoving => PortError::new(FailureBucket::DbBusy, "tenant_moving"),
        IntakeError::QuotaExceeded(_) | IntakeError::SyncNotOpen => {
            PortError::new(FailureBucket::Internal, "sync_retire_refused")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_ids_are_24_hex_digits_of_the_entropy() {
        let mut e = [0u8; 32];
        e[0] = 0xab;
        e[11] = 0x01;
        e[12] = 0xff; // not used
        let id = sync_id(&e);
        assert_eq!(id, "sy-ab0000000000000000000001");
        assert_eq!(id.len(), 27);
    }
}
