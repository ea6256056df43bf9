//! Chunk rows: staging, the consumer's pages, the replace (commit) and the
//! live rows search reads.
//!
//! May import: `ports`, `core`, `bugs`, `store::sql`.

use super::usage::finish_stmts;
use super::{int, json_array, json_pages, sql, Store, UsageSnapshot};
use crate::bugs::{self, Bug, Bugs};
use crate::core::failure::FailureBucket;
use crate::core::terms;
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize)]
pub struct LiveChunkRow {
    pub generation: u32,
    pub vector_id: String,
    pub doc_id: String,
    /// The live version (the row may have been written by an earlier one).
    pub version: u32,
    /// The chunk's order key in its document (`core::row_plan`).
    pub ord: f64,
    pub text: String,
    /// The version's metadata (JSON object), to check a filter exactly.
    #[serde(default)]
    pub metadata: Option<String>,
}

/// What one staging batch writes: the new chunk rows of every target
/// generation and the open rows the version does not keep (closed at it),
/// the version's chunk count and configuration (index jobs: of the active
/// generation), and generation 1's first configuration; only if the
/// document's open rows are still those the plan read (`stamp`).
pub struct Staging<'a> {
    pub rows: &'a [StagedChunk<'a>],
    /// The open rows the version does not keep (their chunk IDs).
    pub close: &'a [i64],
    /// How many open rows it keeps: with `rows`, the rows valid at it.
    pub kept: usize,
    /// The document's staging stamp the plan read (`CONSUME_OPEN_ROWS`).
    pub stamp: i64,
    /// Where the new rows stop being valid: `None` (open) but for a build
    /// of a live version that is no longer the latest (valid at it only).
    pub to_version: Option<u32>,
    /// The version's chunk count and configuration (those of the active
    /// generation; `None` for a build job, whose version is recorded already).
    pub version_chunks: Option<(usize, &'a str)>,
    /// The configuration generation 1 adopts, if it has none yet.
    pub adopt_config: Option<&'a str>,
    /// A build job's generation.
    pub build_generation: Option<u32>,
    /// The tenant's key in the keyword index's terms (`core::terms::scoped`).
    pub keyword_key: i64,
    /// Generations still written that this staging leaves out (this
    /// Worker cannot embed for them): recorded in the batch
    /// (`GENERATIONS_SKIPPED`, `BACKFILL_SKIPPED`).
    pub skipped: &'a [u32],
}

/// The tenant's counts a keyword search weighs its terms by (`KEYWORD_STATS`).
#[derive(Debug, Clone, Deserialize)]
struct KeywordStatsRow {
    keyword_key: i64,
    keyword_rows: i64,
    keyword_tokens: i64,
    /// JSON array of `[term, rows holding it]`.
    df: String,
}

/// What one keyword query ranks by: its terms' weights (each `{t, w}`:
/// the scoped term, its idf; none when every term was left out), the
/// tenant's mean row length in terms, and the query's terms left out
/// (`terms::within_matches`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordWeights {
    pub weights: Vec<serde_json::Value>,
    pub avg_len: f64,
    pub skipped: Vec<String>,
}

/// A row written before migration 0021, not in the keyword index yet.
#[derive(Debug, Clone, Deserialize)]
struct UnindexedRow {
    chunk_id: i64,
    text: String,
    keyword_key: i64,
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
    pub ord: f64,
    pub vector_id: String,
    pub content_hash: String,
    pub text: String,
    /// Its place among all the rows valid at the version that the job
    /// writes, from 1, in (generation, order key) order: the checkpoint
    /// after it.
    pub position: u32,
    /// How many rows the version has (those the job writes).
    pub rows_now: u32,
    /// The live version's vector with the same text, if it can be reused.
    pub reuse_id: Option<String>,
}

/// A new chunk row: its generation, order key (`core::row_plan`), vector
/// ID, content hash and text.
#[derive(Debug, Clone)]
pub struct StagedChunk<'a> {
    pub g: u32,
    pub o: f64,
    pub id: &'a str,
    pub h: &'a str,
    pub t: &'a str,
}

/// A new chunk row in the compact JSON shape `CONSUME_STAGE_CHUNKS` reads,
/// with its keyword term count (`n`, `chunks.keyword_len`).
#[derive(Debug, Clone, Serialize)]
struct StagedRow<'a> {
    g: u32,
    o: f64,
    id: &'a str,
    h: &'a str,
    t: &'a str,
    n: u32,
}

/// A new row's keyword entry, in the JSON shape `KEYWORD_STAGE` reads: the
/// row (its vector ID and generation; its document and version are the
/// statement's) and its terms.
#[derive(Debug, Clone, Serialize)]
struct KeywordEntry<'a> {
    id: &'a str,
    g: u32,
    k: String,
}

/// A new row, as `KEYWORD_STAGE_COUNT` finds it (its term count is the row's).
#[derive(Debug, Clone, Serialize)]
struct KeywordCount<'a> {
    id: &'a str,
    g: u32,
}

/// One of a document's open rows (`CONSUME_OPEN_ROWS`); all `None` but
/// the stamp when the document has none.
#[derive(Debug, Clone, Deserialize)]
pub struct OpenRowRow {
    pub chunk_id: Option<i64>,
    pub generation: Option<u32>,
    pub vector_id: Option<String>,
    pub ord: Option<f64>,
    pub rows_stamp: i64,
    pub latest_version: u32,
    /// The tenant's key in the keyword index's terms (`core::terms::scoped`).
    pub keyword_key: Option<i64>,
}

/// A document's open rows, its staging stamp and latest version, read together.
pub struct OpenRows {
    pub stamp: i64,
    pub latest_version: u32,
    pub keyword_key: i64,
    pub rows: Vec<OpenRowRow>,
}

impl<D: Database> Store<D> {
    /// The open rows of `doc_id` (every generation) and its staging stamp.
    pub async fn open_rows(&self, doc_id: &str) -> Result<OpenRows, PortError> {
        let rows: Vec<OpenRowRow> = self
            .db
            .query(Stmt::new(sql::CONSUME_OPEN_ROWS, vec![doc_id.into()]))
            .await?;
        let stamp = rows.first().map(|r| r.rows_stamp).unwrap_or(0);
        let latest_version = rows.first().map(|r| r.latest_version).unwrap_or(0);
        // Every document's tenant has a key (migration 0021, TENANT_INSERT).
        let keyword_key = rows
            .first()
            .and_then(|r| r.keyword_key)
            .ok_or(PortError::new(
                FailureBucket::Internal,
                "keyword_key_missing",
            ))?;
        let rows = rows.into_iter().filter(|r| r.chunk_id.is_some()).collect();
        Ok(OpenRows {
            stamp,
            latest_version,
            keyword_key,
            rows,
        })
    }

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

    /// Stages the version's plan (new rows, closed rows, the intents of
    /// rows nothing can serve any more) and the chunk count and moves the
    /// job to `staged`, in one atomic batch that applies only if the open
    /// rows are still those planned against. Returns the rows valid at the
    /// version (rows of a generation retired meanwhile are not written).
    pub async fn stage_chunks(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        stage: &Staging<'_>,
        now: i64,
        bugs: Bugs,
    ) -> Result<u32, PortError> {
        let is_build = i64::from(stage.build_generation.is_some());
        let mut stmts = vec![
            Stmt::new(
                sql::CONSUME_STAGE_STAMP_GUARD,
                vec![
                    doc_id.into(),
                    int(stage.stamp),
                    version.into(),
                    int(is_build),
                ],
            ),
            Stmt::new(sql::CONSUME_STAGE_STAMP, vec![doc_id.into()]),
        ];
        for page in json_pages(stage.close, self.json_param_bytes_max) {
            stmts.push(Stmt::new(
                sql::CONSUME_STAGE_CLOSE,
                vec![doc_id.into(), version.into(), page.into()],
            ));
        }
        // Each page of new rows, then the keyword entries and the tenant's
        // keyword totals, in pages of their own (each JSON sent once: the
        // terms are larger than the text): after every insert, since an
        // FTS5 write pending in the batch makes SQLite's change count of
        // the next statement count FTS5's own rows too, and the inserts'
        // counts are the rows staged.
        let (keyword, lens) = self.keyword_stage(doc_id, version, stage);
        let rows = stage.rows.iter().zip(lens).map(|(r, n)| StagedRow {
            g: r.g,
            o: r.o,
            id: r.id,
            h: r.h,
            t: r.t,
            n,
        });
        let first_insert = stmts.len();
        for page in json_pages(rows, self.json_param_bytes_max) {
            stmts.push(Stmt::new(
                sql::CONSUME_STAGE_CHUNKS,
                vec![
                    doc_id.into(),
                    version.into(),
                    page.into(),
                    stage.to_version.into(),
                ],
            ));
        }
        let inserts = first_insert..stmts.len();
        stmts.extend(keyword);
        if !bugs.has(Bug::GenerationRowsUncounted) {
            stmts.extend(Self::generation_rows_staged(stage));
        }
        stmts.push(Stmt::new(
            sql::CONSUME_STAGE_DEAD_INTENTS,
            vec![doc_id.into(), version.into(), int(now)],
        ));
        if !stage.skipped.is_empty() {
            let skipped = serde_json::to_string(stage.skipped).unwrap_or_default();
            stmts.push(Stmt::new(
                sql::GENERATIONS_SKIPPED,
                vec![skipped.as_str().into(), int(now)],
            ));
            stmts.push(Stmt::new(sql::BACKFILL_SKIPPED, vec![skipped.into()]));
        }
        stmts.push(Stmt::new(
            sql::CONSUME_STAGE_GUARD,
            vec![doc_id.into(), version.into(), int(now)],
        ));
        stmts.extend(self.staged_marks(job_id, doc_id, version, stage, now));
        let changes = match self.db.batch(stmts).await {
            Ok(changes) => changes,
            Err(e) if e.code == "db_constraint" => {
                return Err(self.staging_refused(doc_id, stage.stamp).await)
            }
            Err(e) => return Err(e),
        };
        let inserted: u64 = changes.get(inserts).map(|c| c.iter().sum()).unwrap_or(0);
        let rows = inserted + stage.kept as u64;
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }

    /// The staging batch's keyword statements for the new rows: their
    /// entries (`KEYWORD_STAGE`), then their tenant's totals
    /// (`KEYWORD_STAGE_COUNT`); and each row's term count. A row's terms
    /// are made as its entry is written into its page, never all held at
    /// once (they are larger than the text).
    fn keyword_stage(
        &self,
        doc_id: &str,
        version: u32,
        stage: &Staging<'_>,
    ) -> (Vec<Stmt>, Vec<u32>) {
        let mut lens = Vec::with_capacity(stage.rows.len());
        let entries = stage.rows.iter().map(|r| {
            let (k, n) = terms::index_document(stage.keyword_key, r.t);
            lens.push(n);
            KeywordEntry {
                id: r.id,
                g: r.g,
                k,
            }
        });
        let max = self.json_param_bytes_max;
        let enter: Vec<String> = json_pages(entries, max);
        let counts = stage.rows.iter().map(|r| KeywordCount { id: r.id, g: r.g });
        let count = json_pages(counts, max);
        let stmts = (enter.into_iter().map(|p| (sql::KEYWORD_STAGE, p)))
            .chain(count.into_iter().map(|p| (sql::KEYWORD_STAGE_COUNT, p)))
            .map(|(q, page)| Stmt::new(q, vec![doc_id.into(), version.into(), page.into()]))
            .collect();
        (stmts, lens)
    }

    /// The staging batch's count of its new rows in their generations
    /// (`GENERATION_ROWS_STAGED`, migration 0024), if it writes any.
    fn generation_rows_staged(stage: &Staging<'_>) -> Option<Stmt> {
        let mut per_generation: std::collections::BTreeMap<u32, u64> = Default::default();
        for r in stage.rows {
            *per_generation.entry(r.g).or_default() += 1;
        }
        if per_generation.is_empty() {
            return None;
        }
        let counts: Vec<(u32, u64)> = per_generation.into_iter().collect();
        let json = json_array(&counts);
        Some(Stmt::new(sql::GENERATION_ROWS_STAGED, vec![json.into()]))
    }

    /// Why a staging batch was refused: its only constraints are its two
    /// guards. Another staging changed the open rows since they were read
    /// (`rows_changed`: the retry plans again), or a drain is deleting one
    /// of its vectors (`vector_delete_in_flight`: the retry stages after
    /// it). Both are `db_busy`, retried.
    async fn staging_refused(&self, doc_id: &str, stamp: i64) -> PortError {
        let now_stamp = self.open_rows(doc_id).await.map(|o| o.stamp).ok();
        let code = if now_stamp == Some(stamp) {
            "vector_delete_in_flight"
        } else {
            "rows_changed"
        };
        PortError::new(FailureBucket::DbBusy, code)
    }

    /// The staging batch's last statements: the version's chunk count and
    /// configuration, generation 1's, and the job's step.
    fn staged_marks(
        &self,
        job_id: &str,
        doc_id: &str,
        version: u32,
        stage: &Staging<'_>,
        now: i64,
    ) -> Vec<Stmt> {
        let mut stmts = Vec::new();
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
        stmts
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
        self.db
            .batch(finish_stmts(job_id, doc_id, version, now, usage).into())
            .await
            .map(|_| ())
    }

    /// The replace step: a tombstone's closing of the open rows, intents
    /// for the vectors of the rows the replaced version holds and this one
    /// does not, the versions it supersedes marked (retention's clock), the
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
        let changes = self
            .db
            .batch(
                vec![
                    Stmt::new(sql::COMMIT_CLOSE_FOR_DELETE, p()),
                    Stmt::new(sql::COMMIT_INTENTS_FOR_REPLACED, p()),
                    Stmt::new(mark, p()),
                    Stmt::new(set_live, p()),
                    Stmt::new(sql::COMMIT_INTENTS_FOR_LOSER, p()),
                ]
                .into_iter()
                .chain(finish_stmts(job_id, doc_id, version, now, usage))
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

    /// What a keyword query of `terms` (`core::terms::query_terms`) ranks
    /// tenant `tenant`'s rows by (`KEYWORD_STATS`: its own counts): each
    /// term it ranks scoped to the tenant with its idf weight, within
    /// `matches_max` rows (`terms::within_matches`: the commonest terms
    /// skipped). None when no row of the tenant holds a term.
    pub async fn keyword_weights(
        &self,
        terms: &[String],
        tenant: &str,
        matches_max: u64,
        bugs: Bugs,
    ) -> Result<Option<KeywordWeights>, PortError> {
        let mut params = vec![json_array(terms).into(), tenant.into()];
        let stats_sql = if bugs.has(Bug::KeywordStatsShared) {
            bugs::sql::KEYWORD_STATS_SHARED
        } else {
            params.push(int(
                matches_max.saturating_add(1).min(i64::MAX as u64) as i64
            ));
            sql::KEYWORD_STATS
        };
        let stats: Vec<KeywordStatsRow> = self.db.query(Stmt::new(stats_sql, params)).await?;
        let Some(stats) = stats.into_iter().next() else {
            return Ok(None);
        };
        let df: Vec<(String, u64)> = serde_json::from_str(&stats.df)
            .map_err(|_| PortError::new(FailureBucket::Internal, "keyword_stats_shape"))?;
        let rows = stats.keyword_rows.max(0) as u64;
        let (kept, skipped) = terms::within_matches(&df, matches_max);
        let weights: Vec<serde_json::Value> = kept
            .iter()
            .map(|(t, n)| {
                serde_json::json!({"t": terms::scoped(stats.keyword_key, t), "w": terms::idf(rows, *n)})
            })
            .collect();
        if weights.is_empty() && skipped.is_empty() {
            return Ok(None);
        }
        Ok(Some(KeywordWeights {
            weights,
            avg_len: stats.keyword_tokens.max(1) as f64 / rows.max(1) as f64,
            skipped,
        }))
    }

    /// The tenant's keyword matches by `weights` (`keyword_weights`), best
    /// bm25 first, at most `limit` (`KEYWORD_CHUNKS`).
    pub async fn keyword_chunks(
        &self,
        weights: &KeywordWeights,
        generation: u32,
        tenant: &str,
        doc_key: Option<&str>,
        limit: usize,
        bugs: Bugs,
    ) -> Result<Vec<KeywordChunkRow>, PortError> {
        if weights.weights.is_empty() {
            return Ok(Vec::new());
        }
        let params = vec![
            serde_json::Value::Array(weights.weights.clone())
                .to_string()
                .into(),
            generation.into(),
            tenant.into(),
            doc_key.into(),
            int(limit as i64),
            SqlValue::Real(terms::BM25_K1),
            SqlValue::Real(terms::BM25_B),
            SqlValue::Real(weights.avg_len),
        ];
        let q = if bugs.has(Bug::KeywordUnfenced) {
            bugs::sql::KEYWORD_CHUNKS_UNFENCED
        } else {
            sql::KEYWORD_CHUNKS
        };
        self.db.query(Stmt::new(q, params)).await
    }

    /// Upgrade (migration 0021): up to `limit` rows written before it enter
    /// the keyword index with their terms, in one batch. Returns how many
    /// were read (fewer than `limit`: none are left).
    pub async fn index_unindexed_rows(&self, limit: usize) -> Result<usize, PortError> {
        let page: Vec<UnindexedRow> = self
            .db
            .query(Stmt::new(
                sql::KEYWORD_UNINDEXED_PAGE,
                vec![int(limit as i64)],
            ))
            .await?;
        if page.is_empty() {
            return Ok(0);
        }
        let entries: Vec<serde_json::Value> = page
            .iter()
            .map(|r| {
                let (k, n) = terms::index_document(r.keyword_key, &r.text);
                serde_json::json!({"id": r.chunk_id, "k": k, "n": n})
            })
            .collect();
        let mut stmts = Vec::new();
        for chunk in json_pages(&entries, self.json_param_bytes_max) {
            for q in [
                sql::KEYWORD_UNINDEXED_COUNT,
                sql::KEYWORD_UNINDEXED_ENTER,
                sql::KEYWORD_UNINDEXED_MARK,
            ] {
                stmts.push(Stmt::new(q, vec![chunk.clone().into()]));
            }
        }
        self.db.batch(stmts).await?;
        Ok(page.len())
    }
}
