//! Moving a tenant between shards (migration 0033): the move's record on
//! shard 0, and the reads and writes of its copy and cleanup on the shards
//! it leaves and reaches. Rows are copied as they are stored (JSON objects
//! of their stored columns), so a copy holds what the original holds.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{int, json_array, json_pages, sql, Store};
use crate::core::state::{MoveState, TenantMoveState, TenantState};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A row of a table as stored: its columns by name.
pub type RawRow = Map<String, Value>;

/// A move as recorded on shard 0.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct MoveRow {
    pub move_id: String,
    pub tenant_id: String,
    pub from_shard: u16,
    pub to_shard: u16,
    pub state: MoveState,
    pub cursor: String,
    pub copied: u64,
    pub recopied: u64,
    pub vectors: u64,
    pub removed: u64,
    pub waiting_for: Option<String>,
    pub created_at: i64,
    pub switched_at: Option<i64>,
    pub updated_at: i64,
}

/// A document as a move reads it: its row, and its mark (what a copy
/// must match, `sql::MOVE_DOCS_PAGE`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct MoveDocRow {
    pub doc_id: String,
    pub latest_version: u32,
    pub live_version: Option<u32>,
    pub repair_needed: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub plain_write_seq: i64,
    pub rows_stamp: i64,
    #[serde(skip_serializing)]
    pub mark: String,
}

/// A row valid at its document's live version, as the shard left holds it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LiveChunk {
    pub doc_id: String,
    pub version: u32,
    pub ord: f64,
    pub vector_id: String,
    pub content_hash: String,
    pub text: String,
}

/// A live row as the copy writes it on the new shard: its ID there (the
/// generation differs) and its keyword terms under the tenant's key there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopiedChunk {
    #[serde(skip)]
    pub doc_id: String,
    pub v: u32,
    pub o: f64,
    pub id: String,
    pub h: String,
    pub t: String,
    /// Terms and their count, for the keyword index (`MOVE_KEYWORD_ENTER`).
    #[serde(skip)]
    pub k: String,
    #[serde(skip)]
    pub n: u32,
}

/// What the shard left holds of a page of documents, as the copy writes it.
#[derive(Clone, Debug, Default)]
pub struct DocsCopy {
    pub docs: Vec<MoveDocRow>,
    pub versions: Vec<RawRow>,
    pub parts: Vec<RawRow>,
    pub jobs: Vec<RawRow>,
    pub letters: Vec<RawRow>,
    pub sources: Vec<RawRow>,
    pub chunks: Vec<CopiedChunk>,
    /// The generation the rows go into on the new shard.
    pub generation: u32,
}

/// A tenant's row as the move carries it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TenantSettingsRow {
    pub state: TenantState,
    pub documents_max: Option<u64>,
    pub bytes_max: Option<u64>,
    pub requests_per_minute_max: Option<u64>,
    pub created_at: i64,
    pub keyword_key: Option<i64>,
    pub move_state: Option<TenantMoveState>,
}

#[derive(Deserialize)]
struct VectorIdRow {
    vector_id: String,
}

fn opt(v: Option<u64>) -> SqlValue {
    v.map_or(SqlValue::Null, |n| int(n as i64))
}

fn move_state(m: Option<TenantMoveState>) -> SqlValue {
    m.map_or(SqlValue::Null, |m| m.as_str().into())
}

impl<D: Database> Store<D> {
    // ------------------------------------------------------------ the record (shard 0)

    /// Records a new move; `false` if the tenant has an open one (the
    /// unique index refused it).
    pub async fn move_insert(&self, m: &MoveRow) -> Result<bool, PortError> {
        let stmt = Stmt::new(
            sql::MOVE_INSERT,
            vec![
                m.move_id.as_str().into(),
                m.tenant_id.as_str().into(),
                int(i64::from(m.from_shard)),
                int(i64::from(m.to_shard)),
                int(m.created_at),
            ],
        );
        match self.db.execute(stmt).await {
            Ok(n) => Ok(n == 1),
            Err(e) if e.code == "db_constraint" => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn move_get(&self, move_id: &str) -> Result<Option<MoveRow>, PortError> {
        self.first(Stmt::new(sql::MOVE_GET, vec![move_id.into()]))
            .await
    }

    /// Moves cron advances, least recently advanced first.
    pub async fn moves_active(&self, limit: usize) -> Result<Vec<MoveRow>, PortError> {
        self.db
            .query(Stmt::new(sql::MOVES_ACTIVE, vec![int(limit as i64)]))
            .await
    }

    /// Moves, newest first.
    pub async fn moves_page(&self, limit: usize) -> Result<Vec<MoveRow>, PortError> {
        self.db
            .query(Stmt::new(sql::MOVES_PAGE, vec![int(limit as i64)]))
            .await
    }

    /// Records a move's progress if it is still in `state`; `false` if it
    /// is not (a pause or cancel came first).
    pub async fn move_progress(
        &self,
        m: &MoveRow,
        added: [u64; 4],
        now: i64,
    ) -> Result<bool, PortError> {
        let [copied, recopied, vectors, removed] = added.map(|n| int(n as i64));
        let stmt = Stmt::new(
            sql::MOVE_PROGRESS,
            vec![
                m.move_id.as_str().into(),
                m.state.as_str().into(),
                m.cursor.as_str().into(),
                copied,
                recopied,
                vectors,
                removed,
                m.waiting_for.clone().into(),
                int(now),
            ],
        );
        Ok(self.db.execute(stmt).await? == 1)
    }

    /// A move from `from` to `to` (its pass starts over); `false` if it
    /// was not in `from`.
    pub async fn move_set_state(
        &self,
        move_id: &str,
        from: MoveState,
        to: MoveState,
        now: i64,
    ) -> Result<bool, PortError> {
        let stmt = Stmt::new(
            sql::MOVE_STATE,
            vec![
                move_id.into(),
                from.as_str().into(),
                to.as_str().into(),
                int(now),
            ],
        );
        Ok(self.db.execute(stmt).await? == 1)
    }

    /// The switch, in one batch: the directory places the tenant on the
    /// move's new shard, a shard it leaves is no longer dedicated to it,
    /// and the move is `switched`. `false`: the move is no longer catching
    /// up (cancelled), and nothing changed.
    pub async fn move_switch(&self, m: &MoveRow, now: i64) -> Result<bool, PortError> {
        let (tenant, from, to) = (
            m.tenant_id.as_str(),
            int(i64::from(m.from_shard)),
            int(i64::from(m.to_shard)),
        );
        let changed = self
            .db
            .batch(vec![
                Stmt::new(
                    sql::MOVE_SWITCH_PLACEMENT,
                    vec![tenant.into(), from.clone(), to, m.move_id.as_str().into()],
                ),
                Stmt::new(sql::MOVE_SWITCH_UNDEDICATE, vec![tenant.into(), from]),
                Stmt::new(
                    sql::MOVE_SWITCHED,
                    vec![m.move_id.as_str().into(), int(now)],
                ),
            ])
            .await?;
        Ok(changed.get(2) == Some(&1))
    }

    /// Retention: up to `limit` moves that ended before `before`.
    pub async fn prune_moves(&self, before: i64, limit: usize) -> Result<u64, PortError> {
        self.db
            .execute(Stmt::new(
                sql::PRUNE_MOVES,
                vec![int(before), int(limit as i64)],
            ))
            .await
    }

    // ------------------------------------------------------------ a tenant's row on either shard

    /// The tenant's row as a move carries it.
    pub async fn move_tenant(
        &self,
        tenant_id: &str,
    ) -> Result<Option<TenantSettingsRow>, PortError> {
        self.first(Stmt::new(sql::MOVE_TENANT_GET, vec![tenant_id.into()]))
            .await
    }

    /// The tenant arrives on this shard, moving in (nothing if it is here).
    pub async fn move_tenant_arrive(
        &self,
        tenant_id: &str,
        t: &TenantSettingsRow,
        now: i64,
    ) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::MOVE_TENANT_ARRIVE,
                vec![
                    tenant_id.into(),
                    t.state.as_str().into(),
                    opt(t.documents_max),
                    opt(t.bytes_max),
                    opt(t.requests_per_minute_max),
                    int(t.created_at),
                    int(now),
                ],
            ))
            .await
            .map(drop)
    }

    /// Its state, quotas and tokens as on the shard it leaves (the end of
    /// the catch-up, while that one is fenced), in one batch.
    pub async fn move_tenant_settle(
        &self,
        tenant_id: &str,
        t: &TenantSettingsRow,
        tokens: &[RawRow],
        now: i64,
    ) -> Result<(), PortError> {
        let mut stmts = vec![
            Stmt::new(
                sql::MOVE_TENANT_SETTINGS,
                vec![
                    tenant_id.into(),
                    t.state.as_str().into(),
                    opt(t.documents_max),
                    opt(t.bytes_max),
                    opt(t.requests_per_minute_max),
                    int(now),
                ],
            ),
            Stmt::new(sql::MOVE_TOKENS_CLEAR, vec![tenant_id.into()]),
        ];
        self.raw_inserts(&mut stmts, sql::MOVE_TOKENS_INSERT, tokens);
        self.db.batch(stmts).await.map(drop)
    }

    /// The tenant's tokens, as stored (hashes included: they move).
    pub async fn move_tokens(&self, tenant_id: &str) -> Result<Vec<RawRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::MOVE_TOKENS_OF,
                vec![json_array(&[tenant_id]).into()],
            ))
            .await
    }

    /// The tenant's move state from `from` to `to`; `false` if it was not `from`.
    pub async fn move_mark(
        &self,
        tenant_id: &str,
        from: Option<TenantMoveState>,
        to: Option<TenantMoveState>,
    ) -> Result<bool, PortError> {
        let stmt = Stmt::new(
            sql::MOVE_MARK,
            vec![tenant_id.into(), move_state(from), move_state(to)],
        );
        Ok(self.db.execute(stmt).await? == 1)
    }

    /// Lifts the tenant's fence on the shard it leaves (a paused move, or
    /// one paused or cancelled as it fenced): it writes again.
    pub async fn move_lift_fence(&self, tenant_id: &str) -> Result<bool, PortError> {
        let (fenced, copying) = (TenantMoveState::Fenced, TenantMoveState::Copying);
        self.move_mark(tenant_id, Some(fenced), Some(copying)).await
    }

    /// A cancelled move's end on the shard the tenant stays on: copying or
    /// fenced, it is no longer moving.
    pub async fn move_stay(&self, tenant_id: &str) -> Result<(), PortError> {
        for was in [TenantMoveState::Copying, TenantMoveState::Fenced] {
            self.move_mark(tenant_id, Some(was), None).await?;
        }
        Ok(())
    }

    /// The fence: `false` while a sync session of the tenant is open or
    /// committing (or it is not `copying`).
    pub async fn move_fence(&self, tenant_id: &str) -> Result<bool, PortError> {
        let stmt = Stmt::new(sql::MOVE_FENCE, vec![tenant_id.into()]);
        Ok(self.db.execute(stmt).await? == 1)
    }

    /// The last of the tenant on this shard once its documents are gone:
    /// its sessions, tokens, letter groups and row (if its move state is
    /// `expect`). `false`: the row was not in that state.
    pub async fn move_tenant_remove(
        &self,
        tenant_id: &str,
        expect: TenantMoveState,
    ) -> Result<bool, PortError> {
        let t = || -> SqlValue { tenant_id.into() };
        let changed = self
            .db
            .batch(vec![
                Stmt::new(sql::MOVE_DELETE_SYNC_SEEN, vec![t()]),
                Stmt::new(sql::MOVE_DELETE_SYNC_DELETES, vec![t()]),
                Stmt::new(sql::MOVE_DELETE_SYNCS, vec![t()]),
                Stmt::new(sql::MOVE_DELETE_TOKENS, vec![t()]),
                Stmt::new(sql::MOVE_DELETE_LETTER_GROUPS, vec![t()]),
                Stmt::new(sql::MOVE_DELETE_TENANT, vec![t(), expect.as_str().into()]),
            ])
            .await?;
        Ok(changed.last() == Some(&1))
    }

    // ------------------------------------------------------------ documents

    /// A page of the tenant's documents after `cursor`, with their marks.
    pub async fn move_docs_page(
        &self,
        tenant_id: &str,
        cursor: &str,
        limit: usize,
    ) -> Result<Vec<MoveDocRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::MOVE_DOCS_PAGE,
                vec![tenant_id.into(), cursor.into(), int(limit as i64)],
            ))
            .await
    }

    /// A page of the tenant's documents after `cursor` here, with the
    /// jobs a copy carried (to be sent): the last document of the page
    /// (`None`: none left) and the jobs (`job_id`, `doc_id`, `version`).
    pub async fn move_carried_jobs(
        &self,
        tenant_id: &str,
        cursor: &str,
        limit: usize,
    ) -> Result<(Option<String>, Vec<(String, String, u32)>), PortError> {
        #[derive(Deserialize)]
        struct Row {
            page_doc: String,
            job_id: Option<String>,
            doc_id: Option<String>,
            version: Option<u32>,
        }
        let rows: Vec<Row> = self
            .db
            .query(Stmt::new(
                sql::MOVE_CARRIED_JOBS,
                vec![tenant_id.into(), cursor.into(), int(limit as i64)],
            ))
            .await?;
        let last = rows.iter().map(|r| r.page_doc.clone()).max();
        let jobs = rows
            .into_iter()
            .filter_map(|r| Some((r.job_id?, r.doc_id?, r.version?)))
            .collect();
        Ok((last, jobs))
    }

    /// Up to `limit` vector IDs of intents of the tenant's documents
    /// (whatever rows are left).
    pub async fn move_tenant_intents(
        &self,
        tenant_id: &str,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::MOVE_TENANT_INTENTS,
                vec![
                    format!("{tenant_id}\u{1f}").into(),
                    format!("{tenant_id}\u{20}").into(),
                    int(limit as i64),
                ],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    /// Deletes the intents of `ids` (their vectors are deleted).
    pub async fn move_delete_intents(&self, ids: &[String]) -> Result<(), PortError> {
        self.db
            .execute(Stmt::new(
                sql::MOVE_DELETE_TENANT_INTENTS,
                vec![json_array(ids).into()],
            ))
            .await
            .map(drop)
    }

    /// The documents `doc_ids` held here, with their marks.
    pub async fn move_docs_by_ids(&self, doc_ids: &[&str]) -> Result<Vec<MoveDocRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::MOVE_DOCS_OF,
                vec![json_array(doc_ids).into()],
            ))
            .await
    }

    /// The rows of `doc_ids` of each table a copy carries, as stored, and
    /// their rows valid at the live version in `generation`.
    pub async fn move_read(
        &self,
        doc_ids: &[&str],
        generation: u32,
    ) -> Result<(DocsCopy, Vec<LiveChunk>), PortError> {
        let keys = json_array(doc_ids);
        let read = |q: &'static str| {
            self.db
                .query::<RawRow>(Stmt::new(q, vec![keys.clone().into()]))
        };
        let copy = DocsCopy {
            versions: read(sql::MOVE_VERSIONS_OF).await?,
            parts: read(sql::MOVE_PARTS_OF).await?,
            jobs: read(sql::MOVE_JOBS_OF).await?,
            letters: read(sql::MOVE_LETTERS_OF).await?,
            sources: read(sql::MOVE_SOURCES_OF).await?,
            ..DocsCopy::default()
        };
        let mut live: Vec<LiveChunk> = self
            .db
            .query(Stmt::new(
                sql::MOVE_LIVE_ROWS_OF,
                vec![keys.into(), generation.into()],
            ))
            .await?;
        // Document order: by document, then order key (finite: core::row_plan).
        live.sort_by(|a, b| a.doc_id.cmp(&b.doc_id).then(a.ord.total_cmp(&b.ord)));
        Ok((copy, live))
    }

    /// Writes a page of documents as `copy` holds them, in one batch,
    /// replacing what an earlier copy of them wrote (`tenant_id` must be
    /// moving in here). Fails with `db_constraint` if it is not, or if a
    /// drain's delete of a vector the rows refer to is in flight.
    pub async fn move_write(
        &self,
        tenant_id: &str,
        copy: &DocsCopy,
        now: i64,
    ) -> Result<(), PortError> {
        let keys: Vec<&str> = copy.docs.iter().map(|d| d.doc_id.as_str()).collect();
        let keys = json_array(&keys);
        let k = || -> SqlValue { keys.clone().into() };
        let t = || -> SqlValue { tenant_id.into() };
        let mut stmts = vec![
            Stmt::new(sql::MOVE_COPY_GUARD, vec![t()]),
            Stmt::new(sql::MOVE_USAGE, vec![t(), k(), int(-1)]),
            Stmt::new(sql::MOVE_OLD_ROWS_INTENTS, vec![k(), int(now)]),
            Stmt::new(sql::MOVE_DELETE_CHUNKS, vec![k()]),
            Stmt::new(sql::MOVE_DELETE_JOBS, vec![k()]),
            Stmt::new(sql::MOVE_DELETE_LETTERS, vec![k()]),
            Stmt::new(sql::MOVE_DELETE_SOURCES, vec![k()]),
        ];
        for page in json_pages(&copy.docs, self.json_param_bytes_max) {
            stmts.push(Stmt::new(sql::MOVE_DOCS_UPSERT, vec![page.into()]));
        }
        stmts.push(Stmt::new(sql::MOVE_DELETE_PARTS, vec![k()]));
        stmts.push(Stmt::new(sql::MOVE_DELETE_VERSIONS, vec![k()]));
        self.raw_inserts(&mut stmts, sql::MOVE_VERSIONS_INSERT, &copy.versions);
        self.raw_inserts(&mut stmts, sql::MOVE_PARTS_INSERT, &copy.parts);
        self.raw_inserts(&mut stmts, sql::MOVE_JOBS_INSERT, &copy.jobs);
        self.raw_inserts(&mut stmts, sql::MOVE_LETTERS_INSERT, &copy.letters);
        self.raw_inserts(&mut stmts, sql::MOVE_SOURCES_INSERT, &copy.sources);
        self.chunk_inserts(&mut stmts, tenant_id, copy);
        for page in json_pages(&copy.docs, self.json_param_bytes_max) {
            stmts.push(Stmt::new(sql::MOVE_DOCS_LIVE, vec![page.into()]));
        }
        stmts.push(Stmt::new(sql::MOVE_USAGE, vec![t(), k(), int(1)]));
        stmts.push(Stmt::new(sql::MOVE_STAGE_GUARD, vec![k(), int(now)]));
        self.db.batch(stmts).await.map(drop)
    }

    /// The copy's chunk rows, per document: the rows, their keyword
    /// entries and marks, then the tenant's keyword totals and the
    /// generation's row count.
    fn chunk_inserts(&self, stmts: &mut Vec<Stmt>, tenant_id: &str, copy: &DocsCopy) {
        let max = self.json_param_bytes_max;
        let g = || int(i64::from(copy.generation));
        let mut start = 0;
        while start < copy.chunks.len() {
            let doc = copy.chunks[start].doc_id.as_str();
            let end = start
                + copy.chunks[start..]
                    .iter()
                    .take_while(|c| c.doc_id == doc)
                    .count();
            let rows = &copy.chunks[start..end];
            for page in json_pages(rows, max) {
                stmts.push(Stmt::new(
                    sql::MOVE_CHUNKS_INSERT,
                    vec![doc.into(), page.into(), g()],
                ));
            }
            let entries = rows
                .iter()
                .map(|c| serde_json::json!({"id": c.id, "k": c.k, "n": c.n}));
            for page in json_pages(entries, max) {
                stmts.push(Stmt::new(
                    sql::MOVE_KEYWORD_ENTER,
                    vec![doc.into(), page.clone().into(), g()],
                ));
                stmts.push(Stmt::new(
                    sql::MOVE_KEYWORD_MARK,
                    vec![doc.into(), page.into(), g()],
                ));
            }
            start = end;
        }
        let tokens: u64 = copy.chunks.iter().map(|c| u64::from(c.n)).sum();
        let rows = copy.chunks.len() as i64;
        stmts.push(Stmt::new(
            sql::MOVE_KEYWORD_COUNT,
            vec![tenant_id.into(), int(rows), int(tokens as i64)],
        ));
        stmts.push(Stmt::new(sql::MOVE_GENERATION_ROWS, vec![g(), int(rows)]));
    }

    /// `rows` as `insert` statements, in pages under the parameter limit.
    fn raw_inserts(&self, stmts: &mut Vec<Stmt>, insert: &'static str, rows: &[RawRow]) {
        for page in json_pages(rows, self.json_param_bytes_max) {
            stmts.push(Stmt::new(insert, vec![page.into()]));
        }
    }

    /// Records the vector IDs a copy is about to upsert as intents, due
    /// at `due` (a crash before its rows leaves them for the drain).
    pub async fn move_pending_vectors(
        &self,
        chunks: &[CopiedChunk],
        now: i64,
        due: i64,
    ) -> Result<(), PortError> {
        let ids = chunks
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "d": c.doc_id, "v": c.v}));
        let stmts: Vec<Stmt> = json_pages(ids, self.json_param_bytes_max)
            .into_iter()
            .map(|page| {
                Stmt::new(
                    sql::MOVE_PENDING_INTENTS,
                    vec![page.into(), int(due), int(now)],
                )
            })
            .collect();
        if stmts.is_empty() {
            return Ok(());
        }
        self.db.batch(stmts).await.map(drop)
    }

    /// The vector IDs the documents' rows and intents name here.
    pub async fn move_vector_ids(&self, doc_ids: &[&str]) -> Result<Vec<String>, PortError> {
        let rows: Vec<VectorIdRow> = self
            .db
            .query(Stmt::new(
                sql::MOVE_VECTOR_IDS_OF,
                vec![json_array(doc_ids).into()],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.vector_id).collect())
    }

    /// Deletes every row of `tenant_id`'s documents `doc_ids` here,
    /// children first, in one batch, their usage first taken off the
    /// tenant's (their vectors are deleted before).
    pub async fn move_delete_docs(
        &self,
        tenant_id: &str,
        doc_ids: &[&str],
    ) -> Result<(), PortError> {
        let keys = json_array(doc_ids);
        let mut stmts = vec![Stmt::new(
            sql::MOVE_USAGE,
            vec![tenant_id.into(), keys.clone().into(), int(-1)],
        )];
        stmts.extend(
            [
                sql::MOVE_DELETE_INTENTS,
                sql::MOVE_DELETE_CHUNKS,
                sql::MOVE_DELETE_JOBS,
                sql::MOVE_DELETE_LETTERS,
                sql::MOVE_DELETE_SOURCES,
                sql::MOVE_DELETE_PARTS,
                sql::MOVE_DELETE_VERSIONS,
                sql::MOVE_DELETE_DOCUMENTS,
            ]
            .into_iter()
            .map(|q| Stmt::new(q, vec![keys.clone().into()])),
        );
        self.db.batch(stmts).await.map(drop)
    }
}
