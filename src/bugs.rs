//! Deliberate protocol bugs, for testing the tester only.
//!
//! The Worker's build (wasm32) compiles none of them: there [`Bugs::has`]
//! is constantly false and each bug's code path is dead (unless built with
//! the `protocol-bugs` cargo feature, which nothing does). Native builds
//! carry them, inert unless a test asks for one with [`Bugs::only`] — the
//! pipeline is always given `Bugs::default()` otherwise — and the
//! simulation must catch every one of them (`tests/sim_bugs.rs`). One
//! native build then serves every test: no second compile of the crate.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Deletes the live version's vectors that the new version does not
    /// keep straight from the index (no intent, no claim) before the
    /// replace commits: the live version is served without them meanwhile.
    DeleteBeforeReplace,
    /// Flips `live_version` without the compare-and-set.
    FlipWithoutCas,
    /// Writes vectors before their chunk rows are recorded in D1.
    UpsertBeforeStage,
    /// Search serves index matches without checking D1 for liveness.
    ServeUnfiltered,
    /// Removes cleanup intents before the index delete succeeded.
    IntentRemovedBeforeDelete,
    /// A cancel marks the backfill cancelled, then abandons its generation
    /// in a second call (a failure between leaves the generation building).
    CancelInTwoSteps,
    /// A config reindex creates its generation, then records its backfill
    /// in a second call (a failure between leaves a generation building
    /// with no backfill).
    GenerationBeforeBackfill,
    /// A redrive's plan counts a letter as redriven only once an item of it
    /// was sent, not while one waits in an active redrive.
    RedriveOverlaps,
    /// A redrive item's re-run, then its move to `sent`, as two calls: a
    /// concurrent advance marks it skipped in between.
    RedriveSendInTwoSteps,
    /// The dead-letter consumer acknowledges a letter Queues forwarded
    /// without archiving it.
    DeadLetterNotArchived,
    /// Search drops both of its tenant fences: it queries the index in
    /// every namespace ([`EVERY_NAMESPACE`]) and asks D1 for the live
    /// chunks of every tenant (either fence alone would hide the other's
    /// absence).
    SearchUnfenced,
    /// A deleted chunk row's entry stays in the keyword index (the trigger
    /// that takes it out, dropped): the index holds rows the ledger does
    /// not, and its tenant's totals drift.
    KeywordIndexUnmaintained,
    /// The drain claims intents without the reference check: it deletes a
    /// vector that a row which may be served (an unchanged chunk of the
    /// live or a staged version) still refers to.
    DeleteReferencedVector,
    /// The keyword ranking drops its tenant fence: its statement matches
    /// the chunks of every tenant.
    KeywordUnfenced,
    /// A tenant's usage drifts: cron prunes a superseded version's text
    /// without giving its bytes back.
    UsageDrift,
    /// Intake takes any refused batch for a quota refusal: a write that
    /// lost the race for its version number is answered 429 instead of
    /// being tried again.
    LostRaceRefused,
    /// The replace marks the version it makes live as superseded too (an
    /// off-by-one in `COMMIT_MARK_SUPERSEDED`): cron's retention prunes the
    /// live version's text.
    SupersedeLive,
    /// The keyword search weighs its terms by every tenant's row and term
    /// totals, not its own (FTS5's `bm25()` as one shared table has it):
    /// a tenant's scores move when another tenant writes.
    KeywordStatsShared,
    /// Intake does not close the text parts a new version no longer names
    /// (`INTAKE_CLOSE_PARTS` left out): they stay open, valid at every
    /// later version, and retention never reaches them.
    PartsLeftOpen,
    /// The staging leaves the rows it writes out of their generation's
    /// count (`GENERATION_ROWS_STAGED` left out): a retiring generation's
    /// count reaches 0 while rows are left, and it is retired with them.
    GenerationRowsUncounted,
    /// A job's progress does not move its document's count (migration
    /// 0026's `jobs_counted_moved`, dropped): the operators' summary shows
    /// documents queued that are indexing, or indexing that failed.
    DocumentCountsUnmoved,
    /// A document's newer version does not move its dead letters out of
    /// the "version is latest" half of their group (migration 0028's
    /// `documents_letters_moved`, dropped): the operators' dead-letter
    /// summary shows failures as current that a newer version replaced.
    DeadLetterGroupsUnmoved,
    /// A generation backfill's pass starts walking without waiting for
    /// the index jobs in flight that lack rows in the generation (a
    /// delivery that read its targets before the generation existed): one
    /// makes its version live after the pass checked the document, and the
    /// switch serves a generation without it.
    PassWithoutWaiting,
    /// A tenant's move fences the shard it leaves only at the switch, not
    /// before its catch-up: a write accepted there after the catch-up
    /// copied its document is left behind by the switch.
    MoveWithoutFence,
}

/// The namespace `SearchUnfenced` queries: the in-memory indexes read it
/// as every namespace, as Vectorize reads a query that names none. Not a
/// tenant ID (`*` is not in their alphabet), so no tenant's own.
pub const EVERY_NAMESPACE: &str = "*";

impl Bug {
    pub const ALL: [Bug; 24] = [
        Bug::DeleteBeforeReplace,
        Bug::FlipWithoutCas,
        Bug::UpsertBeforeStage,
        Bug::ServeUnfiltered,
        Bug::IntentRemovedBeforeDelete,
        Bug::CancelInTwoSteps,
        Bug::GenerationBeforeBackfill,
        Bug::RedriveOverlaps,
        Bug::RedriveSendInTwoSteps,
        Bug::DeadLetterNotArchived,
        Bug::SearchUnfenced,
        Bug::KeywordIndexUnmaintained,
        Bug::DeleteReferencedVector,
        Bug::KeywordUnfenced,
        Bug::UsageDrift,
        Bug::LostRaceRefused,
        Bug::SupersedeLive,
        Bug::KeywordStatsShared,
        Bug::PartsLeftOpen,
        Bug::GenerationRowsUncounted,
        Bug::DocumentCountsUnmoved,
        Bug::DeadLetterGroupsUnmoved,
        Bug::PassWithoutWaiting,
        Bug::MoveWithoutFence,
    ];

    /// The simulation's invariant that names this bug: it must be caught
    /// by it, not by whatever breaks first downstream
    /// (`tests/sim_bugs.rs`). A run with the bug switched on checks only
    /// this one after each step (the others would be work for nothing: no
    /// violation of theirs counts).
    pub fn invariant(self) -> &'static str {
        match self {
            Bug::DeleteBeforeReplace | Bug::DeleteReferencedVector => "I13",
            Bug::FlipWithoutCas => "I2",
            Bug::UpsertBeforeStage | Bug::IntentRemovedBeforeDelete => "I3",
            Bug::ServeUnfiltered => "I4",
            // The cancel's generation is left building: the run no longer ends
            // as the cancelled reference does.
            Bug::CancelInTwoSteps => "I6",
            // The document's version is missing from the generation search
            // serves: the run no longer ends as the reference does.
            Bug::PassWithoutWaiting => "I6",
            Bug::GenerationBeforeBackfill | Bug::GenerationRowsUncounted => "I10",
            Bug::RedriveOverlaps | Bug::RedriveSendInTwoSteps => "R",
            Bug::DeadLetterNotArchived => "I9",
            Bug::SearchUnfenced | Bug::KeywordUnfenced => "I11",
            Bug::UsageDrift | Bug::DocumentCountsUnmoved | Bug::DeadLetterGroupsUnmoved => "I15",
            Bug::LostRaceRefused => "I16",
            Bug::KeywordIndexUnmaintained => "I12",
            Bug::SupersedeLive | Bug::PartsLeftOpen => "I18",
            Bug::KeywordStatsShared => "I19",
            // Caught by the simulation of moves (`sim::moves`), not the
            // single-shard one.
            Bug::MoveWithoutFence => "M1",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    #[cfg(any(feature = "protocol-bugs", not(target_arch = "wasm32")))]
    pub active: Option<Bug>,
}

impl Bugs {
    #[cfg(any(feature = "protocol-bugs", not(target_arch = "wasm32")))]
    pub fn only(bug: Bug) -> Bugs {
        Bugs { active: Some(bug) }
    }

    #[inline(always)]
    pub fn has(&self, bug: Bug) -> bool {
        #[cfg(any(feature = "protocol-bugs", not(target_arch = "wasm32")))]
        {
            self.active == Some(bug)
        }
        #[cfg(not(any(feature = "protocol-bugs", not(target_arch = "wasm32"))))]
        {
            let _ = bug;
            false
        }
    }
}

/// SQL used only by the seeded bugs (never by the real protocol).
pub mod sql {
    /// `KeywordIndexUnmaintained`: the trigger that takes a deleted row's
    /// entry out of the keyword index, dropped.
    pub const DROP_KEYWORD_DELETE_TRIGGER: &str = "DROP TRIGGER chunks_keyword_deleted";
    /// `DocumentCountsUnmoved`: the trigger that moves a document's count
    /// when its newest job changes, dropped.
    pub const DROP_JOB_COUNT_TRIGGER: &str = "DROP TRIGGER jobs_counted_moved";
    /// `DeadLetterGroupsUnmoved`: the trigger that moves a document's
    /// letters out of the latest half when it gets a newer version, dropped.
    pub const DROP_LETTER_GROUP_TRIGGER: &str = "DROP TRIGGER documents_letters_moved";
    /// `SupersedeLive`: `COMMIT_MARK_SUPERSEDED` marking the new live
    /// version (`?2`) too.
    pub const MARK_SUPERSEDED_INCLUSIVE: &str = "\
UPDATE versions SET superseded_at = ?3
WHERE doc_id = ?1 AND version <= ?2 AND superseded_at IS NULL
  AND EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = ?1 AND d.latest_version = ?2
              AND (d.live_version IS NULL OR d.live_version < ?2))";
    /// `FlipWithoutCas`: no compare-and-set.
    pub const SET_LIVE_UNGUARDED: &str =
        "UPDATE documents SET live_version = ?2, updated_at = ?3 WHERE doc_id = ?1";
    /// `DeleteBeforeReplace`: the live version's vectors the new version
    /// (`?2`) does not hold, of document `?1`.
    pub const LIVE_VECTORS_NOT_KEPT: &str = "\
SELECT c.vector_id AS vector_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
WHERE c.doc_id = ?1 AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)
  AND d.live_version < ?2
  AND NOT EXISTS (SELECT 1 FROM chunks n WHERE n.vector_id = c.vector_id AND +n.doc_id = ?1
                  AND n.version <= ?2 AND (n.to_version IS NULL OR n.to_version > ?2))
ORDER BY c.vector_id";
    /// `DeleteReferencedVector`: the claim without its reference check.
    pub const INTENTS_CLAIM_IGNORING_REFERENCES: &str = "\
UPDATE cleanup_intents SET deleting_until = ?4 WHERE vector_id IN (
  SELECT i.vector_id FROM cleanup_intents i
  WHERE (?1 IS NULL OR i.doc_id = ?1) AND i.not_before <= ?2 AND (i.deleting_until IS NULL OR i.deleting_until < ?2)
  ORDER BY i.not_before, i.vector_id LIMIT ?3)
RETURNING vector_id";
    /// `ServeUnfiltered`: chunks by vector id, live or not.
    pub const CHUNKS_BY_VECTOR_ID: &str = "\
SELECT vector_id, doc_id, version, ord, text, generation FROM chunks WHERE vector_id IN (SELECT value FROM json_each(?1)) AND ?2 IS NOT NULL AND tenant_id = ?3";
    /// `KeywordUnfenced`: the keyword ranking matches every tenant's terms
    /// (its key ignored) and drops `c.tenant_id = ?3`.
    pub const KEYWORD_CHUNKS_UNFENCED: &str = "\
WITH q(term, w) AS (SELECT json_extract(value, '$.t'), json_extract(value, '$.w') FROM json_each(?1)),
hits(row_id, w, tf) AS (
  SELECT i.doc, q.w, count(*) FROM q JOIN keyword_instances i
    ON substr(i.term, instr(i.term, 'z') + 1) = substr(q.term, instr(q.term, 'z') + 1) GROUP BY i.doc, q.term),
scored(row_id, score) AS (
  SELECT h.row_id, sum(h.w * h.tf * (?6 + 1.0) / (h.tf + ?6 * (1.0 - ?7 + ?7 * c.keyword_len / ?8)))
  FROM hits h JOIN chunks c ON c.chunk_id = h.row_id GROUP BY h.row_id)
SELECT c.vector_id AS vector_id, c.doc_id AS doc_id, d.live_version AS version, c.ord AS ord, c.text AS text,
       c.generation AS generation, v.metadata AS metadata, s.score AS score
FROM scored s JOIN chunks c ON c.chunk_id = s.row_id
JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
  AND (c.to_version IS NULL OR c.to_version > d.live_version)
JOIN versions v ON v.doc_id = c.doc_id AND v.version = d.live_version
WHERE c.generation = ?2 AND ?3 IS NOT NULL AND (?4 IS NULL OR c.doc_id = ?4)
ORDER BY s.score DESC, c.vector_id LIMIT ?5";
    /// `KeywordStatsShared`: `KEYWORD_STATS` with every tenant's totals.
    pub const KEYWORD_STATS_SHARED: &str = "\
SELECT t.keyword_key AS keyword_key, (SELECT sum(keyword_rows) FROM tenants) AS keyword_rows,
       (SELECT sum(keyword_tokens) FROM tenants) AS keyword_tokens,
       (SELECT json_group_array(json_array(q.value,
          coalesce((SELECT v.doc FROM keyword_terms v WHERE v.term = t.keyword_key || 'z' || q.value), 0)))
        FROM json_each(?1) q) AS df
FROM tenants t WHERE t.tenant_id = ?2";
    /// `RedriveOverlaps`: pending items of active redrives do not count.
    pub const REDRIVE_CANDIDATES_OVERLAPPING: &str = "\
SELECT l.job_id, l.tenant_id, l.doc_id, l.version, l.failure_bucket, l.last_seen, d.latest_version, d.live_version,
       (SELECT count(*) FROM redrive_items i WHERE i.letter_job_id = l.job_id AND i.state IN ('sent', 'succeeded')) AS redriven,
       (SELECT j.state FROM jobs j WHERE j.job_id = l.job_id) AS job_state_now
FROM dead_letters l LEFT JOIN documents d ON d.doc_id = l.doc_id
WHERE (?1 IS NULL OR l.failure_bucket = ?1) AND (?2 IS NULL OR l.last_seen >= ?2) AND (?3 IS NULL OR l.last_seen <= ?3)
  AND (?4 IS NULL OR l.doc_id IN (SELECT value FROM json_each(?4))) AND (?6 IS NULL OR l.tenant_id = ?6)
ORDER BY l.job_id LIMIT ?5";
}
