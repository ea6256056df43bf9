-- The keyword index (docs/ARCHITECTURE.md, "Search"): an FTS5 table that
-- holds exactly the live chunks' rows (every chunk row of a document's live
-- version, in every generation that has one). Triggers keep it in the
-- statements (so the batches) that replace and clean chunk rows, and the
-- staging batch's own statement when it stages rows of a live version: it
-- can never disagree with the ledger.
--
-- Chunk rows gain a stable integer key (the index's rowid; an implicit
-- rowid may change on VACUUM) and their keyword text: `terms` is the text
-- with each character of a script written without spaces set apart
-- (core::keyword::index_terms), or NULL when that is the text itself.
-- Rows staged before this migration have NULL: their Latin-script words
-- match, a Japanese run only as a whole (re-index them to fix that).
CREATE TABLE chunks_k (
  chunk_id     INTEGER PRIMARY KEY,
  doc_id       TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  generation   INTEGER NOT NULL,
  chunk_index  INTEGER NOT NULL,
  vector_id    TEXT    NOT NULL UNIQUE,
  start_byte   INTEGER NOT NULL,
  end_byte     INTEGER NOT NULL,
  content_hash TEXT    NOT NULL,
  text         TEXT    NOT NULL,
  terms        TEXT,
  tenant_id    TEXT GENERATED ALWAYS AS
    (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL,
  UNIQUE (doc_id, version, generation, chunk_index),
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);
INSERT INTO chunks_k (chunk_id, doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text, terms)
SELECT rowid, doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text, NULL FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_k RENAME TO chunks;
CREATE INDEX chunks_by_hash ON chunks (doc_id, version, generation, content_hash);
CREATE INDEX chunks_by_generation ON chunks (generation, doc_id);

-- Porter stems English words; unicode61 folds case and diacritics and
-- splits on what is not a letter or a number, so each spaced-out character
-- of an unspaced script is a token of its own (core::keyword).
CREATE VIRTUAL TABLE chunks_fts USING fts5(terms, tokenize = 'porter unicode61 remove_diacritics 2');

INSERT INTO chunks_fts (rowid, terms)
SELECT c.chunk_id, COALESCE(c.terms, c.text) FROM chunks c
JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version;

-- A row staged for a version that is live already (a backfill's build job)
-- is a live chunk at once: the staging batch's KEYWORD_STAGE_LIVE enters it
-- (store::sql). Not a trigger: D1 counts a trigger's writes in the
-- statement's `changes`, and the staging reads that count as rows staged.

-- A row cleaned up leaves the index (deleting a rowid it lacks is a no-op).
CREATE TRIGGER chunks_fts_cleaned AFTER DELETE ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
END;

-- Chunk rows are written once; should one ever change, so does its entry.
CREATE TRIGGER chunks_fts_changed AFTER UPDATE OF text, terms ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
  INSERT INTO chunks_fts (rowid, terms)
  SELECT new.chunk_id, COALESCE(new.terms, new.text)
  WHERE EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = new.doc_id AND d.live_version = new.version);
END;

-- The replace (COMMIT_SET_LIVE): the old live version's rows leave, the new
-- one's enter (none for a tombstone), in the compare-and-set's statement.
CREATE TRIGGER chunks_fts_replaced AFTER UPDATE OF live_version ON documents
WHEN old.live_version IS NOT new.live_version
BEGIN
  DELETE FROM chunks_fts WHERE rowid IN
    (SELECT chunk_id FROM chunks WHERE doc_id = old.doc_id AND version = old.live_version);
  INSERT INTO chunks_fts (rowid, terms)
  SELECT chunk_id, COALESCE(terms, text) FROM chunks WHERE doc_id = new.doc_id AND version = new.live_version;
END;
