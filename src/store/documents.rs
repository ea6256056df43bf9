//! Documents and their versions as intake and the API read them: latest
//! versions, document views, a version's text, and the batch that records
//! new versions.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{json_array, json_pages, sql, Store};
use crate::core::failure::FailureBucket;
use crate::core::state::{JobKind, JobState};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize)]
pub struct LatestVersionRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub content_hash: String,
    pub is_delete: i64,
    pub text_bytes: i64,
    /// The latest version's job ended `failed` or `dead` (and it is not live).
    pub latest_failed: i64,
    /// Its text's manifest (JSON `[[version, part, hash], …]`; a re-run's
    /// is its `text_version`'s), NULL for a version written before
    /// migration 0022, whose text is `part_count` parts of `text_version`.
    pub parts: Option<String>,
    pub part_count: u32,
    pub text_version: u32,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DocumentViewRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    pub repair_needed: i64,
    pub live_is_delete: Option<i64>,
    pub live_chunk_count: Option<u32>,
    pub live_index_config: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub job_id: Option<String>,
    pub job_state: Option<JobState>,
    pub job_step: Option<String>,
    pub job_chunks_done: Option<u32>,
    pub last_failure_bucket: Option<String>,
}

/// One group of documents sharing the inputs of their state, and how many
/// they are: what a recount of every document gives (the simulation's
/// check of [`sql::DOCUMENT_COUNTS`], `native::oracle`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DocumentStateGroupRow {
    pub repair_needed: i64,
    pub live_is_latest: i64,
    pub live_is_delete: Option<i64>,
    pub job_state: Option<JobState>,
    pub job_wrote: i64,
    pub last_failure_bucket: Option<String>,
    pub documents: u64,
}

/// One count of [`sql::DOCUMENT_COUNTS`]: `key` is a state's name, or
/// `state/bucket` for the documents in that state whose newest job last
/// failed in `bucket`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DocumentCountRow {
    pub key: String,
    pub documents: i64,
}

/// A document of [`sql::RUNNING_DOCUMENTS`]: its running job's last failure
/// bucket.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct RunningDocumentRow {
    pub bucket: Option<String>,
}

/// A document's key in a tenant's listing, and when it last changed.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct KeyTimeRow {
    pub doc_id: String,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Deserialize)]
struct TextRow {
    /// The part's place in the version's text.
    n: i64,
    text: String,
}

/// Rows of new versions, as intake writes them (one `json_each` page each).
#[derive(Serialize)]
pub struct DocRow<'a> {
    pub doc_id: &'a str,
    pub version: u32,
}

#[derive(Serialize)]
pub struct VersionRow<'a> {
    pub doc_id: &'a str,
    pub version: u32,
    pub is_delete: u8,
    pub content_hash: String,
    pub content_type: &'static str,
    pub metadata: String,
    pub text_bytes: usize,
    pub part_count: usize,
    /// The manifest: the `version_parts` rows the text is made of, in
    /// order (JSON `[[version, part, hash], …]`).
    pub parts: String,
}

/// A part a new version no longer names, closed at it: serialized as
/// `[doc_id, version, part, to_version]`.
#[derive(Serialize)]
pub struct PartClose<'a>(pub &'a str, pub u32, pub u32, pub u32);

#[derive(Serialize)]
pub struct PartRow<'a> {
    pub doc_id: &'a str,
    pub version: u32,
    pub part: usize,
    pub text: &'a str,
}

#[derive(Serialize)]
pub struct JobRow<'a> {
    pub job_id: String,
    pub doc_id: &'a str,
    pub version: u32,
    pub kind: JobKind,
}

/// Everything intake writes for a set of new versions, in one batch.
pub struct NewVersions<'a> {
    pub docs: &'a [DocRow<'a>],
    pub versions: &'a [VersionRow<'a>],
    pub parts: &'a [PartRow<'a>],
    pub closes: &'a [PartClose<'a>],
    pub jobs: &'a [JobRow<'a>],
    /// What they add to their tenant's usage: checked against its quotas
    /// first in the batch, added last.
    pub usage: Option<&'a super::UsageDelta>,
    /// More statements of the same batch, after the quota guard: a source
    /// sync's guard, seen marks and membership, or a commit's settled
    /// deletes (see `store::syncs`).
    pub extra: Vec<Stmt>,
    /// A write outside any sync session: the documents are marked with the
    /// newest session's `seq`, which no session open now deletes (I14).
    pub plain: bool,
}

impl<D: Database> Store<D> {
    /// Records new versions (documents, versions, text parts, jobs) in one
    /// atomic batch, each kind in `json_each` pages under the parameter
    /// limit; a part too large for a page travels alone. A version number
    /// taken concurrently violates the primary key and aborts it all.
    pub async fn record_versions(&self, new: &NewVersions<'_>, now: i64) -> Result<(), PortError> {
        let max = self.json_param_bytes_max;
        let t = || SqlValue::Int(now);
        let mut stmts = Vec::new();
        let usage = new.usage.map(super::tenants::usage_stmts);
        if let Some((guard, _)) = &usage {
            stmts.push(guard.clone());
        }
        stmts.extend(new.extra.iter().cloned());
        for page in json_pages(new.docs, max) {
            stmts.push(Stmt::new(
                sql::INTAKE_UPSERT_DOCUMENTS,
                vec![page.into(), t(), SqlValue::Int(i64::from(new.plain))],
            ));
        }
        for page in json_pages(new.versions, max) {
            stmts.push(Stmt::new(
                sql::INTAKE_INSERT_VERSIONS,
                vec![page.into(), t()],
            ));
        }
        let (small, large): (Vec<&PartRow>, Vec<&PartRow>) = new
            .parts
            .iter()
            .partition(|p| serde_json::to_string(p).map_or(usize::MAX, |s| s.len()) + 2 <= max);
        for page in json_pages(&small, max) {
            stmts.push(Stmt::new(sql::INTAKE_INSERT_PARTS_BULK, vec![page.into()]));
        }
        for p in large {
            let params = vec![
                p.doc_id.into(),
                p.version.into(),
                SqlValue::Int(p.part as i64),
                p.text.into(),
            ];
            stmts.push(Stmt::new(sql::INTAKE_INSERT_PART, params));
        }
        // After the parts: a version of this batch may close a part an
        // earlier version of the same batch wrote.
        for page in json_pages(new.closes, max) {
            stmts.push(Stmt::new(sql::INTAKE_CLOSE_PARTS, vec![page.into()]));
        }
        for page in json_pages(new.jobs, max) {
            stmts.push(Stmt::new(sql::INTAKE_INSERT_JOBS, vec![page.into(), t()]));
        }
        if let Some((_, add)) = usage {
            stmts.push(add);
        }
        self.db.batch(stmts).await.map(|_| ())
    }

    pub async fn latest_versions(
        &self,
        doc_ids: &[&str],
    ) -> Result<Vec<LatestVersionRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::LATEST_VERSIONS,
                vec![json_array(doc_ids).into()],
            ))
            .await
    }

    pub async fn document_views(
        &self,
        doc_ids: &[&str],
    ) -> Result<Vec<DocumentViewRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::DOCUMENT_VIEWS,
                vec![json_array(doc_ids).into()],
            ))
            .await
    }

    /// Documents counted by state, and by state and failure bucket
    /// (`tenant_id`: one tenant's; `None`: every tenant's): the counts the
    /// tenants' rows keep, one row read per tenant.
    pub async fn document_counts(
        &self,
        tenant_id: Option<&str>,
    ) -> Result<Vec<DocumentCountRow>, PortError> {
        let stmt = match tenant_id {
            Some(t) => Stmt::new(sql::TENANT_DOCUMENT_COUNTS, vec![t.into()]),
            None => Stmt::new(sql::DOCUMENT_COUNTS, vec![]),
        };
        self.db.query(stmt).await
    }

    /// The documents whose latest version's newest job is running (counted
    /// as queued), each with its job's last failure bucket.
    pub async fn running_documents(
        &self,
        tenant_id: Option<&str>,
    ) -> Result<Vec<RunningDocumentRow>, PortError> {
        let stmt = match tenant_id {
            Some(t) => Stmt::new(sql::TENANT_RUNNING_DOCUMENTS, vec![t.into()]),
            None => Stmt::new(sql::RUNNING_DOCUMENTS, vec![]),
        };
        self.db.query(stmt).await
    }

    /// Up to `limit` document keys after `after`, in key order: of one
    /// tenant, or of every tenant. Each page reads its keys from the cursor
    /// on, whatever the number of documents.
    pub async fn document_keys_page(
        &self,
        tenant_id: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        let after = after.unwrap_or("");
        let rows = match tenant_id {
            Some(t) => self.tenant_document_keys(t, None, after, limit).await?,
            None => {
                self.db
                    .query(Stmt::new(
                        sql::DOCUMENT_KEYS_PAGE,
                        vec![after.into(), SqlValue::Int(limit as i64)],
                    ))
                    .await?
            }
        };
        Ok(rows.into_iter().map(|r: KeyTimeRow| r.doc_id).collect())
    }

    /// Up to `limit` of tenant `tenant_id`'s document keys after the key
    /// `after` (`""`: from the start), in key order; with `source`, only
    /// those of that source.
    pub async fn tenant_document_keys(
        &self,
        tenant_id: &str,
        source: Option<&str>,
        after: &str,
        limit: usize,
    ) -> Result<Vec<KeyTimeRow>, PortError> {
        let limit = SqlValue::Int(limit as i64);
        let stmt = match source {
            None => Stmt::new(
                sql::TENANT_DOCUMENT_KEYS_PAGE,
                vec![tenant_id.into(), after.into(), limit],
            ),
            Some(source) => Stmt::new(
                sql::SOURCE_DOCUMENT_KEYS_PAGE,
                vec![tenant_id.into(), source.into(), after.into(), limit],
            ),
        };
        self.db.query(stmt).await
    }

    pub async fn load_text(
        &self,
        doc_id: &str,
        version: u32,
        part_count: u32,
    ) -> Result<String, PortError> {
        let mut rows: Vec<TextRow> = self
            .db
            .query(Stmt::new(
                sql::CONSUME_LOAD_PARTS,
                vec![doc_id.into(), version.into()],
            ))
            .await?;
        if rows.len() != part_count as usize {
            // The version row promises parts the ledger does not hold.
            return Err(PortError::new(FailureBucket::Internal, "parts_missing"));
        }
        rows.sort_by_key(|r| r.n);
        Ok(rows.into_iter().map(|r| r.text).collect())
    }
}
