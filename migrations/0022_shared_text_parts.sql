-- Text parts shared across versions (docs/ARCHITECTURE.md, "The ledger"):
-- intake cuts a version's text where the content says
-- (`core::text_parts`) and writes only the parts the version before does
-- not hold; its manifest (`versions.parts`, a JSON array of
-- `[version, part, hash]`, in text order) names the `version_parts` row of
-- each piece, written by this version or an earlier one. A part row is
-- valid from the version that wrote it (`version`) until the first
-- version that no longer names it (`to_version`, exclusive; NULL: the
-- latest version still names it): a version names only parts of the
-- version just before it, so the versions that name a part are exactly
-- that range. Cron deletes a part once no version in its range holds text
-- (`part_count` > 0), and gives its bytes back to its tenant.
--
-- Nothing is rewritten: parts written before keep their keys, and a
-- version without a manifest (NULL) reads its own parts 0, 1, … (or its
-- `text_version`'s) as before. Their ranges: the parts of a document's
-- latest version stay open (its next version closes those it does not
-- share), every other version's end at the version after it.
ALTER TABLE versions ADD COLUMN parts TEXT;
ALTER TABLE version_parts ADD COLUMN to_version INTEGER;
UPDATE version_parts SET to_version = version + 1
WHERE version < (SELECT d.latest_version FROM documents d WHERE d.doc_id = version_parts.doc_id);
