//! Property tests of request bodies: arbitrary JSON (with the routes' own
//! keys mixed in, nested, in arrays, at every type) to every route that
//! reads a body is never answered 5xx, and an answer that refuses it
//! changes nothing in the ledger (`PROPTEST_CASES` per property). The
//! bounded parser (`api/body.rs`) keeps a body's memory to its route's
//! shape; these prove it keeps the routes' answers to bad input too.

use crate::common::{oracle, World};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Keys the routes read, and a few they do not.
const KEYS: &[&str] = &[
    "text",
    "doc_id",
    "metadata",
    "content_type",
    "source",
    "sync_id",
    "documents",
    "query",
    "top_k",
    "mode",
    "highlight",
    "filter",
    "allow_mass_delete",
    "content_hash",
    "scope",
    "page_size",
    "tenant_id",
    "bucket",
    "since",
    "until",
    "doc_ids",
    "canary_size",
    "plan_id",
    "quotas",
    "bytes_max",
    "documents_max",
    "scopes",
    "lang",
    "x",
    "",
];

/// Routes that read a body: method, path, token.
const ROUTES: &[(&str, &str, &str)] = &[
    ("PUT", "/v1/documents/d", "Bearer t-ingest"),
    ("POST", "/v1/documents", "Bearer t-ingest"),
    ("POST", "/v1/search", "Bearer t-ingest"),
    ("POST", "/v1/syncs", "Bearer t-ingest"),
    ("POST", "/v1/syncs/sy-x/seen", "Bearer t-ingest"),
    ("POST", "/v1/syncs/sy-x/commit", "Bearer t-ingest"),
    ("POST", "/v1/admin/reindex", "Bearer t-admin"),
    ("POST", "/v1/admin/redrives", "Bearer t-admin"),
    ("POST", "/v1/admin/tenants", "Bearer t-admin"),
    ("PUT", "/v1/admin/tenants/default/quotas", "Bearer t-admin"),
    ("POST", "/v1/admin/tenants/default/tokens", "Bearer t-admin"),
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        proptest::sample::select(
            &[
                "all",
                "filter",
                "config",
                "hybrid",
                "ingest",
                "search",
                "text/markdown"
            ][..]
        )
        .prop_map(|s| Value::String(s.into())),
        "\\PC{0,12}".prop_map(Value::String),
        "[a-f0-9]{64}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |entries| {
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect::<Map<String, Value>>(),
                    )
                }
            ),
        ]
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn body_props_arbitrary_json_is_never_a_5xx_and_a_refusal_writes_nothing(
        route in 0..ROUTES.len(),
        body in json(),
    ) {
        let (method, path, auth) = ROUTES[route];
        let w = World::new();
        let before = w.db.dump(oracle::REQUEST_COUNTERS);
        let r = w.request(method, path, Some(auth), Some("application/json"), body.to_string().as_bytes());
        prop_assert!(r.status < 500, "{method} {path} {body}: {} {}", r.status, r.body);
        let refused = r.status >= 400
            || r.body["results"].as_array().is_some_and(|items| {
                items.iter().all(|i| i["status"].as_u64().is_some_and(|s| s >= 400))
            });
        if refused {
            prop_assert!(r.body["error"]["code"].is_string() || r.body["results"].is_array());
            prop_assert_eq!(before, w.db.dump(oracle::REQUEST_COUNTERS), "{} {} {}", method, path, body);
        }
    }
}
