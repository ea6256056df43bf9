-- Jobs that span several queue invocations (CONSUME_SUBREQUESTS_MAX,
-- CONSUME_WALL_SECONDS_MAX): the checkpoint and what the job has used.

-- Chunks (in chunk_index order) whose vectors are upserted; the next
-- invocation continues from here. Only meaningful once step = 'staged'.
ALTER TABLE jobs ADD COLUMN chunks_done INTEGER NOT NULL DEFAULT 0;
-- Invocations that claimed the job, and the subrequests they made, by kind.
-- An invocation that crashed before it recorded its usage is counted in
-- `invocations` only.
ALTER TABLE jobs ADD COLUMN invocations INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN subrequests_d1 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN subrequests_embed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN subrequests_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN subrequests_queue INTEGER NOT NULL DEFAULT 0;
-- The most subrequests any one recorded invocation made.
ALTER TABLE jobs ADD COLUMN subrequests_peak INTEGER NOT NULL DEFAULT 0;
-- Chunks whose vectors were computed by the embedder, and copied from the
-- live version (embedding reuse).
ALTER TABLE jobs ADD COLUMN chunks_embedded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN chunks_reused INTEGER NOT NULL DEFAULT 0;

-- Embedding reuse looks up a live chunk by its text's hash, page by page.
CREATE INDEX chunks_by_hash ON chunks (doc_id, version, content_hash);
