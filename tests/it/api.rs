//! The HTTP contract, natively: statuses, stable error codes, and that bad
//! input changes nothing.

use crate::common::{oracle, World, TEST_ADMIN_TOKEN, TEST_INGEST_TOKEN};
use futures::executor::block_on;
use ingest_pipeline::api::{handle, ApiRequest, ApiResponse, Secrets};
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::index_config::EmbedModel;
use ingest_pipeline::pipeline::Pipeline;
use ingest_pipeline::ports::{
    Clock, Database, Embedder, JobQueue, PortError, Rows, Stmt, VectorIndex,
};
use ingest_pipeline::store::sql;
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

const ADMIN: &str = "Bearer t-admin";

/// One request through the API over `p` (a pipeline over ports a test
/// wrapped or replaced), with the test kit's tokens.
fn request_over<D, V, E, Q, C>(
    p: &Pipeline<D, V, E, Q, C>,
    method: &str,
    path: &str,
    auth: &str,
    body: Option<Value>,
) -> ApiResponse
where
    D: Database,
    V: VectorIndex,
    E: Embedder,
    Q: JobQueue,
    C: Clock,
{
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    block_on(handle(
        p,
        &Secrets {
            ingest_token: Some(TEST_INGEST_TOKEN.into()),
            admin_token: Some(TEST_ADMIN_TOKEN.into()),
        },
        ApiRequest {
            method,
            path,
            authorization: Some(auth),
            content_type: Some("application/json"),
            body: bytes.as_bytes(),
            entropy: [42; 32],
        },
    ))
}

/// An embedder that fails every call with its bucket.
struct FailingEmbedder(FailureBucket);

impl Embedder for FailingEmbedder {
    async fn embed(
        &self,
        _model: &EmbedModel,
        _texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        Err(PortError::new(self.0, "injected"))
    }
}

/// A world with one document indexed (a search has an active generation
/// and something to find).
fn indexed_world() -> World {
    let w = World::new();
    let r = json_call(
        &w,
        "PUT",
        "/v1/documents/a",
        json!({"text": "lighthouse keepers log the tides"}),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    w.deliver_all();
    w
}

/// A dependency that fails answers its failure bucket as the code: 503 if
/// the failure is transient (retry later), 500 if not, as
/// `docs/openapi.yaml` lists them (ServiceUnavailable, InternalError). Each
/// bucket is met where a request meets it: D1 on a read, the embedder and
/// the index on a search (which tries a transiently failing call
/// `SEARCH_RETRIES_MAX` more times first). Nothing is written.
#[test]
fn a_failing_dependency_answers_its_bucket_with_its_status() {
    let search = json!({"query": "lighthouse tides"});
    let d1: [(FailureBucket, u16, &str); 4] = [
        (FailureBucket::DbBusy, 503, "db_busy"),
        (FailureBucket::DbUnavailable, 503, "db_unavailable"),
        (FailureBucket::DbRejected, 500, "db_rejected"),
        // A row D1 answered in a shape the Worker cannot read.
        (FailureBucket::Internal, 500, "internal"),
    ];
    for (bucket, status, want) in d1 {
        let w = indexed_world();
        let before = w.db.dump(oracle::REQUEST_COUNTERS);
        *w.db.fail_sql.borrow_mut() = Some((sql::DOCUMENT_VIEWS, bucket));
        let r = w.request("GET", "/v1/documents/a", Some(TOKEN), None, b"");
        assert_eq!((r.status, code(&r)), (status, want), "D1 {bucket:?}");
        assert!(
            w.db.fail_sql.borrow().is_none(),
            "the injected failure was met"
        );
        assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
    }
    let embedder: [(FailureBucket, u16, &str); 4] = [
        (FailureBucket::EmbedRateLimited, 503, "embed_rate_limited"),
        (FailureBucket::EmbedUnavailable, 503, "embed_unavailable"),
        (FailureBucket::EmbedRejected, 500, "embed_rejected"),
        // The embedder does not serve the configured model.
        (FailureBucket::ConfigInvalid, 503, "config_invalid"),
    ];
    for (bucket, status, want) in embedder {
        let w = indexed_world();
        let before = w.db.dump(oracle::REQUEST_COUNTERS);
        let r = request_over(
            &w.p_with(FailingEmbedder(bucket)),
            "POST",
            "/v1/search",
            TOKEN,
            Some(search.clone()),
        );
        assert_eq!((r.status, code(&r)), (status, want), "embedder {bucket:?}");
        assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
    }
    let tries = 1 + World::new().cfg.search_retries_max as usize;
    let index: [(FailureBucket, usize, u16, &str); 4] = [
        (
            FailureBucket::IndexRateLimited,
            tries,
            503,
            "index_rate_limited",
        ),
        (
            FailureBucket::IndexUnavailable,
            tries,
            503,
            "index_unavailable",
        ),
        (FailureBucket::IndexRejected, 1, 500, "index_rejected"),
        (
            FailureBucket::IndexMisconfigured,
            tries,
            503,
            "index_misconfigured",
        ),
    ];
    for (bucket, fails, status, want) in index {
        let w = indexed_world();
        w.index.query_faults.fail_next(fails, bucket);
        let r = json_call(&w, "POST", "/v1/search", search.clone());
        assert_eq!((r.status, code(&r)), (status, want), "index {bucket:?}");
        // The next search finds the document: every injected failure was met.
        let ok = json_call(&w, "POST", "/v1/search", search.clone());
        assert_eq!(ok.status, 200, "{:?}", ok.body);
        assert_eq!(ok.body["results"][0]["doc_id"], "a", "{:?}", ok.body);
    }
    // One failure fewer than the tries: the search's retry absorbs it.
    let w = indexed_world();
    w.index
        .query_faults
        .fail_next(tries - 1, FailureBucket::IndexUnavailable);
    let r = json_call(&w, "POST", "/v1/search", search.clone());
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// The code of batch item `i` of a `POST /v1/documents` batch's 200 answer:
/// its own status and error code.
fn batch_item(r: &ApiResponse, i: usize) -> (u16, &str) {
    assert_eq!(r.status, 200, "{:?}", r.body);
    let item = &r.body["results"][i];
    (
        item["status"].as_u64().map_or(0, |s| s as u16),
        item["error"]["code"].as_str().unwrap_or("<none>"),
    )
}

/// A batch answers 200 with each item's error (every code
/// `docs/openapi.yaml` lists for a batch item) beside the others' outcomes,
/// and writes only the valid items.
#[test]
fn a_batch_answers_every_item_error_beside_the_written_items() {
    let mut cfg = World::new().cfg;
    cfg.document_bytes_max = 100;
    let w = World::with(cfg);
    let r = json_call(
        &w,
        "POST",
        "/v1/documents",
        json!({"documents": [
            {"doc_id": "big", "text": "x".repeat(101)},
            "not an object",
            {"doc_id": "no-text"},
            {"doc_id": "extra", "text": "t", "colour": "red"},
            {"doc_id": "pdf", "text": "t", "content_type": "application/pdf"},
            {"doc_id": "ok", "text": "written"}
        ]}),
    );
    assert_eq!(batch_item(&r, 0), (413, "document_too_large"));
    assert_eq!(batch_item(&r, 1), (400, "invalid_body"));
    assert_eq!(batch_item(&r, 2), (422, "invalid_field"));
    assert_eq!(batch_item(&r, 3), (422, "unknown_field"));
    assert_eq!(batch_item(&r, 4), (415, "unsupported_content_type"));
    assert_eq!(r.body["results"][5]["status"], 202, "{:?}", r.body);
    assert_eq!(oracle::document_count(&w.db), 1, "only the valid item");
}

/// Every intake attempt loses its race: D1 refuses each batch as it does
/// when another writer took the version first (a constraint). After its
/// attempts the write answers `409 conflict` and writes nothing.
#[test]
fn a_write_that_loses_every_race_answers_conflict_and_writes_nothing() {
    struct RaceLost<'a>(&'a ingest_pipeline::native::SqliteDb);
    impl Database for RaceLost<'_> {
        async fn query_billed<T: serde::de::DeserializeOwned>(
            &self,
            stmt: Stmt,
        ) -> Result<(Vec<T>, Rows), PortError> {
            self.0.query_billed(stmt).await
        }
        async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
            self.0.execute_billed(stmt).await
        }
        async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
            if stmts.iter().any(|s| s.sql == sql::INTAKE_INSERT_VERSIONS) {
                return Err(PortError::new(FailureBucket::DbRejected, "db_constraint"));
            }
            self.0.batch_billed(stmts).await
        }
    }
    let w = indexed_world();
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let p = w.p_over(RaceLost(&w.db));
    for (method, path, body) in [
        (
            "PUT",
            "/v1/documents/a",
            Some(json!({"text": "a new text"})),
        ),
        ("DELETE", "/v1/documents/a", None),
        (
            "POST",
            "/v1/documents",
            Some(json!({"doc_id": "b", "text": "another"})),
        ),
    ] {
        let r = request_over(&p, method, path, TOKEN, body);
        assert_eq!((r.status, code(&r)), (409, "conflict"), "{method} {path}");
    }
    assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
    assert!(w.queue.sent.borrow().is_empty(), "nothing was enqueued");
}

/// Reindexing a document whose newer version is still being indexed is
/// refused (`409 document_indexing`: that version will use the current
/// configuration anyway); once it is indexed, the reindex runs.
#[test]
fn a_reindex_while_a_newer_version_is_indexing_is_refused() {
    let w = indexed_world();
    let r = json_call(
        &w,
        "PUT",
        "/v1/documents/a",
        json!({"text": "the second version"}),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = call(
        &w,
        "POST",
        "/v1/documents/a/reindex",
        Some(TOKEN),
        None,
        b"",
    );
    assert_eq!(
        (r.status, code(&r)),
        (409, "document_indexing"),
        "{:?}",
        r.body
    );
    assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
    w.deliver_all();
    let r = call(
        &w,
        "POST",
        "/v1/documents/a/reindex",
        Some(TOKEN),
        None,
        b"",
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
}

/// `404 generation_not_found` for a generation that never existed, on
/// both generation routes.
#[test]
fn an_unknown_generation_is_not_found() {
    let w = indexed_world();
    for action in ["activate", "retire"] {
        let r = w.request_json(
            "POST",
            &format!("/v1/admin/generations/7/{action}"),
            ADMIN,
            None,
        );
        assert_eq!(
            (r.status, code(&r)),
            (404, "generation_not_found"),
            "{action}"
        );
    }
}

/// A generation left building without a backfill (by an older release)
/// for another configuration: a config backfill is refused (`409
/// generation_building`) rather than building a second one beside it.
#[test]
fn a_config_backfill_beside_another_generation_building_is_refused() {
    let mut w = indexed_world();
    block_on(w.db.execute(Stmt::new(
        "INSERT INTO generations (generation, index_config, state, created_at, updated_at) VALUES (2, ?1, 'building', 0, 0)",
        vec![r#"{"left":"by an older release"}"#.into()],
    )))
    .unwrap();
    w.cfg.chunk_size_max_tokens = 96;
    w.cfg.chunk_overlap_tokens = 8;
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = w.request_json(
        "POST",
        "/v1/admin/reindex",
        ADMIN,
        Some(&json!({"scope": "config"})),
    );
    assert_eq!(
        (r.status, code(&r)),
        (409, "generation_building"),
        "{:?}",
        r.body
    );
    assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
}

/// The refusal that stops an unsafe rollback: a retained generation that
/// lacks a document the active one will serve (its index job has not
/// written it yet) is not activated (`409 generation_incomplete`, nothing
/// switched); once the job wrote it there, the rollback goes through.
#[test]
fn a_rollback_to_a_generation_without_every_document_is_refused() {
    let mut w = indexed_world();
    w.cfg.chunk_size_max_tokens = 96;
    w.cfg.chunk_overlap_tokens = 8;
    let r = w.request_json(
        "POST",
        "/v1/admin/reindex",
        ADMIN,
        Some(&json!({"scope": "config", "page_size": 10})),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    let id = r.body["backfill"]["backfill_id"]
        .as_str()
        .unwrap()
        .to_string();
    for _ in 0..20 {
        w.deliver_all();
        w.cron_runs(1);
        let v = w.request_json("GET", &format!("/v1/admin/reindex/{id}"), ADMIN, None);
        assert_eq!(v.status, 200, "{:?}", v.body);
        if v.body["state"] == "completed" {
            break;
        }
    }
    let g = w.request_json("GET", "/v1/admin/generations", ADMIN, None);
    assert_eq!(g.body["active"], 2, "{:?}", g.body);

    let r = json_call(
        &w,
        "PUT",
        "/v1/documents/late",
        json!({"text": "written after the switch"}),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = w.request_json("POST", "/v1/admin/generations/1/activate", ADMIN, None);
    assert_eq!(
        (r.status, code(&r)),
        (409, "generation_incomplete"),
        "{:?}",
        r.body
    );
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "nothing switched"
    );

    w.deliver_all();
    let r = w.request_json("POST", "/v1/admin/generations/1/activate", ADMIN, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["active"], 1, "{:?}", r.body);
    roll_forward_after_the_rollback(&w);
}

/// After a rollback to 1, generation 2 (the running configuration's) is
/// retained. A `config` backfill used to build generation 3, a duplicate of
/// 2; it is refused with `config_retained` naming 2, nothing written, and
/// the two ways forward work: activating 2, or retiring it and starting the
/// backfill again.
fn roll_forward_after_the_rollback(w: &World) {
    let config = json!({"scope": "config", "page_size": 10});
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = w.request_json("POST", "/v1/admin/reindex", ADMIN, Some(&config));
    assert_eq!(
        (r.status, code(&r)),
        (409, "config_retained"),
        "{:?}",
        r.body
    );
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("generation 2 is retained"), "{msg}");
    assert!(msg.contains("/v1/admin/generations/2/activate"), "{msg}");
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "nothing written"
    );

    // Writes while 1 is active reach the retained 2 too: it stays complete.
    let r = json_call(
        w,
        "PUT",
        "/v1/documents/later",
        json!({"text": "after the rollback"}),
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    w.deliver_all();
    let r = w.request_json("POST", "/v1/admin/generations/2/activate", ADMIN, None);
    assert_eq!(
        (r.status, &r.body["active"]),
        (200, &json!(2)),
        "{:?}",
        r.body
    );
    // The other way forward: back to 1, retire 2, build again.
    let r = w.request_json("POST", "/v1/admin/generations/1/activate", ADMIN, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = w.request_json("POST", "/v1/admin/generations/2/retire", ADMIN, None);
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = w.request_json("POST", "/v1/admin/reindex", ADMIN, Some(&config));
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["backfill"]["generation"]["to"], 3, "{:?}", r.body);
}

/// A query over the embedding model's tokens is refused only by the modes
/// that embed it; the refusal says how long a query fits and names the
/// keyword mode. `keyword` takes the same query (it makes no embedder
/// call), up to `SEARCH_QUERY_BYTES_MAX`.
#[test]
fn only_the_modes_that_embed_a_query_refuse_it_over_the_models_tokens() {
    let w = indexed_world();
    // 600 ideographs and the indexed words: 1,832 bytes, over 510 tokens.
    let long = format!("{} lighthouse", "語".repeat(600));
    for mode in ["hybrid", "vector"] {
        let r = json_call(
            &w,
            "POST",
            "/v1/search",
            json!({"query": long, "mode": mode}),
        );
        assert_eq!((r.status, code(&r)), (422, "query_too_long"), "{mode}");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("shorten it to about"), "{msg}");
        assert!(msg.contains("\"mode\": \"keyword\""), "{msg}");
    }
    let r = json_call(
        &w,
        "POST",
        "/v1/search",
        json!({"query": long, "mode": "keyword"}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["results"][0]["doc_id"], "a", "{:?}", r.body);
    let over = "語".repeat(1366); // 4,098 bytes
    let r = json_call(
        &w,
        "POST",
        "/v1/search",
        json!({"query": over, "mode": "keyword"}),
    );
    assert_eq!((r.status, code(&r)), (422, "invalid_field"), "{:?}", r.body);
}

/// `KEYWORD_MATCHES_MAX`: a keyword query ranks at most that many of its
/// tenant's rows; its commonest terms are left out and named, the rest
/// still ranked; a query whose every term is too common has no keyword
/// hits, and says why. Vector mode skips nothing.
#[test]
fn a_keyword_query_leaves_out_its_commonest_terms_past_the_rows_it_may_rank() {
    let cfg = ingest_pipeline::config::Config {
        keyword_matches_max: 3,
        ..ingest_pipeline::config::Config::default()
    };
    let w = World::with(cfg);
    for i in 0..5 {
        w.put(
            &format!("common-{i}"),
            &format!("quarterly report number {i}"),
        );
    }
    w.put("rare", "quarterly zanzibar figures");
    w.deliver_all();
    let search = |q: &str, mode: &str| {
        let r = json_call(
            &w,
            "POST",
            "/v1/search",
            json!({"query": q, "mode": mode, "top_k": 10}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let docs: Vec<String> = r.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap().to_string())
            .collect();
        (docs, r.body["keyword_terms_skipped"].clone())
    };
    // "quarterly" is in 6 rows, more than 3: left out (named as the index
    // holds it, stemmed); "zanzibar" ranked.
    assert_eq!(
        search("quarterly zanzibar", "keyword"),
        (vec!["rare".to_string()], json!(["quarter"]))
    );
    // "report" (5 rows) alone is too common as well: no keyword hit.
    assert_eq!(
        search("quarterly report", "keyword"),
        (vec![], json!(["quarter", "report"]))
    );
    // Hybrid keeps its vector ranking and names what keyword left out.
    let (docs, skipped) = search("quarterly report", "hybrid");
    assert!(!docs.is_empty());
    assert_eq!(skipped, json!(["quarter", "report"]));
    assert_eq!(search("quarterly", "vector").1, json!([]));
    // Within the bound, nothing is left out.
    assert_eq!(
        search("zanzibar figures", "keyword"),
        (vec!["rare".to_string()], json!([]))
    );
}
