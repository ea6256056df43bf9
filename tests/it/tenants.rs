//! Tenants through the API: onboarding, isolation of identical document
//! IDs, scopes, revocation, disabling, quotas, the request rate, the tenant
//! limit, and bad input on every tenant route (a clear 4xx, nothing written).

use crate::common::{oracle, Interleaved, World};
use futures::executor::block_on;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::ports::Clock;
use serde_json::{json, Value};

const ADMIN: &str = "Bearer t-admin";
const INGEST: &str = "Bearer t-ingest";

fn raw(w: &World, method: &str, path: &str, auth: &str, body: &[u8]) -> ApiResponse {
    w.request(method, path, Some(auth), Some("application/json"), body)
}

fn call(w: &World, method: &str, path: &str, auth: &str, body: Option<Value>) -> ApiResponse {
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    raw(w, method, path, auth, bytes.as_bytes())
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

/// Creates `tenant` (with `quotas`) and a token of `scopes`; its bearer.
fn onboard(w: &World, tenant: &str, quotas: Value, scopes: &[&str]) -> String {
    let r = call(
        w,
        "POST",
        "/v1/admin/tenants",
        ADMIN,
        Some(json!({ "tenant_id": tenant, "quotas": quotas })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["state"], "active");
    token(w, tenant, scopes)
}

fn token(w: &World, tenant: &str, scopes: &[&str]) -> String {
    let r = call(
        w,
        "POST",
        &format!("/v1/admin/tenants/{tenant}/tokens"),
        ADMIN,
        Some(json!({ "scopes": scopes })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["token_id"].is_string());
    format!("Bearer {}", r.body["token"].as_str().unwrap())
}

fn put(w: &World, auth: &str, doc: &str, text: &str) -> ApiResponse {
    call(
        w,
        "PUT",
        &format!("/v1/documents/{doc}"),
        auth,
        Some(json!({ "text": text })),
    )
}

fn search(w: &World, auth: &str, q: &str) -> Vec<String> {
    let r = call(
        w,
        "POST",
        "/v1/search",
        auth,
        Some(json!({ "query": q, "top_k": 10 })),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tenants_identical_doc_ids_are_separate_documents() {
    let w = World::new();
    let a = onboard(&w, "acme", json!({}), &["ingest", "search"]);
    let b = onboard(&w, "beta", json!({}), &["ingest", "search"]);
    let ra = put(&w, &a, "handbook", "acme harbour lanterns and tide tables");
    let rb = put(
        &w,
        &b,
        "handbook",
        "beta mountain railways and snow reports",
    );
    assert_eq!((ra.status, rb.status), (202, 202));
    assert_eq!(
        (ra.body["version"].clone(), rb.body["version"].clone()),
        (json!(1), json!(1))
    );
    let (job_a, job_b) = (ra.body["job_id"].clone(), rb.body["job_id"].clone());
    assert_ne!(job_a, job_b, "same doc_id, two documents, two jobs");
    w.deliver_all();

    // Each tenant sees its own document, its own hits, its own jobs.
    for (auth, mine, theirs) in [(&a, "acme", "beta"), (&b, "beta", "acme")] {
        let hits = search(&w, auth, "harbour lanterns mountain railways");
        assert!(!hits.is_empty());
        assert!(hits.iter().all(|t| t.starts_with(mine)), "{hits:?}");
        assert!(!hits.iter().any(|t| t.starts_with(theirs)));
        let r = call(&w, "GET", "/v1/documents/handbook", auth, None);
        assert_eq!((r.status, r.body["state"].clone()), (200, json!("indexed")));
    }
    let job = |auth: &str, id: &Value| {
        call(
            &w,
            "GET",
            &format!("/v1/jobs/{}", id.as_str().unwrap()),
            auth,
            None,
        )
    };
    assert_eq!(job(&a, &job_a).status, 200);
    assert_eq!(job(&a, &job_a).body["doc_id"], "handbook");
    let r = job(&b, &job_a);
    assert_eq!(
        (r.status, code(&r)),
        (404, "job_not_found"),
        "another tenant's job is absent"
    );
    assert_eq!(job(INGEST, &job_b).status, 404);

    // The default tenant (INGEST_TOKEN) has no such document.
    let r = call(&w, "GET", "/v1/documents/handbook", INGEST, None);
    assert_eq!((r.status, code(&r)), (404, "document_not_found"));
    assert!(search(&w, INGEST, "harbour lanterns").is_empty());
    let r = call(&w, "DELETE", "/v1/documents/handbook", INGEST, None);
    assert_eq!(r.status, 404, "{}", r.body);
    let r = call(&w, "POST", "/v1/documents/handbook/reindex", INGEST, None);
    assert_eq!((r.status, code(&r)), (404, "document_not_found"));

    // B deletes its document: A's is untouched.
    assert_eq!(
        call(&w, "DELETE", "/v1/documents/handbook", &b, None).status,
        202
    );
    w.deliver_all();
    assert_eq!(
        call(&w, "GET", "/v1/documents/handbook", &b, None).body["state"],
        "deleted"
    );
    assert_eq!(
        call(&w, "GET", "/v1/documents/handbook", &a, None).body["state"],
        "indexed"
    );
    assert!(search(&w, &b, "mountain railways").is_empty());
    assert_eq!(search(&w, &a, "harbour").len(), 1);

    // Each tenant's vectors are in its own namespace; the ledger keys rows by tenant.
    let namespaces: Vec<String> = w
        .index
        .vectors
        .borrow()
        .values()
        .map(|v| v.namespace.clone())
        .collect();
    assert!(namespaces.iter().any(|n| n == "acme"), "{namespaces:?}");
    assert!(
        namespaces.iter().all(|n| n == "acme" || n == "beta"),
        "{namespaces:?}"
    );
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE tenant_id = 'acme'"),
        1
    );
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE tenant_id = 'beta'"),
        1
    );
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE tenant_id = 'default'"),
        0
    );
}

#[test]
fn tenants_search_fences_in_d1_as_well_as_in_the_index() {
    // An index that ignored namespaces would still not leak: D1 serves only
    // the asking tenant's chunks. Move B's vectors into A's namespace.
    let w = World::new();
    let a = onboard(&w, "acme", json!({}), &["ingest", "search"]);
    let b = onboard(&w, "beta", json!({}), &["ingest", "search"]);
    put(&w, &a, "d", "acme harbour lanterns");
    put(&w, &b, "d", "beta harbour lanterns");
    w.deliver_all();
    for v in w.index.vectors.borrow_mut().values_mut() {
        v.namespace = "acme".into();
    }
    let hits = search(&w, &a, "harbour lanterns");
    assert_eq!(hits, ["acme harbour lanterns"]);
}

#[test]
fn tenants_scopes_decide_the_routes() {
    let w = World::new();
    let ingest_only = onboard(&w, "acme", json!({}), &["ingest"]);
    let search_only = token(&w, "acme", &["search"]);
    assert_eq!(put(&w, &ingest_only, "d", "text").status, 202);
    let r = put(&w, &search_only, "d", "other text");
    assert_eq!((r.status, code(&r)), (403, "forbidden"));
    let r = call(&w, "GET", "/v1/documents/d", &search_only, None);
    assert_eq!((r.status, code(&r)), (403, "forbidden"));
    let r = call(
        &w,
        "POST",
        "/v1/search",
        &ingest_only,
        Some(json!({ "query": "x" })),
    );
    assert_eq!((r.status, code(&r)), (403, "forbidden"));
    assert_eq!(
        call(
            &w,
            "POST",
            "/v1/search",
            &search_only,
            Some(json!({ "query": "x" }))
        )
        .status,
        200
    );
    // A tenant's token is not the operator's.
    let r = call(&w, "GET", "/v1/admin/tenants", &ingest_only, None);
    assert_eq!((r.status, code(&r)), (403, "forbidden"));
    // A token of the right shape that was never minted.
    let forged = format!("Bearer tkn_{}_{}", "0".repeat(16), "0".repeat(48));
    assert_eq!(put(&w, &forged, "d", "x").status, 401);
    // A minted token's ID with another secret.
    let id = ingest_only
        .trim_start_matches("Bearer tkn_")
        .split('_')
        .next()
        .unwrap();
    let wrong = format!("Bearer tkn_{id}_{}", "f".repeat(48));
    let r = put(&w, &wrong, "d", "x");
    assert_eq!((r.status, code(&r)), (401, "unauthorized"));
}

#[test]
fn tenants_revoked_tokens_are_refused_at_once() {
    let w = World::new();
    let t = onboard(&w, "acme", json!({}), &["ingest", "search"]);
    let keep = token(&w, "acme", &["ingest"]);
    assert_eq!(put(&w, &t, "d", "text").status, 202);
    let list = call(&w, "GET", "/v1/admin/tenants/acme/tokens", ADMIN, None);
    let tokens = list.body["tokens"].as_array().unwrap().clone();
    assert_eq!(tokens.len(), 2);
    assert!(tokens
        .iter()
        .all(|t| t.get("token").is_none() && t.get("token_hash").is_none()));
    let id = t
        .trim_start_matches("Bearer tkn_")
        .split('_')
        .next()
        .unwrap()
        .to_string();
    let r = call(
        &w,
        "DELETE",
        &format!("/v1/admin/tenants/acme/tokens/{id}"),
        ADMIN,
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let revoked_at = r.body["revoked_at"].clone();
    assert!(revoked_at.is_i64());
    let r = call(&w, "GET", "/v1/documents/d", &t, None);
    assert_eq!((r.status, code(&r)), (401, "unauthorized"));
    // The other token still works; revoking again changes nothing.
    assert_eq!(call(&w, "GET", "/v1/documents/d", &keep, None).status, 200);
    w.clock.advance_ms(5_000);
    let again = call(
        &w,
        "DELETE",
        &format!("/v1/admin/tenants/acme/tokens/{id}"),
        ADMIN,
        None,
    );
    assert_eq!(
        (again.status, again.body["revoked_at"].clone()),
        (200, revoked_at)
    );
    let r = call(
        &w,
        "DELETE",
        "/v1/admin/tenants/acme/tokens/0000000000000000",
        ADMIN,
        None,
    );
    assert_eq!((r.status, code(&r)), (404, "token_not_found"));
    // A token is revoked only through its own tenant.
    onboard(&w, "beta", json!({}), &["ingest"]);
    let kid = keep
        .trim_start_matches("Bearer tkn_")
        .split('_')
        .next()
        .unwrap();
    let r = call(
        &w,
        "DELETE",
        &format!("/v1/admin/tenants/beta/tokens/{kid}"),
        ADMIN,
        None,
    );
    assert_eq!((r.status, code(&r)), (404, "token_not_found"));
    assert_eq!(call(&w, "GET", "/v1/documents/d", &keep, None).status, 200);
}

#[test]
fn tenants_disabled_tenants_are_refused_and_keep_their_data() {
    let w = World::new();
    let t = onboard(&w, "acme", json!({}), &["ingest", "search"]);
    assert_eq!(put(&w, &t, "d", "harbour lanterns").status, 202);
    let r = call(&w, "POST", "/v1/admin/tenants/acme/disable", ADMIN, None);
    assert_eq!(
        (r.status, r.body["state"].clone()),
        (200, json!("disabled"))
    );
    // Its queued job still runs; its requests are refused.
    w.deliver_all();
    for (method, path) in [("GET", "/v1/documents/d"), ("POST", "/v1/search")] {
        let r = call(&w, method, path, &t, Some(json!({ "query": "x" })));
        assert_eq!(
            (r.status, code(&r)),
            (401, "tenant_disabled"),
            "{method} {path}"
        );
    }
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE tenant_id = 'acme'"),
        1
    );
    let r = call(&w, "POST", "/v1/admin/tenants/acme/enable", ADMIN, None);
    assert_eq!((r.status, r.body["state"].clone()), (200, json!("active")));
    assert_eq!(
        call(&w, "GET", "/v1/documents/d", &t, None).body["state"],
        "indexed"
    );
    assert_eq!(search(&w, &t, "harbour lanterns"), ["harbour lanterns"]);

    // The built-in default tenant (INGEST_TOKEN) can be disabled too.
    let r = call(&w, "POST", "/v1/admin/tenants/default/disable", ADMIN, None);
    assert_eq!(r.status, 200);
    let r = call(&w, "GET", "/v1/documents/d", INGEST, None);
    assert_eq!((r.status, code(&r)), (401, "tenant_disabled"));
}

#[test]
fn tenants_quotas_refuse_with_429_and_write_nothing() {
    let w = World::new();
    let t = onboard(
        &w,
        "acme",
        json!({ "documents_max": 2, "bytes_max": 40 }),
        &["ingest"],
    );
    assert_eq!(put(&w, &t, "one", "ten bytes!").status, 202);
    assert_eq!(put(&w, &t, "two", "ten bytes!").status, 202);
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = put(&w, &t, "three", "ten bytes!");
    assert_eq!((r.status, code(&r)), (429, "document_quota_exceeded"));
    assert!(r.retry_after.is_some_and(|s| s > 0));
    // A batch that would pass it is refused whole.
    let r = call(
        &w,
        "POST",
        "/v1/documents",
        &t,
        Some(json!({ "documents": [
            { "doc_id": "one", "text": "changed!!!" },
            { "doc_id": "four", "text": "x" },
        ] })),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "nothing written"
    );
    // Bytes: every version's text counts while D1 holds it, history
    // included (20 bytes stored): a new version past 40 is refused, one
    // within them is not, and then even a smaller one is refused, until
    // cron prunes the text its predecessor no longer needs.
    let r = put(&w, &t, "one", &"x".repeat(21));
    assert_eq!((r.status, code(&r)), (429, "byte_quota_exceeded"));
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "nothing written"
    );
    assert_eq!(put(&w, &t, "one", &"y".repeat(20)).status, 202);
    let r = put(&w, &t, "one", "small");
    assert_eq!((r.status, code(&r)), (429, "byte_quota_exceeded"));
    w.deliver_all();
    w.cron();
    let r = call(&w, "GET", "/v1/admin/tenants/acme", ADMIN, None);
    assert_eq!(
        r.body["usage"]["bytes"], 30,
        "one's first text pruned: {}",
        r.body
    );
    // A delete frees a document (and, once pruned, its bytes): then a new
    // one fits.
    assert_eq!(
        call(&w, "DELETE", "/v1/documents/two", &t, None).status,
        202
    );
    w.deliver_all();
    w.cron();
    assert_eq!(put(&w, &t, "three", "ten bytes!").status, 202);
    let r = call(&w, "GET", "/v1/admin/tenants/acme", ADMIN, None);
    assert_eq!(r.body["usage"]["documents"], 2, "{}", r.body);
    assert_eq!(r.body["usage"]["bytes"], 30);
    assert_eq!(r.body["quotas"]["documents_max"], 2);
    assert_eq!(
        r.body["quotas"]["defaults"],
        json!(["requests_per_minute_max"])
    );
    // Other tenants are not affected by acme's quota.
    assert_eq!(put(&w, INGEST, "three", "ten bytes!").status, 202);

    // The operator replaces the quotas: raised, growth fits again; null
    // is the configured default.
    let r = put(&w, &t, "five", "ten bytes!");
    assert_eq!((r.status, code(&r)), (429, "document_quota_exceeded"));
    let r = call(
        &w,
        "PUT",
        "/v1/admin/tenants/acme/quotas",
        ADMIN,
        Some(json!({ "documents_max": 3, "bytes_max": null })),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["quotas"]["documents_max"], 3);
    assert_eq!(r.body["quotas"]["bytes_max"], w.cfg.tenant_bytes_max);
    assert_eq!(
        r.body["quotas"]["defaults"],
        json!(["bytes_max", "requests_per_minute_max"])
    );
    assert_eq!(put(&w, &t, "five", "ten bytes!").status, 202);
    for (body, want) in [
        (json!({ "documents": 3 }), (422, "unknown_field")),
        (json!({ "documents_max": "3" }), (422, "invalid_field")),
        (json!([]), (400, "invalid_body")),
    ] {
        let r = call(
            &w,
            "PUT",
            "/v1/admin/tenants/acme/quotas",
            ADMIN,
            Some(body),
        );
        assert_eq!((r.status, code(&r)), want);
    }
    let r = call(
        &w,
        "PUT",
        "/v1/admin/tenants/nobody/quotas",
        ADMIN,
        Some(json!({})),
    );
    assert_eq!((r.status, code(&r)), (404, "tenant_not_found"));
}

#[test]
fn tenants_a_quota_holds_against_concurrent_writers() {
    // Two intakes that each fit, interleaved so that both read the usage
    // before either writes: the batch's guard lets exactly one through.
    let w = World::new();
    onboard(&w, "acme", json!({ "documents_max": 1 }), &["ingest"]);
    let tenant = ingest_pipeline::core::ids::TenantId::parse("acme").unwrap();
    let item = |doc: &str| {
        ingest_pipeline::pipeline::IntakeItem::Put(ingest_pipeline::pipeline::DocumentInput {
            doc_id: ingest_pipeline::core::ids::DocId::parse(doc).unwrap(),
            text: "text".into(),
            metadata: Default::default(),
            content_type: ingest_pipeline::core::chunk::ContentType::Plain,
        })
    };
    let pa = w.p_over(Interleaved(&w.db));
    let pb = w.p_over(Interleaved(&w.db));
    let (ia, ib) = (vec![item("a")], vec![item("b")]);
    let (ra, rb) = block_on(futures::future::join(
        pa.intake(&tenant, &ia),
        pb.intake(&tenant, &ib),
    ));
    let oks = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
    assert_eq!(oks, 1, "{ra:?} {rb:?}");
    let refused = if ra.is_ok() { rb } else { ra };
    assert_eq!(
        refused.unwrap_err(),
        ingest_pipeline::pipeline::IntakeError::QuotaExceeded(
            ingest_pipeline::pipeline::Quota::Documents
        )
    );
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE tenant_id = 'acme'"),
        1
    );
    assert_eq!(
        w.count("SELECT documents AS n FROM tenants WHERE tenant_id = 'acme'"),
        1
    );
}

#[test]
fn tenants_requests_per_minute_are_limited() {
    let w = World::new();
    w.clock
        .advance_ms(15_000 - w.clock.now_ms().rem_euclid(60_000) + 60_000);
    let t = onboard(
        &w,
        "acme",
        json!({ "requests_per_minute_max": 3 }),
        &["ingest"],
    );
    for _ in 0..3 {
        assert_eq!(call(&w, "GET", "/v1/documents/x", &t, None).status, 404);
    }
    let r = call(&w, "GET", "/v1/documents/x", &t, None);
    assert_eq!((r.status, code(&r)), (429, "rate_limited"));
    assert_eq!(r.retry_after, Some(45), "the seconds left in the minute");
    // Another tenant is not limited by it.
    assert_eq!(call(&w, "GET", "/v1/documents/x", INGEST, None).status, 404);
    let usage = call(&w, "GET", "/v1/admin/tenants/acme", ADMIN, None);
    assert_eq!(usage.body["usage"]["requests_this_minute"], 3);
    w.clock.advance_ms(45_000);
    assert_eq!(call(&w, "GET", "/v1/documents/x", &t, None).status, 404);
}

#[test]
fn tenants_the_platform_holds_at_most_tenants_max() {
    let mut w = World::new();
    w.cfg.tenants_max = 2; // the default tenant and one more
    onboard(&w, "acme", json!({}), &["ingest"]);
    let r = call(
        &w,
        "POST",
        "/v1/admin/tenants",
        ADMIN,
        Some(json!({ "tenant_id": "beta" })),
    );
    assert_eq!((r.status, code(&r)), (409, "tenant_limit"));
    let r = call(
        &w,
        "POST",
        "/v1/admin/tenants",
        ADMIN,
        Some(json!({ "tenant_id": "acme" })),
    );
    assert_eq!((r.status, code(&r)), (409, "tenant_exists"));
    let r = call(
        &w,
        "POST",
        "/v1/admin/tenants",
        ADMIN,
        Some(json!({ "tenant_id": "default" })),
    );
    assert_eq!(
        (r.status, code(&r)),
        (409, "tenant_exists"),
        "the built-in tenant exists"
    );
    let r = call(&w, "GET", "/v1/admin/tenants?limit=1", ADMIN, None);
    assert_eq!(r.body["tenants"][0]["tenant_id"], "acme");
    assert_eq!(r.body["next_cursor"], "acme");
    let r = call(&w, "GET", "/v1/admin/tenants?cursor=acme", ADMIN, None);
    assert_eq!(r.body["tenants"][0]["tenant_id"], "default");
    assert_eq!(r.body["next_cursor"], Value::Null);
}

#[test]
fn tenants_bad_input_on_every_tenant_route_is_a_clear_4xx_and_writes_nothing() {
    let w = World::new();
    onboard(&w, "acme", json!({}), &["ingest"]);
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let long = "a".repeat(65);
    let cases: Vec<(&str, String, &[u8], u16, &str)> = vec![
        (
            "POST",
            "/v1/admin/tenants".into(),
            b"{}",
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            b"not json",
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            b"[]",
            400,
            "invalid_body",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": 7}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": ""}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "Acme"}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "a b"}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            r#"{"tenant_id": "日本"}"#.as_bytes(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            format!(r#"{{"tenant_id": "{long}"}}"#).into_bytes().leak(),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "x", "name": "y"}"#,
            422,
            "unknown_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "x", "quotas": 3}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "x", "quotas": {"docs": 3}}"#,
            422,
            "unknown_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "x", "quotas": {"documents_max": -1}}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "x", "quotas": {"bytes_max": 1.5}}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants".into(),
            br#"{"tenant_id": "acme"}"#,
            409,
            "tenant_exists",
        ),
        (
            "PUT",
            "/v1/admin/tenants".into(),
            b"{}",
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/admin/tenants?limit=0".into(),
            b"",
            422,
            "invalid_field",
        ),
        (
            "GET",
            "/v1/admin/tenants/nobody".into(),
            b"",
            404,
            "tenant_not_found",
        ),
        (
            "GET",
            "/v1/admin/tenants/No%20Body".into(),
            b"",
            422,
            "invalid_field",
        ),
        (
            "GET",
            "/v1/admin/tenants/%ZZ".into(),
            b"",
            400,
            "invalid_path",
        ),
        (
            "POST",
            "/v1/admin/tenants/nobody/disable".into(),
            b"",
            404,
            "tenant_not_found",
        ),
        (
            "POST",
            "/v1/admin/tenants/nobody/enable".into(),
            b"",
            404,
            "tenant_not_found",
        ),
        (
            "GET",
            "/v1/admin/tenants/acme/disable".into(),
            b"",
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            b"{}",
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": []}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": "ingest"}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": ["admin"]}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": ["ingest", "ingest"]}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": [1]}"#,
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            br#"{"scopes": ["ingest"], "ttl": 5}"#,
            422,
            "unknown_field",
        ),
        (
            "POST",
            "/v1/admin/tenants/acme/tokens".into(),
            b"nope",
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/admin/tenants/nobody/tokens".into(),
            br#"{"scopes": ["ingest"]}"#,
            404,
            "tenant_not_found",
        ),
        (
            "GET",
            "/v1/admin/tenants/nobody/tokens".into(),
            b"",
            404,
            "tenant_not_found",
        ),
        (
            "DELETE",
            "/v1/admin/tenants/acme/tokens/nope".into(),
            b"",
            404,
            "token_not_found",
        ),
        (
            "DELETE",
            "/v1/admin/tenants/acme/tokens".into(),
            b"",
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/admin/tenants/acme/secrets".into(),
            b"",
            404,
            "not_found",
        ),
    ];
    for (method, path, body, status, want) in cases {
        let r = raw(&w, method, &path, ADMIN, body);
        assert_eq!((r.status, code(&r)), (status, want), "{method} {path}");
        assert!(r.body["error"]["message"].is_string());
    }
    // Without the admin token, none of them is reached.
    for auth in [INGEST, "Bearer nope", ""] {
        let r = call(
            &w,
            "POST",
            "/v1/admin/tenants",
            auth,
            Some(json!({ "tenant_id": "zed" })),
        );
        assert!(matches!(r.status, 401 | 403), "{auth}: {}", r.status);
    }
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "bad input wrote something"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256).min(2000)
    ))]
    /// Any `tenant_id` and any body: a 201 only for a valid, new ID, else a
    /// 4xx with a code; never a 5xx, and only a 201 writes.
    #[test]
    fn tenants_arbitrary_creations_never_fail_the_server(id in "\\PC{0,70}", extra in proptest::option::of("[a-z_]{1,8}")) {
        let w = World::new();
        let before = w.db.dump(oracle::REQUEST_COUNTERS);
        let mut body = json!({ "tenant_id": id });
        if let Some(k) = &extra {
            body[k.as_str()] = json!(1);
        }
        let r = call(&w, "POST", "/v1/admin/tenants", ADMIN, Some(body));
        let valid = ingest_pipeline::core::ids::TenantId::parse(&id).is_some()
            && id != "default"
            && extra.as_deref().is_none_or(|k| k == "tenant_id");
        if valid {
            proptest::prop_assert_eq!(r.status, 201);
        } else {
            proptest::prop_assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
            proptest::prop_assert!(r.body["error"]["code"].is_string());
            proptest::prop_assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
        }
    }
}

/// Delivers every message; a dead letter is archived as the Worker's queue
/// handler would.
fn deliver_archiving(w: &World) {
    use ingest_pipeline::pipeline::ConsumeOutcome;
    for _ in 0..100 {
        let batch = w.queue.take_all();
        if batch.is_empty() {
            return;
        }
        for m in batch {
            match w.consume(&m) {
                ConsumeOutcome::DeadLetter { .. } => {
                    block_on(w.p().archive_dead_letter(&format!("msg-{}", m.job_id), &m)).unwrap()
                }
                ConsumeOutcome::Retry { delay_seconds } => {
                    w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    w.queue.sent.borrow_mut().push_back(m);
                }
                ConsumeOutcome::Ack { .. } => {}
            }
        }
    }
}

#[test]
fn tenants_operator_tools_filter_by_tenant_and_show_it_on_every_row() {
    use ingest_pipeline::core::failure::FailureBucket;
    let w = World::new();
    let a = onboard(&w, "acme", json!({}), &["ingest", "search"]);
    // The same document fails permanently in the default tenant and in acme.
    put(&w, INGEST, "doc", "default harbour");
    put(&w, &a, "doc", "acme harbour");
    w.index
        .upsert_faults
        .fail_next(2, FailureBucket::IndexRejected);
    deliver_archiving(&w);

    // Dead letters: every row names its tenant and its own doc_id.
    let all = call(&w, "GET", "/v1/admin/dead-letters", ADMIN, None);
    let letters = all.body["letters"].as_array().unwrap().clone();
    assert_eq!(letters.len(), 2, "{}", all.body);
    let mut tenants: Vec<&str> = letters
        .iter()
        .map(|l| l["tenant_id"].as_str().unwrap())
        .collect();
    tenants.sort();
    assert_eq!(tenants, ["acme", "default"]);
    assert!(letters.iter().all(|l| l["doc_id"] == "doc"), "{letters:?}");
    let acme = call(
        &w,
        "GET",
        "/v1/admin/dead-letters?tenant_id=acme",
        ADMIN,
        None,
    );
    let only = acme.body["letters"].as_array().unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["tenant_id"], "acme");
    let by_doc = call(
        &w,
        "GET",
        "/v1/admin/dead-letters?tenant_id=acme&doc_id=doc",
        ADMIN,
        None,
    );
    assert_eq!(by_doc.body["letters"].as_array().unwrap().len(), 1);
    let default_doc = call(&w, "GET", "/v1/admin/dead-letters?doc_id=doc", ADMIN, None);
    assert_eq!(
        default_doc.body["letters"][0]["tenant_id"], "default",
        "doc_id alone: the default tenant's"
    );
    let summary = call(
        &w,
        "GET",
        "/v1/admin/dead-letters/summary?tenant_id=acme",
        ADMIN,
        None,
    );
    let groups = summary.body["groups"].as_array().unwrap();
    assert!(
        !groups.is_empty() && groups.iter().all(|g| g["tenant_id"] == "acme"),
        "{groups:?}"
    );

    // A redrive of acme's letters only: its plan and items show the tenant.
    let pre = call(
        &w,
        "POST",
        "/v1/admin/redrives",
        ADMIN,
        Some(json!({ "filter": { "tenant_id": "acme" } })),
    );
    assert_eq!(pre.status, 200, "{}", pre.body);
    let plan = &pre.body["plan"];
    assert_eq!(plan["matched"], 1);
    assert_eq!(plan["eligible"][0]["tenant_id"], "acme");
    assert_eq!(plan["eligible"][0]["doc_id"], "doc");
    assert_eq!(plan["documents"], json!(["doc"]));
    let run = call(
        &w,
        "POST",
        "/v1/admin/redrives",
        ADMIN,
        Some(json!({ "filter": { "tenant_id": "acme" }, "plan_id": plan["plan_id"] })),
    );
    assert_eq!(run.status, 202, "{}", run.body);
    let items = run.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0]["tenant_id"].clone(), items[0]["doc_id"].clone()),
        (json!("acme"), json!("doc"))
    );
    deliver_archiving(&w);
    assert_eq!(
        call(&w, "GET", "/v1/documents/doc", &a, None).body["state"],
        "indexed"
    );
    assert_eq!(
        call(&w, "GET", "/v1/documents/doc", INGEST, None).body["state"],
        "failed"
    );

    // A backfill of acme's documents only.
    let r = call(
        &w,
        "POST",
        "/v1/admin/reindex",
        ADMIN,
        Some(json!({ "scope": "all", "tenant_id": "acme" })),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["backfill"]["tenant_id"], "acme");
    assert_eq!(r.body["backfill"]["progress"]["total"], 1);
    let r = call(
        &w,
        "POST",
        "/v1/admin/reindex",
        ADMIN,
        Some(json!({ "scope": "config", "tenant_id": "acme" })),
    );
    assert_eq!(
        (r.status, code(&r)),
        (422, "invalid_field"),
        "a generation serves every tenant"
    );
    let listed = call(&w, "GET", "/v1/admin/reindex?tenant_id=acme", ADMIN, None);
    assert_eq!(listed.body["backfills"][0]["tenant_id"], "acme");
    let none = call(&w, "GET", "/v1/admin/reindex?tenant_id=beta", ADMIN, None);
    assert_eq!(none.body["backfills"], json!([]));

    // Repair runs: the tenants each touched, and a filter on them.
    deliver_archiving(&w);
    let lost: Vec<String> = w
        .index
        .vectors
        .borrow()
        .values()
        .filter(|v| v.namespace == "acme")
        .map(|v| v.id.clone())
        .collect();
    assert!(!lost.is_empty());
    for id in &lost {
        w.index.vectors.borrow_mut().remove(id);
    }
    w.clock
        .advance_ms(i64::from(w.cfg.index_visibility_window_seconds) * 1000 + 1);
    let report = w.cron();
    assert_eq!(report.documents_repaired, 1, "{report:?}");
    assert_eq!(report.tenants["acme"].documents_repaired, 1);
    let runs = call(
        &w,
        "GET",
        "/v1/admin/repair/runs?tenant_id=acme",
        ADMIN,
        None,
    );
    let runs = runs.body["runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    assert!(runs
        .iter()
        .all(|r| r["tenants"].as_array().unwrap().contains(&json!("acme"))));
    let beta = call(
        &w,
        "GET",
        "/v1/admin/repair/runs?tenant_id=beta",
        ADMIN,
        None,
    );
    assert_eq!(beta.body["runs"], json!([]));

    // Bad filters are 422s.
    for path in [
        "/v1/admin/dead-letters?tenant_id=Bad",
        "/v1/admin/dead-letters/summary?tenant_id=a%20b",
        "/v1/admin/reindex?tenant_id=",
        "/v1/admin/repair/runs?tenant_id=%F0%9F%98%80",
    ] {
        let r = call(&w, "GET", path, ADMIN, None);
        assert_eq!((r.status, code(&r)), (422, "invalid_field"), "{path}");
    }
    let r = call(
        &w,
        "POST",
        "/v1/admin/redrives",
        ADMIN,
        Some(json!({ "filter": { "tenant_id": 5 } })),
    );
    assert_eq!((r.status, code(&r)), (422, "invalid_field"));
}

#[test]
fn tenants_authentication_costs_one_or_two_d1_calls() {
    // Counted, not timed: INGEST_TOKEN needs the admission UPDATE only; a
    // tenant token its lookup too. A refused token costs its lookup at most.
    let w = World::new();
    let t = onboard(&w, "acme", json!({}), &["ingest"]);
    let calls = |auth: &str| {
        let before = w.db.calls.get();
        // GET of an absent document: one read after authentication.
        call(&w, "GET", "/v1/documents/none", auth, None);
        w.db.calls.get() - before
    };
    assert_eq!(calls(INGEST), 1 + 1);
    assert_eq!(calls(&t), 2 + 1);
    assert_eq!(
        calls("Bearer not-a-token"),
        0,
        "no lookup for a malformed token"
    );
    let forged = format!("Bearer tkn_{}_{}", "0".repeat(16), "0".repeat(48));
    assert_eq!(calls(&forged), 1, "one lookup, then 401");
}
