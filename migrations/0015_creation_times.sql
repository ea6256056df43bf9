-- The built-in 'default' tenant (0009) and generation 1 (0006) were
-- written with created_at = 0, which the API showed as 1970. They exist
-- since the ledger does: since its first document where it has one, else
-- since this migration ran (milliseconds since the epoch, as every
-- timestamp of the ledger).
UPDATE tenants
SET created_at = coalesce((SELECT min(created_at) FROM documents),
                          CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    updated_at = max(updated_at, coalesce((SELECT min(created_at) FROM documents),
                          CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)))
WHERE tenant_id = 'default' AND created_at = 0;
UPDATE generations
SET created_at = coalesce((SELECT min(created_at) FROM documents),
                          CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    updated_at = max(updated_at, coalesce((SELECT min(created_at) FROM documents),
                          CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)))
WHERE generation = 1 AND created_at = 0;
