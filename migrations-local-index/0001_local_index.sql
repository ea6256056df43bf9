-- The offline stand-in for Vectorize (INDEX_BACKEND=local-d1), in its own
-- local D1 database so that it stays derived data, separate from the ledger.
CREATE TABLE vectors (
  id         TEXT PRIMARY KEY,
  doc_id     TEXT NOT NULL,
  vec        TEXT NOT NULL, -- JSON array of floats
  metadata   TEXT NOT NULL  -- JSON object
);
CREATE INDEX vectors_by_doc ON vectors (doc_id);
