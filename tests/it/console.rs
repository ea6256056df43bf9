//! What the operator's console reads besides the existing admin routes:
//! documents by state (`GET /v1/admin/documents/summary`), the document
//! listing (`GET /v1/admin/documents`) and jobs over time
//! (`GET /v1/admin/jobs/timeline`); and the console's own files.

use crate::common::World;
use ingest_pipeline::api::assets::{asset, CONSOLE_CSP};
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::ports::Clock;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const ADMIN: &str = "Bearer t-admin";
const INGEST: &str = "Bearer t-ingest";

fn call(w: &World, method: &str, path: &str, auth: &str) -> ApiResponse {
    w.request_json(method, path, auth, None)
}

/// A world of six documents: `a`, `b` indexed, `c` failed (the index
/// rejected it), `d` deleted, `e` and `f` queued.
fn six_documents() -> World {
    let w = World::new();
    for d in ["a", "b", "c", "d"] {
        w.put(d, &format!("{d} alpha bravo charlie"));
    }
    w.delete("d");
    // `c`'s upsert is rejected for good; the others index.
    for m in w.queue.take_all() {
        if m.doc_id == "c" {
            w.index
                .upsert_faults
                .fail_next(1, FailureBucket::IndexRejected);
        }
        w.queue.sent.borrow_mut().push_back(m);
        w.deliver_all();
    }
    w.put("e", "echo");
    w.put("f", "foxtrot");
    w
}

fn state_of(w: &World, doc: &str) -> String {
    let r = call(w, "GET", &format!("/v1/documents/{doc}"), INGEST);
    assert_eq!(r.status, 200, "{doc}: {}", r.body);
    r.body["state"].as_str().unwrap().to_string()
}

#[test]
fn console_summary_counts_each_documents_own_state() {
    let w = six_documents();
    let r = call(&w, "GET", "/v1/admin/documents/summary", ADMIN);
    assert_eq!(r.status, 200, "{}", r.body);
    // The counts are those of each document's own view.
    let mut want: BTreeMap<String, u64> = [
        "queued",
        "indexing",
        "indexed",
        "partially_indexed",
        "repair_needed",
        "failed",
        "deleted",
    ]
    .into_iter()
    .map(|s| (s.to_string(), 0))
    .collect();
    for d in ["a", "b", "c", "d", "e", "f"] {
        *want.entry(state_of(&w, d)).or_default() += 1;
    }
    let got: BTreeMap<String, u64> = serde_json::from_value(r.body["by_state"].clone()).unwrap();
    assert_eq!(got, want);
    assert_eq!(
        (
            want["indexed"],
            want["failed"],
            want["deleted"],
            want["queued"]
        ),
        (2, 1, 1, 2),
        "the world is as built"
    );
    assert_eq!(r.body["documents"], 6);
    assert_eq!(r.body["tenant_id"], Value::Null);
    assert_eq!(
        r.body["failures"],
        json!([{ "state": "failed", "bucket": "index_rejected", "documents": 1 }])
    );
    // One tenant's: the default tenant holds them all; another has none.
    let r = call(
        &w,
        "GET",
        "/v1/admin/documents/summary?tenant_id=default",
        ADMIN,
    );
    assert_eq!(
        (r.body["documents"].clone(), r.body["tenant_id"].clone()),
        (json!(6), json!("default"))
    );
    let r = call(
        &w,
        "GET",
        "/v1/admin/documents/summary?tenant_id=acme",
        ADMIN,
    );
    assert_eq!(r.body["documents"], 0);
    let r = call(
        &w,
        "GET",
        "/v1/admin/documents/summary?tenant_id=NOT%20OK",
        ADMIN,
    );
    assert_eq!(r.status, 422, "{}", r.body);
}

#[test]
fn console_document_pages_cover_every_document_once_and_filter_by_state() {
    let w = six_documents();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let path = match &cursor {
            Some(c) => format!(
                "/v1/admin/documents?limit=4&cursor={}",
                c.replace('%', "%25")
                    .replace(':', "%3A")
                    .replace('/', "%2F")
            ),
            None => "/v1/admin/documents?limit=4".to_string(),
        };
        let r = call(&w, "GET", &path, ADMIN);
        assert_eq!(r.status, 200, "{}", r.body);
        for d in r.body["documents"].as_array().unwrap() {
            assert_eq!(d["tenant_id"], "default");
            let id = d["doc_id"].as_str().unwrap().to_string();
            assert_eq!(d["state"].as_str().unwrap(), state_of(&w, &id), "{id}");
            assert!(d.get("text").is_none(), "no document text");
            seen.push(id);
        }
        cursor = r.body["next_cursor"].as_str().map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e", "f"]);

    let r = call(&w, "GET", "/v1/admin/documents?state=failed", ADMIN);
    let docs: Vec<&str> = r.body["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(docs, ["c"]);
    assert_eq!(
        r.body["documents"][0]["last_failure_bucket"],
        "index_rejected"
    );

    for bad in ["state=done", "limit=0", "limit=101", "tenant_id=%20"] {
        let r = call(&w, "GET", &format!("/v1/admin/documents?{bad}"), ADMIN);
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (422, Some("invalid_field")),
            "{bad}"
        );
    }
    assert_eq!(call(&w, "POST", "/v1/admin/documents", ADMIN).status, 405);
    assert_eq!(call(&w, "GET", "/v1/admin/documents", INGEST).status, 403);
}

#[test]
fn console_timeline_counts_every_job_in_its_bucket() {
    let w = World::new();
    let t0 = w.clock.now_ms();
    // Off the buckets' boundaries: D1 binds every number as REAL, so an
    // uncast `(updated_at - since) / width` would be a fraction.
    w.clock.advance_ms(1_000);
    w.put("a", "alpha");
    w.put("b", "bravo");
    w.deliver_all();
    w.clock.advance_ms(3_599_000);
    w.put("c", "charlie");
    let until = w.clock.now_ms() + 1;
    let path = format!("/v1/admin/jobs/timeline?since={t0}&until={until}&bucket_seconds=1800");
    let r = call(&w, "GET", &path, ADMIN);
    assert_eq!(r.status, 200, "{}", r.body);
    let buckets = r.body["buckets"].as_array().unwrap();
    // [t0, t0 + 1 h + 1 ms) in half hours: three buckets, the empty one too.
    assert_eq!(buckets.len(), 3);
    assert_eq!(buckets[0]["start"], t0);
    assert_eq!(buckets[0]["counts"]["succeeded"], 2);
    assert_eq!(
        buckets[1]["counts"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        0
    );
    assert_eq!(buckets[2]["counts"]["queued"], 1);
    assert_eq!(
        buckets[2]["counts"].as_object().unwrap().len(),
        7,
        "every job state"
    );

    // The default window: the last 24 hours in hours.
    let r = call(&w, "GET", "/v1/admin/jobs/timeline", ADMIN);
    assert_eq!(
        (r.status, r.body["bucket_seconds"].clone()),
        (200, json!(3600))
    );
    assert_eq!(r.body["buckets"].as_array().unwrap().len(), 24);

    for bad in [
        format!("since={until}&until={t0}"),
        "bucket_seconds=0".to_string(),
        "bucket_seconds=1".to_string(), // 86,400 buckets: over the limit
        "since=yesterday".to_string(),
    ] {
        let r = call(&w, "GET", &format!("/v1/admin/jobs/timeline?{bad}"), ADMIN);
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (422, Some("invalid_field")),
            "{bad}"
        );
    }
}

#[test]
fn console_files_are_served_with_their_policy() {
    let page = asset("GET", "/console").unwrap().unwrap();
    assert!(page.content_type.starts_with("text/html"));
    assert!(page.body.contains("/console/console.js"));
    assert!(page
        .headers
        .iter()
        .any(|(k, v)| *k == "Content-Security-Policy" && *v == CONSOLE_CSP));
    let contract = asset("GET", "/openapi.json").unwrap().unwrap();
    let doc: Value = serde_json::from_str(contract.body).unwrap();
    assert!(doc["paths"].get("/v1/admin/documents/summary").is_some());
}
