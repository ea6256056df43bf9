-- Retention (docs/ARCHITECTURE.md, "Retention"). Cron prunes history in
-- bounded pages, each found through an index below, never by a scan:
--
-- - a superseded version's text (`version_parts`), once no job of the
--   version is still running (TEXT_RETENTION_SECONDS after it was
--   superseded; nothing serves or re-runs a superseded version's text);
-- - a superseded version's row and its jobs, HISTORY_RETENTION_SECONDS
--   after it was superseded, once its text, chunk rows and cleanup intents
--   are gone and no dead letter names it;
-- - finished sync sessions with their marks and planned deletes, repair
--   runs, ended backfills with their items and build jobs, revoked tokens
--   (after HISTORY_RETENTION_SECONDS), ended redrives with their items and
--   audit trail (after REDRIVE_RETENTION_SECONDS).
--
-- Never pruned: dead letters (the evidence of incidents), documents (a
-- deleted document keeps its row and its tombstone, so its versions keep
-- growing), the live and the latest version of every document, and
-- whatever a job still running, an active backfill or redrive refers to.

-- When a later version went live (the replace's batch sets it on every
-- version between the one it replaces and itself): from then on, nothing
-- can serve the version or make it live again.
ALTER TABLE versions ADD COLUMN superseded_at INTEGER;

-- A re-run (a redrive, a repair, a reindex) writes no copy of the text:
-- its version names the version whose parts hold it (NULL: its own). The
-- prune keeps those parts while such a version still needs them.
ALTER TABLE versions ADD COLUMN text_version INTEGER;

-- Versions written before this migration: superseded when the next version
-- was written, if a later one is live now.
UPDATE versions SET superseded_at = coalesce(
  (SELECT min(n.created_at) FROM versions n WHERE n.doc_id = versions.doc_id AND n.version > versions.version),
  versions.created_at)
WHERE version < (SELECT d.live_version FROM documents d WHERE d.doc_id = versions.doc_id);

-- The superseded versions whose text is still stored (`part_count` is set
-- to 0 when it is pruned; `text_bytes` keeps the size it had), and those
-- that hold none any more: the two prunes' pages, disjoint, so that each
-- walks only its own.
CREATE INDEX versions_text_prunable ON versions (superseded_at) WHERE superseded_at IS NOT NULL AND part_count > 0;
CREATE INDEX versions_superseded ON versions (superseded_at) WHERE superseded_at IS NOT NULL AND part_count = 0;

-- A tenant's bytes are every byte of text its versions hold, history
-- included (the quota counts what is stored): recounted once here, then
-- kept by intake, re-runs and the prune in the batches that write them.
UPDATE tenants SET bytes = (
  SELECT coalesce(sum(v.text_bytes), 0) FROM versions v
  WHERE v.tenant_id = tenants.tenant_id AND v.is_delete = 0 AND v.part_count > 0 AND v.text_version IS NULL);

-- The other histories' pages.
CREATE INDEX repair_runs_by_start ON repair_runs (started_at);
CREATE INDEX syncs_finished ON syncs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX backfills_ended ON backfills (updated_at) WHERE state IN ('completed', 'cancelled', 'failed');
CREATE INDEX redrives_ended ON redrives (updated_at) WHERE state IN ('stopped', 'completed');
CREATE INDEX tenant_tokens_revoked ON tenant_tokens (revoked_at) WHERE revoked_at IS NOT NULL;
