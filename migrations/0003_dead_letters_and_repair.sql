-- Repair runs, dead letters and redrives. The pipeline never deletes rows
-- from dead_letters, redrives, redrive_items or redrive_audit: they are the
-- evidence of incidents and of what was done about them.

-- One row per scheduled run of the reconciler: counts per category, budget used.
CREATE TABLE repair_runs (
  run_id      INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  report      TEXT    NOT NULL,
  budget_hit  INTEGER NOT NULL CHECK (budget_hit IN (0, 1))
);

-- One row per job whose message was dead-lettered (by the consumer on a
-- permanent failure or exhausted attempts, or by Queues after max_retries).
CREATE TABLE dead_letters (
  job_id         TEXT    PRIMARY KEY,
  message_id     TEXT    NOT NULL,
  doc_id         TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  job_state      TEXT,
  job_step       TEXT,
  failure_bucket TEXT,
  attempts       INTEGER,
  chunk_count    INTEGER,
  first_seen     INTEGER NOT NULL,
  last_seen      INTEGER NOT NULL,
  times_seen     INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX dead_letters_by_bucket ON dead_letters (failure_bucket, last_seen);
CREATE INDEX dead_letters_by_doc ON dead_letters (doc_id, version);

-- A redrive: a bounded, audited re-run of dead-lettered jobs (canaries first).
CREATE TABLE redrives (
  redrive_id  TEXT    PRIMARY KEY,
  plan_id     TEXT    NOT NULL,
  state       TEXT    NOT NULL CHECK (state IN ('canary', 'running', 'stopped', 'completed')),
  params      TEXT    NOT NULL,
  stop_reason TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);

CREATE TABLE redrive_items (
  redrive_id    TEXT    NOT NULL REFERENCES redrives (redrive_id),
  letter_job_id TEXT    NOT NULL,
  doc_id        TEXT    NOT NULL,
  version       INTEGER NOT NULL,
  phase         TEXT    NOT NULL CHECK (phase IN ('canary', 'batch')),
  seq           INTEGER NOT NULL,
  state         TEXT    NOT NULL CHECK (state IN ('pending', 'sent', 'succeeded', 'failed', 'skipped')),
  new_job_id    TEXT,
  new_version   INTEGER,
  PRIMARY KEY (redrive_id, letter_job_id)
);

CREATE TABLE redrive_audit (
  redrive_id TEXT    NOT NULL REFERENCES redrives (redrive_id),
  at         INTEGER NOT NULL,
  event      TEXT    NOT NULL,
  detail     TEXT    NOT NULL
);
CREATE INDEX redrive_audit_by_redrive ON redrive_audit (redrive_id, at);
