-- A sync commit deletes only what was written before its session opened
-- (docs/ARCHITECTURE.md, "Source sync", invariant I14). A write outside
-- any session (no `sync_id`: a plain PUT, with or without a `source`)
-- records the newest session's `seq` at that moment, in the rows it writes
-- anyway: `documents` for a new version, `source_documents` for a write
-- into a source (changed or not). A session S plans and performs the
-- delete of a document only while both marks are below S's `seq`, so a
-- plain write that lands while S is open (its mark is at least S's seq)
-- is never deleted by S. Writes inside a session leave the marks alone:
-- between sessions, the later one wins (sync_seen), as before.
ALTER TABLE documents ADD COLUMN plain_write_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE source_documents ADD COLUMN plain_write_seq INTEGER NOT NULL DEFAULT 0;

-- Documents of a source with a session open now may have been written
-- after it opened, which the rows above cannot tell any more: such a
-- session deletes none of them (a later session will). Nothing is lost.
UPDATE source_documents SET plain_write_seq = (SELECT max(seq) FROM syncs)
WHERE EXISTS (SELECT 1 FROM syncs s WHERE s.state = 'open'
              AND s.tenant_id = source_documents.tenant_id AND s.source = source_documents.source);
