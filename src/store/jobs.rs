//! Jobs: the consumer's claim, checkpoints, retries and ends, and cron's
//! stalled-job handling.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::usage::usage_stmts;
use super::{int, json_array, sql, Store, UsageSnapshot};
use crate::core::failure::FailureBucket;
use crate::core::state::{GenerationState, JobKind, JobState};
use crate::ports::{Database, PortError, Stmt};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct JobViewRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: JobKind,
    pub state: JobState,
    pub step: String,
    pub attempts: u32,
    pub last_failure_bucket: Option<String>,
    pub lease_until: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub build_generation: Option<u32>,
    pub chunk_count: Option<u32>,
    pub chunks_done: u32,
    pub chunks_embedded: u64,
    pub chunks_reused: u64,
    pub chunks_kept: u64,
    pub invocations: u32,
    pub subrequests_d1: u64,
    pub subrequests_embed: u64,
    pub subrequests_index: u64,
    pub subrequests_queue: u64,
    pub subrequests_peak: u64,
    pub d1_rows_read: u64,
    pub d1_rows_written: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConsumeRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: JobKind,
    pub state: JobState,
    pub attempts: u32,
    pub lease_until: Option<i64>,
    /// When a job `up_for_retry` is due.
    pub next_attempt_at: Option<i64>,
    /// Set for a build job (a backfill writing a live version into this generation).
    pub build_generation: Option<u32>,
    /// That generation's state: a build for one no longer written is stale.
    pub build_generation_state: Option<GenerationState>,
    pub content_type: String,
    pub metadata: String,
    pub part_count: u32,
    /// The version whose parts hold the text (itself, or the one a re-run
    /// copied).
    pub text_version: u32,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    /// The tenant's part in a move on this shard (migration 0033): a job of
    /// a tenant fenced, moved out or moving in is not claimed here.
    #[serde(default)]
    pub move_state: Option<crate::core::state::TenantMoveState>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StalledJobRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub attempts: u32,
    pub build_generation: Option<u32>,
    /// 1: its tenant takes no work on this shard now (a move's fence,
    /// moved away, moving in).
    #[serde(default)]
    pub moving: i64,
}

/// How a failed attempt leaves its job: the failure's bucket, when, and
/// what the invocation used (recorded with the job in the same batch).
#[derive(Clone, Copy)]
pub struct AttemptEnd<'a> {
    pub bucket: FailureBucket,
    pub now: i64,
    pub usage: &'a UsageSnapshot,
}

/// What a claim returns: the attempt number and where the job stands.
#[derive(Debug, Clone, Deserialize)]
pub struct ClaimRow {
    pub attempts: u32,
    pub step: String,
    pub chunks_done: u32,
    /// Chunk rows to write (over every generation staged), set by the staging batch.
    pub rows_total: Option<u32>,
    /// When the job began failing without progress (none: it is not).
    pub failing_since: Option<i64>,
    /// When its last attempt failed transiently.
    pub last_failed_at: Option<i64>,
}

/// One cell of [`sql::JOBS_TIMELINE`]: jobs now in `state` whose last
/// change fell in time bucket `bucket`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TimelineRow {
    pub bucket: i64,
    pub state: JobState,
    pub jobs: u64,
}

impl<D: Database> Store<D> {
    /// Jobs by state and bucket of `bucket_ms` of their last change, in
    /// `[since, until)` (`tenant_id`: one tenant's; `None`: every tenant's).
    pub async fn jobs_timeline(
        &self,
        since: i64,
        until: i64,
        bucket_ms: i64,
        tenant_id: Option<&str>,
    ) -> Result<Vec<TimelineRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::JOBS_TIMELINE,
                vec![
                    since.into(),
                    until.into(),
                    bucket_ms.into(),
                    tenant_id.into(),
                ],
            ))
            .await
    }

    pub async fn job_view(&self, job_id: &str) -> Result<Option<JobViewRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::JOB_VIEW, vec![job_id.into()]))
            .await?
            .into_iter()
            .next())
    }

    pub async fn consume_load(&self, job_id: &str) -> Result<Option<ConsumeRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::CONSUME_LOAD, vec![job_id.into()]))
            .await?
            .into_iter()
            .next())
    }

    /// Returns whether the job was moved to `superseded`.
    pub async fn supersede(&self, job_id: &str, now: i64) -> Result<bool, PortError> {
        Ok(self
            .db
            .execute(Stmt::new(
                sql::CONSUME_SUPERSEDE,
                vec![job_id.into(), int(now)],
            ))
            .await?
            > 0)
    }

    /// Returns the attempt number and checkpoint if this delivery now holds the job.
    /// Claims job `job_id` until `lease_until` for delivery `owner` (its
    /// token, if it has one).
    pub async fn claim(
        &self,
        job_id: &str,
        now: i64,
        lease_until: i64,
        owner: Option<&str>,
    ) -> Result<Option<ClaimRow>, PortError> {
        let rows: Vec<ClaimRow> = self
            .db
            .query(Stmt::new(
                sql::CONSUME_CLAIM,
                vec![job_id.into(), int(now), int(lease_until), owner.into()],
            ))
            .await?;
        Ok(rows.into_iter().next())
    }

    /// The checkpoint and this invocation's usage, atomically.
    pub async fn checkpoint(
        &self,
        job_id: &str,
        now: i64,
        chunks_done: u32,
        usage: &UsageSnapshot,
    ) -> Result<(), PortError> {
        self.db
            .batch(
                vec![Stmt::new(
                    sql::CONSUME_CHECKPOINT,
                    vec![job_id.into(), int(now), chunks_done.into()],
                )]
                .into_iter()
                .chain(usage_stmts(job_id, usage))
                .collect(),
            )
            .await
            .map(|_| ())
    }

    /// The job waits `up_for_retry` until `next_at`, keeping its progress.
    pub async fn job_up_for_retry(
        &self,
        job_id: &str,
        end: &AttemptEnd<'_>,
        next_at: i64,
        chunks_done: u32,
        failing_since: i64,
    ) -> Result<(), PortError> {
        let AttemptEnd { bucket, now, usage } = *end;
        let params = vec![
            job_id.into(),
            bucket.as_str().into(),
            int(now),
            int(next_at),
            chunks_done.into(),
            int(failing_since),
        ];
        self.db
            .batch(
                vec![Stmt::new(sql::JOB_UP_FOR_RETRY, params)]
                    .into_iter()
                    .chain(usage_stmts(job_id, usage))
                    .collect(),
            )
            .await
            .map(|_| ())
    }

    /// Ends a job `failed` or `dead`, and turns its version's vectors (if it
    /// is not live) into intents, atomically.
    /// Ends job `job` `state` if delivery `owner` holds it (any holder
    /// without a token); returns whether it ended it.
    pub async fn job_end_failed(
        &self,
        job: &ConsumeRow,
        state: JobState,
        end: &AttemptEnd<'_>,
        owner: Option<&str>,
    ) -> Result<bool, PortError> {
        let AttemptEnd { bucket, now, usage } = *end;
        let (job_id, doc_id, version) = (job.job_id.as_str(), job.doc_id.as_str(), job.version);
        let build_generation = job.build_generation;
        let end = Stmt::new(
            sql::JOB_END_FAILED,
            vec![
                job_id.into(),
                bucket.as_str().into(),
                int(now),
                state.as_str().into(),
                owner.into(),
            ],
        );
        let mut stmts = vec![end, loser_intents(doc_id, version, now)];
        stmts.extend(usage_stmts(job_id, usage));
        stmts.extend(build_intents(
            job_id,
            doc_id,
            version,
            now,
            build_generation,
        ));
        let changes = self.db.batch(stmts).await?;
        Ok(changes.first().is_some_and(|n| *n > 0))
    }

    pub async fn stalled_jobs(
        &self,
        now: i64,
        stalled_before: i64,
        limit: usize,
    ) -> Result<Vec<StalledJobRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::STALLED_JOBS,
                vec![int(now), int(stalled_before), int(limit as i64)],
            ))
            .await
    }

    pub async fn touch_jobs(&self, job_ids: &[&str], now: i64) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::TOUCH_JOBS,
                vec![json_array(job_ids).into(), int(now)],
            ))
            .await
            .map(|_| ())
    }

    /// Ends a stalled job `dead` with its dead letter (`message_id`), in
    /// one batch; its version's vectors (if not live) become intents, and
    /// a build job's rows in its generation too.
    pub async fn job_stalled_dead(
        &self,
        job: &StalledJobRow,
        message_id: &str,
        now: i64,
    ) -> Result<(), PortError> {
        let (job_id, doc_id, version) = (job.job_id.as_str(), job.doc_id.as_str(), job.version);
        let end = Stmt::new(sql::JOB_STALLED_DEAD, vec![job_id.into(), int(now)]);
        let letter = Stmt::new(
            sql::DEAD_LETTER_ARCHIVE_STALLED,
            vec![job_id.into(), message_id.into(), int(now)],
        );
        let mut stmts = vec![end, letter, loser_intents(doc_id, version, now)];
        stmts.extend(build_intents(
            job_id,
            doc_id,
            version,
            now,
            job.build_generation,
        ));
        self.db.batch(stmts).await.map(|_| ())
    }
}

/// A job that ended without its version going live: the intents that
/// delete whatever it upserted for that version are committed.
fn loser_intents(doc_id: &str, version: u32, now: i64) -> Stmt {
    Stmt::new(
        sql::COMMIT_INTENTS_FOR_LOSER,
        vec![doc_id.into(), version.into(), int(now)],
    )
}

/// A build job of generation `build_generation` that ended failed: the
/// intents for the vectors it wrote into that generation.
fn build_intents(
    job_id: &str,
    doc_id: &str,
    version: u32,
    now: i64,
    build_generation: Option<u32>,
) -> Option<Stmt> {
    build_generation.map(|g| {
        Stmt::new(
            sql::BUILD_INTENTS_FOR_FAILED,
            vec![
                doc_id.into(),
                version.into(),
                int(now),
                g.into(),
                job_id.into(),
            ],
        )
    })
}
