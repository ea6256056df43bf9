-- Index generations and backfills (docs/ARCHITECTURE.md, "Generations").

-- A generation: one chunker + embedder configuration (Config::index_config).
-- Exactly one is 'active' (served by search). 'building': a backfill writes
-- its vectors alongside the active one's. 'retained': the previous active one
-- after a switch, kept (and still written) so the switch can be rolled back.
-- 'retiring': its chunk rows are being turned into cleanup intents by cron;
-- 'retired' once none is left. 'abandoned': a cancelled build, to retire.
-- Generation 1 starts with an empty configuration: the first staging
-- records the configuration it ran with.
CREATE TABLE generations (
  generation   INTEGER PRIMARY KEY,
  index_config TEXT    NOT NULL,
  state        TEXT    NOT NULL CHECK (state IN ('building', 'active', 'retained', 'retiring', 'retired', 'abandoned')),
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX generations_one_active ON generations (state) WHERE state = 'active';
CREATE UNIQUE INDEX generations_one_building ON generations (state) WHERE state = 'building';
INSERT INTO generations (generation, index_config, state, created_at, updated_at) VALUES (1, '', 'active', 0, 0);

-- Chunk rows gain their generation: a version has one set of rows per
-- generation it was indexed in. Existing rows are generation 1.
CREATE TABLE chunks_g (
  doc_id       TEXT    NOT NULL,
  version      INTEGER NOT NULL,
  generation   INTEGER NOT NULL,
  chunk_index  INTEGER NOT NULL,
  vector_id    TEXT    NOT NULL UNIQUE,
  start_byte   INTEGER NOT NULL,
  end_byte     INTEGER NOT NULL,
  content_hash TEXT    NOT NULL,
  text         TEXT    NOT NULL,
  PRIMARY KEY (doc_id, version, generation, chunk_index),
  FOREIGN KEY (doc_id, version) REFERENCES versions (doc_id, version)
);
INSERT INTO chunks_g (doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text)
SELECT doc_id, version, 1, chunk_index, vector_id, start_byte, end_byte, content_hash, text FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_g RENAME TO chunks;
CREATE INDEX chunks_by_hash ON chunks (doc_id, version, generation, content_hash);
CREATE INDEX chunks_by_generation ON chunks (generation, doc_id);

-- A job that builds a live version's vectors in one generation (a backfill),
-- instead of indexing a new version; and the chunk rows it stages in all.
ALTER TABLE jobs ADD COLUMN build_generation INTEGER;
ALTER TABLE jobs ADD COLUMN rows_total INTEGER;

-- A backfill: re-runs (scope 'all' or 'filter') or builds in a new
-- generation (scope 'config') every live document in scope, a page at a
-- time from a cursor (doc_id order), advanced by cron.
CREATE TABLE backfills (
  backfill_id     TEXT    PRIMARY KEY,
  scope           TEXT    NOT NULL CHECK (scope IN ('all', 'filter', 'config')),
  filter          TEXT,
  from_generation INTEGER,
  to_generation   INTEGER,
  state           TEXT    NOT NULL CHECK (state IN ('running', 'paused', 'cancelled', 'completed', 'failed')),
  cursor          TEXT    NOT NULL DEFAULT '',
  passes          INTEGER NOT NULL DEFAULT 1,
  page_size       INTEGER NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);

-- The jobs a backfill started, one per document per pass.
CREATE TABLE backfill_items (
  backfill_id TEXT    NOT NULL REFERENCES backfills (backfill_id),
  doc_id      TEXT    NOT NULL,
  pass        INTEGER NOT NULL,
  job_id      TEXT    NOT NULL,
  PRIMARY KEY (backfill_id, doc_id, pass)
);
