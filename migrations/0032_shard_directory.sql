-- Shards and the directory (issue 37; docs/ARCHITECTURE.md, "Shards and
-- the directory"). Every shard carries every table; these three are read
-- and written on shard 0 (binding DB) only, which holds the directory. A
-- tenant's own rows (its tenants row, tokens, documents, jobs, ...) live on
-- the shard the directory names; the directory holds only pointers.

-- Which shard holds each tenant.
CREATE TABLE tenant_placements (
  tenant_id TEXT    PRIMARY KEY CHECK (length(tenant_id) BETWEEN 1 AND 64),
  shard     INTEGER NOT NULL CHECK (shard BETWEEN 0 AND 63),
  placed_at INTEGER NOT NULL
) WITHOUT ROWID;
-- A shard's tenants, in order (the console's listing; whether a shard
-- about to be dedicated holds anyone).
CREATE INDEX tenant_placements_by_shard ON tenant_placements (shard, tenant_id);

-- A shard given to one tenant alone: placement puts no other tenant there.
CREATE TABLE dedicated_shards (
  shard        INTEGER PRIMARY KEY CHECK (shard BETWEEN 0 AND 63),
  tenant_id    TEXT    NOT NULL UNIQUE,
  dedicated_at INTEGER NOT NULL
);

-- Never holds a row: a placement's batch inserts into it when the shard is
-- dedicated to another tenant, or (a dedication) when it holds another
-- tenant, which violates the CHECK and aborts the batch: two operators
-- placing at once cannot both win.
CREATE TABLE placement_refusals (
  tenant_id TEXT CHECK (tenant_id IS NULL)
);

-- Which tenant each token belongs to (its secret and scopes stay with the
-- tenant, on its shard): how a request with a tenant's token finds the
-- shard that can check it.
CREATE TABLE token_directory (
  token_id  TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL
) WITHOUT ROWID;

-- A ledger written before shards is shard 0, whole: its tenants and tokens
-- are placed there (a one-off step).
INSERT INTO tenant_placements (tenant_id, shard, placed_at)
SELECT tenant_id, 0, created_at FROM tenants;
INSERT INTO token_directory (token_id, tenant_id)
SELECT token_id, tenant_id FROM tenant_tokens;
