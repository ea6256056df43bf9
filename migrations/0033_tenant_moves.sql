-- Moving a tenant between shards online (issue 37; docs/ARCHITECTURE.md,
-- "Moving a tenant"). The directory (shard 0) records each move; every
-- shard marks a tenant that is moving on its own tenants row, which the
-- statements that admit, write and claim for the tenant read.

-- A tenant's part in a move, on the shard it is on:
--   NULL       not moving;
--   copying    moving out, its rows being copied: everything works but
--              a new sync session (`SYNC_INSERT` checks this column);
--   fenced     moving out, the copy catching up: its writes are refused
--              (intake's guard), and so are changes of its state, quotas
--              and tokens; searches and reads are served here;
--   moved      moved out: every request goes back to the directory;
--   moving_in  the copy on the new shard: nothing is served, no job of
--              it is claimed, until the switch clears it.
ALTER TABLE tenants ADD COLUMN move_state TEXT CHECK (move_state IN ('copying', 'fenced', 'moved', 'moving_in'));

-- The moves (on shard 0, beside the directory). `cursor`: the last
-- document key the current pass handled ('' at its start); `pass`: 1 the
-- copy, 2 the catch-up (fenced), 3 the cleanup of the shard left (or, on
-- a cancel, of the copy). Counters say what each pass did.
CREATE TABLE tenant_moves (
  move_id      TEXT    PRIMARY KEY,
  tenant_id    TEXT    NOT NULL,
  from_shard   INTEGER NOT NULL CHECK (from_shard BETWEEN 0 AND 63),
  to_shard     INTEGER NOT NULL CHECK (to_shard BETWEEN 0 AND 63),
  state        TEXT    NOT NULL CHECK (state IN ('copying', 'paused', 'catching_up', 'switched', 'cleaning', 'completed', 'cancelling', 'cancelled')),
  cursor       TEXT    NOT NULL DEFAULT '',
  copied       INTEGER NOT NULL DEFAULT 0,
  recopied     INTEGER NOT NULL DEFAULT 0,
  vectors      INTEGER NOT NULL DEFAULT 0,
  removed      INTEGER NOT NULL DEFAULT 0,
  waiting_for  TEXT,
  created_at   INTEGER NOT NULL,
  switched_at  INTEGER,
  updated_at   INTEGER NOT NULL,
  CHECK (from_shard <> to_shard)
) WITHOUT ROWID;
-- One move of a tenant at a time.
CREATE UNIQUE INDEX tenant_moves_open ON tenant_moves (tenant_id)
  WHERE state NOT IN ('completed', 'cancelled');
-- The moves cron advances, and the listing (newest first).
CREATE INDEX tenant_moves_by_state ON tenant_moves (state, updated_at);
CREATE INDEX tenant_moves_by_creation ON tenant_moves (created_at DESC, move_id);
-- Retention: an ended move is pruned after HISTORY_RETENTION_SECONDS.
CREATE INDEX tenant_moves_ended ON tenant_moves (updated_at) WHERE state IN ('completed', 'cancelled');

-- Never holds a row: a batch that writes for a tenant whose move forbids
-- it inserts into it, which violates the CHECK and aborts the batch.
CREATE TABLE move_refusals (
  tenant_id TEXT CHECK (tenant_id IS NULL)
);
