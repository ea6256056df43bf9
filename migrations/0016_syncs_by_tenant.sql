-- A tenant's sync sessions, newest first (GET /v1/syncs, SYNCS_PAGE): an
-- index on (tenant_id, seq) reads a page from the cursor on, whatever the
-- number of sessions. syncs_by_source (tenant_id, source, seq) serves the
-- listing of one source; without this one, a listing of every source would
-- read and sort all of the tenant's sessions for each page.
CREATE INDEX syncs_by_tenant ON syncs (tenant_id, seq);
