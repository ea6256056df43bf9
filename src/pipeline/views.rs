//! What the pipeline shows of its records: documents, jobs, generations,
//! backfills, redrives, repair runs and dead letters. Plain `Serialize`
//! data built from store rows (the constructors are pure); the API renders
//! them as they are.

use super::Pipeline;
use crate::core::ids::{split_key, DocId, DocKey, TenantId};
use crate::core::state::{
    BackfillState, GenerationState, JobKind, JobState, RedriveItemState as ItemState, RedriveState,
};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{
    AuditRow, BackfillCounts, BackfillRow, DocumentCountRow, DocumentStateGroupRow,
    DocumentViewRow, GenerationListRow, ItemRow, JobViewRow, LetterRow, RedriveRow, RepairRunRow,
    RunningDocumentRow, TimelineRow,
};
use serde::Serialize;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentState {
    /// The latest version waits for its job.
    Queued,
    /// The latest version's job is running, or checkpointed between
    /// invocations (a large version spans several).
    Indexing,
    /// The latest version is live.
    Indexed,
    /// The latest version's job wrote some vectors, then failed transiently
    /// and waits for its retry; an older version (if any) is still served.
    PartiallyIndexed,
    /// The reconciler found the live version's vectors missing from the index.
    RepairNeeded,
    /// The latest version's job failed for good (`failed` or `dead`).
    Failed,
    /// The latest version is a tombstone and it is live: nothing is served.
    Deleted,
}

impl DocumentState {
    pub const ALL: [DocumentState; 7] = [
        DocumentState::Queued,
        DocumentState::Indexing,
        DocumentState::Indexed,
        DocumentState::PartiallyIndexed,
        DocumentState::RepairNeeded,
        DocumentState::Failed,
        DocumentState::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DocumentState::Queued => "queued",
            DocumentState::Indexing => "indexing",
            DocumentState::Indexed => "indexed",
            DocumentState::PartiallyIndexed => "partially_indexed",
            DocumentState::RepairNeeded => "repair_needed",
            DocumentState::Failed => "failed",
            DocumentState::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<DocumentState> {
        DocumentState::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// A document's state from its record: the repair flag, whether the live
/// version is the latest (and a tombstone), and the latest version's newest
/// job (its state, and whether it has written vectors). One definition for
/// a single document's view and the operator's counts.
pub fn document_state(
    repair_needed: bool,
    live_is_latest: bool,
    deleted: bool,
    job_state: Option<JobState>,
    wrote: bool,
) -> DocumentState {
    if repair_needed {
        DocumentState::RepairNeeded
    } else if live_is_latest {
        if deleted {
            DocumentState::Deleted
        } else {
            DocumentState::Indexed
        }
    } else {
        match (job_state, wrote) {
            (Some(JobState::Running), _) | (Some(JobState::Queued), true) => {
                DocumentState::Indexing
            }
            (Some(JobState::UpForRetry), true) => DocumentState::PartiallyIndexed,
            (Some(JobState::Failed | JobState::Dead), _) => DocumentState::Failed,
            _ => DocumentState::Queued,
        }
    }
}

/// The operator's count of documents by state, and of those not served as
/// written (neither indexed nor deleted) by their last failure bucket.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DocumentSummary {
    pub tenant_id: Option<String>,
    pub documents: u64,
    pub by_state: std::collections::BTreeMap<&'static str, u64>,
    pub failures: Vec<FailureCount>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureCount {
    pub state: DocumentState,
    pub bucket: String,
    pub documents: u64,
}

impl DocumentSummary {
    /// The summary from the counts the tenants' rows keep (migration
    /// 0026): a key names a state, or a state and a failure bucket (a key
    /// this release does not know, none is written, is left out). The
    /// counts hold a document of a running job as queued; each of
    /// `running` is moved to indexing here.
    pub fn from_counts(
        tenant_id: Option<String>,
        counts: Vec<DocumentCountRow>,
        running: Vec<RunningDocumentRow>,
    ) -> Self {
        let mut by_state: std::collections::BTreeMap<&'static str, i64> =
            DocumentState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
        let mut failures: std::collections::BTreeMap<(&'static str, String), (DocumentState, i64)> =
            std::collections::BTreeMap::new();
        for c in counts {
            let (state, bucket) = match c.key.split_once('/') {
                None => (c.key.as_str(), None),
                Some((state, bucket)) => (state, Some(bucket)),
            };
            let Some(state) = DocumentState::parse(state) else {
                continue;
            };
            match bucket {
                None => *by_state.entry(state.as_str()).or_default() += c.documents,
                Some(b) => {
                    failures
                        .entry((state.as_str(), b.to_string()))
                        .or_insert((state, 0))
                        .1 += c.documents
                }
            }
        }
        for r in running {
            let (queued, indexing) = (DocumentState::Queued, DocumentState::Indexing);
            *by_state.entry(queued.as_str()).or_default() -= 1;
            *by_state.entry(indexing.as_str()).or_default() += 1;
            if let Some(b) = r.bucket {
                failures
                    .entry((queued.as_str(), b.clone()))
                    .or_insert((queued, 0))
                    .1 -= 1;
                failures
                    .entry((indexing.as_str(), b))
                    .or_insert((indexing, 0))
                    .1 += 1;
            }
        }
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        DocumentSummary {
            tenant_id,
            documents: by_state.values().map(|n| count(*n)).sum(),
            by_state: by_state.into_iter().map(|(s, n)| (s, count(n))).collect(),
            // The recount's order: by state name, then bucket.
            failures: failures
                .into_iter()
                .filter(|(_, (_, n))| *n > 0)
                .map(|((_, bucket), (state, n))| FailureCount {
                    state,
                    bucket,
                    documents: count(n),
                })
                .collect(),
        }
    }

    /// The summary recounted from groups of documents (the simulation's
    /// check of [`Self::from_counts`]).
    pub fn from_groups(tenant_id: Option<String>, groups: Vec<DocumentStateGroupRow>) -> Self {
        let mut by_state: std::collections::BTreeMap<&'static str, u64> =
            DocumentState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
        let mut failures: std::collections::BTreeMap<(&'static str, String), (DocumentState, u64)> =
            Default::default();
        let mut documents = 0;
        for g in groups {
            let deleted = g.live_is_delete == Some(1);
            let state = document_state(
                g.repair_needed != 0,
                g.live_is_latest != 0,
                deleted,
                g.job_state,
                g.job_wrote != 0,
            );
            documents += g.documents;
            *by_state.entry(state.as_str()).or_default() += g.documents;
            if let (Some(bucket), false) = (
                g.last_failure_bucket,
                matches!(state, DocumentState::Indexed | DocumentState::Deleted),
            ) {
                failures
                    .entry((state.as_str(), bucket))
                    .or_insert((state, 0))
                    .1 += g.documents;
            }
        }
        DocumentSummary {
            tenant_id,
            documents,
            by_state,
            failures: failures
                .into_iter()
                .map(|((_, bucket), (state, documents))| FailureCount {
                    state,
                    bucket,
                    documents,
                })
                .collect(),
        }
    }
}

/// A document as the operator's listing shows it: its view and its tenant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantDocumentView {
    pub tenant_id: String,
    #[serde(flatten)]
    pub view: DocumentView,
}

/// A page of the operator's document listing. A page scans `limit`
/// documents in key order; with a `state` filter it shows those of them in
/// that state (possibly none), and `next_cursor` continues the scan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DocumentPage {
    pub documents: Vec<TenantDocumentView>,
    pub next_cursor: Option<String>,
}

/// What a tenant's listing of its documents shows (`None`: any).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DocumentFilter {
    /// Documents in this state (of each page's, as the operator's listing).
    pub state: Option<DocumentState>,
    /// Documents of this source (the last source each was written into).
    pub source: Option<String>,
    /// Documents that changed at or after this time (ms since the epoch:
    /// `updated_at`).
    pub updated_since: Option<i64>,
}

/// A page of a tenant's own documents, each as `GET /v1/documents/{id}`
/// shows it, in doc_id order. A page scans `limit` documents (of the
/// source, with a `source` filter); `state` and `updated_since` show those
/// of them that pass (possibly none), and `next_cursor` (the last doc_id
/// scanned; null: the scan reached the end) continues the scan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantDocumentPage {
    pub documents: Vec<DocumentView>,
    pub next_cursor: Option<String>,
}

/// Jobs by their current state, per time bucket of their last change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobTimeline {
    pub since: i64,
    pub until: i64,
    pub bucket_seconds: i64,
    pub buckets: Vec<TimelineBucket>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineBucket {
    pub start: i64,
    pub counts: std::collections::BTreeMap<&'static str, u64>,
}

impl JobTimeline {
    /// Every bucket of `[since, until)`, empty ones included, from the
    /// store's non-empty cells.
    pub fn from_rows(since: i64, until: i64, bucket_seconds: i64, rows: &[TimelineRow]) -> Self {
        let width = bucket_seconds.saturating_mul(1000).max(1);
        let n = until.saturating_sub(since).max(0).saturating_add(width - 1) / width;
        let cells: std::collections::BTreeMap<(i64, JobState), u64> =
            rows.iter().map(|r| ((r.bucket, r.state), r.jobs)).collect();
        let buckets = (0..n)
            .map(|i| TimelineBucket {
                start: since + i * width,
                counts: JobState::ALL
                    .iter()
                    .map(|s| (s.as_str(), cells.get(&(i, *s)).copied().unwrap_or(0)))
                    .collect(),
            })
            .collect();
        JobTimeline {
            since,
            until,
            bucket_seconds,
            buckets,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DocumentView {
    pub doc_id: String,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    pub state: DocumentState,
    pub chunk_count: u32,
    pub deleted: bool,
    pub job_id: Option<String>,
    pub job_state: Option<JobState>,
    pub job_step: Option<String>,
    pub last_failure_bucket: Option<String>,
    /// The chunker and embedding configuration that produced the live
    /// version's vectors (model, pooling, dimensions, chunk sizes).
    pub index_config: Option<serde_json::Value>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl DocumentView {
    pub fn from_row(r: DocumentViewRow) -> DocumentView {
        let live_is_latest = r.live_version == Some(r.latest_version);
        let deleted = r.live_is_delete == Some(1);
        let wrote = r.job_step.as_deref() == Some("staged") && r.job_chunks_done.unwrap_or(0) > 0;
        let state = document_state(
            r.repair_needed != 0,
            live_is_latest,
            deleted,
            r.job_state,
            wrote,
        );
        DocumentView {
            doc_id: split_key(&r.doc_id).1.to_string(),
            latest_version: r.latest_version,
            live_version: r.live_version,
            state,
            chunk_count: if deleted {
                0
            } else {
                r.live_chunk_count.unwrap_or(0)
            },
            deleted,
            job_id: r.job_id,
            job_state: r.job_state,
            job_step: r.job_step,
            last_failure_bucket: r.last_failure_bucket,
            index_config: r
                .live_index_config
                .as_deref()
                .and_then(|c| serde_json::from_str(c).ok()),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    pub async fn document(&self, key: &DocKey) -> Result<Option<DocumentView>, PortError> {
        Ok(self
            .store
            .document_views(&[key.as_str()])
            .await?
            .into_iter()
            .next()
            .map(DocumentView::from_row))
    }

    pub async fn documents(&self, keys: &[DocKey]) -> Result<Vec<DocumentView>, PortError> {
        let keys: Vec<&str> = keys.iter().map(DocKey::as_str).collect();
        Ok(self
            .store
            .document_views(&keys)
            .await?
            .into_iter()
            .map(DocumentView::from_row)
            .collect())
    }

    /// The operator's count of documents by state (`tenant`: one tenant's).
    pub async fn document_summary(
        &self,
        tenant: Option<&TenantId>,
    ) -> Result<DocumentSummary, PortError> {
        let tenant_id = tenant.map(TenantId::as_str);
        let counts = self.store.document_counts(tenant_id).await?;
        let running = self.store.running_documents(tenant_id).await?;
        Ok(DocumentSummary::from_counts(
            tenant_id.map(str::to_string),
            counts,
            running,
        ))
    }

    /// A page of the operator's document listing: `limit` documents after
    /// the key `cursor` scanned, those in `state` (if given) shown.
    pub async fn document_page(
        &self,
        tenant: Option<&TenantId>,
        state: Option<DocumentState>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<DocumentPage, PortError> {
        let keys = self
            .store
            .document_keys_page(tenant.map(TenantId::as_str), cursor, limit)
            .await?;
        let next_cursor = keys.last().filter(|_| keys.len() == limit).cloned();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut rows = self.store.document_views(&refs).await?;
        rows.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
        let documents = rows
            .into_iter()
            .map(|r| {
                let tenant_id = split_key(&r.doc_id).0.to_string();
                TenantDocumentView {
                    tenant_id,
                    view: DocumentView::from_row(r),
                }
            })
            .filter(|d| state.is_none_or(|s| d.view.state == s))
            .collect();
        Ok(DocumentPage {
            documents,
            next_cursor,
        })
    }

    /// A page of `tenant`'s documents: `limit` of them after the doc_id
    /// `cursor` scanned in doc_id order (of `filter.source` only, through
    /// its index), those that pass `filter`'s `updated_since` and `state`
    /// shown. Another tenant's documents are never read: the scan is of
    /// `tenant`'s keys.
    pub async fn tenant_documents(
        &self,
        tenant: &TenantId,
        filter: &DocumentFilter,
        cursor: Option<&DocId>,
        limit: usize,
    ) -> Result<TenantDocumentPage, PortError> {
        let after = cursor.map(|d| DocKey::new(tenant, d));
        let keys = self
            .store
            .tenant_document_keys(
                tenant.as_str(),
                filter.source.as_deref(),
                after.as_ref().map_or("", DocKey::as_str),
                limit,
            )
            .await?;
        let next_cursor = keys
            .last()
            .filter(|_| keys.len() == limit)
            .map(|k| split_key(&k.doc_id).1.to_string());
        let shown: Vec<&str> = keys
            .iter()
            .filter(|k| filter.updated_since.is_none_or(|t| k.updated_at >= t))
            .map(|k| k.doc_id.as_str())
            .collect();
        // A page the filter emptied costs no second read.
        let mut rows = if shown.is_empty() {
            Vec::new()
        } else {
            self.store.document_views(&shown).await?
        };
        rows.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
        let documents = rows
            .into_iter()
            .map(DocumentView::from_row)
            .filter(|d| filter.state.is_none_or(|s| d.state == s))
            .collect();
        Ok(TenantDocumentPage {
            documents,
            next_cursor,
        })
    }

    /// Jobs by state per bucket of `bucket_seconds` of their last change in
    /// `[since, until)` (milliseconds).
    pub async fn job_timeline(
        &self,
        tenant: Option<&TenantId>,
        since: i64,
        until: i64,
        bucket_seconds: i64,
    ) -> Result<JobTimeline, PortError> {
        let rows = self
            .store
            .jobs_timeline(
                since,
                until,
                bucket_seconds.saturating_mul(1000),
                tenant.map(TenantId::as_str),
            )
            .await?;
        Ok(JobTimeline::from_rows(since, until, bucket_seconds, &rows))
    }

    /// Job `job_id`, if it is `tenant`'s (another tenant's reads as absent).
    pub async fn job(&self, tenant: &TenantId, job_id: &str) -> Result<Option<JobView>, PortError> {
        let row = self.store.job_view(job_id).await?;
        Ok(row
            .filter(|r| split_key(&r.doc_id).0 == tenant.as_str())
            .map(|r| JobView::from_row(r, self.cfg.consume_subrequests_max)))
    }
}

/// One job: its state, its progress through the version's chunks, and
/// what it used.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: JobKind,
    /// The generation a backfill's build job writes (null: an index job of
    /// a new version, written in every generation in use).
    pub build_generation: Option<u32>,
    pub state: JobState,
    pub step: String,
    /// Attempts since the job last made progress.
    pub attempts: u32,
    pub last_failure_bucket: Option<String>,
    pub lease_until: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub progress: JobProgress,
    pub usage: JobUsage,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobProgress {
    /// Chunk rows to write, over every generation the job writes (known
    /// once staged).
    pub chunks_total: Option<u32>,
    /// Chunks whose vectors are written (the checkpoint).
    pub chunks_done: u32,
    /// Chunk texts sent to the embedder.
    pub chunks_embedded: u64,
    /// Chunks whose vectors were copied from the live version (the same
    /// text under another vector ID: a repeat, or new metadata), and
    /// written.
    pub chunks_reused: u64,
    /// Chunks unchanged from the live version: their vector (the same ID)
    /// is in the index already, so nothing was embedded, read or written.
    pub chunks_kept: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobUsage {
    /// Queue invocations that claimed the job.
    pub invocations: u32,
    /// Subrequests the recorded invocations made, by kind.
    pub subrequests: Subrequests,
    /// The most any one invocation made, and the budget it ran under.
    pub subrequests_peak_per_invocation: u64,
    pub subrequests_budget_per_invocation: u64,
    /// D1 rows the job's statements read and wrote, as D1 billed them.
    pub d1_rows: D1Rows,
}

/// D1's billing units, as D1 reported them (`meta.rows_read`,
/// `meta.rows_written`), summed over every invocation's statements but
/// the one that records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct D1Rows {
    pub read: u64,
    pub written: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subrequests {
    pub d1: u64,
    pub embed: u64,
    pub index: u64,
    pub queue: u64,
    pub total: u64,
}

impl JobView {
    pub fn from_row(r: JobViewRow, budget: u64) -> JobView {
        // Every field of the row, by name: a column added to the row is a
        // compile error here until the view decides what to show of it.
        let JobViewRow {
            job_id,
            doc_id,
            version,
            kind,
            state,
            step,
            attempts,
            last_failure_bucket,
            lease_until,
            next_attempt_at,
            created_at,
            updated_at,
            build_generation,
            chunk_count,
            chunks_done,
            chunks_embedded,
            chunks_reused,
            chunks_kept,
            invocations,
            subrequests_d1: d1,
            subrequests_embed: embed,
            subrequests_index: index,
            subrequests_queue: queue,
            subrequests_peak,
            d1_rows_read,
            d1_rows_written,
        } = r;
        JobView {
            progress: JobProgress {
                chunks_total: if kind == JobKind::Index {
                    chunk_count
                } else {
                    Some(0)
                },
                chunks_done,
                chunks_embedded,
                chunks_reused,
                chunks_kept,
            },
            usage: JobUsage {
                invocations,
                subrequests: Subrequests {
                    d1,
                    embed,
                    index,
                    queue,
                    total: d1 + embed + index + queue,
                },
                subrequests_peak_per_invocation: subrequests_peak,
                subrequests_budget_per_invocation: budget,
                d1_rows: D1Rows {
                    read: d1_rows_read,
                    written: d1_rows_written,
                },
            },
            job_id,
            doc_id: split_key(&doc_id).1.to_string(),
            version,
            kind,
            build_generation,
            state,
            step,
            attempts,
            last_failure_bucket,
            lease_until,
            next_attempt_at,
            created_at,
            updated_at,
        }
    }
}

/// The index generations: which one is active, the configuration this
/// Worker runs, and every generation with its chunk count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenerationsView {
    /// The active generation (null: none).
    pub active: Option<u64>,
    /// The running configuration (what a `config` backfill would build).
    pub configured: Value,
    /// Each generation's row, its index configuration parsed (generation
    /// 1 before its first staging shows the running configuration).
    pub generations: Vec<GenerationView>,
}

/// One generation: its state, configuration and chunk rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenerationView {
    pub generation: u32,
    pub state: GenerationState,
    pub index_config: Value,
    pub chunks: u64,
    pub created_at: i64,
    pub updated_at: i64,
    /// A `retiring` generation's cleanup still to come (null otherwise).
    pub retire_estimate: Option<RetireEstimate>,
}

/// How long a retire will take: its rows left, the cron runs that clean
/// them up at most `rows_per_run` each (the cleanup passes a run's
/// subrequest budget holds), and those runs at `CRON_INTERVAL_SECONDS`.
/// An estimate: a run's other work and its wall time can make it longer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RetireEstimate {
    pub rows: u64,
    pub rows_per_run: u64,
    pub cron_runs: u64,
    pub seconds: u64,
}

impl RetireEstimate {
    pub fn new(rows: u64, rows_per_run: u64, interval_seconds: u32) -> RetireEstimate {
        let cron_runs = rows.div_ceil(rows_per_run.max(1));
        RetireEstimate {
            rows,
            rows_per_run,
            cron_runs,
            seconds: cron_runs * u64::from(interval_seconds),
        }
    }
}

impl GenerationsView {
    /// `ours`: the running configuration's canonical JSON; `retire`: the
    /// rows one cron run cleans up and the seconds between runs.
    pub fn new(rows: Vec<GenerationListRow>, ours: &str, retire: (u64, u32)) -> GenerationsView {
        let active = rows
            .iter()
            .find(|r| r.state == GenerationState::Active)
            .map(|r| u64::from(r.generation));
        let generations = rows
            .into_iter()
            .map(|r| {
                let raw = if r.index_config.is_empty() {
                    ours
                } else {
                    r.index_config.as_str()
                };
                GenerationView {
                    generation: r.generation,
                    state: r.state,
                    index_config: serde_json::from_str(raw).unwrap_or(Value::Null),
                    chunks: r.chunks,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                    retire_estimate: (r.state == GenerationState::Retiring)
                        .then(|| RetireEstimate::new(r.chunks, retire.0, retire.1)),
                }
            })
            .collect();
        GenerationsView {
            active,
            configured: serde_json::from_str(ours).unwrap_or(Value::Null),
            generations,
        }
    }
}

/// A backfill and its progress. At every moment `enqueued = done + pending
/// + failed` and `remaining = pending + not_enqueued`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackfillView {
    pub backfill_id: String,
    pub scope: String,
    /// Scope `filter`'s metadata filter.
    pub filter: Option<Value>,
    /// The one tenant whose documents it covers (null: every tenant).
    pub tenant_id: Option<String>,
    pub state: BackfillState,
    /// Scope `config`: the generation it builds, and the one active when it started.
    pub generation: Option<GenerationMove>,
    pub cursor: String,
    pub passes: u32,
    pub page_size: u32,
    pub progress: BackfillProgress,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenerationMove {
    pub from: Option<u32>,
    pub to: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackfillProgress {
    /// Live documents in scope: counted at the start, then by each pass's
    /// walk as it ends.
    pub total: u64,
    pub enqueued: u64,
    pub done: u64,
    pub pending: u64,
    pub failed: u64,
    /// In scope, not enqueued yet (0 once the backfill ended).
    pub not_enqueued: u64,
    pub remaining: u64,
}

impl BackfillView {
    /// `total`: the live documents in the backfill's scope (as last counted).
    pub fn new(b: &BackfillRow, c: &BackfillCounts, total: u64) -> BackfillView {
        let pending = c.pending.min(c.enqueued.saturating_sub(c.failed));
        let done = c.enqueued.saturating_sub(pending + c.failed);
        let open = b.state.is_open();
        let not_enqueued = if open {
            total.saturating_sub(c.enqueued)
        } else {
            0
        };
        BackfillView {
            backfill_id: b.backfill_id.clone(),
            scope: b.scope.clone(),
            filter: b
                .filter
                .as_deref()
                .and_then(|f| serde_json::from_str::<Value>(f).ok()),
            tenant_id: b.tenant_id.clone(),
            state: b.state,
            generation: b.to_generation.map(|to| GenerationMove {
                from: b.from_generation,
                to,
            }),
            cursor: b.cursor.clone(),
            passes: b.passes,
            page_size: b.page_size,
            progress: BackfillProgress {
                total,
                enqueued: c.enqueued,
                done,
                pending,
                failed: c.failed,
                not_enqueued,
                remaining: pending + not_enqueued,
            },
            created_at: b.created_at,
            updated_at: b.updated_at,
        }
    }
}

/// A redrive: its state, its items by state, the items and the audit trail.
#[derive(Clone, Debug, Serialize)]
pub struct RedriveView {
    pub redrive_id: String,
    pub plan_id: String,
    pub state: RedriveState,
    pub stop_reason: Option<String>,
    /// The request it runs (a `RedriveRequest`).
    pub params: Value,
    pub counts: RedriveCounts,
    pub items: Vec<ItemRow>,
    pub audit: Vec<AuditRow>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RedriveCounts {
    pub total: usize,
    pub pending: usize,
    pub sent: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl RedriveView {
    pub fn new(r: RedriveRow, items: Vec<ItemRow>, audit: Vec<AuditRow>) -> RedriveView {
        let count = |s: ItemState| items.iter().filter(|i| i.state == s).count();
        let counts = RedriveCounts {
            total: items.len(),
            pending: count(ItemState::Pending),
            sent: count(ItemState::Sent),
            succeeded: count(ItemState::Succeeded),
            failed: count(ItemState::Failed),
            skipped: count(ItemState::Skipped),
        };
        RedriveView {
            params: serde_json::from_str(&r.params).unwrap_or(Value::Null),
            redrive_id: r.redrive_id,
            plan_id: r.plan_id,
            state: r.state,
            stop_reason: r.stop_reason,
            counts,
            items,
            audit,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// One recorded cron run, its report parsed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepairRunView {
    pub run_id: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub budget_hit: bool,
    /// The tenants whose documents or jobs the run repaired, requeued or
    /// ended (the keys of `report.tenants`).
    pub tenants: Vec<String>,
    pub report: Value,
}

impl RepairRunView {
    pub fn from_row(r: RepairRunRow) -> RepairRunView {
        let report: Value = serde_json::from_str(&r.report).unwrap_or(Value::Null);
        let tenants = report["tenants"]
            .as_object()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        RepairRunView {
            tenants,
            run_id: r.run_id,
            started_at: r.started_at,
            finished_at: r.finished_at,
            budget_hit: r.budget_hit != 0,
            report,
        }
    }
}

/// A page of the dead-letter archive, and the cursor of the next one
/// (null: this is the last).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LetterPage {
    pub letters: Vec<LetterRow>,
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_state_names_are_what_the_api_renders() {
        for s in DocumentState::ALL {
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                Value::String(s.as_str().into())
            );
            assert_eq!(DocumentState::parse(s.as_str()), Some(s));
        }
        assert_eq!(DocumentState::parse("done"), None);
    }

    #[test]
    fn a_summary_reads_states_and_failure_keys_from_the_counts() {
        let row = |key: &str, documents| DocumentCountRow {
            key: key.into(),
            documents,
        };
        let s = DocumentSummary::from_counts(
            None,
            vec![
                row("indexed", 5),
                row("failed", 2),
                row("failed/index_rejected", 2),
                row("queued", 2),
                row("queued/embed_unavailable", 1),
                row("archived", 9),
            ],
            vec![RunningDocumentRow {
                bucket: Some("embed_unavailable".into()),
            }],
        );
        assert_eq!(s.documents, 9, "an unknown state is left out");
        assert_eq!(
            (s.by_state["queued"], s.by_state["indexing"]),
            (1, 1),
            "a running job's document, counted as queued, is indexing"
        );
        assert_eq!(s.by_state["indexed"], 5);
        assert_eq!(s.by_state["deleted"], 0);
        assert_eq!(
            s.failures,
            vec![
                FailureCount {
                    state: DocumentState::Failed,
                    bucket: "index_rejected".into(),
                    documents: 2
                },
                FailureCount {
                    state: DocumentState::Indexing,
                    bucket: "embed_unavailable".into(),
                    documents: 1
                }
            ],
            "a failure key counted 0 is left out"
        );
    }

    #[test]
    fn a_timeline_has_every_bucket_and_every_state() {
        let rows = [TimelineRow {
            bucket: 2,
            state: JobState::Failed,
            jobs: 3,
        }];
        let t = JobTimeline::from_rows(0, 3_000, 1, &rows);
        assert_eq!(t.buckets.len(), 3);
        assert_eq!(t.buckets[2].start, 2_000);
        assert_eq!(t.buckets[2].counts["failed"], 3);
        assert_eq!(t.buckets[0].counts.len(), JobState::ALL.len());
        assert!(t.buckets[..2]
            .iter()
            .all(|b| b.counts.values().all(|n| *n == 0)));
    }
}
