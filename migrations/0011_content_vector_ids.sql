-- Vectors that outlive versions (docs/ARCHITECTURE.md, "Vector identity"):
-- a vector's ID is derived from the document, the generation, the chunk's
-- content, its occurrence and the document's metadata, not from the
-- version, so a chunk that is unchanged in a new version keeps its vector.
-- Several versions' rows may then refer to one vector: `chunks.vector_id`
-- is no longer unique (rows of generation 1 written before keep their
-- version-derived IDs; the reference rule covers both), and is indexed.
--
-- The table is rebuilt (SQLite cannot drop a UNIQUE constraint); chunk_id
-- is kept, so the keyword index's rowids stay valid. The trigger on
-- documents that reads chunks is dropped first and created again after.
DROP TRIGGER chunks_fts_replaced;
CREATE TABLE chunks_v (
  chunk_id     INTEGER PRIMARY KEY,
  doc_id       TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  generation   INTEGER NOT NULL,
  chunk_index  INTEGER NOT NULL,
  vector_id    TEXT    NOT NULL,
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
INSERT INTO chunks_v (chunk_id, doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text, terms)
SELECT chunk_id, doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text, terms FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_v RENAME TO chunks;
CREATE INDEX chunks_by_hash ON chunks (doc_id, version, generation, content_hash);
CREATE INDEX chunks_by_generation ON chunks (generation, doc_id);
CREATE INDEX chunks_by_vector ON chunks (vector_id);

CREATE TRIGGER chunks_fts_cleaned AFTER DELETE ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
END;

CREATE TRIGGER chunks_fts_changed AFTER UPDATE OF text, terms ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
  INSERT INTO chunks_fts (rowid, terms)
  SELECT new.chunk_id, COALESCE(new.terms, new.text)
  WHERE EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = new.doc_id AND d.live_version = new.version);
END;

CREATE TRIGGER chunks_fts_replaced AFTER UPDATE OF live_version ON documents
WHEN old.live_version IS NOT new.live_version
BEGIN
  DELETE FROM chunks_fts WHERE rowid IN
    (SELECT chunk_id FROM chunks WHERE doc_id = old.doc_id AND version = old.live_version);
  INSERT INTO chunks_fts (rowid, terms)
  SELECT chunk_id, COALESCE(terms, text) FROM chunks WHERE doc_id = new.doc_id AND version = new.live_version;
END;

-- A drain claims the intents whose vectors it is about to delete, until
-- `deleting_until` (a lease: longer than any invocation). While a claim
-- holds, no staging may refer to the vector (its batch aborts through
-- `stage_refusals`), so a vector is never deleted while a row that may be
-- served or written refers to it.
ALTER TABLE cleanup_intents ADD COLUMN deleting_until INTEGER;

-- Never holds a row: a staging batch inserts into it when one of its
-- vector IDs is being deleted, which violates the CHECK and aborts it.
CREATE TABLE stage_refusals (
  vector_id TEXT CHECK (vector_id IS NULL)
);

-- Rows a job found with their vector already in the index (an unchanged
-- chunk): neither embedded, nor reused, nor written.
ALTER TABLE jobs ADD COLUMN chunks_kept INTEGER NOT NULL DEFAULT 0;
