//! What the pipeline shows of its records: documents, jobs, generations,
//! backfills, redrives, repair runs and dead letters. Plain `Serialize`
//! data built from store rows (the constructors are pure); the API renders
//! them as they are.

use super::Pipeline;
use crate::core::ids::{split_key, DocKey, TenantId};
use crate::core::state::{
    BackfillState, GenerationState, JobKind, JobState, RedriveItemState as ItemState, RedriveState,
};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{
    AuditRow, BackfillCounts, BackfillRow, DocumentViewRow, GenerationListRow, ItemRow, JobViewRow,
    LetterRow, RedriveRow, RepairRunRow,
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
        let state = if r.repair_needed != 0 {
            DocumentState::RepairNeeded
        } else if live_is_latest {
            if deleted {
                DocumentState::Deleted
            } else {
                DocumentState::Indexed
            }
        } else {
            let wrote =
                r.job_step.as_deref() == Some("staged") && r.job_chunks_done.unwrap_or(0) > 0;
            match (r.job_state, wrote) {
                (Some(JobState::Running), _) | (Some(JobState::Queued), true) => {
                    DocumentState::Indexing
                }
                (Some(JobState::UpForRetry), true) => DocumentState::PartiallyIndexed,
                (Some(JobState::Failed | JobState::Dead), _) => DocumentState::Failed,
                _ => DocumentState::Queued,
            }
        };
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
}

impl GenerationsView {
    /// `ours`: the running configuration's canonical JSON.
    pub fn new(rows: Vec<GenerationListRow>, ours: &str) -> GenerationsView {
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
    /// Live documents in scope now.
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
    /// `total`: the live documents in the backfill's scope.
    pub fn new(b: &BackfillRow, c: &BackfillCounts, total: u64) -> BackfillView {
        let pending = c.enqueued.saturating_sub(c.done + c.failed);
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
                done: c.done,
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
