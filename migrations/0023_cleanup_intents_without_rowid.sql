-- Cleanup intents keyed by their vector ID alone (WITHOUT ROWID): the
-- table is its primary key, so an intent writes its row and its two
-- indexes' entries, not also a separate entry for the key (D1 bills one
-- row per index entry written; every edit writes one intent per vector
-- it replaces). No statement reads an intent's rowid. The table is small
-- (an intent lives until its vector is deleted), so it is copied whole.
CREATE TABLE cleanup_intents_r (
  vector_id      TEXT    PRIMARY KEY,
  doc_id         TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  reason         TEXT    NOT NULL CHECK (reason IN ('replaced', 'abandoned')),
  attempts       INTEGER NOT NULL DEFAULT 0,
  not_before     INTEGER NOT NULL DEFAULT 0,
  created_at     INTEGER NOT NULL,
  tenant_id      TEXT GENERATED ALWAYS AS
    (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL,
  deleting_until INTEGER
) WITHOUT ROWID;
INSERT INTO cleanup_intents_r (vector_id, doc_id, version, reason, attempts, not_before, created_at, deleting_until)
SELECT vector_id, doc_id, version, reason, attempts, not_before, created_at, deleting_until FROM cleanup_intents;
DROP TABLE cleanup_intents;
ALTER TABLE cleanup_intents_r RENAME TO cleanup_intents;
CREATE INDEX cleanup_intents_by_doc ON cleanup_intents (doc_id, not_before);
CREATE INDEX cleanup_intents_due ON cleanup_intents (not_before);
