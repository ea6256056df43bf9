-- Retention prunes repair runs oldest first by their ID (`PRUNE_REPAIR_RUNS`),
-- which grows with each run recorded, so the index on their start
-- (0018's `repair_runs_by_start`) only cost an entry written per run
-- recorded (D1 bills one row per index entry) and its bytes. A run is
-- recorded as it ends, so two runs that overlap may be recorded out of
-- their start's order; the page of the oldest IDs then keeps a younger
-- one until it is due too, never prunes one that is not.
DROP INDEX repair_runs_by_start;
