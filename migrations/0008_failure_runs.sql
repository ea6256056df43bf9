-- When a job's last attempt failed transiently. A failure longer than the
-- longest wait between two failures of one outage (RETRY_MAX_DELAY_SECONDS
-- plus JOB_LEASE_SECONDS) after the previous one starts a new failing run:
-- the job was waiting (on a dead invocation's lease, a stall), not failing,
-- so that time does not count against JOB_RETRY_WINDOW_SECONDS.
ALTER TABLE jobs ADD COLUMN last_failed_at INTEGER;
