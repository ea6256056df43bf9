-- Each generation counts its chunk rows (`chunk_rows`), so that nothing
-- reads the rows by generation alone and `chunks_by_generation` goes: a
-- new chunk row writes its row, `chunks_by_doc`, `chunks_by_vector` and
-- its keyword entry, one D1 row fewer than before (D1 bills one row per
-- index entry written). The staging batch adds the rows it writes
-- (`GENERATION_ROWS_STAGED`: one row written per generation it writes
-- into, not one per chunk); a deleted row is taken off by the trigger
-- below (one row written per deleted row: the price of a count that the
-- previous release's cron keeps true too, between this migration and the
-- deploy). The console's
-- generation list reads the count, and a retiring generation is retired
-- once its count is 0 (`GENERATIONS_RETIRED`). Every statement that read
-- the index by (generation, document) reads `chunks_by_doc` by (document,
-- generation) instead.
--
-- Only the consumer inserts chunk rows: deploy with delivery paused
-- (docs/deploy.md), so that no staging of the previous release, which
-- does not count, runs between this migration and the deploy.
ALTER TABLE generations ADD COLUMN chunk_rows INTEGER NOT NULL DEFAULT 0;
UPDATE generations SET chunk_rows = (SELECT count(*) FROM chunks c WHERE c.generation = generations.generation);

CREATE TRIGGER chunks_generation_counted AFTER DELETE ON chunks
BEGIN
  UPDATE generations SET chunk_rows = chunk_rows - 1 WHERE generation = old.generation;
END;

DROP INDEX chunks_by_generation;
