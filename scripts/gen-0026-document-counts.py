# Generates migrations/0026_document_counts.sql: the state's definition
# (pipeline::views::document_state) is one template here, expanded into
# each trigger, as SQLite has no functions. Run `python3 scripts/gen-0026-document-counts.py`
# and diff: the committed migration is this script's output (an applied
# migration must never change; this is for reading and for a later one).
HEADER = "-- Each tenant counts its documents by state (`tenants.document_counts`, a\n-- JSON object: each state's name, and `state/bucket` for the documents\n-- neither indexed nor deleted whose newest job last failed in `bucket`),\n-- so the operators' summary reads one row per tenant instead of grouping\n-- every document (7.6 s at 1,000,000 documents, `make bench-scale`).\n--\n-- The triggers below keep the counts in the statement that changes what\n-- a document's state derives from (`pipeline::views::document_state`:\n-- its repair flag, whether its live version is its latest and a\n-- tombstone, and its latest version's newest job), so every batch of\n-- every release, this one's and the previous one's between migration and\n-- deploy, keeps them true. Each writes the tenant's row only when the\n-- document's counted state or failure key changes: one D1 row written per\n-- move. A document whose job is running is counted as `queued`, whatever\n-- the job wrote: the summary moves those to `indexing` as it reads\n-- (`RUNNING_DOCUMENTS`: the running jobs, as many as consumers run at\n-- once), so that a claim moves no count. An edit of an indexed document\n-- then moves twice: queued at intake, indexed at the commit (a job that\n-- spans invocations moves twice more per checkpoint: written and queued\n-- again is `indexing`, claimed again is `queued`). The\n-- simulation checks every tenant's summary against a recount after every\n-- step (I15).\n--\n-- Generated from one template per trigger (scripts/gen-0026-document-counts.py; the state's definition\n-- repeated in each, as SQLite has no functions); keep them in step with\n-- `document_state`.\nALTER TABLE tenants ADD COLUMN document_counts TEXT NOT NULL DEFAULT '{}';\n\n"
def jobstate(js, step, done):
    # A running job counts as queued: the summary moves the documents of
    # running jobs (a range of jobs_by_state that the consumers'
    # concurrency bounds) to indexing as it reads, so a claim moves no count.
    return (f"CASE WHEN {js} = 'queued' AND {step} = 'staged' AND {done} > 0 THEN 'indexing'"
            f" WHEN {js} = 'up_for_retry' AND {step} = 'staged' AND {done} > 0 THEN 'partially_indexed'"
            f" WHEN {js} IN ('failed', 'dead') THEN 'failed' ELSE 'queued' END")

def newest(doc, version, extra=""):
    return (f"(SELECT n.job_id FROM jobs n WHERE n.doc_id = {doc} AND n.version = {version}{extra}"
            f" ORDER BY n.created_at DESC, n.job_id LIMIT 1)")

def key(d, doc_from, doc_where, job):
    """JSON [state, failure key or null] of the document whose columns are `d.*`,
    its latest version's newest job being `job`: ('id', job id expression) or
    ('row', OLD/NEW) for a trigger's job values."""
    if job[0] == 'id':
        js, step, done, b = "j.state", "j.step", "j.chunks_done", "j.last_failure_bucket"
        jjoin = f"\n        LEFT JOIN jobs j ON j.job_id = {job[1]}"
    else:
        p = job[1]
        js, step, done, b = f"{p}.state", f"{p}.step", f"{p}.chunks_done", f"{p}.last_failure_bucket"
        jjoin = ""
    return ("(SELECT json_array(s, CASE WHEN s IN ('indexed', 'deleted') OR b IS NULL THEN NULL ELSE s || '/' || b END) FROM (\n"
            f"      SELECT CASE WHEN {d}.repair_needed <> 0 THEN 'repair_needed'\n"
            f"        WHEN {d}.live_version = {d}.latest_version THEN CASE WHEN lv.is_delete = 1 THEN 'deleted' ELSE 'indexed' END\n"
            f"        ELSE {jobstate(js, step, done)} END AS s,\n"
            f"        {b} AS b\n"
            f"      FROM {doc_from}\n"
            f"        LEFT JOIN versions lv ON lv.doc_id = {d}.doc_id AND lv.version = {d}.live_version{jjoin}{doc_where}))")

def move(tenant, old, new):
    parts = []
    if old:
        parts += [f"json_array(json_extract({old}, '$[0]'), -1)", f"json_array(json_extract({old}, '$[1]'), -1)"] if False else [f"json_array({old}, -1)"]
    if new:
        parts += [f"json_array({new}, 1)"]
    deltas = "json_array(\n    " + ",\n    ".join(parts) + ")"
    return ("  UPDATE tenants SET document_counts = (\n"
            "    SELECT json_patch(tenants.document_counts, json_group_object(k, coalesce(json_extract(tenants.document_counts, '$.\"' || k || '\"'), 0) + d))\n"
            "    FROM (SELECT k.value AS k, sum(json_extract(m.value, '$[1]')) AS d\n"
            f"      FROM json_each({deltas}) m, json_each(json_extract(m.value, '$[0]')) k\n"
            "      WHERE k.value IS NOT NULL GROUP BY 1))\n"
            f"  WHERE tenant_id = {tenant};\n")

def doc_key(p):
    return key(p, "(SELECT 1) AS one", "", ('id', newest(f"{p}.doc_id", f"{p}.latest_version")))

def job_doc_key(jobsrc, docref):
    return key("d", "documents d", f"\n      WHERE d.doc_id = {docref}", jobsrc)

latest = lambda p: f"(SELECT latest_version FROM documents WHERE doc_id = {p}.doc_id)"
out = [HEADER]
# 1. a new document
out.append("-- A new document: counted in its state.\n"
           "CREATE TRIGGER documents_counted_new AFTER INSERT ON documents\nBEGIN\n"
           + move("NEW.tenant_id", None, doc_key("NEW")) + "END;\n\n")
# 2. its flag, live or latest version moved
out.append("-- Its repair flag, live or latest version changed: moved when its state did.\n"
           "CREATE TRIGGER documents_counted_moved AFTER UPDATE OF repair_needed, live_version, latest_version ON documents\n"
           f"WHEN {doc_key('OLD')}\n  IS NOT {doc_key('NEW')}\nBEGIN\n"
           + move("NEW.tenant_id", doc_key("OLD"), doc_key("NEW")) + "END;\n\n")
# 3. a new job that is its document's latest version's newest
before = ('id', newest("NEW.doc_id", "NEW.version", " AND n.job_id <> NEW.job_id"))
out.append("-- A new job, now the newest of its document's latest version: the document\n"
           "-- moves from what the job before it (if any) made it.\n"
           "CREATE TRIGGER jobs_counted_new AFTER INSERT ON jobs\n"
           f"WHEN NEW.version = {latest('NEW')}\n"
           f"  AND NEW.job_id = {newest('NEW.doc_id', 'NEW.version')}\n"
           f"  AND {job_doc_key(before, 'NEW.doc_id')}\n  IS NOT {job_doc_key(('row', 'NEW'), 'NEW.doc_id')}\nBEGIN\n"
           + move("NEW.tenant_id", job_doc_key(before, "NEW.doc_id"), job_doc_key(('row', 'NEW'), "NEW.doc_id")) + "END;\n\n")
# 4. the newest job of a latest version changed
out.append("-- The newest job of a document's latest version changed (its state, step,\n"
           "-- progress or failure bucket): moved when the document's state did.\n"
           "CREATE TRIGGER jobs_counted_moved AFTER UPDATE OF state, step, chunks_done, last_failure_bucket ON jobs\n"
           f"WHEN NEW.version = {latest('NEW')}\n"
           f"  AND NEW.job_id = {newest('NEW.doc_id', 'NEW.version')}\n"
           f"  AND {job_doc_key(('row', 'OLD'), 'NEW.doc_id')}\n  IS NOT {job_doc_key(('row', 'NEW'), 'NEW.doc_id')}\nBEGIN\n"
           + move("NEW.tenant_id", job_doc_key(('row', 'OLD'), "NEW.doc_id"), job_doc_key(('row', 'NEW'), "NEW.doc_id")) + "END;\n\n")
# 5. a pruned job that was the newest of a latest version
after = ('id', newest("OLD.doc_id", "OLD.version"))
out.append("-- A job pruned while the newest of its document's latest version: the\n"
           "-- document moves to what the job before it (if any) makes it.\n"
           "CREATE TRIGGER jobs_counted_pruned AFTER DELETE ON jobs\n"
           f"WHEN OLD.version = {latest('OLD')}\n"
           "  AND NOT EXISTS (SELECT 1 FROM jobs n WHERE n.doc_id = OLD.doc_id AND n.version = OLD.version\n"
           "    AND (n.created_at > OLD.created_at OR (n.created_at = OLD.created_at AND n.job_id < OLD.job_id)))\n"
           f"  AND {job_doc_key(('row', 'OLD'), 'OLD.doc_id')}\n  IS NOT {job_doc_key(after, 'OLD.doc_id')}\nBEGIN\n"
           + move("OLD.tenant_id", job_doc_key(('row', 'OLD'), "OLD.doc_id"), job_doc_key(after, "OLD.doc_id")) + "END;\n\n")
# backfill from a recount
out.append("-- The counts of the documents already written.\n"
           "UPDATE tenants SET document_counts = coalesce((\n"
           "  SELECT json_group_object(k, n) FROM (\n"
           "    SELECT k.value AS k, count(*) AS n\n"
           f"    FROM (SELECT {doc_key('dd')} AS pair FROM documents dd WHERE dd.tenant_id = tenants.tenant_id) s,\n"
           "      json_each(s.pair) k\n"
           "    WHERE k.value IS NOT NULL GROUP BY 1)), '{}');\n")
import os
open(os.path.join(os.path.dirname(__file__), '..', 'migrations', '0026_document_counts.sql'), 'w').write("".join(out))
