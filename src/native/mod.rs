//! Native adapters (not compiled to wasm): the ledger on real SQLite
//! (rusqlite, bundled, foreign keys on, the same `migrations/`), and
//! in-memory fakes of the index, queue and clock with fault injection, and
//! counting wrappers of the embedder and the index. Used by the tests, the
//! simulation and the benchmarks, through three rooms:
//!
//! - [`oracle`]: every query that inspects the ledger to check an invariant
//!   or an outcome;
//! - [`sim`]: the deterministic simulation;
//! - [`testkit`]: the harness of the tests, the simulation and the bench.
//!
//! This file may import the crate's ports, core failure buckets, the
//! adapters' filter and the seeded bugs' namespace; the rooms import this
//! file, never the other way round (but [`SqliteDb::dump`], which is the
//! oracle's).

pub mod cluster;
pub mod heap;
pub mod oracle;
pub mod rows;
pub mod sim;
pub mod testkit;

use crate::core::failure::FailureBucket;
use crate::ports::{
    rows_from_json, Clock, Database, JobMessage, JobQueue, MetadataFilter, PortError, Rows,
    SqlValue, Stmt, VectorIndex, VectorMatch, VectorRecord,
};
use rusqlite::types::{Value as SqliteValue, ValueRef};
use serde::de::DeserializeOwned;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};

/// The ledger's migrations, in order, as `wrangler d1 migrations` applies them.
/// `tests/it/sql.rs` checks this list against the `migrations/` folder.
pub const LEDGER_MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_init.sql",
        include_str!("../../migrations/0001_init.sql"),
    ),
    (
        "0002_index_config.sql",
        include_str!("../../migrations/0002_index_config.sql"),
    ),
    (
        "0003_dead_letters_and_repair.sql",
        include_str!("../../migrations/0003_dead_letters_and_repair.sql"),
    ),
    (
        "0004_repair_cursor.sql",
        include_str!("../../migrations/0004_repair_cursor.sql"),
    ),
    (
        "0005_invocation_budget.sql",
        include_str!("../../migrations/0005_invocation_budget.sql"),
    ),
    (
        "0006_generations_and_backfills.sql",
        include_str!("../../migrations/0006_generations_and_backfills.sql"),
    ),
    (
        "0007_retry_window.sql",
        include_str!("../../migrations/0007_retry_window.sql"),
    ),
    (
        "0008_failure_runs.sql",
        include_str!("../../migrations/0008_failure_runs.sql"),
    ),
    (
        "0009_tenants.sql",
        include_str!("../../migrations/0009_tenants.sql"),
    ),
    (
        "0010_keyword_index.sql",
        include_str!("../../migrations/0010_keyword_index.sql"),
    ),
    (
        "0011_content_vector_ids.sql",
        include_str!("../../migrations/0011_content_vector_ids.sql"),
    ),
    (
        "0012_syncs.sql",
        include_str!("../../migrations/0012_syncs.sql"),
    ),
    (
        "0013_sync_plain_writes.sql",
        include_str!("../../migrations/0013_sync_plain_writes.sql"),
    ),
    (
        "0014_lease_owner.sql",
        include_str!("../../migrations/0014_lease_owner.sql"),
    ),
    (
        "0015_creation_times.sql",
        include_str!("../../migrations/0015_creation_times.sql"),
    ),
    (
        "0016_syncs_by_tenant.sql",
        include_str!("../../migrations/0016_syncs_by_tenant.sql"),
    ),
    (
        "0017_d1_rows.sql",
        include_str!("../../migrations/0017_d1_rows.sql"),
    ),
    (
        "0018_retention.sql",
        include_str!("../../migrations/0018_retention.sql"),
    ),
    (
        "0019_shared_chunk_rows.sql",
        include_str!("../../migrations/0019_shared_chunk_rows.sql"),
    ),
    (
        "0020_keyword_index_without_copy.sql",
        include_str!("../../migrations/0020_keyword_index_without_copy.sql"),
    ),
    (
        "0021_keyword_index_per_tenant.sql",
        include_str!("../../migrations/0021_keyword_index_per_tenant.sql"),
    ),
    (
        "0022_shared_text_parts.sql",
        include_str!("../../migrations/0022_shared_text_parts.sql"),
    ),
    (
        "0023_cleanup_intents_without_rowid.sql",
        include_str!("../../migrations/0023_cleanup_intents_without_rowid.sql"),
    ),
    (
        "0024_generation_row_counts.sql",
        include_str!("../../migrations/0024_generation_row_counts.sql"),
    ),
    (
        "0025_dead_letters_by_last_seen.sql",
        include_str!("../../migrations/0025_dead_letters_by_last_seen.sql"),
    ),
    (
        "0026_document_counts.sql",
        include_str!("../../migrations/0026_document_counts.sql"),
    ),
    (
        "0027_jobs_due_for_retry.sql",
        include_str!("../../migrations/0027_jobs_due_for_retry.sql"),
    ),
    (
        "0028_dead_letter_groups.sql",
        include_str!("../../migrations/0028_dead_letter_groups.sql"),
    ),
    (
        "0029_repair_runs_by_id.sql",
        include_str!("../../migrations/0029_repair_runs_by_id.sql"),
    ),
    (
        "0030_jobs_by_state_with_tenant.sql",
        include_str!("../../migrations/0030_jobs_by_state_with_tenant.sql"),
    ),
    (
        "0031_switch_by_pass.sql",
        include_str!("../../migrations/0031_switch_by_pass.sql"),
    ),
    (
        "0032_shard_directory.sql",
        include_str!("../../migrations/0032_shard_directory.sql"),
    ),
    (
        "0033_tenant_moves.sql",
        include_str!("../../migrations/0033_tenant_moves.sql"),
    ),
];

/// The local index's migrations (`migrations-local-index/`).
pub const LOCAL_INDEX_MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_local_index.sql",
        include_str!("../../migrations-local-index/0001_local_index.sql"),
    ),
    (
        "0002_namespaces.sql",
        include_str!("../../migrations-local-index/0002_namespaces.sql"),
    ),
    (
        "0003_compact_vectors.sql",
        include_str!("../../migrations-local-index/0003_compact_vectors.sql"),
    ),
];

/// A [`Database`] on SQLite, with D1's semantics: foreign keys on, `batch`
/// atomic, statements counted (to measure and bound D1 usage).
pub struct SqliteDb {
    /// Taken in `Drop`: closed, or rolled back into the pool.
    conn: std::mem::ManuallyDrop<RefCell<rusqlite::Connection>>,
    /// The pool's key of a pooled ledger ([`SqliteDb::pooled_ledger`]).
    pooled: Option<String>,
    /// Statements run (a `batch` counts each of its statements).
    pub statements: Cell<u64>,
    /// Calls made (a `batch` is one call: one subrequest on D1).
    pub calls: Cell<u64>,
    /// Every distinct SQL text run, to prove each statement was exercised.
    pub executed: RefCell<std::collections::BTreeSet<&'static str>>,
    /// Fails (before any effect) the next call that runs this SQL text.
    pub fail_sql: RefCell<Option<(&'static str, FailureBucket)>>,
    /// The rows its statements read and wrote, as D1 counts them.
    rows: rows::RowCounter,
}

fn map_err(e: &rusqlite::Error) -> PortError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => {
            PortError::new(FailureBucket::DbRejected, "db_constraint")
        }
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            PortError::new(FailureBucket::DbBusy, "db_busy")
        }
        _ => PortError::new(FailureBucket::DbRejected, "db_error"),
    }
}

/// A bound value as D1 binds it: a Worker passes every number as a JS
/// number, which D1 binds as REAL (a column of INTEGER affinity stores a
/// whole one as an integer; an expression keeps it REAL, so `?1 / ?2` is a
/// fraction). Reads turn a whole REAL into an integer, as JS would show it.
fn to_sqlite(v: &SqlValue) -> SqliteValue {
    match v {
        SqlValue::Null => SqliteValue::Null,
        SqlValue::Int(i) => {
            assert!(
                i.unsigned_abs() <= 1 << 53,
                "integer beyond D1's exact range"
            );
            SqliteValue::Real(*i as f64)
        }
        SqlValue::Real(f) => SqliteValue::Real(*f),
        SqlValue::Text(s) => SqliteValue::Text(s.clone()),
    }
}

/// The native log sink: each line to stderr when `INGEST_LOG` is set.
fn stderr_sink(line: &str) {
    if std::env::var_os("INGEST_LOG").is_some() {
        eprintln!("{line}");
    }
}

/// Installs the native log sink ([`crate::log::set_sink`]); idempotent.
pub fn install_log_sink() {
    crate::log::set_sink(stderr_sink);
}

thread_local! {
    /// Per thread, per list of migrations: a database they were applied to.
    static TEMPLATES: RefCell<std::collections::HashMap<String, rusqlite::Connection>> =
        RefCell::new(Default::default());
    /// Per thread, per list of migrations: connections of dropped pooled
    /// ledgers ([`SqliteDb::pooled_ledger`]), rolled back to the template's
    /// state, their prepared statements kept.
    static POOL: RefCell<std::collections::HashMap<String, Vec<rusqlite::Connection>>> =
        RefCell::new(Default::default());
}

/// A new in-memory database with `migrations` applied, set up as every
/// native ledger is.
fn fresh_connection(migrations: &[(&str, &str)]) -> rusqlite::Connection {
    // Every native pipeline (tests, simulation, bench) runs on a ledger
    // opened here: its log lines go to stderr, as the Worker's go to the
    // console.
    install_log_sink();
    no_memory_statistics();
    let mut conn = rusqlite::Connection::open_in_memory().expect("sqlite opens");
    // Applying a dozen migrations is most of what a short simulated run
    // costs, so each thread applies them once, to a template, and every
    // ledger starts as a page-for-page copy of it (SQLite's backup API):
    // the same schema and rows, so the same state, as applying them.
    TEMPLATES.with(|templates| {
        let mut templates = templates.borrow_mut();
        let template = templates
            .entry(migrations_key(migrations))
            .or_insert_with(|| {
                let t = rusqlite::Connection::open_in_memory().expect("sqlite opens");
                t.execute_batch("PRAGMA foreign_keys = ON;")
                    .expect("pragma");
                for (_, sql) in migrations {
                    t.execute_batch(sql).expect("migration applies");
                }
                t
            });
        rusqlite::backup::Backup::new(template, &mut conn)
            .and_then(|b| b.step(-1))
            .expect("the template copies");
    });
    conn.execute_batch("PRAGMA foreign_keys = ON;")
        .expect("pragma");
    // The query planner's stability guarantee: a cached statement keeps
    // its plan whatever values are bound. Without it SQLite re-prepares
    // a statement on nearly every run (a bound value compared with a
    // partial index's condition, or a `LIMIT ?`), which was most of the
    // simulation's time. Results are the same; only plans are fixed.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .expect("the planner's stability guarantee");
    // A pooled connection serves every flow of the simulation, each with
    // statements of its own (the store has over 250): room for them all.
    conn.set_prepared_statement_cache_capacity(1024);
    conn
}

impl Drop for SqliteDb {
    fn drop(&mut self) {
        // SAFETY: `conn` is taken once, here, and never used after.
        let conn = unsafe { std::mem::ManuallyDrop::take(&mut self.conn) }.into_inner();
        // The counter's callbacks point into `self.rows`, dropped next.
        rows::RowCounter::detach(&conn);
        let Some(key) = self.pooled.take() else {
            return;
        };
        // Back to the template's state, or not back to the pool (a run
        // that ended its transaction itself).
        if conn.execute_batch("ROLLBACK").is_ok() && conn.is_autocommit() {
            POOL.with(|p| p.borrow_mut().entry(key).or_default().push(conn));
        }
    }
}

/// The key of a list of migrations in [`TEMPLATES`] and [`POOL`].
fn migrations_key(migrations: &[(&str, &str)]) -> String {
    migrations
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join("\n")
}

impl SqliteDb {
    /// A fresh in-memory database with `migrations` applied.
    pub fn open(migrations: &[(&str, &str)]) -> SqliteDb {
        SqliteDb::wrap(fresh_connection(migrations), None)
    }

    /// A ledger for one simulated run: like [`SqliteDb::ledger`], but on a
    /// connection of this thread's pool, inside a transaction that is
    /// rolled back when the ledger is dropped. The next run then starts
    /// from the template's state with every statement already prepared:
    /// preparing them again (and the triggers they fire) on a new
    /// connection was two fifths of a short run's time. Not for the bench:
    /// a run inside one long transaction journals differently.
    pub fn pooled_ledger() -> SqliteDb {
        let key = migrations_key(LEDGER_MIGRATIONS);
        let conn = POOL
            .with(|p| p.borrow_mut().get_mut(&key).and_then(Vec::pop))
            .unwrap_or_else(|| fresh_connection(LEDGER_MIGRATIONS));
        conn.execute_batch("BEGIN")
            .expect("the run's transaction begins");
        SqliteDb::wrap(conn, Some(key))
    }

    fn wrap(conn: rusqlite::Connection, pooled: Option<String>) -> SqliteDb {
        let rows = rows::RowCounter::install(&conn);
        SqliteDb {
            rows,
            conn: std::mem::ManuallyDrop::new(RefCell::new(conn)),
            pooled,
            statements: Cell::new(0),
            calls: Cell::new(0),
            executed: RefCell::new(Default::default()),
            fail_sql: RefCell::new(None),
        }
    }

    pub fn ledger() -> SqliteDb {
        SqliteDb::open(LEDGER_MIGRATIONS)
    }

    pub fn local_index() -> SqliteDb {
        SqliteDb::open(LOCAL_INDEX_MIGRATIONS)
    }

    /// Rows inserted, updated or deleted since the database was opened
    /// (SQLite's `total_changes`, triggers included): while it stays the
    /// same, so does every row.
    pub fn total_changes(&self) -> u64 {
        self.conn.borrow().total_changes()
    }

    fn run_query(
        conn: &rusqlite::Connection,
        stmt: &Stmt,
    ) -> Result<Vec<serde_json::Value>, rusqlite::Error> {
        let mut prepared = conn.prepare_cached(stmt.sql)?;
        let names: Vec<String> = prepared
            .column_names()
            .into_iter()
            .map(String::from)
            .collect();
        let params: Vec<SqliteValue> = stmt.params.iter().map(to_sqlite).collect();
        let mut rows = prepared.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut obj = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let v = match row.get_ref(i)? {
                    ValueRef::Null => serde_json::Value::Null,
                    ValueRef::Integer(n) => serde_json::Value::from(n),
                    ValueRef::Real(f) if f.fract() == 0.0 && f.abs() <= (1u64 << 53) as f64 => {
                        serde_json::Value::from(f as i64)
                    }
                    ValueRef::Real(f) => serde_json::Value::from(f),
                    ValueRef::Text(t) => {
                        serde_json::Value::String(String::from_utf8_lossy(t).into_owned())
                    }
                    ValueRef::Blob(_) => panic!("the ledger stores no BLOBs"),
                };
                obj.insert(name.clone(), v);
            }
            out.push(serde_json::Value::Object(obj));
        }
        Ok(out)
    }

    /// Runs a write; returns its changes as D1 counts them (`meta.changes`):
    /// every row the statement wrote, those its triggers wrote included
    /// (the keyword index's, and FTS5's own tables'), which SQLite's
    /// per-statement count leaves out. So a count that a trigger inflates
    /// on D1 is inflated here too.
    fn run_execute(conn: &rusqlite::Connection, stmt: &Stmt) -> Result<u64, rusqlite::Error> {
        let params: Vec<SqliteValue> = stmt.params.iter().map(to_sqlite).collect();
        let before = conn.total_changes();
        conn.prepare_cached(stmt.sql)?
            .execute(rusqlite::params_from_iter(params))?;
        Ok(conn.total_changes().saturating_sub(before))
    }

    /// Every row of every table, in a canonical order, as text
    /// ([`oracle::dump`]): two ledgers with equal dumps hold the same state.
    /// Columns named in `ignore` (timestamps, attempt counters) are left out.
    pub fn dump(&self, ignore: &[&str]) -> String {
        oracle::dump(self, ignore)
    }
}

impl SqliteDb {
    /// Counts a call, records its SQL, and applies an injected failure.
    fn enter(&self, stmts: &[&Stmt]) -> Result<(), PortError> {
        self.calls.set(self.calls.get() + 1);
        self.statements
            .set(self.statements.get() + stmts.len() as u64);
        let mut executed = self.executed.borrow_mut();
        for s in stmts {
            executed.insert(s.sql);
        }
        let mut fail = self.fail_sql.borrow_mut();
        if let Some((sql, bucket)) = *fail {
            if stmts.iter().any(|s| s.sql == sql) {
                *fail = None;
                return Err(PortError::new(bucket, "injected"));
            }
        }
        Ok(())
    }
}

impl SqliteDb {
    /// Rows read and written so far by this ledger's statements, as D1
    /// counts them ([`rows`]).
    pub fn rows(&self) -> Rows {
        self.rows.now()
    }
}

impl Database for SqliteDb {
    /// Runs the probe, then answers pages times page size, as SQLite
    /// counts its file.
    async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
        self.query_billed::<serde_json::Value>(probe).await?;
        let conn = self.conn.borrow();
        let pragma = |name: &str| -> Result<i64, PortError> {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .map_err(|e| map_err(&e))
        };
        Ok((pragma("page_count")? * pragma("page_size")?) as u64)
    }
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        self.enter(&[&stmt])?;
        let before = self.rows.now();
        let conn = self.conn.borrow();
        // A RETURNING statement writes: keep it atomic like D1 does.
        let rows = Self::run_query(&conn, &stmt).map_err(|e| map_err(&e))?;
        Ok((
            rows_from_json(rows)?,
            rows::between(before, self.rows.now()),
        ))
    }

    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        self.enter(&[&stmt])?;
        let before = self.rows.now();
        let n = Self::run_execute(&self.conn.borrow(), &stmt).map_err(|e| map_err(&e))?;
        Ok((n, rows::between(before, self.rows.now())))
    }

    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        self.enter(&stmts.iter().collect::<Vec<_>>())?;
        let before = self.rows.now();
        let mut conn = self.conn.borrow_mut();
        // A savepoint, not BEGIN: a pooled ledger runs inside a transaction
        // of its own; outside one a savepoint begins one, as BEGIN does.
        let tx = conn.savepoint().map_err(|e| map_err(&e))?;
        let mut changes = Vec::with_capacity(stmts.len());
        for s in &stmts {
            let n = if s.sql.contains("RETURNING") {
                Self::run_query(&tx, s).map(|r| r.len() as u64)
            } else {
                Self::run_execute(&tx, s)
            };

            // Dropping `tx` without commit rolls back: all or nothing, like D1.
            changes.push(n.map_err(|e| map_err(&e))?);
        }
        tx.commit().map_err(|e| map_err(&e))?;
        Ok((changes, rows::between(before, self.rows.now())))
    }
}

/// Faults a fake can be told to inject on its next calls.
#[derive(Default)]
pub struct Faults {
    /// The fate of the next calls, in order: `Some` fails, `None` succeeds.
    queue: RefCell<VecDeque<Option<PortError>>>,
}

impl Faults {
    /// The next `n` calls fail with `bucket`.
    pub fn fail_next(&self, n: usize, bucket: FailureBucket) {
        let mut q = self.queue.borrow_mut();
        for _ in 0..n {
            q.push_back(Some(PortError::new(bucket, "injected")));
        }
    }

    /// The `n`-th next call fails with `bucket` (the ones before succeed).
    pub fn fail_nth(&self, n: usize, bucket: FailureBucket) {
        let mut q = self.queue.borrow_mut();
        for _ in 1..n {
            q.push_back(None);
        }
        q.push_back(Some(PortError::new(bucket, "injected")));
    }

    fn take(&self) -> Result<(), PortError> {
        match self.queue.borrow_mut().pop_front() {
            Some(Some(e)) => Err(e),
            Some(None) | None => Ok(()),
        }
    }
}

/// Whether a query in `namespace` searches every namespace: only the
/// seeded bug `SearchUnfenced` asks for that ([`crate::bugs::EVERY_NAMESPACE`]).
fn every_namespace(namespace: &str) -> bool {
    namespace == crate::bugs::EVERY_NAMESPACE
}

/// An in-memory vector index as strict as Vectorize on limits, immediately
/// consistent, with call counters and fault injection.
pub struct MemIndex {
    pub vectors: RefCell<BTreeMap<String, VectorRecord>>,
    pub dimensions: usize,
    pub upsert_batch_max: usize,
    pub delete_batch_max: usize,
    pub upsert_calls: Cell<u64>,
    pub delete_calls: Cell<u64>,
    pub upsert_faults: Faults,
    pub query_faults: Faults,
    /// What `refusal()` answers: an index known to refuse every call.
    pub refused: Cell<Option<PortError>>,
    pub delete_faults: Faults,
    /// Every vector ID ever upserted, in order (to check side-effect order).
    pub log: RefCell<Vec<String>>,
}

impl MemIndex {
    pub fn new(dimensions: usize) -> MemIndex {
        MemIndex {
            vectors: RefCell::new(BTreeMap::new()),
            dimensions,
            upsert_batch_max: 1000,
            delete_batch_max: 100,
            upsert_calls: Cell::new(0),
            delete_calls: Cell::new(0),
            upsert_faults: Faults::default(),
            query_faults: Faults::default(),
            refused: Cell::new(None),
            delete_faults: Faults::default(),
            log: RefCell::new(Vec::new()),
        }
    }

    pub fn ids(&self) -> Vec<String> {
        self.vectors.borrow().keys().cloned().collect()
    }

    /// Every vector's ID and the namespace it was written into.
    pub fn namespaces(&self) -> Vec<(String, String)> {
        self.vectors
            .borrow()
            .values()
            .map(|v| (v.id.clone(), v.namespace.clone()))
            .collect()
    }

    /// Upserts and deletes so far, one per vector ID ([`MemIndex::log`]'s
    /// length): while it stays the same, so does every vector.
    pub fn writes(&self) -> usize {
        self.log.borrow().len()
    }
}

impl VectorIndex for MemIndex {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        self.upsert_calls.set(self.upsert_calls.get() + 1);
        self.upsert_faults.take()?;
        if vectors.len() > self.upsert_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "upsert_batch_too_large",
            ));
        }
        if vectors
            .iter()
            .any(|v| v.id.len() > 64 || v.values.len() != self.dimensions)
        {
            return Err(PortError::new(FailureBucket::IndexRejected, "vector_shape"));
        }
        let mut map = self.vectors.borrow_mut();
        for v in vectors {
            self.log.borrow_mut().push(format!("upsert {}", v.id));
            map.insert(v.id.clone(), v.clone());
        }
        Ok(())
    }

    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        self.delete_calls.set(self.delete_calls.get() + 1);
        self.delete_faults.take()?;
        if ids.len() > self.delete_batch_max {
            return Err(PortError::new(
                FailureBucket::IndexRejected,
                "delete_batch_too_large",
            ));
        }
        let mut map = self.vectors.borrow_mut();
        for id in ids {
            self.log.borrow_mut().push(format!("delete {id}"));
            map.remove(id);
        }
        Ok(())
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        self.query_faults.take()?;
        let map = self.vectors.borrow();
        let mut out: Vec<VectorMatch> = map
            .values()
            .filter(|v| v.namespace == namespace || every_namespace(namespace))
            .filter(|v| crate::adapters::filter_matches(&v.metadata, filter))
            .map(|v| VectorMatch {
                id: v.id.clone(),
                score: crate::core::local_embed::cosine(vector, &v.values),
            })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        out.truncate(top_k);
        Ok(out)
    }

    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        let map = self.vectors.borrow();
        Ok(ids.iter().filter_map(|id| map.get(id).cloned()).collect())
    }
    fn refusal(&self) -> Option<PortError> {
        self.refused.get()
    }
}

/// An in-memory queue: what was sent, in order, for the test to deliver.
#[derive(Default)]
pub struct MemQueue {
    pub sent: RefCell<VecDeque<JobMessage>>,
    /// What was sent to the dead-letter queue.
    pub dead: RefCell<VecDeque<JobMessage>>,
    pub faults: Faults,
    pub dead_faults: Faults,
    pub send_calls: Cell<u64>,
}

impl MemQueue {
    pub fn take_all(&self) -> Vec<JobMessage> {
        self.sent.borrow_mut().drain(..).collect()
    }
}

impl JobQueue for MemQueue {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        self.send_calls.set(self.send_calls.get() + 1);
        self.faults.take()?;
        if messages.len() > 100 {
            return Err(PortError::new(
                FailureBucket::QueueUnavailable,
                "send_batch_too_large",
            ));
        }
        self.sent.borrow_mut().extend(messages.iter().cloned());
        Ok(())
    }
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        self.send_calls.set(self.send_calls.get() + 1);
        self.dead_faults.take()?;
        self.dead.borrow_mut().push_back(message.clone());
        Ok(())
    }
}

/// A clock the test moves by hand.
pub struct ManualClock(pub Cell<i64>);

impl ManualClock {
    pub fn new(start_ms: i64) -> ManualClock {
        ManualClock(Cell::new(start_ms))
    }

    pub fn advance_ms(&self, ms: i64) {
        self.0.set(self.0.get() + ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.get()
    }
}
// ------------------------------------------------------------------ counting wrappers

use crate::core::index_config::EmbedModel;
use crate::ports::Embedder;

/// An [`Embedder`] that counts what reaches the one it wraps: calls, and
/// texts (each text is one embedding computed). For tests and benchmarks.
pub struct CountingEmbedder<E> {
    pub inner: E,
    pub calls: Cell<u64>,
    pub texts: Cell<u64>,
}

impl<E> CountingEmbedder<E> {
    pub fn new(inner: E) -> CountingEmbedder<E> {
        CountingEmbedder {
            inner,
            calls: Cell::new(0),
            texts: Cell::new(0),
        }
    }
}

impl<E: Embedder> Embedder for CountingEmbedder<E> {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        self.calls.set(self.calls.get() + 1);
        self.texts.set(self.texts.get() + texts.len() as u64);
        self.inner.embed(model, texts).await
    }
    fn refusal(&self) -> Option<PortError> {
        self.inner.refusal()
    }
}

/// A [`VectorIndex`] that counts every call to the one it wraps, and the
/// vectors and IDs they carried. For tests and benchmarks.
pub struct CountingIndex<V> {
    pub inner: V,
    pub upsert_calls: Cell<u64>,
    pub vectors_written: Cell<u64>,
    pub delete_calls: Cell<u64>,
    pub ids_deleted: Cell<u64>,
    pub get_calls: Cell<u64>,
    pub ids_got: Cell<u64>,
    pub query_calls: Cell<u64>,
}

impl<V> CountingIndex<V> {
    pub fn new(inner: V) -> CountingIndex<V> {
        CountingIndex {
            inner,
            upsert_calls: Cell::new(0),
            vectors_written: Cell::new(0),
            delete_calls: Cell::new(0),
            ids_deleted: Cell::new(0),
            get_calls: Cell::new(0),
            ids_got: Cell::new(0),
            query_calls: Cell::new(0),
        }
    }
}

impl<V: VectorIndex> VectorIndex for CountingIndex<V> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        self.upsert_calls.set(self.upsert_calls.get() + 1);
        self.vectors_written
            .set(self.vectors_written.get() + vectors.len() as u64);
        self.inner.upsert(vectors).await
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        self.delete_calls.set(self.delete_calls.get() + 1);
        self.ids_deleted
            .set(self.ids_deleted.get() + ids.len() as u64);
        self.inner.delete_by_ids(ids).await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        self.query_calls.set(self.query_calls.get() + 1);
        self.inner.query(vector, top_k, namespace, filter).await
    }
    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        self.get_calls.set(self.get_calls.get() + 1);
        self.ids_got.set(self.ids_got.get() + ids.len() as u64);
        self.inner.get_by_ids(ids).await
    }
    fn refusal(&self) -> Option<PortError> {
        self.inner.refusal()
    }
}

/// Turns SQLite's memory statistics off, once, before the first
/// connection: with them on, every allocation of every connection takes
/// one process-wide mutex, and the simulation's threads (each on ledgers
/// of its own) spent their time waiting on it (two threads ran its crash
/// points barely faster than one). Nothing here reads those statistics.
fn no_memory_statistics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config before sqlite3_initialize, with the one
        // int argument SQLITE_CONFIG_MEMSTATUS takes. If SQLite is already
        // initialised (a connection opened elsewhere first) it answers
        // SQLITE_MISUSE and changes nothing: the statistics then stay on.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}
