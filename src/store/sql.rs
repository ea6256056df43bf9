//! Every SQL statement the Worker runs against the ledger, written once.
//! Each value is a bound parameter; bulk rows travel as one JSON parameter
//! read with `json_each`, so statement counts grow with bytes, not rows.
//! `tests/it/sql.rs` runs each of them on real SQLite with the same migrations.

// ---------------------------------------------------------------- intake

/// Latest version (and its content hash) of each doc id in `?1` (JSON array),
/// with what its text is made of: its manifest (a re-run's: the version it
/// reads, `text_version`), or, without one (written before migration
/// 0022), its parts' count and the version that holds them.
pub const LATEST_VERSIONS: &str = "\
SELECT d.doc_id AS doc_id, d.latest_version AS latest_version, v.content_hash AS content_hash, v.is_delete AS is_delete,
       v.text_bytes AS text_bytes, v.part_count AS part_count, coalesce(v.text_version, v.version) AS text_version,
       coalesce(v.parts, (SELECT t.parts FROM versions t WHERE t.doc_id = v.doc_id AND t.version = v.text_version)) AS parts,
       CASE WHEN (d.live_version IS NULL OR d.live_version < d.latest_version)
             AND EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = d.doc_id AND j.version = d.latest_version
                         AND j.build_generation IS NULL AND j.state IN ('failed', 'dead'))
            THEN 1 ELSE 0 END AS latest_failed
FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
WHERE d.doc_id IN (SELECT value FROM json_each(?1))";

/// Creates or advances documents; `latest_version` never decreases.
/// `?1`: JSON array of `{doc_id, version}`; `?2`: now; `?3`: 1 for a
/// write outside any sync session, which marks each document with the
/// newest session's `seq` (a session open now deletes none of them: I14).
/// The mark never decreases.
pub const INTAKE_UPSERT_DOCUMENTS: &str = "\
INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at, plain_write_seq)
SELECT json_extract(value, '$.doc_id'), json_extract(value, '$.version'), NULL, 0, ?2, ?2,
       CASE WHEN ?3 = 1 THEN (SELECT coalesce(max(seq), 0) FROM syncs) ELSE 0 END
FROM json_each(?1) WHERE true
ON CONFLICT (doc_id) DO UPDATE SET latest_version = excluded.latest_version, updated_at = excluded.updated_at,
  plain_write_seq = max(documents.plain_write_seq, excluded.plain_write_seq)
WHERE excluded.latest_version > documents.latest_version";

/// New versions, each with its manifest (`parts`: `[[version, part,
/// hash], …]`, the `version_parts` rows its text is made of, in order).
/// The primary key makes two writers of the same version collide, which
/// aborts the whole intake batch (nothing half-written).
pub const INTAKE_INSERT_VERSIONS: &str = "\
INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at, parts)
SELECT json_extract(value, '$.doc_id'), json_extract(value, '$.version'), json_extract(value, '$.is_delete'),
       json_extract(value, '$.content_hash'), json_extract(value, '$.content_type'), json_extract(value, '$.metadata'),
       json_extract(value, '$.text_bytes'), json_extract(value, '$.part_count'), NULL, ?2, json_extract(value, '$.parts')
FROM json_each(?1)";

/// The parts a new version no longer names, closed at it (`?1`: JSON array
/// of `[doc_id, version, part, to_version]`): the versions that name a
/// part are then those of its range (migration 0022). A part closed
/// already (written before 0022, by a version that was not the latest)
/// keeps its end.
pub const INTAKE_CLOSE_PARTS: &str = "\
UPDATE version_parts SET to_version = (
  SELECT json_extract(k.value, '$[3]') FROM json_each(?1) k
  WHERE json_extract(k.value, '$[0]') = version_parts.doc_id AND json_extract(k.value, '$[1]') = version_parts.version
    AND json_extract(k.value, '$[2]') = version_parts.part)
WHERE rowid IN (
  SELECT p.rowid FROM json_each(?1) k JOIN version_parts p ON p.doc_id = json_extract(k.value, '$[0]')
    AND p.version = json_extract(k.value, '$[1]') AND p.part = json_extract(k.value, '$[2]')
  WHERE p.to_version IS NULL)";

/// Text parts, several per statement. `?1`: JSON array of `{doc_id, version, part, text}`.
pub const INTAKE_INSERT_PARTS_BULK: &str = "\
INSERT INTO version_parts (doc_id, version, part, text)
SELECT json_extract(value, '$.doc_id'), json_extract(value, '$.version'), json_extract(value, '$.part'), json_extract(value, '$.text')
FROM json_each(?1)";

/// One large text part on its own (its JSON form would not fit one parameter).
pub const INTAKE_INSERT_PART: &str =
    "INSERT INTO version_parts (doc_id, version, part, text) VALUES (?1, ?2, ?3, ?4)";

/// New jobs, `queued`. `?1`: JSON array of `{job_id, doc_id, version, kind}`; `?2`: now.
pub const INTAKE_INSERT_JOBS: &str = "\
INSERT INTO jobs (job_id, doc_id, version, kind, state, step, attempts, last_failure_bucket, lease_until, next_attempt_at, created_at, updated_at)
SELECT json_extract(value, '$.job_id'), json_extract(value, '$.doc_id'), json_extract(value, '$.version'),
       json_extract(value, '$.kind'), 'queued', 'queued', 0, NULL, NULL, NULL, ?2, ?2
FROM json_each(?1)";

// ---------------------------------------------------------------- reads

/// The API view of documents in `?1` (JSON array): latest and live versions,
/// and the newest job of the latest version.
pub const DOCUMENT_VIEWS: &str = "\
SELECT d.doc_id AS doc_id, d.latest_version AS latest_version, d.live_version AS live_version,
       d.repair_needed AS repair_needed, lv.is_delete AS live_is_delete, lv.chunk_count AS live_chunk_count,
       lv.index_config AS live_index_config,
       d.created_at AS created_at, d.updated_at AS updated_at,
       j.job_id AS job_id, j.state AS job_state, j.step AS job_step, j.last_failure_bucket AS last_failure_bucket,
       j.chunks_done AS job_chunks_done
FROM documents d
LEFT JOIN versions lv ON lv.doc_id = d.doc_id AND lv.version = d.live_version
LEFT JOIN jobs j ON j.job_id = (
  SELECT j2.job_id FROM jobs j2 WHERE j2.doc_id = d.doc_id AND j2.version = d.latest_version
  ORDER BY j2.created_at DESC, j2.job_id LIMIT 1)
WHERE d.doc_id IN (SELECT value FROM json_each(?1))";

/// Every tenant's documents counted by state, summed over the tenants
/// (no parameter): each tenant's `document_counts` (migration 0026: kept
/// by triggers in the statements that change a document's state), so the
/// summary reads one row per tenant whatever the number of documents.
/// `key`: a state's name, or `state/bucket` for the documents neither
/// indexed nor deleted whose newest job last failed in `bucket`.
pub const DOCUMENT_COUNTS: &str = "\
SELECT k.key AS key, sum(k.value) AS documents
FROM tenants t, json_each(t.document_counts) k
GROUP BY 1 ORDER BY 1";

/// Tenant `?1`'s documents counted by state: its row's `document_counts`
/// (in no order: the summary orders them).
pub const TENANT_DOCUMENT_COUNTS: &str = "\
SELECT k.key AS key, k.value AS documents
FROM tenants t, json_each(t.document_counts) k
WHERE t.tenant_id = ?1";

/// The documents whose latest version's newest job is running, each with
/// that job's last failure bucket: `document_counts` counts them as
/// `queued` (a claim moves no count, migration 0026) and the summary moves
/// them to `indexing` as it reads. A range of `jobs_by_state`: the running
/// jobs, as many as consumers run at once (and those whose invocation died
/// until cron finds them stalled), whatever the corpus or the backlog.
macro_rules! running_documents {
    ($tenant:literal) => {
        concat!(
            "SELECT j.last_failure_bucket AS bucket
FROM jobs j JOIN documents d ON d.doc_id = j.doc_id
WHERE j.state = 'running'",
            $tenant,
            " AND d.latest_version = j.version AND d.repair_needed = 0
  AND d.live_version IS NOT d.latest_version
  AND j.job_id = (SELECT n.job_id FROM jobs n WHERE n.doc_id = j.doc_id AND n.version = j.version
                  ORDER BY n.created_at DESC, n.job_id LIMIT 1)"
        )
    };
}

/// Every tenant's documents of running jobs (no parameter).
pub const RUNNING_DOCUMENTS: &str = running_documents!("");

/// Tenant `?1`'s: the same range, its rows kept.
pub const TENANT_RUNNING_DOCUMENTS: &str = running_documents!(" AND j.tenant_id = ?1");

/// A page of every tenant's document keys in key order after `?1` (`''`:
/// from the start), `?2` at most: a range of the documents' key, read from
/// the cursor on (an `?1 IS NULL OR` would walk the keys from the first on
/// every page). One tenant's: `TENANT_DOCUMENT_KEYS_PAGE`.
pub const DOCUMENT_KEYS_PAGE: &str = "\
SELECT doc_id, updated_at FROM documents WHERE doc_id > ?1 ORDER BY doc_id LIMIT ?2";

/// A page of tenant `?1`'s document keys (with when each last changed) in
/// key order after the key `?2` (`''`: from the start), `?3` at most.
/// `tenant_id = ?1` and `doc_id > ?2` are the range of `documents_by_tenant
/// (tenant_id, doc_id)`: a page reads `?3` index entries from the cursor on,
/// whatever the number of documents (an `?1 IS NULL OR` would defeat it).
pub const TENANT_DOCUMENT_KEYS_PAGE: &str = "\
SELECT doc_id, updated_at FROM documents
WHERE tenant_id = ?1 AND doc_id > ?2
ORDER BY doc_id LIMIT ?3";

/// The same page of the documents of tenant `?1` that belong to source
/// `?2` (the last source each was written into), after the key `?3`, `?4`
/// at most: the range of `source_documents_by_source (tenant_id, source,
/// doc_id)`, each joined to its document by its key.
pub const SOURCE_DOCUMENT_KEYS_PAGE: &str = "\
SELECT sd.doc_id AS doc_id, d.updated_at AS updated_at
FROM source_documents sd JOIN documents d ON d.doc_id = sd.doc_id
WHERE sd.tenant_id = ?1 AND sd.source = ?2 AND sd.doc_id > ?3
ORDER BY sd.doc_id LIMIT ?4";

/// Jobs by their current state and the time bucket of their last change:
/// `updated_at` in `[?1, ?2)`, buckets of `?3` ms from `?1`; `?4`: a tenant
/// ID or NULL for every tenant. The cast: D1 may bind a number as REAL,
/// and the bucket must be a whole number. Every state is named (the
/// table's `CHECK` allows no other), so that the window is a range of
/// `jobs_by_state (state, updated_at)` in each: the statement reads the
/// jobs that changed in the window, not every job ever kept.
pub const JOBS_TIMELINE: &str = "\
SELECT CAST((updated_at - ?1) / ?3 AS INTEGER) AS bucket, state, COUNT(*) AS jobs
FROM jobs
WHERE state IN ('queued', 'running', 'up_for_retry', 'succeeded', 'failed', 'superseded', 'dead')
  AND updated_at >= ?1 AND updated_at < ?2 AND (?4 IS NULL OR tenant_id = ?4)
GROUP BY 1, 2 ORDER BY 1, 2";

/// The API view of one job.
pub const JOB_VIEW: &str = "\
SELECT j.job_id AS job_id, j.doc_id AS doc_id, j.version AS version, j.kind AS kind, j.state AS state, j.step AS step,
       j.attempts AS attempts, j.last_failure_bucket AS last_failure_bucket, j.lease_until AS lease_until,
       j.next_attempt_at AS next_attempt_at, j.created_at AS created_at, j.updated_at AS updated_at,
       j.rows_total AS chunk_count, j.chunks_done AS chunks_done, j.build_generation AS build_generation, j.chunks_embedded AS chunks_embedded,
       j.chunks_reused AS chunks_reused, j.chunks_kept AS chunks_kept, j.invocations AS invocations, j.subrequests_d1 AS subrequests_d1,
       j.subrequests_embed AS subrequests_embed, j.subrequests_index AS subrequests_index,
       j.subrequests_queue AS subrequests_queue, j.subrequests_peak AS subrequests_peak,
       j.d1_rows_read AS d1_rows_read, j.d1_rows_written AS d1_rows_written
FROM jobs j JOIN versions v ON v.doc_id = j.doc_id AND v.version = j.version WHERE j.job_id = ?1";

// ---------------------------------------------------------------- references

/// The rows of document `$d`, version `$v`, generation `$g` (SQL
/// expressions) were written by a build that failed or died, and no build
/// of them since is under way or done (a later pass builds them again).
macro_rules! build_failed {
    (row $r:literal) => {
        concat!(
            "(EXISTS (SELECT 1 FROM jobs bf WHERE bf.doc_id = ",
            $r,
            ".doc_id AND bf.version = ",
            $r,
            ".version
          AND bf.build_generation = ",
            $r,
            ".generation AND bf.state IN ('failed', 'dead'))
  AND NOT EXISTS (SELECT 1 FROM jobs bo WHERE bo.doc_id = ",
            $r,
            ".doc_id AND bo.version = ",
            $r,
            ".version
          AND bo.build_generation = ",
            $r,
            ".generation AND bo.state NOT IN ('failed', 'dead')))"
        )
    };
    (doc $d:literal, version $v:literal, generation $g:literal) => {
        concat!(
            "(EXISTS (SELECT 1 FROM jobs bf WHERE bf.doc_id = ",
            $d,
            " AND bf.version = ",
            $v,
            "
          AND bf.build_generation = ",
            $g,
            " AND bf.state IN ('failed', 'dead'))
  AND NOT EXISTS (SELECT 1 FROM jobs bo WHERE bo.doc_id = ",
            $d,
            " AND bo.version = ",
            $v,
            "
          AND bo.build_generation = ",
            $g,
            " AND bo.state NOT IN ('failed', 'dead')))"
        )
    };
}

/// Whether chunk row `$r` (a table alias) is valid at version `$v` (an SQL
/// expression): written at or before it, not closed at or before it. A
/// row is shared by every version in its range (migration 0019).
macro_rules! valid_at {
    ($r:literal, $v:literal) => {
        concat!(
            "(",
            $r,
            ".version <= ",
            $v,
            " AND (",
            $r,
            ".to_version IS NULL OR ",
            $r,
            ".to_version > ",
            $v,
            "))"
        )
    };
}

/// A chunk row `$r` (a table alias) that may be served, now or later: of a
/// generation still written (active, building, retained), valid at its
/// document's live version or open (valid at the latest version) while the
/// latest is not live yet and its job did not end without it (a failed
/// version is re-run as a new one), and not written by a build that failed
/// (those rows are cleaned up and written again). A vector such a row
/// refers to is never deleted.
macro_rules! row_may_be_served {
    ($r:literal) => {
        concat!(
            "(EXISTS (SELECT 1 FROM generations hg WHERE hg.generation = ", $r, ".generation
          AND hg.state IN ('active', 'building', 'retained'))
  AND EXISTS (SELECT 1 FROM documents hd WHERE hd.doc_id = ", $r, ".doc_id AND (",
            valid_at!($r, "hd.live_version"),
            "
          OR (", $r, ".to_version IS NULL AND (hd.live_version IS NULL OR hd.live_version < hd.latest_version)
              AND NOT EXISTS (SELECT 1 FROM jobs he WHERE he.doc_id = ", $r, ".doc_id AND he.version = hd.latest_version
                              AND he.build_generation IS NULL AND he.state IN ('failed', 'dead', 'superseded')))))
  AND NOT ",
            build_failed!(row $r),
            ")"
        )
    };
}

/// A chunk row `$r` that may be served ([`row_may_be_served`]) or written:
/// a job of a version in its range has not ended (a delivery may still
/// upsert its vectors, or page through its rows). Such a row is never
/// deleted, nor is a vector it refers to.
macro_rules! row_held {
    ($r:literal) => {
        concat!(
            "(",
            row_may_be_served!($r),
            " OR EXISTS (SELECT 1 FROM jobs hj WHERE hj.doc_id = ",
            $r,
            ".doc_id AND hj.version >= ",
            $r,
            ".version AND (",
            $r,
            ".to_version IS NULL OR hj.version < ",
            $r,
            ".to_version)
          AND hj.state IN ('queued', 'running', 'up_for_retry')))"
        )
    };
}

// ---------------------------------------------------------------- consume

/// What the consumer needs to decide about a job: the job, its version
/// (and the version whose parts hold its text: itself, or the one a re-run
/// copied) and the document's current versions (the stale-version check).
pub const CONSUME_LOAD: &str = "\
SELECT j.job_id AS job_id, j.doc_id AS doc_id, j.version AS version, j.kind AS kind, j.state AS state,
       j.attempts AS attempts, j.lease_until AS lease_until, j.next_attempt_at AS next_attempt_at,
       j.build_generation AS build_generation,
       (SELECT g.state FROM generations g WHERE g.generation = j.build_generation) AS build_generation_state,
       v.content_type AS content_type, v.metadata AS metadata, v.part_count AS part_count,
       coalesce(v.text_version, v.version) AS text_version,
       d.latest_version AS latest_version, d.live_version AS live_version,
       (SELECT t.move_state FROM tenants t WHERE t.tenant_id = j.tenant_id) AS move_state
FROM jobs j
JOIN versions v ON v.doc_id = j.doc_id AND v.version = j.version
JOIN documents d ON d.doc_id = j.doc_id
WHERE j.job_id = ?1";

/// Stale work is rejected: a job whose version is no longer the latest (or
/// is already superseded by a live newer version) ends `superseded`,
/// unless a live delivery holds it (it will lose the compare-and-set).
/// `?1` job, `?2` now.
pub const CONSUME_SUPERSEDE: &str = "\
UPDATE jobs SET state = 'superseded', step = 'superseded', updated_at = ?2
WHERE job_id = ?1 AND (state IN ('queued', 'up_for_retry') OR (state = 'running' AND lease_until < ?2))";

/// The claim (invariant 5): only one delivery runs a job at a time. A
/// `running` job can be taken over only after its lease expired, which is
/// longer than an invocation can live. Only a current version can be
/// claimed (the latest, and newer than the live one): a version older than
/// the latest is never written again, which is what lets the cron sweep
/// clean it up. A job whose chunks are staged keeps its step and its
/// checkpoint (`chunks_done`): the staging batch wrote both atomically.
/// Returns the new attempt count and where to continue, read in the same
/// statement (a load before the claim may predate another delivery's
/// staging). A build job (`build_generation`, a backfill) claims a version
/// that is live, into a generation still being written.
/// `?1` job, `?2` now, `?3` lease until, `?4` the claiming delivery's
/// token (`lease_owner`; NULL without one).
pub const CONSUME_CLAIM: &str = "\
UPDATE jobs SET state = 'running', step = CASE WHEN step = 'staged' THEN 'staged' ELSE 'claimed' END,
  attempts = attempts + 1, invocations = invocations + 1, lease_until = ?3, lease_owner = ?4, updated_at = ?2
WHERE job_id = ?1
  -- A job waiting for its retry is claimed at its retry time, not by an
  -- earlier duplicate of its message (each copy would use its attempts).
  AND (state = 'queued' OR (state = 'up_for_retry' AND (next_attempt_at IS NULL OR next_attempt_at <= ?2))
       OR (state = 'running' AND lease_until < ?2))
  AND CASE WHEN jobs.build_generation IS NULL THEN
        EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = jobs.doc_id AND d.latest_version = jobs.version
                AND (d.live_version IS NULL OR d.live_version < jobs.version))
      ELSE
        EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = jobs.doc_id AND d.live_version = jobs.version)
        AND EXISTS (SELECT 1 FROM generations g WHERE g.generation = jobs.build_generation
                    AND g.state IN ('building', 'active', 'retained'))
      END
  -- Not a job of a tenant fenced for a move, moved out or moving in
  -- (migration 0033): the copy runs it again on the new shard.
  AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.tenant_id = jobs.tenant_id
                  AND t.move_state IN ('fenced', 'moved', 'moving_in'))
RETURNING attempts, step, chunks_done, rows_total, failing_since, last_failed_at";

/// The text of version `?2` of document `?1`: the parts its manifest
/// names, each with its place (`n`), or, for a version without one
/// (written before migration 0022), its own parts. The caller orders them
/// by `n` (no sort of the text in SQL).
pub const CONSUME_LOAD_PARTS: &str = "\
SELECT m.key AS n, p.text AS text FROM versions v, json_each(v.parts) m
JOIN version_parts p ON p.doc_id = v.doc_id AND p.version = json_extract(m.value, '$[0]') AND p.part = json_extract(m.value, '$[1]')
WHERE v.doc_id = ?1 AND v.version = ?2
UNION ALL
SELECT p.part AS n, p.text AS text FROM versions v JOIN version_parts p ON p.doc_id = v.doc_id AND p.version = v.version
WHERE v.doc_id = ?1 AND v.version = ?2 AND v.parts IS NULL";

/// A staging batch's rows for document `?1` at version `?2`
/// (`core::row_plan`): the new rows the version writes (`?3`, JSON rows
/// with their order keys), valid from `?2` on (`?4`: the version that
/// closes them at once, for a build of a live version that is no longer
/// the latest; else NULL: open). Written before any vector (invariant 1:
/// D1 knows every vector ID that can exist), and only into generations
/// still written at this moment: one cron retired after the job read its
/// targets gets no row (it would never be cleaned up). Its changes are the
/// rows staged (no trigger on inserts into `chunks`).
pub const CONSUME_STAGE_CHUNKS: &str = "\
INSERT INTO chunks (doc_id, version, to_version, generation, ord, vector_id, content_hash, text, keyword_len)
SELECT ?1, ?2, ?4, json_extract(value, '$.g'), json_extract(value, '$.o'), json_extract(value, '$.id'),
       json_extract(value, '$.h'), json_extract(value, '$.t'), json_extract(value, '$.n')
FROM json_each(?3)
WHERE json_extract(value, '$.g') IN (SELECT generation FROM generations WHERE state IN ('active', 'building', 'retained'))";

/// In the staging batch: the open rows of document `?1` that version `?2`
/// does not keep (`?3`, JSON array of chunk IDs) are closed at it: valid
/// up to the version before, never at `?2` or after.
pub const CONSUME_STAGE_CLOSE: &str = "\
UPDATE chunks SET to_version = ?2
WHERE chunk_id IN (SELECT value FROM json_each(?3)) AND doc_id = ?1 AND to_version IS NULL AND version < ?2";

/// The open rows of document `?1` (valid at the newest staged version),
/// every generation, with the document's staging stamp and latest version
/// read with them: what a staging plans against (`core::row_plan`).
pub const CONSUME_OPEN_ROWS: &str = "\
SELECT c.chunk_id AS chunk_id, c.generation AS generation, c.vector_id AS vector_id, c.ord AS ord,
       d.rows_stamp AS rows_stamp, d.latest_version AS latest_version,
       (SELECT t.keyword_key FROM tenants t WHERE t.tenant_id = d.tenant_id) AS keyword_key
FROM documents d LEFT JOIN chunks c ON c.doc_id = d.doc_id AND c.to_version IS NULL
WHERE d.doc_id = ?1";

/// First in the staging batch: aborts it (a row in `stage_refusals`
/// violates its CHECK) unless the document's staging stamp is still `?2`
/// (no other staging changed its open rows since they were read) and
/// version `?3` may still stage: the latest (an index job), or live (a
/// build job, `?4` = 1). Then the stamp moves on.
pub const CONSUME_STAGE_STAMP_GUARD: &str = "\
INSERT INTO stage_refusals (vector_id)
SELECT 'rows_changed' WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.rows_stamp = ?2
  AND CASE WHEN ?4 = 1 THEN d.live_version = ?3 ELSE d.latest_version = ?3 END)";

/// In the staging batch, after the guard: the stamp moves on. `?1` doc.
pub const CONSUME_STAGE_STAMP: &str =
    "UPDATE documents SET rows_stamp = rows_stamp + 1 WHERE doc_id = ?1";

/// In the staging batch, after the rows are closed: closed rows that no
/// version which may still be served holds (written after the live version
/// by a version that never went live) become intents at once; rows the
/// live version holds wait for the replace.
pub const CONSUME_STAGE_DEAD_INTENTS: &str = "\
INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, 0, ?3
FROM chunks c WHERE c.doc_id = ?1 AND c.to_version = ?2
  AND c.version > coalesce((SELECT d.live_version FROM documents d WHERE d.doc_id = ?1), 0)";

/// In the staging batch, after the rows: aborts it (a row in
/// `stage_refusals` violates its CHECK) if one of the vector IDs the
/// version holds (its document's open rows, after the batch's changes) is
/// being deleted (a drain claimed its intent, `INTENTS_CLAIM`, and its
/// claim holds): the staging waits for the delete, and a vector is never
/// deleted while a row that may be served or written refers to it. An
/// intent's document is its vector's (the ID holds the document key).
/// `?1` doc, `?2` version, `?3` now.
pub const CONSUME_STAGE_GUARD: &str = "\
INSERT INTO stage_refusals (vector_id)
SELECT c.vector_id FROM cleanup_intents i JOIN chunks c ON c.vector_id = i.vector_id AND c.doc_id = ?1
  AND c.version <= ?2 AND (c.to_version IS NULL OR c.to_version > ?2)
WHERE i.doc_id = ?1 AND i.deleting_until >= ?3 LIMIT 1";

/// In the staging batch, after the pages of `CONSUME_STAGE_CHUNKS`: the
/// rows they wrote enter the keyword index with their terms (`?3`: JSON
/// array of `{id, g, k}`, a row's vector ID, generation and terms, scoped
/// to the tenant by `core::terms`), whatever version they belong to: a row
/// is in the index from the batch that writes it until it is deleted
/// (trigger `chunks_keyword_deleted`), and search serves only the rows
/// valid at the live version, as it does for vectors. Only rows just
/// written (a row of a generation retired meanwhile is not). `?1` doc,
/// `?2` version. `CROSS JOIN` keeps the page the outer loop (SQLite never
/// reorders it): each row is one seek of `chunks_by_vector`, where the
/// planner's own choice for `KEYWORD_STAGE_COUNT` (the document's rows
/// outside, the page parsed again for each) stalled local D1 at 1,100
/// chunks.
pub const KEYWORD_STAGE: &str = "\
INSERT INTO keyword_index (rowid, terms)
SELECT c.chunk_id, json_extract(j.value, '$.k') FROM json_each(?3) j
CROSS JOIN chunks c ON c.vector_id = json_extract(j.value, '$.id') AND c.doc_id = ?1 AND c.version = ?2
  AND c.generation = json_extract(j.value, '$.g')";

/// After `KEYWORD_STAGE`, the same rows counted in their tenant's keyword
/// totals (rows, and tokens: their `keyword_len`), which bm25 reads. `?1`
/// doc, `?2` version, `?3` JSON array of `{id, g}` (the outer loop, as in
/// `KEYWORD_STAGE`).
pub const KEYWORD_STAGE_COUNT: &str = "\
UPDATE tenants SET (keyword_rows, keyword_tokens) = (
  SELECT tenants.keyword_rows + count(*), tenants.keyword_tokens + coalesce(sum(c.keyword_len), 0)
  FROM json_each(?3) j
  CROSS JOIN chunks c ON c.vector_id = json_extract(j.value, '$.id') AND c.doc_id = ?1 AND c.version = ?2
    AND c.generation = json_extract(j.value, '$.g'))
WHERE tenant_id = (SELECT d.tenant_id FROM documents d WHERE d.doc_id = ?1)";

/// After the pages of `CONSUME_STAGE_CHUNKS`: the rows they wrote counted
/// in their generations' `chunk_rows` (migration 0024), for the
/// generations the insert wrote into (the same condition, in the same
/// batch). `?1` JSON array of `[generation, rows]`, one per generation
/// the plan writes: one row written per generation, whatever the number
/// of chunks or pages.
pub const GENERATION_ROWS_STAGED: &str = "\
UPDATE generations SET chunk_rows = chunk_rows +
  (SELECT sum(json_extract(value, '$[1]')) FROM json_each(?1) WHERE json_extract(value, '$[0]') = generations.generation)
WHERE generation IN (SELECT json_extract(value, '$[0]') FROM json_each(?1))
  AND state IN ('active', 'building', 'retained')";

/// Records the chunk count of a staged version and the configuration
/// (chunker, model, pooling, dimensions) that produced its chunks and
/// vectors. `?1` doc, `?2` version, `?3` count, `?4` index config JSON.
pub const CONSUME_SET_CHUNK_COUNT: &str =
    "UPDATE versions SET chunk_count = ?3, index_config = ?4 WHERE doc_id = ?1 AND version = ?2";

/// One page of the rows valid at version `?2` of document `?1` that need a
/// vector written: in (generation, order key) order, those after position
/// `?3` (1-based in that order, over all the version's rows; a build
/// job's: of generation `?5` only, else NULL) whose vector the index does
/// not hold already, at most `?4`. A row's vector is held when a row valid
/// at the live version (older, not a tombstone, not marked for repair, not
/// of the same content: a re-run of it, by a reindex or a repair, rewrites
/// every vector) has the same vector ID, written (not by a build still
/// running or failed): an unchanged chunk, whose row the two versions
/// share, keeps its vector, and is neither embedded, read nor written. Each
/// row comes with its position, the number of rows the version has, and
/// the live version's vector for the same text in the same generation, if
/// its values can be reused (a repeat, or a new metadata). The held check
/// looks each row's vector ID up in `chunks_by_vector`; the unary `+`
/// keeps SQLite from choosing the document's index instead, which scans
/// the whole document per row (quadratic; `sql::a_page_finds_kept_chunks_…`).
pub const CONSUME_PAGE: &str = concat!(
    "WITH live AS (
  SELECT d.live_version AS version, d.repair_needed AS repair_needed,
         lv.content_hash = (SELECT v.content_hash FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2) AS rerun
  FROM documents d
  JOIN versions lv ON lv.doc_id = d.doc_id AND lv.version = d.live_version
  WHERE d.doc_id = ?1 AND d.live_version < ?2 AND lv.is_delete = 0),
ranked AS (
  SELECT n.generation, n.ord, n.vector_id, n.content_hash, n.text,
         ROW_NUMBER() OVER (ORDER BY n.generation, n.ord) AS position, count(*) OVER () AS rows_now
  FROM chunks n WHERE n.doc_id = ?1 AND ",
    valid_at!("n", "?2"),
    " AND (?5 IS NULL OR n.generation = ?5))
SELECT r.generation AS generation, r.ord AS ord, r.vector_id AS vector_id,
  r.content_hash AS content_hash, r.text AS text, r.position AS position, r.rows_now AS rows_now,
  (SELECT MIN(o.vector_id) FROM chunks o
   WHERE o.doc_id = ?1 AND o.generation = r.generation AND o.content_hash = r.content_hash
     AND ",
    valid_at!("o", "(SELECT version FROM live)"),
    ") AS reuse_id
FROM ranked r
WHERE r.position > ?3
  AND NOT EXISTS (SELECT 1 FROM chunks o
    WHERE o.vector_id = r.vector_id AND +o.doc_id = ?1 AND +o.generation = r.generation
      AND ",
    valid_at!("o", "(SELECT version FROM live WHERE repair_needed = 0 AND rerun = 0)"),
    "
      AND NOT EXISTS (SELECT 1 FROM jobs b WHERE b.doc_id = ?1 AND b.version = (SELECT version FROM live)
                      AND b.build_generation = o.generation AND b.state IN ('queued', 'running', 'up_for_retry'))
      AND NOT ",
    build_failed!(row "o"),
    ")
ORDER BY r.position LIMIT ?4"
);

/// The checkpoint: a running job hands itself to the next invocation. The
/// attempt that made progress is not a failure: `attempts` counts attempts
/// since the last progress. `?1` job, `?2` now, `?3` chunks done.
pub const CONSUME_CHECKPOINT: &str = "\
UPDATE jobs SET state = 'queued', chunks_done = ?3, attempts = 0, failing_since = NULL, lease_until = NULL, updated_at = ?2
WHERE job_id = ?1 AND state = 'running'";

/// What one invocation used, added to a job's counters: `?2`–`?5`
/// subrequests by kind (D1, embed, index, queue), `?6` chunks embedded,
/// `?7` chunks reused, `?8` the invocation's subrequests so far, `?9`
/// chunks kept (their vector already in the index), `?10` and `?11` the
/// D1 rows read and written (as D1 reported them).
macro_rules! job_usage {
    () => {
        "subrequests_d1 = subrequests_d1 + ?2, subrequests_embed = subrequests_embed + ?3,
  subrequests_index = subrequests_index + ?4, subrequests_queue = subrequests_queue + ?5,
  subrequests_peak = MAX(subrequests_peak, ?8),
  chunks_embedded = chunks_embedded + ?6, chunks_reused = chunks_reused + ?7, chunks_kept = chunks_kept + ?9,
  d1_rows_read = d1_rows_read + ?10, d1_rows_written = d1_rows_written + ?11"
    };
}

/// What one invocation used, added to job `?1`'s counters (`job_usage!`),
/// in the same batch as the statement that ends the invocation.
pub const JOB_ADD_USAGE: &str = concat!("UPDATE jobs SET ", job_usage!(), "\nWHERE job_id = ?1");

/// Beside `JOB_ADD_USAGE`, the same D1 rows added to the usage of job
/// `?1`'s tenant: `?2` read, `?3` written. A job's key names its tenant,
/// so the tenant's row is found by the job's primary key.
pub const TENANT_ADD_D1_ROWS: &str = "\
UPDATE tenants SET d1_rows_read = d1_rows_read + ?2, d1_rows_written = d1_rows_written + ?3
WHERE tenant_id = (SELECT j.tenant_id FROM jobs j WHERE j.job_id = ?1) AND (?2 > 0 OR ?3 > 0)";

/// The staging is done: step `staged` and the rows to write, counted as
/// staged: the rows valid at the version (over every generation the job
/// writes: a build job its own).
/// `?1` job, `?2` now, `?3` doc, `?4` version, `?5` build generation or NULL.
pub const CONSUME_STAGED: &str = concat!(
    "UPDATE jobs SET step = 'staged', chunks_done = 0, updated_at = ?2,
  rows_total = (SELECT count(*) FROM chunks c WHERE c.doc_id = ?3 AND ",
    valid_at!("c", "?4"),
    " AND (?5 IS NULL OR c.generation = ?5))
WHERE job_id = ?1 AND state = 'running'"
);

/// Replace step, statement 2 of 6 (invariant 3): when this version is
/// about to go live, the rows valid at the old live version and not at
/// this one (closed in between: `chunks_closed`) have their vectors
/// become cleanup intents, in the same atomic batch as the compare-and-set.
/// The rows both share stay, and with them their vectors; a vector a row
/// of this version refers to too (a moved chunk) is retired by the drain,
/// not deleted. `?1` doc, `?2` version, `?3` now.
pub const COMMIT_INTENTS_FOR_REPLACED: &str = "\
INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'replaced', 0, 0, ?3
FROM documents d JOIN chunks c ON c.doc_id = d.doc_id AND c.to_version > d.live_version AND c.to_version <= ?2
  AND c.version <= d.live_version
WHERE d.doc_id = ?1 AND d.latest_version = ?2 AND d.live_version < ?2";

/// Replace step, statement 1 of 6, for a tombstone: the document's open
/// rows are closed at it (a delete stages nothing, so nothing else closes
/// them), if the compare-and-set will apply. `?1` doc, `?2` version, `?3`
/// now (unused).
pub const COMMIT_CLOSE_FOR_DELETE: &str = "\
UPDATE chunks SET to_version = ?2
WHERE doc_id = ?1 AND to_version IS NULL AND version < ?2
  AND EXISTS (SELECT 1 FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2 AND v.is_delete = 1)
  AND EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.latest_version = ?2
              AND (d.live_version IS NULL OR d.live_version < ?2))
  AND ?3 IS NOT NULL";

/// Replace step, statement 3 of 6, before the compare-and-set (which it reads): every
/// version from the one live now (none: the first) up to this one is
/// superseded from now on (`superseded_at`, retention's clock: cron prunes
/// its text, later its row and jobs). Only if the compare-and-set will
/// apply (the same condition). `?1` doc, `?2` version, `?3` now.
pub const COMMIT_MARK_SUPERSEDED: &str = "\
UPDATE versions SET superseded_at = ?3
WHERE doc_id = ?1 AND version < ?2 AND superseded_at IS NULL
  AND version >= coalesce((SELECT d.live_version FROM documents d WHERE d.doc_id = ?1), 1)
  AND EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.latest_version = ?2
              AND (d.live_version IS NULL OR d.live_version < ?2))";

/// Replace step, statement 4 of 6 (invariant 2): the compare-and-set. A
/// version goes live only if it is still the latest and newer than the live
/// one, so `live_version` never decreases and a stale message cannot
/// resurrect a deleted document. `?1` doc, `?2` version, `?3` now.
pub const COMMIT_SET_LIVE: &str = "\
UPDATE documents SET live_version = ?2, repair_needed = 0, updated_at = ?3
WHERE doc_id = ?1 AND latest_version = ?2 AND (live_version IS NULL OR live_version < ?2)";

/// Replace step, statement 5 of 6: if the compare-and-set did not make this
/// version live (a newer one arrived), the vectors of its rows that the
/// live version does not hold become intents (the drain keeps any that a
/// newer version's row still refers to). Also when a job ends without its
/// version going live (`jobs.rs`).
pub const COMMIT_INTENTS_FOR_LOSER: &str = concat!(
    "INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, 0, ?3
FROM chunks c
WHERE c.doc_id = ?1 AND ",
    valid_at!("c", "?2"),
    "
  AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.live_version = ?2)
  AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND ",
    valid_at!("c", "d.live_version"),
    ")"
);

/// Replace step, statement 6 of 6: the job ends `succeeded` if its version
/// is live, `superseded` otherwise, and what the invocation used is added
/// to its counters (`job_usage!`: one write of the job's row, where a
/// statement of its own wrote it again). `?1` job, `?2`–`?11` the usage,
/// `?12` doc, `?13` version, `?14` now. A job no longer running (its lease
/// was taken) keeps its state and only counts the usage.
pub const COMMIT_FINISH_JOB: &str = concat!(
    "UPDATE jobs SET
  state = CASE WHEN state <> 'running' THEN state
               WHEN EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?12 AND d.live_version = ?13) THEN 'succeeded'
               ELSE 'superseded' END,
  step = CASE WHEN state = 'running' THEN 'committed' ELSE step END,
  lease_until = CASE WHEN state = 'running' THEN NULL ELSE lease_until END,
  updated_at = CASE WHEN state = 'running' THEN ?14 ELSE updated_at END,
  chunks_done = CASE WHEN state = 'running' THEN COALESCE(rows_total, 0) ELSE chunks_done END,
  ",
    job_usage!(),
    "
WHERE job_id = ?1"
);

/// A transient failure: the job waits for its retry, keeping the progress
/// the attempt made (the retry continues from chunk `?5`). `?1` job, `?2`
/// bucket, `?3` now, `?4` next attempt at, `?6` when its failing run began
/// (`core::failure::failing_run_start`).
pub const JOB_UP_FOR_RETRY: &str = "\
UPDATE jobs SET state = 'up_for_retry', last_failure_bucket = ?2, lease_until = NULL, next_attempt_at = ?4, updated_at = ?3,
  -- An attempt that wrote pages before it failed made progress: its count
  -- and the failing window start again.
  attempts = CASE WHEN ?5 > chunks_done THEN 0 ELSE attempts END,
  failing_since = CASE WHEN ?5 > chunks_done THEN ?3 ELSE ?6 END,
  last_failed_at = ?3,
  chunks_done = ?5
WHERE job_id = ?1 AND state = 'running'";

/// A permanent failure (`failed`) or exhausted attempts (`dead`).
/// `?1` job, `?2` bucket, `?3` now, `?4` final state.
/// `?5`: the delivery that ends it (`jobs.lease_owner`), or NULL for any
/// holder (a delivery without a token: native tests); a delivery ends only
/// a job it holds.
pub const JOB_END_FAILED: &str = "\
UPDATE jobs SET state = ?4, step = 'ended', last_failure_bucket = ?2, lease_until = NULL, updated_at = ?3
WHERE job_id = ?1 AND state = 'running' AND (?5 IS NULL OR lease_owner IS ?5)";

// ---------------------------------------------------------------- cleanup

/// The intents a drain retires without calling the index: of the first
/// `?1` due intents (`?2` now) in the order the claim reads them
/// (`cleanup_intents_due`), those whose vector is referenced by a row that
/// may be served, so it stays; only their rows that nothing holds leave
/// (statement 1, `INTENTS_RETIRE_ROWS`) with the intents (statement 2,
/// `INTENTS_RETIRE`), in one batch. Statement 1 deletes no row that may be
/// served, so both select the same intents. Reading the head of the due
/// order (what the claim walks first) and no more keeps both in proportion
/// to their page, whatever the backlog; an intent not due yet is looked at
/// once it is.
macro_rules! intents_to_retire {
    () => {
        concat!(
            "SELECT h.vector_id FROM (SELECT vector_id FROM cleanup_intents WHERE not_before <= ?2
  ORDER BY not_before, vector_id LIMIT ?1) h
WHERE EXISTS (SELECT 1 FROM chunks r WHERE r.vector_id = h.vector_id AND ",
            row_may_be_served!("r"),
            ")"
        )
    };
}

/// Retiring intents, statement 1 of 2 (see `intents_to_retire`).
pub const INTENTS_RETIRE_ROWS: &str = concat!(
    "DELETE FROM chunks WHERE vector_id IN (",
    intents_to_retire!(),
    ") AND NOT ",
    row_held!("chunks")
);

/// Retiring intents, statement 2 of 2.
pub const INTENTS_RETIRE: &str = concat!(
    "DELETE FROM cleanup_intents WHERE vector_id IN (",
    intents_to_retire!(),
    ")"
);

/// The drain's claim (deletes by reference): of the due intents chosen by
/// `$which` (a document's, or any), at most `?3`, those whose vector no
/// row that may be served or written refers to (`row_held`, checked here,
/// in the statement that chooses what to delete) and that no other drain
/// holds, claimed until `?4` (a lease, longer than any invocation). While
/// the claim holds, no staging may refer to these vectors
/// (`CONSUME_STAGE_GUARD`). Returns the claimed vector IDs. `?2` now.
/// Read in the order of the index that chooses them (its entries end with
/// the key, `vector_id`, since 0023), so a claim stops at its limit.
macro_rules! intents_claim {
    ($which:literal) => {
        concat!(
            "UPDATE cleanup_intents SET deleting_until = ?4 WHERE vector_id IN (
  SELECT i.vector_id FROM cleanup_intents i
  WHERE ",
            $which,
            " AND i.not_before <= ?2 AND (i.deleting_until IS NULL OR i.deleting_until < ?2)
    AND NOT EXISTS (SELECT 1 FROM chunks r WHERE r.vector_id = i.vector_id AND ",
            row_held!("r"),
            ")
  ORDER BY i.not_before, i.vector_id LIMIT ?3)
RETURNING vector_id"
        )
    };
}

/// The claim of document `?1`'s due intents (the consumer's cleanup after
/// its replace): read through `cleanup_intents_by_doc`, whatever the
/// other documents' backlog.
pub const INTENTS_CLAIM_DOC: &str = intents_claim!("i.doc_id = ?1");

/// Cron's claim, of any document's due intents (`?1` NULL): read through
/// `cleanup_intents_due`.
pub const INTENTS_CLAIM: &str = intents_claim!("?1 IS NULL");

/// After the vectors in `?1` (JSON array) were deleted from the index: drop
/// their chunk rows that nothing holds (`row_held`: a row that may be
/// served or written stays).
pub const INTENTS_DONE_DELETE_CHUNKS: &str = concat!(
    "DELETE FROM chunks WHERE vector_id IN (SELECT value FROM json_each(?1)) AND NOT ",
    row_held!("chunks")
);

/// ... and then the intents themselves (invariant 2 of the design: an intent
/// is removed only after its effect succeeded).
pub const INTENTS_DONE_DELETE: &str =
    "DELETE FROM cleanup_intents WHERE vector_id IN (SELECT value FROM json_each(?1))";

/// A failed delete: back off those intents, and release their claim.
/// `?1` JSON ids, `?2` not before.
pub const INTENTS_BACK_OFF: &str = "\
UPDATE cleanup_intents SET attempts = attempts + 1, not_before = ?2, deleting_until = NULL
WHERE vector_id IN (SELECT value FROM json_each(?1))";

// ---------------------------------------------------------------- repair (cron)

/// Field `$field` of the sweep's cursor (`SWEEP_PAGE`).
macro_rules! sweep_cursor {
    ($field:literal) => {
        concat!(
            "(SELECT json_extract(coalesce((SELECT value FROM repair_cursors WHERE name = 'sweep_abandoned'), '[\"\",0,0]'), '$[",
            $field,
            "]'))"
        )
    };
}

/// The page of closed chunk rows that cron's sweep examines next: the
/// sweep's cursor (`repair_cursors` `sweep_abandoned`: JSON `[doc_id,
/// to_version, chunk_id]`, the last row examined; `["",0,0]`, or none:
/// from the start) as a row of its own (`doc_id` NULL), then up to `?1`
/// closed rows after it in `chunks_closed`'s order from each of three
/// ranges of that index: the rest of the cursor's (document, version),
/// the document's later versions, the later documents. The caller keeps
/// the first `?1` in key order. Each arm stops at its limit (a row value
/// compared with the cursor would seek only the index's two columns and
/// walk a large version's rows from its first), so a run reads at most
/// three pages, whatever the number of closed rows (an index outage
/// leaves every replaced row closed until its vector is deleted).
pub const SWEEP_PAGE: &str = concat!(
    "SELECT NULL AS doc_id, NULL AS to_version, NULL AS chunk_id,
  coalesce((SELECT value FROM repair_cursors WHERE name = 'sweep_abandoned'), '[\"\",0,0]') AS cursor
UNION ALL
SELECT * FROM (SELECT doc_id, to_version, chunk_id, NULL FROM chunks
  WHERE to_version IS NOT NULL AND doc_id = ", sweep_cursor!("0"), " AND to_version = ", sweep_cursor!("1"),
    " AND chunk_id > ", sweep_cursor!("2"), "
  ORDER BY chunk_id LIMIT ?1)
UNION ALL
SELECT * FROM (SELECT doc_id, to_version, chunk_id, NULL FROM chunks
  WHERE to_version IS NOT NULL AND doc_id = ", sweep_cursor!("0"), " AND to_version > ", sweep_cursor!("1"), "
  ORDER BY to_version, chunk_id LIMIT ?1)
UNION ALL
SELECT * FROM (SELECT doc_id, to_version, chunk_id, NULL FROM chunks
  WHERE to_version IS NOT NULL AND doc_id > ", sweep_cursor!("0"), "
  ORDER BY doc_id, to_version, chunk_id LIMIT ?1)"
);

/// Closed chunk rows that nothing can serve any more (not valid at the
/// live version; a closed row is valid at no later version either) and
/// that no valid lease of a version in their range may still write become
/// cleanup intents: rows of versions that never went live, and rows an
/// earlier sweep or replace left without an intent. A version older than
/// the latest can never go live (see COMMIT_SET_LIVE), and a lease
/// outlives any invocation. Of the page's rows (`?2`: JSON array of their
/// `chunk_id`s, `SWEEP_PAGE`), in the batch that moves the sweep's cursor
/// past them; open rows of a version that never went live are made
/// intents when its job ends (`COMMIT_INTENTS_FOR_LOSER`). `?1` now.
pub const SWEEP_ABANDONED: &str = concat!(
    "INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, 0, ?1
FROM json_each(?2) k JOIN chunks c ON c.chunk_id = k.value JOIN documents d ON d.doc_id = c.doc_id
WHERE c.to_version IS NOT NULL AND NOT ",
    valid_at!("c", "d.live_version"),
    "
  AND NOT EXISTS (SELECT 1 FROM cleanup_intents i WHERE i.vector_id = c.vector_id)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = c.doc_id AND j.version >= c.version AND j.version < c.to_version
                  AND j.state = 'running' AND j.lease_until >= ?1)"
);

/// Jobs that should be moving but are not: queued with no progress for
/// the stall period, waiting for a retry that fell due before it, or
/// running with an expired lease. `?1` now, `?2` stalled-before, `?3`
/// limit. The first `?3` of each state, each read as a range from its
/// first (queued: `jobs_by_state`, the oldest first; waiting: the partial
/// `jobs_retry_due`, the first due first, migration 0027, named since
/// the planner without statistics would take `jobs_by_state`; running: the
/// running jobs, as many as consumers run at once), then the oldest `?3`
/// of those, without walking every job of a state (a bulk ingest queues a
/// job per document, an outage's backoff puts one per document waiting).
///
/// `moving`: the job's tenant takes no work on this shard now (fenced for a
/// move, moved away, moving in: migration 0033), one lookup of its tenant
/// per job of the page. Such a job is not sent (its consumer would only
/// acknowledge it unrun); cron touches it, so the page moves on.
pub const STALLED_JOBS: &str = "\
SELECT s.job_id AS job_id, s.doc_id AS doc_id, s.version AS version, s.attempts AS attempts,
       s.build_generation AS build_generation,
       EXISTS (SELECT 1 FROM tenants t WHERE t.tenant_id = s.tenant_id
                 AND t.move_state IN ('fenced', 'moved', 'moving_in')) AS moving
FROM (
  SELECT * FROM (SELECT job_id, doc_id, tenant_id, version, attempts, build_generation, updated_at FROM jobs
                 WHERE state = 'queued' AND updated_at < ?2 ORDER BY updated_at, job_id LIMIT ?3)
  UNION ALL
  SELECT * FROM (SELECT job_id, doc_id, tenant_id, version, attempts, build_generation, updated_at FROM jobs INDEXED BY jobs_retry_due
                 WHERE state = 'up_for_retry' AND next_attempt_at < ?2 ORDER BY next_attempt_at, job_id LIMIT ?3)
  UNION ALL
  SELECT * FROM (SELECT job_id, doc_id, tenant_id, version, attempts, build_generation, updated_at FROM jobs
                 WHERE state = 'running' AND lease_until < ?1 ORDER BY updated_at, job_id LIMIT ?3)
  ORDER BY updated_at, job_id LIMIT ?3) s
ORDER BY s.updated_at, s.job_id";

/// Marks re-enqueued jobs so the next run does not send them again at once.
/// `?1` JSON ids, `?2` now.
pub const TOUCH_JOBS: &str = "\
UPDATE jobs SET updated_at = ?2, next_attempt_at = CASE WHEN state = 'up_for_retry' THEN ?2 ELSE next_attempt_at END
WHERE job_id IN (SELECT value FROM json_each(?1)) AND +state IN ('queued', 'up_for_retry', 'running')";

/// A stalled job whose attempts are used up ends `dead`. `?1` job, `?2` now.
pub const JOB_STALLED_DEAD: &str = "\
UPDATE jobs SET state = 'dead', step = 'ended', last_failure_bucket = COALESCE(last_failure_bucket, 'internal'),
  lease_until = NULL, updated_at = ?2
WHERE job_id = ?1 AND (state IN ('queued', 'up_for_retry') OR (state = 'running' AND lease_until < ?2))";

// ---------------------------------------------------------------- tenants

/// Creates tenant `?1` (active; quotas `?2` documents, `?3` bytes, `?4`
/// requests per minute, NULL for the configured default; `?5` now; its
/// keyword key the next: `core::terms`) unless it exists or there are
/// `?6` tenants already (0 rows changed).
pub const TENANT_INSERT: &str = "\
INSERT INTO tenants (tenant_id, state, documents_max, bytes_max, requests_per_minute_max, created_at, updated_at, keyword_key)
SELECT ?1, 'active', ?2, ?3, ?4, ?5, ?5, (SELECT coalesce(max(keyword_key), 0) + 1 FROM tenants)
WHERE (SELECT count(*) FROM tenants) < ?6
ON CONFLICT (tenant_id) DO NOTHING";

/// Tenant `?1` with its live token count.
/// The columns of a tenant's row as the views read it ([`TENANT_GET`],
/// [`TENANTS_PAGE`], [`TENANTS_BY_IDS`]): `t` is the tenants table.
macro_rules! tenant_columns {
    () => {
        "SELECT t.tenant_id, t.state, t.documents_max, t.bytes_max, t.requests_per_minute_max, t.documents, t.bytes,
       t.rate_minute, t.rate_requests, t.created_at, t.updated_at, t.d1_rows_read, t.d1_rows_written,
       (SELECT count(*) FROM tenant_tokens k WHERE k.tenant_id = t.tenant_id AND k.revoked_at IS NULL) AS tokens,
       t.move_state
"
    };
}

pub const TENANT_GET: &str = concat!(tenant_columns!(), "FROM tenants t WHERE t.tenant_id = ?1");

/// Tenants after `?1` (a cursor: the last ID seen, '' first) in ID order, at most `?2`.
pub const TENANTS_PAGE: &str = concat!(
    tenant_columns!(),
    "FROM tenants t WHERE t.tenant_id > ?1 ORDER BY t.tenant_id LIMIT ?2"
);

/// Sets tenant `?1`'s state to `?2` ('active' or 'disabled'). `?3` now.
pub const TENANT_SET_STATE: &str =
    "UPDATE tenants SET state = ?2, updated_at = ?3 WHERE tenant_id = ?1 AND (move_state IS NULL OR move_state = 'copying')";

/// Replaces tenant `?1`'s quotas (`?2` documents, `?3` bytes, `?4`
/// requests per minute; NULL: the configured default). `?5` now.
pub const TENANT_SET_QUOTAS: &str = "\
UPDATE tenants SET documents_max = ?2, bytes_max = ?3, requests_per_minute_max = ?4, updated_at = ?5
WHERE tenant_id = ?1 AND (move_state IS NULL OR move_state = 'copying')";

/// A new token `?1` of tenant `?2`: its hash `?3` and scopes `?4` (JSON
/// array); `?5` now. Nothing if the tenant does not exist.
pub const TOKEN_INSERT: &str = "\
INSERT INTO tenant_tokens (token_id, tenant_id, token_hash, scopes, created_at)
SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2
  AND (move_state IS NULL OR move_state = 'copying'))";

/// Revokes token `?2` of tenant `?1` at `?3` (a revoked one stays revoked
/// when it was).
pub const TOKEN_REVOKE: &str = "\
UPDATE tenant_tokens SET revoked_at = ?3 WHERE tenant_id = ?1 AND token_id = ?2 AND revoked_at IS NULL
  AND EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?1 AND (move_state IS NULL OR move_state = 'copying'))";

/// Token `?2` of tenant `?1`, revoked or not (never its hash).
pub const TOKEN_GET: &str = "\
SELECT token_id, tenant_id, scopes, created_at, revoked_at FROM tenant_tokens WHERE tenant_id = ?1 AND token_id = ?2";

/// Tenant `?1`'s tokens, oldest first (never their hashes).
pub const TOKENS_OF_TENANT: &str = "\
SELECT token_id, tenant_id, scopes, created_at, revoked_at FROM tenant_tokens WHERE tenant_id = ?1
ORDER BY created_at, token_id";

/// What authenticates token `?1`: its tenant, hash, scopes and the
/// tenant's state, if it is not revoked.
pub const TOKEN_LOOKUP: &str = "\
SELECT k.tenant_id AS tenant_id, k.token_hash AS token_hash, k.scopes AS scopes, t.state AS state
FROM tenant_tokens k JOIN tenants t ON t.tenant_id = k.tenant_id
WHERE k.token_id = ?1 AND k.revoked_at IS NULL";

/// Counts one request of active tenant `?1` in minute `?2`, unless it made
/// its quota of requests this minute already (`requests_per_minute_max`,
/// or `?3`) or is not served here (moved out, or moving in): a row
/// returned means admitted, with the tenant's move state (`fenced`: the
/// caller checks the directory again). SET reads the old row.
pub const TENANT_TAKE_REQUEST: &str = "\
UPDATE tenants SET rate_requests = CASE WHEN rate_minute = ?2 THEN rate_requests + 1 ELSE 1 END, rate_minute = ?2
WHERE tenant_id = ?1 AND state = 'active'
  AND (rate_minute <> ?2 OR rate_requests < coalesce(requests_per_minute_max, ?3))
  -- A tenant moved out, or a copy moving in, is not served here.
  AND (move_state IS NULL OR move_state IN ('copying', 'fenced'))
RETURNING move_state";

/// What tenant `?1` stores and may store (`?2`, `?3`: the default quotas
/// of documents and bytes).
pub const TENANT_USAGE: &str = "\
SELECT documents, bytes, coalesce(documents_max, ?2) AS documents_max, coalesce(bytes_max, ?3) AS bytes_max,
       move_state
FROM tenants WHERE tenant_id = ?1";

/// In intake's batch, before the versions: aborts it (a row in
/// `quota_refusals` violates its CHECK) if adding `?2` documents and `?4`
/// bytes would take tenant `?1` past its quotas (`?3`, `?5`: the defaults).
/// Only what grows is checked: a delete always passes. Every new version's
/// text counts (history is stored until cron prunes it). A tenant whose
/// move fenced it here (or moved it away) takes no write either (migration
/// 0033): the batch and the fence are serialized by D1, so no write lands
/// after the fence.
pub const TENANT_QUOTA_GUARD: &str = "\
INSERT INTO quota_refusals (tenant_id)
SELECT tenant_id FROM tenants WHERE tenant_id = ?1
  AND ((?2 > 0 AND documents + ?2 > coalesce(documents_max, ?3)) OR (?4 > 0 AND bytes + ?4 > coalesce(bytes_max, ?5))
       OR move_state IN ('fenced', 'moved', 'moving_in'))";

/// First in a re-run's batch (a backfill's, a redrive's, a repair's, a
/// reindex of one document): aborts it (a row in `quota_refusals` violates
/// its CHECK) if tenant `?1` is fenced for a move, moved away, or moving
/// in (migration 0033). Like intake's guard, atomic with the write it
/// refuses: no re-run lands on a shard after its tenant's fence.
pub const TENANT_MOVE_GUARD: &str = "\
INSERT INTO quota_refusals (tenant_id)
SELECT tenant_id FROM tenants WHERE tenant_id = ?1 AND move_state IN ('fenced', 'moved', 'moving_in')";

/// In intake's batch: what the new versions add to tenant `?1`'s usage
/// (`?2` documents, `?3` bytes; either may be negative).
pub const TENANT_ADD_USAGE: &str =
    "UPDATE tenants SET documents = documents + ?2, bytes = bytes + ?3 WHERE tenant_id = ?1";

// ---------------------------------------------------------------- search

/// Of the candidate vector IDs in `?1` (JSON array), those whose chunk is
/// live (its row valid at its document's live version) in generation `?2`
/// and of tenant `?3` (invariants: search serves only what D1 holds as
/// live, and only the asking tenant's). A hit's version is the live one,
/// its place the row's order key.
pub const LIVE_CHUNKS_BY_VECTOR_ID: &str = concat!(
    "SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, d.live_version AS version, c.ord AS ord, c.text AS text,
       c.generation AS generation, v.metadata AS metadata
FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND ",
    valid_at!("c", "d.live_version"),
    "
JOIN versions v ON v.doc_id = c.doc_id AND v.version = d.live_version
WHERE c.vector_id IN (SELECT value FROM json_each(?1)) AND +c.generation = ?2 AND c.tenant_id = ?3"
);

/// The keyword search's counts, all of tenant `?2`'s own: its keyword key,
/// its rows and tokens in the index, and for each query term of `?1` (JSON
/// array of unscoped terms, `core::terms::query_terms`) how many of its
/// rows hold it (`df`), counted up to `?3` (`KEYWORD_MATCHES_MAX` + 1: a
/// term in more rows is left out of the query whatever its count, so the
/// count reads at most that many of its index entries; `fts5vocab` walked
/// every one, 18 ms for a term in a million rows, `make bench-scale`), as a
/// JSON array of `[term, df]`. One row, none if the tenant does not exist.
pub const KEYWORD_STATS: &str = "\
SELECT t.keyword_key AS keyword_key, t.keyword_rows AS keyword_rows, t.keyword_tokens AS keyword_tokens,
       (SELECT json_group_array(json_array(q.value,
          (SELECT count(*) FROM (SELECT 1 FROM keyword_index
             WHERE keyword_index MATCH '\"' || t.keyword_key || 'z' || replace(q.value, '\"', '\"\"') || '\"' LIMIT ?3))))
        FROM json_each(?1) q) AS df
FROM tenants t WHERE t.tenant_id = ?2";

/// The keyword search: bm25 over tenant `?3`'s own counts. `?1`: JSON
/// array of `{t, w}`, each query term scoped to the tenant
/// (`core::terms::scoped`) with its idf weight (`core::terms::idf`, from
/// `KEYWORD_STATS`); `?6` k1, `?7` b, `?8` the tenant's average row length
/// in tokens. A row's score is the sum over the terms it holds of
/// w·tf·(k1+1) / (tf + k1·(1 − b + b·len/avg)). Of the rows holding a
/// term, the live chunks of generation `?2` and tenant `?3` (`?4`: of that
/// document key only, or NULL), best first (ties: vector ID), at most
/// `?5`. The index holds rows of every version; the joins serve only those
/// valid at the live one, so a keyword hit is fenced exactly as a vector
/// hit is. `CROSS JOIN` keeps the scored rows the outer loop, each chunk a
/// seek of its rowid: the planner's own choice walked every chunk of the
/// generation and scanned the scores for each (a 16,000-chunk document's
/// search stalled local D1).
pub const KEYWORD_CHUNKS: &str = concat!(
    "WITH q(term, w) AS (SELECT json_extract(value, '$.t'), json_extract(value, '$.w') FROM json_each(?1)),
hits(row_id, w, tf) AS (
  SELECT i.doc, q.w, count(*) FROM q CROSS JOIN keyword_instances i ON i.term = q.term GROUP BY i.doc, q.term),
scored(row_id, score) AS (
  SELECT h.row_id, sum(h.w * h.tf * (?6 + 1.0) / (h.tf + ?6 * (1.0 - ?7 + ?7 * c.keyword_len / ?8)))
  FROM hits h JOIN chunks c ON c.chunk_id = h.row_id GROUP BY h.row_id)
SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, d.live_version AS version, c.ord AS ord, c.text AS text,
       c.generation AS generation, v.metadata AS metadata, s.score AS score
FROM scored s CROSS JOIN chunks c ON c.chunk_id = s.row_id
CROSS JOIN documents d ON d.doc_id = c.doc_id AND ",
    valid_at!("c", "d.live_version"),
    "
CROSS JOIN versions v ON v.doc_id = c.doc_id AND v.version = d.live_version
WHERE c.generation = ?2 AND c.tenant_id = ?3 AND (?4 IS NULL OR c.doc_id = ?4)
ORDER BY s.score DESC, c.vector_id LIMIT ?5"
);

/// Upgrade (migration 0021): a page of rows not in the keyword index yet,
/// oldest first, with their tenant's keyword key, at most `?1`.
pub const KEYWORD_UNINDEXED_PAGE: &str = "\
SELECT c.chunk_id AS chunk_id, c.text AS text, t.keyword_key AS keyword_key
FROM chunks c JOIN tenants t ON t.tenant_id = c.tenant_id
WHERE c.keyword_len IS NULL ORDER BY c.chunk_id LIMIT ?1";

/// Upgrade, first in its batch: the page's rows (`?1`: JSON array of
/// `{id, k, n}`) still not in the index are counted in their tenants'
/// keyword totals.
pub const KEYWORD_UNINDEXED_COUNT: &str = "\
UPDATE tenants SET (keyword_rows, keyword_tokens) = (
  SELECT tenants.keyword_rows + count(*), tenants.keyword_tokens + coalesce(sum(json_extract(j.value, '$.n')), 0)
  FROM json_each(?1) j CROSS JOIN chunks c ON c.chunk_id = json_extract(j.value, '$.id') AND c.keyword_len IS NULL
  WHERE c.tenant_id = tenants.tenant_id)
WHERE tenant_id IN (SELECT c.tenant_id FROM json_each(?1) j
                    CROSS JOIN chunks c ON c.chunk_id = json_extract(j.value, '$.id') AND c.keyword_len IS NULL)";

/// Upgrade, second: those rows enter the index with their terms.
pub const KEYWORD_UNINDEXED_ENTER: &str = "\
INSERT INTO keyword_index (rowid, terms)
SELECT c.chunk_id, json_extract(j.value, '$.k') FROM json_each(?1) j
CROSS JOIN chunks c ON c.chunk_id = json_extract(j.value, '$.id') AND c.keyword_len IS NULL";

/// Upgrade, last: those rows are marked as in the index (their term
/// count), and the Japanese terms copy they kept is cleared.
pub const KEYWORD_UNINDEXED_MARK: &str = "\
UPDATE chunks SET keyword_len = j.n, terms = NULL
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.n') AS n FROM json_each(?1)) j
WHERE chunks.chunk_id = j.id AND chunks.keyword_len IS NULL";

// ---------------------------------------------------------------- local vector index
//
// The offline index (INDEX_BACKEND=local-d1, `adapters::local_index`), in
// its own database (`migrations-local-index/`). Vectors are base64 f32 text
// with their norm; `slot` places one in its namespace's blocks
// (`vector_blocks`, one row per dimension per block; NULL: not placed).

/// Inserts or replaces the vectors of JSON page `?1` (`id`, `namespace`,
/// `doc_id`, `vec`, `norm`, `slot`, `metadata`).
pub const LOCAL_INDEX_UPSERT: &str = "\
INSERT INTO vectors (id, namespace, doc_id, vec, norm, slot, metadata)
SELECT json_extract(value, '$.id'), json_extract(value, '$.namespace'), json_extract(value, '$.doc_id'), json_extract(value, '$.vec'), json_extract(value, '$.norm'), json_extract(value, '$.slot'), json_extract(value, '$.metadata')
FROM json_each(?1) WHERE true
ON CONFLICT (id) DO UPDATE SET namespace = excluded.namespace, doc_id = excluded.doc_id, vec = excluded.vec, norm = excluded.norm, slot = excluded.slot, metadata = excluded.metadata";

pub const LOCAL_INDEX_DELETE: &str =
    "DELETE FROM vectors WHERE id IN (SELECT value FROM json_each(?1))";

pub const LOCAL_INDEX_GET: &str =
    "SELECT id, namespace, vec, norm, slot, metadata FROM vectors WHERE id IN (SELECT value FROM json_each(?1))";

/// Exhaustive: every vector of namespace `?1`.
pub const LOCAL_INDEX_SCAN: &str =
    "SELECT id, vec, norm, metadata FROM vectors WHERE namespace = ?1";

/// Exhaustive: every vector of document `?2` in namespace `?1`.
pub const LOCAL_INDEX_SCAN_DOC: &str =
    "SELECT id, vec, norm, metadata FROM vectors WHERE namespace = ?1 AND doc_id = ?2";

/// The vectors of namespace `?1` with the slots of JSON array `?2`.
pub const LOCAL_INDEX_BY_SLOTS: &str =
    "SELECT id, vec, norm, metadata FROM vectors WHERE namespace = ?1 AND slot IN (SELECT value FROM json_each(?2))";

/// At most `?2` vectors of namespace `?1` not in its blocks, oldest first.
pub const LOCAL_INDEX_UNPLACED: &str =
    "SELECT id, vec, norm, metadata FROM vectors WHERE namespace = ?1 AND slot IS NULL ORDER BY rowid LIMIT ?2";

/// Places the vectors of JSON page `?2` (`id`, `slot`) of namespace `?1`,
/// each only if still unplaced. A row still in JSON (`norm` NULL, from
/// before migration 0003) takes the page's `vec` and `norm`. The `+`
/// keeps SQLite from walking an index of the namespace: the page is the
/// outer loop, each row a seek of the primary key.
pub const LOCAL_INDEX_PLACE: &str = "\
UPDATE vectors SET slot = json_extract(j.value, '$.slot'),
  vec = CASE WHEN vectors.norm IS NULL THEN coalesce(json_extract(j.value, '$.vec'), vectors.vec) ELSE vectors.vec END,
  norm = coalesce(vectors.norm, json_extract(j.value, '$.norm'))
FROM json_each(?2) j
WHERE vectors.id = json_extract(j.value, '$.id') AND +vectors.namespace = ?1 AND +vectors.slot IS NULL";

/// Namespace `?1`'s counts, the slots its blocks hold, and its revision.
pub const LOCAL_INDEX_SPACE: &str =
    "SELECT vectors, unplaced, slots, rev FROM vector_spaces WHERE namespace = ?1";

/// The first statement of every write's batch: moves namespace `?1`'s
/// revision on if it is still `?2`, else sets it to -1, which the CHECK
/// refuses, failing the whole batch (another write came between). A
/// namespace never written was read as revision 0 (its row, once made,
/// is never deleted).
pub const LOCAL_INDEX_GUARD: &str = "\
INSERT INTO vector_spaces (namespace, rev) VALUES (?1, 1)
ON CONFLICT (namespace) DO UPDATE SET rev = CASE WHEN rev = ?2 THEN rev + 1 ELSE -1 END";

/// Namespace `?1`'s blocks hold `?2` slots (never fewer than before).
pub const LOCAL_INDEX_SLOTS_SET: &str =
    "UPDATE vector_spaces SET slots = max(slots, ?2) WHERE namespace = ?1";

/// The rows of dimensions JSON array `?2` (-1: the factors) of every block of namespace `?1`.
pub const LOCAL_INDEX_BLOCKS_READ: &str =
    "SELECT dim, block, codes FROM vector_blocks WHERE namespace = ?1 AND dim IN (SELECT value FROM json_each(?2))";

/// Every row of the blocks of JSON array `?2` of namespace `?1`.
pub const LOCAL_INDEX_BLOCK_ROWS: &str =
    "SELECT dim, block, codes FROM vector_blocks WHERE namespace = ?1 AND block IN (SELECT value FROM json_each(?2))";

/// Writes the block rows of JSON page `?2` (`[dim, block, codes]`) of namespace `?1`.
pub const LOCAL_INDEX_BLOCKS_PUT: &str = "\
INSERT INTO vector_blocks (namespace, dim, block, codes)
SELECT ?1, json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?2) WHERE true
ON CONFLICT (namespace, dim, block) DO UPDATE SET codes = excluded.codes";

// ---------------------------------------------------------------- repair runs, dead letters, redrives

/// Records one scheduled run. `?1` started, `?2` finished, `?3` report JSON, `?4` budget hit.
pub const REPAIR_RUN_INSERT: &str =
    "INSERT INTO repair_runs (started_at, finished_at, report, budget_hit) VALUES (?1, ?2, ?3, ?4)";

/// The latest runs first. `?1` limit, `?2` a tenant the run touched, or NULL.
pub const REPAIR_RUNS_LIST: &str = "\
SELECT run_id, started_at, finished_at, report, budget_hit FROM repair_runs
WHERE ?2 IS NULL OR json_extract(report, '$.tenants.\"' || ?2 || '\"') IS NOT NULL
ORDER BY run_id DESC LIMIT ?1";

/// A letter seen again only moves `last_seen` and `times_seen`; the first
/// final evidence is kept: a letter archived while its job was not final
/// yet (the queue gave up on a live job) takes the job's ending.
macro_rules! dead_letter_seen_again {
    () => {
        "
ON CONFLICT (job_id) DO UPDATE SET
  job_state = CASE WHEN dead_letters.job_state IN ('failed', 'dead') THEN dead_letters.job_state ELSE excluded.job_state END,
  job_step = CASE WHEN dead_letters.job_state IN ('failed', 'dead') THEN dead_letters.job_step ELSE excluded.job_step END,
  failure_bucket = CASE WHEN dead_letters.job_state IN ('failed', 'dead') THEN dead_letters.failure_bucket ELSE excluded.failure_bucket END,
  attempts = CASE WHEN dead_letters.job_state IN ('failed', 'dead') THEN dead_letters.attempts ELSE excluded.attempts END,
  chunk_count = COALESCE(dead_letters.chunk_count, excluded.chunk_count),
  last_seen = excluded.last_seen, times_seen = dead_letters.times_seen + 1"
    };
}

/// Archives a dead letter with a snapshot of its job, once per job
/// (`dead_letter_seen_again!`). Never deleted. `?1` job, `?2` message id,
/// `?3` doc, `?4` version, `?5` now.
pub const DEAD_LETTER_ARCHIVE: &str = concat!(
    "\
INSERT INTO dead_letters (job_id, message_id, doc_id, version, job_state, job_step, failure_bucket, attempts, chunk_count, first_seen, last_seen, times_seen)
VALUES (?1, ?2, ?3, ?4,
  (SELECT state FROM jobs WHERE job_id = ?1), (SELECT step FROM jobs WHERE job_id = ?1),
  (SELECT last_failure_bucket FROM jobs WHERE job_id = ?1), (SELECT attempts FROM jobs WHERE job_id = ?1),
  (SELECT chunk_count FROM versions WHERE doc_id = ?3 AND version = ?4), ?5, ?5, 1)",
    dead_letter_seen_again!()
);

/// In the batch that ends a stalled job `dead` (`JOB_STALLED_DEAD`), after
/// it: the job's letter, if that statement ended it now (`?3`), so the
/// job's end and its evidence commit together (I9). `?1` job, `?2`
/// message id, `?3` now.
pub const DEAD_LETTER_ARCHIVE_STALLED: &str = concat!(
    "\
INSERT INTO dead_letters (job_id, message_id, doc_id, version, job_state, job_step, failure_bucket, attempts, chunk_count, first_seen, last_seen, times_seen)
SELECT j.job_id, ?2, j.doc_id, j.version, j.state, j.step, j.last_failure_bucket, j.attempts,
  (SELECT v.chunk_count FROM versions v WHERE v.doc_id = j.doc_id AND v.version = j.version), ?3, ?3, 1
FROM jobs j WHERE j.job_id = ?1 AND j.state = 'dead' AND j.step = 'ended' AND j.updated_at = ?3",
    dead_letter_seen_again!()
);

/// The dead-letter consumer's receipt of a letter the consumer archived
/// before sending it: the row exists already (or is written, if it went
/// missing), nothing is counted twice. Same parameters as the archive.
pub const DEAD_LETTER_CONFIRM: &str = "\
INSERT OR IGNORE INTO dead_letters (job_id, message_id, doc_id, version, job_state, job_step, failure_bucket, attempts, chunk_count, first_seen, last_seen, times_seen)
VALUES (?1, ?2, ?3, ?4,
  (SELECT state FROM jobs WHERE job_id = ?1), (SELECT step FROM jobs WHERE job_id = ?1),
  (SELECT last_failure_bucket FROM jobs WHERE job_id = ?1), (SELECT attempts FROM jobs WHERE job_id = ?1),
  (SELECT chunk_count FROM versions WHERE doc_id = ?3 AND version = ?4), ?5, ?5, 1)";

/// Read-only diagnosis: letters by failure bucket x whether the letter's
/// version is still the document's latest x chunk-count bucket, from the
/// groups' counters (migration 0028: one row per tenant, bucket and size
/// bucket, split here in two by `letters_latest`). `first_seen` and
/// `last_seen` are the bucket and size's, shared by both halves. `$where`:
/// which groups.
macro_rules! dead_letters_summary {
    ($where:literal) => {
        concat!(
            "SELECT tenant_id, failure_bucket, version_is_latest, chunk_count_bucket, letters, deliveries, first_seen, last_seen
FROM (SELECT g.tenant_id AS tenant_id, g.failure_bucket AS failure_bucket, 1 AS version_is_latest,
             g.chunk_count_bucket AS chunk_count_bucket, g.letters_latest AS letters, g.deliveries_latest AS deliveries,
             g.first_seen AS first_seen, g.last_seen AS last_seen
      FROM dead_letter_groups g WHERE g.letters_latest > 0 AND ",
            $where,
            "
      UNION ALL
      SELECT g.tenant_id, g.failure_bucket, 0, g.chunk_count_bucket, g.letters - g.letters_latest,
             g.deliveries - g.deliveries_latest, g.first_seen, g.last_seen
      FROM dead_letter_groups g WHERE g.letters > g.letters_latest AND ",
            $where,
            ")
ORDER BY letters DESC, 1, 2, 3, 4"
        )
    };
}

/// Every tenant's letters, grouped (no parameter): every group's counters
/// (as many as tenants x buckets x sizes, whatever the archive holds).
pub const DEAD_LETTERS_SUMMARY: &str = dead_letters_summary!("true");

/// Tenant `?1`'s letters, grouped: its groups' counters.
pub const TENANT_DEAD_LETTERS_SUMMARY: &str = dead_letters_summary!("g.tenant_id = ?1");

/// A page of letters, newest first, filtered. `?1` bucket or NULL, `?2` doc
/// or NULL, `?3` seen since or NULL, `?4` seen until or NULL, `?5` cursor
/// (last_seen, job_id) as 'ms|job' or NULL, `?6` limit; `$tenant`: the
/// tenant condition. The window and the cursor bound `last_seen` as a
/// range (no `?3 IS NULL OR`), so the page reads an index in its own order
/// (`last_seen DESC, job_id`, migration 0025) from the cursor on and stops
/// once it holds `?6` letters: the archive is never pruned. A filter on
/// the bucket or the document is checked on each letter read, so a rare
/// one reads further.
macro_rules! dead_letters_page {
    ($tenant:literal) => {
        concat!(
            "SELECT l.job_id, l.message_id, l.tenant_id, l.doc_id, l.version, l.job_state, l.job_step, l.failure_bucket, l.attempts,
       l.chunk_count, l.first_seen, l.last_seen, l.times_seen,
       CASE WHEN d.latest_version = l.version THEN 1 ELSE 0 END AS version_is_latest
FROM dead_letters l LEFT JOIN documents d ON d.doc_id = l.doc_id
WHERE ",
            $tenant,
            " l.last_seen >= coalesce(?3, -9223372036854775808)
  AND l.last_seen <= min(coalesce(?4, 9223372036854775807),
                         coalesce(CAST(substr(?5, 1, instr(?5, '|') - 1) AS INTEGER), 9223372036854775807))
  AND (?1 IS NULL OR l.failure_bucket = ?1) AND (?2 IS NULL OR l.doc_id = ?2)
  AND (?5 IS NULL OR l.last_seen < CAST(substr(?5, 1, instr(?5, '|') - 1) AS INTEGER)
       OR (l.last_seen = CAST(substr(?5, 1, instr(?5, '|') - 1) AS INTEGER) AND l.job_id > substr(?5, instr(?5, '|') + 1)))
ORDER BY l.last_seen DESC, l.job_id LIMIT ?6"
        )
    };
}

/// Every tenant's letters (`dead_letters_by_last_seen`).
pub const DEAD_LETTERS_PAGE: &str = dead_letters_page!("");

/// Tenant `?7`'s letters (`dead_letters_by_tenant`, in the page's order
/// within the tenant): a small tenant's page reads its own letters, not
/// every tenant's (10.7 ms for 11 of 10,000 through the other index,
/// `make bench-scale`).
pub const TENANT_DEAD_LETTERS_PAGE: &str = dead_letters_page!("l.tenant_id = ?7 AND");

/// Letters a redrive may touch, with what the ledger says of them now. A
/// letter counts as redriven once an item of it was sent, or while one is
/// waiting in an active redrive (an operator who retried an execute that
/// timed out must not start a second redrive over the same letters).
/// `?1` bucket or NULL, `?2` since or NULL, `?3` until or NULL, `?4` JSON
/// array of doc ids or NULL, `?5` limit.
pub const REDRIVE_CANDIDATES: &str = "\
SELECT l.job_id, l.tenant_id, l.doc_id, l.version, l.failure_bucket, l.last_seen, d.latest_version, d.live_version,
       (SELECT count(*) FROM redrive_items i WHERE i.letter_job_id = l.job_id AND (i.state IN ('sent', 'succeeded')
          OR i.state = 'pending' AND EXISTS (SELECT 1 FROM redrives r WHERE r.redrive_id = i.redrive_id AND r.state IN ('canary', 'running')))) AS redriven,
       (SELECT j.state FROM jobs j WHERE j.job_id = l.job_id) AS job_state_now
FROM dead_letters l LEFT JOIN documents d ON d.doc_id = l.doc_id
WHERE (?1 IS NULL OR l.failure_bucket = ?1) AND (?2 IS NULL OR l.last_seen >= ?2) AND (?3 IS NULL OR l.last_seen <= ?3)
  AND (?4 IS NULL OR l.doc_id IN (SELECT value FROM json_each(?4))) AND (?6 IS NULL OR l.tenant_id = ?6)
ORDER BY l.job_id LIMIT ?5";

pub const REDRIVE_INSERT: &str = "\
INSERT INTO redrives (redrive_id, plan_id, state, params, stop_reason, created_at, updated_at) VALUES (?1, ?2, 'canary', ?3, NULL, ?4, ?4)";

/// `?1` redrive, `?2` JSON array of `{job_id, doc_id, version, phase, seq, state}`.
pub const REDRIVE_ITEMS_INSERT: &str = "\
INSERT INTO redrive_items (redrive_id, letter_job_id, doc_id, version, phase, seq, state, new_job_id, new_version)
SELECT ?1, json_extract(value, '$.job_id'), json_extract(value, '$.doc_id'), json_extract(value, '$.version'),
       json_extract(value, '$.phase'), json_extract(value, '$.seq'), json_extract(value, '$.state'), NULL, NULL
FROM json_each(?2)";

/// `?1` redrive, `?2` now, `?3` event, `?4` detail JSON.
pub const REDRIVE_AUDIT: &str =
    "INSERT INTO redrive_audit (redrive_id, at, event, detail) VALUES (?1, ?2, ?3, ?4)";

pub const REDRIVE_GET: &str = "SELECT redrive_id, plan_id, state, params, stop_reason, created_at, updated_at FROM redrives WHERE redrive_id = ?1";

/// Redrives still moving (for cron). `?1` limit.
pub const REDRIVES_ACTIVE: &str = "SELECT redrive_id FROM redrives WHERE state IN ('canary', 'running') ORDER BY created_at LIMIT ?1";

/// The items of a redrive with the state of the job each one started.
pub const REDRIVE_ITEMS: &str = "\
SELECT i.letter_job_id, i.tenant_id, i.doc_id, i.version, i.phase, i.seq, i.state, i.new_job_id, i.new_version, j.state AS job_state
FROM redrive_items i LEFT JOIN jobs j ON j.job_id = i.new_job_id
WHERE i.redrive_id = ?1 ORDER BY i.seq";

/// Moves an item on, only from the state the caller saw (two concurrent
/// advances of one redrive cannot overwrite each other's result).
/// `?1` redrive, `?2` letter job, `?3` new state, `?4` new job or NULL,
/// `?5` new version or NULL, `?6` expected current state.
/// A redrive's re-run of one letter, statement 1 (in place of
/// `RERUN_ADVANCE`): only while the item is still `pending`, so that of two
/// concurrent advances exactly one re-runs it. `?1` doc, `?2` version, `?3`
/// now, `?4` new job (unused here), `?5` redrive, `?6` letter job.
pub const REDRIVE_RERUN_ADVANCE: &str = "\
UPDATE documents SET latest_version = ?2 + 1, updated_at = ?3
WHERE doc_id = ?1 AND latest_version = ?2 AND (live_version IS NULL OR live_version < ?2)
  AND EXISTS (SELECT 1 FROM redrive_items i WHERE i.redrive_id = ?5 AND i.letter_job_id = ?6 AND i.state = 'pending')";

/// The same re-run's last statement: the item is `sent` with its job, in
/// the batch that created the new version (its `created_at` is `?3`).
pub const REDRIVE_ITEM_SENT: &str = "\
UPDATE redrive_items SET state = 'sent', new_job_id = ?4, new_version = ?2 + 1
WHERE redrive_id = ?5 AND letter_job_id = ?6 AND state = 'pending'
  AND EXISTS (SELECT 1 FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2 + 1 AND v.created_at = ?3)";

pub const REDRIVE_ITEM_SET: &str = "\
UPDATE redrive_items SET state = ?3, new_job_id = COALESCE(?4, new_job_id), new_version = COALESCE(?5, new_version)
WHERE redrive_id = ?1 AND letter_job_id = ?2 AND state = ?6";

/// `?1` redrive, `?2` state, `?3` stop reason or NULL, `?4` now.
pub const REDRIVE_SET_STATE: &str = "\
UPDATE redrives SET state = ?2, stop_reason = COALESCE(?3, stop_reason), updated_at = ?4
WHERE redrive_id = ?1 AND state IN ('canary', 'running')";

/// Re-running a version as a new version with the same content (fresh
/// vector IDs, so nothing left of the failed run can interfere), statement
/// 1 of 3: advance `latest_version` only if `?2` is still the latest and
/// not live. `?1` doc, `?2` version, `?3` now.
pub const RERUN_ADVANCE: &str = "\
UPDATE documents SET latest_version = ?2 + 1, updated_at = ?3
WHERE doc_id = ?1 AND latest_version = ?2 AND (live_version IS NULL OR live_version < ?2)";

/// Statement 2 of 3: the copy of the version row (only if 1 applied). It
/// names the version whose parts hold the text (`text_version`): a re-run
/// stores no second copy of it, and adds nothing to the tenant's bytes.
pub const RERUN_COPY_VERSION: &str = "\
INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, chunk_count, created_at, index_config, text_version)
SELECT doc_id, ?2 + 1, is_delete, content_hash, content_type, metadata, text_bytes, part_count, NULL, ?3, NULL, coalesce(text_version, version)
FROM versions WHERE doc_id = ?1 AND version = ?2
  AND EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.latest_version = ?2 + 1)
  AND NOT EXISTS (SELECT 1 FROM versions v2 WHERE v2.doc_id = ?1 AND v2.version = ?2 + 1)";

/// Whether version `?2 + 1` of document `?1` is this re-run's copy of `?2`
/// (written at `?3` with `?2`'s content): not a write of another client
/// that took the number in the same millisecond.
macro_rules! rerun_copy_applied {
    () => {
        "EXISTS (SELECT 1 FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2 + 1 AND v.created_at = ?3
          AND v.content_hash = (SELECT p.content_hash FROM versions p WHERE p.doc_id = ?1 AND p.version = ?2))"
    };
}

/// Statement 3 of 3: its job, `queued`. `?4` new job id.
pub const RERUN_INSERT_JOB: &str = concat!(
    "\
INSERT OR IGNORE INTO jobs (job_id, doc_id, version, kind, state, step, attempts, last_failure_bucket, lease_until, next_attempt_at, created_at, updated_at)
SELECT ?4, ?1, ?2 + 1, CASE WHEN v.is_delete = 1 THEN 'delete' ELSE 'index' END, 'queued', 'queued', 0, NULL, NULL, NULL, ?3, ?3
FROM versions v WHERE v.doc_id = ?1 AND v.version = ?2 + 1 AND ",
    rerun_copy_applied!()
);

/// Whether a version is a tombstone. `?1` doc, `?2` version.
pub const VERSION_IS_DELETE: &str =
    "SELECT is_delete FROM versions WHERE doc_id = ?1 AND version = ?2";

/// A redrive's audit trail, in order. `?1` redrive.
pub const REDRIVE_AUDIT_LIST: &str =
    "SELECT at, event, detail FROM redrive_audit WHERE redrive_id = ?1 ORDER BY at, rowid";

/// Index verification: a page of live chunks (rows valid at their
/// document's live version), of versions live for longer than the
/// visibility window, in a generation active for longer than it (a
/// backfill's last vectors may be written seconds before its switch, and
/// it changes no document's `updated_at`), after the cursor. `?1` live
/// before, `?2` cursor (vector id, '' to start), `?3` limit. Read in
/// `chunks_by_vector`'s order from the cursor on (the unary `+` keeps
/// SQLite from walking the whole generation and sorting it), so a page
/// stops at its limit.
pub const VERIFY_LIVE_CHUNKS: &str = concat!(
    "SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, d.live_version AS version
FROM chunks c JOIN documents d ON d.doc_id = c.doc_id AND ",
    valid_at!("c", "d.live_version"),
    "
WHERE d.updated_at < ?1 AND c.vector_id > ?2
  AND +c.generation = (SELECT generation FROM generations WHERE state = 'active' AND updated_at < ?1)
ORDER BY c.vector_id LIMIT ?3"
);

/// `?1` cursor name.
pub const CURSOR_GET: &str = "SELECT value FROM repair_cursors WHERE name = ?1";

/// `?1` cursor name, `?2` value.
pub const CURSOR_SET: &str = "\
INSERT INTO repair_cursors (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET value = excluded.value";

/// The live version has vectors missing from the index: shown as
/// `repair_needed` until a new version replaces it. `?1` doc, `?2` version.
pub const MARK_REPAIR_NEEDED: &str =
    "UPDATE documents SET repair_needed = 1 WHERE doc_id = ?1 AND live_version = ?2";

/// Repair of a live version: like RERUN_ADVANCE, but the version to copy
/// may be the live one. `?1` doc, `?2` version, `?3` now.
pub const REPAIR_RERUN_ADVANCE: &str = "\
UPDATE documents SET latest_version = ?2 + 1, updated_at = ?3
WHERE doc_id = ?1 AND latest_version = ?2 AND (live_version IS NULL OR live_version <= ?2)";

// ---------------------------------------------------------------- generations

/// The generations an index job writes: the active one, one being built,
/// and the one retained for a rollback.
pub const GENERATIONS_TARGET: &str = "\
SELECT generation, index_config, state FROM generations
WHERE state IN ('active', 'building', 'retained') ORDER BY generation";

/// Generation 1 starts without a configuration; the first staging records
/// its own. `?1` index config, `?2` now.
pub const GENERATION_ADOPT: &str =
    "UPDATE generations SET index_config = ?1, updated_at = ?2 WHERE generation = 1 AND index_config = ''";

/// What generation 1 adopts when it has no configuration yet (a ledger from
/// before generations): the configuration its vectors were made with, as
/// the newest live version with one records it.
pub const GENERATION_ADOPTABLE_CONFIG: &str = "\
SELECT v.index_config AS index_config FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.live_version
WHERE v.index_config IS NOT NULL AND v.index_config <> '' ORDER BY v.created_at DESC, d.doc_id LIMIT 1";

/// Every generation with its chunk rows in D1 (its count: migration 0024).
pub const GENERATIONS_LIST: &str = "\
SELECT g.generation AS generation, g.index_config AS index_config, g.state AS state,
       g.chunk_rows AS chunk_rows,
       g.created_at AS created_at, g.updated_at AS updated_at
FROM generations g ORDER BY g.generation";

/// The generation search serves.
pub const GENERATION_ACTIVE: &str =
    "SELECT generation, index_config, state FROM generations WHERE state = 'active'";

/// Generation `?3` to build with index config `?1` (`?2` now), in the
/// batch that records its backfill: only if it is the next number, none is
/// being built, no backfill is open and `?4` is still the active generation,
/// with another configuration.
pub const GENERATION_CREATE: &str = "\
INSERT INTO generations (generation, index_config, state, created_at, updated_at)
SELECT ?3, ?1, 'building', ?2, ?2
WHERE (SELECT MAX(generation) FROM generations) = ?3 - 1
  AND NOT EXISTS (SELECT 1 FROM generations WHERE state = 'building')
  AND NOT EXISTS (SELECT 1 FROM backfills WHERE state IN ('running', 'paused'))
  AND EXISTS (SELECT 1 FROM generations WHERE generation = ?4 AND state = 'active' AND index_config <> ?1)";

/// The highest generation number.
pub const GENERATION_MAX: &str =
    "SELECT COALESCE(MAX(generation), 0) AS generation FROM generations";

/// What a switch to generation `?1` waits for: index jobs not ended without
/// rows there (whatever their step: a delivery that read its target
/// generations before this one existed stages without it, maybe after a
/// switch), and build jobs of it not ended (their rows may lack vectors).
/// Jobs in flight only: a range of `jobs_by_state` in each such state.
pub const GENERATION_IN_FLIGHT: &str = concat!(
    "SELECT
  (SELECT count(*) FROM jobs j WHERE j.state IN ('queued', 'running', 'up_for_retry') AND j.kind = 'index'
     AND j.build_generation IS NULL
     AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = j.doc_id AND c.generation = ?1 AND ",
    valid_at!("c", "j.version"),
    ")) AS unstaged,
  (SELECT count(*) FROM jobs j WHERE j.build_generation = ?1 AND j.state IN ('queued', 'running', 'up_for_retry')) AS building"
);

/// A staging that left out generations `?1` (a JSON array) it should have
/// written, since this Worker cannot embed for them: an active or
/// retained one misses that version for good, and is not rolled back to.
/// `?2` now.
pub const GENERATIONS_SKIPPED: &str = "\
UPDATE generations SET skipped_at = COALESCE(skipped_at, ?2)
WHERE generation IN (SELECT value FROM json_each(?1)) AND state IN ('active', 'retained')";

/// The same staging, for a generation being built: it counts against its
/// backfill's pass (`pass_missing`), whose end then starts another pass.
/// `?1` as for `GENERATIONS_SKIPPED`.
pub const BACKFILL_SKIPPED: &str = "\
UPDATE backfills SET pass_missing = pass_missing + 1
WHERE to_generation IN (SELECT value FROM json_each(?1)) AND state IN ('running', 'paused')";

/// Nothing keeps generation `?1` from being switched to: no build of it
/// and no index job without rows there still in flight
/// (`GENERATION_IN_FLIGHT` as one condition), and every live document has
/// its vectors there: for a generation being built, backfill `?3`'s pass
/// `?4` walked every document and counted none it could not build
/// (`pass_missing`, migration 0031; its first page waited for the index
/// jobs in flight without rows there, so every version that went live
/// since was staged there too); a retained one has been written by every
/// version since it was active, unless a staging left it out
/// (`skipped_at`). Shared by the switch's statements, so that each applies
/// only if the switch does.
macro_rules! switch_allowed {
    () => {
        concat!(
        "NOT EXISTS (SELECT 1 FROM jobs j WHERE j.build_generation = ?1 AND j.state IN ('queued', 'running', 'up_for_retry'))
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.state IN ('queued', 'running', 'up_for_retry') AND j.kind = 'index'
                  AND j.build_generation IS NULL
                  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = j.doc_id AND c.generation = ?1 AND ",
    valid_at!("c", "j.version"),
    "))
  AND (EXISTS (SELECT 1 FROM generations r WHERE r.generation = ?1 AND r.state = 'retained' AND r.skipped_at IS NULL)
       OR EXISTS (SELECT 1 FROM backfills b WHERE b.backfill_id = ?3 AND b.to_generation = ?1 AND b.state = 'running'
                  AND b.passes = ?4 AND b.pass_missing = 0))"
        )
    };
}

/// The switch, statement 1 of 4: a generation retained from an earlier
/// switch retires, when switching to a generation being built, and only if
/// the switch applies (`switch_allowed`). `?1` the generation to activate,
/// `?2` now, `?3` and `?4` the backfill and its pass that built it (NULL: a
/// rollback to a retained generation).
pub const GENERATION_SWITCH_RETIRE_OLDER: &str = concat!(
    "UPDATE generations SET state = 'retiring', updated_at = ?2
WHERE state = 'retained' AND generation <> ?1
  AND EXISTS (SELECT 1 FROM generations g WHERE g.generation = ?1 AND g.state = 'building')
  AND EXISTS (SELECT 1 FROM generations g WHERE g.state = 'active' AND g.generation <> ?1)
  AND ",
    switch_allowed!()
);

/// The switch, statement 2 of 4: the active generation becomes retained, if
/// `?1` can be activated (being built or retained) and the switch is
/// allowed: every live document has its vectors there. `?2` now, `?3`
/// and `?4` as for statement 1.
pub const GENERATION_SWITCH_RETAIN: &str = concat!(
    "UPDATE generations SET state = 'retained', updated_at = ?2
WHERE state = 'active' AND generation <> ?1
  AND EXISTS (SELECT 1 FROM generations g WHERE g.generation = ?1 AND g.state IN ('building', 'retained'))
  AND ",
    switch_allowed!()
);

/// The switch, statement 3 of 4: `?1` becomes active if no generation is
/// (statement 2 applied). `?2` now. Statement 4, for a backfill's switch, is
/// `BACKFILL_COMPLETE`, in the same batch: a crash cannot leave a done switch
/// with its backfill running.
pub const GENERATION_SWITCH_ACTIVATE: &str = "\
UPDATE generations SET state = 'active', updated_at = ?2
WHERE generation = ?1 AND state IN ('building', 'retained')
  AND NOT EXISTS (SELECT 1 FROM generations g WHERE g.state = 'active')";

/// Retires a retained or abandoned generation. `?1` generation, `?2` now.
pub const GENERATION_RETIRE: &str = "\
UPDATE generations SET state = 'retiring', updated_at = ?2 WHERE generation = ?1 AND state IN ('retained', 'abandoned')";

/// Abandons the generation being built, in the batch that cancels its
/// backfill (`?3`), if the cancel applied. `?1` generation, `?2` now.
pub const GENERATION_ABANDON: &str = "\
UPDATE generations SET state = 'abandoned', updated_at = ?2 WHERE generation = ?1 AND state = 'building'
  AND EXISTS (SELECT 1 FROM backfills b WHERE b.backfill_id = ?3 AND b.state = 'cancelled' AND b.to_generation = ?1)";

/// Cron's page of documents whose rows of retiring or abandoned
/// generations become intents (`RETIRE_INTENTS`): of the documents after
/// the key in cursor `?1` (none: from the first; `from_key`), at most
/// `?2`, the last key and how many; none read (NULL, 0) unless a
/// generation is retiring or abandoned (`retiring`: how many are; the
/// check is the limit's, `LIMIT 0` otherwise: as a filter on each key it
/// walked every document, 112 ms at 1,000,000, `make bench-scale`). A
/// range of the documents' key: the page reads `?2` keys, whatever the
/// number of documents or chunk rows.
pub const RETIRE_DOCS_PAGE: &str = "\
SELECT (SELECT count(*) FROM generations WHERE state IN ('retiring', 'abandoned')) AS retiring,
       coalesce((SELECT value FROM repair_cursors WHERE name = ?1), '') AS from_key,
       max(doc_id) AS last, count(*) AS documents
FROM (SELECT doc_id FROM documents WHERE doc_id > coalesce((SELECT value FROM repair_cursors WHERE name = ?1), '')
      ORDER BY doc_id LIMIT CASE WHEN EXISTS (SELECT 1 FROM generations WHERE state IN ('retiring', 'abandoned'))
                                 THEN ?2 ELSE 0 END)";

/// The rows of retiring or abandoned generations of the documents with
/// keys in (`?3`, `?4`] (`RETIRE_DOCS_PAGE`) that are not intents yet,
/// except rows of a version range a job may still write. Each retiring
/// generation, then each document of the page, then its rows in that
/// generation (`chunks_by_doc`): in proportion to the page, not to the
/// ledger (migration 0024 dropped the index by generation).
macro_rules! retiring_rows_of_page {
    () => {
        "FROM generations g CROSS JOIN documents d CROSS JOIN chunks c ON c.doc_id = d.doc_id AND c.generation = g.generation
WHERE g.state IN ('retiring', 'abandoned') AND d.doc_id > ?3 AND d.doc_id <= ?4
  AND NOT EXISTS (SELECT 1 FROM cleanup_intents i WHERE i.vector_id = c.vector_id)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = c.doc_id AND j.version >= c.version
                  AND (c.to_version IS NULL OR j.version < c.to_version)
                  AND j.state IN ('queued', 'running', 'up_for_retry'))"
    };
}

/// First in the retire batch: cursor `?1` moves past the page (to its last
/// key `?4`; to the first document, `''`, after a page of fewer than `?2`
/// documents, `?5` of them: the last page) if `RETIRE_INTENTS` will take
/// every row of the page that is left (at most `?2`); else the page is read
/// again by the next pass (its intents then skipped). `?3` the page's
/// first key (exclusive).
pub const RETIRE_CURSOR_MOVE: &str = concat!(
    "INSERT INTO repair_cursors (name, value)
SELECT ?1, CASE WHEN ?5 >= ?2 THEN ?4 ELSE '' END
WHERE (SELECT count(*) FROM (SELECT 1 ",
    retiring_rows_of_page!(),
    " LIMIT ?2 + 1)) <= ?2
ON CONFLICT (name) DO UPDATE SET value = excluded.value"
);

/// Then the rows of the page become cleanup intents, at most `?2`. `?1`
/// now.
pub const RETIRE_INTENTS: &str = concat!(
    "INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, 0, ?1 ",
    retiring_rows_of_page!(),
    "
LIMIT ?2"
);

/// A retiring or abandoned generation with no chunk row left (its count,
/// migration 0024) is retired. `?1` now.
pub const GENERATIONS_RETIRED: &str = "\
UPDATE generations SET state = 'retired', updated_at = ?1
WHERE state IN ('retiring', 'abandoned') AND chunk_rows = 0";

/// A build job that ended `failed` or `dead` (by its consumer or by cron):
/// its rows in its generation (valid at its version) become intents (the
/// version is live, so the loser statement does not cover them), so the
/// generation's switch sees the gap. Only once the job has ended: a build
/// still running keeps its rows. `?1` doc, `?2` version, `?3` now, `?4`
/// generation, `?5` job.
pub const BUILD_INTENTS_FOR_FAILED: &str = concat!(
    "INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, 0, ?3
FROM chunks c WHERE c.doc_id = ?1 AND c.generation = ?4 AND ",
    valid_at!("c", "?2"),
    "
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.job_id = ?5 AND j.state IN ('failed', 'dead'))"
);

// ---------------------------------------------------------------- backfills

/// A new backfill, unless one is running or paused. `?1` id, `?2` scope,
/// `?3` filter JSON, `?4` from generation, `?5` to generation, `?6` page
/// size, `?7` now, `?8` for scope `config` the index config: then only if
/// `?5` is being built with it and `?4` is active (the batch's
/// `GENERATION_CREATE` applied, or found it). `?9` tenant, `?10` the live
/// documents in scope (`BACKFILL_TOTAL`).
pub const BACKFILL_INSERT: &str = "\
INSERT INTO backfills (backfill_id, scope, filter, from_generation, to_generation, state, cursor, passes, page_size, created_at, updated_at, tenant_id, total)
SELECT ?1, ?2, ?3, ?4, ?5, 'running', '', 1, ?6, ?7, ?7, ?9, ?10
WHERE NOT EXISTS (SELECT 1 FROM backfills WHERE state IN ('running', 'paused'))
  AND (?8 IS NULL OR (EXISTS (SELECT 1 FROM generations WHERE generation = ?5 AND state = 'building' AND index_config = ?8)
                      AND EXISTS (SELECT 1 FROM generations WHERE generation = ?4 AND state = 'active')))";

pub const BACKFILL_GET: &str = "\
SELECT backfill_id, scope, filter, tenant_id, from_generation, to_generation, state, cursor, passes, pass_missing, enqueued, failed, total, page_size, created_at, updated_at
FROM backfills WHERE backfill_id = ?1";

/// Backfills, newest first. `?1` limit.
pub const BACKFILLS_LIST: &str = "\
SELECT backfill_id, scope, filter, tenant_id, from_generation, to_generation, state, cursor, passes, pass_missing, enqueued, failed, total, page_size, created_at, updated_at
FROM backfills WHERE ?2 IS NULL OR tenant_id = ?2 OR tenant_id IS NULL ORDER BY created_at DESC, backfill_id DESC LIMIT ?1";

/// The backfill cron advances.
pub const BACKFILL_RUNNING: &str = "\
SELECT backfill_id, scope, filter, tenant_id, from_generation, to_generation, state, cursor, passes, pass_missing, enqueued, failed, total, page_size, created_at, updated_at
FROM backfills WHERE state = 'running' ORDER BY created_at LIMIT 1";

/// A state transition. `?1` id, `?2` new state, `?3` now, `?4` JSON array
/// of the states it may leave.
pub const BACKFILL_SET_STATE: &str = "\
UPDATE backfills SET state = ?2, updated_at = ?3 WHERE backfill_id = ?1 AND state IN (SELECT value FROM json_each(?4))";

/// In a `json_each` over a metadata filter (`f`), whether version `v`'s
/// metadata misses entry `f` or holds another value: equality as
/// `core::metadata::value_eq` has it (and Vectorize): numbers as doubles,
/// other types apart (`json_extract` would read `true` as 1).
macro_rules! metadata_mismatch {
    () => {
        "NOT coalesce(CASE WHEN f.type IN ('integer', 'real')
  THEN json_type(v.metadata, '$.' || f.key) IN ('integer', 'real')
       AND CAST(json_extract(v.metadata, '$.' || f.key) AS REAL) = CAST(f.value AS REAL)
  ELSE json_type(v.metadata, '$.' || f.key) IS f.type AND json_extract(v.metadata, '$.' || f.key) IS f.value END, 0)"
    };
}

/// A backfill's next page: the documents after `?1` (of tenant `?5`, NULL:
/// every tenant's) in key order, at most `?6` of them walked, up to and
/// including the `?4`th that needs a job; each with `need`: 1 a job
/// (scope `config`, `?3` the generation being built: it lacks vectors
/// there and no build of it is pending; the other scopes, `?3` NULL: not
/// being indexed, latest = live), 2 (scope `config`) it lacks them and
/// cannot be built now (a build of it still running, or rows of one that
/// failed, to be cleaned up first), 0 nothing (deleted, never live,
/// outside the filter `?2`, or there already), and `scoped`: how many of
/// the documents walked up to it are in scope (live, not deleted, in the
/// filter). Returns the rows that need something and the last one walked
/// (the cursor's next key), whatever it needs; none: the pass walked
/// every document. The walk's bound is what
/// keeps a page's cost in proportion to it when few documents need a job
/// (a later pass, a narrow filter).
pub const BACKFILL_PAGE: &str = concat!(
    "\
WITH walked AS (
  SELECT * FROM (SELECT d.doc_id, d.live_version, d.latest_version FROM documents d
                 WHERE ?5 IS NULL AND d.doc_id > ?1 ORDER BY d.doc_id LIMIT ?6)
  UNION ALL
  SELECT * FROM (SELECT d.doc_id, d.live_version, d.latest_version FROM documents d
                 WHERE d.tenant_id = ?5 AND d.doc_id > ?1 ORDER BY d.doc_id LIMIT ?6)
), probed AS (
  SELECT w.*, v.is_delete, v.metadata,
    (SELECT max(j.state IN ('queued', 'running', 'up_for_retry')) * 4 + max(j.state IN ('failed', 'dead')) * 2
            + max(j.state NOT IN ('failed', 'dead'))
     FROM jobs j WHERE ?3 IS NOT NULL AND j.doc_id = w.doc_id AND j.version = w.live_version
       AND j.build_generation = ?3) AS builds
  FROM walked w LEFT JOIN versions v ON v.doc_id = w.doc_id AND v.version = w.live_version
), judged AS (
  SELECT v.doc_id, COALESCE(v.live_version, 0) AS version,
    CASE WHEN v.is_delete IS NOT 0 THEN 0
      WHEN ?2 IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(?2) f WHERE ",
    metadata_mismatch!(),
    ") THEN 0
      WHEN ?3 IS NULL THEN v.latest_version = v.live_version
      WHEN coalesce(v.builds, 0) & 4 THEN 2
      WHEN NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = v.doc_id AND c.generation = ?3 AND ",
    valid_at!("c", "v.live_version"),
    ") THEN 1
      WHEN coalesce(v.builds, 0) & 3 = 2 THEN 2
      ELSE 0 END AS need,
    v.is_delete = 0 AND NOT (?2 IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(?2) f WHERE ",
    metadata_mismatch!(),
    ")) AS in_scope
  FROM probed v
), counted AS (
  SELECT doc_id, version, need,
    sum(need = 1) OVER (ORDER BY doc_id ROWS UNBOUNDED PRECEDING) AS k,
    sum(coalesce(in_scope, 0)) OVER (ORDER BY doc_id ROWS UNBOUNDED PRECEDING) AS scoped
  FROM judged
), taken AS (
  SELECT doc_id, version, need, scoped FROM counted WHERE k < ?4 OR (k = ?4 AND need = 1)
)
SELECT doc_id, version, need, scoped FROM taken
WHERE need <> 0 OR doc_id = (SELECT max(doc_id) FROM taken)
ORDER BY doc_id"
);

/// The jobs of backfill `?1` still in flight (its items' jobs in a state
/// not ended): what the end of a pass waits for. Jobs in flight only.
pub const BACKFILL_PENDING: &str = "\
SELECT count(*) AS n FROM jobs j
WHERE j.state IN ('queued', 'running', 'up_for_retry')
  AND EXISTS (SELECT 1 FROM backfill_items i WHERE i.backfill_id = ?1 AND i.doc_id = j.doc_id AND i.job_id = j.job_id)";

/// Live, not deleted documents matching the filter `?1` (NULL: all), of
/// tenant `?2` (NULL: every tenant).
pub const BACKFILL_TOTAL: &str = concat!(
    "\
SELECT count(*) AS n FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.live_version
WHERE v.is_delete = 0 AND (?2 IS NULL OR d.tenant_id = ?2)
  AND (?1 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?1) f WHERE ",
    metadata_mismatch!(),
    "))"
);

/// Build jobs for a page: `?3` JSON array of `{job, doc, version}`, `?2`
/// generation, `?1` now.
pub const BUILD_JOBS_INSERT: &str = "\
INSERT OR IGNORE INTO jobs (job_id, doc_id, version, kind, state, step, attempts, created_at, updated_at, build_generation)
SELECT json_extract(value, '$.job'), json_extract(value, '$.doc'), json_extract(value, '$.version'), 'index', 'queued', 'queued', 0, ?1, ?1, ?2
FROM json_each(?3)";

/// The page's items. `?1` backfill, `?2` pass, `?3` JSON array of `{job,
/// doc}`, `?4` the cursor the page started from: only if the backfill is
/// still there (before `BACKFILL_CURSOR` in the batch), so that its items
/// and its count of them (`enqueued`) move together.
pub const BACKFILL_ITEMS_INSERT: &str = "\
INSERT OR IGNORE INTO backfill_items (backfill_id, doc_id, pass, job_id)
SELECT ?1, json_extract(value, '$.doc'), ?2, json_extract(value, '$.job') FROM json_each(?3)
WHERE EXISTS (SELECT 1 FROM backfills b WHERE b.backfill_id = ?1 AND b.state = 'running' AND b.cursor = ?4)";

/// The cursor after a page, with what the page counted: the documents it
/// could not build (`?4`, `pass_missing`), its items (`?5`, `enqueued`)
/// and the documents in scope it walked (`?6`, `pass_scope`). `?1` id,
/// `?2` cursor, `?3` now, `?7` the cursor the page started from (a page
/// counted once).
pub const BACKFILL_CURSOR: &str = "\
UPDATE backfills SET cursor = ?2, pass_missing = pass_missing + ?4, enqueued = enqueued + ?5,
  pass_scope = pass_scope + ?6, updated_at = ?3
WHERE backfill_id = ?1 AND state = 'running' AND cursor = ?7";

/// A new pass from the start (documents still missing), counting afresh.
/// `?1` id, `?2` now, `?3` the pass that ended (a second call for the same
/// end changes nothing).
/// The pass's walk recounted the documents in scope (`total`).
pub const BACKFILL_NEXT_PASS: &str = "\
UPDATE backfills SET cursor = '', passes = passes + 1, pass_missing = 0,
  total = COALESCE(pass_scope, total), pass_scope = 0, updated_at = ?2
WHERE backfill_id = ?1 AND state = 'running' AND passes = ?3";

/// Completes a backfill (scope `config`: only once its generation is
/// active), at the end of a pass: its walk recounted the documents in
/// scope. `?1` id, `?2` now.
pub const BACKFILL_COMPLETE: &str = "\
UPDATE backfills SET state = 'completed', total = COALESCE(pass_scope, total), updated_at = ?2
WHERE backfill_id = ?1 AND state = 'running'
  AND (to_generation IS NULL OR EXISTS (SELECT 1 FROM generations g WHERE g.generation = backfills.to_generation AND g.state = 'active'))";

// ---------------------------------------------------------------- syncs

/// A new open session: `?1` sync_id, `?2` tenant, `?3` source, `?4` now,
/// `?5` when it expires. None while the tenant moves (0 rows): a move
/// waits for the sessions open when it began, and no new one opens.
pub const SYNC_INSERT: &str = "\
INSERT INTO syncs (sync_id, tenant_id, source, state, created_at, expires_at, updated_at)
SELECT ?1, ?2, ?3, 'open', ?4, ?5, ?4
WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2 AND move_state IS NOT NULL)";

/// A session's row as its view needs it (`s`: the session), one
/// definition for a single session and the listings: the documents it has
/// seen so far, counted only while it is open (after, the view shows the
/// figure its commit recorded, and `sync_seen` keeps every mark), and its
/// planned deletes still pending.
macro_rules! sync_row {
    () => {
        "SELECT s.seq AS seq, s.sync_id AS sync_id, s.tenant_id AS tenant_id, s.source AS source, s.state AS state,
       s.created_at AS created_at, s.expires_at AS expires_at, s.committed_at AS committed_at,
       s.finished_at AS finished_at, s.seen AS seen, s.to_delete AS to_delete, s.deleted AS deleted, s.kept AS kept,
       CASE WHEN s.state = 'open' THEN (SELECT count(*) FROM sync_seen x WHERE x.sync_id = s.sync_id) ELSE 0 END AS seen_now,
       (SELECT count(*) FROM sync_deletes x WHERE x.sync_id = s.sync_id AND x.state = 'pending') AS pending
FROM syncs s "
    };
}

/// Session `?1` of tenant `?2`.
pub const SYNC_GET: &str = concat!(sync_row!(), "WHERE s.sync_id = ?1 AND s.tenant_id = ?2");

/// A page of tenant `?1`'s sessions, newest first: those before `seq` `?2`
/// (the cursor; the largest integer from the start), `?3` at most. The
/// range of `syncs_by_tenant (tenant_id, seq)`, read backwards from the
/// cursor, whatever the number of sessions.
pub const SYNCS_PAGE: &str = concat!(
    sync_row!(),
    "WHERE s.tenant_id = ?1 AND s.seq < ?2 ORDER BY s.seq DESC LIMIT ?3"
);

/// The same page of the sessions of tenant `?1`'s source `?2`, before
/// `seq` `?3`, `?4` at most: the range of `syncs_by_source (tenant_id,
/// source, seq)`.
pub const SOURCE_SYNCS_PAGE: &str = concat!(
    sync_row!(),
    "WHERE s.tenant_id = ?1 AND s.source = ?2 AND s.seq < ?3 ORDER BY s.seq DESC LIMIT ?4"
);

/// In a write's batch, first: aborts it (a row in `sync_refusals` violates
/// its CHECK) unless session `?1` of tenant `?2` and source `?3` is open
/// and unexpired at `?4`.
pub const SYNC_WRITE_GUARD: &str = "\
INSERT INTO sync_refusals (sync_id)
SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM syncs s WHERE s.sync_id = ?1 AND s.tenant_id = ?2 AND s.source = ?3
                            AND s.state = 'open' AND s.expires_at > ?4)";

/// Session `?1` saw the documents in `?2` (JSON array of keys).
pub const SYNC_MARK_SEEN: &str = "\
INSERT OR IGNORE INTO sync_seen (sync_id, doc_id) SELECT ?1, value FROM json_each(?2)";

/// The documents in `?3` (JSON array of keys) belong to source `?2` of
/// tenant `?1` (a document belongs to the last source it was written with).
/// `?4`: 1 for a write outside any session, which marks them with the
/// newest session's `seq` (as `INTAKE_UPSERT_DOCUMENTS`); a move to
/// another source starts from its own mark.
pub const SOURCE_SET_DOCUMENTS: &str = "\
INSERT INTO source_documents (doc_id, tenant_id, source, plain_write_seq)
SELECT value, ?1, ?2, CASE WHEN ?4 = 1 THEN (SELECT coalesce(max(seq), 0) FROM syncs) ELSE 0 END
FROM json_each(?3) WHERE true
ON CONFLICT (doc_id) DO UPDATE SET tenant_id = excluded.tenant_id, source = excluded.source,
  plain_write_seq = CASE WHEN source_documents.source = excluded.source
                         THEN max(source_documents.plain_write_seq, excluded.plain_write_seq)
                         ELSE excluded.plain_write_seq END";

/// Open sessions past their time (`?1`: now) expire, deleting nothing.
pub const SYNC_EXPIRE_DUE: &str = "\
UPDATE syncs SET state = 'expired', finished_at = ?1, updated_at = ?1 WHERE state = 'open' AND expires_at <= ?1";

/// Of tenant `?2`'s source `?3`: its documents (latest version not a
/// tombstone) and how many of them session `?1` would delete: not seen,
/// and not written outside a session since it opened (`plain_write_seq`).
macro_rules! source_counts {
    () => {
        "SELECT count(*) AS documents,
       coalesce(sum(CASE WHEN EXISTS (SELECT 1 FROM sync_seen x WHERE x.sync_id = ?1 AND x.doc_id = sd.doc_id)
                           OR d.plain_write_seq >= s.seq OR sd.plain_write_seq >= s.seq
                         THEN 0 ELSE 1 END), 0) AS to_delete
FROM syncs s
JOIN source_documents sd ON sd.tenant_id = ?2 AND sd.source = ?3
JOIN documents d ON d.doc_id = sd.doc_id
JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
WHERE s.sync_id = ?1 AND v.is_delete = 0"
    };
}

pub const SYNC_SOURCE_COUNTS: &str = source_counts!();

/// In a commit's batch, first: aborts it unless `?5` (allow a mass delete)
/// is 1 or what session `?1` would delete is at most `?4` percent of the
/// source (tenant `?2`, source `?3`).
pub const SYNC_DELETE_GUARD: &str = concat!(
    "INSERT INTO sync_refusals (sync_id) SELECT ?1 FROM (",
    source_counts!(),
    ") c WHERE ?5 = 0 AND c.to_delete * 100 > ?4 * c.documents"
);

/// A commit's plan, if session `?1` (tenant `?2`, source `?3`) is open at
/// `?4`: every document of the source it did not see, at its latest
/// version, that no write outside a session touched since the session
/// opened (I14: a plain write is never deleted by a session it overlapped).
pub const SYNC_PLAN_DELETES: &str = "\
INSERT OR IGNORE INTO sync_deletes (sync_id, doc_id, version, state)
SELECT ?1, sd.doc_id, d.latest_version, 'pending'
FROM syncs s
JOIN source_documents sd ON sd.tenant_id = ?2 AND sd.source = ?3
JOIN documents d ON d.doc_id = sd.doc_id
JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
WHERE s.sync_id = ?1 AND s.state = 'open' AND s.expires_at > ?4 AND v.is_delete = 0
  AND d.plain_write_seq < s.seq AND sd.plain_write_seq < s.seq
  AND NOT EXISTS (SELECT 1 FROM sync_seen x WHERE x.sync_id = ?1 AND x.doc_id = sd.doc_id)";

/// In a commit's batch, if session `?1` is open at `?2`: the earlier open
/// sessions of its source are superseded (the later commit wins).
pub const SYNC_SUPERSEDE_EARLIER: &str = "\
UPDATE syncs SET state = 'superseded', finished_at = ?2, updated_at = ?2
WHERE state = 'open'
  AND tenant_id = (SELECT tenant_id FROM syncs WHERE sync_id = ?1)
  AND source = (SELECT source FROM syncs WHERE sync_id = ?1)
  AND seq < (SELECT seq FROM syncs WHERE sync_id = ?1)
  AND EXISTS (SELECT 1 FROM syncs s WHERE s.sync_id = ?1 AND s.state = 'open' AND s.expires_at > ?2)";

/// Last in a commit's batch: session `?1`, if open at `?2`, is committing,
/// with what it saw and plans to delete.
pub const SYNC_BEGIN_COMMIT: &str = "\
UPDATE syncs SET state = 'committing', committed_at = ?2, updated_at = ?2,
  seen = (SELECT count(*) FROM sync_seen x WHERE x.sync_id = ?1),
  to_delete = (SELECT count(*) FROM sync_deletes x WHERE x.sync_id = ?1)
WHERE sync_id = ?1 AND state = 'open' AND expires_at > ?2";

/// A page of session `?1`'s pending deletes (`?2` rows, by key), each with
/// whether to keep it: a later session of the source saw it, it moved to
/// another source, or a write outside a session touched it since the
/// plan (a new version is kept by the retire itself).
pub const SYNC_DELETES_PAGE: &str = "\
SELECT p.doc_id AS doc_id, p.version AS version,
       (EXISTS (SELECT 1 FROM sync_seen x JOIN syncs l ON l.sync_id = x.sync_id
                WHERE x.doc_id = p.doc_id AND l.tenant_id = s.tenant_id AND l.source = s.source AND l.seq > s.seq)
        OR NOT EXISTS (SELECT 1 FROM source_documents m
                       WHERE m.doc_id = p.doc_id AND m.tenant_id = s.tenant_id AND m.source = s.source
                         AND m.plain_write_seq < s.seq)) AS keep
FROM sync_deletes p JOIN syncs s ON s.sync_id = p.sync_id
WHERE p.sync_id = ?1 AND p.state = 'pending'
ORDER BY p.doc_id LIMIT ?2";

/// In a batch of a commit's tombstones, first: aborts it if a write
/// outside any session marked one of the keys in `?2` (JSON array) since
/// session `?1` opened, after the page was read (the next read keeps it).
pub const SYNC_RETIRE_GUARD: &str = "\
INSERT INTO sync_refusals (sync_id)
SELECT s.sync_id FROM syncs s WHERE s.sync_id = ?1 AND EXISTS (
  SELECT 1 FROM json_each(?2) k JOIN source_documents m ON m.doc_id = k.value WHERE m.plain_write_seq >= s.seq)";

/// Session `?1`'s pending deletes of the keys in `?3` (JSON array) end as
/// `?2` (`deleted` in the batch of their tombstones, `kept` after it).
pub const SYNC_DELETES_SETTLE: &str = "\
UPDATE sync_deletes SET state = ?2
WHERE sync_id = ?1 AND state = 'pending' AND doc_id IN (SELECT value FROM json_each(?3))";

/// After a page: session `?1`'s figures, counted from its plan, and
/// `committed` (at `?2`) once no delete is pending.
pub const SYNC_PAGE_DONE: &str = "\
UPDATE syncs SET
  deleted = (SELECT count(*) FROM sync_deletes x WHERE x.sync_id = ?1 AND x.state = 'deleted'),
  kept = (SELECT count(*) FROM sync_deletes x WHERE x.sync_id = ?1 AND x.state = 'kept'),
  finished_at = CASE WHEN EXISTS (SELECT 1 FROM sync_deletes x WHERE x.sync_id = ?1 AND x.state = 'pending')
                     THEN NULL ELSE ?2 END,
  state = CASE WHEN EXISTS (SELECT 1 FROM sync_deletes x WHERE x.sync_id = ?1 AND x.state = 'pending')
               THEN 'committing' ELSE 'committed' END,
  updated_at = ?2
WHERE sync_id = ?1 AND state = 'committing'";

/// Sessions whose commit is under way, oldest first (`?1` at most): the
/// cron continues them.
pub const SYNCS_COMMITTING: &str = "\
SELECT sync_id, tenant_id FROM syncs WHERE state = 'committing' ORDER BY seq LIMIT ?1";

// ---------------------------------------------------------------- retention (cron)

/// The versions a prune's JSON parameter `?1` names (`[[doc_id, version],
/// …]`), as `v`, each looked up by its key.
macro_rules! versions_named {
    () => {
        "json_each(?1) k JOIN versions v ON v.doc_id = json_extract(k.value, '$[0]') AND v.version = json_extract(k.value, '$[1]')"
    };
}

/// Whether version `v` is superseded and its text may go: no job of it is
/// still running (only the latest version's job can start), and no version
/// that still needs its text names its parts (a re-run's `text_version`).
macro_rules! text_prunable {
    () => {
        "v.superseded_at IS NOT NULL AND v.part_count > 0
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = v.doc_id AND j.version = v.version
                  AND j.state IN ('queued', 'running', 'up_for_retry'))
  AND NOT EXISTS (SELECT 1 FROM versions r WHERE r.doc_id = v.doc_id AND r.text_version = v.version
                  AND r.part_count > 0)"
    };
}

/// A page of superseded versions whose text may go, superseded at or
/// before `?1`, oldest first, at most `?2` (`versions_text_prunable`).
pub const PRUNE_TEXT_PAGE: &str = concat!(
    "SELECT v.doc_id AS doc_id, v.version AS version FROM versions v WHERE v.superseded_at <= ?1 AND ",
    text_prunable!(),
    " ORDER BY v.superseded_at LIMIT ?2"
);

/// A page of texts' prune (`?1` the versions), statement 1 of 3: the
/// versions that may still go hold no text any more (`part_count` 0;
/// `text_bytes` keeps the size it had).
pub const PRUNE_TEXT_MARK: &str = concat!(
    "UPDATE versions SET part_count = 0 WHERE rowid IN (SELECT v.rowid FROM ",
    versions_named!(),
    " WHERE ",
    text_prunable!(),
    ")"
);

/// The parts of the page's documents that no version needs any more: each
/// closed, and no version of its range (the versions that name it:
/// migration 0022) holds text. Read through the key of `version_parts`
/// (a document's parts) and of `versions` (the range).
macro_rules! parts_going {
    () => {
        "SELECT p.rowid FROM version_parts p
  WHERE p.doc_id IN (SELECT json_extract(k.value, '$[0]') FROM json_each(?1) k) AND p.to_version IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM versions r WHERE r.doc_id = p.doc_id AND r.version >= p.version
                    AND r.version < p.to_version AND r.part_count > 0)"
    };
}

/// Statement 2 of 3: each tenant gets back the bytes of the parts that go
/// (a part shared with a version that keeps its text stays, and counts).
pub const PRUNE_TEXT_BYTES: &str = concat!(
    "UPDATE tenants SET bytes = bytes - (SELECT coalesce(sum(length(CAST(p.text AS BLOB))), 0) FROM version_parts p
  WHERE p.tenant_id = tenants.tenant_id AND p.rowid IN (",
    parts_going!(),
    "))
WHERE tenant_id IN (SELECT v.tenant_id FROM ",
    versions_named!(),
    ")"
);

/// Statement 3 of 3: those parts.
pub const PRUNE_TEXT_PARTS: &str = concat!(
    "DELETE FROM version_parts WHERE rowid IN (",
    parts_going!(),
    ")"
);

/// Whether the row of version `v`, superseded at or before `?C`, may go
/// with its jobs: its text is gone, no chunk row, cleanup intent or dead
/// letter names it, no version names its parts, and every job of it ended
/// at or before the cutoff. (`$c`: the cutoff's parameter.)
macro_rules! version_prunable {
    ($c:literal) => {
        concat!(
            "v.superseded_at IS NOT NULL AND v.superseded_at <= ", $c, " AND v.part_count = 0
  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = v.doc_id AND c.version = v.version)
  AND NOT EXISTS (SELECT 1 FROM cleanup_intents i WHERE i.doc_id = v.doc_id AND i.version = v.version)
  AND NOT EXISTS (SELECT 1 FROM dead_letters l WHERE l.doc_id = v.doc_id AND l.version = v.version)
  AND NOT EXISTS (SELECT 1 FROM versions r WHERE r.doc_id = v.doc_id AND r.text_version = v.version)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.doc_id = v.doc_id AND j.version = v.version
                  AND (j.state IN ('queued', 'running', 'up_for_retry') OR j.updated_at > ", $c, "))"
        )
    };
}

/// A page of superseded versions whose rows may go, superseded at or
/// before `?1`, oldest first, at most `?2` (`versions_superseded`).
pub const PRUNE_VERSIONS_PAGE: &str = concat!(
    "SELECT v.doc_id AS doc_id, v.version AS version FROM versions v WHERE ",
    version_prunable!("?1"),
    " ORDER BY v.superseded_at LIMIT ?2"
);

/// A page of version rows' prune (`?1` the versions, `?2` the cutoff),
/// statement 1 of 2: their jobs.
pub const PRUNE_VERSION_JOBS: &str = concat!(
    "DELETE FROM jobs WHERE rowid IN (SELECT j.rowid FROM ",
    versions_named!(),
    " JOIN jobs j ON j.doc_id = v.doc_id AND j.version = v.version WHERE ",
    version_prunable!("?2"),
    ")"
);

/// Statement 2 of 2: the version rows.
pub const PRUNE_VERSION_ROWS: &str = concat!(
    "DELETE FROM versions WHERE rowid IN (SELECT v.rowid FROM ",
    versions_named!(),
    " WHERE ",
    version_prunable!("?2"),
    ")"
);

/// Of the repair runs among the `?2` oldest IDs (the order they were
/// recorded in: a range of the table's key from its first), those that
/// started before `?1` (migration 0029).
pub const PRUNE_REPAIR_RUNS: &str = "\
DELETE FROM repair_runs WHERE run_id < (SELECT min(run_id) FROM repair_runs) + ?2 AND started_at < ?1";

/// Tokens revoked before `?1`, oldest first, at most `?2`
/// (`tenant_tokens_revoked`): a revoked token authenticates nothing.
pub const PRUNE_REVOKED_TOKENS: &str = "\
DELETE FROM tenant_tokens WHERE token_id IN
  (SELECT token_id FROM tenant_tokens WHERE revoked_at IS NOT NULL AND revoked_at < ?1 ORDER BY revoked_at LIMIT ?2)";

/// Sync sessions that finished before `?1` (committed, expired,
/// superseded), oldest first, at most `?2`; not one an earlier session of
/// its source, still open or committing, may yet compare its plan with
/// (`syncs_finished`).
pub const PRUNE_SYNCS_PAGE: &str = "\
SELECT s.sync_id AS id FROM syncs s
WHERE s.finished_at IS NOT NULL AND s.finished_at < ?1 AND +s.state IN ('committed', 'expired', 'superseded')
  AND NOT EXISTS (SELECT 1 FROM syncs e WHERE e.tenant_id = s.tenant_id AND e.source = s.source
                  AND e.seq < s.seq AND e.state IN ('open', 'committing'))
ORDER BY s.finished_at LIMIT ?2";

/// A page of finished sessions' prune (`?1`: JSON array of their IDs),
/// statement 1 of 3: `?2` of their marks at most.
pub const PRUNE_SYNC_SEEN: &str = "\
DELETE FROM sync_seen WHERE (sync_id, doc_id) IN
  (SELECT s.sync_id, s.doc_id FROM json_each(?1) k JOIN sync_seen s ON s.sync_id = k.value LIMIT ?2)";

/// Statement 2 of 3: `?2` of their planned deletes at most.
pub const PRUNE_SYNC_DELETES: &str = "\
DELETE FROM sync_deletes WHERE (sync_id, doc_id) IN
  (SELECT s.sync_id, s.doc_id FROM json_each(?1) k JOIN sync_deletes s ON s.sync_id = k.value LIMIT ?2)";

/// Statement 3 of 3: the sessions that have nothing left.
pub const PRUNE_SYNC_ROWS: &str = "\
DELETE FROM syncs WHERE sync_id IN (SELECT value FROM json_each(?1)) AND +state IN ('committed', 'expired', 'superseded')
  AND NOT EXISTS (SELECT 1 FROM sync_seen x WHERE x.sync_id = syncs.sync_id)
  AND NOT EXISTS (SELECT 1 FROM sync_deletes x WHERE x.sync_id = syncs.sync_id)";

/// Backfills that ended (completed, cancelled, failed) before `?1`, oldest
/// first, at most `?2` (`backfills_ended`).
pub const PRUNE_BACKFILLS_PAGE: &str = "\
SELECT backfill_id AS id FROM backfills
WHERE state IN ('completed', 'cancelled', 'failed') AND updated_at < ?1
ORDER BY updated_at LIMIT ?2";

/// A page of ended backfills' prune (`?1`: JSON array of their IDs),
/// statement 1 of 3: the build jobs of `?2` of their items at most (a
/// re-run's job goes with its version's row), unless a dead letter names
/// them.
pub const PRUNE_BACKFILL_JOBS: &str = "\
DELETE FROM jobs WHERE job_id IN
  (SELECT i.job_id FROM json_each(?1) k JOIN backfill_items i ON i.backfill_id = k.value LIMIT ?2)
  AND build_generation IS NOT NULL AND +state IN ('succeeded', 'failed', 'superseded', 'dead')
  AND NOT EXISTS (SELECT 1 FROM dead_letters l WHERE l.job_id = jobs.job_id)";

/// Statement 2 of 3: those items.
pub const PRUNE_BACKFILL_ITEMS: &str = "\
DELETE FROM backfill_items WHERE rowid IN
  (SELECT i.rowid FROM json_each(?1) k JOIN backfill_items i ON i.backfill_id = k.value LIMIT ?2)";

/// Statement 3 of 3: the backfills that have no item left.
pub const PRUNE_BACKFILL_ROWS: &str = "\
DELETE FROM backfills WHERE backfill_id IN (SELECT value FROM json_each(?1)) AND +state IN ('completed', 'cancelled', 'failed')
  AND NOT EXISTS (SELECT 1 FROM backfill_items x WHERE x.backfill_id = backfills.backfill_id)";

/// Redrives that ended (stopped, completed) before `?1`, oldest first, at
/// most `?2` (`redrives_ended`).
pub const PRUNE_REDRIVES_PAGE: &str = "\
SELECT redrive_id AS id FROM redrives
WHERE state IN ('stopped', 'completed') AND updated_at < ?1
ORDER BY updated_at LIMIT ?2";

/// A page of ended redrives' prune (`?1`: JSON array of their IDs),
/// statement 1 of 3: `?2` of their audit rows at most (the dead letters
/// they re-ran stay).
pub const PRUNE_REDRIVE_AUDIT: &str = "\
DELETE FROM redrive_audit WHERE rowid IN
  (SELECT a.rowid FROM json_each(?1) k JOIN redrive_audit a ON a.redrive_id = k.value LIMIT ?2)";

/// Statement 2 of 3: `?2` of their items at most.
pub const PRUNE_REDRIVE_ITEMS: &str = "\
DELETE FROM redrive_items WHERE rowid IN
  (SELECT i.rowid FROM json_each(?1) k JOIN redrive_items i ON i.redrive_id = k.value LIMIT ?2)";

/// Statement 3 of 3: the redrives that have nothing left.
pub const PRUNE_REDRIVE_ROWS: &str = "\
DELETE FROM redrives WHERE redrive_id IN (SELECT value FROM json_each(?1)) AND +state IN ('stopped', 'completed')
  AND NOT EXISTS (SELECT 1 FROM redrive_audit x WHERE x.redrive_id = redrives.redrive_id)
  AND NOT EXISTS (SELECT 1 FROM redrive_items x WHERE x.redrive_id = redrives.redrive_id)";

// ---------------------------------------------------------------------------
// Shards and the directory (migration 0032): read and written on shard 0.

/// A statement that reads nothing: D1 answers with the database's size
/// (`meta.size_after`), what placement compares.
pub const SIZE_PROBE: &str = "SELECT 1 AS one";

/// The shard of tenant `?1`, if it is placed.
pub const PLACEMENT_OF: &str = "SELECT shard FROM tenant_placements WHERE tenant_id = ?1";

/// Token `?1`'s tenant and that tenant's shard: where its secret is checked.
pub const TOKEN_PLACEMENT: &str = "\
SELECT d.tenant_id AS tenant_id, p.shard AS shard
FROM token_directory d JOIN tenant_placements p ON p.tenant_id = d.tenant_id
WHERE d.token_id = ?1";

/// Places tenant `?1` on shard `?2` at `?3`, unless `?4` tenants are placed
/// already (TENANTS_MAX). A second placement of the tenant violates the
/// key and aborts the batch.
pub const PLACEMENT_INSERT: &str = "\
INSERT INTO tenant_placements (tenant_id, shard, placed_at)
SELECT ?1, ?2, ?3 WHERE (SELECT count(*) FROM tenant_placements) < ?4";

/// Aborts the batch if shard `?2` is dedicated to a tenant other than `?1`.
pub const PLACEMENT_REFUSE_DEDICATED: &str = "\
INSERT INTO placement_refusals (tenant_id)
SELECT ?1 WHERE EXISTS (SELECT 1 FROM dedicated_shards WHERE shard = ?2 AND tenant_id <> ?1)";

/// Aborts the batch if shard `?2` holds a tenant other than `?1` (a
/// dedicated shard starts empty).
pub const PLACEMENT_REFUSE_SHARED: &str = "\
INSERT INTO placement_refusals (tenant_id)
SELECT ?1 WHERE EXISTS (SELECT 1 FROM tenant_placements WHERE shard = ?2 AND tenant_id <> ?1)";

/// Dedicates shard `?2` to tenant `?1` at `?3`.
pub const SHARD_DEDICATE: &str = "\
INSERT INTO dedicated_shards (shard, tenant_id, dedicated_at) VALUES (?2, ?1, ?3)";

/// How many tenants shard `?1` holds (its range of the directory's index).
pub const SHARD_TENANTS: &str = "\
SELECT count(*) AS n FROM tenant_placements WHERE shard = ?1";

/// The dedicated shards (at most one row per shard: 64).
pub const SHARDS_DEDICATED: &str = "SELECT shard, tenant_id FROM dedicated_shards ORDER BY shard";

/// Placed tenants after `?1` in ID order, at most `?2`, with their shards.
pub const PLACEMENTS_PAGE: &str = "\
SELECT tenant_id, shard FROM tenant_placements WHERE tenant_id > ?1 ORDER BY tenant_id LIMIT ?2";

/// Token `?1` belongs to tenant `?2`.
pub const TOKEN_DIRECTORY_INSERT: &str = "\
INSERT INTO token_directory (token_id, tenant_id) VALUES (?1, ?2)";

/// Forgets token `?1` of tenant `?2` (revoked: no request finds its shard).
pub const TOKEN_DIRECTORY_DELETE: &str = "\
DELETE FROM token_directory WHERE token_id = ?1 AND tenant_id = ?2";

/// Tenants `?1` (a JSON array of IDs) as TENANTS_PAGE reads them, in no
/// order: one shard's part of a page of the directory.
pub const TENANTS_BY_IDS: &str = concat!(
    tenant_columns!(),
    "FROM json_each(?1) j JOIN tenants t ON t.tenant_id = j.value"
);

// ---------------------------------------------------------------- moves
//
// Moving a tenant between shards (migration 0033; docs/ARCHITECTURE.md,
// "Moving a tenant"). The move's record is on shard 0, beside the
// directory; the copy reads the shard the tenant leaves and writes the one
// it goes to, a page of documents at a time.

/// The columns a move copies of each table (every stored column; the
/// generated ones follow), as a `SELECT` of the rows of the documents in
/// `?1` (a JSON array of keys) and an `INSERT` of rows given as a JSON
/// array of objects in `?1`.
macro_rules! move_table {
    ($select:ident, $insert:ident, $table:literal, $key:literal, [$first:literal $(, $col:literal)*]) => {
        #[doc = concat!("A move's read of `", $table, "` for the documents in `?1` (JSON array of keys).")]
        pub const $select: &str = concat!(
            "SELECT ", $first $(, ", ", $col)*, " FROM ", $table,
            " WHERE ", $key, " IN (SELECT value FROM json_each(?1))"
        );
        #[doc = concat!("A move's write of `", $table, "` rows (`?1`: JSON array of objects, as its read gives them).")]
        pub const $insert: &str = concat!(
            "INSERT INTO ", $table, " (", $first $(, ", ", $col)*, ") SELECT json_extract(value, '$.", $first, "')"
            $(, ", json_extract(value, '$.", $col, "')")*, " FROM json_each(?1)"
        );
    };
}

move_table!(
    MOVE_VERSIONS_OF,
    MOVE_VERSIONS_INSERT,
    "versions",
    "doc_id",
    [
        "doc_id",
        "version",
        "is_delete",
        "content_hash",
        "content_type",
        "metadata",
        "text_bytes",
        "part_count",
        "chunk_count",
        "created_at",
        "index_config",
        "superseded_at",
        "text_version",
        "parts"
    ]
);
move_table!(
    MOVE_PARTS_OF,
    MOVE_PARTS_INSERT,
    "version_parts",
    "doc_id",
    ["doc_id", "version", "part", "text", "to_version"]
);
move_table!(
    MOVE_JOBS_OF,
    MOVE_JOBS_INSERT,
    "jobs",
    "doc_id",
    [
        "job_id",
        "doc_id",
        "version",
        "kind",
        "state",
        "step",
        "attempts",
        "last_failure_bucket",
        "lease_until",
        "next_attempt_at",
        "created_at",
        "updated_at",
        "chunks_done",
        "invocations",
        "subrequests_d1",
        "subrequests_embed",
        "subrequests_index",
        "subrequests_queue",
        "subrequests_peak",
        "chunks_embedded",
        "chunks_reused",
        "build_generation",
        "rows_total",
        "failing_since",
        "last_failed_at",
        "chunks_kept",
        "lease_owner",
        "d1_rows_read",
        "d1_rows_written"
    ]
);
move_table!(
    MOVE_LETTERS_OF,
    MOVE_LETTERS_INSERT,
    "dead_letters",
    "doc_id",
    [
        "job_id",
        "message_id",
        "doc_id",
        "version",
        "job_state",
        "job_step",
        "failure_bucket",
        "attempts",
        "chunk_count",
        "first_seen",
        "last_seen",
        "times_seen"
    ]
);
move_table!(
    MOVE_SOURCES_OF,
    MOVE_SOURCES_INSERT,
    "source_documents",
    "doc_id",
    ["doc_id", "tenant_id", "source", "plain_write_seq"]
);
move_table!(
    MOVE_TOKENS_OF,
    MOVE_TOKENS_INSERT,
    "tenant_tokens",
    "tenant_id",
    [
        "token_id",
        "tenant_id",
        "token_hash",
        "scopes",
        "created_at",
        "revoked_at"
    ]
);

/// A page of tenant `?1`'s documents after key `?2` (`''`: from the
/// start), `?3` at most, in key order (the range of `documents_by_tenant`),
/// each with its *mark*: what a copy must match (its versions, its repair
/// flag, its newest job's ID and whether it ended and how, its letters).
/// A copy holds the same mark as its original until the original changes,
/// so the catch-up copies again only what changed since the copy. A job
/// not yet ended is copied to run again, so only "not ended" is marked.
macro_rules! move_docs {
    () => {
        "SELECT d.doc_id AS doc_id, d.latest_version AS latest_version, d.live_version AS live_version,
       d.repair_needed AS repair_needed, d.created_at AS created_at, d.updated_at AS updated_at,
       d.plain_write_seq AS plain_write_seq, d.rows_stamp AS rows_stamp,
       d.latest_version || '/' || coalesce(d.live_version, '-') || '/' || d.repair_needed || '/' || d.plain_write_seq
       || '/' || coalesce((SELECT j.job_id || ':' || CASE WHEN j.state IN ('succeeded', 'failed', 'dead', 'superseded')
                                  THEN j.state || ':' || coalesce(j.last_failure_bucket, '') ELSE 'open' END
                           FROM jobs j WHERE j.doc_id = d.doc_id AND j.build_generation IS NULL
                           ORDER BY j.version DESC, j.created_at DESC, j.job_id LIMIT 1), '-')
       || '/' || (SELECT count(*) || ':' || coalesce(sum(l.times_seen), 0) FROM dead_letters l WHERE l.doc_id = d.doc_id) AS mark
"
    };
}

pub const MOVE_DOCS_PAGE: &str = concat!(
    move_docs!(),
    "FROM documents d WHERE d.tenant_id = ?1 AND d.doc_id > ?2 ORDER BY d.doc_id LIMIT ?3"
);

/// The documents `?1` (JSON array of keys) held here, as `MOVE_DOCS_PAGE`
/// reads them (with their marks): what the new shard's copy of a page is.
pub const MOVE_DOCS_OF: &str = concat!(
    move_docs!(),
    "FROM json_each(?1) k CROSS JOIN documents d ON d.doc_id = k.value"
);

/// The rows a copy takes of the documents in `?1` (JSON array of keys):
/// those valid at each one's live version in generation `?2` (the active
/// one), in no order (the Worker sorts the page's rows by document and
/// order key). Rows staged for a newer version stay behind:
/// its job runs again on the new shard, and stages again there.
pub const MOVE_LIVE_ROWS_OF: &str = concat!(
    "SELECT c.doc_id AS doc_id, c.version AS version, c.ord AS ord, c.vector_id AS vector_id,
       c.content_hash AS content_hash, c.text AS text
FROM json_each(?1) k CROSS JOIN documents d ON d.doc_id = k.value
CROSS JOIN chunks c ON c.doc_id = d.doc_id AND c.generation = ?2 AND ",
    valid_at!("c", "d.live_version")
);

/// First in a copy's batch on the shard the tenant goes to: aborts it (a
/// row in `move_refusals` violates its CHECK) unless tenant `?1` is still
/// moving in there (a cancel may have cleaned the copy meanwhile).
pub const MOVE_COPY_GUARD: &str = "\
INSERT INTO move_refusals (tenant_id)
SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?1 AND move_state = 'moving_in')";

/// In a copy's batch, before and after the documents `?2` (JSON array of
/// keys) are written: their usage taken off (`?3`: -1) or added (`?3`: 1)
/// to tenant `?1`: documents whose latest version is not a delete, and the
/// bytes of their text parts (as intake and retention count them).
pub const MOVE_USAGE: &str = "\
UPDATE tenants SET
  documents = documents + ?3 * (SELECT count(*) FROM json_each(?2) k CROSS JOIN documents d ON d.doc_id = k.value
    CROSS JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version WHERE v.is_delete = 0),
  bytes = bytes + ?3 * (SELECT coalesce(sum(length(CAST(p.text AS BLOB))), 0) FROM json_each(?2) k
    CROSS JOIN version_parts p ON p.doc_id = k.value)
WHERE tenant_id = ?1";

/// In a copy's batch: the vectors of the rows an earlier copy of the
/// documents `?1` wrote become intents (`?2` now), before those rows go;
/// the rows written again in the same batch refer to most of them, and
/// cron retires those without a delete; the others are deleted.
pub const MOVE_OLD_ROWS_INTENTS: &str = "\
INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT c.vector_id, c.doc_id, c.version, 'abandoned', 0, ?2, ?2
FROM json_each(?1) k CROSS JOIN chunks c ON c.doc_id = k.value";

/// In a copy's batch (or a cleanup's): the documents `?1`'s rows of each
/// table go, children first (the triggers keep the keyword index, the
/// generations' counts, the tenant's counts and the letter groups true).
pub const MOVE_DELETE_CHUNKS: &str =
    "DELETE FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_JOBS: &str =
    "DELETE FROM jobs WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_LETTERS: &str =
    "DELETE FROM dead_letters WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_SOURCES: &str =
    "DELETE FROM source_documents WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_PARTS: &str =
    "DELETE FROM version_parts WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_VERSIONS: &str =
    "DELETE FROM versions WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_INTENTS: &str =
    "DELETE FROM cleanup_intents WHERE doc_id IN (SELECT value FROM json_each(?1))";
pub const MOVE_DELETE_DOCUMENTS: &str =
    "DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?1))";

/// In a copy's batch: each document of `?1` (JSON array of its rows) as
/// it is, but not live and not marked for repair, so that the counting
/// triggers see it as a document with no live version while its versions
/// and jobs change (its live version and flag follow, `MOVE_DOCS_LIVE`).
pub const MOVE_DOCS_UPSERT: &str = "\
INSERT INTO documents (doc_id, latest_version, live_version, repair_needed, created_at, updated_at, plain_write_seq, rows_stamp)
SELECT json_extract(value, '$.doc_id'), json_extract(value, '$.latest_version'), NULL, 0,
       json_extract(value, '$.created_at'), json_extract(value, '$.updated_at'),
       json_extract(value, '$.plain_write_seq'), json_extract(value, '$.rows_stamp')
FROM json_each(?1) WHERE true
ON CONFLICT (doc_id) DO UPDATE SET latest_version = excluded.latest_version, live_version = NULL,
  repair_needed = 0, created_at = excluded.created_at, updated_at = excluded.updated_at,
  plain_write_seq = excluded.plain_write_seq, rows_stamp = excluded.rows_stamp";

/// Last in a copy's batch: each document of `?1` (JSON array of its
/// rows) gets its live version and repair flag.
pub const MOVE_DOCS_LIVE: &str = "\
UPDATE documents SET live_version = j.live_version, repair_needed = j.repair_needed
FROM (SELECT json_extract(value, '$.doc_id') AS doc_id, json_extract(value, '$.live_version') AS live_version,
             json_extract(value, '$.repair_needed') AS repair_needed FROM json_each(?1)) j
WHERE documents.doc_id = j.doc_id";

/// In a copy's batch: the live rows of document `?1`, open, in generation
/// `?3`, under their IDs there (`?2`: JSON array of `{v, o, id, h, t}`),
/// not yet in the keyword index (`MOVE_KEYWORD_ENTER` enters them).
pub const MOVE_CHUNKS_INSERT: &str = "\
INSERT INTO chunks (doc_id, version, to_version, generation, ord, vector_id, content_hash, text, keyword_len)
SELECT ?1, json_extract(value, '$.v'), NULL, ?3, json_extract(value, '$.o'), json_extract(value, '$.id'),
       json_extract(value, '$.h'), json_extract(value, '$.t'), NULL
FROM json_each(?2)";

/// After `MOVE_CHUNKS_INSERT`: those rows enter the keyword index with
/// their terms (`?2`: JSON array of `{id, k, n}`, scoped to the tenant's
/// key on this shard), then are marked with their term counts.
pub const MOVE_KEYWORD_ENTER: &str = "\
INSERT INTO keyword_index (rowid, terms)
SELECT c.chunk_id, json_extract(j.value, '$.k') FROM json_each(?2) j
CROSS JOIN chunks c ON c.vector_id = json_extract(j.value, '$.id') AND c.doc_id = ?1 AND c.generation = ?3
  AND c.keyword_len IS NULL";

pub const MOVE_KEYWORD_MARK: &str = "\
UPDATE chunks SET keyword_len = j.n
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.n') AS n FROM json_each(?2)) j
WHERE chunks.vector_id = j.id AND chunks.doc_id = ?1 AND chunks.generation = ?3 AND chunks.keyword_len IS NULL";

/// After the rows: the tenant's keyword totals (`?2` rows, `?3` terms)
/// and the generation's row count (`?4`, `?5` rows).
pub const MOVE_KEYWORD_COUNT: &str = "\
UPDATE tenants SET keyword_rows = keyword_rows + ?2, keyword_tokens = keyword_tokens + ?3 WHERE tenant_id = ?1";
pub const MOVE_GENERATION_ROWS: &str =
    "UPDATE generations SET chunk_rows = chunk_rows + ?2 WHERE generation = ?1";

/// Last in a copy's batch: aborts it if a drain's claim holds on an intent
/// whose vector a row of the documents `?1` refers to (`?2` now): the copy
/// waits for the delete, as a staging does (`CONSUME_STAGE_GUARD`).
pub const MOVE_STAGE_GUARD: &str = "\
INSERT INTO stage_refusals (vector_id)
SELECT c.vector_id FROM json_each(?1) k CROSS JOIN cleanup_intents i ON i.doc_id = k.value
JOIN chunks c ON c.vector_id = i.vector_id AND c.doc_id = i.doc_id
WHERE i.deleting_until >= ?2 LIMIT 1";

/// The vector IDs of the documents `?1` (JSON array of keys) on this shard:
/// their rows' and their intents' (what a cleanup deletes from the index).
pub const MOVE_VECTOR_IDS_OF: &str = "\
SELECT c.vector_id AS vector_id FROM json_each(?1) k CROSS JOIN chunks c ON c.doc_id = k.value
UNION
SELECT i.vector_id AS vector_id FROM json_each(?1) k CROSS JOIN cleanup_intents i ON i.doc_id = k.value";

/// Tenant `?1` arriving on this shard: its row as on the shard it leaves
/// (`?2` state, `?3`..`?5` quotas, `?6` created), moving in, with nothing
/// counted yet and this shard's next keyword key. Nothing if it is here.
pub const MOVE_TENANT_ARRIVE: &str = "\
INSERT INTO tenants (tenant_id, state, documents_max, bytes_max, requests_per_minute_max, created_at, updated_at, keyword_key, move_state)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT coalesce(max(keyword_key), 0) + 1 FROM tenants), 'moving_in'
ON CONFLICT (tenant_id) DO NOTHING";

/// At the end of the catch-up: tenant `?1`'s state and quotas as on the
/// shard it leaves (`?2`..`?5`), while it is still moving in.
pub const MOVE_TENANT_SETTINGS: &str = "\
UPDATE tenants SET state = ?2, documents_max = ?3, bytes_max = ?4, requests_per_minute_max = ?5, updated_at = ?6
WHERE tenant_id = ?1 AND move_state = 'moving_in'";

/// After a switch: a page of tenant `?1`'s documents on the new shard
/// after key `?2`, `?3` at most (`documents_by_tenant`), each with the
/// jobs a copy carried there to run again (queued, never touched since:
/// `updated_at` 0), to be sent. A document without one has a NULL job.
pub const MOVE_CARRIED_JOBS: &str = "\
SELECT p.doc_id AS page_doc, j.job_id AS job_id, j.doc_id AS doc_id, j.version AS version
FROM (SELECT doc_id FROM documents WHERE tenant_id = ?1 AND doc_id > ?2 ORDER BY doc_id LIMIT ?3) p
LEFT JOIN jobs j ON j.doc_id = p.doc_id AND j.state = 'queued'";

/// The intents of a tenant's documents that have no row any more (a
/// copy cut short before its rows): `?1`, `?2` the bounds of its keys
/// (`tenant` + U+001F, `tenant` + U+0020: a range of
/// `cleanup_intents_by_doc`), `?3` at most. What a cleanup deletes last.
pub const MOVE_TENANT_INTENTS: &str = "\
SELECT vector_id FROM cleanup_intents WHERE doc_id >= ?1 AND doc_id < ?2 LIMIT ?3";

/// Those intents, once their vectors are deleted (`?1`: JSON array of IDs).
pub const MOVE_DELETE_TENANT_INTENTS: &str = "\
DELETE FROM cleanup_intents WHERE vector_id IN (SELECT value FROM json_each(?1))";

/// Tenant `?1`'s row as a move carries it.
pub const MOVE_TENANT_GET: &str = "\
SELECT state, documents_max, bytes_max, requests_per_minute_max, created_at, keyword_key, move_state
FROM tenants WHERE tenant_id = ?1";

/// Before a copy upserts its vectors: their IDs (`?1`: JSON array of
/// `{id, d, v}`, with their document and version) as intents due at `?2`
/// (`?3` now). The copy's rows, written after the vectors, refer to them
/// (cron retires the intents); if they never are, the drain deletes them.
pub const MOVE_PENDING_INTENTS: &str = "\
INSERT OR IGNORE INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at)
SELECT json_extract(value, '$.id'), json_extract(value, '$.d'), json_extract(value, '$.v'), 'abandoned', 0, ?2, ?3
FROM json_each(?1)";

/// A token copy replaces the one there (a revoke during the copy).
pub const MOVE_TOKENS_CLEAR: &str = "DELETE FROM tenant_tokens WHERE tenant_id = ?1";

/// Tenant `?1`'s move state from `?2` to `?3` (NULL: none), if it is `?2`.
pub const MOVE_MARK: &str =
    "UPDATE tenants SET move_state = ?3 WHERE tenant_id = ?1 AND move_state IS ?2";

/// The fence: tenant `?1` stops taking writes here, unless a sync session
/// of it is still open or committing (their writes finish first; no new
/// one opens while it moves).
pub const MOVE_FENCE: &str = "\
UPDATE tenants SET move_state = 'fenced' WHERE tenant_id = ?1 AND move_state = 'copying'
  AND NOT EXISTS (SELECT 1 FROM syncs s WHERE s.tenant_id = ?1 AND s.state IN ('open', 'committing'))";

/// The last of tenant `?1` on a shard it left (or a cancelled copy): its
/// sessions, tokens, letter groups and row.
pub const MOVE_DELETE_SYNC_SEEN: &str = "\
DELETE FROM sync_seen WHERE sync_id IN (SELECT sync_id FROM syncs WHERE tenant_id = ?1)";
pub const MOVE_DELETE_SYNC_DELETES: &str = "\
DELETE FROM sync_deletes WHERE sync_id IN (SELECT sync_id FROM syncs WHERE tenant_id = ?1)";
pub const MOVE_DELETE_SYNCS: &str = "DELETE FROM syncs WHERE tenant_id = ?1";
pub const MOVE_DELETE_TOKENS: &str = "DELETE FROM tenant_tokens WHERE tenant_id = ?1";
pub const MOVE_DELETE_LETTER_GROUPS: &str = "DELETE FROM dead_letter_groups WHERE tenant_id = ?1";
pub const MOVE_DELETE_TENANT: &str =
    "DELETE FROM tenants WHERE tenant_id = ?1 AND move_state IS ?2";

/// A new move (on shard 0): `?1` id, `?2` tenant, `?3` from, `?4` to,
/// `?5` now. A second open move of the tenant violates `tenant_moves_open`.
pub const MOVE_INSERT: &str = "\
INSERT INTO tenant_moves (move_id, tenant_id, from_shard, to_shard, state, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, 'copying', ?5, ?5)";

macro_rules! move_columns {
    () => {
        "SELECT move_id, tenant_id, from_shard, to_shard, state, cursor, copied, recopied, vectors, removed,
       waiting_for, created_at, switched_at, updated_at FROM tenant_moves "
    };
}

pub const MOVE_GET: &str = concat!(move_columns!(), "WHERE move_id = ?1");

/// The moves cron advances, least recently advanced first, `?1` at most.
pub const MOVES_ACTIVE: &str = concat!(
    "SELECT * FROM (",
    move_columns!(),
    "WHERE state IN ('copying', 'catching_up', 'switched', 'cleaning', 'cancelling') ORDER BY updated_at LIMIT ?1)"
);

/// Moves newest first, `?1` at most.
pub const MOVES_PAGE: &str = concat!(
    move_columns!(),
    "ORDER BY created_at DESC, move_id LIMIT ?1"
);

/// A move's progress, if it is still in state `?2`: `?3` cursor, counters
/// added (`?4` copied, `?5` copied again, `?6` vectors, `?7` removed),
/// `?8` what it waits for (NULL: nothing), `?9` now.
pub const MOVE_PROGRESS: &str = "\
UPDATE tenant_moves SET cursor = ?3, copied = copied + ?4, recopied = recopied + ?5, vectors = vectors + ?6,
  removed = removed + ?7, waiting_for = ?8, updated_at = ?9
WHERE move_id = ?1 AND state = ?2";

/// A move from state `?2` to `?3`, its pass starting over (`?4` now).
pub const MOVE_STATE: &str = "\
UPDATE tenant_moves SET state = ?3, cursor = '', waiting_for = NULL, updated_at = ?4
WHERE move_id = ?1 AND state = ?2";

/// The switch, in one batch on shard 0 with `MOVE_SWITCHED`: tenant `?1`
/// is placed on shard `?3` if it is still on `?2` and its move `?4` is
/// still catching up (a cancel came first otherwise), and a shard it
/// leaves is no longer dedicated to it.
pub const MOVE_SWITCH_PLACEMENT: &str = "\
UPDATE tenant_placements SET shard = ?3 WHERE tenant_id = ?1 AND shard = ?2
  AND EXISTS (SELECT 1 FROM tenant_moves WHERE move_id = ?4 AND state = 'catching_up')";
pub const MOVE_SWITCH_UNDEDICATE: &str =
    "DELETE FROM dedicated_shards WHERE tenant_id = ?1 AND shard = ?2";
pub const MOVE_SWITCHED: &str = "\
UPDATE tenant_moves SET state = 'switched', cursor = '', waiting_for = NULL, switched_at = ?2, updated_at = ?2
WHERE move_id = ?1 AND state = 'catching_up'";

/// Retention: moves ended before `?1`, `?2` at most (`tenant_moves_ended`).
pub const PRUNE_MOVES: &str = "\
DELETE FROM tenant_moves WHERE move_id IN (SELECT move_id FROM tenant_moves INDEXED BY tenant_moves_ended
  WHERE state IN ('completed', 'cancelled') AND updated_at < ?1 ORDER BY updated_at LIMIT ?2)";

/// Every statement above, by name (checked against this file by tests/it/sql.rs).
pub const ALL: &[(&str, &str)] = &[
    ("LATEST_VERSIONS", LATEST_VERSIONS),
    ("INTAKE_UPSERT_DOCUMENTS", INTAKE_UPSERT_DOCUMENTS),
    ("INTAKE_INSERT_VERSIONS", INTAKE_INSERT_VERSIONS),
    ("INTAKE_INSERT_PARTS_BULK", INTAKE_INSERT_PARTS_BULK),
    ("INTAKE_CLOSE_PARTS", INTAKE_CLOSE_PARTS),
    ("INTAKE_INSERT_PART", INTAKE_INSERT_PART),
    ("INTAKE_INSERT_JOBS", INTAKE_INSERT_JOBS),
    ("DOCUMENT_VIEWS", DOCUMENT_VIEWS),
    ("DOCUMENT_COUNTS", DOCUMENT_COUNTS),
    ("TENANT_DOCUMENT_COUNTS", TENANT_DOCUMENT_COUNTS),
    ("RUNNING_DOCUMENTS", RUNNING_DOCUMENTS),
    ("TENANT_RUNNING_DOCUMENTS", TENANT_RUNNING_DOCUMENTS),
    ("DOCUMENT_KEYS_PAGE", DOCUMENT_KEYS_PAGE),
    ("TENANT_DOCUMENT_KEYS_PAGE", TENANT_DOCUMENT_KEYS_PAGE),
    ("SOURCE_DOCUMENT_KEYS_PAGE", SOURCE_DOCUMENT_KEYS_PAGE),
    ("JOBS_TIMELINE", JOBS_TIMELINE),
    ("JOB_VIEW", JOB_VIEW),
    ("CONSUME_LOAD", CONSUME_LOAD),
    ("CONSUME_SUPERSEDE", CONSUME_SUPERSEDE),
    ("CONSUME_CLAIM", CONSUME_CLAIM),
    ("CONSUME_LOAD_PARTS", CONSUME_LOAD_PARTS),
    ("CONSUME_OPEN_ROWS", CONSUME_OPEN_ROWS),
    ("CONSUME_STAGE_STAMP_GUARD", CONSUME_STAGE_STAMP_GUARD),
    ("CONSUME_STAGE_STAMP", CONSUME_STAGE_STAMP),
    ("CONSUME_STAGE_CHUNKS", CONSUME_STAGE_CHUNKS),
    ("CONSUME_STAGE_CLOSE", CONSUME_STAGE_CLOSE),
    ("CONSUME_STAGE_DEAD_INTENTS", CONSUME_STAGE_DEAD_INTENTS),
    ("CONSUME_STAGE_GUARD", CONSUME_STAGE_GUARD),
    ("KEYWORD_STAGE", KEYWORD_STAGE),
    ("KEYWORD_STAGE_COUNT", KEYWORD_STAGE_COUNT),
    ("GENERATION_ROWS_STAGED", GENERATION_ROWS_STAGED),
    ("CONSUME_SET_CHUNK_COUNT", CONSUME_SET_CHUNK_COUNT),
    ("CONSUME_STAGED", CONSUME_STAGED),
    ("CONSUME_PAGE", CONSUME_PAGE),
    ("CONSUME_CHECKPOINT", CONSUME_CHECKPOINT),
    ("JOB_ADD_USAGE", JOB_ADD_USAGE),
    ("TENANT_ADD_D1_ROWS", TENANT_ADD_D1_ROWS),
    ("COMMIT_INTENTS_FOR_REPLACED", COMMIT_INTENTS_FOR_REPLACED),
    ("COMMIT_CLOSE_FOR_DELETE", COMMIT_CLOSE_FOR_DELETE),
    ("COMMIT_SET_LIVE", COMMIT_SET_LIVE),
    ("COMMIT_INTENTS_FOR_LOSER", COMMIT_INTENTS_FOR_LOSER),
    ("COMMIT_FINISH_JOB", COMMIT_FINISH_JOB),
    ("JOB_UP_FOR_RETRY", JOB_UP_FOR_RETRY),
    ("JOB_END_FAILED", JOB_END_FAILED),
    ("INTENTS_RETIRE_ROWS", INTENTS_RETIRE_ROWS),
    ("INTENTS_RETIRE", INTENTS_RETIRE),
    ("INTENTS_CLAIM", INTENTS_CLAIM),
    ("INTENTS_CLAIM_DOC", INTENTS_CLAIM_DOC),
    ("INTENTS_DONE_DELETE_CHUNKS", INTENTS_DONE_DELETE_CHUNKS),
    ("INTENTS_DONE_DELETE", INTENTS_DONE_DELETE),
    ("INTENTS_BACK_OFF", INTENTS_BACK_OFF),
    ("SWEEP_PAGE", SWEEP_PAGE),
    ("SWEEP_ABANDONED", SWEEP_ABANDONED),
    ("STALLED_JOBS", STALLED_JOBS),
    ("TOUCH_JOBS", TOUCH_JOBS),
    ("JOB_STALLED_DEAD", JOB_STALLED_DEAD),
    ("TENANT_INSERT", TENANT_INSERT),
    ("TENANT_GET", TENANT_GET),
    ("TENANTS_PAGE", TENANTS_PAGE),
    ("TENANT_SET_STATE", TENANT_SET_STATE),
    ("TENANT_SET_QUOTAS", TENANT_SET_QUOTAS),
    ("TOKEN_INSERT", TOKEN_INSERT),
    ("TOKEN_REVOKE", TOKEN_REVOKE),
    ("TOKEN_GET", TOKEN_GET),
    ("TOKENS_OF_TENANT", TOKENS_OF_TENANT),
    ("TOKEN_LOOKUP", TOKEN_LOOKUP),
    ("TENANT_TAKE_REQUEST", TENANT_TAKE_REQUEST),
    ("TENANT_USAGE", TENANT_USAGE),
    ("TENANT_QUOTA_GUARD", TENANT_QUOTA_GUARD),
    ("TENANT_MOVE_GUARD", TENANT_MOVE_GUARD),
    ("TENANT_ADD_USAGE", TENANT_ADD_USAGE),
    ("LIVE_CHUNKS_BY_VECTOR_ID", LIVE_CHUNKS_BY_VECTOR_ID),
    ("KEYWORD_STATS", KEYWORD_STATS),
    ("KEYWORD_CHUNKS", KEYWORD_CHUNKS),
    ("KEYWORD_UNINDEXED_PAGE", KEYWORD_UNINDEXED_PAGE),
    ("KEYWORD_UNINDEXED_COUNT", KEYWORD_UNINDEXED_COUNT),
    ("KEYWORD_UNINDEXED_ENTER", KEYWORD_UNINDEXED_ENTER),
    ("KEYWORD_UNINDEXED_MARK", KEYWORD_UNINDEXED_MARK),
    ("LOCAL_INDEX_UPSERT", LOCAL_INDEX_UPSERT),
    ("LOCAL_INDEX_DELETE", LOCAL_INDEX_DELETE),
    ("LOCAL_INDEX_GET", LOCAL_INDEX_GET),
    ("LOCAL_INDEX_SCAN", LOCAL_INDEX_SCAN),
    ("LOCAL_INDEX_SCAN_DOC", LOCAL_INDEX_SCAN_DOC),
    ("LOCAL_INDEX_BY_SLOTS", LOCAL_INDEX_BY_SLOTS),
    ("LOCAL_INDEX_UNPLACED", LOCAL_INDEX_UNPLACED),
    ("LOCAL_INDEX_PLACE", LOCAL_INDEX_PLACE),
    ("LOCAL_INDEX_SPACE", LOCAL_INDEX_SPACE),
    ("LOCAL_INDEX_GUARD", LOCAL_INDEX_GUARD),
    ("LOCAL_INDEX_SLOTS_SET", LOCAL_INDEX_SLOTS_SET),
    ("LOCAL_INDEX_BLOCKS_READ", LOCAL_INDEX_BLOCKS_READ),
    ("LOCAL_INDEX_BLOCK_ROWS", LOCAL_INDEX_BLOCK_ROWS),
    ("LOCAL_INDEX_BLOCKS_PUT", LOCAL_INDEX_BLOCKS_PUT),
    ("REPAIR_RUN_INSERT", REPAIR_RUN_INSERT),
    ("REPAIR_RUNS_LIST", REPAIR_RUNS_LIST),
    ("DEAD_LETTER_ARCHIVE", DEAD_LETTER_ARCHIVE),
    ("DEAD_LETTER_ARCHIVE_STALLED", DEAD_LETTER_ARCHIVE_STALLED),
    ("DEAD_LETTER_CONFIRM", DEAD_LETTER_CONFIRM),
    ("DEAD_LETTERS_SUMMARY", DEAD_LETTERS_SUMMARY),
    ("TENANT_DEAD_LETTERS_SUMMARY", TENANT_DEAD_LETTERS_SUMMARY),
    ("DEAD_LETTERS_PAGE", DEAD_LETTERS_PAGE),
    ("TENANT_DEAD_LETTERS_PAGE", TENANT_DEAD_LETTERS_PAGE),
    ("REDRIVE_CANDIDATES", REDRIVE_CANDIDATES),
    ("REDRIVE_INSERT", REDRIVE_INSERT),
    ("REDRIVE_ITEMS_INSERT", REDRIVE_ITEMS_INSERT),
    ("REDRIVE_AUDIT", REDRIVE_AUDIT),
    ("REDRIVE_GET", REDRIVE_GET),
    ("REDRIVES_ACTIVE", REDRIVES_ACTIVE),
    ("REDRIVE_ITEMS", REDRIVE_ITEMS),
    ("REDRIVE_ITEM_SET", REDRIVE_ITEM_SET),
    ("REDRIVE_RERUN_ADVANCE", REDRIVE_RERUN_ADVANCE),
    ("REDRIVE_ITEM_SENT", REDRIVE_ITEM_SENT),
    ("REDRIVE_SET_STATE", REDRIVE_SET_STATE),
    ("RERUN_ADVANCE", RERUN_ADVANCE),
    ("RERUN_COPY_VERSION", RERUN_COPY_VERSION),
    ("RERUN_INSERT_JOB", RERUN_INSERT_JOB),
    ("VERSION_IS_DELETE", VERSION_IS_DELETE),
    ("REDRIVE_AUDIT_LIST", REDRIVE_AUDIT_LIST),
    ("VERIFY_LIVE_CHUNKS", VERIFY_LIVE_CHUNKS),
    ("CURSOR_GET", CURSOR_GET),
    ("CURSOR_SET", CURSOR_SET),
    ("MARK_REPAIR_NEEDED", MARK_REPAIR_NEEDED),
    ("REPAIR_RERUN_ADVANCE", REPAIR_RERUN_ADVANCE),
    ("GENERATIONS_TARGET", GENERATIONS_TARGET),
    ("GENERATION_ADOPT", GENERATION_ADOPT),
    ("GENERATION_ADOPTABLE_CONFIG", GENERATION_ADOPTABLE_CONFIG),
    ("GENERATIONS_LIST", GENERATIONS_LIST),
    ("GENERATION_ACTIVE", GENERATION_ACTIVE),
    ("GENERATION_CREATE", GENERATION_CREATE),
    ("GENERATION_MAX", GENERATION_MAX),
    ("GENERATION_IN_FLIGHT", GENERATION_IN_FLIGHT),
    ("GENERATIONS_SKIPPED", GENERATIONS_SKIPPED),
    ("BACKFILL_SKIPPED", BACKFILL_SKIPPED),
    (
        "GENERATION_SWITCH_RETIRE_OLDER",
        GENERATION_SWITCH_RETIRE_OLDER,
    ),
    ("GENERATION_SWITCH_RETAIN", GENERATION_SWITCH_RETAIN),
    ("GENERATION_SWITCH_ACTIVATE", GENERATION_SWITCH_ACTIVATE),
    ("GENERATION_RETIRE", GENERATION_RETIRE),
    ("GENERATION_ABANDON", GENERATION_ABANDON),
    ("RETIRE_DOCS_PAGE", RETIRE_DOCS_PAGE),
    ("RETIRE_CURSOR_MOVE", RETIRE_CURSOR_MOVE),
    ("RETIRE_INTENTS", RETIRE_INTENTS),
    ("GENERATIONS_RETIRED", GENERATIONS_RETIRED),
    ("BUILD_INTENTS_FOR_FAILED", BUILD_INTENTS_FOR_FAILED),
    ("BACKFILL_INSERT", BACKFILL_INSERT),
    ("BACKFILL_GET", BACKFILL_GET),
    ("BACKFILLS_LIST", BACKFILLS_LIST),
    ("BACKFILL_RUNNING", BACKFILL_RUNNING),
    ("BACKFILL_SET_STATE", BACKFILL_SET_STATE),
    ("BACKFILL_PAGE", BACKFILL_PAGE),
    ("BACKFILL_TOTAL", BACKFILL_TOTAL),
    ("BACKFILL_PENDING", BACKFILL_PENDING),
    ("BUILD_JOBS_INSERT", BUILD_JOBS_INSERT),
    ("BACKFILL_ITEMS_INSERT", BACKFILL_ITEMS_INSERT),
    ("BACKFILL_CURSOR", BACKFILL_CURSOR),
    ("BACKFILL_NEXT_PASS", BACKFILL_NEXT_PASS),
    ("BACKFILL_COMPLETE", BACKFILL_COMPLETE),
    ("SYNC_INSERT", SYNC_INSERT),
    ("SYNC_GET", SYNC_GET),
    ("SYNCS_PAGE", SYNCS_PAGE),
    ("SOURCE_SYNCS_PAGE", SOURCE_SYNCS_PAGE),
    ("SYNC_WRITE_GUARD", SYNC_WRITE_GUARD),
    ("SYNC_MARK_SEEN", SYNC_MARK_SEEN),
    ("SOURCE_SET_DOCUMENTS", SOURCE_SET_DOCUMENTS),
    ("SYNC_EXPIRE_DUE", SYNC_EXPIRE_DUE),
    ("SYNC_SOURCE_COUNTS", SYNC_SOURCE_COUNTS),
    ("SYNC_DELETE_GUARD", SYNC_DELETE_GUARD),
    ("SYNC_PLAN_DELETES", SYNC_PLAN_DELETES),
    ("SYNC_SUPERSEDE_EARLIER", SYNC_SUPERSEDE_EARLIER),
    ("SYNC_BEGIN_COMMIT", SYNC_BEGIN_COMMIT),
    ("SYNC_DELETES_PAGE", SYNC_DELETES_PAGE),
    ("SYNC_RETIRE_GUARD", SYNC_RETIRE_GUARD),
    ("SYNC_DELETES_SETTLE", SYNC_DELETES_SETTLE),
    ("SYNC_PAGE_DONE", SYNC_PAGE_DONE),
    ("SYNCS_COMMITTING", SYNCS_COMMITTING),
    ("COMMIT_MARK_SUPERSEDED", COMMIT_MARK_SUPERSEDED),
    ("PRUNE_TEXT_PAGE", PRUNE_TEXT_PAGE),
    ("PRUNE_TEXT_BYTES", PRUNE_TEXT_BYTES),
    ("PRUNE_TEXT_PARTS", PRUNE_TEXT_PARTS),
    ("PRUNE_TEXT_MARK", PRUNE_TEXT_MARK),
    ("PRUNE_VERSIONS_PAGE", PRUNE_VERSIONS_PAGE),
    ("PRUNE_VERSION_JOBS", PRUNE_VERSION_JOBS),
    ("PRUNE_VERSION_ROWS", PRUNE_VERSION_ROWS),
    ("PRUNE_REPAIR_RUNS", PRUNE_REPAIR_RUNS),
    ("PRUNE_SYNCS_PAGE", PRUNE_SYNCS_PAGE),
    ("PRUNE_SYNC_SEEN", PRUNE_SYNC_SEEN),
    ("PRUNE_SYNC_DELETES", PRUNE_SYNC_DELETES),
    ("PRUNE_SYNC_ROWS", PRUNE_SYNC_ROWS),
    ("PRUNE_BACKFILLS_PAGE", PRUNE_BACKFILLS_PAGE),
    ("PRUNE_BACKFILL_JOBS", PRUNE_BACKFILL_JOBS),
    ("PRUNE_BACKFILL_ITEMS", PRUNE_BACKFILL_ITEMS),
    ("PRUNE_BACKFILL_ROWS", PRUNE_BACKFILL_ROWS),
    ("PRUNE_REDRIVES_PAGE", PRUNE_REDRIVES_PAGE),
    ("PRUNE_REDRIVE_AUDIT", PRUNE_REDRIVE_AUDIT),
    ("PRUNE_REDRIVE_ITEMS", PRUNE_REDRIVE_ITEMS),
    ("PRUNE_REDRIVE_ROWS", PRUNE_REDRIVE_ROWS),
    ("PRUNE_REVOKED_TOKENS", PRUNE_REVOKED_TOKENS),
    ("SIZE_PROBE", SIZE_PROBE),
    ("PLACEMENT_OF", PLACEMENT_OF),
    ("TOKEN_PLACEMENT", TOKEN_PLACEMENT),
    ("PLACEMENT_INSERT", PLACEMENT_INSERT),
    ("PLACEMENT_REFUSE_DEDICATED", PLACEMENT_REFUSE_DEDICATED),
    ("PLACEMENT_REFUSE_SHARED", PLACEMENT_REFUSE_SHARED),
    ("SHARD_DEDICATE", SHARD_DEDICATE),
    ("SHARD_TENANTS", SHARD_TENANTS),
    ("SHARDS_DEDICATED", SHARDS_DEDICATED),
    ("PLACEMENTS_PAGE", PLACEMENTS_PAGE),
    ("TOKEN_DIRECTORY_INSERT", TOKEN_DIRECTORY_INSERT),
    ("TOKEN_DIRECTORY_DELETE", TOKEN_DIRECTORY_DELETE),
    ("TENANTS_BY_IDS", TENANTS_BY_IDS),
    ("MOVE_TOKENS_INSERT", MOVE_TOKENS_INSERT),
    ("MOVE_TOKENS_OF", MOVE_TOKENS_OF),
    ("MOVE_SOURCES_INSERT", MOVE_SOURCES_INSERT),
    ("MOVE_SOURCES_OF", MOVE_SOURCES_OF),
    ("MOVE_LETTERS_INSERT", MOVE_LETTERS_INSERT),
    ("MOVE_LETTERS_OF", MOVE_LETTERS_OF),
    ("MOVE_JOBS_INSERT", MOVE_JOBS_INSERT),
    ("MOVE_JOBS_OF", MOVE_JOBS_OF),
    ("MOVE_PARTS_INSERT", MOVE_PARTS_INSERT),
    ("MOVE_PARTS_OF", MOVE_PARTS_OF),
    ("MOVE_VERSIONS_INSERT", MOVE_VERSIONS_INSERT),
    ("MOVE_VERSIONS_OF", MOVE_VERSIONS_OF),
    ("MOVE_DOCS_PAGE", MOVE_DOCS_PAGE),
    ("MOVE_DOCS_OF", MOVE_DOCS_OF),
    ("MOVE_LIVE_ROWS_OF", MOVE_LIVE_ROWS_OF),
    ("MOVE_COPY_GUARD", MOVE_COPY_GUARD),
    ("MOVE_USAGE", MOVE_USAGE),
    ("MOVE_OLD_ROWS_INTENTS", MOVE_OLD_ROWS_INTENTS),
    ("MOVE_DELETE_CHUNKS", MOVE_DELETE_CHUNKS),
    ("MOVE_DELETE_JOBS", MOVE_DELETE_JOBS),
    ("MOVE_DELETE_LETTERS", MOVE_DELETE_LETTERS),
    ("MOVE_DELETE_SOURCES", MOVE_DELETE_SOURCES),
    ("MOVE_DELETE_PARTS", MOVE_DELETE_PARTS),
    ("MOVE_DELETE_VERSIONS", MOVE_DELETE_VERSIONS),
    ("MOVE_DELETE_INTENTS", MOVE_DELETE_INTENTS),
    ("MOVE_DELETE_DOCUMENTS", MOVE_DELETE_DOCUMENTS),
    ("MOVE_DOCS_UPSERT", MOVE_DOCS_UPSERT),
    ("MOVE_DOCS_LIVE", MOVE_DOCS_LIVE),
    ("MOVE_CHUNKS_INSERT", MOVE_CHUNKS_INSERT),
    ("MOVE_KEYWORD_ENTER", MOVE_KEYWORD_ENTER),
    ("MOVE_KEYWORD_MARK", MOVE_KEYWORD_MARK),
    ("MOVE_KEYWORD_COUNT", MOVE_KEYWORD_COUNT),
    ("MOVE_GENERATION_ROWS", MOVE_GENERATION_ROWS),
    ("MOVE_STAGE_GUARD", MOVE_STAGE_GUARD),
    ("MOVE_VECTOR_IDS_OF", MOVE_VECTOR_IDS_OF),
    ("MOVE_TENANT_ARRIVE", MOVE_TENANT_ARRIVE),
    ("MOVE_TENANT_SETTINGS", MOVE_TENANT_SETTINGS),
    ("MOVE_CARRIED_JOBS", MOVE_CARRIED_JOBS),
    ("MOVE_TENANT_INTENTS", MOVE_TENANT_INTENTS),
    ("MOVE_DELETE_TENANT_INTENTS", MOVE_DELETE_TENANT_INTENTS),
    ("MOVE_TENANT_GET", MOVE_TENANT_GET),
    ("MOVE_PENDING_INTENTS", MOVE_PENDING_INTENTS),
    ("MOVE_TOKENS_CLEAR", MOVE_TOKENS_CLEAR),
    ("MOVE_MARK", MOVE_MARK),
    ("MOVE_FENCE", MOVE_FENCE),
    ("MOVE_DELETE_SYNC_SEEN", MOVE_DELETE_SYNC_SEEN),
    ("MOVE_DELETE_SYNC_DELETES", MOVE_DELETE_SYNC_DELETES),
    ("MOVE_DELETE_SYNCS", MOVE_DELETE_SYNCS),
    ("MOVE_DELETE_TOKENS", MOVE_DELETE_TOKENS),
    ("MOVE_DELETE_LETTER_GROUPS", MOVE_DELETE_LETTER_GROUPS),
    ("MOVE_DELETE_TENANT", MOVE_DELETE_TENANT),
    ("MOVE_INSERT", MOVE_INSERT),
    ("MOVE_GET", MOVE_GET),
    ("MOVES_ACTIVE", MOVES_ACTIVE),
    ("MOVES_PAGE", MOVES_PAGE),
    ("MOVE_PROGRESS", MOVE_PROGRESS),
    ("MOVE_STATE", MOVE_STATE),
    ("MOVE_SWITCH_PLACEMENT", MOVE_SWITCH_PLACEMENT),
    ("MOVE_SWITCH_UNDEDICATE", MOVE_SWITCH_UNDEDICATE),
    ("MOVE_SWITCHED", MOVE_SWITCHED),
    ("PRUNE_MOVES", PRUNE_MOVES),
];
