-- Vectorize namespaces (one per tenant): a query searches one namespace.
-- Vectors written before tenants existed are in none ('') until re-upserted.
ALTER TABLE vectors ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
CREATE INDEX vectors_by_namespace ON vectors (namespace, doc_id);
