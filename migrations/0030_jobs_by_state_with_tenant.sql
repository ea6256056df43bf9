-- The jobs timeline of one tenant (`JOBS_TIMELINE`, the console's chart
-- with a tenant chosen) reads the window's range of `jobs_by_state` in
-- each state and kept the tenant's jobs: each entry looked its job's row
-- up for the tenant, a generated column of its key (28.8 ms for the large
-- tenant's 6 hours at 1,000,000 jobs, `make bench-scale`; 4.9 to 6.2 ms
-- with the tenant in the index). The same entries, one more column: no row more
-- written per job, a few bytes more per entry; every statement that read
-- a range of (state, updated_at) reads the same range.
DROP INDEX jobs_by_state;
CREATE INDEX jobs_by_state ON jobs (state, updated_at, tenant_id);
