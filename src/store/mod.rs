//! Typed access to the ledger: each function builds statements from
//! [`sql`] and runs them through the [`Database`] port.

pub mod sql;

use crate::core::failure::FailureBucket;
use crate::pipeline::bugs::{self, Bug, Bugs};
use crate::pipeline::UsageSnapshot;
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

/// Splits serializable rows into JSON arrays of at most `bytes_max` bytes
/// each (one `json_each` parameter apiece). A single row larger than the
/// limit travels alone.
pub fn json_pages<T: Serialize>(rows: &[T], bytes_max: usize) -> Vec<String> {
    let mut pages = Vec::new();
    let mut cur = String::from("[");
    for row in rows {
        let item = serde_json::to_string(row).expect("rows serialize");
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

#[derive(Debug, Clone, Deserialize)]
pub struct LatestVersionRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub content_hash: String,
    pub is_delete: i64,
    /// The latest version's job ended `failed` or `dead` (and it is not live).
    pub latest_failed: i64,
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
    pub job_state: Option<String>,
    pub job_step: Option<String>,
    pub job_chunks_done: Option<u32>,
    pub last_failure_bucket: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct JobViewRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: String,
    pub state: String,
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
    pub invocations: u32,
    pub subrequests_d1: u64,
    pub subrequests_embed: u64,
    pub subrequests_index: u64,
    pub subrequests_queue: u64,
    pub subrequests_peak: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConsumeRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub kind: String,
    pub state: String,
    pub attempts: u32,
    pub lease_until: Option<i64>,
    /// When a job `up_for_retry` is due.
    pub next_attempt_at: Option<i64>,
    /// Set for a build job (a backfill writing a live version into this generation).
    pub build_generation: Option<u32>,
    /// That generation's state: a build for one no longer written is stale.
    pub build_generation_state: Option<String>,
    pub content_type: String,
    pub metadata: String,
    pub part_count: u32,
    pub latest_version: u32,
    pub live_version: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LiveChunkRow {
    pub generation: u32,
    pub vector_id: String,
    pub doc_id: String,
    pub version: u32,
    pub chunk_index: u32,
    pub text: String,
    /// The version's metadata (JSON object), to check a filter exactly.
    #[serde(default)]
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StalledJobRow {
    pub job_id: String,
    pub doc_id: String,
    pub version: u32,
    pub attempts: u32,
    pub build_generation: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
struct IndexConfigRow {
    index_config: String,
}

#[derive(Debug, Clone, Deserialize)]
struct VectorIdRow {
    vector_id: String,
}

#[derive(Debug, Clone, Deserialize)]
struct TextRow {
    text: String,
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

/// What one staging batch writes: chunk rows of every target generation,
/// the version's chunk count and configuration (index jobs: of the active
/// generation), and generation 1's first configuration.
pub struct Staging<'a> {
    pub rows: &'a [StagedChunk<'a>],
    /// The version's chunk count and configuration (those of the active
    /// generation; `None` for a build job, whose version is recorded already).
    pub version_chunks: Option<(usize, &'a str)>,
    /// The configuration generation 1 adopts, if it has none yet.
    pub adopt_config: Option<&'a str>,
    /// A build job's generation.
    pub build_generation: Option<u32>,
}

/// A generation (`generations` table).
#[derive(Debug, Clone, Deserialize)]
pub struct GenerationRow {
    pub generation: u32,
    pub index_config: String,
    pub state: String,
}

/// One staged chunk to embed (or reuse) and upsert (`CONSUME_PAGE`).
#[derive(Debug, Clone, Deserialize)]
pub struct PageRow {
    pub generation: u32,
    pub chunk_index: u32,
    pub vector_id: String,
    pub content_hash: String,
    pub text: String,
    /// The live version's vector with the same text, if it can be reused.
    pub reuse_id: Option<String>,
}

fn usage_stmt(job_id: &str, u: &UsageSnapshot) -> Stmt {
    let n = |v: u64| SqlValue::Int(v as i64);
    Stmt::new(
        sql::JOB_ADD_USAGE,
        vec![
            job_id.into(),
            n(u.d1),
            n(u.embed),
            n(u.index),
            n(u.queue),
            n(u.embedded),
            n(u.reused),
            n(u.peak),
        ],
    )
}

/// A staged chunk row, in the compact JSON shape `CONSUME_STAGE_CHUNKS` reads.
#[derive(Debug, Clone, Serialize)]
pub struct StagedChunk<'a> {
    /// The generation the row belongs to.
    pub g: u32,
    pub i: u32,
    pub id: &'a str,
    pub s: usize,
    pub e: usize,
    pub h: &'a str,
    pub t: &'a str,
}

/// The ledger, over any [`Database`].
pub struct Store<D> {
    pub db: D,
    pub json_param_bytes_max: usize,
}

fn int(v: i64) -> SqlValue {
    SqlValue::Int(v)
}

impl<D: Database> Store<D> {
    pub fn new(db: D, json_param_bytes_max: usize) -> Store<D> {
        Store {
            db,
            json_param_bytes_max,
        }
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
    pub async fn claim(
        &self,
        job_id: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Option<ClaimRow>, PortError> {
        let rows: Vec<ClaimRow> = self
            .db
            .query(Stmt::new(
                sql::CONSUME_CLAIM,
                vec![job_id.into(), int(now), int(lease_until)],
            ))
            .await?;
        Ok(rows.into_iter().next())
    }

    /// Up to `limit` staged chunks of a version from chunk `from` on.
    pub async fn consume_page(
        &self,
        doc_id: &str,
        version: u32,
        from: u32,
        limit: usize,
        build_generation: Option<u32>,
    ) -> Result<Vec<PageRow>, PortError> {
        let params = vec![
            doc_id.into(),
            version.into(),
            from.into(),
            int(limit as i64),
            build_generation.into(),
        ];
        self.db.query(Stmt::new(sql::CONSUME_PAGE, params)).await
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
            .batch(vec![
                Stmt::new(
                    sql::CONSUME_CHECKPOINT,
                    vec![job_id.into(), int(now), chunks_done.into()],
                ),
                usage_stmt(job_id, usage),
            ])
            .await
            .map(|_| ())
    }

    pub async fn add_usage(&self, job_id: &str, usage: &UsageSnapshot) -> Result<(), PortError> {
        self.db.execute(usage_stmt(job_id, usage)).await.map(|_| ())
    }

    pub async fn load_text(
        &self,
        doc_id: &str,
        version: u32,
        part_count: u32,
    ) -> Result<String, PortError> {
        let rows: Vec<TextRow> = self
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
        Ok(rows.into_iter().map(|r| r.text).collect())
    }

    /// Stages the chunk rows and the chunk count and moves the job to
    /// `staged`, in one atomic batch. Returns the rows staged (rows of a
    /// generation retired meanwhile are not).
    pub async fn stage_chunks(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        stage: &Staging<'_>,
        now: i64,
    ) -> Result<u32, PortError> {
        let mut stmts: Vec<Stmt> = json_pages(stage.rows, self.json_param_bytes_max)
            .into_iter()
            .map(|page| {
                Stmt::new(
                    sql::CONSUME_STAGE_CHUNKS,
                    vec![doc_id.into(), version.into(), page.into()],
                )
            })
            .collect();
        let pages = stmts.len();
        if let Some((count, index_config)) = stage.version_chunks {
            stmts.push(Stmt::new(
                sql::CONSUME_SET_CHUNK_COUNT,
                vec![
                    doc_id.into(),
                    version.into(),
                    SqlValue::Int(count as i64),
                    index_config.into(),
                ],
            ));
        }
        if let Some(config) = stage.adopt_config {
            stmts.push(Stmt::new(
                sql::GENERATION_ADOPT,
                vec![config.into(), int(now)],
            ));
        }
        stmts.push(Stmt::new(
            sql::CONSUME_STAGED,
            vec![
                job_id.into(),
                int(now),
                doc_id.into(),
                version.into(),
                stage.build_generation.into(),
            ],
        ));
        let changes = self.db.batch(stmts).await?;
        let staged: u64 = changes.iter().take(pages).sum();
        Ok(u32::try_from(staged).unwrap_or(u32::MAX))
    }

    /// The configuration generation 1 adopts when it has none (see
    /// `GENERATION_ADOPTABLE_CONFIG`); `None`: no live version records one.
    pub async fn adoptable_config(&self) -> Result<Option<String>, PortError> {
        let rows: Vec<IndexConfigRow> = self
            .db
            .query(Stmt::new(sql::GENERATION_ADOPTABLE_CONFIG, vec![]))
            .await?;
        Ok(rows.into_iter().next().map(|r| r.index_config))
    }

    /// The generations an index job writes (active, building, retained).
    pub async fn target_generations(&self) -> Result<Vec<GenerationRow>, PortError> {
        self.db
            .query(Stmt::new(sql::GENERATIONS_TARGET, vec![]))
            .await
    }

    /// The highest generation number (0 if none).
    pub async fn generation_max(&self) -> Result<u32, PortError> {
        let rows: Vec<serde_json::Value> = self
            .db
            .query(Stmt::new(sql::GENERATION_MAX, vec![]))
            .await?;
        Ok(rows
            .first()
            .and_then(|r| r["generation"].as_u64())
            .unwrap_or(0) as u32)
    }

    /// The generation search serves.
    pub async fn active_generation(&self) -> Result<Option<GenerationRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::GENERATION_ACTIVE, vec![]))
            .await?
            .into_iter()
            .next())
    }

    /// A build job's end: the job only (the version is already live).
    pub async fn build_finish(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        now: i64,
        usage: &UsageSnapshot,
    ) -> Result<(), PortError> {
        let finish = vec![doc_id.into(), version.into(), int(now), job_id.into()];
        self.db
            .batch(vec![
                Stmt::new(sql::COMMIT_FINISH_JOB, finish),
                usage_stmt(job_id, usage),
            ])
            .await
            .map(|_| ())
    }

    /// The replace step: intents for the replaced version, the
    /// compare-and-set, intents for a loser, and the job's end, atomically.
    /// Returns whether this version is now live.
    pub async fn commit(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        now: i64,
        usage: &UsageSnapshot,
        bugs: Bugs,
    ) -> Result<bool, PortError> {
        let p = || vec![doc_id.into(), version.into(), int(now)];
        let set_live = if bugs.has(Bug::FlipWithoutCas) {
            bugs::sql::SET_LIVE_UNGUARDED
        } else {
            sql::COMMIT_SET_LIVE
        };
        let mut finish = p();
        finish.push(job_id.into());
        let changes = self
            .db
            .batch(vec![
                Stmt::new(sql::COMMIT_INTENTS_FOR_REPLACED, p()),
                Stmt::new(set_live, p()),
                Stmt::new(sql::COMMIT_INTENTS_FOR_LOSER, p()),
                Stmt::new(sql::COMMIT_FINISH_JOB, finish),
                usage_stmt(job_id, usage),
            ])
            .await?;
        Ok(changes.get(1).copied().unwrap_or(0) > 0)
    }

    pub async fn job_up_for_retry(
        &self,
        job_id: &str,
        bucket: FailureBucket,
        now: i64,
        next_at: i64,
        chunks_done: u32,
        failing_since: i64,
        usage: &UsageSnapshot,
    ) -> Result<(), PortError> {
        let params = vec![
            job_id.into(),
            bucket.as_str().into(),
            int(now),
            int(next_at),
            chunks_done.into(),
            int(failing_since),
        ];
        self.db
            .batch(vec![
                Stmt::new(sql::JOB_UP_FOR_RETRY, params),
                usage_stmt(job_id, usage),
            ])
            .await
            .map(|_| ())
    }

    /// Ends a job `failed` or `dead`, and turns its version's vectors (if it
    /// is not live) into intents, atomically.
    pub async fn job_end_failed(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        bucket: FailureBucket,
        state: &'static str,
        now: i64,
        usage: &UsageSnapshot,
        build_generation: Option<u32>,
    ) -> Result<(), PortError> {
        let mut extra = vec![];
        if let Some(g) = build_generation {
            extra.push(Stmt::new(
                sql::BUILD_INTENTS_FOR_FAILED,
                vec![
                    doc_id.into(),
                    version.into(),
                    int(now),
                    g.into(),
                    job_id.into(),
                ],
            ));
        }
        let mut stmts = vec![
            Stmt::new(
                sql::JOB_END_FAILED,
                vec![
                    job_id.into(),
                    bucket.as_str().into(),
                    int(now),
                    state.into(),
                ],
            ),
            Stmt::new(
                sql::COMMIT_INTENTS_FOR_LOSER,
                vec![doc_id.into(), version.into(), int(now)],
            ),
            usage_stmt(job_id, usage),
        ];
        stmts.extend(extra);
        self.db.batch(stmts).await.map(|_| ())
    }

    pub async fn intents_due_for_doc(
        &self,
        doc_id: &str,
        now: i64,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::INTENTS_DUE_FOR_DOC,
                vec![doc_id.into(), int(now), int(limit as i64)],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    pub async fn intents_due(&self, now: i64, limit: usize) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::INTENTS_DUE,
                vec![int(now), int(limit as i64)],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    /// After the index deleted `ids`: drop their non-live chunk rows and the intents.
    pub async fn intents_done(&self, ids: &[String]) -> Result<(), PortError> {
        let ids = json_array(ids);
        self.db
            .batch(vec![
                Stmt::new(sql::INTENTS_DONE_DELETE_CHUNKS, vec![ids.clone().into()]),
                Stmt::new(sql::INTENTS_DONE_DELETE, vec![ids.into()]),
            ])
            .await
            .map(|_| ())
    }

    pub async fn intents_back_off(&self, ids: &[String], not_before: i64) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::INTENTS_BACK_OFF,
                vec![json_array(ids).into(), int(not_before)],
            ))
            .await
            .map(|_| ())
    }

    pub async fn sweep_abandoned(
        &self,
        now: i64,
        limit: usize,
        bugs: Bugs,
    ) -> Result<u64, PortError> {
        let sweep = if bugs.has(Bug::SweepIgnoresLease) {
            bugs::sql::SWEEP_IGNORING_LEASE
        } else {
            sql::SWEEP_ABANDONED
        };
        self.db
            .execute(Stmt::new(sweep, vec![int(now), int(limit as i64)]))
            .await
    }

    /// `DeleteBeforeReplace` only: the replaced version's intents, ahead of the replace.
    pub async fn bug_intents_for_replaced(
        &self,
        doc_id: &str,
        version: u32,
        now: i64,
    ) -> Result<(), PortError> {
        let stmt = Stmt::new(
            sql::COMMIT_INTENTS_FOR_REPLACED,
            vec![doc_id.into(), version.into(), int(now)],
        );
        self.db.execute(stmt).await.map(|_| ())
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

    /// Ends a stalled job `dead`; its version's vectors (if not live)
    /// become intents, and a build job's rows in its generation too.
    pub async fn job_stalled_dead(&self, job: &StalledJobRow, now: i64) -> Result<(), PortError> {
        let (doc_id, version) = (job.doc_id.as_str(), job.version);
        let mut stmts = vec![
            Stmt::new(
                sql::JOB_STALLED_DEAD,
                vec![job.job_id.as_str().into(), int(now)],
            ),
            Stmt::new(
                sql::COMMIT_INTENTS_FOR_LOSER,
                vec![doc_id.into(), version.into(), int(now)],
            ),
        ];
        if let Some(g) = job.build_generation {
            stmts.push(Stmt::new(
                sql::BUILD_INTENTS_FOR_FAILED,
                vec![
                    doc_id.into(),
                    version.into(),
                    int(now),
                    g.into(),
                    job.job_id.as_str().into(),
                ],
            ));
        }
        self.db.batch(stmts).await.map(|_| ())
    }

    pub async fn live_chunks(
        &self,
        vector_ids: &[String],
        generation: u32,
        bugs: Bugs,
    ) -> Result<Vec<LiveChunkRow>, PortError> {
        let q = if bugs.has(Bug::ServeUnfiltered) {
            bugs::sql::CHUNKS_BY_VECTOR_ID
        } else {
            sql::LIVE_CHUNKS_BY_VECTOR_ID
        };
        self.db
            .query(Stmt::new(
                q,
                vec![json_array(vector_ids).into(), generation.into()],
            ))
            .await
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
        assert!(json_pages::<String>(&[], 300).is_empty());
    }
}
