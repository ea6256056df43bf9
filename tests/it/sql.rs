//! Every SQL statement the Worker runs, on real SQLite (bundled, foreign
//! keys on) with the same `migrations/` that `wrangler d1 migrations` applies.

use crate::common;
use crate::common::default_key;

use crate::common::{oracle, World};
use futures::executor::block_on;
use ingest_pipeline::adapters::local_index::LocalIndex;
use ingest_pipeline::adapters::IndexLimits;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::native::{SqliteDb, LEDGER_MIGRATIONS, LOCAL_INDEX_MIGRATIONS};
use ingest_pipeline::pipeline::{SearchMode, SearchRequest};
use ingest_pipeline::ports::{Clock, Database, SqlValue, Stmt, VectorIndex, VectorRecord};
use ingest_pipeline::store::sql;
use std::collections::BTreeSet;

fn files_in(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    names.sort();
    names
}

/// The offline index over `vdb`: 4 dimensions, the given batch limits.
fn local_index(
    vdb: &SqliteDb,
    upsert_batch_max: usize,
    delete_batch_max: usize,
) -> LocalIndex<&SqliteDb> {
    let limits = IndexLimits {
        dimensions: 4,
        upsert_batch_max,
        delete_batch_max,
        get_batch_max: delete_batch_max,
        id_bytes_max: 64,
        top_k_max: 100,
        filter_bytes_max: 2048,
    };
    LocalIndex {
        db: vdb,
        limits,
        tuning: Default::default(),
        json_param_bytes_max: 900_000,
        reject_doc_prefix: None,
    }
}

#[test]
fn embedded_migrations_are_the_migration_folders() {
    let root = env!("CARGO_MANIFEST_DIR");
    let ledger: Vec<String> = LEDGER_MIGRATIONS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(ledger, files_in(&format!("{root}/migrations")));
    let local: Vec<String> = LOCAL_INDEX_MIGRATIONS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(local, files_in(&format!("{root}/migrations-local-index")));
    for (name, text) in LEDGER_MIGRATIONS {
        assert_eq!(
            *text,
            std::fs::read_to_string(format!("{root}/migrations/{name}")).unwrap()
        );
    }
}

#[test]
fn sql_all_lists_every_statement() {
    let src = include_str!("../../src/store/sql.rs");
    let declared: BTreeSet<&str> = src
        .lines()
        .filter_map(|l| l.strip_prefix("pub const "))
        .filter_map(|l| l.split(':').next())
        .filter(|n| *n != "ALL")
        // And the pairs `move_table!` declares (a read and a write each).
        .chain(
            src.split("\nmove_table!(")
                .skip(1)
                .flat_map(|args| args.split(',').take(2).map(str::trim)),
        )
        .collect();
    let listed: BTreeSet<&str> = sql::ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(declared, listed);
}

/// The quoted names a statement compares or sets `column` to (`column =
/// 'x'`, `column <> 'x'`, `column IN ('x', 'y')`, any table alias).
fn literals_after(stmt: &str, column: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = stmt.as_bytes();
    let mut from = 0;
    while let Some(at) = stmt[from..].find(column) {
        let start = from + at;
        from = start + column.len();
        let before = start.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue; // part of another name (`job_state`, `build_generation_state`)
        }
        let rest = stmt[from..].trim_start();
        let rest = ["=", "<>", "!=", "NOT IN", "IN"]
            .iter()
            .find_map(|op| rest.strip_prefix(op))
            .map(str::trim_start);
        let Some(rest) = rest else { continue };
        let list = match rest.strip_prefix('(') {
            Some(r) => &r[..r.find(')').unwrap_or(r.len())],
            None => rest.split([' ', '\n', ')', ',']).next().unwrap_or(""),
        };
        for item in list.split(',') {
            let item = item.trim();
            if let Some(name) = item.strip_prefix('\'').and_then(|i| i.strip_suffix('\'')) {
                found.push(name.to_string());
            }
        }
    }
    found
}

/// State names inside SQL text are literals the compiler cannot check: each
/// one compared with or written to a state column is a name its enum has.
#[test]
fn every_state_literal_in_sql_is_a_known_state() {
    use ingest_pipeline::core::state::*;
    let names = |all: &[&'static str]| all.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let strs = |v: Vec<&'static str>| names(&v);
    let states: BTreeSet<String> = [
        strs(JobState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(GenerationState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(BackfillState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(RedriveState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(RedriveItemState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(TenantState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(SyncState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(SyncDeleteState::ALL.iter().map(|s| s.as_str()).collect()),
        strs(MoveState::ALL.iter().map(|s| s.as_str()).collect()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let checks: [(&str, BTreeSet<String>); 5] = [
        ("state", states),
        (
            "move_state",
            strs(TenantMoveState::ALL.iter().map(|s| s.as_str()).collect()),
        ),
        (
            "kind",
            strs(JobKind::ALL.iter().map(|s| s.as_str()).collect()),
        ),
        (
            "phase",
            strs(RedrivePhase::ALL.iter().map(|s| s.as_str()).collect()),
        ),
        (
            "reason",
            strs(IntentReason::ALL.iter().map(|s| s.as_str()).collect()),
        ),
    ];
    let mut seen = 0;
    for (name, stmt) in sql::ALL {
        for (column, known) in &checks {
            for literal in literals_after(stmt, column) {
                assert!(
                    known.contains(&literal),
                    "{name}: {column} '{literal}' is no known name"
                );
                seen += 1;
            }
        }
    }
    // The scan finds them: the statements compare states in many places.
    assert!(seen > 50, "only {seen} state literals found");
    assert_eq!(
        literals_after(
            "WHERE j.state IN ('queued', 'runing') AND job_state = 'x'",
            "state"
        ),
        ["queued", "runing"]
    );
}

#[test]
fn every_statement_compiles_against_the_schema() {
    let ledger = rusqlite::Connection::open_in_memory().unwrap();
    for (_, m) in LEDGER_MIGRATIONS {
        ledger.execute_batch(m).unwrap();
    }
    let local = rusqlite::Connection::open_in_memory().unwrap();
    for (_, m) in LOCAL_INDEX_MIGRATIONS {
        local.execute_batch(m).unwrap();
    }
    for (name, text) in sql::ALL {
        let conn = if name.starts_with("LOCAL_INDEX_") {
            &local
        } else {
            &ledger
        };
        conn.prepare(text)
            .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
    }
}

/// A ledger with every migration before `first` applied (foreign keys on),
/// and the migrations from `first` on, to apply after a fixture: how a
/// migration test starts from the schema an earlier release left.
fn ledger_before(first: &str) -> (rusqlite::Connection, Vec<(&'static str, &'static str)>) {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    let (before, after): (Vec<_>, Vec<_>) = LEDGER_MIGRATIONS
        .iter()
        .copied()
        .partition(|(name, _)| *name < first);
    for (_, m) in &before {
        db.execute_batch(m).unwrap();
    }
    (db, after)
}

#[test]
fn migration_0011_keeps_every_chunk_row_its_keyword_entry_and_lets_versions_share_a_vector() {
    // A ledger as 0010 left it: a live version's rows (legacy IDs) in the
    // keyword index.
    let (db, after) = ledger_before("0011");
    db.execute_batch(
        "INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at) VALUES ('d', 1, 1, 0, 0, 0);
         INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 1, 0, 'h', 'text/plain', '{}', 10, 1, 2, 0);
         INSERT INTO chunks (doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text)
           VALUES ('d', 1, 1, 0, 'x:1:0', 0, 5, 'a', 'alpha'), ('d', 1, 1, 1, 'x:1:1', 5, 10, 'b', 'bravo');
         INSERT INTO chunks_fts (rowid, terms) SELECT chunk_id, text FROM chunks;",
    )
    .unwrap();
    let rows = |db: &rusqlite::Connection| -> Vec<(i64, String, String)> {
        let mut q = db
            .prepare("SELECT chunk_id, vector_id, text FROM chunks ORDER BY chunk_id")
            .unwrap();
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let kept = rows(&db);
    for (_, m) in after.iter().filter(|(name, _)| *name < "0019") {
        db.execute_batch(m).unwrap();
    }
    assert_eq!(rows(&db), kept, "every row, with its key and ID");
    let hit: i64 = db
        .query_row(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'bravo'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(hit, kept[1].0, "the keyword index still points at its row");
    // A second version's row may refer to the same vector now.
    db.execute_batch(
        "INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 2, 0, 'h2', 'text/plain', '{}', 5, 1, 1, 0);
         INSERT INTO chunks (doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text)
           VALUES ('d', 2, 1, 0, 'x:1:0', 0, 5, 'a', 'alpha');
         UPDATE documents SET latest_version = 2, live_version = 2 WHERE doc_id = 'd';",
    )
    .unwrap();
    // The replace trigger moved the keyword index to version 2's row.
    let live: Vec<i64> = {
        let mut q = db
            .prepare("SELECT rowid FROM chunks_fts ORDER BY rowid")
            .unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(live.len(), 1);
    assert!(live[0] > kept[1].0);
}

#[test]
fn migration_0019_keeps_every_row_and_keyword_entry_and_opens_the_latest_versions_rows() {
    // A ledger as 0018 left it: document d with version 1 (replaced) and
    // version 2 (live and latest), each with its own copy of the rows;
    // document e with version 1 live and version 2 staged, not live yet.
    let (db, after) = ledger_before("0019");
    db.execute_batch(
        "INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at)
           VALUES ('d', 2, 2, 0, 0, 0), ('e', 2, 1, 0, 0, 0);
         INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 1, 0, 'h1', 'text/plain', '{}', 10, 1, 2, 0), ('d', 2, 0, 'h2', 'text/plain', '{}', 10, 1, 2, 0),
                  ('e', 1, 0, 'h1', 'text/plain', '{}', 5, 1, 1, 0), ('e', 2, 0, 'h2', 'text/plain', '{}', 5, 1, 1, 0);
         INSERT INTO chunks (doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text)
           VALUES ('d', 1, 1, 0, 'd.a', 0, 5, 'a', 'alpha'), ('d', 1, 1, 1, 'd.b', 5, 10, 'b', 'bravo'),
                  ('d', 2, 1, 0, 'd.a', 0, 5, 'a', 'alpha'), ('d', 2, 1, 1, 'd.c', 5, 10, 'c', 'charlie'),
                  ('e', 1, 1, 0, 'e.x', 0, 5, 'x', 'xray'), ('e', 2, 1, 0, 'e.y', 0, 5, 'y', 'yankee');
         INSERT INTO chunks_fts (rowid, terms) SELECT c.chunk_id, c.text FROM chunks c
           JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version;",
    )
    .unwrap();
    let rows = |db: &rusqlite::Connection| -> Vec<(i64, String, i64, Option<i64>, f64)> {
        let mut q = db
            .prepare("SELECT chunk_id, vector_id, version, to_version, ord FROM chunks ORDER BY chunk_id")
            .unwrap();
        q.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let fts = |db: &rusqlite::Connection| -> Vec<i64> {
        let mut q = db
            .prepare("SELECT rowid FROM chunks_fts ORDER BY rowid")
            .unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let indexed = fts(&db);
    let served_before = previous_release_search(&db);
    assert_eq!(served_before.len(), 6, "{served_before:?}");
    for (_, m) in after.iter().filter(|(name, _)| *name < "0020") {
        db.execute_batch(m).unwrap();
    }
    // Until the new code is deployed, the previous release's search
    // answers as it did (its rows valid at a live version are that
    // version's: nothing is shared until the next staging).
    assert_eq!(previous_release_search(&db), served_before);
    // Every row keeps its key and vector; each is valid at its own version
    // only, but a latest version's rows stay open; order keys are the
    // chunk indexes.
    assert_eq!(
        rows(&db),
        vec![
            (1, "d.a".into(), 1, Some(2), 0.0),
            (2, "d.b".into(), 1, Some(2), 1.0),
            (3, "d.a".into(), 2, None, 0.0),
            (4, "d.c".into(), 2, None, 1.0),
            (5, "e.x".into(), 1, Some(2), 0.0),
            (6, "e.y".into(), 2, None, 0.0),
        ]
    );
    assert_eq!(fts(&db), indexed, "the keyword index is untouched");
    // e's version 2 goes live: the new trigger moves the keyword index from
    // the rows valid at 1 to those valid at 2.
    db.execute_batch("UPDATE documents SET live_version = 2 WHERE doc_id = 'e'")
        .unwrap();
    assert_eq!(fts(&db), vec![3, 4, 6]);
}

/// The previous release's two search statements (as of the commit before
/// migration 0019), run for every document's chunks: what it would serve
/// between the migrations and the deploy of this release.
fn previous_release_search(db: &rusqlite::Connection) -> Vec<(String, i64, i64, String)> {
    const LIVE_CHUNKS_BY_VECTOR_ID: &str = "\
SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, c.version AS version, c.chunk_index AS chunk_index, c.text AS text,
       c.generation AS generation, v.metadata AS metadata
FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version
JOIN versions v ON v.doc_id = c.doc_id AND v.version = c.version
WHERE c.vector_id IN (SELECT value FROM json_each(?1)) AND c.generation = ?2 AND c.tenant_id = ?3";
    const KEYWORD_CHUNKS: &str = "\
SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, c.version AS version, c.chunk_index AS chunk_index, c.text AS text,
       c.generation AS generation, v.metadata AS metadata, -bm25(chunks_fts) AS score
FROM chunks_fts JOIN chunks c ON c.chunk_id = chunks_fts.rowid
JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version
JOIN versions v ON v.doc_id = c.doc_id AND v.version = c.version
WHERE chunks_fts MATCH ?1 AND c.generation = ?2 AND c.tenant_id = ?3 AND (?4 IS NULL OR c.doc_id = ?4)
ORDER BY bm25(chunks_fts), c.vector_id LIMIT ?5";
    let row = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(String, i64, i64, String)> {
        Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?))
    };
    let ids = r#"["d.a","d.b","d.c","e.x","e.y"]"#;
    let mut out: Vec<_> = db
        .prepare(LIVE_CHUNKS_BY_VECTOR_ID)
        .unwrap()
        .query_map(rusqlite::params![ids, 1, "default"], row)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for word in ["alpha", "charlie", "xray"] {
        let mut q = db.prepare(KEYWORD_CHUNKS).unwrap();
        let hits = q
            .query_map(
                rusqlite::params![word, 1, "default", rusqlite::types::Null, 10],
                row,
            )
            .unwrap()
            .map(Result::unwrap);
        out.extend(hits);
    }
    out.sort();
    out
}

#[test]
fn migration_0020_keeps_the_keyword_index_without_a_copy_of_the_text() {
    // A ledger as 0019 left it: d's version 1 live (two rows), e's version
    // 1 live and version 2 staged (one row kept, one new), the keyword
    // index holding the live rows with its own copy of their terms.
    let (db, after) = ledger_before("0020");
    db.execute_batch(
        "INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at)
           VALUES ('d', 1, 1, 0, 0, 0), ('e', 2, 1, 0, 0, 0);
         INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 1, 0, 'h1', 'text/plain', '{}', 10, 1, 2, 0),
                  ('e', 1, 0, 'h1', 'text/plain', '{}', 5, 1, 2, 0), ('e', 2, 0, 'h2', 'text/plain', '{}', 5, 1, 2, 0);
         INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text, terms)
           VALUES (1, 'd', 1, NULL, 1, 0, 'd.a', 'a', 'alpha', NULL), (2, 'd', 1, NULL, 1, 1, 'd.b', 'b', 'bravo', NULL),
                  (3, 'e', 1, NULL, 1, 0, 'e.x', 'x', 'xray', NULL), (4, 'e', 1, 2, 1, 1, 'e.t', 't', '東京', ' 東 京 '),
                  (5, 'e', 2, NULL, 1, 1, 'e.y', 'y', 'yankee', NULL);
         INSERT INTO chunks_fts (rowid, terms) SELECT c.chunk_id, COALESCE(c.terms, c.text) FROM chunks c
           JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
            AND (c.to_version IS NULL OR c.to_version > d.live_version);",
    )
    .unwrap();
    let served_before = previous_release_search(&db);
    assert_eq!(served_before.len(), 5, "{served_before:?}");
    for (_, m) in after.iter().filter(|(name, _)| *name < "0021") {
        db.execute_batch(m).unwrap();
    }
    assert_eq!(
        previous_release_search(&db),
        served_before,
        "the previous release's search answers the same until the deploy"
    );
    let ids = |db: &rusqlite::Connection, sql: &str| -> Vec<i64> {
        let mut q = db.prepare(sql).unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let indexed =
        |db: &rusqlite::Connection| ids(db, "SELECT id FROM chunks_fts_docsize ORDER BY id");
    let matching = |db: &rusqlite::Connection, q: &str| {
        ids(
            db,
            &format!("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH '{q}' ORDER BY rowid"),
        )
    };
    // The live rows, indexed again, and no copy of their text.
    assert_eq!(indexed(&db), vec![1, 2, 3, 4]);
    assert_eq!(matching(&db, "\"東 京\""), vec![4]);
    assert_eq!(
        matching(&db, "yankee"),
        Vec::<i64>::new(),
        "a staged row is not indexed"
    );
    let content: i64 = db
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'chunks_fts_content'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(content, 0, "the index keeps no copy of the text");
    // The replace moves what changed: 東京 leaves, yankee enters, xray stays.
    db.execute_batch("UPDATE documents SET live_version = 2 WHERE doc_id = 'e'")
        .unwrap();
    assert_eq!(indexed(&db), vec![1, 2, 3, 5]);
    assert_eq!(matching(&db, "\"東 京\""), Vec::<i64>::new());
    assert_eq!(matching(&db, "yankee"), vec![5]);
    // A live row's text changed: its entry follows; a row cleaned up leaves,
    // and a row never indexed leaves nothing behind (no 'delete' for it).
    db.execute_batch("UPDATE chunks SET text = 'bravissimo' WHERE chunk_id = 2")
        .unwrap();
    assert_eq!(matching(&db, "bravo"), Vec::<i64>::new());
    assert_eq!(matching(&db, "bravissimo"), vec![2]);
    db.execute_batch("DELETE FROM chunks WHERE chunk_id IN (2, 4)")
        .unwrap();
    assert_eq!(indexed(&db), vec![1, 3, 5]);
    // Every chunk row left is live and indexed: FTS5's own check of the
    // index against its content (the rows) passes, so no 'delete' above
    // removed what the index did not hold.
    db.execute_batch("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
        .unwrap();
}

#[test]
fn migration_0024_counts_each_generations_rows_and_keeps_the_count_through_deletes() {
    // A ledger as 0023 left it: rows in two generations, one retiring.
    let (db, after) = ledger_before("0024");
    db.execute_batch(
        "INSERT INTO generations (generation, index_config, state, created_at, updated_at) VALUES (2, 'c2', 'retiring', 0, 0);
         INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at)
           VALUES ('d', 1, 1, 0, 0, 0);
         INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 1, 0, 'h1', 'text/plain', '{}', 10, 1, 2, 0);
         INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text, keyword_len)
           VALUES (1, 'd', 1, NULL, 1, 0, 'd.a', 'a', 'alpha', NULL), (2, 'd', 1, NULL, 1, 1, 'd.b', 'b', 'bravo', NULL),
                  (3, 'd', 1, NULL, 2, 0, 'd.a2', 'a', 'alpha', NULL);",
    )
    .unwrap();
    for (_, m) in &after {
        db.execute_batch(m).unwrap();
    }
    let counts = |db: &rusqlite::Connection| -> Vec<(i64, i64)> {
        let mut q = db
            .prepare("SELECT generation, chunk_rows FROM generations ORDER BY generation")
            .unwrap();
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        counts(&db),
        vec![(1, 2), (2, 1)],
        "the rows the ledger held"
    );
    // The retiring generation is retired once its last row is gone, and
    // not before.
    db.execute(sql::GENERATIONS_RETIRED, [5]).unwrap();
    let state = |db: &rusqlite::Connection| -> String {
        db.query_row(
            "SELECT state FROM generations WHERE generation = 2",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(state(&db), "retiring");
    db.execute_batch("DELETE FROM chunks WHERE chunk_id IN (1, 3)")
        .unwrap();
    assert_eq!(counts(&db), vec![(1, 1), (2, 0)]);
    db.execute(sql::GENERATIONS_RETIRED, [5]).unwrap();
    assert_eq!(state(&db), "retired");
    // A staging counts its rows in the generations still written only.
    db.execute(sql::GENERATION_ROWS_STAGED, ["[[1, 2], [2, 1]]"])
        .unwrap();
    assert_eq!(counts(&db), vec![(1, 3), (2, 0)]);
}

#[test]
fn migration_0021_empties_the_shared_keyword_index_and_leaves_its_rows_to_cron() {
    // A ledger as 0020 left it: two tenants, d's two live rows in the
    // shared keyword index (one with the Japanese terms copy).
    let (db, after) = ledger_before("0020");
    db.execute_batch(
        "INSERT INTO tenants (tenant_id, state, documents, bytes, created_at, updated_at)
           VALUES ('acme', 'active', 0, 0, 0, 0);
         INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at)
           VALUES ('d', 1, 1, 0, 0, 0);
         INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at)
           VALUES ('d', 1, 0, 'h1', 'text/plain', '{}', 10, 1, 2, 0);
         INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text, terms)
           VALUES (1, 'd', 1, NULL, 1, 0, 'd.a', 'a', 'alpha', NULL), (2, 'd', 1, NULL, 1, 1, 'd.t', 't', '東京', ' 東 京 ');",
    )
    .unwrap();
    for (name, m) in &after {
        if *name == "0021_keyword_index_per_tenant" {
            let held: i64 = db
                .query_row("SELECT count(*) FROM chunks_fts_docsize", [], |r| r.get(0))
                .unwrap();
            assert_eq!(held, 2, "0020 indexed the live rows");
        }
        db.execute_batch(m).unwrap();
    }
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    // The shared index is empty (the previous release's search answers no
    // keyword hit, and no error, until the deploy), and the new one too:
    // every row waits for cron, its text kept.
    assert_eq!(count("SELECT count(*) FROM chunks_fts_docsize"), 0);
    let served = previous_release_search(&db);
    assert!(
        served.iter().all(|(id, ..)| id.starts_with("d.")),
        "{served:?}"
    );
    assert_eq!(count("SELECT count(*) FROM keyword_index_docsize"), 0);
    assert_eq!(
        count("SELECT count(*) FROM chunks WHERE keyword_len IS NULL AND text <> ''"),
        2
    );
    // Each tenant has a key of its own for its terms, and no totals yet.
    assert_eq!(
        count("SELECT count(DISTINCT keyword_key) FROM tenants WHERE keyword_key IS NOT NULL"),
        2
    );
    assert_eq!(
        count("SELECT sum(keyword_rows) + sum(keyword_tokens) FROM tenants"),
        0
    );
    // A tenant the previous release creates before the deploy gets the
    // next key.
    db.execute_batch(
        "INSERT INTO tenants (tenant_id, state, documents, bytes, created_at, updated_at)
           VALUES ('later', 'active', 0, 0, 0, 0)",
    )
    .unwrap();
    assert_eq!(
        count("SELECT keyword_key FROM tenants WHERE tenant_id = 'later'"),
        count("SELECT max(keyword_key) FROM tenants WHERE tenant_id <> 'later'") + 1
    );
    // A row never indexed leaves without touching the index or the totals.
    db.execute_batch("DELETE FROM chunks WHERE chunk_id = 1")
        .unwrap();
    assert_eq!(
        count("SELECT sum(keyword_rows) + sum(keyword_tokens) FROM tenants"),
        0
    );
}

/// A world whose rows were written before migration 0021 (none in the
/// keyword index, no term counts: as the migration leaves them), entered
/// by cron a page a run; checks the keyword answers are those of rows
/// indexed when written.
fn keyword_index_upgraded_by_cron() -> World {
    let cfg = ingest_pipeline::config::Config {
        cron_prune_rows_max: 1,
        ..Default::default()
    };
    let texts = [
        (
            "en",
            "alpha report on quarterly figures.\n\nbeta notes on the figures.",
        ),
        ("ja", "東京の四半期報告書。\n\n大阪の売上の数字。"),
    ];
    let queries = ["alpha", "figures beta", "東京", "報告書"];
    let answer = |w: &World| -> Vec<Vec<(String, f32)>> {
        queries
            .iter()
            .map(|q| {
                let r = SearchRequest {
                    mode: SearchMode::Keyword,
                    ..SearchRequest::new(*q, 5)
                };
                w.search_by(&r)
                    .into_iter()
                    .map(|h| (h.text, h.scores.keyword.unwrap()))
                    .collect()
            })
            .collect()
    };
    // The same documents, their rows indexed as they are written.
    let twin = World::with(cfg.clone());
    for (doc, text) in texts {
        twin.put(doc, text);
    }
    twin.deliver_all();
    let indexed_when_written = answer(&twin);
    assert!(indexed_when_written.iter().all(|hits| !hits.is_empty()));

    let w = World::with(cfg);
    for (doc, text) in texts {
        w.put(doc, text);
    }
    w.put("gone", "alpha gamma");
    w.deliver_all();
    w.db.inspect_batch(
        "DELETE FROM keyword_index;
         UPDATE chunks SET keyword_len = NULL;
         UPDATE tenants SET keyword_rows = 0, keyword_tokens = 0;",
    );
    assert!(answer(&w).iter().all(Vec::is_empty));
    // A row deleted before cron reaches it is never indexed.
    w.delete("gone");
    w.deliver_all();
    let mut runs = 0;
    while w.count("SELECT count(*) AS n FROM chunks WHERE keyword_len IS NULL") > 0 {
        let r = w.cron();
        assert!(r.keyword_rows_indexed <= 1, "{r:?}");
        runs += 1;
        assert!(runs < 10, "cron does not finish the upgrade");
    }
    assert!(runs >= 2, "one row a run: {runs}");
    assert_eq!(answer(&w), indexed_when_written);
    assert_eq!(w.cron().keyword_rows_indexed, 0);
    assert_eq!(oracle::keyword_mismatches(&w.db), 0);
    w
}

#[test]
fn cron_enters_rows_written_before_0021_into_the_keyword_index_a_page_a_run() {
    keyword_index_upgraded_by_cron();
}

#[test]
fn foreign_keys_are_enforced() {
    let db = SqliteDb::ledger();
    let orphan = Stmt::new(
        "INSERT INTO chunks (doc_id, version, generation, ord, vector_id, content_hash, text) VALUES ('x', 1, 1, 0, 'v', 'h', 't')",
        vec![],
    );
    let err = block_on(db.execute(orphan)).unwrap_err();
    assert_eq!(err.bucket, FailureBucket::DbRejected);
}

#[test]
fn batches_are_atomic() {
    let db = SqliteDb::ledger();
    let ok = Stmt::new(
        sql::INTAKE_UPSERT_DOCUMENTS,
        vec![
            SqlValue::Text(r#"[{"doc_id":"a","version":1}]"#.into()),
            SqlValue::Int(1),
        ],
    );
    let bad = Stmt::new("INSERT INTO versions (doc_id) VALUES ('a')", vec![]);
    assert!(block_on(db.batch(vec![ok, bad])).is_err());
    assert_eq!(
        oracle::document_count(&db),
        0,
        "the first statement was rolled back"
    );
}

/// Runs every flow (ingest, update, delete, failure, retry, stall, cron,
/// search, local index) and checks that each ledger statement ran.
/// Moves `w`'s clock past every retention and lets cron prune.
fn past_every_retention(w: &World) {
    let longest = w
        .cfg
        .redrive_retention_seconds
        .max(w.cfg.history_retention_seconds);
    w.clock.advance_ms(longest as i64 * 1000 + 1);
    for _ in 0..3 {
        w.cron();
    }
}

#[test]
fn every_statement_is_exercised_by_the_flows() {
    let w = World::new();
    w.put("a", "alpha beta gamma. ".repeat(40).as_str());
    w.deliver_all();
    w.put("a", "delta epsilon. ".repeat(40).as_str());
    w.put("b", "zeta eta theta");
    // A transient failure (up for retry) and a permanent one (failed).
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    w.deliver_all();
    w.put("c", "iota kappa");
    w.db.fail_sql
        .replace(Some((sql::COMMIT_SET_LIVE, FailureBucket::DbRejected)));
    w.deliver_all();
    // Stale and superseded work, a stalled job, a dead one.
    w.put("d", "lambda");
    w.put("d", "mu");
    let msgs = w.queue.take_all();
    w.consume(&msgs[1]);
    w.consume(&msgs[0]);
    w.queue.faults.fail_next(1, FailureBucket::QueueUnavailable);
    w.put("e", "nu");
    w.clock
        .advance_ms(i64::from(w.cfg.job_stall_seconds) * 1000 + 1);
    w.cron();
    w.deliver_all();
    w.delete("a");
    w.deliver_all();
    w.search("zeta", 3);
    block_on(w.p().document(&default_key("a"))).unwrap();
    block_on(w.p().store.job_view("nope")).unwrap();
    {
        // A stalled job past its attempts ends dead.
        let mut cfg = w.cfg.clone();
        cfg.job_attempts_max = 1;
        let w2 = common::World::with(cfg);
        w2.queue
            .faults
            .fail_next(1, FailureBucket::QueueUnavailable);
        w2.put("f", "xi");
        let jid = oracle::job_ids(&w2.db).remove(0);
        block_on(
            w2.p()
                .store
                .claim(&jid, w2.clock.0.get(), w2.clock.0.get(), None),
        )
        .unwrap();
        w2.clock
            .advance_ms(i64::from(w2.cfg.job_stall_seconds) * 1000 + 1);
        assert_eq!(w2.cron().jobs_dead, 1);
        w.db.executed
            .borrow_mut()
            .extend(w2.db.executed.borrow().iter().copied());
    }
    // A staging refused while a drain deletes one of its vectors.
    {
        let w8 = crate::reuse::restore_during_a_delete();
        w.db.executed
            .borrow_mut()
            .extend(w8.db.executed.borrow().iter().copied());
    }
    // Rows written before migration 0021, entered by cron.
    {
        let w9 = keyword_index_upgraded_by_cron();
        w.db.executed
            .borrow_mut()
            .extend(w9.db.executed.borrow().iter().copied());
    }
    // Parts too large for one JSON parameter go one per statement.
    {
        let mut cfg = w.cfg.clone();
        cfg.d1_text_part_bytes_max = 4096;
        cfg.d1_json_param_bytes_max = 4096;
        let w3 = common::World::with(cfg);
        w3.put("g", &"\u{1}x".repeat(3000));
        w.db.executed
            .borrow_mut()
            .extend(w3.db.executed.borrow().iter().copied());
    }

    // Dead letters, diagnosis, redrives, repair runs.
    {
        let w4 = common::World::new();
        w4.put("h", "omicron pi rho");
        w4.index
            .upsert_faults
            .fail_next(1, FailureBucket::IndexRejected);
        let msgs = w4.queue.take_all();
        let p = w4.p();
        let outcome = w4.consume(&msgs[0]);
        assert_eq!(
            block_on(p.settle("m-1", &msgs[0], outcome)),
            ingest_pipeline::pipeline::Settle::Ack
        );
        let letter = w4.queue.dead.borrow_mut().pop_front().unwrap();
        assert_eq!(
            block_on(p.consume_dead_letter("d-1", Some(&letter), 0)),
            ingest_pipeline::pipeline::Settle::Ack
        );
        let every = block_on(p.dead_letter_summary(None)).unwrap();
        let own = block_on(p.dead_letter_summary(Some("default"))).unwrap();
        assert_eq!(own, every, "the one letter is the default tenant's");
        let f = ingest_pipeline::pipeline::LetterFilter {
            limit: 10,
            cursor: Some("1|x".into()),
            ..Default::default()
        };
        block_on(p.dead_letters(&f)).unwrap();
        let one_tenant = ingest_pipeline::pipeline::LetterFilter {
            limit: 10,
            tenant_id: Some("default".into()),
            ..Default::default()
        };
        let page = block_on(p.dead_letters(&one_tenant)).unwrap();
        assert_eq!(page.letters.len(), 1, "the default tenant's letter");
        let req = ingest_pipeline::pipeline::RedriveRequest {
            tenant_id: None,
            bucket: None,
            since: None,
            until: None,
            doc_ids: None,
            canary_size: 3,
            max_failed_canaries: 0,
            max_failure_ratio: 0.2,
            batch_size: 10,
        };
        let plan = block_on(p.redrive_plan(&req)).unwrap();
        let view = block_on(p.redrive_execute(&req, &plan.plan_id))
            .unwrap()
            .unwrap();
        w4.deliver_all();
        block_on(p.redrive_advance(&view.redrive_id)).unwrap();
        w4.cron();
        block_on(p.repair_runs(5, None)).unwrap();
        // A live vector goes missing: verification marks and re-runs the document.
        let lost = w4.live_vector_ids()[0].clone();
        w4.index.vectors.borrow_mut().remove(&lost);
        w4.clock
            .advance_ms(i64::from(w4.cfg.index_visibility_window_seconds) * 1000 + 1);
        assert_eq!(w4.cron().documents_repaired, 1);
        // A failed latest version, re-run by a client's reindex.
        w4.deliver_all();
        w4.put("k", "sigma tau upsilon");
        w4.index
            .upsert_faults
            .fail_next(1, FailureBucket::IndexRejected);
        w4.deliver_all();
        assert_eq!(
            w4.state("k"),
            ingest_pipeline::pipeline::DocumentState::Failed
        );
        assert!(block_on(p.reindex_document(&default_key("k")))
            .unwrap()
            .is_ok());
        past_every_retention(&w4);
        w.db.executed
            .borrow_mut()
            .extend(w4.db.executed.borrow().iter().copied());
    }

    // A version larger than one invocation's budget: checkpoints.
    {
        let cfg = ingest_pipeline::config::Config {
            consume_subrequests_max: 10,
            upsert_batch_size: 5,
            ..w.cfg.clone()
        };
        let w5 = common::World::with(cfg);
        w5.put("i", &common::document(40, None));
        let outcomes = w5.deliver_all();
        assert!(
            outcomes.contains(&ingest_pipeline::pipeline::ConsumeOutcome::Ack {
                reason: "checkpointed"
            }),
            "{outcomes:?}"
        );
        w.db.executed
            .borrow_mut()
            .extend(w5.db.executed.borrow().iter().copied());
    }

    // Generations and backfills: a build with a failure (a second pass),
    // pause and resume, the switch, a rollback, retiring, a cancel.
    {
        use ingest_pipeline::pipeline::{BackfillAction, BackfillScope};
        let mut w6 = common::World::new();
        for d in ["j1", "j2", "j3"] {
            w6.put(d, &common::document(8, None));
        }
        w6.deliver_all();
        w6.cfg.chunk_size_max_tokens = 120;
        let settle = |w: &common::World| {
            for _ in 0..10 {
                w.deliver_all();
                w.clock.advance_ms(60_000);
                w.cron();
            }
        };
        let b = block_on(w6.p().start_backfill(&BackfillScope::Config, 1))
            .unwrap()
            .unwrap()
            .unwrap();
        let id = b.backfill_id;
        block_on(w6.p().backfill_transition(&id, BackfillAction::Pause))
            .unwrap()
            .unwrap()
            .unwrap();
        block_on(w6.p().backfill_transition(&id, BackfillAction::Resume))
            .unwrap()
            .unwrap()
            .unwrap();
        w6.index
            .upsert_faults
            .fail_next(1, FailureBucket::IndexRejected);
        settle(&w6);
        assert_eq!(
            block_on(w6.p().backfill_view(&id))
                .unwrap()
                .unwrap()
                .state
                .as_str(),
            "completed"
        );
        block_on(w6.p().backfills(5)).unwrap();
        block_on(w6.p().activate_generation(1)).unwrap().unwrap();
        block_on(w6.p().activate_generation(2)).unwrap().unwrap();
        block_on(w6.p().retire_generation(1)).unwrap().unwrap();
        settle(&w6);
        w6.cfg.chunk_size_max_tokens = 112;
        let b = block_on(w6.p().start_backfill(&BackfillScope::Config, 1))
            .unwrap()
            .unwrap()
            .unwrap();
        block_on(
            w6.p()
                .backfill_transition(&b.backfill_id, BackfillAction::Cancel),
        )
        .unwrap()
        .unwrap()
        .unwrap();
        // Two identical starts at once: one starts, the other gives up
        // without abandoning the generation the first builds.
        w6.cfg.chunk_size_max_tokens = 104;
        let pa = w6.p_over(common::Interleaved(&w6.db));
        let pb = w6.p_over(common::Interleaved(&w6.db));
        let (ra, rb) = block_on(futures::future::join(
            pa.start_backfill(&BackfillScope::Config, 1),
            pb.start_backfill(&BackfillScope::Config, 1),
        ));
        assert_eq!(
            u8::from(ra.unwrap().is_ok()) + u8::from(rb.unwrap().is_ok()),
            1
        );
        past_every_retention(&w6);
        w.db.executed
            .borrow_mut()
            .extend(w6.db.executed.borrow().iter().copied());
    }

    // Tenants: create, list, disable and enable; tokens minted, listed,
    // authenticated and revoked; requests admitted; a quota refused.
    {
        use ingest_pipeline::core::credentials::Scopes;
        use ingest_pipeline::core::ids::{DocId, TenantId};
        use ingest_pipeline::core::state::TenantState;
        use ingest_pipeline::pipeline::{DocumentInput, IntakeError, IntakeItem, TokenGrant};
        use ingest_pipeline::store::Quotas;
        let w7 = common::World::new();
        let p = w7.p();
        let acme = TenantId::parse("acme").unwrap();
        let quotas = Quotas {
            documents_max: Some(1),
            ..Quotas::default()
        };
        block_on(p.create_tenant(&acme, &quotas)).unwrap().unwrap();
        assert_eq!(block_on(p.tenants("", 10)).unwrap().len(), 2);
        let t = block_on(p.mint_token(&acme, &Scopes::all(), &[1; 32]))
            .unwrap()
            .unwrap();
        assert!(matches!(
            block_on(p.token_grant(&t.token)).unwrap(),
            TokenGrant::Granted { .. }
        ));
        block_on(p.admit(&acme)).unwrap();
        block_on(p.tokens(&acme)).unwrap().unwrap();
        let put = |doc: &str| {
            IntakeItem::Put(DocumentInput {
                doc_id: DocId::parse(doc).unwrap(),
                text: "some text".into(),
                metadata: Default::default(),
                content_type: ingest_pipeline::core::chunk::ContentType::Plain,
            })
        };
        block_on(p.intake(&acme, &[put("one")])).unwrap();
        assert_eq!(
            block_on(p.intake(&acme, &[put("two")])).unwrap_err(),
            IntakeError::QuotaExceeded(ingest_pipeline::pipeline::Quota::Documents)
        );
        block_on(p.set_tenant_quotas(&acme, &Quotas::default()))
            .unwrap()
            .unwrap();
        block_on(p.set_tenant_state(&acme, TenantState::Disabled))
            .unwrap()
            .unwrap();
        block_on(p.revoke_token(&acme, &t.token_id))
            .unwrap()
            .unwrap();
        past_every_retention(&w7);
        w.db.executed
            .borrow_mut()
            .extend(w7.db.executed.borrow().iter().copied());
    }

    // A source sync: a session that writes, marks seen and commits in
    // pages, past its guard; an earlier one superseded; one expired.
    {
        use ingest_pipeline::core::ids::{DocId, TenantId};
        use ingest_pipeline::pipeline::{
            DocumentInput, IntakeItem, IntakeScope, SeenClaim, SourceWrite,
        };
        let w8 = World::with(ingest_pipeline::config::Config {
            sync_commit_page_size: 1,
            embedding_dimensions: 64,
            ..Default::default()
        });
        let p = w8.p();
        let t = TenantId::default_tenant();
        let src = SourceWrite {
            source: "docs".into(),
            sync_id: None,
        };
        let put = |doc: &str| {
            IntakeItem::Put(DocumentInput {
                doc_id: DocId::parse(doc).unwrap(),
                text: format!("text of {doc}"),
                metadata: Default::default(),
                content_type: ingest_pipeline::core::chunk::ContentType::Plain,
            })
        };
        block_on(p.intake_in(
            &t,
            &[put("s1"), put("s2"), put("s3")],
            IntakeScope::Source(&src),
        ))
        .unwrap();
        let early = block_on(p.open_sync(&t, "docs", &[1; 32]))
            .unwrap()
            .unwrap();
        let s = block_on(p.open_sync(&t, "docs", &[2; 32]))
            .unwrap()
            .unwrap();
        let in_s = SourceWrite {
            source: "docs".into(),
            sync_id: Some(s.sync_id.clone()),
        };
        block_on(p.intake_in(&t, &[put("s1")], IntakeScope::Source(&in_s))).unwrap();
        let claim = SeenClaim {
            doc_id: DocId::parse("s2").unwrap(),
            content_hash: ingest_pipeline::pipeline::content_hash(&DocumentInput {
                doc_id: DocId::parse("s2").unwrap(),
                text: "text of s2".into(),
                metadata: Default::default(),
                content_type: ingest_pipeline::core::chunk::ContentType::Plain,
            }),
        };
        assert_eq!(
            block_on(p.sync_mark_seen(&t, &s.sync_id, &[claim])).unwrap(),
            Ok(vec![true])
        );
        let done = block_on(p.commit_sync(&t, &s.sync_id, false))
            .unwrap()
            .unwrap();
        assert_eq!((done.deleted, done.state.as_str()), (1, "committed"));
        assert_eq!(
            block_on(p.sync_view(&t, &early.sync_id))
                .unwrap()
                .unwrap()
                .state
                .as_str(),
            "superseded"
        );
        // The guard: a session that saw nothing would delete all.
        let g = block_on(p.open_sync(&t, "docs", &[3; 32]))
            .unwrap()
            .unwrap();
        assert!(matches!(
            block_on(p.commit_sync(&t, &g.sync_id, false)).unwrap(),
            Err(ingest_pipeline::pipeline::Refused::SyncDeleteGuard { .. })
        ));
        // The tenant's listings: its documents (of a source), its sessions
        // (of a source).
        use ingest_pipeline::pipeline::DocumentFilter;
        let all = block_on(p.tenant_documents(&t, &DocumentFilter::default(), None, 2)).unwrap();
        assert_eq!(all.next_cursor.as_deref(), Some("s2"));
        let of_docs = DocumentFilter {
            source: Some("docs".into()),
            ..Default::default()
        };
        let page = block_on(p.tenant_documents(&t, &of_docs, None, 10)).unwrap();
        assert_eq!(page.documents.len(), 3);
        let syncs = block_on(p.sync_page(&t, None, None, None, 10)).unwrap();
        assert_eq!(syncs.syncs.len(), 3);
        let syncs = block_on(p.sync_page(&t, Some("docs"), None, None, 1)).unwrap();
        assert_eq!(syncs.syncs[0].sync_id, g.sync_id, "newest first");
        w8.clock
            .advance_ms(w8.cfg.sync_session_ttl_seconds as i64 * 1000 + 1);
        assert_eq!(w8.cron().syncs_expired, 1);
        past_every_retention(&w8);
        w.db.executed
            .borrow_mut()
            .extend(w8.db.executed.borrow().iter().copied());
    }

    // The console's reads: documents by state, a page of them, jobs over time.
    {
        let p = w.p();
        let summary = block_on(p.document_summary(None)).unwrap();
        assert!(summary.documents > 0);
        let default = ingest_pipeline::core::ids::TenantId::default_tenant();
        let own = block_on(p.document_summary(Some(&default))).unwrap();
        assert_eq!(
            own.documents, summary.documents,
            "every document is the default tenant's"
        );
        let page = block_on(p.document_page(None, None, None, 2)).unwrap();
        assert_eq!(page.documents.len(), 2);
        let now = w.clock.now_ms();
        let t = block_on(p.job_timeline(None, now - 3_600_000, now + 1, 600)).unwrap();
        assert_eq!(t.buckets.len(), 7);
    }

    // The local index on its own database.
    let vdb = SqliteDb::local_index();
    let idx = local_index(&vdb, 1000, 100);
    let mut md = std::collections::BTreeMap::new();
    md.insert("doc_id".to_string(), serde_json::json!("a"));
    let rec = VectorRecord {
        id: "v1".into(),
        namespace: "acme".into(),
        values: vec![1.0, 0.0, 0.0, 0.0],
        metadata: md.clone(),
    };
    block_on(idx.upsert(std::slice::from_ref(&rec))).unwrap();
    assert_eq!(block_on(idx.get_by_ids(&["v1".into()])).unwrap(), vec![rec]);
    let hits = block_on(idx.query(&[1.0, 0.0, 0.0, 0.0], 5, "acme", &md)).unwrap();
    assert_eq!(hits[0].id, "v1");
    // A query searches one namespace: another tenant's sees nothing.
    let other = block_on(idx.query(&[1.0, 0.0, 0.0, 0.0], 5, "default", &md)).unwrap();
    assert!(other.is_empty(), "{other:?}");
    // Unfiltered, a small namespace is read whole (exhaustive).
    let all = block_on(idx.query(&[1.0, 0.0, 0.0, 0.0], 5, "acme", &Default::default())).unwrap();
    assert_eq!(all[0].id, "v1");
    block_on(idx.delete_by_ids(&["v1".into()])).unwrap();
    assert!(block_on(idx.get_by_ids(&["v1".into()])).unwrap().is_empty());
    // Past its threshold (2 here), a namespace's vectors go into blocks: the
    // statements of placing, writing, reading and freeing them
    // (tests/it/local_index.rs covers their behaviour).
    let blocks = LocalIndex {
        tuning: ingest_pipeline::adapters::local_index::LocalIndexTuning {
            exhaustive_max: 2,
            block_vectors: 64,
            ..Default::default()
        },
        ..local_index(&vdb, 1000, 100)
    };
    let recs: Vec<VectorRecord> = (0..4)
        .map(|i| VectorRecord {
            id: format!("b{i}"),
            namespace: "acme".into(),
            values: vec![1.0, i as f32, 0.0, 0.5],
            metadata: md.clone(),
        })
        .collect();
    block_on(blocks.upsert(&recs[..3])).unwrap();
    block_on(blocks.upsert(&recs[3..])).unwrap();
    let hits =
        block_on(blocks.query(&[1.0, 3.0, 0.0, 0.5], 2, "acme", &Default::default())).unwrap();
    assert_eq!(hits[0].id, "b3");
    block_on(blocks.delete_by_ids(&["b3".into()])).unwrap();

    // A staging that leaves out a generation this Worker cannot embed for
    // (the local embedder's, after a deploy of Workers AI).
    {
        let mut w9 = World::with(ingest_pipeline::config::Config {
            embedding_dimensions: 1024,
            ..Default::default()
        });
        w9.put("s", "sigma tau");
        w9.deliver_all();
        w9.cfg = ingest_pipeline::config::Config::from_lookup(|n| match n {
            "EMBEDDER_BACKEND" => Some("workers-ai".into()),
            "EMBEDDING_MODEL" => Some("@cf/baai/bge-m3".into()),
            "EMBEDDING_DIMENSIONS" => Some("1024".into()),
            _ => None,
        })
        .unwrap();
        let e = common::ModelEmbedder::new(&w9.cfg);
        block_on(
            w9.p_with(&e)
                .start_backfill(&ingest_pipeline::pipeline::BackfillScope::Config, 1),
        )
        .unwrap()
        .unwrap();
        w9.put("s", "upsilon phi");
        w9.deliver_all_with(&e);
        w.db.executed
            .borrow_mut()
            .extend(w9.db.executed.borrow().iter().copied());
    }

    {
        // Shards (migration 0032): tenants placed by the policy, pinned and
        // dedicated; tokens through the directory; the listing across
        // shards; the shards' view; a revoked token.
        use ingest_pipeline::native::cluster::Cluster;
        let c = Cluster::with(ingest_pipeline::config::Config {
            shards: 3,
            ..w.cfg.clone()
        });
        let admin = "t-admin";
        let create = |body: serde_json::Value| {
            let r = c.request("POST", "/v1/admin/tenants", admin, Some(&body), 1);
            assert_eq!(r.status, 201, "{}", r.body);
        };
        create(serde_json::json!({ "tenant_id": "auto" }));
        create(serde_json::json!({ "tenant_id": "solo", "shard": 2, "dedicated": true }));
        let path = "/v1/admin/tenants/auto/tokens";
        let minted = c.request(
            "POST",
            path,
            admin,
            Some(&serde_json::json!({ "scopes": ["ingest"] })),
            2,
        );
        let token = minted.body["token"].as_str().unwrap().to_string();
        let body = serde_json::json!({ "text": "shards" });
        assert_eq!(
            c.request("PUT", "/v1/documents/d", &token, Some(&body), 0)
                .status,
            202
        );
        assert_eq!(
            c.request("PUT", "/v1/documents/d", "t-ingest", Some(&body), 0)
                .status,
            202
        );
        assert_eq!(
            c.request("GET", "/v1/admin/tenants", admin, None, 0).status,
            200
        );
        assert_eq!(
            c.request("GET", "/v1/admin/shards", admin, None, 0).status,
            200
        );
        let revoke = format!("{path}/{}", minted.body["token_id"].as_str().unwrap());
        assert_eq!(c.request("DELETE", &revoke, admin, None, 0).status, 200);
        for shard in &c.shards {
            w.db.executed
                .borrow_mut()
                .extend(shard.db.executed.borrow().iter().copied());
        }
    }

    {
        // Moves (migration 0033): a tenant with sources, a letter, a
        // token and a lost vector moved to another shard, cleaned, pruned;
        // another cancelled; the listing.
        use ingest_pipeline::native::cluster::Cluster;
        use ingest_pipeline::ports::VectorIndex;
        let c = Cluster::with(ingest_pipeline::config::Config {
            shards: 2,
            ..w.cfg.clone()
        });
        let admin = "t-admin";
        for (tenant, entropy) in [("mover", 3), ("stayer", 4)] {
            let body = serde_json::json!({ "tenant_id": tenant, "shard": 0 });
            let r = c.request("POST", "/v1/admin/tenants", admin, Some(&body), 1);
            assert_eq!(r.status, 201, "{}", r.body);
            let path = format!("/v1/admin/tenants/{tenant}/tokens");
            let body = serde_json::json!({ "scopes": ["ingest", "search"] });
            let r = c.request("POST", &path, admin, Some(&body), entropy);
            let token = r.body["token"].as_str().unwrap().to_string();
            for doc in ["a", "b"] {
                let body = serde_json::json!({ "text": format!("{tenant} {doc} words"), "source": "files" });
                let r = c.request(
                    "PUT",
                    &format!("/v1/documents/{doc}"),
                    &token,
                    Some(&body),
                    0,
                );
                assert_eq!(r.status, 202, "{}", r.body);
            }
        }
        c.deliver_all();
        c.shards[0].db.inspect_batch(
            "INSERT INTO dead_letters (job_id, message_id, doc_id, version, first_seen, last_seen)
             SELECT job_id, 'm', doc_id, version, 1, 1 FROM jobs WHERE tenant_id = 'mover' LIMIT 1",
        );
        #[derive(serde::Deserialize)]
        struct Id {
            vector_id: String,
        }
        let lost: Vec<Id> = c.shards[0].db.inspect(
            "SELECT vector_id FROM chunks WHERE tenant_id = 'mover' LIMIT 1",
            vec![],
        );
        block_on(
            c.shards[0]
                .index
                .delete_by_ids(&[lost[0].vector_id.clone()]),
        )
        .unwrap();
        // The bystander's move: its first copy cut short before its rows
        // (its vectors and their intents left), then cancelled.
        let cancelled = c.request(
            "POST",
            "/v1/admin/tenants/stayer/move",
            admin,
            Some(&serde_json::json!({ "shard": 1 })),
            6,
        );
        let id = cancelled.body["move_id"].as_str().unwrap().to_string();
        c.shards[1]
            .db
            .fail_sql
            .replace(Some((sql::MOVE_DOCS_UPSERT, FailureBucket::DbUnavailable)));
        c.clock.advance_ms(60_000);
        c.cron();
        assert_eq!(
            c.request(
                "POST",
                &format!("/v1/admin/moves/{id}/cancel"),
                admin,
                None,
                0
            )
            .status,
            200
        );
        let moved = c.request(
            "POST",
            "/v1/admin/tenants/mover/move",
            admin,
            Some(&serde_json::json!({ "shard": 1 })),
            5,
        );
        assert_eq!(moved.status, 202, "{}", moved.body);
        for _ in 0..40 {
            c.clock.advance_ms(60_000);
            c.cron();
        }
        c.clock
            .advance_ms(c.cfg.history_retention_seconds as i64 * 1000 + 1);
        c.cron();
        assert_eq!(
            c.request("GET", "/v1/admin/moves", admin, None, 0).status,
            200
        );
        for shard in &c.shards {
            w.db.executed
                .borrow_mut()
                .extend(shard.db.executed.borrow().iter().copied());
        }
    }

    let mut ran: BTreeSet<&str> = w.db.executed.borrow().clone();
    ran.extend(vdb.executed.borrow().iter().copied());
    let missing: Vec<&str> = sql::ALL
        .iter()
        .filter(|(_, s)| !ran.contains(s))
        .map(|(n, _)| *n)
        .collect();
    assert!(
        missing.is_empty(),
        "statements never run by the flows: {missing:?}"
    );
}

#[test]
fn local_index_enforces_vectorize_limits() {
    let vdb = SqliteDb::local_index();
    let idx = local_index(&vdb, 2, 2);
    let mut md = std::collections::BTreeMap::new();
    md.insert("doc_id".to_string(), serde_json::json!("a"));
    let rec = |id: &str, dims: usize| VectorRecord {
        id: id.into(),
        namespace: "default".into(),
        values: vec![0.5; dims],
        metadata: md.clone(),
    };
    let code = |r: Result<(), ingest_pipeline::ports::PortError>| r.unwrap_err().code;
    assert_eq!(
        code(block_on(idx.upsert(&[
            rec("a", 4),
            rec("b", 4),
            rec("c", 4)
        ]))),
        "upsert_batch_too_large"
    );
    assert_eq!(
        code(block_on(idx.upsert(&[rec(&"x".repeat(65), 4)]))),
        "vector_id_length"
    );
    assert_eq!(code(block_on(idx.upsert(&[rec("a", 3)]))), "dimensions");
    let ids: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    assert_eq!(
        code(block_on(idx.delete_by_ids(&ids))),
        "delete_batch_too_large"
    );
}

/// The query plan of `stmt` on a fresh ledger (no statistics: D1 runs no
/// `ANALYZE`), one line per step.
fn query_plan(stmt: &str, params: usize) -> Vec<String> {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    for (_, m) in LEDGER_MIGRATIONS {
        db.execute_batch(m).unwrap();
    }
    let mut q = db.prepare(&format!("EXPLAIN QUERY PLAN {stmt}")).unwrap();
    let nulls: Vec<rusqlite::types::Null> = vec![rusqlite::types::Null; params];
    q.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_page_finds_kept_chunks_by_their_vector_id_not_by_scanning_the_live_version() {
    // The kept-chunk check looks one vector ID up per staged row: through
    // `chunks_by_vector`, not the (doc, version, generation, chunk) key,
    // which would scan every row of the live version for each one
    // (quadratic: 100 s for a 33,000-chunk edit).
    let plan = query_plan(sql::CONSUME_PAGE, 5);
    assert!(
        plan.iter()
            .any(|l| l.contains("SEARCH o USING INDEX chunks_by_vector")),
        "{plan:#?}"
    );
    // The replace finds the rows it stops serving by the version that
    // closed them (`chunks_closed`), not by reading the document's rows.
    let plan = query_plan(sql::COMMIT_INTENTS_FOR_REPLACED, 3);
    assert!(
        plan.iter().any(|l| l.contains(
            "SEARCH c USING INDEX chunks_closed (doc_id=? AND to_version>? AND to_version<?)"
        )),
        "{plan:#?}"
    );
}

/// The keyword statements walk only the JSON page they are given, and
/// look each of its rows up by key: the page is the outer loop (a chunk
/// row is a seek of `chunks_by_doc` or of its rowid), never the inner one,
/// which would parse the page again for every row of the document
/// (local D1 stalled on a 1,100-chunk staging that way).
#[test]
fn the_keyword_statements_seek_each_row_of_their_page() {
    for (name, stmt, params, seek) in [
        (
            "KEYWORD_STAGE",
            sql::KEYWORD_STAGE,
            3,
            "SEARCH c USING INDEX chunks_by_vector (vector_id=?)",
        ),
        (
            "KEYWORD_STAGE_COUNT",
            sql::KEYWORD_STAGE_COUNT,
            3,
            "SEARCH c USING INDEX chunks_by_vector (vector_id=?)",
        ),
        (
            "KEYWORD_UNINDEXED_COUNT",
            sql::KEYWORD_UNINDEXED_COUNT,
            1,
            "SEARCH c USING INTEGER PRIMARY KEY (rowid=?)",
        ),
        (
            "KEYWORD_UNINDEXED_ENTER",
            sql::KEYWORD_UNINDEXED_ENTER,
            1,
            "SEARCH c USING INTEGER PRIMARY KEY (rowid=?)",
        ),
        (
            "KEYWORD_UNINDEXED_MARK",
            sql::KEYWORD_UNINDEXED_MARK,
            1,
            "SEARCH chunks USING INTEGER PRIMARY KEY (rowid=?)",
        ),
    ] {
        let plan = query_plan(stmt, params);
        let page = plan
            .iter()
            .position(|l| l.contains("json_each") || l.starts_with("SCAN j"));
        let row = plan.iter().position(|l| l == seek);
        assert!(
            matches!((page, row), (Some(p), Some(r)) if p < r),
            "{name}: {plan:#?}"
        );
        assert!(
            !plan
                .iter()
                .any(|l| l.starts_with("SCAN c") || l.starts_with("SCAN chunks")),
            "{name}: {plan:#?}"
        );
    }
    // The search scores the rows holding a term, then seeks each one's
    // chunk: never every chunk of the generation with the scores scanned
    // for each.
    let plan = query_plan(sql::KEYWORD_CHUNKS, 8);
    let scores = plan.iter().position(|l| l == "SCAN s");
    assert!(
        scores.is_some_and(|s| plan.get(s + 1).map(String::as_str)
            == Some("SEARCH c USING INTEGER PRIMARY KEY (rowid=?)")),
        "{plan:#?}"
    );
    assert!(
        !plan.iter().any(|l| l.contains("chunks_by_generation")),
        "{plan:#?}"
    );
}

/// The tenant's listings read through an index whatever the table's size:
/// a page is a range of `documents_by_tenant (tenant_id, doc_id)`, of
/// `source_documents_by_source (tenant_id, source, doc_id)`, of
/// `syncs_by_tenant (tenant_id, seq)` (migration 0016) or of
/// `syncs_by_source (tenant_id, source, seq)`, in the index's order (no
/// sort, no scan of the table).
#[test]
fn a_tenant_listing_reads_a_range_of_an_index() {
    for (name, stmt, params, wanted) in [
        (
            "TENANT_DOCUMENT_KEYS_PAGE",
            sql::TENANT_DOCUMENT_KEYS_PAGE,
            3,
            "SEARCH documents USING INDEX documents_by_tenant (tenant_id=? AND doc_id>?)",
        ),
        (
            "SOURCE_DOCUMENT_KEYS_PAGE",
            sql::SOURCE_DOCUMENT_KEYS_PAGE,
            4,
            "SEARCH sd USING COVERING INDEX source_documents_by_source (tenant_id=? AND source=? AND doc_id>?)",
        ),
        (
            "SYNCS_PAGE",
            sql::SYNCS_PAGE,
            3,
            "SEARCH s USING INDEX syncs_by_tenant (tenant_id=? AND seq<?)",
        ),
        (
            "SOURCE_SYNCS_PAGE",
            sql::SOURCE_SYNCS_PAGE,
            4,
            "SEARCH s USING INDEX syncs_by_source (tenant_id=? AND source=? AND seq<?)",
        ),
    ] {
        let plan = query_plan(stmt, params);
        assert!(plan.iter().any(|l| l == wanted), "{name}: {plan:#?}");
        assert!(
            !plan
                .iter()
                .any(|l| l.starts_with("SCAN") || l.contains("TEMP B-TREE")),
            "{name}: {plan:#?}"
        );
    }
    // Each document of a source is joined by its key.
    let plan = query_plan(sql::SOURCE_DOCUMENT_KEYS_PAGE, 4);
    assert!(
        plan.iter()
            .any(|l| l.starts_with("SEARCH d USING INDEX sqlite_autoindex_documents_1 (doc_id=?)")),
        "{plan:#?}"
    );
}

#[test]
fn retention_reads_through_indexes_never_a_scan() {
    // Every prune statement finds its page through an index (cron runs
    // them every few minutes, whatever the size of the history); the only
    // table walked is the JSON list of the page it was given.
    let stmts = [
        ("COMMIT_MARK_SUPERSEDED", sql::COMMIT_MARK_SUPERSEDED, 3),
        ("PRUNE_TEXT_PAGE", sql::PRUNE_TEXT_PAGE, 2),
        ("PRUNE_TEXT_BYTES", sql::PRUNE_TEXT_BYTES, 1),
        ("PRUNE_TEXT_PARTS", sql::PRUNE_TEXT_PARTS, 1),
        ("PRUNE_TEXT_MARK", sql::PRUNE_TEXT_MARK, 1),
        ("PRUNE_VERSIONS_PAGE", sql::PRUNE_VERSIONS_PAGE, 2),
        ("PRUNE_VERSION_JOBS", sql::PRUNE_VERSION_JOBS, 2),
        ("PRUNE_VERSION_ROWS", sql::PRUNE_VERSION_ROWS, 2),
        ("PRUNE_REPAIR_RUNS", sql::PRUNE_REPAIR_RUNS, 2),
        ("PRUNE_REVOKED_TOKENS", sql::PRUNE_REVOKED_TOKENS, 2),
        ("PRUNE_SYNCS_PAGE", sql::PRUNE_SYNCS_PAGE, 2),
        ("PRUNE_SYNC_SEEN", sql::PRUNE_SYNC_SEEN, 2),
        ("PRUNE_SYNC_DELETES", sql::PRUNE_SYNC_DELETES, 2),
        ("PRUNE_SYNC_ROWS", sql::PRUNE_SYNC_ROWS, 1),
        ("PRUNE_BACKFILLS_PAGE", sql::PRUNE_BACKFILLS_PAGE, 2),
        ("PRUNE_BACKFILL_JOBS", sql::PRUNE_BACKFILL_JOBS, 2),
        ("PRUNE_BACKFILL_ITEMS", sql::PRUNE_BACKFILL_ITEMS, 2),
        ("PRUNE_BACKFILL_ROWS", sql::PRUNE_BACKFILL_ROWS, 1),
        ("PRUNE_REDRIVES_PAGE", sql::PRUNE_REDRIVES_PAGE, 2),
        ("PRUNE_REDRIVE_AUDIT", sql::PRUNE_REDRIVE_AUDIT, 2),
        ("PRUNE_REDRIVE_ITEMS", sql::PRUNE_REDRIVE_ITEMS, 2),
        ("PRUNE_REDRIVE_ROWS", sql::PRUNE_REDRIVE_ROWS, 1),
    ];
    let mut scans = Vec::new();
    for (name, stmt, params) in stmts {
        let plan = query_plan(stmt, params);
        eprintln!("{name}:\n  {}", plan.join("\n  "));
        for line in plan {
            let walks = line.starts_with("SCAN ")
                && !line.contains("json_each")
                && !line.starts_with("SCAN k");
            // An equality on a state walks every row in that state.
            let by_state = line.contains("_by_state (state=?)");
            if walks || by_state || line.contains("USE TEMP B-TREE FOR ORDER BY") {
                scans.push(format!("{name}: {line}"));
            }
        }
    }
    assert!(scans.is_empty(), "{scans:#?}");
}

#[test]
fn the_dead_letter_page_reads_its_range_in_order_and_pages_through_ties() {
    // Letters with equal `last_seen` (the cursor's tie-break is the job
    // ID), two tenants and two buckets: every page in order, every letter
    // once, whatever the filter, with the window as a range of the index.
    let db = rusqlite::Connection::open_in_memory().unwrap();
    for (_, m) in LEDGER_MIGRATIONS {
        db.execute_batch(m).unwrap();
    }
    let seen = [5, 5, 5, 7, 7, 9, 3, 5];
    for (i, s) in seen.iter().enumerate() {
        let (tenant, bucket) = if i % 2 == 0 {
            ("", "internal")
        } else {
            ("t\u{1f}", "db_busy")
        };
        db.execute(
            "INSERT INTO dead_letters (job_id, message_id, doc_id, version, failure_bucket, first_seen, last_seen)
             VALUES (?1, 'm', ?2, 1, ?3, 0, ?4)",
            rusqlite::params![format!("j{i}"), format!("{tenant}d{i}"), bucket, s],
        )
        .unwrap();
    }
    type Filter = (
        Option<&'static str>,
        Option<i64>,
        Option<i64>,
        Option<&'static str>,
    );
    let page = |f: Filter, cursor: Option<String>| -> Vec<(String, i64)> {
        let row =
            |r: &rusqlite::Row| Ok((r.get::<_, String>("job_id")?, r.get::<_, i64>("last_seen")?));
        let rows: Vec<_> = match f.3 {
            Some(t) => {
                let mut q = db.prepare(sql::TENANT_DEAD_LETTERS_PAGE).unwrap();
                let p = rusqlite::params![f.0, None::<String>, f.1, f.2, cursor, 3, t];
                q.query_map(p, row).unwrap().map(Result::unwrap).collect()
            }
            None => {
                let mut q = db.prepare(sql::DEAD_LETTERS_PAGE).unwrap();
                let p = rusqlite::params![f.0, None::<String>, f.1, f.2, cursor, 3];
                q.query_map(p, row).unwrap().map(Result::unwrap).collect()
            }
        };
        rows
    };
    let filters: [Filter; 4] = [
        (None, None, None, None),
        (None, Some(5), Some(7), None),
        (Some("internal"), None, None, None),
        (None, None, Some(5), Some("t")),
    ];
    for f in filters {
        let mut want: Vec<(String, i64)> = seen
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                (f.0.is_none() || f.0 == Some(if i % 2 == 0 { "internal" } else { "db_busy" }))
                    && f.1.is_none_or(|since| **s >= since)
                    && f.2.is_none_or(|until| **s <= until)
                    && (f.3.is_none() || (f.3 == Some("t") && i % 2 == 1))
            })
            .map(|(i, s)| (format!("j{i}"), *s))
            .collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let (mut got, mut cursor) = (Vec::new(), None);
        loop {
            let rows = page(f, cursor.clone());
            got.extend(rows.iter().cloned());
            match rows.last() {
                Some((job, s)) if rows.len() == 3 => cursor = Some(format!("{s}|{job}")),
                _ => break,
            }
        }
        assert_eq!(got, want, "filter {f:?}");
    }
}

/// Migration 0029: retention prunes repair runs from the oldest ID, a page
/// of the key at a time. A run recorded out of its start's order (two
/// runs overlapped) is kept until it is due itself, never pruned early;
/// those due past the page behind it wait for it (minutes, for runs that
/// overlapped).
#[test]
fn repair_runs_are_pruned_oldest_id_first_and_never_before_they_are_due() {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    for (_, m) in LEDGER_MIGRATIONS {
        db.execute_batch(m).unwrap();
    }
    for started in [10, 30, 20, 40, 15] {
        db.execute(
            "INSERT INTO repair_runs (started_at, finished_at, report, budget_hit) VALUES (?1, ?1, '{}', 0)",
            [started],
        )
        .unwrap();
    }
    let left = |db: &rusqlite::Connection| -> Vec<i64> {
        let mut q = db
            .prepare("SELECT started_at FROM repair_runs ORDER BY run_id")
            .unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    // A page of the 3 oldest IDs, due before 25: the runs started at 10
    // and 20 go, the one at 30 (recorded between them) stays.
    let pruned = db
        .execute(sql::PRUNE_REPAIR_RUNS, rusqlite::params![25, 3])
        .unwrap();
    assert_eq!((pruned, left(&db)), (2, vec![30, 40, 15]));
    // The next page is IDs 2 to 4 (3 is gone): 30 and 40 are not due,
    // and 15 (ID 5) is past the page: nothing goes.
    let pruned = db
        .execute(sql::PRUNE_REPAIR_RUNS, rusqlite::params![25, 3])
        .unwrap();
    assert_eq!((pruned, left(&db)), (0, vec![30, 40, 15]));
    // Once 30 is due, it goes, and the page after it reaches 15.
    let pruned = db
        .execute(sql::PRUNE_REPAIR_RUNS, rusqlite::params![35, 3])
        .unwrap();
    assert_eq!((pruned, left(&db)), (1, vec![40, 15]));
    let pruned = db
        .execute(sql::PRUNE_REPAIR_RUNS, rusqlite::params![35, 3])
        .unwrap();
    assert_eq!((pruned, left(&db)), (1, vec![40]));
}
