//! Moving a tenant between shards online (issue 37): its documents, text,
//! chunk rows, keyword entries, vectors and tokens copied (nothing embedded
//! again), a fenced switch, requests with a stale directory sent to the new
//! shard, the old shard cleaned; pause, resume, cancel and bad requests.

use crate::common::oracle;
use futures::executor::block_on;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::config::Config;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::native::cluster::Cluster;
use ingest_pipeline::native::SqliteDb;
use ingest_pipeline::pipeline::{DocumentSummary, Rerun};
use ingest_pipeline::ports::{Clock, VectorIndex};
use ingest_pipeline::store::sql;
use serde_json::{json, Value};

const ADMIN: &str = "t-admin";

fn cluster() -> Cluster {
    Cluster::with(Config {
        chunk_size_max_tokens: 160,
        chunk_overlap_tokens: 16,
        embedding_dimensions: 64,
        shards: 2,
        move_page_documents: 4,
        ..Config::default()
    })
}

/// A cluster whose scheduled run gives the moves about one page each.
fn slow_cluster() -> Cluster {
    Cluster::with(Config {
        cron_subrequests_max: 90,
        ..cluster().cfg
    })
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

/// A tenant pinned on `shard`, and a token of it with every scope.
fn tenant(c: &Cluster, name: &str, shard: u16) -> String {
    let body = json!({ "tenant_id": name, "shard": shard });
    let r = c.request("POST", "/v1/admin/tenants", ADMIN, Some(&body), 1);
    assert_eq!(r.status, 201, "{}", r.body);
    let body = json!({ "scopes": ["ingest", "search"] });
    let path = format!("/v1/admin/tenants/{name}/tokens");
    let entropy = name
        .bytes()
        .fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    let r = c.request("POST", &path, ADMIN, Some(&body), entropy);
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["token"].as_str().unwrap().to_string()
}

fn put(c: &Cluster, token: &str, doc: &str, text: &str) -> ApiResponse {
    let body = json!({ "text": text, "metadata": { "lang": "en" } });
    c.request(
        "PUT",
        &format!("/v1/documents/{doc}"),
        token,
        Some(&body),
        0,
    )
}

fn delete(c: &Cluster, token: &str, doc: &str) -> ApiResponse {
    c.request("DELETE", &format!("/v1/documents/{doc}"), token, None, 0)
}

/// Every hit of `q` in `mode`: (doc_id, version, text), in rank order.
fn search(c: &Cluster, token: &str, q: &str, mode: &str) -> Vec<(String, u64, String)> {
    let body = json!({ "query": q, "top_k": 20, "mode": mode });
    let r = c.request("POST", "/v1/search", token, Some(&body), 0);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["doc_id"].as_str().unwrap().to_string(),
                h["version"].as_u64().unwrap(),
                h["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn count(c: &Cluster, shard: usize, sql: &str) -> i64 {
    oracle::count(&c.shards[shard].db, sql)
}

/// Every row of `tenant` in shard `n`'s ledger, table by table, and its
/// vectors in shard `n`'s index.
fn held(c: &Cluster, n: usize, tenant: &str) -> Vec<(&'static str, i64)> {
    let mut out: Vec<(&'static str, i64)> = [
        ("documents", "documents"),
        ("versions", "versions"),
        ("version_parts", "version_parts"),
        ("jobs", "jobs"),
        ("chunks", "chunks"),
        ("cleanup_intents", "cleanup_intents"),
        ("dead_letters", "dead_letters"),
        ("tenant_tokens", "tenant_tokens"),
        ("tenants", "tenants"),
    ]
    .into_iter()
    .map(|(name, table)| {
        let sql = format!("SELECT count(*) AS n FROM {table} WHERE tenant_id = '{tenant}'");
        (name, count(c, n, &sql))
    })
    .collect();
    out.push(("vectors", in_namespace(c, n, tenant).len() as i64));
    out
}

/// The IDs of shard `n`'s vectors in `tenant`'s namespace.
fn in_namespace(c: &Cluster, n: usize, tenant: &str) -> Vec<String> {
    let mut ids: Vec<String> = c.shards[n]
        .index
        .namespaces()
        .into_iter()
        .filter(|(_, ns)| ns == tenant)
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    ids
}

/// Every counter a shard keeps is what a recount of its rows says: each
/// tenant's usage, keyword totals and document counts, each generation's
/// rows, the keyword index against the chunk rows.
fn assert_counters(c: &Cluster, n: usize) {
    let db: &SqliteDb = &c.shards[n].db;
    assert_eq!(
        oracle::tenant_usage_mismatches(db),
        Vec::<Value>::new(),
        "usage on {n}"
    );
    assert_eq!(
        oracle::keyword_totals_drift(db),
        Vec::<String>::new(),
        "keyword totals on {n}"
    );
    assert_eq!(
        oracle::generation_rows_drift(db),
        Vec::<i64>::new(),
        "generation rows on {n}"
    );
    assert_eq!(oracle::keyword_mismatches(db), 0, "keyword index on {n}");
    for tenant in oracle::tenant_ids(db) {
        let path = format!("/v1/admin/documents/summary?shard={n}&tenant_id={tenant}");
        let r = c.request("GET", &path, ADMIN, None, 0);
        assert_eq!(r.status, 200, "{}", r.body);
        let groups = oracle::document_state_groups(db, &tenant)
            .into_iter()
            .map(|g| serde_json::from_value(g).unwrap())
            .collect();
        let recount = DocumentSummary::from_groups(Some(tenant.clone()), groups);
        assert_eq!(
            r.body,
            serde_json::to_value(recount).unwrap(),
            "{tenant}'s counts on {n}"
        );
    }
}

fn start(c: &Cluster, tenant: &str, shard: u16) -> ApiResponse {
    let body = json!({ "shard": shard });
    let path = format!("/v1/admin/tenants/{tenant}/move");
    // Each start its own entropy (a move's ID comes from it).
    let entropy = u8::try_from(c.clock.now_ms() / 60_000 % 251).unwrap();
    c.request("POST", &path, ADMIN, Some(&body), entropy)
}

fn move_view(c: &Cluster, id: &str) -> Value {
    let r = c.request("GET", &format!("/v1/admin/moves/{id}"), ADMIN, None, 0);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// Cron runs until the move is fenced and caught up, its switch failing
/// (D1 refuses the switch's batch on shard 0: as a crash right before it).
fn run_to_fence(c: &Cluster, id: &str) -> Value {
    for _ in 0..50 {
        let m = move_view(c, id);
        if m["state"] == "catching_up" && m["copied"].as_u64() > Some(0) {
            return m;
        }
        c.shards[0].db.fail_sql.replace(Some((
            sql::MOVE_SWITCH_PLACEMENT,
            FailureBucket::DbUnavailable,
        )));
        c.clock.advance_ms(60_000);
        c.cron_with_moves();
        c.shards[0].db.fail_sql.replace(None);
    }
    panic!("the move was never fenced: {}", move_view(c, id));
}

/// Tenant `acme` on shard 0 with document `d0` indexed, then its move to
/// shard 1 run to the fence ([`run_to_fence`]): its token and the move's ID.
fn fenced_move(c: &Cluster) -> (String, String) {
    let token = tenant(c, "acme", 0);
    put(c, &token, "d0", &text(0, "first"));
    c.deliver_all();
    let r = start(c, "acme", 1);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    assert_eq!(run_to_fence(c, &id)["state"], "catching_up");
    (token, id)
}

/// Cron runs (a minute apart) until the move is in `state`.
fn run_until(c: &Cluster, id: &str, state: &str) -> Value {
    for _ in 0..200 {
        let m = move_view(c, id);
        if m["state"] == state {
            return m;
        }
        c.clock.advance_ms(60_000);
        let (_, moves) = c.cron_with_moves();
        assert!(moves.failures.is_empty(), "{moves:?}");
    }
    panic!("the move never reached {state}: {}", move_view(c, id));
}

fn text(i: usize, edit: &str) -> String {
    format!(
        "Document {i} about the harbour ledger {edit}.\n\n\
         Second paragraph {i}: 東京の港で帳簿を移す手順について。\n\n\
         Third paragraph {i} keeps the common words: shard tenant move."
    )
}

#[test]
fn a_tenant_moves_with_everything_it_holds_and_nothing_is_embedded_again() {
    let c = slow_cluster();
    let token = tenant(&c, "acme", 0);
    let other = tenant(&c, "other", 0);
    for i in 0..10 {
        assert_eq!(
            put(&c, &token, &format!("d{i}"), &text(i, "first")).status,
            202
        );
    }
    assert_eq!(put(&c, &other, "o1", &text(99, "other's")).status, 202);
    c.deliver_all();
    // An edit, a delete, and a second version of another.
    assert_eq!(put(&c, &token, "d1", &text(1, "quokka edited")).status, 202);
    assert_eq!(delete(&c, &token, "d2").status, 202);
    c.deliver_all();
    let r = start(&c, "acme", 1);
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    assert_eq!(r.body["state"], "copying");
    // While it copies, the tenant writes on shard 0 and is served there.
    c.clock.advance_ms(60_000);
    c.cron_with_moves();
    assert_eq!(
        put(&c, &token, "d3", &text(3, "zeppelin copying")).status,
        202
    );
    assert_eq!(
        put(&c, &token, "new", &text(42, "marmoset copying")).status,
        202
    );
    c.deliver_all();
    let queries = [
        "harbour ledger",
        "帳簿",
        "quokka edited",
        "zeppelin copying",
    ];
    let answers = |c: &Cluster| -> Vec<Vec<(String, u64, String)>> {
        queries
            .iter()
            .flat_map(|q| ["vector", "keyword", "hybrid"].map(|m| search(c, &token, q, m)))
            .collect()
    };
    let before = answers(&c);
    let m = run_until(&c, &id, "switched");
    assert_eq!(m["copied"], 11, "{m}");
    assert!(
        m["recopied"].as_u64().unwrap() >= 1,
        "d3 changed after its copy: {m}"
    );
    assert!(m["vectors"].as_u64().unwrap() > 0, "{m}");
    // Nothing was embedded again: the copy's vectors are the very values
    // of the shard left (both at generation 1: the same IDs).
    // (The rows it serves: a vector an earlier copy of an edited document
    // wrote waits in an intent for the drain.)
    let moved = oracle::live_vector_ids(&c.shards[1].db);
    assert_eq!(moved.len(), 10, "{moved:?}");
    let there = block_on(c.shards[1].index.get_by_ids(&moved)).unwrap();
    let here = block_on(c.shards[0].index.get_by_ids(&moved)).unwrap();
    assert_eq!(there.len(), moved.len());
    let values = |v: Vec<ingest_pipeline::ports::VectorRecord>| {
        let mut v: Vec<(String, Vec<f32>)> = v.into_iter().map(|r| (r.id, r.values)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(values(there), values(here));
    // The directory names shard 1; the tenant's answers are what they were.
    let r = c.request("GET", "/v1/admin/tenants/acme", ADMIN, None, 0);
    assert_eq!(r.body["shard"], 1, "{}", r.body);
    // The same hits: in the same order by vector (the same vectors); by
    // keyword the same set (the copy's statistics count only live rows, the
    // shard left also the rows of older versions its retention keeps).
    let after = answers(&c);
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if i % 3 == 0 {
            assert_eq!(a, b, "{}", queries[i / 3]);
        }
        let set = |h: &Vec<(String, u64, String)>| {
            let mut h = h.clone();
            h.sort();
            h
        };
        assert_eq!(set(a), set(b), "{} ({i})", queries[i / 3]);
    }
    let edited = search(&c, &token, "zeppelin copying", "keyword");
    assert_eq!(
        edited.first().map(|h| h.0.as_str()),
        Some("d3"),
        "{edited:?}"
    );
    // It writes on shard 1 now, and its jobs run there.
    assert_eq!(
        put(&c, &token, "after", &text(7, "narwhal switched")).status,
        202
    );
    c.deliver_all();
    let hits = search(&c, &token, "narwhal switched", "keyword");
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("after"));
    assert_eq!(
        count(
            &c,
            1,
            "SELECT count(*) AS n FROM documents WHERE tenant_id = 'acme' AND doc_id LIKE '%after'"
        ),
        1
    );
    // Its counters on shard 1 match a recount, the other tenant is untouched.
    assert_counters(&c, 1);
    assert_eq!(search(&c, &other, "harbour", "keyword").len(), 1);

    // The old shard keeps its rows until every cache and lease expired.
    assert!(held(&c, 0, "acme").iter().any(|(_, n)| *n > 0));
    let m = run_until(&c, &id, "completed");
    assert_eq!(m["removed"], 11, "every document it held there: {m}");
    assert!(
        held(&c, 0, "acme").iter().all(|(_, n)| *n == 0),
        "{:?}",
        held(&c, 0, "acme")
    );
    assert!(held(&c, 0, "other")
        .iter()
        .any(|(t, n)| *t == "documents" && *n == 1));
    assert_counters(&c, 0);
    let hits = search(&c, &token, "harbour ledger", "hybrid");
    assert!(!hits.is_empty());
}

#[test]
fn writes_in_the_fence_are_refused_with_retry_after_and_land_after_the_switch() {
    let c = cluster();
    let token = tenant(&c, "acme", 0);
    for i in 0..6 {
        put(&c, &token, &format!("d{i}"), &text(i, "first"));
    }
    c.deliver_all();
    let r = start(&c, "acme", 1);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    // Fenced: a write is refused, changes nothing; reads are served.
    let m = run_to_fence(&c, &id);
    assert_eq!(m["state"], "catching_up");
    let r = put(&c, &token, "d0", &text(0, "axolotl fenced"));
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
    assert_eq!(r.retry_after, Some(2));
    let r = delete(&c, &token, "d1");
    assert_eq!(r.status, 503);
    assert_eq!(search(&c, &token, "harbour ledger", "keyword").len(), 6);
    let r = c.request("POST", "/v1/admin/tenants/acme/disable", ADMIN, None, 0);
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
    let r = c.request(
        "POST",
        "/v1/syncs",
        &token,
        Some(&json!({ "source": "s" })),
        3,
    );
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
    // After the switch the same write is accepted (on shard 1).
    run_until(&c, &id, "switched");
    assert_eq!(
        put(&c, &token, "d0", &text(0, "axolotl fenced")).status,
        202
    );
    c.deliver_all();
    let hits = search(&c, &token, "axolotl fenced", "keyword");
    assert_eq!(hits.first().map(|h| (h.0.as_str(), h.1)), Some(("d0", 2)));
    let r = c.request("POST", "/v1/admin/tenants/acme/disable", ADMIN, None, 0);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A re-run (a reindex of one document, a backfill's page, a redrive, a
/// repair) writes a version like intake does, so the fence refuses it
/// too: before the guard, a re-run in the fence wrote a version on the old
/// shard that the switch left behind.
#[test]
fn reruns_in_the_fence_are_refused_and_change_nothing() {
    let c = cluster();
    let (token, id) = fenced_move(&c);
    let versions = "SELECT count(*) AS n FROM versions WHERE doc_id LIKE '%d0'";
    let r = c.request("POST", "/v1/documents/d0/reindex", &token, None, 0);
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
    let fleet = c.fleet();
    let rerun = block_on(fleet.all()[0].rerun_live_version("acme\u{1f}d0", 1)).unwrap();
    assert_eq!(rerun, Rerun::TenantMoving);
    assert_eq!(count(&c, 0, versions), 1, "nothing written in the fence");
    // After the switch the old shard still refuses; the new one re-runs.
    run_until(&c, &id, "switched");
    let rerun = block_on(fleet.all()[0].rerun_live_version("acme\u{1f}d0", 1)).unwrap();
    assert_eq!(rerun, Rerun::TenantMoving);
    assert_eq!(count(&c, 0, versions), 1);
    let r = c.request("POST", "/v1/documents/d0/reindex", &token, None, 0);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(count(&c, 1, versions), 2);
}

/// Cron does not send again the stalled jobs of a tenant that takes no
/// work on a shard now (fenced on the old one, moving in on the new): their
/// consumers would only acknowledge them unrun. It touches them instead,
/// so the stalled page moves on to other tenants' jobs; the new shard sends
/// its copies at the switch.
#[test]
fn stalled_jobs_of_a_moving_tenant_are_touched_not_sent() {
    let c = cluster();
    let token = tenant(&c, "acme", 0);
    put(&c, &token, "d0", &text(0, "first"));
    c.deliver_all();
    put(&c, &token, "d0", &text(0, "second"));
    let r = start(&c, "acme", 1);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    assert_eq!(run_to_fence(&c, &id)["state"], "catching_up");
    c.queue.take_all();
    let stall = i64::from(
        Config::default()
            .job_stall_seconds
            .max(Config::default().job_lease_seconds),
    );
    c.clock.advance_ms(stall * 1000 + 1);
    let queued = "SELECT count(*) AS n FROM jobs WHERE doc_id LIKE '%d0' AND state = 'queued'";
    assert_eq!(count(&c, 0, queued), 1, "the edit's job waits on shard 0");
    let fleet = c.fleet();
    for shard in 0..2 {
        let report = block_on(fleet.all()[shard].repair());
        assert_eq!(report.jobs_requeued, 0, "shard {shard}: {report:?}");
    }
    assert!(c.queue.take_all().is_empty(), "nothing sent");
    let touched = format!(
        "SELECT count(*) AS n FROM jobs WHERE doc_id LIKE '%d0' AND state = 'queued' AND updated_at = {}",
        c.clock.now_ms()
    );
    assert_eq!(count(&c, 0, &touched), 1, "touched on shard 0");
    // The switch sends the job the copy carried; it runs on shard 1.
    run_until(&c, &id, "switched");
    let outcomes = c.deliver_all();
    assert!(
        outcomes.iter().any(|(shard, _)| *shard == 1),
        "{outcomes:?}"
    );
    assert_eq!(search(&c, &token, "second", "keyword").len(), 1);
}

#[test]
fn a_request_with_a_stale_directory_cache_is_served_by_the_new_shard() {
    let c = cluster();
    let (token, id) = fenced_move(&c);
    // The isolate's cache learns shard 0 now, and keeps it a minute.
    assert_eq!(search(&c, &token, "harbour", "keyword").len(), 1);
    c.cron_with_moves();
    assert_eq!(move_view(&c, &id)["state"], "switched");
    // The cache still says shard 0: shard 0 sends the request back to the
    // directory, which names shard 1; a write lands there.
    let r = put(&c, &token, "d9", &text(9, "pangolin lookup"));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        count(
            &c,
            1,
            "SELECT count(*) AS n FROM documents WHERE doc_id LIKE '%d9'"
        ),
        1
    );
    assert_eq!(
        count(
            &c,
            0,
            "SELECT count(*) AS n FROM documents WHERE doc_id LIKE '%d9'"
        ),
        0
    );
    c.deliver_all();
    assert_eq!(search(&c, &token, "pangolin lookup", "keyword").len(), 1);
}

#[test]
fn a_cancelled_move_leaves_the_tenant_where_it_was_and_nothing_on_the_other_shard() {
    let c = cluster();
    let token = tenant(&c, "acme", 0);
    for i in 0..9 {
        put(&c, &token, &format!("d{i}"), &text(i, "first"));
    }
    c.deliver_all();
    let r = start(&c, "acme", 1);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    run_to_fence(&c, &id);
    assert!(held(&c, 1, "acme")
        .iter()
        .any(|(t, n)| *t == "vectors" && *n > 0));
    let r = c.request(
        "POST",
        &format!("/v1/admin/moves/{id}/cancel"),
        ADMIN,
        None,
        0,
    );
    assert_eq!(
        (r.status, r.body["state"].clone()),
        (200, json!("cancelling")),
        "{}",
        r.body
    );
    run_until(&c, &id, "cancelled");
    assert!(
        held(&c, 1, "acme").iter().all(|(_, n)| *n == 0),
        "{:?}",
        held(&c, 1, "acme")
    );
    assert_counters(&c, 1);
    // Unfenced, still on shard 0.
    let r = put(&c, &token, "d0", &text(0, "wombat cancelled"));
    assert_eq!(r.status, 202, "{} {:?}", r.body, held(&c, 0, "acme"));
    c.deliver_all();
    assert_eq!(search(&c, &token, "wombat cancelled", "keyword").len(), 1);
    let r = c.request("GET", "/v1/admin/tenants/acme", ADMIN, None, 0);
    assert_eq!(r.body["shard"], 0);
    // A cancelled move cannot be cancelled again; a new one may start.
    let r = c.request(
        "POST",
        &format!("/v1/admin/moves/{id}/cancel"),
        ADMIN,
        None,
        0,
    );
    assert_eq!((r.status, code(&r)), (409, "move_state"));
    assert_eq!(start(&c, "acme", 1).status, 202);
}

#[test]
fn a_paused_move_copies_nothing_until_resumed() {
    let c = cluster();
    let token = tenant(&c, "acme", 0);
    for i in 0..12 {
        put(&c, &token, &format!("d{i}"), &text(i, "first"));
    }
    c.deliver_all();
    let r = start(&c, "acme", 1);
    let id = r.body["move_id"].as_str().unwrap().to_string();
    let r = c.request(
        "POST",
        &format!("/v1/admin/moves/{id}/pause"),
        ADMIN,
        None,
        0,
    );
    assert_eq!(r.body["state"], "paused", "{}", r.body);
    for _ in 0..3 {
        c.clock.advance_ms(60_000);
        c.cron_with_moves();
    }
    assert_eq!(move_view(&c, &id)["copied"], 0);
    // Paused, the tenant writes as usual.
    assert_eq!(put(&c, &token, "d0", &text(0, "okapi paused")).status, 202);
    let r = c.request(
        "POST",
        &format!("/v1/admin/moves/{id}/resume"),
        ADMIN,
        None,
        0,
    );
    assert_eq!(r.body["state"], "copying", "{}", r.body);
    c.deliver_all();
    run_until(&c, &id, "completed");
    assert_eq!(search(&c, &token, "okapi paused", "keyword").len(), 1);
}

#[test]
fn a_bad_move_is_refused_and_changes_nothing() {
    let c = cluster();
    tenant(&c, "acme", 0);
    let r = start(&c, "acme", 0);
    assert_eq!((r.status, code(&r)), (422, "invalid_field"), "{}", r.body);
    let r = start(&c, "acme", 2);
    assert_eq!((r.status, code(&r)), (422, "invalid_field"), "{}", r.body);
    let r = start(&c, "nobody", 1);
    assert_eq!(
        (r.status, code(&r)),
        (404, "tenant_not_found"),
        "{}",
        r.body
    );
    let path = "/v1/admin/tenants/acme/move";
    for body in [
        json!({}),
        json!({ "shard": "1" }),
        json!({ "shard": 1, "x": 1 }),
    ] {
        let r = c.request("POST", path, ADMIN, Some(&body), 0);
        assert_eq!(r.status, 422, "{body}: {}", r.body);
    }
    // A shard dedicated to another tenant takes no move.
    let body = json!({ "tenant_id": "solo", "shard": 1, "dedicated": true });
    assert_eq!(
        c.request("POST", "/v1/admin/tenants", ADMIN, Some(&body), 2)
            .status,
        201
    );
    let r = start(&c, "acme", 1);
    assert_eq!((r.status, code(&r)), (409, "shard_dedicated"), "{}", r.body);
    let r = c.request("GET", "/v1/admin/moves/nope", ADMIN, None, 0);
    assert_eq!((r.status, code(&r)), (404, "move_not_found"));
    let r = c.request("GET", "/v1/admin/moves", ADMIN, None, 0);
    assert_eq!(r.body["moves"], json!([]), "{}", r.body);
    // One move at a time.
    let c = cluster();
    tenant(&c, "acme", 0);
    assert_eq!(start(&c, "acme", 1).status, 202);
    let r = start(&c, "acme", 1);
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
    // A tenant's token is not enough.
    let r = c.request("GET", "/v1/admin/moves", "t-ingest", None, 0);
    assert_eq!(r.status, 403);
    // A backfill of the moving tenant is refused while it moves.
    let body = json!({ "scope": "all", "tenant_id": "acme" });
    let r = c.request("POST", "/v1/admin/reindex", ADMIN, Some(&body), 0);
    assert_eq!((r.status, code(&r)), (503, "tenant_moving"), "{}", r.body);
}

/// A backfill pages one shard's documents: a move while one is open on
/// either shard would leave the tenant's documents out of it (refused in
/// the fence, gone after the switch, or arriving behind its cursor).
#[test]
fn a_move_waits_for_the_backfills_of_both_shards() {
    let c = cluster();
    for (name, shard) in [("acme", 0), ("beta", 1)] {
        let token = tenant(&c, name, shard);
        for i in 0..3 {
            put(&c, &token, &format!("d{i}"), &text(i, "first"));
        }
    }
    c.deliver_all();
    for shard in [0, 1] {
        let body = json!({ "scope": "all", "page_size": 1 });
        let path = format!("/v1/admin/reindex?shard={shard}");
        let r = c.request("POST", &path, ADMIN, Some(&body), 0);
        assert_eq!(r.body["backfill"]["state"], "running", "{}", r.body);
        let id = r.body["backfill"]["backfill_id"]
            .as_str()
            .unwrap()
            .to_string();
        let m = start(&c, "acme", 1);
        assert_eq!((m.status, code(&m)), (409, "backfill_active"), "{}", m.body);
        let cancel = format!("/v1/admin/reindex/{id}/cancel?shard={shard}");
        let r = c.request("POST", &cancel, ADMIN, None, 0);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(start(&c, "acme", 1).status, 202);
}

#[test]
fn a_move_between_shards_of_different_index_configurations_is_refused() {
    let c = cluster();
    let token = tenant(&c, "acme", 0);
    // Shard 0's first staging records the configuration it runs with.
    assert_eq!(put(&c, &token, "d0", &text(0, "first")).status, 202);
    c.deliver_all();
    let refused = |c: &Cluster| {
        let r = start(c, "acme", 1);
        assert_eq!(
            (r.status, code(&r)),
            (409, "move_config_mismatch"),
            "{}",
            r.body
        );
        // Nothing changed: no move, no mark, the tenant writes on shard 0.
        let r = c.request("GET", "/v1/admin/moves", ADMIN, None, 0);
        assert_eq!(r.body["moves"], json!([]), "{}", r.body);
        let r = c.request("GET", "/v1/admin/tenants/acme", ADMIN, None, 0);
        assert_eq!(r.body["shard"], 0, "{}", r.body);
        assert!(r.body.get("moving").is_none(), "{}", r.body);
        assert!(held(c, 1, "acme").iter().all(|(_, n)| *n == 0));
    };
    // Shard 1 serves another configuration.
    c.shards[1]
        .db
        .inspect_batch("UPDATE generations SET index_config = 'other' WHERE state = 'active'");
    refused(&c);
    assert_eq!(put(&c, &token, "d1", &text(1, "first")).status, 202);
    // Shard 1 serves none yet (its first staging will take this one), but
    // it builds a generation.
    c.shards[1].db.inspect_batch(
        "UPDATE generations SET index_config = '' WHERE state = 'active';
         INSERT INTO generations (generation, index_config, state, created_at, updated_at)
         VALUES (2, 'other', 'building', 0, 0);",
    );
    refused(&c);
    // The same configuration, nothing built: the move starts.
    c.shards[1]
        .db
        .inspect_batch("DELETE FROM generations WHERE state = 'building'");
    let r = start(&c, "acme", 1);
    assert_eq!(r.status, 202, "{}", r.body);
}
