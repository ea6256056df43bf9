//! The HTTP contract, natively: statuses, stable error codes, and that bad
//! input changes nothing.

use crate::common::{oracle, World};
use futures::executor::block_on;
use ingest_pipeline::api::{handle, ApiRequest, ApiResponse, Secrets};
use serde_json::{json, Value};

const TOKEN: &str = "Bearer t-ingest";

fn call(
    w: &World,
    method: &str,
    path: &str,
    auth: Option<&str>,
    ct: Option<&str>,
    body: &[u8],
) -> ApiResponse {
    w.request(method, path, auth, ct, body)
}

fn json_call(w: &World, method: &str, path: &str, body: Value) -> ApiResponse {
    call(
        w,
        method,
        path,
        Some(TOKEN),
        Some("application/json"),
        body.to_string().as_bytes(),
    )
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

#[test]
fn health_needs_no_auth_and_v1_does() {
    let w = World::new();
    let r = call(&w, "GET", "/healthz", None, None, b"");
    assert_eq!((r.status, r.body.clone()), (200, json!({"ok": true})));
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("t-ingest"),
        Some("Bearer t-admin"),
    ] {
        let r = call(&w, "GET", "/v1/documents/a", auth, None, b"");
        assert_eq!((r.status, code(&r)), (401, "unauthorized"), "{auth:?}");
    }
    let none = Secrets {
        ingest_token: None,
        admin_token: None,
    };
    let r = block_on(handle(
        &w.p(),
        &none,
        ApiRequest {
            method: "GET",
            path: "/v1/documents/a",
            authorization: Some(TOKEN),
            content_type: None,
            body: b"",
            entropy: [7; 32],
        },
    ));
    assert_eq!((r.status, code(&r)), (503, "auth_not_configured"));
}

#[test]
fn put_get_job_and_unchanged() {
    let w = World::new();
    let r = json_call(
        &w,
        "PUT",
        "/v1/documents/guides%2F%E6%97%A5%20%231",
        json!({"text": "hello world", "metadata": {"lang": "en"}, "content_type": "text/markdown"}),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["doc_id"], "guides/日 #1");
    assert_eq!(r.body["version"], 1);
    assert_eq!(r.body["state"], "queued");
    let job_id = r.body["job_id"].as_str().unwrap().to_string();
    w.deliver_all();
    let r = call(
        &w,
        "GET",
        "/v1/documents/guides%2F%E6%97%A5%20%231",
        Some(TOKEN),
        None,
        b"",
    );
    assert_eq!(
        (
            r.status,
            r.body["state"].clone(),
            r.body["chunk_count"].clone()
        ),
        (200, json!("indexed"), json!(1))
    );
    let r = call(
        &w,
        "GET",
        &format!("/v1/jobs/{job_id}"),
        Some(TOKEN),
        None,
        b"",
    );
    assert_eq!(
        (r.status, r.body["state"].clone(), r.body["kind"].clone()),
        (200, json!("succeeded"), json!("index"))
    );
    let r = json_call(
        &w,
        "POST",
        "/v1/documents",
        json!({"doc_id": "guides/日 #1", "text": "hello world", "metadata": {"lang": "en"}, "content_type": "text/markdown"}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        json!({"doc_id": "guides/日 #1", "version": 1, "state": "indexed", "unchanged": true})
    );
    let r = json_call(
        &w,
        "POST",
        "/v1/search",
        json!({"query": "hello", "filter": {"metadata": {"lang": "en"}}}),
    );
    assert_eq!(r.body["results"][0]["doc_id"], "guides/日 #1");
    let r = json_call(
        &w,
        "POST",
        "/v1/search",
        json!({"query": "hello", "filter": {"metadata": {"lang": "fr"}}}),
    );
    assert_eq!(r.body["results"], json!([]));
}

#[test]
fn batch_answers_per_item() {
    let w = World::new();
    let r = json_call(
        &w,
        "POST",
        "/v1/documents",
        json!({"documents": [
            {"doc_id": "a", "text": "one"},
            {"doc_id": "b"},
            {"doc_id": "c", "text": "three", "content_type": "application/pdf"},
            {"doc_id": "d", "text": "four"}
        ]}),
    );
    assert_eq!(r.status, 200);
    let res = r.body["results"].as_array().unwrap();
    let statuses: Vec<i64> = res.iter().map(|x| x["status"].as_i64().unwrap()).collect();
    assert_eq!(statuses, vec![202, 422, 415, 202]);
    assert_eq!(res[1]["error"]["code"], "invalid_field");
    assert_eq!(res[1]["doc_id"], "b");
    assert_eq!(res[2]["error"]["code"], "unsupported_content_type");
    assert_eq!(oracle::document_count(&w.db), 2);
    let too_many: Vec<Value> = (0..101)
        .map(|i| json!({"doc_id": format!("x{i}"), "text": "t"}))
        .collect();
    let r = json_call(
        &w,
        "POST",
        "/v1/documents",
        json!({ "documents": too_many }),
    );
    assert_eq!((r.status, code(&r)), (413, "batch_too_large"));
}

/// A bad request and its answer: method, path, content type, body, status
/// and error code.
type Case<'a> = (&'a str, &'a str, Option<&'a str>, Vec<u8>, u16, &'a str);

#[test]
fn bad_input_gets_a_stable_code_and_changes_nothing() {
    let mut cfg = World::new().cfg;
    cfg.document_bytes_max = 100;
    cfg.request_bytes_max = 2048;
    cfg.index_filter_bytes_max = 512;
    let w = World::with(cfg);
    assert_eq!(
        json_call(&w, "PUT", "/v1/documents/a", json!({"text": "original"})).status,
        202
    );
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let big = "x".repeat(101);
    let long_path = format!("/v1/documents/{}", "x".repeat(257));
    let cases: Vec<Case> = vec![
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            b"{not json".to_vec(),
            400,
            "invalid_json",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            b"[1,2]".to_vec(),
            400,
            "invalid_body",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("text/plain"),
            br#"{"text":"x"}"#.to_vec(),
            415,
            "unsupported_media_type",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"x","content_type":"text/html"}"#.to_vec(),
            415,
            "unsupported_content_type",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            format!(r#"{{"text":"{big}"}}"#).into_bytes(),
            413,
            "document_too_large",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            vec![b' '; 3000],
            413,
            "payload_too_large",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":5}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"   "}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"x","metadata":"m"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"x","metadata":{"k":{"n":1}}}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"x","metadata":{"doc_id":"z"}}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"text":"x","doc_id":"b"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("application/json"),
            br#"{"txt":"x"}"#.to_vec(),
            422,
            "unknown_field",
        ),
        (
            "PUT",
            "/v1/documents/a%0Ab",
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a%ZZ",
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            400,
            "invalid_path",
        ),
        (
            "PUT",
            "/v1/documents/%FF",
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            400,
            "invalid_path",
        ),
        (
            "PUT",
            &long_path,
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PATCH",
            "/v1/documents/a",
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        ("GET", "/v1/search", None, vec![], 405, "method_not_allowed"),
        ("GET", "/v1/nothing", None, vec![], 404, "not_found"),
        (
            "GET",
            "/v1/documents/zzz",
            None,
            vec![],
            404,
            "document_not_found",
        ),
        (
            "DELETE",
            "/v1/documents/zzz",
            None,
            vec![],
            404,
            "document_not_found",
        ),
        ("GET", "/v1/jobs/zzz", None, vec![], 404, "job_not_found"),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":""}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","top_k":0}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","top_k":51}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","mode":"fuzzy"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","mode":3}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","mode":"HYBRID"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","highlight":"yes"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","highlight":1}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/search",
            Some("application/json"),
            br#"{"query":"x","filter":{"lang":"en"}}"#.to_vec(),
            422,
            "unknown_field",
        ),
        (
            // A dot segment can never be fetched or deleted by path.
            "PUT",
            "/v1/documents/%2E",
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/%2e%2E",
            Some("application/json"),
            br#"{"text":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/documents",
            Some("application/json"),
            br#"{"doc_id":"..","text":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            // A filter over the index's INDEX_FILTER_BYTES_MAX (512 here): refused, not a 500.
            "POST",
            "/v1/search",
            Some("application/json"),
            format!(
                r#"{{"query":"x","filter":{{"metadata":{{{}}}}}}}"#,
                (0..8)
                    .map(|i| format!(r#""k{i:02}":"{}""#, "v".repeat(70)))
                    .collect::<Vec<_>>()
                    .join(",")
            )
            .into_bytes(),
            422,
            "invalid_field",
        ),
        (
            // 600 ideographs: under the 4,096-byte cap, over 510 tokens.
            "POST",
            "/v1/search",
            Some("application/json"),
            format!(r#"{{"query":"{}"}}"#, "語".repeat(600)).into_bytes(),
            422,
            "query_too_long",
        ),
        (
            "POST",
            "/v1/documents",
            Some("application/json"),
            br#"{"documents":[]}"#.to_vec(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/documents",
            Some("application/json"),
            br#"{"documents":"x"}"#.to_vec(),
            422,
            "invalid_field",
        ),
    ];
    for (method, path, ct, body, status, want) in cases {
        let r = call(&w, method, path, Some(TOKEN), ct, &body);
        assert_eq!(
            (r.status, code(&r)),
            (status, want),
            "{method} {path} {}",
            String::from_utf8_lossy(&body[..body.len().min(60)])
        );
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(
            !msg.contains(&big) && !msg.contains("original"),
            "messages never echo content"
        );
    }
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "bad input changed the ledger"
    );
}

#[test]
fn dot_segment_doc_ids_are_refused_in_a_batch_too() {
    let w = World::new();
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = call(
        &w,
        "POST",
        "/v1/documents",
        Some(TOKEN),
        Some("application/json"),
        br#"{"documents":[{"doc_id":".","text":"x"},{"doc_id":"..","text":"y"}]}"#,
    );
    assert_eq!(r.status, 200);
    for item in r.body["results"].as_array().unwrap() {
        assert_eq!(
            (item["status"].as_u64(), item["error"]["code"].as_str()),
            (Some(422), Some("invalid_field")),
            "{item}"
        );
    }
    assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
}
