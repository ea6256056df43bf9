//! The oracle: every query that inspects the ledger to check an invariant
//! or a test's outcome, as a function over [`SqliteDb`], one meaning per
//! name. The simulation's monitor and final checks, the test kit and the
//! bench call these; none of them writes.
//!
//! Every function reads through [`SqliteDb::inspect`], which neither counts
//! the call nor faults it: checking changes nothing a run measures or
//! decides. Their SQL lives here, not in `store/sql.rs`, which holds the
//! Worker's own statements: the Worker never runs these.
//!
//! The ledger's chunk rows, by what they are for (`docs/ARCHITECTURE.md`,
//! "The ledger"): a chunk is *live* when its version is its document's
//! `live_version`, whatever its generation; *written* when also in a
//! generation still written (`active`, `building`, `retained`); *served*
//! when also in the `active` generation.
//!
//! May import [`SqliteDb`] and the ports' value types; nothing of the
//! pipeline, the simulation or the test kit (they import this).

use super::SqliteDb;
use crate::ports::SqlValue;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Deserialize)]
struct IdRow {
    vector_id: String,
}

#[derive(Deserialize)]
struct CountRow {
    n: i64,
}

fn vector_ids(db: &SqliteDb, sql: &str) -> Vec<String> {
    let rows: Vec<IdRow> = db.inspect(sql, vec![]);
    rows.into_iter().map(|r| r.vector_id).collect()
}

/// Runs `sql`, a query whose one row has an integer column `n` (as in
/// `SELECT count(*) AS n FROM …`), and returns `n`.
pub fn count(db: &SqliteDb, sql: &str) -> i64 {
    db.inspect::<CountRow>(sql, Vec::<SqlValue>::new())[0].n
}

/// As [`count`], with `params` bound to `sql`'s parameters.
fn count_with(db: &SqliteDb, sql: &str, params: Vec<SqlValue>) -> i64 {
    db.inspect::<CountRow>(sql, params)[0].n
}

// ------------------------------------------------------------------ vectors

/// Vector IDs of live chunks in every generation that has rows (retiring,
/// retired and abandoned ones included), in `vector_id` order: what the
/// index holds once work quiesces in a test that leaves no generation's
/// rows behind.
pub fn live_vector_ids(db: &SqliteDb) -> Vec<String> {
    vector_ids(
        db,
        "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version) ORDER BY c.vector_id",
    )
}

/// Vector IDs of live chunks in the generations still written (active,
/// building, retained): what the index must hold once work quiesces (I5).
pub fn written_live_vector_ids(db: &SqliteDb) -> BTreeSet<String> {
    vector_ids(
        db,
        "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)
             JOIN generations g ON g.generation = c.generation WHERE g.state IN ('active', 'building', 'retained')",
    )
    .into_iter()
    .collect()
}

/// Vector IDs of every chunk row in `generation`, of any version.
pub fn vector_ids_in_generation(db: &SqliteDb, generation: u32) -> BTreeSet<String> {
    let rows: Vec<IdRow> = db.inspect(
        "SELECT vector_id FROM chunks WHERE generation = ?1",
        vec![generation.into()],
    );
    rows.into_iter().map(|r| r.vector_id).collect()
}

/// Vector IDs of live chunks in the active generation: what search may
/// serve, so each must be in the index (I1).
pub fn served_vector_ids(db: &SqliteDb) -> BTreeSet<String> {
    vector_ids(
        db,
        "SELECT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)
             JOIN generations g ON g.generation = c.generation WHERE g.state = 'active'",
    )
    .into_iter()
    .collect()
}

/// A served chunk's row (see [`served_chunks`]): `doc_id` is the
/// document's key (its tenant and ID).
#[derive(Debug, Deserialize)]
pub struct ServedChunk {
    pub vector_id: String,
    pub doc_id: String,
    /// The live version (its row may have been written by an earlier one).
    pub version: u32,
    pub ord: f64,
    pub text: String,
}

/// The chunks search may serve (as [`served_vector_ids`]), with their
/// document keys and texts (I1, I11), in `vector_id` order.
pub fn served_chunks(db: &SqliteDb) -> Vec<ServedChunk> {
    db.inspect(
        "SELECT c.vector_id, c.doc_id, d.live_version AS version, c.ord, c.text FROM chunks c
             JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)
             JOIN generations g ON g.generation = c.generation WHERE g.state = 'active' ORDER BY c.vector_id",
        vec![],
    )
}

/// A row of the keyword index, or the row it should hold for a chunk.
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub struct KeywordRow {
    pub id: i64,
    pub terms: String,
}

/// How many rows the keyword index holds that no chunk row does (or with
/// other terms), plus how many chunk rows' entries it lacks, plus how many
/// tenants' keyword totals differ from a recount: 0 when it holds exactly
/// every chunk row's terms, scoped to the row's tenant (I12,
/// [`keyword_rows`], [`keyword_totals_drift`]).
pub fn keyword_mismatches(db: &SqliteDb) -> i64 {
    let (held, expected) = keyword_rows(db);
    let held: BTreeSet<(i64, String)> = held.into_iter().map(|r| (r.id, r.terms)).collect();
    let expected: BTreeSet<(i64, String)> = expected.into_iter().map(|r| (r.id, r.terms)).collect();
    (held.symmetric_difference(&expected).count()) as i64 + keyword_totals_drift(db).len() as i64
}

/// What the keyword index holds, read from the index itself (a
/// contentless FTS5 table keeps no text: its rows are those with a size in
/// `keyword_index_docsize`, its terms those `fts5vocab` lists, in order),
/// and what it should hold: every chunk row in it (`keyword_len` set: all
/// but rows written before migration 0021 not entered yet), whatever its
/// version, with the terms `core::terms` makes of its text under its
/// tenant's key. Both in rowid order (I12).
pub fn keyword_rows(db: &SqliteDb) -> (Vec<KeywordRow>, Vec<KeywordRow>) {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
        text: String,
        keyword_key: i64,
        keyword_len: i64,
    }
    let held = db.inspect(
        "SELECT s.id AS id, coalesce(t.terms, '') AS terms FROM keyword_index_docsize s
         LEFT JOIN (SELECT doc, group_concat(term, ' ') AS terms
                    FROM (SELECT doc, term FROM keyword_instances ORDER BY doc, col, offset) GROUP BY doc) t
           ON t.doc = s.id
         ORDER BY s.id",
        vec![],
    );
    let rows: Vec<Row> = db.inspect(
        "SELECT c.chunk_id AS id, c.text AS text, t.keyword_key AS keyword_key, c.keyword_len AS keyword_len
         FROM chunks c JOIN tenants t ON t.tenant_id = c.tenant_id
         WHERE c.keyword_len IS NOT NULL ORDER BY c.chunk_id",
        vec![],
    );
    let expected = TERMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > 100_000 {
            cache.clear();
        }
        rows.iter()
            .map(|r| {
                let (terms, n) = cache
                    .entry((r.keyword_key, r.text.clone()))
                    .or_insert_with(|| crate::core::terms::index_document(r.keyword_key, &r.text))
                    .clone();
                // A row whose recorded length is not its terms' count is
                // held wrongly too (bm25 reads the length).
                let terms = if i64::from(n) == r.keyword_len {
                    terms
                } else {
                    format!("{terms} (length {})", r.keyword_len)
                };
                KeywordRow { id: r.id, terms }
            })
            .collect()
    });
    (held, expected)
}

/// The tenants whose keyword totals (`keyword_rows`, `keyword_tokens`, which
/// bm25 reads) differ from a recount of their rows in the index (I12).
pub fn keyword_totals_drift(db: &SqliteDb) -> Vec<String> {
    #[derive(Deserialize)]
    struct Drift {
        tenant_id: String,
    }
    db.inspect::<Drift>(
        "SELECT t.tenant_id AS tenant_id FROM tenants t
         WHERE t.keyword_rows IS NOT (SELECT count(*) FROM chunks c WHERE c.tenant_id = t.tenant_id AND c.keyword_len IS NOT NULL)
            OR t.keyword_tokens IS NOT (SELECT coalesce(sum(c.keyword_len), 0) FROM chunks c
                                        WHERE c.tenant_id = t.tenant_id AND c.keyword_len IS NOT NULL)
         ORDER BY t.tenant_id",
        vec![],
    )
    .into_iter()
    .map(|d| d.tenant_id)
    .collect()
}

/// I10: the generations whose `chunk_rows` (migration 0024) is not the
/// number of chunk rows they hold.
pub fn generation_rows_drift(db: &SqliteDb) -> Vec<i64> {
    #[derive(Deserialize)]
    struct Drift {
        generation: i64,
    }
    db.inspect::<Drift>(
        "SELECT g.generation AS generation FROM generations g
         WHERE g.chunk_rows IS NOT (SELECT count(*) FROM chunks c WHERE c.generation = g.generation)
         ORDER BY g.generation",
        vec![],
    )
    .into_iter()
    .map(|d| d.generation)
    .collect()
}

/// I19: the bm25 score tenant `tenant` should get for its live chunk at
/// order key `ord` of document `doc_key` in `generation`, for the query
/// terms `terms` (`core::terms::query_terms`), recounted from that
/// tenant's own rows in the keyword index alone (every row with
/// `keyword_len` set: its terms made again from its text), with the same
/// formula as the search statement, raised as search raises a chunk that
/// holds the query verbatim. None when no such row is live.
pub fn keyword_score_recount(
    db: &SqliteDb,
    tenant: &str,
    query: &str,
    terms: &[String],
    at: (&str, f64, u32),
    phrase_boost_percent: u32,
) -> Option<f64> {
    let (doc_key, ord, generation) = at;
    use crate::core::terms;
    #[derive(Deserialize)]
    struct Row {
        text: String,
        doc_id: String,
        ord: f64,
        generation: u32,
        live: i64,
    }
    let rows: Vec<Row> = db.inspect(
        "SELECT c.text AS text, c.doc_id AS doc_id, c.ord AS ord, c.generation AS generation,
                coalesce(c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version), 0) AS live
         FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
         WHERE c.tenant_id = ?1 AND c.keyword_len IS NOT NULL",
        vec![tenant.into()],
    );
    let tokens: Vec<Vec<String>> = TOKENS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > 100_000 {
            cache.clear();
        }
        rows.iter()
            .map(|r| {
                cache
                    .entry(r.text.clone())
                    .or_insert_with(|| terms::tokens(&r.text))
                    .clone()
            })
            .collect()
    });
    let n = rows.len() as u64;
    let total: usize = tokens.iter().map(Vec::len).sum();
    let avg = total.max(1) as f64 / n.max(1) as f64;
    let target = rows.iter().position(|r| {
        r.live == 1
            && r.doc_id == doc_key
            && r.generation == generation
            && r.ord.to_bits() == ord.to_bits()
    })?;
    let row = &tokens[target];
    let len = row.len() as f64;
    let mut score = 0.0;
    for q in terms {
        let df = tokens.iter().filter(|t| t.contains(q)).count() as u64;
        let tf = row.iter().filter(|t| *t == q).count() as f64;
        if df == 0 || tf == 0.0 {
            continue;
        }
        let (k1, b) = (terms::BM25_K1, terms::BM25_B);
        score += terms::idf(n, df) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avg));
    }
    let text = &rows.get(target)?.text;
    Some(crate::core::keyword::phrase_boosted(
        score,
        text,
        query,
        phrase_boost_percent,
    ))
}

thread_local! {
    /// The terms [`keyword_rows`] made of each (tenant key, text) already:
    /// the check runs at every step, and a row's text never changes.
    static TERMS: std::cell::RefCell<BTreeMap<(i64, String), (String, u32)>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
    /// The unscoped terms of each text already seen ([`keyword_score_recount`]).
    static TOKENS: std::cell::RefCell<BTreeMap<String, Vec<String>>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// Every vector ID D1 knows: a chunk row's (any version, any generation) or
/// a cleanup intent's. A vector in the index must be one of them (I3).
pub fn known_vector_ids(db: &SqliteDb) -> BTreeSet<String> {
    vector_ids(
        db,
        "SELECT vector_id FROM chunks UNION SELECT vector_id FROM cleanup_intents",
    )
    .into_iter()
    .collect()
}

/// Which of `ids` a chunk row still holds (I13): a row valid at its
/// document's live version in a generation still written, or valid at its
/// latest version not live yet whose index job did not end without it
/// (failed, dead, superseded), or valid at any version with a job not
/// ended (a delivery may still write or read it). A delete of such a vector would leave a chunk
/// that is (or may be) served without its vector.
pub fn held_references(db: &SqliteDb, ids: &[String]) -> Vec<String> {
    let ids = serde_json::to_string(ids).expect("ids serialize");
    let rows: Vec<IdRow> = db.inspect(
        "SELECT DISTINCT c.vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
         WHERE c.vector_id IN (SELECT value FROM json_each(?1))
           AND ((c.generation IN (SELECT generation FROM generations WHERE state IN ('active', 'building', 'retained'))
                 AND ((c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version))
                      OR (c.version <= d.latest_version AND (c.to_version IS NULL OR c.to_version > d.latest_version)
                          AND d.latest_version > COALESCE(d.live_version, 0)
                          AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.doc_id = c.doc_id AND e.version = d.latest_version
                                          AND e.build_generation IS NULL AND e.state IN ('failed', 'dead', 'superseded')))))
                OR EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = c.doc_id
                           AND j.version >= c.version AND (c.to_version IS NULL OR j.version < c.to_version)
                           AND j.state IN ('queued', 'running', 'up_for_retry')))
         ORDER BY c.vector_id",
        vec![ids.into()],
    );
    rows.into_iter().map(|r| r.vector_id).collect()
}

// ------------------------------------------------------------------ chunks

/// A live chunk's row (see [`live_chunks`]).
#[derive(Debug, Deserialize)]
pub struct LiveChunk {
    pub vector_id: String,
    /// The version that wrote the row (it may be shared by later ones).
    pub version: u32,
    pub ord: f64,
    pub text: String,
}

/// Live chunks in every generation (as [`live_vector_ids`]), in
/// `vector_id` order.
pub fn live_chunks(db: &SqliteDb) -> Vec<LiveChunk> {
    db.inspect(
        "SELECT c.vector_id, c.version, c.ord, c.text FROM chunks c
         JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version) ORDER BY c.vector_id",
        vec![],
    )
}

/// The texts of document `doc_id`'s live chunks in `generation`, in
/// order-key order.
pub fn live_chunk_texts(db: &SqliteDb, doc_id: &str, generation: u32) -> Vec<String> {
    #[derive(Deserialize)]
    struct TextRow {
        text: String,
    }
    let rows: Vec<TextRow> = db.inspect(
        "SELECT c.text FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version) \
         WHERE c.doc_id = ?1 AND c.generation = ?2 ORDER BY c.ord",
        vec![doc_id.into(), generation.into()],
    );
    rows.into_iter().map(|r| r.text).collect()
}

/// Chunk rows valid at version `version` of any document, in any
/// generation, and not at its document's live version: what the version
/// held that nothing serves (a row it shares with the live version is the
/// live version's).
pub fn chunks_of_version(db: &SqliteDb, version: u32) -> i64 {
    count_with(
        db,
        "SELECT count(*) AS n FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
         WHERE c.version <= ?1 AND (c.to_version IS NULL OR c.to_version > ?1)
           AND NOT (c.version <= coalesce(d.live_version, 0) AND (c.to_version IS NULL OR c.to_version > d.live_version))",
        vec![version.into()],
    )
}

/// Chunk rows in `generation`, of any version.
pub fn chunks_in_generation(db: &SqliteDb, generation: u32) -> i64 {
    count_with(
        db,
        "SELECT count(*) AS n FROM chunks WHERE generation = ?1",
        vec![generation.into()],
    )
}

/// Chunk rows in a `retired` generation: orphans, since retiring deletes
/// a generation's rows.
pub fn chunks_in_retired_generations(db: &SqliteDb) -> i64 {
    count(
        db,
        "SELECT count(*) AS n FROM chunks c JOIN generations g ON g.generation = c.generation WHERE g.state = 'retired'",
    )
}

/// Every chunk row's `content_hash` and `text`, any version, any
/// generation, as pairs.
pub fn chunk_hashes_and_texts(db: &SqliteDb) -> Vec<(String, String)> {
    #[derive(Deserialize)]
    struct HashRow {
        content_hash: String,
        text: String,
    }
    let rows: Vec<HashRow> = db.inspect("SELECT content_hash, text FROM chunks", vec![]);
    rows.into_iter().map(|r| (r.content_hash, r.text)).collect()
}

// ------------------------------------------------------------------ documents and generations

/// Each document's `live_version` (`None` until one went live).
pub fn live_versions(db: &SqliteDb) -> BTreeMap<String, Option<u32>> {
    #[derive(Deserialize)]
    struct LiveRow {
        doc_id: String,
        live_version: Option<u32>,
    }
    let rows: Vec<LiveRow> = db.inspect("SELECT doc_id, live_version FROM documents", vec![]);
    rows.into_iter()
        .map(|r| (r.doc_id, r.live_version))
        .collect()
}

/// Each document's `latest_version` and `live_version`, by key.
pub fn document_versions(db: &SqliteDb) -> BTreeMap<String, (u32, Option<u32>)> {
    #[derive(Deserialize)]
    struct VersionsRow {
        doc_id: String,
        latest_version: u32,
        live_version: Option<u32>,
    }
    let rows: Vec<VersionsRow> = db.inspect(
        "SELECT doc_id, latest_version, live_version FROM documents",
        vec![],
    );
    rows.into_iter()
        .map(|r| (r.doc_id, (r.latest_version, r.live_version)))
        .collect()
}

/// Document rows (one per document ever accepted, deleted ones included).
pub fn document_count(db: &SqliteDb) -> i64 {
    count(db, "SELECT count(*) AS n FROM documents")
}

/// Version part rows (a version's text is stored in parts), of every
/// version.
pub fn version_parts(db: &SqliteDb) -> i64 {
    count(db, "SELECT count(*) AS n FROM version_parts")
}

/// The number of parts version `version` of `doc_id` recorded.
pub fn part_count(db: &SqliteDb, doc_id: &str, version: u32) -> u32 {
    count_with(
        db,
        "SELECT part_count AS n FROM versions WHERE doc_id = ?1 AND version = ?2",
        vec![doc_id.into(), version.into()],
    ) as u32
}

/// The active generation (0 if none is, which the ledger forbids).
pub fn active_generation(db: &SqliteDb) -> u32 {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT generation FROM generations WHERE state = 'active'",
        vec![],
    );
    rows.first()
        .and_then(|r| r["generation"].as_u64())
        .unwrap_or(0) as u32
}

/// Generations being built that no backfill builds: nothing would ever
/// drive them to a switch or an end, and a reindex to another
/// configuration is refused while one exists (I10).
pub fn generations_without_backfill(db: &SqliteDb) -> Vec<u32> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT g.generation AS generation FROM generations g WHERE g.state = 'building'
             AND NOT EXISTS (SELECT 1 FROM backfills b WHERE b.to_generation = g.generation)",
        vec![],
    );
    rows.iter()
        .filter_map(|r| r["generation"].as_u64())
        .map(|g| g as u32)
        .collect()
}

/// Every generation and its state, as rows (for a violation's detail).
pub fn generation_states(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect("SELECT generation, state FROM generations", vec![])
}

/// Every backfill's state and target generation, as rows (for a
/// violation's detail).
pub fn backfill_states(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect("SELECT state, to_generation FROM backfills", vec![])
}

/// Backfills still running or paused.
pub fn open_backfills(db: &SqliteDb) -> i64 {
    count(
        db,
        "SELECT count(*) AS n FROM backfills WHERE state IN ('running', 'paused')",
    )
}

/// Whether some backfill ended cancelled.
pub fn any_backfill_cancelled(db: &SqliteDb) -> bool {
    count(
        db,
        "SELECT count(*) AS n FROM backfills WHERE state = 'cancelled'",
    ) > 0
}

// ------------------------------------------------------------------ jobs and intents

/// Jobs not yet ended (`queued`, `running`, `up_for_retry`).
pub fn open_jobs(db: &SqliteDb) -> i64 {
    count(
        db,
        "SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running', 'up_for_retry')",
    )
}

/// Cleanup intents not yet drained.
pub fn cleanup_intents(db: &SqliteDb) -> i64 {
    count(db, "SELECT count(*) AS n FROM cleanup_intents")
}

/// Every job's id, in `job_id` order.
pub fn job_ids(db: &SqliteDb) -> Vec<String> {
    #[derive(Deserialize)]
    struct JobRow {
        job_id: String,
    }
    let rows: Vec<JobRow> = db.inspect("SELECT job_id FROM jobs ORDER BY job_id", vec![]);
    rows.into_iter().map(|r| r.job_id).collect()
}

/// Every job by its id: its document's key, and its progress as text
/// (state, step, attempts, chunks done and last update: a job that moved
/// shows another).
pub fn job_progress(db: &SqliteDb) -> BTreeMap<String, (String, String)> {
    #[derive(Deserialize)]
    struct ProgressRow {
        job_id: String,
        doc_id: String,
        progress: String,
    }
    let rows: Vec<ProgressRow> = db.inspect(
        "SELECT job_id, doc_id, json_array(state, step, attempts, chunks_done, updated_at) AS progress FROM jobs",
        vec![],
    );
    rows.into_iter()
        .map(|r| (r.job_id, (r.doc_id, r.progress)))
        .collect()
}

/// Job `job_id`'s attempts so far.
pub fn job_attempts(db: &SqliteDb, job_id: &str) -> i64 {
    count_with(
        db,
        "SELECT attempts AS n FROM jobs WHERE job_id = ?1",
        vec![job_id.into()],
    )
}

/// Job `job_id`'s last failure bucket (`None` if it never failed).
pub fn last_failure_bucket(db: &SqliteDb, job_id: &str) -> Option<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT last_failure_bucket FROM jobs WHERE job_id = ?1",
        vec![job_id.into()],
    );
    rows.first()
        .and_then(|r| r["last_failure_bucket"].as_str())
        .map(str::to_string)
}

/// Work left: jobs not yet ended plus cleanup intents not yet drained.
/// Zero in a quiescent ledger.
pub fn open_jobs_and_intents(db: &SqliteDb) -> i64 {
    open_jobs(db) + cleanup_intents(db)
}

// ------------------------------------------------------------------ dead letters and redrives

/// Job ids of the archived dead letters.
pub fn archived_letters(db: &SqliteDb) -> Vec<String> {
    let rows: Vec<serde_json::Value> = db.inspect("SELECT job_id FROM dead_letters", vec![]);
    rows.iter()
        .filter_map(|r| r["job_id"].as_str().map(str::to_string))
        .collect()
}

/// The archived dead letter of `job_id`, every column, if there is one.
pub fn dead_letter(db: &SqliteDb, job_id: &str) -> Option<serde_json::Value> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT * FROM dead_letters WHERE job_id = ?1",
        vec![job_id.into()],
    );
    rows.into_iter().next()
}

/// Jobs that ended `failed` or `dead` whose letter is not archived with
/// that ending (the evidence an operator redrives from; I9).
pub fn failed_jobs_without_evidence(db: &SqliteDb) -> Vec<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT j.job_id FROM jobs j WHERE j.state IN ('failed', 'dead')
               AND NOT EXISTS (SELECT 1 FROM dead_letters l WHERE l.job_id = j.job_id AND l.job_state IN ('failed', 'dead'))",
        vec![],
    );
    rows.iter()
        .filter_map(|r| r["job_id"].as_str().map(str::to_string))
        .collect()
}

/// The parts (`n`: place, `text`) of the text that version `v` (an alias
/// of the enclosing query) reads: those its manifest names, or, without
/// one (written before migration 0022), its own; a re-run's are its
/// `text_version`'s. A part missing from the ledger is left out.
const PARTS_OF_V: &str = "SELECT m.key AS n, p.text AS text FROM versions s, json_each(s.parts) m
      JOIN version_parts p ON p.doc_id = s.doc_id AND p.version = json_extract(m.value, '$[0]') AND p.part = json_extract(m.value, '$[1]')
      WHERE s.doc_id = v.doc_id AND s.version = coalesce(v.text_version, v.version)
    UNION ALL
    SELECT p.part AS n, p.text AS text FROM versions s JOIN version_parts p ON p.doc_id = s.doc_id AND p.version = s.version
      WHERE s.doc_id = v.doc_id AND s.version = coalesce(v.text_version, v.version) AND s.parts IS NULL";

/// Tenants whose recorded usage (documents, bytes) differs from what their
/// documents hold: documents whose latest version is not a tombstone, and
/// those versions' text bytes, recounted (the quota's definition).
pub fn tenant_usage_mismatches(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT t.tenant_id, t.documents, t.bytes, n.documents AS documents_held, n.bytes AS bytes_held
         FROM tenants t JOIN (
           SELECT t2.tenant_id AS tenant_id,
             (SELECT count(*) FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
              WHERE d.tenant_id = t2.tenant_id AND v.is_delete = 0) AS documents,
             (SELECT coalesce(sum(length(CAST(p.text AS BLOB))), 0) FROM version_parts p
              WHERE p.tenant_id = t2.tenant_id) AS bytes
           FROM tenants t2) n ON n.tenant_id = t.tenant_id
         WHERE t.documents <> n.documents OR t.bytes <> n.bytes",
        vec![],
    )
}

/// Backfills whose counts (migration 0031: `enqueued`, `failed`) are not
/// a recount of their items and their jobs (I15). One row per drift.
pub fn backfill_counts_drift(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT b.backfill_id, b.state, b.enqueued, b.failed,
           (SELECT count(*) FROM backfill_items i WHERE i.backfill_id = b.backfill_id) AS items,
           (SELECT count(*) FROM backfill_items i JOIN jobs j ON j.job_id = i.job_id
            WHERE i.backfill_id = b.backfill_id AND j.state IN ('failed', 'dead')) AS items_failed
         FROM backfills b
         WHERE b.enqueued <> items OR b.failed <> items_failed",
        vec![],
    )
}

/// What retention pruned that something could still reach (I18): a
/// version whose text is gone (`part_count` 0, or parts missing) though a
/// job of it has not ended, it is a document's live or latest version, or
/// a version holding text reads its parts; a dead letter whose version row
/// or job is gone. One row per finding.
pub fn reachable_but_pruned(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        &format!("WITH needed (doc_id, version, why) AS (
           SELECT doc_id, version, 'a job runs it' FROM jobs WHERE state IN ('queued', 'running', 'up_for_retry')
           UNION SELECT doc_id, live_version, 'live' FROM documents WHERE live_version IS NOT NULL
           UNION SELECT doc_id, latest_version, 'latest' FROM documents
           UNION SELECT doc_id, text_version, 'a re-run reads it' FROM versions WHERE text_version IS NOT NULL AND part_count > 0)
         SELECT n.doc_id, n.version, n.why FROM needed n JOIN versions v ON v.doc_id = n.doc_id AND v.version = n.version
         WHERE v.is_delete = 0 AND (v.part_count = 0 OR v.part_count <> (SELECT count(*) FROM ({PARTS_OF_V})))
         UNION ALL
         SELECT n.doc_id, n.version, n.why || ': no version row' FROM needed n
         WHERE NOT EXISTS (SELECT 1 FROM versions v WHERE v.doc_id = n.doc_id AND v.version = n.version)
         UNION ALL
         SELECT l.doc_id, l.version, 'a dead letter names it' FROM dead_letters l
         WHERE NOT EXISTS (SELECT 1 FROM versions v WHERE v.doc_id = l.doc_id AND v.version = l.version)
            OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = l.job_id)"),
        vec![],
    )
}

/// Text parts left open that their document's latest version does not
/// name (through its manifest, its re-run source's, or, without one, as
/// its own parts): a part no later version names must be closed, or
/// retention never reaches it. One row per part.
pub fn parts_left_open(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT p.doc_id, p.version, p.part FROM version_parts p
             JOIN documents d ON d.doc_id = p.doc_id
             JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
             WHERE p.to_version IS NULL AND NOT EXISTS (
               SELECT 1 FROM versions s, json_each(s.parts) m
               WHERE s.doc_id = v.doc_id AND s.version = coalesce(v.text_version, v.version)
                 AND json_extract(m.value, '$[0]') = p.version AND json_extract(m.value, '$[1]') = p.part)
             AND NOT EXISTS (
               SELECT 1 FROM versions s WHERE s.doc_id = v.doc_id AND s.version = coalesce(v.text_version, v.version)
                 AND s.parts IS NULL AND s.version = p.version)",
        vec![],
    )
}

/// Tenants whose usage passes one of their own quotas (documents, bytes).
pub fn tenants_over_quota(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT tenant_id, documents, documents_max, bytes, bytes_max FROM tenants
         WHERE documents > coalesce(documents_max, documents) OR bytes > coalesce(bytes_max, bytes)",
        vec![],
    )
}

/// The tenant of every vector D1 knows (a chunk row's or an intent's
/// document's), by vector ID.
pub fn vector_tenants(db: &SqliteDb) -> BTreeMap<String, String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT vector_id, tenant_id FROM chunks
         UNION SELECT vector_id, CASE WHEN instr(doc_id, char(31)) > 0
                                      THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END
         FROM cleanup_intents",
        vec![],
    );
    rows.iter()
        .filter_map(|r| {
            Some((
                r["vector_id"].as_str()?.to_string(),
                r["tenant_id"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Cleanup passes cron made on the budget its other steps left (step 8),
/// over every recorded cron run.
pub fn cleanup_passes(db: &SqliteDb) -> u64 {
    let n = count(
        db,
        "SELECT coalesce(sum(json_extract(report, '$.cleanup_passes')), 0) AS n FROM repair_runs",
    );
    u64::try_from(n).unwrap_or(0)
}

/// Documents cron's verification found missing vectors of and re-ran,
/// over every recorded cron run.
pub fn documents_repaired(db: &SqliteDb) -> u64 {
    let n = count(
        db,
        "SELECT coalesce(sum(json_extract(report, '$.documents_repaired')), 0) AS n FROM repair_runs",
    );
    u64::try_from(n).unwrap_or(0)
}

/// Every version of every document: key, version, content hash (the
/// tombstone's for a delete) and whether it is a delete.
pub fn version_log(db: &SqliteDb) -> Vec<(String, u32, String, bool)> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT doc_id, version, content_hash, is_delete FROM versions ORDER BY doc_id, version",
        vec![],
    );
    rows.iter()
        .filter_map(|r| {
            Some((
                r["doc_id"].as_str()?.to_string(),
                u32::try_from(r["version"].as_u64()?).ok()?,
                r["content_hash"].as_str()?.to_string(),
                r["is_delete"].as_i64()? != 0,
            ))
        })
        .collect()
}

/// The content hash of version `version` of the document of key `key`.
pub fn version_hash(db: &SqliteDb, key: &str, version: u32) -> Option<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT content_hash FROM versions WHERE doc_id = ?1 AND version = ?2",
        vec![key.into(), version.into()],
    );
    rows.first()
        .and_then(|r| r["content_hash"].as_str())
        .map(str::to_string)
}

/// The metadata of version `version` of the document of key `key`.
pub fn version_metadata(
    db: &SqliteDb,
    key: &str,
    version: u32,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT metadata FROM versions WHERE doc_id = ?1 AND version = ?2",
        vec![key.into(), version.into()],
    );
    rows.first()
        .and_then(|r| r["metadata"].as_str())
        .and_then(|m| serde_json::from_str(m).ok())
}

/// The content type of version `version` of the document of key `key`.
pub fn version_content_type(db: &SqliteDb, key: &str, version: u32) -> Option<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT content_type FROM versions WHERE doc_id = ?1 AND version = ?2",
        vec![key.into(), version.into()],
    );
    rows.first()
        .and_then(|r| r["content_type"].as_str())
        .map(str::to_string)
}

/// The text of version `version` of the document of key `key`, if the
/// ledger holds it.
pub fn version_text(db: &SqliteDb, key: &str, version: u32) -> Option<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        &format!(
            "SELECT (SELECT group_concat(text, '') FROM (SELECT text FROM ({PARTS_OF_V}) ORDER BY n)) AS t
             FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2"
        ),
        vec![key.into(), version.into()],
    );
    rows.first()
        .and_then(|r| r["t"].as_str())
        .map(str::to_string)
}

/// The failure buckets the ledger recorded: jobs' last failures, dead
/// letters', and the failures cron runs reported (the simulation's
/// coverage of buckets).
pub fn failure_buckets_recorded(db: &SqliteDb) -> Vec<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT last_failure_bucket AS b FROM jobs WHERE last_failure_bucket IS NOT NULL
         UNION SELECT failure_bucket FROM dead_letters WHERE failure_bucket IS NOT NULL
         UNION SELECT f.value FROM repair_runs r, json_each(r.report, '$.failures') f",
        vec![],
    );
    rows.iter()
        .filter_map(|r| r["b"].as_str().map(str::to_string))
        .collect()
}

/// How the ledger's jobs and backfills ended: `job:<state>` for each final
/// job state present, `backfill:<state>` for each ended backfill's.
pub fn endings(db: &SqliteDb) -> Vec<String> {
    let rows: Vec<serde_json::Value> = db.inspect(
        "SELECT 'job:' || state AS e FROM jobs WHERE state IN ('succeeded', 'failed', 'dead', 'superseded')
         UNION SELECT 'backfill:' || state FROM backfills WHERE state IN ('completed', 'cancelled')",
        vec![],
    );
    rows.iter()
        .filter_map(|r| r["e"].as_str().map(str::to_string))
        .collect()
}

/// Redrives that did not end (neither `completed` nor `stopped`), as rows
/// of `redrive_id` and `state`.
pub fn unended_redrives(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT redrive_id, state FROM redrives WHERE state NOT IN ('completed', 'stopped')",
        vec![],
    )
}

/// Redrive items not accounted for: left `pending` or `sent` in a
/// completed redrive, or `skipped` although their document got a later
/// version (an untracked re-run, where every document is written once);
/// rows of `redrive_id`, `letter_job_id`, `state`, `version` and the
/// document's `latest_version`.
pub fn unaccounted_redrive_items(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT i.redrive_id, i.letter_job_id, i.state, i.version, d.latest_version FROM redrive_items i
             JOIN redrives r ON r.redrive_id = i.redrive_id JOIN documents d ON d.doc_id = i.doc_id
             WHERE i.state IN ('pending', 'sent') AND r.state = 'completed'
                OR i.state = 'skipped' AND d.latest_version > i.version",
        vec![],
    )
}

/// A document's `live_version`, `latest_version` and its live version's
/// text (its parts joined), as at most one row.
pub fn live_text(db: &SqliteDb, doc_id: &str) -> Vec<serde_json::Value> {
    db.inspect(
        &format!(
            "SELECT d.live_version, d.latest_version,
                    (SELECT (SELECT group_concat(text, '') FROM (SELECT text FROM ({PARTS_OF_V}) ORDER BY n))
                     FROM versions v WHERE v.doc_id = d.doc_id AND v.version = d.live_version) AS text
             FROM documents d WHERE d.doc_id = ?1"
        ),
        vec![doc_id.into()],
    )
}

// ------------------------------------------------------------------ dumps

/// The state that must not depend on faults or timing (I6): document and
/// version rows, the text, chunk rows, the keyword index's rows, generations, intents, each index
/// job's outcome class (`succeeded` and `superseded` both mean "done
/// without failure"; build jobs are left out), and each tenant's state and
/// usage (documents and bytes stored).
pub fn canonical_dump(db: &SqliteDb) -> String {
    let queries = [
        "SELECT doc_id, latest_version, live_version, repair_needed FROM documents ORDER BY doc_id",
        "SELECT v.doc_id, v.version, v.is_delete, v.content_hash, v.content_type, v.metadata, v.text_bytes, v.part_count
             FROM versions v JOIN documents d ON d.doc_id = v.doc_id ORDER BY v.doc_id, v.version",
        "SELECT doc_id, version, part, text FROM version_parts ORDER BY doc_id, version, part",
        // Chunk rows as the versions see them, not as the history of
        // stagings wrote them (which version wrote a shared row, its order
        // key and when it closes depend on which stagings ran, not on what
        // is served): rows valid at the live version with their rank in
        // their document, and every other row by what it holds.
        "SELECT c.doc_id, d.live_version, c.generation, c.vector_id, c.content_hash, c.text, c.terms,
                (SELECT count(*) FROM chunks o WHERE o.doc_id = c.doc_id AND o.generation = c.generation AND o.ord < c.ord
                   AND o.version <= d.live_version AND (o.to_version IS NULL OR o.to_version > d.live_version)) AS place
             FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
               AND (c.to_version IS NULL OR c.to_version > d.live_version)
             ORDER BY c.vector_id",
        "SELECT c.doc_id, c.generation, c.vector_id, c.content_hash, c.text, c.terms FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
             WHERE NOT (c.version <= coalesce(d.live_version, 0) AND (c.to_version IS NULL OR c.to_version > d.live_version))
             ORDER BY c.vector_id",
        // The keyword index's rows (it keeps no text: its rows are those it
        // has a size for; I12 checks their terms), and each tenant's totals.
        "SELECT c.vector_id FROM keyword_index_docsize f JOIN chunks c ON c.chunk_id = f.id ORDER BY c.vector_id",
        "SELECT tenant_id, keyword_rows, keyword_tokens FROM tenants ORDER BY tenant_id",
        "SELECT generation, index_config, state FROM generations ORDER BY generation",
        "SELECT vector_id, doc_id, version, reason FROM cleanup_intents ORDER BY vector_id",
        "SELECT job_id, doc_id, version, kind,
                    CASE WHEN state IN ('succeeded', 'superseded') THEN 'done' ELSE state END AS outcome
             FROM jobs WHERE build_generation IS NULL ORDER BY job_id",
        "SELECT tenant_id, state, documents, bytes FROM tenants ORDER BY tenant_id",
        // Sync sessions that committed, and their plans (a session whose
        // opening answer was lost stays behind, open or superseded, and
        // deletes nothing: `sim::invariants::syncs_hold`).
        "SELECT source, state, seen, to_delete, deleted, kept FROM syncs WHERE state = 'committed' ORDER BY seq",
        "SELECT d.doc_id, d.version, d.state FROM sync_deletes d JOIN syncs s ON s.sync_id = d.sync_id
             WHERE s.state = 'committed' ORDER BY s.seq, d.doc_id",
        "SELECT doc_id, tenant_id, source FROM source_documents ORDER BY doc_id",
    ];
    let mut out = String::new();
    for q in queries {
        for row in db.inspect::<serde_json::Value>(q, vec![]) {
            out.push_str(&row.to_string());
            out.push('\n');
        }
        out.push_str("--\n");
    }
    out
}

/// Every row of every table, in a canonical order, as text: two ledgers
/// with equal dumps hold the same state. Columns named in `ignore`
/// (timestamps, attempt counters) are left out.
/// The columns that count a tenant's requests (its per-minute rate): every
/// authenticated request moves them, a rejected one too, so tests that
/// check "bad input writes nothing" leave them out of the comparison.
pub const REQUEST_COUNTERS: &[&str] = &["rate_minute", "rate_requests"];

pub fn dump(db: &SqliteDb, ignore: &[&str]) -> String {
    #[derive(Deserialize)]
    struct Table {
        name: String,
    }
    let mut tables: Vec<String> = db
        .inspect::<Table>(
            // The keyword indexes' own tables (FTS5's shadow tables: their
            // BLOB pages) are left out; the index's rows and terms are
            // dumped as `keyword_instances`.
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
               AND name NOT GLOB 'chunks_fts_*' AND name NOT GLOB 'keyword_index*'
               AND name <> 'keyword_terms' ORDER BY name",
            vec![],
        )
        .into_iter()
        .map(|t| t.name)
        .collect();
    tables.sort();
    let mut out = String::new();
    for t in tables {
        let rows: Vec<serde_json::Value> = db.inspect(&format!("SELECT * FROM \"{t}\""), vec![]);
        let mut lines: Vec<String> = rows
            .into_iter()
            .map(|mut r| {
                if let Some(o) = r.as_object_mut() {
                    for c in ignore {
                        o.remove(*c);
                    }
                }
                r.to_string()
            })
            .collect();
        lines.sort();
        out.push_str(&format!("## {t}\n"));
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

impl SqliteDb {
    /// Runs statements for the oracle (views of its own in the
    /// connection's temp schema, which no dump reads: never rows, which
    /// would count as the ledger changing), without counting or faulting them.
    pub fn inspect_batch(&self, sql: &str) {
        self.conn
            .borrow()
            .execute_batch(sql)
            .expect("inspect batch");
    }

    /// Runs a read for the oracle and the tests, without counting or
    /// faulting it.
    pub fn inspect<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        params: Vec<SqlValue>,
    ) -> Vec<T> {
        let conn = self.conn.borrow();
        let stmt = crate::ports::Stmt::new(Box::leak(sql.to_string().into_boxed_str()), params);
        super::rows_from_json(SqliteDb::run_query(&conn, &stmt).expect("inspect query"))
            .expect("inspect rows")
    }
}

/// Every tenant's ID, in order.
pub fn tenant_ids(db: &SqliteDb) -> Vec<String> {
    #[derive(Deserialize)]
    struct T {
        tenant_id: String,
    }
    let rows: Vec<T> = db.inspect("SELECT tenant_id FROM tenants ORDER BY tenant_id", vec![]);
    rows.into_iter().map(|t| t.tenant_id).collect()
}

/// The dead-letter archive recounted by group, letter by letter: each
/// tenant, failure bucket, whether the letter's version is its document's
/// latest, and size bucket, with their letters and deliveries; and each
/// tenant, bucket and size's earliest and latest sighting. What migration
/// 0028's `dead_letter_groups` must add up to (I15).
pub fn dead_letter_groups(db: &SqliteDb) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT l.tenant_id AS tenant_id, COALESCE(l.failure_bucket, 'unknown') AS failure_bucket,
           CASE WHEN d.latest_version = l.version THEN 1 ELSE 0 END AS version_is_latest,
           l.chunk_count_bucket AS chunk_count_bucket,
           count(*) AS letters, sum(l.times_seen) AS deliveries,
           (SELECT min(m.first_seen) FROM dead_letters m WHERE m.tenant_id = l.tenant_id
              AND COALESCE(m.failure_bucket, 'unknown') = COALESCE(l.failure_bucket, 'unknown')
              AND m.chunk_count_bucket = l.chunk_count_bucket) AS first_seen,
           (SELECT max(m.last_seen) FROM dead_letters m WHERE m.tenant_id = l.tenant_id
              AND COALESCE(m.failure_bucket, 'unknown') = COALESCE(l.failure_bucket, 'unknown')
              AND m.chunk_count_bucket = l.chunk_count_bucket) AS last_seen
         FROM dead_letters l LEFT JOIN documents d ON d.doc_id = l.doc_id
         GROUP BY 1, 2, 3, 4 ORDER BY letters DESC, 1, 2, 3, 4",
        vec![],
    )
}

/// Tenant `tenant`'s documents grouped by what their state derives from
/// (`pipeline::views::document_state`'s inputs; `store::DocumentStateGroupRow`'s
/// columns), recounted from every document: what the tenant's
/// `document_counts` (migration 0026) must add up to (I15).
pub fn document_state_groups(db: &SqliteDb, tenant: &str) -> Vec<serde_json::Value> {
    db.inspect(
        "SELECT d.repair_needed AS repair_needed,
           CASE WHEN d.live_version = d.latest_version THEN 1 ELSE 0 END AS live_is_latest,
           lv.is_delete AS live_is_delete,
           j.state AS job_state,
           CASE WHEN j.step = 'staged' AND j.chunks_done > 0 THEN 1 ELSE 0 END AS job_wrote,
           j.last_failure_bucket AS last_failure_bucket,
           COUNT(*) AS documents
         FROM documents d
         LEFT JOIN versions lv ON lv.doc_id = d.doc_id AND lv.version = d.live_version
         LEFT JOIN jobs j ON j.job_id = (
           SELECT j2.job_id FROM jobs j2 WHERE j2.doc_id = d.doc_id AND j2.version = d.latest_version
           ORDER BY j2.created_at DESC, j2.job_id LIMIT 1)
         WHERE d.tenant_id = ?1
         GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6",
        vec![SqlValue::Text(tenant.into())],
    )
}
