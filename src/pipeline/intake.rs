//! Intake: record each new version (text included) in D1, atomically, then
//! send one pointer message per version. Every item of one intake is of
//! one tenant, whose quotas of documents and bytes the batch enforces.

use super::log_event;
use crate::core::chunk::ContentType;
use crate::core::failure::FailureBucket;
use crate::core::ids::{job_id, sha256_hex, DocId, DocKey, TenantId};
use crate::core::state::{JobKind, SyncDeleteState, SyncState, TenantMoveState};
use crate::core::text_parts::{self, PartRef};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{
    retire_guard_stmts, settle_deletes_stmts, DocRow, JobRow, LatestVersionRow, NewVersions,
    PartClose, PartRow, SyncWriteRows, UsageDelta, VersionRow,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// A validated document (see `api` for the validation).
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentInput {
    pub doc_id: DocId,
    pub text: String,
    pub metadata: Map<String, Value>,
    pub content_type: ContentType,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IntakeItem {
    Put(DocumentInput),
    Delete(DocId),
    /// A sync commit's delete: a tombstone only if `version` is still the
    /// document's latest (a newer version, or a delete already, is kept:
    /// `Unchanged`).
    Retire {
        doc_id: DocId,
        version: u32,
    },
}

impl IntakeItem {
    /// The document the item writes.
    pub fn doc_id(&self) -> &DocId {
        match self {
            IntakeItem::Put(d) => &d.doc_id,
            IntakeItem::Delete(d) | IntakeItem::Retire { doc_id: d, .. } => d,
        }
    }

    fn is_delete(&self) -> bool {
        !matches!(self, IntakeItem::Put(_))
    }
}

/// A write into a source (`source`), in sync session `sync_id` if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceWrite {
    pub source: String,
    pub sync_id: Option<String>,
}

/// What an intake records in its batch besides the versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntakeScope<'a> {
    /// Nothing more.
    Plain,
    /// Every written document (new version or unchanged) joins the source
    /// and, in a session, counts as seen; the session must be open.
    Source(&'a SourceWrite),
    /// A page of sync session `sync_id`'s deletes: each tombstone settles
    /// its planned delete in the same batch.
    SyncDeletes { sync_id: &'a str },
}

#[derive(Clone, Debug, PartialEq)]
pub enum IntakeOutcome {
    Queued {
        doc_id: String,
        version: u32,
        job_id: String,
    },
    /// Same text, metadata and content type as the latest version (or a
    /// delete of a document whose latest version is already a tombstone).
    Unchanged { doc_id: String, version: u32 },
    /// A delete of a document that does not exist.
    NotFound { doc_id: String },
}

/// A tenant quota an intake would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    Documents,
    Bytes,
}

impl Quota {
    /// Its name in logs: the tenant's quota field it is.
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::Documents => "documents_max",
            Quota::Bytes => "bytes_max",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntakeError {
    #[error("a concurrent write to the same document won; retry")]
    Conflict,
    /// The items would take the tenant past a quota: nothing was written.
    #[error("the tenant's quota would be exceeded")]
    QuotaExceeded(Quota),
    /// The write names a sync session that is not open (committed,
    /// expired, superseded, of another source, or none): nothing written.
    #[error("the sync session is not open")]
    SyncNotOpen,
    /// The tenant is fenced on this shard for a move (or moved away):
    /// nothing was written; the write goes to the new shard once it
    /// switches.
    #[error("the tenant is moving to another shard")]
    TenantMoving,
    #[error("{0}")]
    Port(PortError),
}

/// Attempts of the read-then-write intake when a concurrent writer took the
/// same version number first.
const INTAKE_ATTEMPTS_MAX: usize = 3;

/// The identity of a version's content: equal hashes mean "unchanged".
pub fn content_hash(input: &DocumentInput) -> String {
    // serde_json's Map is ordered by key, so this is a canonical form.
    let metadata = Value::Object(input.metadata.clone()).to_string();
    let mut bytes = Vec::with_capacity(input.text.len() + metadata.len() + 32);
    bytes.extend_from_slice(input.content_type.as_str().as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(metadata.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(input.text.as_bytes());
    sha256_hex(&bytes)
}

const TOMBSTONE_HASH: &str = "tombstone";

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock>
    super::Pipeline<D, V, E, Q, C>
{
    /// Records `tenant`'s items (one atomic D1 batch for all of them) and
    /// enqueues one message per new version. Items for the same document
    /// are applied in order.
    pub async fn intake(
        &self,
        tenant: &TenantId,
        items: &[IntakeItem],
    ) -> Result<Vec<IntakeOutcome>, IntakeError> {
        self.intake_in(tenant, items, IntakeScope::Plain).await
    }

    /// [`intake`](Self::intake), recording `scope`'s rows in the same batch.
    pub async fn intake_in(
        &self,
        tenant: &TenantId,
        items: &[IntakeItem],
        scope: IntakeScope<'_>,
    ) -> Result<Vec<IntakeOutcome>, IntakeError> {
        let mut last_conflict = IntakeError::Conflict;
        for _ in 0..INTAKE_ATTEMPTS_MAX {
            // A batch the quota guard aborted ends here as QuotaExceeded,
            // one the sync guard aborted as SyncNotOpen (`intake_once`
            // tells them from a lost race, which retries).
            match self.intake_once(tenant, items, scope).await {
                Ok(out) => return Ok(out),
                Err(IntakeError::Port(e))
                    if e.bucket == FailureBucket::DbRejected && e.code == "db_constraint" =>
                {
                    last_conflict = IntakeError::Conflict;
                }
                Err(e) => return Err(e),
            }
        }
        log_event(
            "intake_conflict",
            json!({ "bucket": FailureBucket::DbRejected.as_str() }),
        );
        Err(last_conflict)
    }

    /// One attempt: read the latest versions, decide each item's outcome,
    /// record the new versions in one batch, then send their pointers.
    async fn intake_once(
        &self,
        tenant: &TenantId,
        items: &[IntakeItem],
        scope: IntakeScope<'_>,
    ) -> Result<Vec<IntakeOutcome>, IntakeError> {
        let now = self.clock.now_ms();
        let keys: Vec<DocKey> = items
            .iter()
            .map(|i| DocKey::new(tenant, i.doc_id()))
            .collect();
        let mut latest = self.latest_of(&keys).await.map_err(IntakeError::Port)?;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut batch = Batch::default();
        for (item, key) in items.iter().zip(&keys) {
            let outcome = batch.add(item, key, &mut latest, self.part_sizes());
            outcomes.push(outcome);
        }
        let written: Vec<&str> = items
            .iter()
            .zip(&keys)
            .filter(|(i, _)| !i.is_delete())
            .map(|(_, k)| k.as_str())
            .collect();
        let source_rows = match scope {
            IntakeScope::Source(w) => Some(SyncWriteRows {
                tenant_id: tenant.as_str(),
                source: &w.source,
                sync_id: w.sync_id.as_deref(),
                doc_ids: &written,
                now,
            }),
            _ => None,
        };
        if batch.messages.is_empty() {
            // Nothing new: a source's marks alone (the guard still holds).
            if let Some(rows) = &source_rows {
                if let Err(e) = self.store.record_sync_write(rows).await {
                    return Err(self.sync_refusal(tenant, scope, now, e).await);
                }
            }
            return Ok(outcomes);
        }
        let extra = match (scope, &source_rows) {
            (IntakeScope::Source(_), Some(rows)) => rows.stmts(self.store.json_param_bytes_max),
            (IntakeScope::SyncDeletes { sync_id }, _) => {
                let tombstoned: Vec<&str> = outcomes
                    .iter()
                    .zip(&keys)
                    .filter(|(o, _)| matches!(o, IntakeOutcome::Queued { .. }))
                    .map(|(_, k)| k.as_str())
                    .collect();
                let max = self.store.json_param_bytes_max;
                let mut stmts = retire_guard_stmts(sync_id, &tombstoned, max);
                stmts.extend(settle_deletes_stmts(
                    sync_id,
                    SyncDeleteState::Deleted,
                    &tombstoned,
                    max,
                ));
                stmts
            }
            _ => Vec::new(),
        };
        if self.bugs.has(crate::bugs::Bug::PartsLeftOpen) {
            batch.closes.clear();
        }
        let usage = UsageDelta {
            tenant_id: tenant.as_str().to_string(),
            documents: batch.documents_delta,
            bytes: batch.bytes_added,
            documents_max_default: self.cfg.tenant_documents_max,
            bytes_max_default: self.cfg.tenant_bytes_max,
        };

        // One atomic batch: the quota guard, documents, versions, text
        // parts, jobs, the usage. A version number taken concurrently
        // violates the primary key and aborts it all; so does a tenant
        // quota the batch would pass (the guard), which the usage read
        // below tells apart.
        let recorded = self
            .store
            .record_versions(
                &NewVersions {
                    docs: &batch.docs,
                    versions: &batch.versions,
                    parts: &batch.parts,
                    closes: &batch.closes,
                    jobs: &batch.jobs,
                    usage: Some(&usage),
                    extra,
                    plain: match scope {
                        IntakeScope::Plain => true,
                        IntakeScope::Source(w) => w.sync_id.is_none(),
                        IntakeScope::SyncDeletes { .. } => false,
                    },
                },
                now,
            )
            .await;
        if let Err(e) = recorded {
            let constraint = e.bucket == FailureBucket::DbRejected && e.code == "db_constraint";
            if !constraint {
                return Err(IntakeError::Port(e));
            }
            let refusal = self.sync_refusal(tenant, scope, now, e).await;
            if matches!(refusal, IntakeError::SyncNotOpen | IntakeError::Conflict) {
                return Err(refusal);
            }
            if self.bugs.has(crate::bugs::Bug::LostRaceRefused) {
                return Err(IntakeError::QuotaExceeded(Quota::Bytes));
            }
            if let Some(refused) = self.quota_passed(&usage).await.map_err(IntakeError::Port)? {
                let IntakeError::QuotaExceeded(quota) = refused else {
                    return Err(refused);
                };
                log_event(
                    "quota_refused",
                    json!({ "tenant_id": usage.tenant_id, "quota": quota.as_str() }),
                );
                return Err(IntakeError::QuotaExceeded(quota));
            }
            return Err(IntakeError::Port(e));
        }

        // Only after the commit: the pointers. If sending fails, the jobs stay
        // `queued` in D1 and the cron reconciler re-enqueues them once stalled.
        for page in batch.messages.chunks(100) {
            if let Err(e) = self.queue.send_batch(page).await {
                log_event(
                    "enqueue_deferred",
                    json!({ "bucket": e.bucket.as_str(), "code": e.code, "jobs": page.len() }),
                );
            }
        }
        Ok(outcomes)
    }

    /// After a batch of `scope` failed with `e`: `SyncNotOpen` if its sync
    /// session is not open (then the guard aborted it), else `e`.
    async fn sync_refusal(
        &self,
        tenant: &TenantId,
        scope: IntakeScope<'_>,
        now: i64,
        e: PortError,
    ) -> IntakeError {
        let constraint = e.bucket == FailureBucket::DbRejected && e.code == "db_constraint";
        if constraint && matches!(scope, IntakeScope::SyncDeletes { .. }) {
            // A lost race or the retire guard: the commit reads the page
            // again (a newer version or a plain write keeps the document).
            return IntakeError::Conflict;
        }
        let IntakeScope::Source(SourceWrite {
            source,
            sync_id: Some(sync_id),
        }) = scope
        else {
            return IntakeError::Port(e);
        };
        if !constraint {
            return IntakeError::Port(e);
        }
        match self.store.sync(sync_id, tenant.as_str()).await {
            Ok(Some(s))
                if s.state == SyncState::Open && s.expires_at > now && &s.source == source =>
            {
                IntakeError::Port(e)
            }
            Ok(_) => IntakeError::SyncNotOpen,
            Err(read) => IntakeError::Port(read),
        }
    }

    /// After a batch failed: the quota `delta` would pass, if any (then the
    /// guard aborted it), read from the tenant's usage now. Only read on a
    /// failure, so an accepted intake costs one read and one write.
    async fn quota_passed(&self, delta: &UsageDelta) -> Result<Option<IntakeError>, PortError> {
        let Some(usage) = self
            .store
            .tenant_usage(
                &delta.tenant_id,
                delta.documents_max_default,
                delta.bytes_max_default,
            )
            .await?
        else {
            return Err(PortError::new(FailureBucket::Internal, "tenant_missing"));
        };
        if usage
            .move_state
            .is_some_and(|m| m != TenantMoveState::Copying)
        {
            return Ok(Some(IntakeError::TenantMoving));
        }
        if delta.documents > 0 && usage.documents + delta.documents > usage.documents_max {
            return Ok(Some(IntakeError::QuotaExceeded(Quota::Documents)));
        }
        if delta.bytes > 0 && usage.bytes + delta.bytes > usage.bytes_max {
            return Ok(Some(IntakeError::QuotaExceeded(Quota::Bytes)));
        }
        Ok(None)
    }

    /// The latest version of each item's document (none for a new one).
    pub(super) async fn latest_of(&self, keys: &[DocKey]) -> Result<Latest, PortError> {
        let ids: Vec<&str> = keys.iter().map(DocKey::as_str).collect();
        let mut latest = Latest::new();
        if ids.is_empty() {
            return Ok(latest);
        }
        for r in self.store.latest_versions(&ids).await? {
            // A latest version whose job failed has no hash here: the same
            // content again is a resubmission, a new version, not "unchanged".
            let hash = if r.latest_failed != 0 {
                String::new()
            } else {
                r.content_hash.clone()
            };
            let parts = manifest_of(&r);
            let stored = Stored {
                version: r.latest_version,
                hash,
                is_delete: r.is_delete != 0,
                parts,
            };
            latest.insert(r.doc_id, stored);
        }
        Ok(latest)
    }

    /// The text parts' sizes: about TEXT_PART_BYTES_TARGET, at most
    /// D1_TEXT_PART_BYTES_MAX.
    fn part_sizes(&self) -> PartSizes {
        PartSizes {
            target: self.cfg.text_part_bytes_target,
            max: self.cfg.d1_text_part_bytes_max,
        }
    }
}

/// The latest version's manifest: the one it stores (or its re-run's
/// source's), or, for a version written before migration 0022, its own
/// parts, which no new part shares (they have no hash).
/// A manifest that does not read (never written so by intake) is logged
/// with its bucket and read as the version's own parts: the new version
/// then shares nothing and writes its text whole.
fn manifest_of(r: &LatestVersionRow) -> Vec<PartRef> {
    let own = || {
        (0..r.part_count)
            .map(|i| PartRef(r.text_version, i, None))
            .collect()
    };
    match r.parts.as_deref().map(serde_json::from_str::<Vec<PartRef>>) {
        Some(Ok(parts)) => parts,
        None => own(),
        Some(Err(_)) => {
            log_event(
                "manifest_unreadable",
                json!({ "bucket": FailureBucket::Internal.as_str(), "version": r.latest_version }),
            );
            own()
        }
    }
}

/// How text parts are cut: about `target` bytes, at most `max`.
#[derive(Clone, Copy)]
struct PartSizes {
    target: usize,
    max: usize,
}

/// What a document's latest version is: its number, content hash,
/// whether it is a tombstone, and the parts its text is made of (what a
/// new version may share).
#[derive(Clone)]
pub(super) struct Stored {
    pub(super) version: u32,
    pub(super) hash: String,
    pub(super) is_delete: bool,
    pub(super) parts: Vec<PartRef>,
}

impl Stored {
    /// Whether this version counts as a document in its tenant's usage.
    fn documents(&self) -> i64 {
        i64::from(!self.is_delete)
    }
}

/// Document key -> its latest version.
pub(super) type Latest = HashMap<String, Stored>;

/// The rows and messages of the new versions of one intake.
#[derive(Default)]
struct Batch<'a> {
    docs: Vec<DocRow<'a>>,
    versions: Vec<VersionRow<'a>>,
    parts: Vec<PartRow<'a>>,
    closes: Vec<PartClose<'a>>,
    jobs: Vec<JobRow<'a>>,
    messages: Vec<JobMessage>,
    /// What the new versions add to the tenant's usage: documents (a
    /// tombstone takes one away), and text bytes: those of the parts they
    /// write (a part shared with the version before is stored once).
    /// Every part counts until cron prunes it (`TEXT_RETENTION_SECONDS`
    /// after no version that holds text names it), so the quota counts
    /// what D1 stores.
    documents_delta: i64,
    bytes_added: i64,
}

impl<'a> Batch<'a> {
    /// Decides `item`'s outcome against the latest versions (which a new
    /// version updates, so a later item of the same document follows it),
    /// and adds the rows of a new version.
    fn add(
        &mut self,
        item: &'a IntakeItem,
        key: &'a DocKey,
        latest: &mut Latest,
        sizes: PartSizes,
    ) -> IntakeOutcome {
        let doc_id = item.doc_id().as_str();
        let prev = latest.get(key.as_str()).cloned();
        let (hash, is_delete) = match item {
            IntakeItem::Put(d) => (content_hash(d), false),
            IntakeItem::Delete(_) | IntakeItem::Retire { .. } => (TOMBSTONE_HASH.to_string(), true),
        };
        if let (IntakeItem::Retire { version, .. }, Some(p)) = (item, &prev) {
            if p.version != *version || p.is_delete {
                return IntakeOutcome::Unchanged {
                    doc_id: doc_id.to_string(),
                    version: p.version,
                };
            }
        }
        match (&prev, is_delete) {
            (None, true) => {
                return IntakeOutcome::NotFound {
                    doc_id: doc_id.to_string(),
                }
            }
            (Some(p), _) if p.hash == hash => {
                return IntakeOutcome::Unchanged {
                    doc_id: doc_id.to_string(),
                    version: p.version,
                }
            }
            _ => {}
        }
        let version = prev.as_ref().map_or(1, |p| p.version + 1);
        let shared = prev.as_ref().map_or(&[][..], |p| &p.parts[..]);
        let bytes_before: usize = self.parts.iter().map(|p| p.text.len()).sum();
        let (jid, parts) = self.push_version(item, key, version, &hash, shared, sizes);
        let now = Stored {
            version,
            hash,
            is_delete,
            parts,
        };
        self.documents_delta += now.documents() - prev.as_ref().map_or(0, Stored::documents);
        let bytes_after: usize = self.parts.iter().map(|p| p.text.len()).sum();
        self.bytes_added += (bytes_after - bytes_before) as i64;
        latest.insert(key.as_str().to_string(), now);
        IntakeOutcome::Queued {
            doc_id: doc_id.to_string(),
            version,
            job_id: jid,
        }
    }

    /// Adds the rows of `item`'s new `version` (its document, version,
    /// text parts and job) and its message. Returns the job's id and the
    /// version's manifest.
    fn push_version(
        &mut self,
        item: &'a IntakeItem,
        key: &'a DocKey,
        version: u32,
        hash: &str,
        shared: &[PartRef],
        sizes: PartSizes,
    ) -> (String, Vec<PartRef>) {
        let doc_id = key.as_str();
        let is_delete = item.is_delete();
        let kind = if is_delete {
            JobKind::Delete
        } else {
            JobKind::Index
        };
        let jid = job_id(key, version, kind.as_str(), 0);
        let (text, content_type, metadata) = match item {
            IntakeItem::Put(d) => (
                d.text.as_str(),
                d.content_type.as_str(),
                Value::Object(d.metadata.clone()).to_string(),
            ),
            IntakeItem::Delete(_) | IntakeItem::Retire { .. } => {
                ("", ContentType::Plain.as_str(), "{}".to_string())
            }
        };
        let manifest = self.push_parts(doc_id, version, text, shared, sizes);
        self.versions.push(VersionRow {
            doc_id,
            version,
            is_delete: u8::from(is_delete),
            content_hash: hash.to_string(),
            content_type,
            metadata,
            text_bytes: text.len(),
            part_count: manifest.len(),
            parts: serde_json::to_string(&manifest).unwrap_or_default(),
        });
        self.docs.push(DocRow { doc_id, version });
        self.jobs.push(JobRow {
            job_id: jid.clone(),
            doc_id,
            version,
            kind,
        });
        self.messages
            .push(JobMessage::new(jid.clone(), doc_id.to_string(), version));
        (jid, manifest)
    }

    /// Cuts `text` into parts (`core::text_parts`), names each part the
    /// version before holds already (`shared`) and adds a row for each
    /// other, then closes at `version` the parts of `shared` it no longer
    /// names. Returns the version's manifest.
    fn push_parts(
        &mut self,
        doc_id: &'a str,
        version: u32,
        text: &'a str,
        shared: &[PartRef],
        sizes: PartSizes,
    ) -> Vec<PartRef> {
        // The parts known by their hash: the version before's, and those
        // this one writes (a text that repeats a part stores it once).
        let mut known: HashMap<String, PartRef> = shared
            .iter()
            .filter_map(|r| Some((r.2.clone()?, r.clone())))
            .collect();
        let mut manifest = Vec::new();
        for (i, t) in text_parts::split(text, sizes.target, sizes.max)
            .into_iter()
            .enumerate()
        {
            let hash = text_parts::part_hash(t);
            let r = known.entry(hash).or_insert_with_key(|h| {
                self.parts.push(PartRow {
                    doc_id,
                    version,
                    part: i,
                    text: t,
                });
                PartRef(version, i as u32, Some(h.clone()))
            });
            manifest.push(r.clone());
        }
        let kept: std::collections::HashSet<(u32, u32)> =
            manifest.iter().map(|r| (r.0, r.1)).collect();
        let mut closed = std::collections::HashSet::new();
        for r in shared {
            if !kept.contains(&(r.0, r.1)) && closed.insert((r.0, r.1)) {
                self.closes.push(PartClose(doc_id, r.0, r.1, version));
            }
        }
        manifest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_sees_every_field() {
        let base = DocumentInput {
            doc_id: DocId::parse("d").unwrap(),
            text: "t".into(),
            metadata: Map::new(),
            content_type: ContentType::Plain,
        };
        let h = content_hash(&base);
        let mut other = base.clone();
        other.text = "u".into();
        assert_ne!(h, content_hash(&other));
        let mut other = base.clone();
        other.content_type = ContentType::Markdown;
        assert_ne!(h, content_hash(&other));
        let mut other = base.clone();
        other.metadata.insert("k".into(), json!(1));
        assert_ne!(h, content_hash(&other));
        let mut same = base.clone();
        same.doc_id = DocId::parse("other").unwrap();
        assert_eq!(
            h,
            content_hash(&same),
            "the hash is of content, not identity"
        );
    }
}
