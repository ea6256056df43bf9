//! Chunk rows: staging, the consumer's pages, the replace (commit) and the
//! live rows search reads.
//!
//! May import: `ports`, `core`, `bugs`, `store::sql`.

use super::usage::usage_stmts;
use super::{int, json_array, json_pages, sql, Store, UsageSnapshot};
use crate::bugs::{self, Bug, Bugs};
use crate::core::failure::FailureBucket;
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

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

/// A keyword match: a live chunk and its bm25 score (higher is better).
#[derive(Debug, Clone, Deserialize)]
pub struct KeywordChunkRow {
    #[serde(flatten)]
    pub chunk: LiveChunkRow,
    pub score: f64,
}

/// One staged chunk whose vector is to write: embedded (or reused) and
/// upserted (`CONSUME_PAGE`).
#[derive(Debug, Clone, Deserialize)]
pub struct PageRow {
    pub generation: u32,
    pub chunk_index: u32,
    pub vector_id: String,
    pub content_hash: String,
    pub text: String,
    /// Its place among all the version's rows the job writes, from 1, in
    /// (generation, chunk) order: the checkpoint after it.
    pub position: u32,
    /// How many rows the version has (those the job writes).
    pub rows_now: u32,
    /// The live version's vector with the same text, if it can be reused.
    pub reuse_id: Option<String>,
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
    /// The keyword index's text, if not `t` itself (`core::keyword::index_terms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k: Option<String>,
}

impl<D: Database> Store<D> {
    /// Up to `limit` staged chunks of a version after position `from` whose
    /// vector the index does not hold yet.
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
        stmts.push(Stmt::new(
            sql::CONSUME_STAGE_GUARD,
            vec![doc_id.into(), version.into(), int(now)],
        ));
        stmts.push(Stmt::new(
            sql::KEYWORD_STAGE_LIVE,
            vec![doc_id.into(), version.into()],
        ));
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
        let changes = match self.db.batch(stmts).await {
            Ok(changes) => changes,
            // The batch's only constraint is `CONSUME_STAGE_GUARD` (rows are
            // `INSERT OR IGNORE`): a drain was deleting one of these
            // vectors. Stage after it. (Not re-checked here: the drain may
            // have recorded its delete meanwhile.)
            Err(e) if e.code == "db_constraint" => {
                return Err(PortError::new(
                    FailureBucket::DbBusy,
                    "vector_delete_in_flight",
                ));
            }
            Err(e) => return Err(e),
        };
        let staged: u64 = changes.iter().take(pages).sum();
        Ok(u32::try_from(staged).unwrap_or(u32::MAX))
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
            .batch(
                vec![Stmt::new(sql::COMMIT_FINISH_JOB, finish)]
                    .into_iter()
                    .chain(usage_stmts(job_id, usage))
                    .collect(),
            )
            .await
            .map(|_| ())
    }

    /// The replace step: intents for the replaced version's vectors this
    /// one does not keep, its rows whose vectors it keeps dropped, the
    /// versions it supersedes marked (retention's clock), the
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
        let mark = if bugs.has(Bug::SupersedeLive) {
            bugs::sql::MARK_SUPERSEDED_INCLUSIVE
        } else {
            sql::COMMIT_MARK_SUPERSEDED
        };
        let mut finish = p();
        finish.push(job_id.into());
        let changes = self
            .db
            .batch(
                vec![
                    Stmt::new(sql::COMMIT_INTENTS_FOR_REPLACED, p()),
                    Stmt::new(sql::COMMIT_DROP_KEPT_ROWS, p()),
                    Stmt::new(mark, p()),
                    Stmt::new(set_live, p()),
                    Stmt::new(sql::COMMIT_INTENTS_FOR_LOSER, p()),
                    Stmt::new(sql::COMMIT_FINISH_JOB, finish),
                ]
                .into_iter()
                .chain(usage_stmts(job_id, usage))
                .collect(),
            )
            .await?;
        // The compare-and-set's count: the fourth statement.
        Ok(changes.get(3).copied().unwrap_or(0) > 0)
    }

    /// Of `vector_ids`, the chunks live in `generation` and of `tenant`.
    pub async fn live_chunks(
        &self,
        vector_ids: &[String],
        generation: u32,
        tenant: &str,
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
                vec![
                    json_array(vector_ids).into(),
                    generation.into(),
                    tenant.into(),
                ],
            ))
            .await
    }

    /// The keyword index's best matches of `expression` among the live
    /// chunks of `generation` and `tenant` (and of `doc_key`, if given).
    pub async fn keyword_chunks(
        &self,
        expression: &str,
        generation: u32,
        tenant: &str,
        doc_key: Option<&str>,
        limit: usize,
        bugs: Bugs,
    ) -> Result<Vec<KeywordChunkRow>, PortError> {
        let params = vec![
            expression.into(),
            generation.into(),
            tenant.into(),
            doc_key.into(),
            int(limit as i64),
        ];
        let q = if bugs.has(Bug::KeywordUnfenced) {
            bugs::sql::KEYWORD_CHUNKS_UNFENCED
        } else {
            sql::KEYWORD_CHUNKS
        };
        self.db.query(Stmt::new(q, params)).await
    }
}
