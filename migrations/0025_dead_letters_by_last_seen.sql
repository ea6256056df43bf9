-- The dead-letter archive is never pruned (it is evidence), so its page
-- (`DEAD_LETTERS_PAGE`, newest first) reads this index from its cursor on
-- and stops at its limit, instead of sorting every letter ever archived.
-- Its order is the page's (`last_seen DESC, job_id`). A letter is written
-- rarely (once per job that dies, again when it is seen again).
CREATE INDEX dead_letters_by_last_seen ON dead_letters (last_seen DESC, job_id);

-- A tenant's page reads its own letters in the same order: the tenant's
-- index gains the page's order (it was (tenant_id, last_seen)).
DROP INDEX dead_letters_by_tenant;
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, last_seen DESC, job_id);
