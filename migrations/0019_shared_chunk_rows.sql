-- Chunk rows shared across versions (docs/ARCHITECTURE.md, "The ledger"):
-- a row is valid from the version that wrote it (`version`) until the
-- version that no longer holds it (`to_version`, exclusive; NULL: open,
-- so valid at every later version until one closes it). A new version
-- writes only the chunks it adds and closes the rows it drops; an
-- unchanged chunk's row, and its keyword-index entry, stay. A row's place
-- in its document is `ord`, an order key that an insertion never changes
-- for other rows (fractional indexing, `core::row_plan`): a document's
-- first version has 0, 1, 2, …; a chunk inserted later gets a key between
-- its neighbours'.
--
-- The table is rebuilt (`chunk_index` becomes `ord`, the byte offsets,
-- which an insertion above would shift, go); `chunk_id`
-- is kept, so the keyword index's rowids stay valid, and every vector
-- stays (a row keeps its vector ID). Rows written before were per version:
-- each becomes valid at its own version only (`to_version` = version + 1),
-- except the rows of a document's latest version, which stay open; the
-- next version of a document then shares them. The trigger on documents
-- that reads chunks is dropped first and created again after.
DROP TRIGGER chunks_fts_replaced;
DROP TRIGGER chunks_fts_cleaned;
DROP TRIGGER chunks_fts_changed;
CREATE TABLE chunks_r (
  chunk_id     INTEGER PRIMARY KEY,
  doc_id       TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  to_version   INTEGER,
  generation   INTEGER NOT NULL,
  ord          REAL    NOT NULL,
  vector_id    TEXT    NOT NULL,
  content_hash TEXT    NOT NULL,
  text         TEXT    NOT NULL,
  terms        TEXT,
  tenant_id    TEXT GENERATED ALWAYS AS
    (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL,
  -- For the previous release's search, which reads it, between this
  -- migration and the deploy of the code that needs it (docs/deploy.md,
  -- "Upgrading"); nothing stored, nothing of this release reads it.
  chunk_index  INTEGER GENERATED ALWAYS AS (CAST(ord AS INTEGER)) VIRTUAL,
  CHECK (to_version IS NULL OR to_version > version),
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);
INSERT INTO chunks_r (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text, terms)
SELECT c.chunk_id, c.doc_id, c.version,
       CASE WHEN c.version = (SELECT d.latest_version FROM documents d WHERE d.doc_id = c.doc_id) THEN NULL ELSE c.version + 1 END,
       c.generation, c.chunk_index, c.vector_id, c.content_hash, c.text, c.terms
FROM chunks c;
DROP TABLE chunks;
ALTER TABLE chunks_r RENAME TO chunks;

-- A document's rows in a generation (and by content: a page finds the live
-- vector it may reuse for the same text).
CREATE INDEX chunks_by_doc ON chunks (doc_id, generation, content_hash);
CREATE INDEX chunks_by_generation ON chunks (generation, doc_id);
CREATE INDEX chunks_by_vector ON chunks (vector_id);
-- Closed rows only: the replace finds the rows it stops serving by the
-- version that closed them, and cron sweeps rows nothing can serve.
CREATE INDEX chunks_closed ON chunks (doc_id, to_version) WHERE to_version IS NOT NULL;

CREATE TRIGGER chunks_fts_cleaned AFTER DELETE ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
END;

CREATE TRIGGER chunks_fts_changed AFTER UPDATE OF text, terms ON chunks
BEGIN
  DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
  INSERT INTO chunks_fts (rowid, terms)
  SELECT new.chunk_id, COALESCE(new.terms, new.text)
  WHERE EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = new.doc_id AND new.version <= d.live_version
                AND (new.to_version IS NULL OR new.to_version > d.live_version));
END;

-- The replace (COMMIT_SET_LIVE): the rows valid at the old live version
-- and not at the new one leave the keyword index (closed in between), the
-- rows valid at the new one and not at the old one enter it (written in
-- between, not closed by the new one); the rows both share stay. In
-- proportion to what changed, through chunks_closed and chunks_by_doc.
CREATE TRIGGER chunks_fts_replaced AFTER UPDATE OF live_version ON documents
WHEN old.live_version IS NOT new.live_version
BEGIN
  DELETE FROM chunks_fts WHERE rowid IN
    (SELECT chunk_id FROM chunks WHERE doc_id = old.doc_id AND to_version > old.live_version
     AND to_version <= coalesce(new.live_version, old.live_version) AND version <= old.live_version);
  INSERT INTO chunks_fts (rowid, terms)
  SELECT chunk_id, COALESCE(terms, text) FROM chunks WHERE doc_id = new.doc_id
    AND version > coalesce(old.live_version, 0) AND version <= new.live_version
    AND (to_version IS NULL OR to_version > new.live_version);
END;

-- The staging's guard: each staging batch reads the document's open rows
-- and writes its plan only if no other staging changed them meanwhile
-- (the batch checks the stamp it read and moves it on).
ALTER TABLE documents ADD COLUMN rows_stamp INTEGER NOT NULL DEFAULT 0;
