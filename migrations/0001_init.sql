-- The source of truth. See docs/ARCHITECTURE.md for the invariants each
-- table carries. Integers are exact within ±2^53 (D1 passes JS numbers).

-- One row per document: the newest version accepted and the version served.
-- live_version only grows (compare-and-set in store::sql::COMMIT_SET_LIVE);
-- it may point at a tombstone (a delete), and is NULL until a version goes live.
CREATE TABLE documents (
  doc_id         TEXT    PRIMARY KEY,
  latest_version INTEGER NOT NULL CHECK (latest_version >= 1),
  live_version   INTEGER CHECK (live_version IS NULL OR live_version <= latest_version),
  repair_needed  INTEGER NOT NULL DEFAULT 0 CHECK (repair_needed IN (0, 1)),
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);

-- Every accepted version, immutable once written. is_delete marks a tombstone.
CREATE TABLE versions (
  doc_id       TEXT    NOT NULL REFERENCES documents (doc_id),
  version      INTEGER NOT NULL CHECK (version >= 1),
  is_delete    INTEGER NOT NULL CHECK (is_delete IN (0, 1)),
  content_hash TEXT    NOT NULL,
  content_type TEXT    NOT NULL,
  metadata     TEXT    NOT NULL,
  text_bytes   INTEGER NOT NULL,
  part_count   INTEGER NOT NULL,
  chunk_count  INTEGER,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (doc_id, version)
);

-- The text of a version, split into parts under D1's 2 MB row limit.
CREATE TABLE version_parts (
  doc_id  TEXT    NOT NULL,
  version INTEGER NOT NULL,
  part    INTEGER NOT NULL,
  text    TEXT    NOT NULL,
  PRIMARY KEY (doc_id, version, part),
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);

-- One row per unit of work: index a version, or apply a tombstone.
CREATE TABLE jobs (
  job_id              TEXT    PRIMARY KEY,
  doc_id              TEXT    NOT NULL,
  version             INTEGER NOT NULL,
  kind                TEXT    NOT NULL CHECK (kind IN ('index', 'delete')),
  state               TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'up_for_retry', 'succeeded', 'failed', 'superseded', 'dead')),
  step                TEXT    NOT NULL,
  attempts            INTEGER NOT NULL DEFAULT 0,
  last_failure_bucket TEXT,
  lease_until         INTEGER,
  next_attempt_at     INTEGER,
  created_at          INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL,
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);
CREATE INDEX jobs_by_version ON jobs (doc_id, version);
CREATE INDEX jobs_by_state ON jobs (state, updated_at);

-- Chunk rows: staged before their vectors are written (so D1 knows every
-- vector ID that can exist), live when their version is documents.live_version.
CREATE TABLE chunks (
  doc_id       TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  chunk_index  INTEGER NOT NULL,
  vector_id    TEXT    NOT NULL UNIQUE,
  start_byte   INTEGER NOT NULL,
  end_byte     INTEGER NOT NULL,
  content_hash TEXT    NOT NULL,
  text         TEXT    NOT NULL,
  PRIMARY KEY (doc_id, version, chunk_index),
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);

-- Vectors to delete from the index. Written in the same atomic batch that
-- makes them obsolete; removed only after the delete succeeded.
CREATE TABLE cleanup_intents (
  vector_id  TEXT    PRIMARY KEY,
  doc_id     TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  reason     TEXT    NOT NULL CHECK (reason IN ('replaced', 'abandoned')),
  attempts   INTEGER NOT NULL DEFAULT 0,
  not_before INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE INDEX cleanup_intents_by_doc ON cleanup_intents (doc_id, not_before);
CREATE INDEX cleanup_intents_due ON cleanup_intents (not_before);
