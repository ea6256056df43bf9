//! Backfills: their records, pages, items and progress counts, the batch
//! that starts one (with the generation a `config` backfill builds) and the
//! one that cancels it (with that generation), and the end-of-pass checks.
//!
//! May import: `ports`, `bugs`, `store::sql`.

use super::{json_array, sql, Store};
use crate::core::state::BackfillState;
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::Deserialize;

/// A backfill (`backfills`).
#[derive(Debug, Clone, Deserialize)]
pub struct BackfillRow {
    pub backfill_id: String,
    pub scope: String,
    pub filter: Option<String>,
    /// The one tenant whose documents it covers (`None`: every tenant).
    pub tenant_id: Option<String>,
    pub from_generation: Option<u32>,
    pub to_generation: Option<u32>,
    pub state: BackfillState,
    pub cursor: String,
    pub passes: u32,
    /// What the current pass could not build (migration 0031): 0 at its
    /// end lets scope `config` switch.
    pub pass_missing: u64,
    /// Its items (one per document per pass).
    pub enqueued: u64,
    /// Its items whose job ended failed or dead.
    pub failed: u64,
    /// The live documents in scope: at the start, then as the last pass
    /// walked them.
    pub total: u64,
    pub page_size: u32,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A live document of a backfill's next page.
#[derive(Debug, Clone, Deserialize)]
pub struct PageDoc {
    pub doc_id: String,
    pub version: u32,
}

/// A row of [`sql::BACKFILL_PAGE`]: a document the page walked, and what
/// it needs (1 a job, 2 none it can have now, 0 nothing: the last walked).
#[derive(Debug, Clone, Deserialize)]
struct PageRow {
    doc_id: String,
    version: u32,
    need: u8,
    scoped: u64,
}

/// A backfill's next page: the documents that need a job, how many lack
/// their vectors and cannot have one now, and the key the walk reached
/// (`None`: the pass walked every document).
#[derive(Debug, Clone, Default)]
pub struct BackfillPage {
    pub docs: Vec<PageDoc>,
    /// The documents walked that lack their vectors and cannot be built
    /// now (`pass_missing`).
    pub missing: u64,
    /// The documents walked that are in scope.
    pub scoped: u64,
    pub walked_to: Option<String>,
}

/// What a page's batch records with the cursor it moves.
pub struct PageCounts<'a> {
    /// The cursor the page started from, and the one it moves to.
    pub from: &'a str,
    pub to: &'a str,
    pub missing: u64,
    pub enqueued: u64,
    pub scoped: u64,
}

/// A backfill's items by outcome.
#[derive(Debug, Clone)]
pub struct BackfillCounts {
    pub enqueued: u64,
    pub pending: u64,
    pub failed: u64,
}

/// What a switch to a generation waits for (`GENERATION_IN_FLIGHT`).
#[derive(Debug, Clone, Deserialize)]
pub struct InFlight {
    pub unstaged: u64,
    pub building: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct CountRow {
    n: u64,
}

/// A new backfill, and for scope `config` the generation it builds.
pub struct NewBackfill<'a> {
    pub backfill_id: &'a str,
    pub scope: &'a str,
    pub filter: Option<&'a str>,
    pub tenant_id: Option<&'a str>,
    pub page_size: u32,
    /// `(index config, generation number, active generation)`.
    pub generation: Option<(&'a str, u32, u32)>,
    /// The live documents in scope (`backfill_total`).
    pub total: u64,
}

/// Cron's cursor over the documents whose rows of retiring generations
/// become intents (`retire_generation_rows`).
const RETIRE_CURSOR: &str = "retire_docs";

/// One page of [`sql::RETIRE_DOCS_PAGE`].
#[derive(Debug, Deserialize)]
struct RetirePage {
    retiring: u64,
    from_key: String,
    last: Option<String>,
    documents: u64,
}

impl<D: Database> Store<D> {
    pub async fn backfill(&self, id: &str) -> Result<Option<BackfillRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::BACKFILL_GET, vec![id.into()]))
            .await?
            .into_iter()
            .next())
    }

    /// The running backfill, if any.
    pub async fn backfill_running(&self) -> Result<Option<BackfillRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::BACKFILL_RUNNING, vec![]))
            .await?
            .into_iter()
            .next())
    }

    /// The newest `limit` backfills (of `tenant_id`'s documents, or of
    /// every tenant's, when given).
    pub async fn backfills(
        &self,
        limit: usize,
        tenant_id: Option<&str>,
    ) -> Result<Vec<BackfillRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::BACKFILLS_LIST,
                vec![SqlValue::Int(limit as i64), tenant_id.into()],
            ))
            .await
    }

    /// Records a backfill (and its generation, `building`) in one batch; the
    /// statements refuse when a backfill is open or the generation number is
    /// taken. `split`: the seeded bug `GenerationBeforeBackfill` (two calls).
    /// Returns whether the backfill was recorded.
    pub async fn backfill_start(
        &self,
        new: &NewBackfill<'_>,
        now: i64,
        split: bool,
    ) -> Result<bool, PortError> {
        let mut stmts = Vec::new();
        let (mut from, mut to, mut config) = (None, None, None);
        if let Some((index_config, generation, active)) = new.generation {
            stmts.push(Stmt::new(
                sql::GENERATION_CREATE,
                vec![
                    index_config.into(),
                    SqlValue::Int(now),
                    generation.into(),
                    active.into(),
                ],
            ));
            (from, to, config) = (Some(active), Some(generation), Some(index_config));
        }
        stmts.push(Stmt::new(
            sql::BACKFILL_INSERT,
            vec![
                new.backfill_id.into(),
                new.scope.into(),
                new.filter.into(),
                from.into(),
                to.into(),
                new.page_size.into(),
                SqlValue::Int(now),
                config.into(),
                new.tenant_id.into(),
                SqlValue::Int(i64::try_from(new.total).unwrap_or(i64::MAX)),
            ],
        ));
        let inserted = if split {
            let mut last = 0;
            for stmt in stmts {
                last = self.db.execute(stmt).await?;
            }
            last
        } else {
            self.db.batch(stmts).await?.last().copied().unwrap_or(0)
        };
        Ok(inserted > 0)
    }

    /// Moves backfill `id` from one of `from` to `to`; a cancel abandons the
    /// generation it builds in the same batch. `split`: the seeded bug
    /// `CancelInTwoSteps`. Returns whether the state changed.
    pub async fn backfill_set_state(
        &self,
        id: &str,
        from: &[BackfillState],
        to: BackfillState,
        abandon_generation: Option<u32>,
        now: i64,
        split: bool,
    ) -> Result<bool, PortError> {
        let mut stmts = vec![Stmt::new(
            sql::BACKFILL_SET_STATE,
            vec![
                id.into(),
                to.as_str().into(),
                SqlValue::Int(now),
                json_array(from).into(),
            ],
        )];
        if let Some(g) = abandon_generation {
            stmts.push(Stmt::new(
                sql::GENERATION_ABANDON,
                vec![g.into(), SqlValue::Int(now), id.into()],
            ));
        }
        let changed = if split {
            let mut changed = Vec::new();
            for stmt in stmts {
                changed.push(self.db.execute(stmt).await?);
                if changed.first() == Some(&0) {
                    break;
                }
            }
            changed
        } else {
            self.db.batch(stmts).await?
        };
        Ok(changed.first().copied().unwrap_or(0) > 0)
    }

    /// Live documents a backfill with `filter` (of `tenant_id`) covers.
    pub async fn backfill_total(
        &self,
        filter: Option<&str>,
        tenant_id: Option<&str>,
    ) -> Result<u64, PortError> {
        let rows: Vec<CountRow> = self
            .db
            .query(Stmt::new(
                sql::BACKFILL_TOTAL,
                vec![filter.into(), tenant_id.into()],
            ))
            .await?;
        Ok(rows.first().map_or(0, |r| r.n))
    }

    /// The next page after the backfill's cursor, walking at most `walk`
    /// documents.
    pub async fn backfill_page(
        &self,
        b: &BackfillRow,
        walk: u32,
    ) -> Result<BackfillPage, PortError> {
        let rows: Vec<PageRow> = self
            .db
            .query(Stmt::new(
                sql::BACKFILL_PAGE,
                vec![
                    b.cursor.as_str().into(),
                    b.filter.clone().into(),
                    b.to_generation.into(),
                    b.page_size.into(),
                    b.tenant_id.clone().into(),
                    walk.into(),
                ],
            ))
            .await?;
        let walked_to = rows.last().map(|r| r.doc_id.clone());
        let scoped = rows.last().map_or(0, |r| r.scoped);
        let missing = rows.iter().filter(|r| r.need == 2).count() as u64;
        let docs = rows
            .into_iter()
            .filter(|r| r.need == 1)
            .map(|r| PageDoc {
                doc_id: r.doc_id,
                version: r.version,
            })
            .collect();
        Ok(BackfillPage {
            docs,
            missing,
            scoped,
            walked_to,
        })
    }

    /// The backfill's jobs still in flight.
    pub async fn backfill_pending(&self, id: &str) -> Result<u64, PortError> {
        let rows: Vec<CountRow> = self
            .db
            .query(Stmt::new(sql::BACKFILL_PENDING, vec![id.into()]))
            .await?;
        Ok(rows.first().map_or(0, |r| r.n))
    }

    /// A page of build jobs for generation `g` (`jobs`: JSON `[{job, doc,
    /// version}]`), their items and the cursor with the page's counts, in
    /// one batch.
    pub async fn backfill_build_page(
        &self,
        id: &str,
        passes: u32,
        g: u32,
        jobs: &str,
        counts: &PageCounts<'_>,
        now: i64,
    ) -> Result<(), PortError> {
        self.db
            .batch(vec![
                Stmt::new(
                    sql::BUILD_JOBS_INSERT,
                    vec![SqlValue::Int(now), g.into(), jobs.into()],
                ),
                Stmt::new(
                    sql::BACKFILL_ITEMS_INSERT,
                    vec![id.into(), passes.into(), jobs.into(), counts.from.into()],
                ),
                cursor_stmt(id, counts, now),
            ])
            .await
            .map(|_| ())
    }

    /// A page of re-runs' items (JSON `[{doc, job}]`) and the cursor with
    /// the page's counts, in one batch.
    pub async fn backfill_rerun_page(
        &self,
        id: &str,
        passes: u32,
        items: &str,
        counts: &PageCounts<'_>,
        now: i64,
    ) -> Result<(), PortError> {
        self.db
            .batch(vec![
                Stmt::new(
                    sql::BACKFILL_ITEMS_INSERT,
                    vec![id.into(), passes.into(), items.into(), counts.from.into()],
                ),
                cursor_stmt(id, counts, now),
            ])
            .await
            .map(|_| ())
    }

    pub async fn backfill_complete(&self, id: &str, now: i64) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::BACKFILL_COMPLETE,
                vec![id.into(), SqlValue::Int(now)],
            ))
            .await
            .map(|_| ())
    }

    /// Another pass after pass `passes` ended.
    pub async fn backfill_next_pass(
        &self,
        id: &str,
        passes: u32,
        now: i64,
    ) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::BACKFILL_NEXT_PASS,
                vec![id.into(), SqlValue::Int(now), passes.into()],
            ))
            .await
            .map(|_| ())
    }

    /// What a switch to generation `g` waits for.
    pub async fn generation_in_flight(&self, g: u32) -> Result<InFlight, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::GENERATION_IN_FLIGHT, vec![g.into()]))
            .await?
            .into_iter()
            .next()
            .unwrap_or(InFlight {
                unstaged: 1,
                building: 0,
            }))
    }

    /// Up to `limit` rows of retiring and abandoned generations, of a page
    /// of at most `limit` documents from cron's cursor on, become intents,
    /// and generations with none left are retired: one call when none is
    /// retiring, two otherwise (the page; the batch). The cursor moves
    /// past the page when the batch takes every row left in it (else the
    /// next pass reads it again, its intents skipped), and back to the
    /// first document after the last page; a row a job still writes waits
    /// for the next round. Returns the rows made intents, and whether the
    /// round has more pages.
    pub async fn retire_generation_rows(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<(u64, bool), PortError> {
        let max = SqlValue::Int(limit as i64);
        let page: Option<RetirePage> = self
            .db
            .query(Stmt::new(
                sql::RETIRE_DOCS_PAGE,
                vec![RETIRE_CURSOR.into(), max.clone()],
            ))
            .await?
            .into_iter()
            .next();
        let Some(page) = page.filter(|p| p.retiring > 0) else {
            return Ok((0, false));
        };
        let last = page.last.clone().unwrap_or_else(|| page.from_key.clone());
        let range = |head: Vec<SqlValue>| {
            let mut params = head;
            params.extend([
                max.clone(),
                page.from_key.as_str().into(),
                last.as_str().into(),
            ]);
            params
        };
        let mut cursor = range(vec![RETIRE_CURSOR.into()]);
        cursor.push(SqlValue::Int(page.documents as i64));
        let changes = self
            .db
            .batch(vec![
                Stmt::new(sql::RETIRE_CURSOR_MOVE, cursor),
                Stmt::new(sql::RETIRE_INTENTS, range(vec![SqlValue::Int(now)])),
                Stmt::new(sql::GENERATIONS_RETIRED, vec![SqlValue::Int(now)]),
            ])
            .await?;
        let n = changes.get(1).copied().unwrap_or(0);
        Ok((n, n >= limit as u64 || page.documents >= limit as u64))
    }
}

/// `BACKFILL_CURSOR` for a page of backfill `id`.
fn cursor_stmt(id: &str, c: &PageCounts<'_>, now: i64) -> Stmt {
    let n = |v: u64| SqlValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
    Stmt::new(
        sql::BACKFILL_CURSOR,
        vec![
            id.into(),
            c.to.into(),
            SqlValue::Int(now),
            n(c.missing),
            n(c.enqueued),
            n(c.scoped),
            c.from.into(),
        ],
    )
}
