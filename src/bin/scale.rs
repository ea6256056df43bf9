//! `make bench-scale`: the ledger's statements on a million-document ledger
//! (issue 36, item 4). Measured, not asserted.
//!
//! 1. Builds, in a file under the system's temporary directory, a ledger
//!    through the real migrations, filled with generated SQL (not through
//!    the pipeline): a large tenant `big` and a small one `small`; their
//!    documents, each with one live version (one text part, named by its
//!    manifest), its chunk rows (generation 1, open, in the keyword index
//!    with terms scoped as `core::terms` makes them), one ended job;
//!    due cleanup intents of vectors no row refers to; dead letters; the
//!    repair runs of 30 days of cron. The counters the ledger keeps
//!    (`generations.chunk_rows`, the tenants' usage, keyword totals and
//!    document counts, the dead letters' groups; triggers are dropped
//!    while the tables fill) are recounts. It prints how long each step took and the file's size.
//! 2. Times the statements of the request, consumer, cron and console
//!    paths, and the operators' one-off actions, with realistic parameters: each 5 times, a write inside a
//!    savepoint rolled back after it (the ledger does not change between
//!    runs), and prints one table per path: the median, the rows returned
//!    or changed, the plan (`EXPLAIN QUERY PLAN`, lines joined by `; `).
//!    The consumer's statements run on an edit of a document of `big`
//!    (version 2: two rows closed, three new), each after the edit's
//!    statements before it, untimed, in the same savepoint.
//!
//! Sizes (environment): `SCALE_DOCS` (1,000,000), `SCALE_SMALL_DOCS`
//! (1,000, of tenant `small`; the rest are `big`'s), `SCALE_CHUNKS_PER_DOC`
//! (5), `SCALE_JOBS` (one per document), `SCALE_INTENTS` (one per
//! document), `SCALE_LETTERS` (10,000), `SCALE_REPAIR_RUNS` (8,640: every
//! 5 minutes for 30 days). Nothing reads the clock: "now" is fixed.
//! `SCALE_CHECK=1` also checks the built ledger (foreign keys, the keyword
//! index's integrity, `PRAGMA quick_check`) before timing it.
//!
//! Native only: on wasm32 (the Worker build) this binary is an empty `main`.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    scale::main();
}

#[cfg(not(target_arch = "wasm32"))]
mod scale {
    use ingest_pipeline::config::Config;
    use ingest_pipeline::core::ids::sha256_hex;
    use ingest_pipeline::core::terms;
    use ingest_pipeline::native::sim::Rng;
    use ingest_pipeline::native::LEDGER_MIGRATIONS;
    use ingest_pipeline::store::sql;
    use rusqlite::types::Value;
    use rusqlite::{params_from_iter, Connection};
    use serde_json::json;
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    /// "Now", in ms since the epoch (2027-01-15): nothing reads the clock.
    const NOW: i64 = 1_800_000_000_000;
    const DAY_MS: i64 = 86_400_000;
    /// Jobs, documents, intents and letters changed over the last 30 days.
    const WINDOW_MS: i64 = 30 * DAY_MS;
    /// Distinct chunk texts (a prime): chunk row `r` has text `r·M mod TEXTS`.
    const TEXTS: i64 = 4099;
    const RUNS: usize = 5;
    const SLOW_MS: f64 = 5.0;
    /// `JOB_LEASE_SECONDS`' default, in ms.
    const LEASE_MS: i64 = 960_000;
    /// Odd multipliers: `x·M mod 2^32` is a bijection of 32-bit `x`.
    const M: [u64; 7] = [
        2_654_435_761,
        2_246_822_519,
        3_266_489_917,
        668_265_263,
        374_761_393,
        1_597_334_677,
        3_812_015_801,
    ];

    pub fn main() {
        let sizes = Sizes::from_env();
        let path = std::env::temp_dir().join("ingest-scale.sqlite");
        let started = Instant::now();
        build::ledger(&path, &sizes);
        let build_s = started.elapsed().as_secs_f64();
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "\nBuilt in {build_s:.1} s: {} ({:.1} MB, {:.0} bytes per document)\n",
            path.display(),
            bytes as f64 / 1e6,
            bytes as f64 / sizes.docs as f64
        );
        let conn = Connection::open(&path).expect("open the ledger");
        conn.execute_batch("PRAGMA foreign_keys = ON;")
            .expect("pragma");
        build::print_totals(&conn);
        let ctx = Ctx::new(&conn, &sizes);
        timing::report(&conn, &ctx);
    }

    // ---------------------------------------------------------------- sizes

    pub struct Sizes {
        pub docs: i64,
        pub small: i64,
        pub per_doc: i64,
        pub jobs: i64,
        pub intents: i64,
        pub letters: i64,
        pub runs: i64,
    }

    impl Sizes {
        fn from_env() -> Sizes {
            let get = |name: &str, default: i64| -> i64 {
                std::env::var(name)
                    .ok()
                    .and_then(|v| v.trim().replace('_', "").parse().ok())
                    .unwrap_or(default)
            };
            let docs = get("SCALE_DOCS", 1_000_000).max(2);
            Sizes {
                docs,
                small: get("SCALE_SMALL_DOCS", 1_000).clamp(1, docs - 1),
                per_doc: get("SCALE_CHUNKS_PER_DOC", 5).max(1),
                jobs: get("SCALE_JOBS", docs).max(0),
                intents: get("SCALE_INTENTS", docs).max(0),
                letters: get("SCALE_LETTERS", 10_000).max(0),
                runs: get("SCALE_REPAIR_RUNS", 8_640).max(0),
            }
        }

        pub fn big(&self) -> i64 {
            self.docs - self.small
        }

        pub fn chunks(&self) -> i64 {
            self.docs * self.per_doc
        }
    }

    // ---------------------------------------------------------------- SQL expressions

    /// `x·m mod 2^32` as 8 hex digits.
    fn hx(x: &str, m: u64) -> String {
        format!("printf('%08x', (({x}) * {m}) % 4294967296)")
    }

    /// The key of document `g` (0 ≤ g < docs): `small`'s first, then `big`'s,
    /// each numbered from 0 (`core::ids::DocKey`).
    fn key(g: &str, s: &Sizes) -> String {
        format!(
            "(CASE WHEN ({g}) < {small} THEN 'small' || char(31) || 'doc-' || ({g}) \
             ELSE 'big' || char(31) || 'doc-' || (({g}) - {small}) END)",
            small = s.small
        )
    }

    /// 32 hex digits standing for `sha256(key)` of document `g`.
    fn doc_hash(g: &str) -> String {
        let parts: Vec<String> = M[..4].iter().map(|m| hx(g, *m)).collect();
        parts.join(" || ")
    }

    /// A vector ID as `core::ids::vector_id` shapes it: the document's 32
    /// hex digits, `.`, 24 hex digits distinct for each distinct `r`.
    fn vector(g: &str, r: &str) -> String {
        format!(
            "{} || '.' || {} || {} || {}",
            doc_hash(g),
            hx(r, M[4]),
            hx(r, M[5]),
            hx(r, M[6])
        )
    }

    /// 64 hex digits, distinct for each `x`.
    fn hash64(x: &str) -> String {
        let parts: Vec<String> = M
            .iter()
            .chain(&M[..1])
            .enumerate()
            .map(|(i, m)| hx(&format!("({x}) + {i}"), *m))
            .collect();
        parts.join(" || ")
    }

    /// A UUID-shaped ID, distinct for each `x` (for one `salt`).
    fn uuid(x: &str, salt: i64) -> String {
        format!(
            "printf('%08x-%04x-5%03x-a%03x-%08x%04x', (({x}) * {} + {salt}) % 4294967296, \
             (({x}) * {}) % 65536, (({x}) * {}) % 4096, (({x}) * {}) % 4096, (({x}) * {}) % 4294967296, \
             (({x}) * {}) % 65536)",
            M[0], M[1], M[2], M[3], M[4], M[5]
        )
    }

    /// A time in the last 30 days, spread by `x`.
    fn spread(x: &str) -> String {
        format!("({NOW} - ((({x}) * {}) % {WINDOW_MS}))", M[0])
    }

    /// The text of chunk row `r` (an ID of `scale_texts`).
    fn text_of(r: &str) -> String {
        format!("((({r}) * {}) % {TEXTS})", M[1])
    }

    /// `0, 1, …, n − 1` as the recursive CTE `seq(i)`.
    fn seq(n: i64) -> String {
        format!("WITH RECURSIVE seq(i) AS (SELECT 0 WHERE {n} > 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < {n})")
    }

    // ---------------------------------------------------------------- the build

    mod build {
        use super::*;

        /// The tables the build fills: their indexes are dropped while it
        /// does and made again after (a sort, not millions of B-tree inserts).
        const FILLED: &[&str] = &[
            "documents",
            "versions",
            "version_parts",
            "chunks",
            "jobs",
            "cleanup_intents",
            "dead_letters",
            "repair_runs",
        ];

        pub fn ledger(path: &Path, s: &Sizes) {
            for suffix in ["", "-journal", "-wal", "-shm"] {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
            let conn = Connection::open(path).expect("create the ledger");
            conn.execute_batch(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY;
                 PRAGMA cache_size = -2000000; PRAGMA locking_mode = EXCLUSIVE;",
            )
            .expect("build pragmas");
            println!(
                "## Ledger: {} documents ({} of `big`, {} of `small`), {} chunk rows, {} jobs, {} intents, {} dead letters, {} repair runs\n",
                s.docs, s.big(), s.small, s.chunks(), s.jobs, s.intents, s.letters, s.runs
            );
            println!("| build step | seconds |\n|---|---:|");
            step("migrations", || {
                for (_, m) in LEDGER_MIGRATIONS {
                    conn.execute_batch(m).expect("migration");
                }
            });
            step("tenants and texts", || tenants_and_texts(&conn));
            let indexes = step("drop the filled tables' indexes and triggers", || {
                drop_indexes(&conn)
            });
            fill(&conn, s);
            step("indexes and triggers again", || {
                for sql in &indexes {
                    conn.execute_batch(sql).expect("index");
                }
            });
            step("recounts", || recount(&conn));
            step("document counts (migration 0026's recount)", || {
                migration_tail(
                    &conn,
                    "0026_",
                    "-- The counts of the documents already written.",
                )
            });
            step("dead-letter groups (migration 0028's recount)", || {
                migration_tail(
                    &conn,
                    "0028_",
                    "-- What the letters already archived add up to.",
                )
            });
            conn.execute_batch("DROP TABLE temp.scale_texts; DROP TABLE temp.scale_kw;")
                .expect("drop temporaries");
            if std::env::var("SCALE_CHECK").is_ok_and(|v| v == "1") {
                step("checks (SCALE_CHECK=1)", || check(&conn));
            }
        }

        /// The built ledger holds: every foreign key, the keyword index's
        /// structure, SQLite's own checks.
        fn check(conn: &Connection) {
            let broken: i64 = conn
                .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                    r.get(0)
                })
                .expect("foreign key check");
            assert_eq!(broken, 0, "rows whose foreign key is broken");
            conn.execute_batch(
                "INSERT INTO keyword_index (keyword_index, rank) VALUES ('integrity-check', 0);",
            )
            .expect("keyword index integrity");
            let ok: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .expect("quick check");
            assert_eq!(ok, "ok", "quick_check");
        }

        fn step<T>(what: &str, f: impl FnOnce() -> T) -> T {
            let t = Instant::now();
            let out = f();
            println!("| {what} | {:.1} |", t.elapsed().as_secs_f64());
            out
        }

        fn fill(conn: &Connection, s: &Sizes) {
            step("documents", || run(conn, &documents(s)));
            step("versions", || run(conn, &versions(s)));
            step("version_parts", || run(conn, &parts(s)));
            step("chunks", || run(conn, &chunks(s)));
            step("keyword_index", || run(conn, &keyword_entries(s)));
            step("jobs", || run(conn, &jobs(s)));
            step("cleanup_intents", || run(conn, &intents(s)));
            step("dead_letters", || run(conn, &letters(s)));
            step("repair_runs", || run(conn, &repair_runs(s)));
        }

        fn run(conn: &Connection, sql: &str) {
            if let Err(e) = conn.execute_batch(sql) {
                panic!("{e}\n{sql}");
            }
        }

        /// The two tenants (their keyword keys from the trigger), and the
        /// texts chunks are made of, with each tenant's terms.
        fn tenants_and_texts(conn: &Connection) {
            let at = NOW - WINDOW_MS - DAY_MS;
            conn.execute_batch(&format!(
                "INSERT INTO tenants (tenant_id, state, created_at, updated_at) VALUES ('big', 'active', {at}, {at});
                 INSERT INTO tenants (tenant_id, state, created_at, updated_at) VALUES ('small', 'active', {at}, {at});
                 CREATE TEMP TABLE scale_texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL, hash TEXT NOT NULL,
                   bytes INTEGER NOT NULL, len INTEGER NOT NULL, terms_big TEXT NOT NULL, terms_small TEXT NOT NULL);"
            ))
            .expect("tenants");
            let keyword_key = |t: &str| -> i64 {
                conn.query_row(
                    "SELECT keyword_key FROM tenants WHERE tenant_id = ?1",
                    [t],
                    |r| r.get(0),
                )
                .expect("keyword key")
            };
            let (big, small) = (keyword_key("big"), keyword_key("small"));
            let tx = conn.unchecked_transaction().expect("transaction");
            {
                let mut insert = tx
                    .prepare("INSERT INTO scale_texts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                    .expect("prepare");
                for (id, text) in vocabulary::texts(TEXTS as usize).iter().enumerate() {
                    let (terms_big, len) = terms::index_document(big, text);
                    let (terms_small, _) = terms::index_document(small, text);
                    let row: [Value; 7] = [
                        Value::Integer(id as i64),
                        Value::Text(text.clone()),
                        Value::Text(sha256_hex(text.as_bytes())),
                        Value::Integer(text.len() as i64),
                        Value::Integer(i64::from(len)),
                        Value::Text(terms_big),
                        Value::Text(terms_small),
                    ];
                    insert.execute(params_from_iter(row)).expect("text");
                }
            }
            tx.commit().expect("commit");
        }

        /// Drops the indexes of the filled tables; returns their SQL.
        fn drop_indexes(conn: &Connection) -> Vec<String> {
            let names = FILLED
                .iter()
                .map(|t| format!("'{t}'"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut q = conn
                .prepare(&format!(
                    "SELECT type || ' ' || name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL AND tbl_name IN ({names})"
                ))
                .expect("indexes");
            let found: Vec<(String, String)> = q
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .expect("indexes")
                .map(|r| r.expect("index row"))
                .collect();
            // The triggers too: migration 0026's would look each new job's
            // document up, row by row, through indexes dropped here.
            for (name, _) in &found {
                conn.execute_batch(&format!("DROP {name}"))
                    .expect("drop index or trigger");
            }
            found.into_iter().map(|(_, sql)| sql).collect()
        }

        fn documents(s: &Sizes) -> String {
            format!(
                "{seq} INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at,
                   plain_write_seq, rows_stamp)
                 SELECT {key}, 1, 1, 0, {at} - 60000, {at}, 0, 1 FROM seq ORDER BY 1",
                seq = seq(s.docs),
                key = key("i", s),
                at = spread("i"),
            )
        }

        /// Version 1 of each document: its text is one part (the text of
        /// its first chunk), named by its manifest.
        fn versions(s: &Sizes) -> String {
            format!(
                "{seq} INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes,
                   part_count, chunk_count, created_at, index_config, parts)
                 SELECT {key}, 1, 0, {hash}, 'text/plain', '{{}}', t.bytes, 1, {k}, {at} - 60000, {cfg},
                   json_array(json_array(1, 0, substr(t.hash, 1, 32)))
                 FROM seq CROSS JOIN temp.scale_texts t ON t.id = {text} ORDER BY 1",
                seq = seq(s.docs),
                key = key("i", s),
                hash = hash64("i"),
                k = s.per_doc,
                at = spread("i"),
                cfg = quote(&Config::default().index_config()),
                text = text_of(&format!("i * {}", s.per_doc)),
            )
        }

        fn parts(s: &Sizes) -> String {
            format!(
                "{seq} INSERT INTO version_parts (doc_id, version, part, text, to_version)
                 SELECT {key}, 1, 0, t.text, NULL FROM seq CROSS JOIN temp.scale_texts t ON t.id = {text} ORDER BY 1",
                seq = seq(s.docs),
                key = key("i", s),
                text = text_of(&format!("i * {}", s.per_doc)),
            )
        }

        /// Chunk row `r = g·k + o` (document `g`, order `o`) has chunk ID
        /// `r + 1`.
        fn chunks(s: &Sizes) -> String {
            format!(
                "{seq}, ks(o) AS (SELECT 0 UNION ALL SELECT o + 1 FROM ks WHERE o + 1 < {k})
                 INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash,
                   text, keyword_len)
                 SELECT i * {k} + o + 1, {key}, 1, NULL, 1, o, {vector}, t.hash, t.text, t.len
                 FROM seq CROSS JOIN ks CROSS JOIN temp.scale_texts t ON t.id = {text}",
                seq = seq(s.docs),
                k = s.per_doc,
                key = key("i", s),
                vector = vector("i", &format!("i * {} + o", s.per_doc)),
                text = text_of(&format!("i * {} + o", s.per_doc)),
            )
        }

        /// Each row's entry, with its tenant's scoped terms (as
        /// `KEYWORD_STAGE` writes it).
        fn keyword_entries(s: &Sizes) -> String {
            format!(
                "INSERT INTO keyword_index (rowid, terms)
                 SELECT c.chunk_id, CASE WHEN (c.chunk_id - 1) / {k} < {small} THEN t.terms_small ELSE t.terms_big END
                 FROM chunks c CROSS JOIN temp.scale_texts t ON t.id = {text}",
                k = s.per_doc,
                small = s.small,
                text = text_of("c.chunk_id - 1"),
            )
        }

        fn jobs(s: &Sizes) -> String {
            format!(
                "{seq} INSERT INTO jobs (job_id, doc_id, version, kind, state, step, attempts, created_at, updated_at,
                   chunks_done, invocations, subrequests_d1, subrequests_embed, subrequests_index, subrequests_peak,
                   chunks_embedded, rows_total, d1_rows_read, d1_rows_written)
                 SELECT {id}, {key}, 1, 'index', 'succeeded', 'committed', 1, {at} - 5000, {at},
                   {k}, 1, 9, 1, 1, 11, {k}, {k}, 40, {k} * 4 + 10 FROM seq ORDER BY 1",
                seq = seq(s.jobs),
                id = uuid("i", 0),
                key = key(&format!("i % {}", s.docs), s),
                at = spread("i"),
                k = s.per_doc,
            )
        }

        /// Due intents of vectors no row refers to (row numbers past the
        /// chunks'), spread over the documents.
        fn intents(s: &Sizes) -> String {
            let g = format!("i % {}", s.docs);
            format!(
                "{seq} INSERT INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
                 SELECT {vector}, {key}, 1, 'abandoned', 0, 0, {at} FROM seq ORDER BY 1",
                seq = seq(s.intents),
                vector = vector(&g, &format!("{} + i", s.chunks())),
                key = key(&g, s),
                at = spread("i + 7"),
            )
        }

        fn letters(s: &Sizes) -> String {
            let g = format!("(i * 997) % {}", s.docs);
            format!(
                "{seq} INSERT INTO dead_letters (job_id, message_id, doc_id, version, job_state, job_step, failure_bucket,
                   attempts, chunk_count, first_seen, last_seen, times_seen)
                 SELECT {id}, 'msg-' || i, {key}, 1, 'dead', 'ended',
                   CASE i % 4 WHEN 0 THEN 'embed_rate_limited' WHEN 1 THEN 'index_unavailable'
                              WHEN 2 THEN 'internal' ELSE 'input_invalid' END,
                   30, {k}, {at} - 3600000, {at}, 1 + i % 3 FROM seq ORDER BY 1",
                seq = seq(s.letters),
                id = uuid("i", 12_345),
                key = key(&g, s),
                k = s.per_doc,
                at = spread("i + 3"),
            )
        }

        /// One run every 5 minutes; one in 100 touched `small`.
        fn repair_runs(s: &Sizes) -> String {
            let both = r#"{"intents_deleted":100,"tenants":{"big":{"intents_deleted":90},"small":{"intents_deleted":10}}}"#;
            let big = r#"{"intents_deleted":100,"tenants":{"big":{"intents_deleted":100}}}"#;
            format!(
                "{seq} INSERT INTO repair_runs (started_at, finished_at, report, budget_hit)
                 SELECT {NOW} - ({n} - i) * 300000, {NOW} - ({n} - i) * 300000 + 1500,
                   CASE WHEN i % 100 = 0 THEN '{both}' ELSE '{big}' END, 0 FROM seq",
                seq = seq(s.runs),
                n = s.runs,
            )
        }

        /// What the ledger counts, recounted: generation 1's rows, the
        /// tenants' documents and bytes (migrations 0009, 0018), and their
        /// keyword rows and tokens.
        fn recount(conn: &Connection) {
            let at = NOW - WINDOW_MS - DAY_MS;
            conn.execute_batch(&format!(
                "UPDATE generations SET chunk_rows = (SELECT count(*) FROM chunks c WHERE c.generation = generations.generation),
                   index_config = {cfg}, created_at = {at}, updated_at = {at};
                 CREATE TEMP TABLE scale_kw AS
                   SELECT tenant_id, count(*) AS n, coalesce(sum(keyword_len), 0) AS s FROM chunks GROUP BY tenant_id;
                 UPDATE tenants SET
                   keyword_rows = coalesce((SELECT n FROM temp.scale_kw k WHERE k.tenant_id = tenants.tenant_id), 0),
                   keyword_tokens = coalesce((SELECT s FROM temp.scale_kw k WHERE k.tenant_id = tenants.tenant_id), 0),
                   documents = (SELECT count(*) FROM documents d JOIN versions v ON v.doc_id = d.doc_id
                                AND v.version = d.latest_version WHERE d.tenant_id = tenants.tenant_id AND v.is_delete = 0),
                   bytes = (SELECT coalesce(sum(v.text_bytes), 0) FROM versions v WHERE v.tenant_id = tenants.tenant_id
                            AND v.is_delete = 0 AND v.part_count > 0 AND v.text_version IS NULL);",
                cfg = quote(&Config::default().index_config()),
            ))
            .expect("recounts");
        }

        /// A migration's own recount, from `marker` on (its own step: what
        /// the migration costs on a ledger this size): 0026's documents by
        /// state, 0028's dead letters by group.
        fn migration_tail(conn: &Connection, migration: &str, marker: &str) {
            let (_, m) = LEDGER_MIGRATIONS
                .iter()
                .find(|(name, _)| name.starts_with(migration))
                .expect("the migration");
            let tail = m.split(marker).nth(1).expect("the migration's recount");
            conn.execute_batch(tail).expect("the recount");
        }

        fn quote(s: &str) -> String {
            format!("'{}'", s.replace('\'', "''"))
        }

        pub fn print_totals(conn: &Connection) {
            println!(
                "| tenant | keyword key | documents | bytes | keyword rows | keyword tokens |"
            );
            println!("|---|---:|---:|---:|---:|---:|");
            let mut q = conn
                .prepare(
                    "SELECT tenant_id, keyword_key, documents, bytes, keyword_rows, keyword_tokens
                     FROM tenants ORDER BY tenant_id",
                )
                .expect("tenants");
            let rows = q
                .query_map([], |r| {
                    Ok(format!(
                        "| {} | {} | {} | {} | {} | {} |",
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?
                    ))
                })
                .expect("tenants");
            for row in rows {
                println!("{}", row.expect("tenant row"));
            }
            let (pages, size): (i64, i64) = conn
                .query_row(
                    "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT page_size FROM pragma_page_size())",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .expect("pages");
            println!("\n{pages} pages of {size} bytes.\n");
        }
    }

    // ---------------------------------------------------------------- texts

    mod vocabulary {
        use super::*;

        /// Words most texts hold (the first ones most): a query of the first
        /// three matches a large share of the rows.
        pub const COMMON: [&str; 50] = [
            "index", "data", "search", "report", "system", "query", "vector", "document", "record",
            "service", "update", "value", "result", "table", "field", "policy", "account",
            "client", "server", "stream", "window", "market", "energy", "garden", "travel",
            "health", "budget", "signal", "network", "engine", "weather", "library", "station",
            "harbor", "village", "museum", "kitchen", "forest", "river", "planet", "canvas",
            "ticket", "castle", "rocket", "pepper", "violin", "anchor", "saddle", "lantern",
            "marble",
        ];

        /// Made-up words, each rare.
        fn tail(rng: &mut Rng) -> Vec<String> {
            const SYLLABLES: [&str; 24] = [
                "ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "de", "po", "ga", "hu", "ze", "bi",
                "fo", "ja", "qu", "re", "sa", "ti", "wo", "xe", "ya", "nu",
            ];
            (0..2000)
                .map(|_| {
                    (0..2 + rng.below(3))
                        .map(|_| SYLLABLES[rng.below(24) as usize])
                        .collect::<String>()
                })
                .collect()
        }

        /// `n` texts of about 80 bytes: half their words common (skewed to
        /// the first), half rare.
        pub fn texts(n: usize) -> Vec<String> {
            let mut rng = Rng::new(36);
            let rare = tail(&mut rng);
            (0..n)
                .map(|_| {
                    let mut t = String::new();
                    while t.len() < 80 {
                        if !t.is_empty() {
                            t.push(' ');
                        }
                        if rng.below(2) == 0 {
                            let i = rng.below(50).min(rng.below(50)) as usize;
                            t.push_str(COMMON[i]);
                        } else {
                            t.push_str(&rare[rng.below(rare.len() as u64) as usize]);
                        }
                    }
                    t.push('.');
                    t
                })
                .collect()
        }
    }

    // ---------------------------------------------------------------- parameters

    /// One invocation's usage, `job_usage!`'s parameters `?2`–`?11`
    /// (`JOB_ADD_USAGE`, `COMMIT_FINISH_JOB`).
    fn usage() -> Vec<Value> {
        [9, 1, 1, 0, 5, 0, 11, 0, 40, 30].map(int).to_vec()
    }

    fn text(s: impl Into<String>) -> Value {
        Value::Text(s.into())
    }

    fn int(i: i64) -> Value {
        Value::Integer(i)
    }

    const NULL: Value = Value::Null;

    /// A statement of `sql::ALL` by name.
    fn statement(name: &str) -> Option<&'static str> {
        sql::ALL.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }

    /// One statement with its parameters (a step of the edit, or a case).
    pub type Step = (&'static str, Vec<Value>);

    /// A keyword search's two statements' parameters, as
    /// `store::chunks::keyword_chunks` makes them, and what they match.
    pub struct Keyword {
        /// The tenant and the query, as the cases' label says it.
        pub label: String,
        /// The label with each term's row count and the rows matched.
        pub note: String,
        pub stats: Vec<Value>,
        pub chunks: Option<Vec<Value>>,
        pub matched: i64,
    }

    /// What the cases need from the built ledger.
    pub struct Ctx {
        pub sizes_note: String,
        pub big_doc: String,
        pub small_doc: String,
        pub big_job: String,
        pub mid_vector: String,
        pub candidates: String,
        pub due_intents: String,
        pub doc_intents: i64,
        pub intents_total: i64,
        pub keys_100: String,
        /// `RETIRE_INTENTS`' note and parameters, for the form it has.
        pub retire: (&'static str, Vec<Value>),
        pub big_kw: Keyword,
        pub small_kw: Keyword,
        pub edit: Vec<Step>,
    }

    fn one<T: rusqlite::types::FromSql>(conn: &Connection, q: &str, p: &[Value]) -> T {
        conn.query_row(q, params_from_iter(p), |r| r.get(0))
            .unwrap_or_else(|e| panic!("{e}: {q}"))
    }

    fn column(conn: &Connection, q: &str, p: &[Value]) -> Vec<String> {
        let mut stmt = conn.prepare(q).expect("prepare");
        let rows = stmt
            .query_map(params_from_iter(p), |r| r.get::<_, String>(0))
            .expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    impl Ctx {
        fn new(conn: &Connection, s: &Sizes) -> Ctx {
            let big_n = s.big() / 2;
            let big_doc = format!("big\u{1f}doc-{big_n}");
            let small_doc = format!("small\u{1f}doc-{}", s.small / 2);
            let big_job = one(
                conn,
                "SELECT job_id FROM jobs WHERE doc_id = ?1 ORDER BY job_id LIMIT 1",
                &[text(&big_doc)],
            );
            let step = (s.big() * s.per_doc / 50).max(1);
            let ids: Vec<i64> = (0..50)
                .map(|i| s.small * s.per_doc + 1 + i * step)
                .collect();
            let candidates = column(
                conn,
                "SELECT c.vector_id FROM json_each(?1) j JOIN chunks c ON c.chunk_id = j.value",
                &[text(json!(ids).to_string())],
            );
            let keys: Vec<String> = (0..100)
                .map(|i| format!("big\u{1f}doc-{}", (big_n + i * 7919) % s.big()))
                .collect();
            Ctx {
                sizes_note: format!("{} documents", s.docs),
                mid_vector: one(
                    conn,
                    "SELECT vector_id FROM chunks WHERE doc_id = ?1 ORDER BY ord LIMIT 1",
                    &[text(&big_doc)],
                ),
                candidates: json!(candidates).to_string(),
                due_intents: json!(column(
                    conn,
                    "SELECT vector_id FROM cleanup_intents WHERE not_before <= ?1 ORDER BY not_before, vector_id LIMIT 100",
                    &[int(NOW)],
                ))
                .to_string(),
                doc_intents: one(
                    conn,
                    "SELECT count(*) FROM cleanup_intents WHERE doc_id = ?1",
                    &[text(&big_doc)],
                ),
                intents_total: one(conn, "SELECT count(*) FROM cleanup_intents", &[]),
                keys_100: json!(keys).to_string(),
                retire: retire_params(conn),
                big_kw: keyword(conn, "big", &vocabulary::COMMON[..3].join(" ")),
                small_kw: keyword(conn, "small", &small_query(conn, &small_doc)),
                edit: edit::steps(conn, &big_doc),
                big_doc,
                small_doc,
                big_job,
            }
        }
    }

    /// `RETIRE_INTENTS`' parameters: a page of cron's walk over the
    /// documents (`?1` now, `?2` limit, keys in (`?3`, `?4`]: the first
    /// 1,000 documents).
    fn retire_params(conn: &Connection) -> (&'static str, Vec<Value>) {
        let last: String = one(
            conn,
            "SELECT max(doc_id) FROM (SELECT doc_id FROM documents ORDER BY doc_id LIMIT 1000)",
            &[],
        );
        let page = vec![int(NOW), int(1000), text(""), text(last)];
        ("1000, a page of the first 1000 documents", page)
    }

    /// The small tenant's query: a common word and the rarest word of
    /// one of its chunks.
    fn small_query(conn: &Connection, small_doc: &str) -> String {
        let t: String = one(
            conn,
            "SELECT text FROM chunks WHERE doc_id = ?1 ORDER BY ord LIMIT 1",
            &[text(small_doc)],
        );
        let rare = t
            .trim_end_matches('.')
            .split(' ')
            .find(|w| !vocabulary::COMMON.contains(w))
            .unwrap_or("kalo")
            .to_string();
        format!("{} {rare}", vocabulary::COMMON[10])
    }

    /// `KEYWORD_STATS`' and `KEYWORD_CHUNKS`' parameters for `query` by
    /// `tenant`, the second from the first's answer (as the store does).
    fn keyword(conn: &Connection, tenant: &str, query: &str) -> Keyword {
        let q = terms::query_terms(query, 32);
        let cap = Config::default().keyword_matches_max;
        let stats = vec![
            text(json!(q).to_string()),
            text(tenant),
            int(cap as i64 + 1),
        ];
        let stats_sql = statement("KEYWORD_STATS").unwrap_or("SELECT NULL WHERE 0");
        let row = conn.query_row(stats_sql, params_from_iter(&stats), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        });
        let Ok((key, rows, tokens, df)) = row else {
            let note = format!("{tenant}: {query:?}, KEYWORD_STATS failed");
            return Keyword {
                label: format!("{tenant}: {query:?}"),
                note,
                stats,
                chunks: None,
                matched: 0,
            };
        };
        // What the pipeline ranks (`KEYWORD_MATCHES_MAX`), from the
        // statement's counts; the counts themselves, whole, from the
        // vocabulary (not timed), for the uncapped ranking timed below.
        let capped: Vec<(String, u64)> = serde_json::from_str(&df).unwrap_or_default();
        let (kept, skipped) = terms::within_matches(&capped, cap);
        let df: Vec<(String, i64)> = q
            .iter()
            .map(|t| {
                let n = one(
                    conn,
                    "SELECT coalesce((SELECT doc FROM keyword_terms WHERE term = ?1), 0)",
                    &[text(terms::scoped(key, t))],
                );
                (t.clone(), n)
            })
            .collect();
        let weights: Vec<serde_json::Value> = df
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| json!({"t": terms::scoped(key, t), "w": terms::idf(rows as u64, *n as u64)}))
            .collect();
        let scoped: Vec<String> = q
            .iter()
            .map(|t| format!("\"{}\"", terms::scoped(key, t)))
            .collect();
        let matched = one(
            conn,
            "SELECT count(*) FROM keyword_index WHERE keyword_index MATCH ?1",
            &[text(scoped.join(" OR "))],
        );
        let chunks = vec![
            text(serde_json::Value::Array(weights).to_string()),
            int(1),
            text(tenant),
            NULL,
            int(15),
            Value::Real(terms::BM25_K1),
            Value::Real(terms::BM25_B),
            Value::Real(tokens.max(1) as f64 / rows.max(1) as f64),
        ];
        let kept: Vec<&str> = kept.iter().map(|(t, _)| t.as_str()).collect();
        let note = format!(
            "{tenant}: {query:?}, terms' rows {df:?}, {matched} rows hold one (the pipeline ranks {kept:?}, leaves out {skipped:?}: KEYWORD_MATCHES_MAX = {cap})"
        );
        Keyword {
            label: format!("{tenant}: {query:?}"),
            note,
            stats,
            chunks: Some(chunks),
            matched,
        }
    }

    // ---------------------------------------------------------------- the edit

    /// An edit of a document of `big` as the pipeline makes it: intake of
    /// version 2 (a new part beside the first), its job claimed, its rows
    /// staged (two of the five closed, three new, in the keyword index),
    /// then the replace. Each consumer case runs after the steps before it.
    mod edit {
        use super::*;

        pub const JOB: &str = "scale-edit-job";

        pub fn steps(conn: &Connection, doc: &str) -> Vec<Step> {
            let rows: Vec<(i64, String)> = {
                let mut q = conn
                    .prepare(
                        "SELECT chunk_id, vector_id FROM chunks WHERE doc_id = ?1 ORDER BY ord",
                    )
                    .expect("prepare");
                let found = q
                    .query_map([doc], |r| Ok((r.get(0)?, r.get(1)?)))
                    .expect("rows");
                found.map(|r| r.expect("row")).collect()
            };
            let key: i64 = one(
                conn,
                "SELECT keyword_key FROM tenants WHERE tenant_id = 'big'",
                &[],
            );
            let prefix = rows
                .first()
                .map_or("0".repeat(32), |(_, v)| v[..32].to_string());
            let closed: Vec<i64> = rows.iter().rev().take(2).map(|(id, _)| *id).collect();
            let kept = rows.len().saturating_sub(2) as f64;
            let new: Vec<(String, String, f64)> = (0..3)
                .map(|i| {
                    let words = format!(
                        "edited paragraph {i} about {} and kalomi",
                        vocabulary::COMMON[i]
                    );
                    (
                        format!("{prefix}.{:024x}", 0xed17 + i),
                        words,
                        kept + i as f64,
                    )
                })
                .collect();
            let mut steps = intake(doc);
            steps.extend(stage(doc, key, &closed, &new));
            steps.extend(commit(doc));
            steps
        }

        fn intake(doc: &str) -> Vec<Step> {
            let part = "edited paragraph, the second part of the text.";
            let manifest = json!([
                [1, 0, "0".repeat(32)],
                [2, 1, &sha256_hex(part.as_bytes())[..32]]
            ]);
            let version = json!([{
                "doc_id": doc, "version": 2, "is_delete": 0, "content_hash": sha256_hex(b"v2"),
                "content_type": "text/plain", "metadata": "{}", "text_bytes": 140, "part_count": 2,
                "parts": manifest.to_string(),
            }]);
            vec![
                (
                    "INTAKE_UPSERT_DOCUMENTS",
                    vec![
                        text(json!([{"doc_id": doc, "version": 2}]).to_string()),
                        int(NOW),
                        int(1),
                    ],
                ),
                (
                    "INTAKE_INSERT_VERSIONS",
                    vec![text(version.to_string()), int(NOW)],
                ),
                (
                    "INTAKE_INSERT_PARTS_BULK",
                    vec![text(
                        json!([{"doc_id": doc, "version": 2, "part": 1, "text": part}]).to_string(),
                    )],
                ),
                (
                    "INTAKE_INSERT_JOBS",
                    vec![
                        text(
                            json!([{"job_id": JOB, "doc_id": doc, "version": 2, "kind": "index"}])
                                .to_string(),
                        ),
                        int(NOW),
                    ],
                ),
            ]
        }

        fn stage(doc: &str, key: i64, closed: &[i64], new: &[(String, String, f64)]) -> Vec<Step> {
            let rows: Vec<serde_json::Value> = new
                .iter()
                .map(|(id, t, o)| {
                    let (_, n) = terms::index_document(key, t);
                    json!({"g": 1, "o": o, "id": id, "h": sha256_hex(t.as_bytes()), "t": t, "n": n})
                })
                .collect();
            let entries: Vec<serde_json::Value> = new
                .iter()
                .map(|(id, t, _)| json!({"id": id, "g": 1, "k": terms::index_document(key, t).0}))
                .collect();
            let counted: Vec<serde_json::Value> = new
                .iter()
                .map(|(id, _, _)| json!({"id": id, "g": 1}))
                .collect();
            let (d, v) = (text(doc), int(2));
            vec![
                (
                    "CONSUME_CLAIM",
                    vec![
                        text(JOB),
                        int(NOW),
                        int(NOW + LEASE_MS),
                        text("scale-lease"),
                    ],
                ),
                (
                    "CONSUME_STAGE_STAMP_GUARD",
                    vec![d.clone(), int(1), v.clone(), int(0)],
                ),
                ("CONSUME_STAGE_STAMP", vec![d.clone()]),
                (
                    "CONSUME_STAGE_CLOSE",
                    vec![d.clone(), v.clone(), text(json!(closed).to_string())],
                ),
                (
                    "CONSUME_STAGE_CHUNKS",
                    vec![d.clone(), v.clone(), text(json!(rows).to_string()), NULL],
                ),
                (
                    "KEYWORD_STAGE",
                    vec![d.clone(), v.clone(), text(json!(entries).to_string())],
                ),
                (
                    "KEYWORD_STAGE_COUNT",
                    vec![d.clone(), v.clone(), text(json!(counted).to_string())],
                ),
                (
                    "GENERATION_ROWS_STAGED",
                    vec![text(json!([[1, new.len()]]).to_string())],
                ),
                (
                    "CONSUME_STAGE_DEAD_INTENTS",
                    vec![d.clone(), v.clone(), int(NOW)],
                ),
                ("CONSUME_STAGE_GUARD", vec![d.clone(), v.clone(), int(NOW)]),
                (
                    "CONSUME_SET_CHUNK_COUNT",
                    vec![
                        d.clone(),
                        v.clone(),
                        int(6),
                        text(Config::default().index_config()),
                    ],
                ),
                ("CONSUME_STAGED", vec![text(JOB), int(NOW), d, v, NULL]),
            ]
        }

        fn commit(doc: &str) -> Vec<Step> {
            let p = || vec![text(doc), int(2), int(NOW)];
            vec![
                ("COMMIT_INTENTS_FOR_REPLACED", p()),
                ("COMMIT_MARK_SUPERSEDED", p()),
                ("COMMIT_SET_LIVE", p()),
                ("COMMIT_INTENTS_FOR_LOSER", p()),
                (
                    "COMMIT_FINISH_JOB",
                    [vec![text(JOB)], usage(), vec![text(doc), int(2), int(NOW)]].concat(),
                ),
            ]
        }
    }

    // ---------------------------------------------------------------- cases

    #[derive(Clone, Copy, PartialEq)]
    pub enum Route {
        Request,
        Consumer,
        Cron,
        Console,
        /// An operator's action, run once per backfill pass or redrive
        /// plan (by cron or the admin API), not per request, job or run.
        Operator,
    }

    pub struct Case {
        pub path: Route,
        pub name: &'static str,
        pub note: String,
        pub params: Vec<Value>,
        /// How many of the edit's steps run first (untimed).
        pub setup: usize,
    }

    fn case(path: Route, name: &'static str, note: &str, params: Vec<Value>) -> Case {
        Case {
            path,
            name,
            note: note.to_string(),
            params,
            setup: 0,
        }
    }

    mod cases {
        use super::*;

        pub fn all(ctx: &Ctx) -> Vec<Case> {
            let mut out = request(ctx);
            out.extend(edit_cases(ctx));
            out.extend(consumer(ctx));
            out.extend(cron(ctx));
            out.extend(console());
            out.extend(operator());
            out
        }

        fn request(ctx: &Ctx) -> Vec<Case> {
            use Route::Request as R;
            let mut out = vec![
                case(
                    R,
                    "TENANT_TAKE_REQUEST",
                    "big",
                    vec![text("big"), int(NOW / 60_000), int(6000)],
                ),
                case(
                    R,
                    "LATEST_VERSIONS",
                    "100 keys of big",
                    vec![text(&ctx.keys_100)],
                ),
                case(
                    R,
                    "DOCUMENT_VIEWS",
                    "one document of big",
                    vec![text(json!([ctx.big_doc]).to_string())],
                ),
                case(R, "JOB_VIEW", "a job of big", vec![text(&ctx.big_job)]),
                case(
                    R,
                    "TENANT_DOCUMENT_KEYS_PAGE",
                    "small, first page of 50",
                    vec![text("small"), text(""), int(50)],
                ),
                case(
                    R,
                    "TENANT_DOCUMENT_KEYS_PAGE",
                    "big, 50 from the middle",
                    vec![text("big"), text(&ctx.big_doc), int(50)],
                ),
                case(
                    R,
                    "DOCUMENT_KEYS_PAGE",
                    "50 from the middle",
                    vec![text(&ctx.big_doc), int(50)],
                ),
            ];
            out.extend(search(ctx));
            out.push(case(
                R,
                "TENANT_QUOTA_GUARD",
                "big, one document",
                vec![
                    text("big"),
                    int(1),
                    int(1_000_000),
                    int(140),
                    int(1_000_000_000),
                ],
            ));
            out.push(case(
                R,
                "TENANT_ADD_USAGE",
                "big",
                vec![text("big"), int(1), int(140)],
            ));
            out
        }

        /// A search's statements: the vector candidates' rows, and each
        /// tenant's keyword query.
        fn search(ctx: &Ctx) -> Vec<Case> {
            use Route::Request as R;
            let mut out = vec![case(
                R,
                "LIVE_CHUNKS_BY_VECTOR_ID",
                "50 candidates of big",
                vec![text(&ctx.candidates), int(1), text("big")],
            )];
            for kw in [&ctx.small_kw, &ctx.big_kw] {
                out.push(case(R, "KEYWORD_STATS", &kw.label, kw.stats.clone()));
                if let Some(p) = &kw.chunks {
                    // Every term ranked, whatever KEYWORD_MATCHES_MAX
                    // leaves out: what one unbounded ranking costs.
                    let note = format!(
                        "{}, {} rows matched, every term ranked",
                        kw.label, kw.matched
                    );
                    out.push(case(R, "KEYWORD_CHUNKS", &note, p.clone()));
                }
            }
            out
        }

        /// Every step of the edit, each after the steps before it.
        fn edit_cases(ctx: &Ctx) -> Vec<Case> {
            ctx.edit
                .iter()
                .enumerate()
                .map(|(i, (name, params))| {
                    let path = if name.starts_with("INTAKE_") {
                        Route::Request
                    } else {
                        Route::Consumer
                    };
                    let mut c = case(
                        path,
                        name,
                        "edit of one document of big, v2",
                        params.clone(),
                    );
                    c.setup = i;
                    c
                })
                .collect()
        }

        /// The consumer's pages and its cleanup of one document, on the
        /// ledger as built and during the edit.
        fn pages_and_cleanup(ctx: &Ctx) -> Vec<Case> {
            use Route::Consumer as C;
            let staged = ctx
                .edit
                .iter()
                .position(|(n, _)| *n == "COMMIT_INTENTS_FOR_REPLACED")
                .unwrap_or(0);
            let d = || text(&ctx.big_doc);
            let claim_doc = vec![d(), int(NOW), int(100), int(NOW + LEASE_MS)];
            let mut page = case(
                C,
                "CONSUME_PAGE",
                "edit v2, first page of 100",
                vec![d(), int(2), int(0), int(100), NULL],
            );
            page.setup = staged;
            let mut claim_after = case(
                C,
                "INTENTS_CLAIM_DOC",
                "after the edit's replace",
                claim_doc.clone(),
            );
            claim_after.setup = ctx.edit.len();
            let intents = format!(
                "big document with {} of {} intents",
                ctx.doc_intents, ctx.intents_total
            );
            vec![
                case(
                    C,
                    "CONSUME_PAGE",
                    "version 1 (live), first page of 100",
                    vec![d(), int(1), int(0), int(100), NULL],
                ),
                page,
                case(C, "INTENTS_CLAIM_DOC", &intents, claim_doc),
                claim_after,
            ]
        }

        fn consumer(ctx: &Ctx) -> Vec<Case> {
            use Route::Consumer as C;
            let d = || text(&ctx.big_doc);
            let mut out = vec![
                case(C, "CONSUME_LOAD", "a job of big", vec![text(&ctx.big_job)]),
                case(
                    C,
                    "CONSUME_LOAD_PARTS",
                    "version 1 of big",
                    vec![d(), int(1)],
                ),
                case(
                    C,
                    "CONSUME_LOAD_PARTS",
                    "version 1 of small",
                    vec![text(&ctx.small_doc), int(1)],
                ),
                case(C, "CONSUME_OPEN_ROWS", "big", vec![d()]),
            ];
            out.extend(pages_and_cleanup(ctx));
            out.extend([
                case(
                    C,
                    "JOB_ADD_USAGE",
                    "a job of big",
                    [vec![text(&ctx.big_job)], usage()].concat(),
                ),
                case(
                    C,
                    "TENANT_ADD_D1_ROWS",
                    "a job of big",
                    vec![text(&ctx.big_job), int(40), int(30)],
                ),
            ]);
            out
        }

        fn cron(ctx: &Ctx) -> Vec<Case> {
            use Route::Cron as K;
            let history = NOW - 2_592_000_000;
            let mut out: Vec<Case> = statement("RETIRE_DOCS_PAGE")
                .map(|_| {
                    let p = vec![text("retire_docs"), int(1000)];
                    case(K, "RETIRE_DOCS_PAGE", "1000, none retiring", p)
                })
                .into_iter()
                .collect();
            out.extend([
                case(K, "INTENTS_RETIRE_ROWS", "1000", vec![int(1000), int(NOW)]),
                case(K, "INTENTS_RETIRE", "1000", vec![int(1000), int(NOW)]),
                case(
                    K,
                    "INTENTS_CLAIM",
                    "100 of any document",
                    vec![NULL, int(NOW), int(100), int(NOW + LEASE_MS)],
                ),
                case(
                    K,
                    "INTENTS_DONE_DELETE_CHUNKS",
                    "100 claimed",
                    vec![text(&ctx.due_intents)],
                ),
                case(
                    K,
                    "INTENTS_DONE_DELETE",
                    "100 claimed",
                    vec![text(&ctx.due_intents)],
                ),
                case(K, "SWEEP_PAGE", "1000", vec![int(1000)]),
                case(
                    K,
                    "SWEEP_ABANDONED",
                    "a page of 1000 rows",
                    vec![
                        int(NOW),
                        text(json!((1..=1000).collect::<Vec<i64>>()).to_string()),
                    ],
                ),
                case(
                    K,
                    "STALLED_JOBS",
                    "100",
                    vec![int(NOW), int(NOW - 900_000), int(100)],
                ),
                case(
                    K,
                    "VERIFY_LIVE_CHUNKS",
                    "first page of 100",
                    vec![int(NOW - 300_000), text(""), int(100)],
                ),
                case(
                    K,
                    "VERIFY_LIVE_CHUNKS",
                    "100 after a cursor",
                    vec![int(NOW - 300_000), text(&ctx.mid_vector), int(100)],
                ),
                case(K, "RETIRE_INTENTS", ctx.retire.0, ctx.retire.1.clone()),
                case(K, "GENERATIONS_RETIRED", "", vec![int(NOW)]),
                case(K, "PRUNE_TEXT_PAGE", "500", vec![int(NOW), int(500)]),
                case(
                    K,
                    "PRUNE_VERSIONS_PAGE",
                    "500",
                    vec![int(history), int(500)],
                ),
                case(K, "PRUNE_REPAIR_RUNS", "500", vec![int(history), int(500)]),
                case(K, "KEYWORD_UNINDEXED_PAGE", "500", vec![int(500)]),
            ]);
            out.extend(backfill());
            out
        }

        /// A backfill's cron steps: its pages (each walks at most 250
        /// documents, `BACKFILL_WALK_MAX`'s default; 1000 beside it), what
        /// the end of a pass reads, and the switch's checks.
        fn backfill() -> Vec<Case> {
            use Route::Cron as K;
            let page = |filter: Value, generation: Value, tenant: Value| {
                vec![text(""), filter, generation, int(50), tenant, int(250)]
            };
            let walk = |n: i64| vec![text(""), NULL, int(1), int(50), NULL, int(n)];
            let switch = || vec![int(1), int(NOW), NULL, NULL];
            vec![
                case(
                    K,
                    "BACKFILL_PAGE",
                    "generation 1: a pass that finds every document built, 1000 walked",
                    walk(1000),
                ),
                case(
                    K,
                    "BACKFILL_PAGE",
                    "generation 1: a pass that finds every document built, 250 walked",
                    page(NULL, int(1), NULL),
                ),
                case(
                    K,
                    "BACKFILL_PAGE",
                    "a filter no document matches, 250 walked",
                    page(text(r#"{"lang":"xx"}"#), NULL, NULL),
                ),
                case(
                    K,
                    "BACKFILL_PAGE",
                    "the small tenant, every document re-run",
                    page(NULL, NULL, text("small")),
                ),
                case(K, "BACKFILL_PENDING", "", vec![text("none")]),
                case(K, "GENERATION_IN_FLIGHT", "generation 1", vec![int(1)]),
                case(K, "GENERATION_SWITCH_RETIRE_OLDER", "its checks", switch()),
                case(K, "GENERATION_SWITCH_RETAIN", "its checks", switch()),
            ]
        }

        fn operator() -> Vec<Case> {
            use Route::Operator as P;
            let candidates = |t: Value| vec![NULL, NULL, NULL, NULL, int(1000), t];
            vec![
                case(
                    P,
                    "BACKFILL_TOTAL",
                    "every tenant, no filter",
                    vec![NULL, NULL],
                ),
                case(P, "BACKFILL_TOTAL", "small", vec![NULL, text("small")]),
                case(
                    P,
                    "REDRIVE_CANDIDATES",
                    "first 1000 of every letter",
                    candidates(NULL),
                ),
                case(
                    P,
                    "REDRIVE_CANDIDATES",
                    "small's first 1000",
                    candidates(text("small")),
                ),
            ]
        }

        fn console() -> Vec<Case> {
            use Route::Console as O;
            let hour = vec![int(NOW - 3_600_000), int(NOW), int(60_000), NULL];
            let month = vec![int(NOW - WINDOW_MS), int(NOW), int(WINDOW_MS / 500), NULL];
            // What the console's overview asks for (console.js).
            let six_hours = |tenant| vec![int(NOW - 6 * 3_600_000), int(NOW), int(900_000), tenant];
            let letters = |t: Option<Value>| {
                let mut p = vec![NULL, NULL, NULL, NULL, NULL, int(50)];
                p.extend(t);
                p
            };
            vec![
                case(O, "GENERATIONS_LIST", "", vec![]),
                case(O, "TENANTS_PAGE", "first 50", vec![text(""), int(50)]),
                case(O, "DOCUMENT_COUNTS", "every tenant", vec![]),
                case(O, "TENANT_DOCUMENT_COUNTS", "small", vec![text("small")]),
                case(O, "TENANT_DOCUMENT_COUNTS", "big", vec![text("big")]),
                case(O, "RUNNING_DOCUMENTS", "every tenant", vec![]),
                case(O, "TENANT_RUNNING_DOCUMENTS", "big", vec![text("big")]),
                case(O, "JOBS_TIMELINE", "last hour, 1-minute buckets", hour),
                case(
                    O,
                    "JOBS_TIMELINE",
                    "last hour, small",
                    vec![int(NOW - 3_600_000), int(NOW), int(60_000), text("small")],
                ),
                case(
                    O,
                    "JOBS_TIMELINE",
                    "the console's: 6 hours, 15-minute buckets",
                    six_hours(NULL),
                ),
                case(
                    O,
                    "JOBS_TIMELINE",
                    "the console's of big: 6 hours, 15-minute buckets",
                    six_hours(text("big")),
                ),
                case(O, "JOBS_TIMELINE", "30 days, 500 buckets", month),
                case(O, "DEAD_LETTERS_SUMMARY", "every tenant", vec![]),
                case(
                    O,
                    "TENANT_DEAD_LETTERS_SUMMARY",
                    "small",
                    vec![text("small")],
                ),
                case(O, "DEAD_LETTERS_PAGE", "first 50", letters(None)),
                case(
                    O,
                    "TENANT_DEAD_LETTERS_PAGE",
                    "small, first 50",
                    letters(Some(text("small"))),
                ),
                case(O, "REPAIR_RUNS_LIST", "50", vec![int(50), NULL]),
                case(
                    O,
                    "REPAIR_RUNS_LIST",
                    "50 that touched small",
                    vec![int(50), text("small")],
                ),
            ]
        }
    }

    // ---------------------------------------------------------------- timing

    mod timing {
        use super::*;

        struct Outcome {
            label: String,
            path: Route,
            median_ms: Option<f64>,
            rows: String,
            plan: String,
        }

        pub fn report(conn: &Connection, ctx: &Ctx) {
            let cases = cases::all(ctx);
            let outcomes: Vec<Outcome> =
                cases.iter().map(|c| measure(conn, c, &ctx.edit)).collect();
            println!(
                "## Statements on {} ({RUNS} runs each, median)\n",
                ctx.sizes_note
            );
            for (path, title) in [
                (Route::Request, "request"),
                (Route::Consumer, "consumer"),
                (Route::Cron, "cron"),
                (Route::Console, "console"),
                (Route::Operator, "operator action"),
            ] {
                println!("### {title} path\n");
                println!("| statement | median ms | rows | plan |\n|---|---:|---:|---|");
                for o in outcomes.iter().filter(|o| o.path == path) {
                    let ms = o
                        .median_ms
                        .map_or("error".to_string(), |m| format!("{m:.3}"));
                    println!(
                        "| {} | {ms} | {} | {} |",
                        o.label,
                        o.rows,
                        o.plan.replace('|', "\\|")
                    );
                }
                println!();
            }
            println!(
                "Keyword queries: {}; {}.",
                ctx.small_kw.note, ctx.big_kw.note
            );
            println!(
                "INTENTS_CLAIM_DOC's document ({:?}) has {} of the ledger's {} intents.\n",
                ctx.big_doc, ctx.doc_intents, ctx.intents_total
            );
            summary(&outcomes, &cases);
        }

        fn summary(outcomes: &[Outcome], cases: &[Case]) {
            let over = |operator: bool| -> Vec<String> {
                outcomes
                    .iter()
                    .filter(|o| (o.path == Route::Operator) == operator)
                    .filter(|o| o.median_ms.is_some_and(|m| m > SLOW_MS))
                    .map(|o| format!("{} ({:.1} ms)", o.label, o.median_ms.unwrap_or(0.0)))
                    .collect()
            };
            let (slow, actions) = (over(false), over(true));
            let failed: Vec<String> = outcomes
                .iter()
                .filter(|o| o.median_ms.is_none())
                .map(|o| format!("{}: {}", o.label, o.rows))
                .collect();
            let timed: Vec<&str> = cases.iter().map(|c| c.name).collect();
            let untimed: Vec<&str> = sql::ALL
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !timed.contains(n))
                .collect();
            if !failed.is_empty() {
                println!("Could not be timed: {}.\n", failed.join("; "));
            }
            println!(
                "Not timed here ({}): {}.\n",
                untimed.len(),
                untimed.join(", ")
            );
            if slow.is_empty() {
                println!("No statement exceeds {SLOW_MS} ms.");
            } else {
                println!("Over {SLOW_MS} ms ({}): {}.", slow.len(), slow.join(", "));
            }
            if !actions.is_empty() {
                println!(
                    "\nOperator actions over {SLOW_MS} ms, once per backfill pass or redrive plan ({}): {}.",
                    actions.len(),
                    actions.join(", ")
                );
            }
        }

        fn measure(conn: &Connection, case: &Case, edit: &[Step]) -> Outcome {
            let label = if case.note.is_empty() {
                case.name.to_string()
            } else {
                format!("{} ({})", case.name, case.note)
            };
            let failed = |why: String| Outcome {
                label: label.clone(),
                path: case.path,
                median_ms: None,
                rows: why,
                plan: String::new(),
            };
            let Some(sql) = statement(case.name) else {
                return failed("not in sql::ALL".to_string());
            };
            let setup = edit.get(..case.setup).unwrap_or(edit);
            let mut times = Vec::with_capacity(RUNS);
            let mut rows = 0;
            for _ in 0..RUNS {
                match once(conn, sql, &case.params, setup) {
                    Ok((ms, n)) => {
                        times.push(ms);
                        rows = n;
                    }
                    Err(e) => return failed(e),
                }
            }
            times.sort_by(f64::total_cmp);
            Outcome {
                label,
                path: case.path,
                median_ms: times.get(RUNS / 2).copied(),
                rows: rows.to_string(),
                plan: plan(conn, sql, &case.params).unwrap_or_else(|e| format!("(no plan: {e})")),
            }
        }

        /// One run in a savepoint rolled back after it: the setup, untimed,
        /// then the statement, timed (prepared, run, every row read).
        fn once(
            conn: &Connection,
            sql: &str,
            params: &[Value],
            setup: &[Step],
        ) -> Result<(f64, usize), String> {
            conn.execute_batch("SAVEPOINT s")
                .map_err(|e| e.to_string())?;
            let result = (|| {
                for (name, p) in setup {
                    let s = statement(name).ok_or(format!("setup {name}: not in sql::ALL"))?;
                    run(conn, s, p).map_err(|e| format!("setup {name}: {e}"))?;
                }
                let t = Instant::now();
                let n = run(conn, sql, params)?;
                Ok((t.elapsed().as_secs_f64() * 1e3, n))
            })();
            conn.execute_batch("ROLLBACK TO s; RELEASE s")
                .map_err(|e| e.to_string())?;
            result
        }

        /// Rows returned, or changed by a statement that returns none.
        fn run(conn: &Connection, sql: &str, params: &[Value]) -> Result<usize, String> {
            let mut stmt = conn.prepare(sql).map_err(|e| e.to_string())?;
            if stmt.column_count() == 0 {
                return stmt
                    .execute(params_from_iter(params))
                    .map_err(|e| e.to_string());
            }
            let mut rows = stmt
                .query(params_from_iter(params))
                .map_err(|e| e.to_string())?;
            let mut n = 0;
            while rows.next().map_err(|e| e.to_string())?.is_some() {
                n += 1;
            }
            Ok(n)
        }

        fn plan(conn: &Connection, sql: &str, params: &[Value]) -> Result<String, String> {
            let mut q = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .map_err(|e| e.to_string())?;
            let lines = q
                .query_map(params_from_iter(params), |r| r.get::<_, String>(3))
                .map_err(|e| e.to_string())?;
            let lines: Result<Vec<String>, _> = lines.collect();
            Ok(lines.map_err(|e| e.to_string())?.join("; "))
        }
    }
}
