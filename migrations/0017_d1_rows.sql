-- What D1 billed (docs/ARCHITECTURE.md, "Cost"): the rows a job's
-- statements read and wrote, summed from D1's own result meta
-- (`rows_read`, `rows_written`) over every invocation, as the platform
-- bills them; and the same sums over a tenant's jobs. The statement that
-- records an invocation's figures is the one whose own rows are not in
-- them (they are known only once it ran).
ALTER TABLE jobs ADD COLUMN d1_rows_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN d1_rows_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN d1_rows_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN d1_rows_written INTEGER NOT NULL DEFAULT 0;
