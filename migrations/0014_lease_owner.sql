-- Which delivery holds a job's claim (docs/ARCHITECTURE.md, "Job states"):
-- a token the Worker's entry point gives each queue delivery (entry.mjs),
-- recorded by the claim. A delivery whose consume panicked is ended by the
-- entry point's second call with the same token (`Pipeline::end_crashed`),
-- which ends the job only if that token holds it: a panic before the claim
-- must not end a job that another delivery of the same message (Queues
-- deliver at least once, duplicates may overlap) is still running, whose
-- later writes would then be left behind (an orphan vector).
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
