-- Each tenant's keyword statistics are its own (docs/ARCHITECTURE.md,
-- "The keyword index"). Until now one FTS5 table held every tenant's
-- rows and its bm25() read the whole table's counts: a tenant's scores,
-- and their order, moved when another tenant wrote, and told it how many
-- of the others' rows held a term.
--
-- The new index is contentless (`content = ''`: no copy of any text, only
-- terms, positions and sizes) and its terms are made by the Worker
-- (`core::terms`), each scoped to its tenant's key (`17zreport`): a
-- tenant's lookups read its own terms' lists only. Its tokenizer, `ascii`,
-- only splits at the spaces between them. A row enters it in the batch
-- that writes the row (`KEYWORD_STAGE`) and leaves it when the row is
-- deleted (the trigger below, `contentless_delete`); search serves the
-- rows valid at the live version only, as for vectors. bm25 is computed by
-- the search statement from the tenant's own counts: rows holding a term
-- (`keyword_terms`), term frequencies (`keyword_instances`), and the
-- tenant's rows and tokens (`tenants.keyword_rows`, `keyword_tokens`).
--
-- Rows written before this migration have no terms yet
-- (`chunks.keyword_len` NULL): cron enters them, a page a run
-- (docs/deploy.md, "Upgrading across migration 0021"), and clears the
-- Japanese terms copy (`chunks.terms`) they kept.
DROP TRIGGER chunks_fts_replaced;
DROP TRIGGER chunks_fts_cleaned;
DROP TRIGGER chunks_fts_changed;
-- Kept, empty, for the previous release's search between this migration
-- and the deploy (it answers no keyword hits meanwhile, and no error);
-- nothing of this release reads or writes it.
INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all');

-- How many terms the row gave the index; NULL: not in it yet.
ALTER TABLE chunks ADD COLUMN keyword_len INTEGER;
CREATE INDEX chunks_unindexed ON chunks (chunk_id) WHERE keyword_len IS NULL;

-- A tenant's key in its terms, and its totals in the index.
ALTER TABLE tenants ADD COLUMN keyword_key INTEGER;
UPDATE tenants SET keyword_key = rowid;
CREATE UNIQUE INDEX tenants_by_keyword_key ON tenants (keyword_key);
-- A tenant created without one (by the previous release, between this
-- migration and the deploy) gets the next key; this release's
-- TENANT_INSERT sets it, so this never fires for it.
CREATE TRIGGER tenants_keyword_key AFTER INSERT ON tenants
WHEN new.keyword_key IS NULL
BEGIN
  UPDATE tenants SET keyword_key = (SELECT coalesce(max(keyword_key), 0) + 1 FROM tenants)
  WHERE tenant_id = new.tenant_id;
END;
ALTER TABLE tenants ADD COLUMN keyword_rows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN keyword_tokens INTEGER NOT NULL DEFAULT 0;

CREATE VIRTUAL TABLE keyword_index USING fts5(
  terms, content = '', contentless_delete = 1, tokenize = 'ascii');
CREATE VIRTUAL TABLE keyword_terms USING fts5vocab(keyword_index, row);
CREATE VIRTUAL TABLE keyword_instances USING fts5vocab(keyword_index, instance);

-- A row leaves the index, and its tenant's totals, when it is deleted.
CREATE TRIGGER chunks_keyword_deleted AFTER DELETE ON chunks
WHEN old.keyword_len IS NOT NULL
BEGIN
  DELETE FROM keyword_index WHERE rowid = old.chunk_id;
  UPDATE tenants SET keyword_rows = keyword_rows - 1, keyword_tokens = keyword_tokens - old.keyword_len
  WHERE tenant_id = old.tenant_id;
END;
