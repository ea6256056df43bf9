-- The offline index at a real corpus's size (issue 36): each vector as the
-- base64 of its f32s with its norm, and, once its namespace passes
-- LOCAL_INDEX_EXHAUSTIVE_MAX vectors, quantized into blocks stored by
-- dimension, so that a query reads the few dimensions it has instead of
-- every vector of the namespace (src/core/vector_codes.rs,
-- src/adapters/local_index.rs, src/adapters/local_blocks.rs).
--
-- Rows written before this migration keep their JSON `vec` and a NULL
-- `norm`, and stay readable as they are: they have no slot, so every
-- query of their namespace reads them exactly (as before), until the
-- index places them in its blocks, rewriting them as base64 on the way
-- (its next upsert or query of the namespace, a bounded number at a time).
ALTER TABLE vectors ADD COLUMN norm REAL; -- NULL: `vec` is JSON text
-- The vector's slot in its namespace's blocks (block = slot / block size);
-- NULL while it is not in them (below the threshold, or not placed yet).
ALTER TABLE vectors ADD COLUMN slot INTEGER;
CREATE UNIQUE INDEX vectors_by_slot ON vectors (namespace, slot);

-- Per namespace: its vectors and those without a slot (kept by the
-- triggers below, whatever statement writes `vectors`), the slots its
-- blocks hold (0: no blocks yet, every query reads every vector), and a
-- revision every write of the index's moves on: a write is made of
-- reads, then one batch that first checks the revision it read, so two
-- writes at once cannot both change the same blocks (the later one's
-- batch fails whole on the CHECK, and it starts again).
CREATE TABLE vector_spaces (
  namespace TEXT PRIMARY KEY,
  vectors   INTEGER NOT NULL DEFAULT 0,
  unplaced  INTEGER NOT NULL DEFAULT 0,
  slots     INTEGER NOT NULL DEFAULT 0,
  rev       INTEGER NOT NULL DEFAULT 0 CHECK (rev >= 0)
);
INSERT INTO vector_spaces (namespace, vectors, unplaced)
SELECT namespace, count(*), count(*) FROM vectors GROUP BY namespace;

-- A block's slots, one dimension per row: base64 of one signed byte per
-- slot; dimension -1 holds each slot's factor (f32: scale over norm; -1
-- for a free slot).
CREATE TABLE vector_blocks (
  namespace TEXT NOT NULL,
  dim       INTEGER NOT NULL,
  block     INTEGER NOT NULL,
  codes     TEXT NOT NULL,
  PRIMARY KEY (namespace, dim, block)
);
CREATE INDEX vector_blocks_by_block ON vector_blocks (namespace, block);

CREATE TRIGGER vectors_count_insert AFTER INSERT ON vectors BEGIN
  INSERT INTO vector_spaces (namespace, vectors, unplaced) VALUES (NEW.namespace, 1, NEW.slot IS NULL)
  ON CONFLICT (namespace) DO UPDATE SET vectors = vectors + 1, unplaced = unplaced + (NEW.slot IS NULL);
END;

CREATE TRIGGER vectors_count_delete AFTER DELETE ON vectors BEGIN
  UPDATE vector_spaces SET vectors = vectors - 1, unplaced = unplaced - (OLD.slot IS NULL)
  WHERE namespace = OLD.namespace;
END;

CREATE TRIGGER vectors_count_move AFTER UPDATE OF namespace, slot ON vectors
WHEN OLD.namespace IS NOT NEW.namespace OR (OLD.slot IS NULL) IS NOT (NEW.slot IS NULL) BEGIN
  UPDATE vector_spaces SET vectors = vectors - 1, unplaced = unplaced - (OLD.slot IS NULL)
  WHERE namespace = OLD.namespace;
  INSERT INTO vector_spaces (namespace, vectors, unplaced) VALUES (NEW.namespace, 1, NEW.slot IS NULL)
  ON CONFLICT (namespace) DO UPDATE SET vectors = vectors + 1, unplaced = unplaced + (NEW.slot IS NULL);
END;
