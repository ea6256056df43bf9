-- The switch to a generation no longer checks every live document
-- (`GENERATION_GAPS`: 5.0 s at 1,000,000 documents, `make bench-scale`;
-- D1 stops a query at 30 s, near 5.7 million). The backfill's pass is the
-- check: it walks every document once, and what it could not build is
-- counted on the backfill, so the switch reads one row
-- (docs/ARCHITECTURE.md, "The switch").
--
-- `pass_missing`: documents the current pass found without their vectors
-- in the generation and could not build (rows of a build that failed, a
-- build still running), builds of the generation that ended failed or
-- dead during the pass, and stagings that left the generation out (a
-- Worker that cannot embed for it). 0 at the end of a pass: the switch.
ALTER TABLE backfills ADD COLUMN pass_missing INTEGER NOT NULL DEFAULT 0;

-- A pass already under way was walked without counting: its end starts
-- another pass, which counts from its first page.
UPDATE backfills SET pass_missing = 1 WHERE state IN ('running', 'paused') AND to_generation IS NOT NULL;

-- A build that ends failed or dead counts against the pass that
-- enqueued it, in the statement that ends it (whichever: the consumer's,
-- cron's stalled check, the dead-letter path), once: only on the change.
-- The same change counts the failure on the backfill whose item the job
-- is (`failed`, below).
CREATE TRIGGER jobs_backfill_failed_counted AFTER UPDATE OF state ON jobs
WHEN NEW.state IN ('failed', 'dead') AND OLD.state NOT IN ('failed', 'dead')
BEGIN
  UPDATE backfills SET pass_missing = pass_missing + 1
  WHERE NEW.build_generation IS NOT NULL AND to_generation = NEW.build_generation
    AND state IN ('running', 'paused');
  UPDATE backfills SET failed = failed + 1
  WHERE state IN ('running', 'paused', 'cancelled')
    AND EXISTS (SELECT 1 FROM backfill_items i WHERE i.backfill_id = backfills.backfill_id
                AND i.doc_id = NEW.doc_id AND i.job_id = NEW.job_id);
END;

-- A backfill's progress from its own row, not from its items and every
-- live document (`BACKFILL_COUNTS`, `BACKFILL_TOTAL` on every view: 0.6 to
-- 0.8 s at 1,000,000 documents): `enqueued` its items (each page adds
-- its own, in the batch that moves the cursor), `failed` those whose job
-- ended failed or dead (the trigger above; a job ends once), `total` the
-- live documents in scope (counted once at the start, then by each pass's
-- walk: `pass_scope`, NULL for a pass begun before this migration).
-- Pending is the jobs in flight among its items; done the rest.
ALTER TABLE backfills ADD COLUMN enqueued INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backfills ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backfills ADD COLUMN total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backfills ADD COLUMN pass_scope INTEGER DEFAULT 0;
UPDATE backfills SET
  enqueued = (SELECT count(*) FROM backfill_items i WHERE i.backfill_id = backfills.backfill_id),
  failed = (SELECT count(*) FROM backfill_items i JOIN jobs j ON j.job_id = i.job_id
            WHERE i.backfill_id = backfills.backfill_id AND j.state IN ('failed', 'dead'));
UPDATE backfills SET total = enqueued;
UPDATE backfills SET pass_scope = NULL WHERE state IN ('running', 'paused');

-- `skipped_at`: when a staging first left out this generation while it
-- was active or retained (a Worker that cannot embed for it: another
-- model's dimensions). Such a generation misses that version for good, so
-- it is not rolled back to (`generation_incomplete`); NULL: every version
-- staged since it was built is in it.
ALTER TABLE generations ADD COLUMN skipped_at INTEGER;

-- A retained generation that already misses a live document (left out
-- before this migration: the check was the switch's own then) is marked,
-- once, by the check the switch used to make (a one-off step).
UPDATE generations SET skipped_at = updated_at
WHERE state = 'retained' AND EXISTS (
  SELECT 1 FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.live_version
  WHERE v.is_delete = 0 AND NOT EXISTS (
    SELECT 1 FROM chunks c WHERE c.doc_id = d.doc_id AND c.generation = generations.generation
      AND c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)));
