//! A request body's memory is bounded by its route's shape, not by what a
//! hostile client puts in it (issue 32, defect 2): for every route that
//! reads a body, hostile bodies at the route's cap (a huge array, deep
//! nesting, many keys, long strings, plain and escaped) are answered 4xx,
//! and the Rust heap the whole request takes at its peak stays under a
//! small multiple of the body's size, and under 64 MB at the largest cap
//! (the isolate has 128 MB, Wasm memory included). A `serde_json::Value`
//! of `{"pad": [0,0,…]}` at 12 MB took about 400 MB here.
//!
//! Its own binary: the counting allocator is the process's, and one test
//! measures one request at a time.

use ingest_pipeline::api::body_bytes_max;
use ingest_pipeline::native::heap;
use ingest_pipeline::native::testkit::World;

#[global_allocator]
static ALLOC: heap::Tracking = heap::Tracking;

const INGEST: &str = "Bearer t-ingest";
const ADMIN: &str = "Bearer t-admin";

/// A route that reads a body: method, path, token, and a key of its body
/// that holds a string (hostile values go there as well as under an
/// unknown key).
struct Route {
    method: &'static str,
    path: &'static str,
    auth: &'static str,
    field: &'static str,
}

const ROUTES: &[Route] = &[
    Route {
        method: "PUT",
        path: "/v1/documents/d",
        auth: INGEST,
        field: "text",
    },
    Route {
        method: "POST",
        path: "/v1/documents",
        auth: INGEST,
        field: "documents",
    },
    Route {
        method: "POST",
        path: "/v1/search",
        auth: INGEST,
        field: "query",
    },
    Route {
        method: "POST",
        path: "/v1/syncs",
        auth: INGEST,
        field: "source",
    },
    Route {
        method: "POST",
        path: "/v1/syncs/sy-x/seen",
        auth: INGEST,
        field: "documents",
    },
    Route {
        method: "POST",
        path: "/v1/syncs/sy-x/commit",
        auth: INGEST,
        field: "allow_mass_delete",
    },
    Route {
        method: "POST",
        path: "/v1/admin/reindex",
        auth: ADMIN,
        field: "filter",
    },
    Route {
        method: "POST",
        path: "/v1/admin/redrives",
        auth: ADMIN,
        field: "filter",
    },
    Route {
        method: "POST",
        path: "/v1/admin/tenants",
        auth: ADMIN,
        field: "quotas",
    },
    Route {
        method: "PUT",
        path: "/v1/admin/tenants/acme/quotas",
        auth: ADMIN,
        field: "bytes_max",
    },
    Route {
        method: "POST",
        path: "/v1/admin/tenants/acme/tokens",
        auth: ADMIN,
        field: "scopes",
    },
];

/// `{"<key>": <value>}` of exactly `size` bytes, `value` being `open`,
/// `item`s separated by `sep` as many as fit, spaces, then `close` (the
/// spaces are inside a string when `close` ends one, which is still JSON).
fn body(key: &str, open: &str, item: &str, sep: &str, close: &str, size: usize) -> Vec<u8> {
    let mut out = format!("{{\"{key}\": {open}").into_bytes();
    let tail = format!("{close}}}");
    let mut first = true;
    loop {
        let add = if first {
            item.len()
        } else {
            sep.len() + item.len()
        };
        if out.len() + add + tail.len() > size {
            break;
        }
        if !first {
            out.extend_from_slice(sep.as_bytes());
        }
        out.extend_from_slice(item.as_bytes());
        first = false;
    }
    out.resize(size - tail.len(), b' ');
    out.extend_from_slice(tail.as_bytes());
    out
}

/// Deep nesting: `{"<key>": [[[…]]]}` of `size` bytes.
fn nested(key: &str, size: usize) -> Vec<u8> {
    let depth = (size - key.len() - 8) / 2;
    let mut out = format!("{{\"{key}\": ").into_bytes();
    out.extend(std::iter::repeat_n(b'[', depth));
    out.extend(std::iter::repeat_n(b']', depth));
    out.push(b'}');
    out
}

/// Many keys: `{"k0": 0, "k1": 0, …}` of about `size` bytes, at the top
/// or under `key`.
fn many_keys(key: Option<&str>, size: usize) -> Vec<u8> {
    let mut out = String::from("{");
    if let Some(k) = key {
        out.push_str(&format!("\"{k}\": {{"));
    }
    let mut i = 0u64;
    while out.len() + 24 < size {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("\"k{i}\":0"));
        i += 1;
    }
    out.push('}');
    if key.is_some() {
        out.push('}');
    }
    out.into_bytes()
}

/// The hostile bodies of a route at its cap, each named.
fn hostile(route: &Route, cap: usize) -> Vec<(String, Vec<u8>)> {
    let f = route.field;
    vec![
        (
            "array under an unknown key".into(),
            body("pad", "[", "0", ",", "]", cap),
        ),
        (format!("array at {f}"), body(f, "[", "0", ",", "]", cap)),
        (format!("objects at {f}"), body(f, "[", "{}", ",", "]", cap)),
        (format!("arrays at {f}"), body(f, "[", "[]", ",", "]", cap)),
        (
            "deep nesting under an unknown key".into(),
            nested("pad", cap),
        ),
        (format!("deep nesting at {f}"), nested(f, cap)),
        ("many keys".into(), many_keys(None, cap)),
        (format!("many keys at {f}"), many_keys(Some(f), cap)),
        (
            "long string under an unknown key".into(),
            body("pad", "\"", "x", "", "\"", cap),
        ),
        (
            format!("long string at {f}"),
            body(f, "\"", "x", "", "\"", cap),
        ),
        (
            format!("escaped string at {f}"),
            body(f, "\"", "\\u00e9", "", "\"", cap),
        ),
        (
            "escaped key".into(),
            body("k", "0, \"", "\\u00e9", "", "\": 0", cap),
        ),
    ]
}

#[test]
fn hostile_bodies_at_each_routes_cap_are_refused_within_a_small_multiple_of_their_size() {
    let w = World::new();
    let mut report = Vec::new();
    for route in ROUTES {
        let (cap, setting) = body_bytes_max(&w.cfg, route.method, route.path);
        for (name, bytes) in hostile(route, cap) {
            assert!(
                bytes.len() <= cap,
                "{} {name}: {} > {cap}",
                route.path,
                bytes.len()
            );
            let before = heap::reset_peak();
            let r = w.request(
                route.method,
                route.path,
                Some(route.auth),
                Some("application/json"),
                &bytes,
            );
            let peak = heap::peak().saturating_sub(before);
            // An escaped string at a document's text is a document; a
            // batch answers 200 with each item's refusal.
            let legit = r.status == 202 && name.starts_with("escaped string");
            let items_refused = r.status == 200
                && r.body["results"].as_array().is_some_and(|items| {
                    items.iter().all(|i| {
                        i["status"]
                            .as_u64()
                            .is_some_and(|s| (400..500).contains(&s))
                    })
                });
            assert!(
                (400..500).contains(&r.status) || legit || items_refused,
                "{} {} {name}: {} {}",
                route.method,
                route.path,
                r.status,
                r.body
            );
            // The body itself is the caller's; the request's own memory:
            // the strings it keeps (at most the body's bytes), serde_json's
            // scratch for an escaped one (as much again), and a bounded
            // tree of the shape's values.
            let bound = 3 * bytes.len() + (1 << 20);
            assert!(
                peak <= bound && peak < 64 << 20,
                "{} {} ({setting} = {cap}) {name}: {peak} bytes at the peak, over {bound}",
                route.method,
                route.path
            );
            report.push((route.path, name, bytes.len(), peak));
        }
        // One byte past the cap: 413, nothing parsed.
        let over = vec![b' '; cap + 1];
        let r = w.request(
            route.method,
            route.path,
            Some(route.auth),
            Some("application/json"),
            &over,
        );
        assert_eq!(r.status, 413, "{} {}: {}", route.method, route.path, r.body);
        assert_eq!(r.body["error"]["code"], "payload_too_large");
    }
    for (path, name, size, peak) in report {
        println!(
            "{path:32} {name:36} {size:>10} B body {peak:>10} B peak ({:.2}x)",
            peak as f64 / size as f64
        );
    }
}
