//! A tenant's listings through the API: `GET /v1/documents` (paging with a
//! cursor, the `state`, `source` and `updated_since` filters) and `GET
//! /v1/syncs` (newest first, the `source` and `state` filters), each item
//! the view its single route answers; another tenant's never listed (two
//! tenants sharing a doc_id); bad parameters a `422` that changes nothing;
//! and the `Allow` header of every `405`, checked against the routes.

use crate::common::World;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::config::Config;
use ingest_pipeline::ports::Clock;
use serde_json::{json, Value};

const ADMIN: &str = "Bearer t-admin";
const INGEST: &str = "Bearer t-ingest";

fn call(w: &World, auth: &str, method: &str, path: &str, body: Option<Value>) -> ApiResponse {
    w.request_json(method, path, auth, body.as_ref())
}

fn get(w: &World, auth: &str, path: &str) -> Value {
    let r = call(w, auth, "GET", path, None);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.body
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

/// Writes `doc` as `auth`'s tenant (into `source`, if given).
fn put(w: &World, auth: &str, doc: &str, text: &str, source: Option<&str>) {
    let mut body = json!({ "text": text });
    if let Some(s) = source {
        body["source"] = json!(s);
    }
    let path = format!("/v1/documents/{doc}");
    let r = call(w, auth, "PUT", &path, Some(body));
    assert!(r.status == 202 || r.status == 200, "{}", r.body);
}

/// The doc_ids of a page.
fn ids(page: &Value) -> Vec<&str> {
    page["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["doc_id"].as_str().unwrap())
        .collect()
}

/// Every doc_id of a listing at `path` (which has a query string), page by
/// page with `limit`, and how many pages it took.
fn walk(w: &World, auth: &str, path: &str, limit: usize) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for pages in 1..100 {
        let mut url = format!("{path}&limit={limit}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={}", encode(c)));
        }
        let page = get(w, auth, &url);
        assert!(ids(&page).len() <= limit);
        out.extend(ids(&page).into_iter().map(String::from));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (out, pages),
        }
    }
    panic!("{path}: the cursor never ended");
}

/// `s` percent-encoded for a query string (every byte but unreserved ones).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Creates `tenant` and an ingest token of it; its bearer.
fn onboard(w: &World, tenant: &str, scopes: &[&str]) -> String {
    let r = call(
        w,
        ADMIN,
        "POST",
        "/v1/admin/tenants",
        Some(json!({ "tenant_id": tenant })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = call(
        w,
        ADMIN,
        "POST",
        &format!("/v1/admin/tenants/{tenant}/tokens"),
        Some(json!({ "scopes": scopes })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    format!("Bearer {}", r.body["token"].as_str().unwrap())
}

#[test]
fn listings_page_the_documents_in_doc_id_order_with_a_cursor_each_as_its_own_view() {
    let w = World::new();
    // Byte order: "a b/ü" sorts before "a-1"; a cursor with `/`, a space
    // and non-ASCII travels percent-encoded.
    let docs = ["d-3", "a b/ü", "d-1", "a-1", "d-2"];
    for d in docs {
        put(&w, INGEST, &encode(d), &format!("text of {d}"), None);
    }
    w.deliver_all();
    let mut sorted: Vec<String> = docs.iter().map(|d| d.to_string()).collect();
    sorted.sort();
    assert_eq!(walk(&w, INGEST, "/v1/documents?", 2), (sorted.clone(), 3));
    assert_eq!(
        walk(&w, INGEST, "/v1/documents?", 5).1,
        2,
        "a full last page"
    );
    assert_eq!(walk(&w, INGEST, "/v1/documents?", 100), (sorted.clone(), 1));

    // Each item is exactly what GET /v1/documents/{id} answers.
    let page = get(&w, INGEST, "/v1/documents");
    assert_eq!(page["next_cursor"], Value::Null);
    for d in page["documents"].as_array().unwrap() {
        let id = d["doc_id"].as_str().unwrap();
        let one = get(&w, INGEST, &format!("/v1/documents/{}", encode(id)));
        assert_eq!(d, &one);
        assert_eq!(d["state"], "indexed");
        assert!(d.get("tenant_id").is_none(), "the tenant's own view");
    }
    let first = get(&w, INGEST, "/v1/documents?limit=2");
    assert_eq!(ids(&first), ["a b/ü", "a-1"]);
    assert_eq!(first["next_cursor"], "a-1");
}

#[test]
fn listings_limit_defaults_to_the_configured_page_and_refuses_past_its_max() {
    let w = World::with(Config {
        listing_page_default: 2,
        listing_page_max: 3,
        ..Config::default()
    });
    for d in ["a", "b", "c", "d"] {
        put(&w, INGEST, d, "some text", None);
    }
    let page = get(&w, INGEST, "/v1/documents");
    assert_eq!(
        (ids(&page), &page["next_cursor"]),
        (vec!["a", "b"], &json!("b"))
    );
    assert_eq!(ids(&get(&w, INGEST, "/v1/documents?limit=3")).len(), 3);
    let r = call(&w, INGEST, "GET", "/v1/documents?limit=4", None);
    assert_eq!((r.status, code(&r)), (422, "invalid_field"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("1..=3"));
}

#[test]
fn listings_state_filter_shows_those_of_each_scanned_page_and_the_cursor_goes_on() {
    let w = World::new();
    for d in ["a", "b", "c"] {
        put(&w, INGEST, d, &format!("text of {d}"), None);
    }
    w.deliver_all();
    let r = call(&w, INGEST, "DELETE", "/v1/documents/b", None);
    assert_eq!(r.status, 202, "{}", r.body);
    w.deliver_all();
    put(&w, INGEST, "d", "queued text", None);
    put(&w, INGEST, "a", "a new version, queued", None);

    let page = get(&w, INGEST, "/v1/documents?state=queued");
    assert_eq!(ids(&page), ["a", "d"]);
    assert!(page["documents"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["state"] == "queued"));
    assert_eq!(ids(&get(&w, INGEST, "/v1/documents?state=indexed")), ["c"]);
    assert_eq!(ids(&get(&w, INGEST, "/v1/documents?state=deleted")), ["b"]);
    assert!(ids(&get(&w, INGEST, "/v1/documents?state=failed")).is_empty());
    // A page scans `limit` documents: the second one (b, c) holds none
    // queued, and its cursor leads on to d.
    let p2 = get(&w, INGEST, "/v1/documents?state=queued&limit=2&cursor=a");
    assert_eq!((ids(&p2).len(), &p2["next_cursor"]), (0, &json!("c")));
    let (all, pages) = walk(&w, INGEST, "/v1/documents?state=queued", 2);
    assert_eq!((all, pages), (vec!["a".to_string(), "d".to_string()], 3));
}

#[test]
fn listings_source_filter_shows_the_documents_of_that_source() {
    let w = World::new();
    put(&w, INGEST, "h-1", "handbook one", Some("handbook"));
    put(&w, INGEST, "h-2", "handbook two", Some("handbook"));
    put(&w, INGEST, "w-1", "wiki one", Some("wiki"));
    put(&w, INGEST, "plain", "no source", None);
    // A document belongs to the last source it was written into.
    put(
        &w,
        INGEST,
        "moved",
        "first in the handbook",
        Some("handbook"),
    );
    put(&w, INGEST, "moved", "then in the wiki", Some("wiki"));
    // A session's writes join its source too.
    let r = call(
        &w,
        INGEST,
        "POST",
        "/v1/syncs",
        Some(json!({ "source": "handbook" })),
    );
    let sid = r.body["sync_id"].as_str().unwrap().to_string();
    let r = call(
        &w,
        INGEST,
        "PUT",
        "/v1/documents/h-3",
        Some(json!({ "text": "synced", "source": "handbook", "sync_id": sid })),
    );
    assert_eq!(r.status, 202, "{}", r.body);

    let of = |s: &str| walk(&w, INGEST, &format!("/v1/documents?source={s}"), 2).0;
    assert_eq!(of("handbook"), ["h-1", "h-2", "h-3"]);
    assert_eq!(of("wiki"), ["moved", "w-1"]);
    assert!(of("nothing").is_empty());
    // Combined with a state: of the handbook, those indexed.
    w.deliver_all();
    put(&w, INGEST, "h-2", "handbook two, edited", Some("handbook"));
    let page = get(&w, INGEST, "/v1/documents?source=handbook&state=queued");
    assert_eq!(ids(&page), ["h-2"]);
    let page = get(&w, INGEST, "/v1/documents?source=handbook&state=indexed");
    assert_eq!(ids(&page), ["h-1", "h-3"]);
    // A source's name is percent-encoded like any value.
    put(&w, INGEST, "s-1", "spaced", Some("my docs/ä"));
    assert_eq!(of(&encode("my docs/ä")), ["s-1"]);
}

#[test]
fn listings_updated_since_shows_documents_changed_at_or_after_it() {
    let w = World::new();
    put(&w, INGEST, "old", "written first", None);
    put(&w, INGEST, "edited", "written first too", None);
    w.clock.advance_ms(60_000);
    let since = w.clock.now_ms();
    put(&w, INGEST, "new", "written later", None);
    put(&w, INGEST, "edited", "edited later", None);
    w.clock.advance_ms(60_000);

    let at = |t: i64| {
        ids(&get(
            &w,
            INGEST,
            &format!("/v1/documents?updated_since={t}"),
        ))
        .join(",")
    };
    assert_eq!(at(since), "edited,new", "at the very millisecond included");
    assert_eq!(at(since + 1), "");
    assert_eq!(at(0), "edited,new,old");
    // With a page size that scans the old one alone.
    let p = get(
        &w,
        INGEST,
        &format!("/v1/documents?updated_since={since}&limit=1&cursor=new"),
    );
    assert_eq!((ids(&p).len(), &p["next_cursor"]), (0, &json!("old")));
    // Unchanged content changes nothing, not even `updated_at`.
    put(&w, INGEST, "old", "written first", None);
    assert_eq!(at(since), "edited,new");
}

#[test]
fn listings_never_show_another_tenants_documents_even_of_the_same_doc_id() {
    let w = World::new();
    let acme = onboard(&w, "acme", &["ingest", "search"]);
    put(
        &w,
        INGEST,
        "shared",
        "the default tenant's text",
        Some("docs"),
    );
    put(
        &w,
        INGEST,
        "only-default",
        "the default tenant's alone",
        None,
    );
    put(
        &w,
        &acme,
        "shared",
        "acme's text, another document",
        Some("docs"),
    );
    put(
        &w,
        &acme,
        "shared",
        "acme's text, version two",
        Some("docs"),
    );
    put(&w, &acme, "only-acme", "acme's alone", None);
    w.deliver_all();

    let mine = get(&w, &acme, "/v1/documents");
    assert_eq!(ids(&mine), ["only-acme", "shared"]);
    assert_eq!(
        mine["documents"][1]["latest_version"], 2,
        "acme's own shared"
    );
    assert_eq!(mine["documents"][1], get(&w, &acme, "/v1/documents/shared"));
    let theirs = get(&w, INGEST, "/v1/documents");
    assert_eq!(ids(&theirs), ["only-default", "shared"]);
    assert_eq!(theirs["documents"][1]["latest_version"], 1);
    // The same source name and the same cursor stay within the tenant.
    assert_eq!(
        ids(&get(&w, &acme, "/v1/documents?source=docs")),
        ["shared"]
    );
    assert_eq!(
        get(&w, &acme, "/v1/documents?source=docs")["documents"][0]["latest_version"],
        2
    );
    assert!(ids(&get(&w, &acme, "/v1/documents?cursor=shared")).is_empty());
    assert!(ids(&get(&w, INGEST, "/v1/documents?cursor=shared")).is_empty());
    // The operator's listing, for comparison, holds all four.
    let all = get(&w, ADMIN, "/v1/admin/documents");
    assert_eq!(all["documents"].as_array().unwrap().len(), 4);
}

#[test]
fn listings_need_the_ingest_scope() {
    let w = World::new();
    onboard(&w, "acme", &["ingest"]);
    // A token without the ingest scope lists nothing.
    let searcher = {
        let r = call(
            &w,
            ADMIN,
            "POST",
            "/v1/admin/tenants/acme/tokens",
            Some(json!({ "scopes": ["search"] })),
        );
        format!("Bearer {}", r.body["token"].as_str().unwrap())
    };
    for path in ["/v1/documents", "/v1/syncs"] {
        let r = call(&w, &searcher, "GET", path, None);
        assert_eq!((r.status, code(&r)), (403, "forbidden"), "{path}");
    }
}

#[test]
fn listings_refuse_bad_parameters_with_422_and_change_nothing() {
    let w = World::new();
    put(&w, INGEST, "a", "some text", None);
    let before = w.db.dump(&["rate_minute", "rate_requests"]);
    for path in [
        "/v1/documents?state=done",
        "/v1/documents?state=",
        "/v1/documents?limit=0",
        "/v1/documents?limit=101",
        "/v1/documents?limit=ten",
        "/v1/documents?updated_since=yesterday",
        "/v1/documents?updated_since=1.5",
        "/v1/documents?cursor=",
        "/v1/documents?cursor=..",
        "/v1/documents?cursor=%01",
        "/v1/documents?source=",
        &format!("/v1/documents?source={}", "s".repeat(129)),
        "/v1/syncs?state=closed",
        "/v1/syncs?limit=0",
        "/v1/syncs?limit=101",
        "/v1/syncs?cursor=",
        "/v1/syncs?cursor=abc",
        "/v1/syncs?cursor=0",
        "/v1/syncs?cursor=-1",
        "/v1/syncs?cursor=%2B5",
        "/v1/syncs?cursor=9007199254740992",
        "/v1/syncs?source=",
    ] {
        let r = call(&w, INGEST, "GET", path, None);
        assert_eq!(
            (r.status, code(&r)),
            (422, "invalid_field"),
            "{path}: {}",
            r.body
        );
    }
    // A query string that is not valid percent-encoding.
    let r = call(&w, INGEST, "GET", "/v1/documents?cursor=%FF", None);
    assert_eq!((r.status, code(&r)), (400, "invalid_path"));
    assert_eq!(w.db.dump(&["rate_minute", "rate_requests"]), before);
    // Unknown parameters are ignored, as the other listings do.
    assert_eq!(ids(&get(&w, INGEST, "/v1/documents?sort=desc&x")), ["a"]);
    assert!(get(&w, INGEST, "/v1/syncs?sort=desc")["syncs"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// The sync_ids of a page of sessions.
fn sync_ids(page: &Value) -> Vec<String> {
    page["syncs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sync_id"].as_str().unwrap().to_string())
        .collect()
}

/// Sync IDs as `sync_ids` gives them.
fn v(ids: &[&String]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn open(w: &World, auth: &str, source: &str) -> String {
    let r = call(
        w,
        auth,
        "POST",
        "/v1/syncs",
        Some(json!({ "source": source })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["sync_id"].as_str().unwrap().to_string()
}

#[test]
fn listings_page_the_sync_sessions_newest_first_each_as_its_own_view() {
    let w = World::new();
    let a1 = open(&w, INGEST, "alpha");
    let b1 = open(&w, INGEST, "beta");
    let a2 = open(&w, INGEST, "alpha");
    let b2 = open(&w, INGEST, "beta");
    let a3 = open(&w, INGEST, "alpha");
    let r = call(
        &w,
        INGEST,
        "PUT",
        "/v1/documents/x",
        Some(json!({ "text": "seen", "source": "alpha", "sync_id": a3 })),
    );
    assert_eq!(r.status, 202, "{}", r.body);

    let page = get(&w, INGEST, "/v1/syncs");
    assert_eq!(sync_ids(&page), v(&[&a3, &b2, &a2, &b1, &a1]));
    assert_eq!(page["next_cursor"], Value::Null);
    for s in page["syncs"].as_array().unwrap() {
        let one = get(
            &w,
            INGEST,
            &format!("/v1/syncs/{}", s["sync_id"].as_str().unwrap()),
        );
        assert_eq!(s, &one);
    }
    assert_eq!(
        page["syncs"][0]["seen"], 1,
        "an open session's count so far"
    );

    // Pages of two, with the cursor.
    let p1 = get(&w, INGEST, "/v1/syncs?limit=2");
    assert_eq!(sync_ids(&p1), v(&[&a3, &b2]));
    let c = p1["next_cursor"].as_str().unwrap().to_string();
    let p2 = get(&w, INGEST, &format!("/v1/syncs?limit=2&cursor={c}"));
    assert_eq!(sync_ids(&p2), v(&[&a2, &b1]));
    let c = p2["next_cursor"].as_str().unwrap().to_string();
    let p3 = get(&w, INGEST, &format!("/v1/syncs?limit=2&cursor={c}"));
    assert_eq!(
        (sync_ids(&p3), &p3["next_cursor"]),
        (vec![a1.clone()], &Value::Null)
    );

    // Of one source.
    let alpha = get(&w, INGEST, "/v1/syncs?source=alpha&limit=2");
    assert_eq!(sync_ids(&alpha), v(&[&a3, &a2]));
    let c = alpha["next_cursor"].as_str().unwrap().to_string();
    let rest = get(
        &w,
        INGEST,
        &format!("/v1/syncs?source=alpha&limit=2&cursor={c}"),
    );
    assert_eq!(sync_ids(&rest), v(&[&a1]));
    assert!(sync_ids(&get(&w, INGEST, "/v1/syncs?source=gamma")).is_empty());
}

#[test]
fn listings_sync_state_filter_is_the_state_the_view_shows() {
    let w = World::new();
    let old = open(&w, INGEST, "alpha");
    let done = open(&w, INGEST, "beta");
    let r = call(
        &w,
        INGEST,
        "PUT",
        "/v1/documents/x",
        Some(json!({ "text": "kept", "source": "beta", "sync_id": done })),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let r = call(
        &w,
        INGEST,
        "POST",
        &format!("/v1/syncs/{done}/commit"),
        None,
    );
    assert_eq!((r.status, &r.body["state"]), (202, &json!("committed")));
    // Past the session time, `old` shows expired before the cron records it.
    w.clock
        .advance_ms(w.cfg.sync_session_ttl_seconds as i64 * 1000 + 1);
    let fresh = open(&w, INGEST, "alpha");

    let of = |s: &str| sync_ids(&get(&w, INGEST, &format!("/v1/syncs?state={s}")));
    assert_eq!(of("expired"), v(&[&old]));
    assert_eq!(of("committed"), v(&[&done]));
    assert_eq!(of("open"), v(&[&fresh]));
    assert!(of("superseded").is_empty());
    assert_eq!(
        sync_ids(&get(&w, INGEST, "/v1/syncs?state=open&source=beta")),
        Vec::<String>::new()
    );
    // A page scans `limit` sessions: the newest (open) one is no expired one.
    let p = get(&w, INGEST, "/v1/syncs?state=expired&limit=1");
    assert!(sync_ids(&p).is_empty());
    let c = p["next_cursor"].as_str().unwrap().to_string();
    let p = get(
        &w,
        INGEST,
        &format!("/v1/syncs?state=expired&limit=2&cursor={c}"),
    );
    assert_eq!(sync_ids(&p), v(&[&old]));
    w.cron();
    assert_eq!(of("expired"), v(&[&old]), "the same once recorded");
}

#[test]
fn listings_never_show_another_tenants_sync_sessions() {
    let w = World::new();
    let acme = onboard(&w, "acme", &["ingest"]);
    let mine = open(&w, INGEST, "docs");
    let theirs = open(&w, &acme, "docs");
    assert_eq!(sync_ids(&get(&w, INGEST, "/v1/syncs")), v(&[&mine]));
    assert_eq!(sync_ids(&get(&w, &acme, "/v1/syncs")), v(&[&theirs]));
    assert_eq!(
        sync_ids(&get(&w, &acme, "/v1/syncs?source=docs")),
        v(&[&theirs])
    );
    // A cursor past the other tenant's session still shows only its own.
    let c = get(&w, &acme, "/v1/syncs?limit=1")["next_cursor"].clone();
    assert_eq!(c, "2", "a full page of one: the cursor is its seq");
    assert_eq!(
        sync_ids(&get(&w, INGEST, "/v1/syncs?cursor=2")),
        v(&[&mine]),
        "the default tenant's session before it"
    );
    assert!(sync_ids(&get(&w, &acme, "/v1/syncs?cursor=2")).is_empty());
}

/// A path of every route of the route tables (and `/healthz`), each with
/// the bearer its table needs; `sid` is an open session's.
fn route_samples(sid: &str) -> Vec<(&'static str, String)> {
    let tenant_paths = vec![
        "/v1/documents".to_string(),
        "/v1/documents/a".into(),
        "/v1/documents/a/reindex".into(),
        "/v1/jobs/j".into(),
        "/v1/search".into(),
        "/v1/syncs".into(),
        format!("/v1/syncs/{sid}"),
        format!("/v1/syncs/{sid}/commit"),
        format!("/v1/syncs/{sid}/seen"),
        "/healthz".into(),
    ];
    let admin_paths = [
        "/v1/admin/tenants",
        "/v1/admin/tenants/acme",
        "/v1/admin/tenants/acme/disable",
        "/v1/admin/tenants/acme/enable",
        "/v1/admin/tenants/acme/quotas",
        "/v1/admin/tenants/acme/tokens",
        "/v1/admin/tenants/acme/tokens/t1",
        "/v1/admin/documents",
        "/v1/admin/documents/summary",
        "/v1/admin/jobs/timeline",
        "/v1/admin/repair/runs",
        "/v1/admin/dead-letters",
        "/v1/admin/dead-letters/summary",
        "/v1/admin/redrives",
        "/v1/admin/redrives/r1",
        "/v1/admin/generations",
        "/v1/admin/generations/7/activate",
        "/v1/admin/generations/7/retire",
        "/v1/admin/reindex",
        "/v1/admin/reindex/b1",
        "/v1/admin/reindex/b1/pause",
        "/v1/admin/reindex/b1/resume",
        "/v1/admin/reindex/b1/cancel",
    ];
    tenant_paths
        .into_iter()
        .map(|p| (INGEST, p))
        .chain(admin_paths.iter().map(|p| (ADMIN, p.to_string())))
        .collect()
}

/// What each sample path answers to each method: a `405` carries `Allow`
/// (and only a 405 does), the method is not in it, and each method it
/// lists is served there (no 405, no `404 not_found`).
#[test]
fn listings_every_405_carries_allow_with_the_methods_the_path_takes() {
    let w = World::new();
    let sid = open(&w, INGEST, "docs");
    let r = call(
        &w,
        ADMIN,
        "POST",
        "/v1/admin/tenants",
        Some(json!({ "tenant_id": "acme" })),
    );
    assert_eq!(r.status, 201);
    let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"];
    let mut refused = 0;
    for (auth, path) in route_samples(&sid) {
        let path = path.as_str();
        for m in methods {
            let r = call(&w, auth, m, path, Some(json!({})));
            let Some(allow) = r.allow else {
                assert_ne!(r.status, 405, "{m} {path}: a 405 without Allow");
                continue;
            };
            refused += 1;
            assert_eq!(
                (r.status, code(&r)),
                (405, "method_not_allowed"),
                "{m} {path}"
            );
            let listed: Vec<&str> = allow.split(", ").collect();
            assert!(!listed.contains(&m), "{m} {path}: Allow {allow} lists it");
            for other in listed {
                let r = call(&w, auth, other, path, Some(json!({})));
                assert!(
                    r.status != 405 && code(&r) != "not_found",
                    "{other} {path} (in Allow {allow}): {} {}",
                    r.status,
                    r.body
                );
            }
        }
    }
    assert!(refused > 80, "{refused} refusals seen");
}

/// A few paths' 405s, exactly; and a path no route takes is 404, without
/// `Allow`, whatever the method.
#[test]
fn listings_a_405_names_the_methods_and_a_path_that_takes_none_is_404() {
    let w = World::new();
    let sid = open(&w, INGEST, "docs");
    for (auth, method, path, allow) in [
        (INGEST, "DELETE", "/v1/search".to_string(), "POST"),
        (INGEST, "PUT", "/v1/documents".into(), "GET, POST"),
        (
            INGEST,
            "PATCH",
            "/v1/documents/a".into(),
            "GET, PUT, DELETE",
        ),
        (INGEST, "GET", format!("/v1/syncs/{sid}/commit"), "POST"),
        (INGEST, "DELETE", "/v1/syncs".into(), "GET, POST"),
        (INGEST, "POST", "/healthz".into(), "GET, HEAD"),
        (ADMIN, "PUT", "/v1/admin/tenants".into(), "GET, POST"),
        (ADMIN, "GET", "/v1/admin/redrives".into(), "POST"),
        (ADMIN, "DELETE", "/v1/admin/reindex/b1".into(), "GET"),
        (ADMIN, "GET", "/v1/admin/reindex/b1/cancel".into(), "POST"),
    ] {
        let r = call(&w, auth, method, &path, None);
        assert_eq!(
            (r.status, code(&r), r.allow),
            (405, "method_not_allowed", Some(allow)),
            "{method} {path}"
        );
    }
    // A path no route takes is 404, whatever the method: no Allow.
    for (auth, method, path) in [
        (INGEST, "GET", "/v1/documents/a/b"),
        (ADMIN, "POST", "/v1/admin/reindex/b1/frobnicate"),
        (ADMIN, "GET", "/v1/admin/generations/7"),
    ] {
        let r = call(&w, auth, method, path, None);
        assert_eq!(
            (r.status, code(&r), r.allow),
            (404, "not_found", None),
            "{method} {path}"
        );
    }
}
