-- A job's retries span a window of time (JOB_RETRY_WINDOW_SECONDS), not only
-- a number of attempts: when it began failing, reset by any progress
-- (a checkpoint, or an attempt that wrote pages before it failed).
ALTER TABLE jobs ADD COLUMN failing_since INTEGER;
