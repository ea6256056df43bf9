-- The keyword index without its own copy of the text (docs/ARCHITECTURE.md,
-- "The ledger"): an FTS5 table with external content, `chunks` itself, so
-- it keeps only the index (terms, positions, each row's size), not a second
-- copy of every live chunk's keyword text (two thirds of its bytes before,
-- docs/performance.md). What it indexes is each row's `keyword_text`: its
-- `terms`, or its text when they are the same (a generated column: no
-- bytes stored).
--
-- An external-content index is told what leaves it: a row's entry is
-- removed with FTS5's 'delete' command and the values it was indexed with,
-- which the triggers pass from the row; an entry that is not in the index
-- must never be 'deleted' (it would corrupt it), so each trigger deletes
-- only the entries of rows valid at their document's live version: exactly
-- the rows the index holds (I12).
--
-- The index is rebuilt from the live rows, in this migration.
DROP TRIGGER chunks_fts_replaced;
DROP TRIGGER chunks_fts_cleaned;
DROP TRIGGER chunks_fts_changed;
DROP TABLE chunks_fts;

ALTER TABLE chunks ADD COLUMN keyword_text TEXT GENERATED ALWAYS AS (COALESCE(terms, text)) VIRTUAL;

CREATE VIRTUAL TABLE chunks_fts USING fts5(
  keyword_text, content = 'chunks', content_rowid = 'chunk_id',
  tokenize = 'porter unicode61 remove_diacritics 2');

INSERT INTO chunks_fts (rowid, keyword_text)
SELECT c.chunk_id, c.keyword_text FROM chunks c
JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
  AND (c.to_version IS NULL OR c.to_version > d.live_version);

-- A live row cleaned up (a retiring generation's) leaves the index.
CREATE TRIGGER chunks_fts_cleaned AFTER DELETE ON chunks
WHEN EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = old.doc_id AND old.version <= d.live_version
             AND (old.to_version IS NULL OR old.to_version > d.live_version))
BEGIN
  INSERT INTO chunks_fts (chunks_fts, rowid, keyword_text) VALUES ('delete', old.chunk_id, old.keyword_text);
END;

-- Chunk rows are written once; should a live one's text change, so does its entry.
CREATE TRIGGER chunks_fts_changed AFTER UPDATE OF text, terms ON chunks
WHEN EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = new.doc_id AND new.version <= d.live_version
             AND (new.to_version IS NULL OR new.to_version > d.live_version))
BEGIN
  INSERT INTO chunks_fts (chunks_fts, rowid, keyword_text) VALUES ('delete', old.chunk_id, old.keyword_text);
  INSERT INTO chunks_fts (rowid, keyword_text) VALUES (new.chunk_id, new.keyword_text);
END;

-- The replace (COMMIT_SET_LIVE), as in 0019: the rows valid at the old
-- live version and not at the new one leave, the rows valid at the new one
-- and not at the old one enter; the rows both share stay.
CREATE TRIGGER chunks_fts_replaced AFTER UPDATE OF live_version ON documents
WHEN old.live_version IS NOT new.live_version
BEGIN
  INSERT INTO chunks_fts (chunks_fts, rowid, keyword_text)
  SELECT 'delete', chunk_id, keyword_text FROM chunks WHERE doc_id = old.doc_id AND to_version > old.live_version
     AND to_version <= coalesce(new.live_version, old.live_version) AND version <= old.live_version;
  INSERT INTO chunks_fts (rowid, keyword_text)
  SELECT chunk_id, keyword_text FROM chunks WHERE doc_id = new.doc_id
    AND version > coalesce(old.live_version, 0) AND version <= new.live_version
    AND (to_version IS NULL OR to_version > new.live_version);
END;
