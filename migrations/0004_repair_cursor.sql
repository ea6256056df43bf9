-- Resumable cursors of the reconciler (e.g. how far the index verification
-- got), so each bounded run continues where the previous one stopped.
CREATE TABLE repair_cursors (
  name  TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
