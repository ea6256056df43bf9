-- Tenants (docs/ARCHITECTURE.md, "Tenants"). A tenant's documents are keyed
-- by core::ids::DocKey in every ledger table's doc_id column:
-- '<tenant>' || char(31) || '<doc_id>', or the bare doc_id for the built-in
-- 'default' tenant (so rows written before tenants existed are its own,
-- unchanged). Each table that holds a doc_id gains the tenant as a
-- generated column, for fences and filters.

-- One row per tenant: its state, its quotas (NULL: the configured
-- default, TENANT_*_MAX), what it stores (documents whose latest version
-- is not a tombstone, and the text bytes of those latest versions; kept
-- by intake in the batch that writes the versions) and its request count
-- in the current minute (rate_minute, minutes since the epoch).
CREATE TABLE tenants (
  tenant_id               TEXT    PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 64),
  state                   TEXT    NOT NULL CHECK (state IN ('active', 'disabled')),
  documents_max           INTEGER CHECK (documents_max IS NULL OR documents_max >= 0),
  bytes_max               INTEGER CHECK (bytes_max IS NULL OR bytes_max >= 0),
  requests_per_minute_max INTEGER CHECK (requests_per_minute_max IS NULL OR requests_per_minute_max >= 0),
  documents               INTEGER NOT NULL DEFAULT 0,
  bytes                   INTEGER NOT NULL DEFAULT 0,
  rate_minute             INTEGER NOT NULL DEFAULT 0,
  rate_requests           INTEGER NOT NULL DEFAULT 0,
  created_at              INTEGER NOT NULL,
  updated_at              INTEGER NOT NULL
);
INSERT INTO tenants (tenant_id, state, documents, bytes, created_at, updated_at)
SELECT 'default', 'active', count(*), coalesce(sum(v.text_bytes), 0), 0, 0
FROM documents d JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.latest_version
WHERE v.is_delete = 0;

-- A tenant's API tokens. The token is shown once; only its SHA-256 is kept.
-- A revoked token keeps its row (revoked_at set).
CREATE TABLE tenant_tokens (
  token_id   TEXT    PRIMARY KEY,
  tenant_id  TEXT    NOT NULL REFERENCES tenants (tenant_id),
  token_hash TEXT    NOT NULL,
  scopes     TEXT    NOT NULL, -- JSON array of 'ingest', 'search'
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX tenant_tokens_by_tenant ON tenant_tokens (tenant_id, created_at);

-- Never holds a row: intake's batch inserts into it when a write would take
-- a tenant past a quota, which violates the CHECK and aborts the batch (a
-- concurrent intake of the same tenant cannot slip past the check intake
-- made before it).
CREATE TABLE quota_refusals (
  tenant_id TEXT CHECK (tenant_id IS NULL)
);

ALTER TABLE documents ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE versions ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE version_parts ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE jobs ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE chunks ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE cleanup_intents ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE dead_letters ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE redrive_items ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;
ALTER TABLE backfill_items ADD COLUMN tenant_id TEXT GENERATED ALWAYS AS
  (CASE WHEN instr(doc_id, char(31)) > 0 THEN substr(doc_id, 1, instr(doc_id, char(31)) - 1) ELSE 'default' END) VIRTUAL;

CREATE INDEX documents_by_tenant ON documents (tenant_id, doc_id);
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, last_seen);

-- A backfill of one tenant's documents (NULL: every tenant's). A redrive's
-- tenant filter is in its params, with its other filters.
ALTER TABLE backfills ADD COLUMN tenant_id TEXT;
