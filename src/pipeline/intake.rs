//! Intake: record each new version (text included) in D1, atomically, then
//! send one pointer message per version.

use super::log_event;
use crate::core::chunk::ContentType;
use crate::core::failure::FailureBucket;
use crate::core::ids::{job_id, sha256_hex, DocId};
use crate::core::state::JobKind;
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
use crate::store::{DocRow, JobRow, NewVersions, PartRow, VersionRow};
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
}

impl IntakeItem {
    fn doc_id(&self) -> &DocId {
        match self {
            IntakeItem::Put(d) => &d.doc_id,
            IntakeItem::Delete(d) => d,
        }
    }
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntakeError {
    #[error("a concurrent write to the same document won; retry")]
    Conflict,
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

/// Splits text into parts of at most `bytes_max` bytes, on char boundaries.
pub fn split_parts(text: &str, bytes_max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(bytes_max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        parts.push(head);
        rest = tail;
    }
    if parts.is_empty() {
        parts.push("");
    }
    parts
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock>
    super::Pipeline<D, V, E, Q, C>
{
    /// Records the items (one atomic D1 batch for all of them) and enqueues
    /// one message per new version. Items for the same document are applied
    /// in order.
    pub async fn intake(&self, items: &[IntakeItem]) -> Result<Vec<IntakeOutcome>, IntakeError> {
        let mut last_conflict = IntakeError::Conflict;
        for _ in 0..INTAKE_ATTEMPTS_MAX {
            match self.intake_once(items).await {
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
    async fn intake_once(&self, items: &[IntakeItem]) -> Result<Vec<IntakeOutcome>, IntakeError> {
        let now = self.clock.now_ms();
        let mut latest = self.latest_of(items).await.map_err(IntakeError::Port)?;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut batch = Batch::default();
        for item in items {
            let outcome = batch.add(item, &mut latest, self.cfg.d1_text_part_bytes_max);
            outcomes.push(outcome);
        }
        if batch.messages.is_empty() {
            return Ok(outcomes);
        }

        // One atomic batch: documents, versions, text parts, jobs. A version
        // number taken concurrently violates the primary key and aborts it all.
        self.store
            .record_versions(
                &NewVersions {
                    docs: &batch.docs,
                    versions: &batch.versions,
                    parts: &batch.parts,
                    jobs: &batch.jobs,
                },
                now,
            )
            .await
            .map_err(IntakeError::Port)?;

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

    /// The latest version of each item's document (none for a new one).
    async fn latest_of(&self, items: &[IntakeItem]) -> Result<Latest, PortError> {
        let ids: Vec<&str> = items.iter().map(|i| i.doc_id().as_str()).collect();
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
                r.content_hash
            };
            latest.insert(r.doc_id, (r.latest_version, hash, r.is_delete != 0));
        }
        Ok(latest)
    }
}

/// doc_id -> (latest version, content hash of the latest, is tombstone).
type Latest = HashMap<String, (u32, String, bool)>;

/// The rows and messages of the new versions of one intake.
#[derive(Default)]
struct Batch<'a> {
    docs: Vec<DocRow<'a>>,
    versions: Vec<VersionRow<'a>>,
    parts: Vec<PartRow<'a>>,
    jobs: Vec<JobRow<'a>>,
    messages: Vec<JobMessage>,
}

impl<'a> Batch<'a> {
    /// Decides `item`'s outcome against the latest versions (which a new
    /// version updates, so a later item of the same document follows it),
    /// and adds the rows of a new version.
    fn add(
        &mut self,
        item: &'a IntakeItem,
        latest: &mut Latest,
        part_bytes_max: usize,
    ) -> IntakeOutcome {
        let doc_id = item.doc_id().as_str();
        let prev = latest.get(doc_id).cloned();
        let (hash, is_delete) = match item {
            IntakeItem::Put(d) => (content_hash(d), false),
            IntakeItem::Delete(_) => (TOMBSTONE_HASH.to_string(), true),
        };
        match (&prev, is_delete) {
            (None, true) => {
                return IntakeOutcome::NotFound {
                    doc_id: doc_id.to_string(),
                }
            }
            (Some((v, h, _)), _) if *h == hash => {
                return IntakeOutcome::Unchanged {
                    doc_id: doc_id.to_string(),
                    version: *v,
                }
            }
            _ => {}
        }
        let version = prev.as_ref().map_or(1, |p| p.0 + 1);
        let jid = self.push_version(item, version, &hash, part_bytes_max);
        latest.insert(doc_id.to_string(), (version, hash, is_delete));
        IntakeOutcome::Queued {
            doc_id: doc_id.to_string(),
            version,
            job_id: jid,
        }
    }

    /// Adds the rows of `item`'s new `version` (its document, version,
    /// text parts and job) and its message. Returns the job's id.
    fn push_version(
        &mut self,
        item: &'a IntakeItem,
        version: u32,
        hash: &str,
        part_bytes_max: usize,
    ) -> String {
        let doc_id = item.doc_id().as_str();
        let is_delete = matches!(item, IntakeItem::Delete(_));
        let kind = if is_delete {
            JobKind::Delete
        } else {
            JobKind::Index
        };
        let jid = job_id(item.doc_id(), version, kind.as_str(), 0);
        let (text, content_type, metadata) = match item {
            IntakeItem::Put(d) => (
                d.text.as_str(),
                d.content_type.as_str(),
                Value::Object(d.metadata.clone()).to_string(),
            ),
            IntakeItem::Delete(_) => ("", ContentType::Plain.as_str(), "{}".to_string()),
        };
        let text_parts = split_parts(text, part_bytes_max);
        for (i, t) in text_parts.iter().enumerate() {
            self.parts.push(PartRow {
                doc_id,
                version,
                part: i,
                text: t,
            });
        }
        self.versions.push(VersionRow {
            doc_id,
            version,
            is_delete: u8::from(is_delete),
            content_hash: hash.to_string(),
            content_type,
            metadata,
            text_bytes: text.len(),
            part_count: text_parts.len(),
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
        jid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_split_on_char_boundaries() {
        let text = "é".repeat(10); // 20 bytes
        let parts = split_parts(&text, 5);
        assert!(parts.iter().all(|p| p.len() <= 5));
        assert_eq!(parts.concat(), text);
        assert_eq!(split_parts("", 5), vec![""]);
    }

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
