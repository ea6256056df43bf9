-- The configuration that produced a version's chunks and vectors: chunker
-- settings, embedding model, pooling and dimensions (a canonical JSON
-- object, see Config::index_config). Set when the version is staged.
ALTER TABLE versions ADD COLUMN index_config TEXT;
