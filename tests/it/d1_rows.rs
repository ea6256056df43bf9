//! The native ledger counts rows read and written as D1 bills them
//! (`src/native/rows.rs`), and a job and its tenant show the sums.

use crate::common::{document, World, TEST_ADMIN_TOKEN, TEST_INGEST_TOKEN};
use futures::executor::block_on;
use ingest_pipeline::native::SqliteDb;
use ingest_pipeline::pipeline::IntakeOutcome;
use ingest_pipeline::ports::{Clock, Database, Rows, Stmt};

fn billed(db: &SqliteDb, sql: &'static str) -> Rows {
    block_on(db.execute_billed(Stmt::new(sql, vec![])))
        .expect("runs")
        .1
}

fn read(db: &SqliteDb, sql: &'static str) -> Rows {
    block_on(db.query_billed::<serde_json::Value>(Stmt::new(sql, vec![])))
        .expect("runs")
        .1
}

#[test]
fn d1_rows_count_each_table_row_and_index_entry_written_and_each_row_visited() {
    let db = SqliteDb::ledger();
    let rows = |read, written| Rows { read, written };
    // tenants: its TEXT primary key is an index of its own, and so is its
    // keyword key's (migration 0021).
    assert_eq!(
        billed(
            &db,
            "INSERT INTO tenants (tenant_id, state, created_at, updated_at, keyword_key) VALUES ('t1', 'active', 1, 1, 2)"
        ),
        rows(0, 3),
        "the row and its two keys' entries"
    );
    // An update rewrites the row, and only the indexes of changed columns.
    assert_eq!(
        billed(
            &db,
            "UPDATE tenants SET updated_at = 2 WHERE tenant_id = 't1'"
        ),
        rows(1, 1)
    );
    // documents: its key, documents_by_tenant (on a generated column), and
    // its tenant's row, which counts it as queued (migration 0026's
    // trigger; it reads the tenant's row and looks for the version's jobs).
    assert_eq!(
        billed(
            &db,
            "INSERT INTO documents (doc_id, latest_version, created_at, updated_at) VALUES ('t1\u{1f}a', 1, 1, 1)"
        )
        .written,
        4
    );
    // A change that leaves the document's state as it was writes no count:
    // the tenant's row is written only when the state moves.
    assert_eq!(
        billed(
            &db,
            "UPDATE documents SET latest_version = 1, updated_at = 2 WHERE doc_id = 't1\u{1f}a'"
        )
        .written,
        1
    );
    // A WITHOUT ROWID table is its key: the row, and sync_seen_by_doc.
    assert_eq!(
        billed(
            &db,
            "INSERT INTO sync_seen (sync_id, doc_id) VALUES ('s', 't1\u{1f}a')"
        ),
        rows(0, 2)
    );
    // A row handed to FTS5 is one row; its shadow tables are not counted.
    assert_eq!(
        billed(
            &db,
            "INSERT INTO keyword_index (rowid, terms) VALUES (7, '1zalpha 1zbeta 1zgamma')"
        ),
        rows(0, 1)
    );
    // An entry leaves the contentless index by its rowid alone.
    assert_eq!(
        billed(&db, "DELETE FROM keyword_index WHERE rowid = 7").written,
        1
    );
    // chunks: the row, chunks_by_doc and chunks_by_vector (0024 dropped
    // chunks_by_generation); its two partial indexes only for a row that meets
    // their condition (chunks_closed: closed; chunks_unindexed: not in the
    // keyword index), as SQLite writes no entry for the others.
    // versions: the row and its key; its two partial indexes of migration
    // 0018 (conditions on two columns each) only for a row that meets
    // theirs: none for a version not superseded; one for a superseded
    // version (versions_text_prunable), moved to versions_superseded when
    // its text goes.
    assert_eq!(
        billed(
            &db,
            "INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, created_at)
             VALUES ('t1\u{1f}a', 1, 0, 'h', 'text/plain', '{}', 1, 1, 1)",
        ),
        rows(0, 2)
    );
    assert_eq!(
        billed(
            &db,
            "UPDATE versions SET superseded_at = 5 WHERE version = 1"
        )
        .written,
        2
    );
    assert_eq!(
        billed(&db, "UPDATE versions SET part_count = 0 WHERE version = 1").written,
        2
    );
    assert_eq!(
        billed(
            &db,
            "UPDATE versions SET part_count = 1, superseded_at = NULL WHERE version = 1"
        )
        .written,
        1,
        "a row leaving a partial index writes no entry"
    );
    let chunk = |id: i64, keyword_len: &str| {
        &*Box::leak(
            format!(
            "INSERT INTO chunks (chunk_id, doc_id, version, generation, ord, vector_id, content_hash, text, keyword_len)
             VALUES ({id}, 't1\u{1f}a', 1, 1, {id}, 'v{id}', 'h', 't', {keyword_len})"
            )
            .into_boxed_str(),
        )
    };
    assert_eq!(billed(&db, chunk(1, "3")), rows(0, 3));
    assert_eq!(
        billed(&db, chunk(2, "NULL")),
        rows(0, 4),
        "and chunks_unindexed"
    );
    // Closing a row enters it in chunks_closed; entering the index takes
    // it out of chunks_unindexed (removed: not counted).
    assert_eq!(
        billed(&db, "UPDATE chunks SET to_version = 2 WHERE chunk_id = 1").written,
        2
    );
    assert_eq!(
        billed(&db, "UPDATE chunks SET keyword_len = 1 WHERE chunk_id = 2").written,
        1
    );
    // A deleted row counts itself and what its triggers write: its
    // tenant's keyword totals and its generation's count (0024).
    assert_eq!(
        billed(&db, "DELETE FROM chunks WHERE chunk_id = 1").written,
        3
    );
    billed(&db, "DELETE FROM chunks");
    billed(&db, "DELETE FROM versions");
    // A delete counts the row (index entries removed are not counted).
    assert_eq!(
        billed(&db, "DELETE FROM documents WHERE doc_id = 't1\u{1f}a'"),
        rows(1, 1)
    );
    // Reads: the rows a statement's loops visit.
    assert_eq!(
        read(&db, "SELECT state FROM tenants WHERE tenant_id = 't1'"),
        rows(1, 0)
    );
    // (A bare `count(*)` is one step that D1 bills as every row it
    // counts; the native count sees no loop there: src/native/rows.rs.)
    assert_eq!(
        read(&db, "SELECT tenant_id FROM tenants").read,
        2,
        "every row of a scan: 'default' and 't1'"
    );
}

/// A job's usage shows what its statements were billed, and its tenant's
/// usage the sums over its jobs.
#[test]
fn d1_rows_a_job_and_its_tenant_show_what_d1_billed() {
    let w = World::new();
    let IntakeOutcome::Queued { job_id, .. } = w.put("a", &document(40, None)) else {
        panic!("queued")
    };
    w.deliver_all();
    let job = w
        .request_json(
            "GET",
            &format!("/v1/jobs/{job_id}"),
            &format!("Bearer {TEST_INGEST_TOKEN}"),
            None,
        )
        .body;
    let rows = &job["usage"]["d1_rows"];
    let (read, written) = (
        rows["read"].as_u64().unwrap(),
        rows["written"].as_u64().unwrap(),
    );
    let chunks = job["progress"]["chunks_total"].as_u64().expect("staged");
    assert!(chunks > 5, "{job}");
    // Each chunk row is at least its row and its index entries.
    assert!(written >= 4 * chunks, "{rows} for {chunks} chunks");
    assert!(read > 0, "{rows}");
    let tenant = w
        .request_json(
            "GET",
            "/v1/admin/tenants/default",
            &format!("Bearer {TEST_ADMIN_TOKEN}"),
            None,
        )
        .body;
    assert_eq!(tenant["usage"]["d1_rows"], *rows, "{tenant}");
}

/// The native count of `tests/e2e/d1-rows.test.mjs`'s two jobs, under
/// `make dev`'s configuration, for docs/performance.md's comparison with
/// what the local runtime reported (`cargo test --test it d1_rows_native
/// -- --ignored --nocapture`).
#[test]
#[ignore]
fn d1_rows_native_figures_of_the_e2e_document() {
    const WORDS: [&str; 10] = [
        "amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath", "inlet", "juniper",
    ];
    let paragraph = |i: usize, tag: &str| {
        let words: Vec<String> = (0..60)
            .map(|k| format!("{}{}{tag}", WORDS[(i + k) % 10], (i * 7 + k) % 13))
            .collect();
        words.join(" ") + "."
    };
    let text = |changed: Option<usize>| {
        (0..20)
            .map(|i| paragraph(i, if Some(i) == changed { "x" } else { "" }))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let vars: std::collections::HashMap<&str, &str> = [
        ("INDEX_BACKEND", "local-d1"),
        ("EMBEDDER_BACKEND", "local-hash"),
        ("EMBEDDING_DIMENSIONS", "384"),
        ("EMBEDDING_MODEL", "@cf/baai/bge-m3"),
        ("EMBEDDING_POOLING", "cls"),
        ("VECTORIZE_METRIC", "cosine"),
    ]
    .into_iter()
    .collect();
    let cfg = ingest_pipeline::config::Config::from_lookup(|k| vars.get(k).map(|v| v.to_string()))
        .expect("make dev's configuration");
    let w = World::with(cfg);
    for changed in [None, Some(9)] {
        let IntakeOutcome::Queued { job_id, .. } = w.put("rows-a", &text(changed)) else {
            panic!("queued")
        };
        w.deliver_all();
        let job = w
            .request_json(
                "GET",
                &format!("/v1/jobs/{job_id}"),
                &format!("Bearer {TEST_INGEST_TOKEN}"),
                None,
            )
            .body;
        println!(
            "native d1_rows {} ({} chunks)",
            job["usage"]["d1_rows"], job["progress"]["chunks_total"]
        );
    }
}

/// Cron's search for stalled jobs reads the jobs that are due, not every
/// job still backing off: an outage's backoff leaves a job per document
/// waiting (migration 0027's `jobs_retry_due`; before it, the search
/// passed each waiting job in the order they last changed).
#[test]
fn the_stalled_search_reads_the_due_retries_not_every_waiting_job() {
    let w = World::new();
    w.put("a", "one document, its version's jobs waiting for a retry");
    let doc = crate::common::default_key("a").as_str().to_string();
    // 2,000 waiting until far ahead, each changed before the due one.
    block_on(w.db.execute(Stmt::new(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO jobs (job_id, doc_id, version, kind, state, step, attempts, last_failure_bucket,
                           lease_until, next_attempt_at, created_at, updated_at)
         SELECT 'wait-' || i, ?1, 1, 'index', 'up_for_retry', 'staged', 1, 'embed_unavailable', NULL, ?2, 0, i FROM n",
        vec![doc.clone().into(), 1_000_000_000i64.into()],
    )))
    .expect("waiting jobs");
    block_on(w.db.execute(Stmt::new(
        "INSERT INTO jobs (job_id, doc_id, version, kind, state, step, attempts, last_failure_bucket,
                           lease_until, next_attempt_at, created_at, updated_at)
         VALUES ('due', ?1, 1, 'index', 'up_for_retry', 'staged', 1, 'embed_unavailable', NULL, 5, 0, 3000)",
        vec![doc.into()],
    )))
    .expect("the due job");
    let (rows, billed) = block_on(w.db.query_billed::<serde_json::Value>(Stmt::new(
        ingest_pipeline::store::sql::STALLED_JOBS,
        vec![10i64.into(), 10i64.into(), 10i64.into()],
    )))
    .expect("the search runs");
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["job_id"].as_str()).collect();
    assert_eq!(ids, ["due"]);
    assert!(
        billed.read < 100,
        "read {} rows for one due job among 2,001 waiting",
        billed.read
    );
}

/// Cron's sweep of closed rows for abandoned ones examines a page after
/// its cursor each run, whatever the number of closed rows: an index
/// outage leaves every replaced row closed, its intent pending, and the
/// sweep walked them all on every run before it had a cursor. A row past
/// the first page is still found, pages later.
#[test]
fn the_sweep_examines_a_page_of_closed_rows_per_run() {
    let w = World::new();
    w.put("a", "version one");
    w.put("a", "version two");
    w.deliver_all();
    let doc = crate::common::default_key("a").as_str().to_string();
    // 500 rows of version 1, closed at 2 (not valid at the live version),
    // each with its pending intent but the last.
    block_on(w.db.execute(Stmt::new(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
         INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text)
         SELECT 100000 + i, ?1, 1, 2, 1, i, 'closed-' || i, 'h' || i, 't' FROM n",
        vec![doc.clone().into()],
    )))
    .expect("closed rows");
    block_on(w.db.execute(Stmt::new(
        "INSERT INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
         SELECT vector_id, doc_id, 1, 'replaced', 3, 9000000000000, 0 FROM chunks
         WHERE vector_id LIKE 'closed-%' AND vector_id <> 'closed-500'",
        vec![],
    )))
    .expect("their intents");
    let metered = Metered(&w.db, std::cell::Cell::new(Rows::default()));
    let store = ingest_pipeline::store::Store::new(&metered, 900_000);
    let sweep = || {
        metered.1.set(Rows::default());
        let page = block_on(store.sweep_page(50)).expect("the page");
        let next = page.next_cursor(50);
        let made = block_on(store.sweep_abandoned(w.clock.now_ms(), &page, &next))
            .expect("the sweep runs");
        (made, metered.1.get())
    };
    let mut made = 0;
    for run in 1..=12 {
        let (changes, billed) = sweep();
        assert!(
            billed.read < 400,
            "run {run} read {} rows for a page of 50",
            billed.read
        );
        made += changes;
        if made > 0 {
            assert_eq!(run, 10, "the tenth page holds the 500th row");
            break;
        }
    }
    assert_eq!(made, 1, "the row without an intent became one");
    assert_eq!(
        w.count("SELECT count(*) AS n FROM cleanup_intents WHERE vector_id = 'closed-500'"),
        1
    );
}

/// The ledger, adding up what each call was billed.
struct Metered<'a>(&'a SqliteDb, std::cell::Cell<Rows>);

impl Metered<'_> {
    fn add(&self, r: Rows) {
        let t = self.1.get();
        self.1.set(Rows {
            read: t.read + r.read,
            written: t.written + r.written,
        });
    }
}

impl Database for Metered<'_> {
    async fn query_billed<T: serde::de::DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), ingest_pipeline::ports::PortError> {
        let out = self.0.query_billed(stmt).await?;
        self.add(out.1);
        Ok(out)
    }
    async fn execute_billed(
        &self,
        stmt: Stmt,
    ) -> Result<(u64, Rows), ingest_pipeline::ports::PortError> {
        let out = self.0.execute_billed(stmt).await?;
        self.add(out.1);
        Ok(out)
    }
    async fn batch_billed(
        &self,
        stmts: Vec<Stmt>,
    ) -> Result<(Vec<u64>, Rows), ingest_pipeline::ports::PortError> {
        let out = self.0.batch_billed(stmts).await?;
        self.add(out.1);
        Ok(out)
    }
}

/// Migration 0028: the dead-letter summary's counters cost one row per
/// letter archived or seen again, and a document's newer version moves its
/// letters out of the latest half, writing nothing for a document with none.
#[test]
fn a_dead_letter_is_counted_in_its_group_and_moves_with_its_documents_versions() {
    let db = SqliteDb::ledger();
    let groups = |db: &SqliteDb| -> Vec<serde_json::Value> {
        db.inspect(
            "SELECT failure_bucket, chunk_count_bucket, letters, deliveries, letters_latest, deliveries_latest, first_seen, last_seen
             FROM dead_letter_groups ORDER BY 1, 2",
            vec![],
        )
    };
    billed(
        &db,
        "INSERT INTO documents (doc_id, latest_version, created_at, updated_at) VALUES ('t1\u{1f}a', 1, 1, 1)",
    );
    billed(
        &db,
        "INSERT INTO documents (doc_id, latest_version, created_at, updated_at) VALUES ('t1\u{1f}b', 1, 1, 1)",
    );
    // The letter: its row, its five keys' entries (its job ID and four
    // indexes) and its group's row.
    assert_eq!(
        billed(
            &db,
            "INSERT INTO dead_letters (job_id, message_id, doc_id, version, job_state, failure_bucket, chunk_count, first_seen, last_seen)
             VALUES ('j1', 'm', 't1\u{1f}a', 1, 'running', NULL, 3, 10, 10)"
        )
        .written,
        7
    );
    assert_eq!(
        groups(&db),
        vec![
            serde_json::json!({"failure_bucket": "unknown", "chunk_count_bucket": "0-10", "letters": 1,
            "deliveries": 1, "letters_latest": 1, "deliveries_latest": 1, "first_seen": 10, "last_seen": 10})
        ]
    );
    // Seen again with its job's ending: out of "unknown", into its bucket
    // (the emptied group goes).
    billed(
        &db,
        "UPDATE dead_letters SET failure_bucket = 'embed_rejected', job_state = 'failed', last_seen = 20, times_seen = 2 WHERE job_id = 'j1'",
    );
    assert_eq!(
        groups(&db),
        vec![
            serde_json::json!({"failure_bucket": "embed_rejected", "chunk_count_bucket": "0-10", "letters": 1,
            "deliveries": 2, "letters_latest": 1, "deliveries_latest": 2, "first_seen": 10, "last_seen": 20})
        ]
    );
    // A newer version of a document without letters writes its own row
    // only; of the document with one, its group's row too.
    assert_eq!(
        billed(
            &db,
            "UPDATE documents SET latest_version = 2 WHERE doc_id = 't1\u{1f}b'"
        )
        .written,
        1,
        "the row (queued before and after: no count moves), no letter group"
    );
    assert_eq!(
        billed(
            &db,
            "UPDATE documents SET latest_version = 2 WHERE doc_id = 't1\u{1f}a'"
        )
        .written,
        2
    );
    assert_eq!(
        groups(&db),
        vec![
            serde_json::json!({"failure_bucket": "embed_rejected", "chunk_count_bucket": "0-10", "letters": 1,
            "deliveries": 2, "letters_latest": 0, "deliveries_latest": 0, "first_seen": 10, "last_seen": 20})
        ]
    );
}
