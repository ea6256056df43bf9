-- Source sync (docs/ARCHITECTURE.md, "Source sync"). A client syncs a
-- whole source (a folder, a site, a bucket) in a session: it writes or
-- marks seen every document the source holds, then commits, and every
-- document of the source the session did not see gets a tombstone through
-- the normal protocol. Doc IDs here are ledger keys (core::ids::DocKey).

-- One row per session. `seq` orders sessions: of two sessions of one
-- source, the later one wins. The figures are set when the commit begins
-- (seen, to_delete) and as it deletes (deleted, kept: planned deletes that
-- a later session saw or a newer version replaced).
CREATE TABLE syncs (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  sync_id      TEXT    NOT NULL UNIQUE,
  tenant_id    TEXT    NOT NULL,
  source       TEXT    NOT NULL CHECK (length(CAST(source AS BLOB)) BETWEEN 1 AND 128),
  state        TEXT    NOT NULL CHECK (state IN ('open', 'committing', 'committed', 'expired', 'superseded')),
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  committed_at INTEGER,
  finished_at  INTEGER,
  seen         INTEGER NOT NULL DEFAULT 0,
  to_delete    INTEGER NOT NULL DEFAULT 0,
  deleted      INTEGER NOT NULL DEFAULT 0,
  kept         INTEGER NOT NULL DEFAULT 0,
  updated_at   INTEGER NOT NULL
);
CREATE INDEX syncs_by_source ON syncs (tenant_id, source, seq);
CREATE INDEX syncs_by_state ON syncs (state, expires_at);

-- The documents a session saw (written, or sent unchanged).
CREATE TABLE sync_seen (
  sync_id TEXT NOT NULL,
  doc_id  TEXT NOT NULL,
  PRIMARY KEY (sync_id, doc_id)
) WITHOUT ROWID;
CREATE INDEX sync_seen_by_doc ON sync_seen (doc_id);

-- Which source a document belongs to: the last source it was written with.
CREATE TABLE source_documents (
  doc_id    TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  source    TEXT NOT NULL
);
CREATE INDEX source_documents_by_source ON source_documents (tenant_id, source, doc_id);

-- A commit's plan: the documents it deletes, each at the version it saw
-- (a newer version is kept), and what became of each.
CREATE TABLE sync_deletes (
  sync_id TEXT    NOT NULL,
  doc_id  TEXT    NOT NULL,
  version INTEGER NOT NULL,
  state   TEXT    NOT NULL CHECK (state IN ('pending', 'deleted', 'kept')),
  PRIMARY KEY (sync_id, doc_id)
) WITHOUT ROWID;
CREATE INDEX sync_deletes_by_state ON sync_deletes (sync_id, state, doc_id);

-- Never holds a row: a write into a session that is not open, or a commit
-- past the mass-delete guard, inserts into it, which violates the CHECK
-- and aborts the batch (the check holds at the batch's moment, not at an
-- earlier read's).
CREATE TABLE sync_refusals (
  sync_id TEXT CHECK (sync_id IS NULL)
);
