-- The operators' dead-letter summary from counters (issue 36, item 2):
-- the archive is never pruned (it is evidence), so grouping every letter
-- grew with history without end (53 ms at 10,000 letters, `make
-- bench-scale`). One row per tenant, failure bucket and chunk-count
-- bucket counts its letters and their deliveries, and how many of each are
-- of their document's latest version (the summary's `version_is_latest`
-- split); the summary reads these rows, as many as tenants times groups.
--
-- The triggers keep the rows in the statement that changes a letter or a
-- document's latest version, so that every batch of every release keeps
-- them true. D1 rows written: one per letter archived or seen again; one
-- per group of letters a document holds when it gets a newer version (a
-- document with no letter: none, one index entry read). `first_seen` and
-- `last_seen` are the group's earliest and latest sighting, whether the
-- letter's version is its latest or not; a letter that leaves its group
-- (seen again after its job ended, with the ending's failure bucket)
-- leaves them as they were. The simulation checks the counts against a
-- recount of the letters after every step (I15).

-- The size bucket the summary groups a letter by (no row: "unknown").
ALTER TABLE dead_letters ADD COLUMN chunk_count_bucket TEXT GENERATED ALWAYS AS
  (CASE WHEN chunk_count IS NULL THEN 'unknown' WHEN chunk_count <= 10 THEN '0-10'
        WHEN chunk_count <= 100 THEN '11-100' WHEN chunk_count <= 1000 THEN '101-1000' ELSE '>1000' END) VIRTUAL;

CREATE TABLE dead_letter_groups (
  tenant_id          TEXT    NOT NULL,
  failure_bucket     TEXT    NOT NULL,
  chunk_count_bucket TEXT    NOT NULL,
  letters            INTEGER NOT NULL,
  deliveries         INTEGER NOT NULL,
  letters_latest     INTEGER NOT NULL,
  deliveries_latest  INTEGER NOT NULL,
  first_seen         INTEGER NOT NULL,
  last_seen          INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, failure_bucket, chunk_count_bucket)
) WITHOUT ROWID;

-- A new letter: counted in its group.
CREATE TRIGGER dead_letters_grouped_new AFTER INSERT ON dead_letters
BEGIN
  INSERT INTO dead_letter_groups (tenant_id, failure_bucket, chunk_count_bucket, letters, deliveries,
                                  letters_latest, deliveries_latest, first_seen, last_seen)
  SELECT NEW.tenant_id, coalesce(NEW.failure_bucket, 'unknown'), NEW.chunk_count_bucket, 1, NEW.times_seen,
         l.latest, l.latest * NEW.times_seen, NEW.first_seen, NEW.last_seen
  FROM (SELECT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = NEW.doc_id AND d.latest_version = NEW.version) AS latest) l
  WHERE true
  ON CONFLICT (tenant_id, failure_bucket, chunk_count_bucket) DO UPDATE SET
    letters = letters + 1, deliveries = deliveries + excluded.deliveries,
    letters_latest = letters_latest + excluded.letters_latest,
    deliveries_latest = deliveries_latest + excluded.deliveries_latest,
    first_seen = min(first_seen, excluded.first_seen), last_seen = max(last_seen, excluded.last_seen);
END;

-- A letter seen again in the same group: its deliveries and sighting.
CREATE TRIGGER dead_letters_grouped_seen AFTER UPDATE ON dead_letters
WHEN coalesce(OLD.failure_bucket, 'unknown') = coalesce(NEW.failure_bucket, 'unknown')
  AND OLD.chunk_count_bucket = NEW.chunk_count_bucket
  AND (OLD.times_seen <> NEW.times_seen OR OLD.first_seen <> NEW.first_seen OR OLD.last_seen <> NEW.last_seen)
BEGIN
  UPDATE dead_letter_groups SET
    deliveries = deliveries + NEW.times_seen - OLD.times_seen,
    deliveries_latest = deliveries_latest + EXISTS (
      SELECT 1 FROM documents d WHERE d.doc_id = NEW.doc_id AND d.latest_version = NEW.version) * (NEW.times_seen - OLD.times_seen),
    first_seen = min(first_seen, NEW.first_seen), last_seen = max(last_seen, NEW.last_seen)
  WHERE tenant_id = NEW.tenant_id AND failure_bucket = coalesce(NEW.failure_bucket, 'unknown')
    AND chunk_count_bucket = NEW.chunk_count_bucket;
END;

-- A letter that changes group (seen again with its job's ending, or its
-- size learnt): out of the old group, into the new; an emptied group goes.
CREATE TRIGGER dead_letters_grouped_moved AFTER UPDATE ON dead_letters
WHEN coalesce(OLD.failure_bucket, 'unknown') <> coalesce(NEW.failure_bucket, 'unknown')
  OR OLD.chunk_count_bucket <> NEW.chunk_count_bucket
BEGIN
  UPDATE dead_letter_groups SET
    letters = letters - 1, deliveries = deliveries - OLD.times_seen,
    letters_latest = letters_latest - l.latest, deliveries_latest = deliveries_latest - l.latest * OLD.times_seen
  FROM (SELECT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = OLD.doc_id AND d.latest_version = OLD.version) AS latest) l
  WHERE tenant_id = OLD.tenant_id AND failure_bucket = coalesce(OLD.failure_bucket, 'unknown')
    AND chunk_count_bucket = OLD.chunk_count_bucket;
  DELETE FROM dead_letter_groups WHERE tenant_id = OLD.tenant_id
    AND failure_bucket = coalesce(OLD.failure_bucket, 'unknown') AND chunk_count_bucket = OLD.chunk_count_bucket
    AND letters = 0;
  INSERT INTO dead_letter_groups (tenant_id, failure_bucket, chunk_count_bucket, letters, deliveries,
                                  letters_latest, deliveries_latest, first_seen, last_seen)
  SELECT NEW.tenant_id, coalesce(NEW.failure_bucket, 'unknown'), NEW.chunk_count_bucket, 1, NEW.times_seen,
         l.latest, l.latest * NEW.times_seen, NEW.first_seen, NEW.last_seen
  FROM (SELECT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = NEW.doc_id AND d.latest_version = NEW.version) AS latest) l
  WHERE true
  ON CONFLICT (tenant_id, failure_bucket, chunk_count_bucket) DO UPDATE SET
    letters = letters + 1, deliveries = deliveries + excluded.deliveries,
    letters_latest = letters_latest + excluded.letters_latest,
    deliveries_latest = deliveries_latest + excluded.deliveries_latest,
    first_seen = min(first_seen, excluded.first_seen), last_seen = max(last_seen, excluded.last_seen);
END;

-- A document's newer version: its letters of the version that was its
-- latest are no longer of the latest, those of the new one are (a document
-- without letters reads one entry of dead_letters_by_doc, writes nothing).
CREATE TRIGGER documents_letters_moved AFTER UPDATE OF latest_version ON documents
WHEN OLD.latest_version IS NOT NEW.latest_version
  AND EXISTS (SELECT 1 FROM dead_letters l WHERE l.doc_id = NEW.doc_id)
BEGIN
  UPDATE dead_letter_groups SET
    letters_latest = letters_latest + m.letters, deliveries_latest = deliveries_latest + m.deliveries
  FROM (SELECT coalesce(l.failure_bucket, 'unknown') AS failure_bucket, l.chunk_count_bucket AS chunk_count_bucket,
               sum(CASE WHEN l.version = NEW.latest_version THEN 1 ELSE -1 END) AS letters,
               sum(CASE WHEN l.version = NEW.latest_version THEN l.times_seen ELSE -l.times_seen END) AS deliveries
        FROM dead_letters l
        WHERE l.doc_id = NEW.doc_id AND l.version IN (OLD.latest_version, NEW.latest_version)
        GROUP BY 1, 2) m
  WHERE dead_letter_groups.tenant_id = NEW.tenant_id AND dead_letter_groups.failure_bucket = m.failure_bucket
    AND dead_letter_groups.chunk_count_bucket = m.chunk_count_bucket AND (m.letters <> 0 OR m.deliveries <> 0);
END;

-- The archive keeps its letters; should one go (by hand), its count goes.
CREATE TRIGGER dead_letters_grouped_gone AFTER DELETE ON dead_letters
BEGIN
  UPDATE dead_letter_groups SET
    letters = letters - 1, deliveries = deliveries - OLD.times_seen,
    letters_latest = letters_latest - l.latest, deliveries_latest = deliveries_latest - l.latest * OLD.times_seen
  FROM (SELECT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = OLD.doc_id AND d.latest_version = OLD.version) AS latest) l
  WHERE tenant_id = OLD.tenant_id AND failure_bucket = coalesce(OLD.failure_bucket, 'unknown')
    AND chunk_count_bucket = OLD.chunk_count_bucket;
  DELETE FROM dead_letter_groups WHERE tenant_id = OLD.tenant_id
    AND failure_bucket = coalesce(OLD.failure_bucket, 'unknown') AND chunk_count_bucket = OLD.chunk_count_bucket
    AND letters = 0;
END;

-- What the letters already archived add up to.
INSERT INTO dead_letter_groups (tenant_id, failure_bucket, chunk_count_bucket, letters, deliveries,
                                letters_latest, deliveries_latest, first_seen, last_seen)
SELECT l.tenant_id, coalesce(l.failure_bucket, 'unknown'), l.chunk_count_bucket, count(*), sum(l.times_seen),
       sum(CASE WHEN d.latest_version = l.version THEN 1 ELSE 0 END), sum(CASE WHEN d.latest_version = l.version THEN l.times_seen ELSE 0 END),
       min(l.first_seen), max(l.last_seen)
FROM dead_letters l LEFT JOIN documents d ON d.doc_id = l.doc_id
GROUP BY 1, 2, 3;
