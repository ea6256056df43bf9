-- Cron's search for stalled jobs (`STALLED_JOBS`) reads the jobs waiting
-- for a retry that are due in the order they fall due, from the first due
-- on, and stops at its limit: `jobs_by_state (state, updated_at)` made it
-- pass every job still backing off (an outage's backoff puts a job per
-- document there). Partial: only a job waiting for its retry has an entry,
-- so a job that never fails writes none (D1 bills one row per index entry
-- written), and one that fails writes one as it enters the wait and one
-- as it leaves it.
CREATE INDEX jobs_retry_due ON jobs (next_attempt_at, job_id) WHERE state = 'up_for_retry';
