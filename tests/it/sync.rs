//! Source sync through the API: unchanged documents count as seen, a
//! document removed at the source is deleted after the commit (and no
//! longer served), an expired session deletes nothing, the mass-delete
//! guard, a superseded session, a commit in progress that keeps what a
//! later session saw, bad input (a clear 4xx, nothing written), tenant
//! isolation, and a crash before or after every D1 call of a commit.

use crate::common::World;
use futures::executor::block_on;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::config::Config;
use ingest_pipeline::core::chunk::ContentType;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::ids::{DocId, TenantId};
use ingest_pipeline::native::SqliteDb;
use ingest_pipeline::pipeline::{content_hash, DocumentInput, DocumentState};
use ingest_pipeline::ports::{Database, PortError, Rows, SqlValue, Stmt};
use ingest_pipeline::store::sql;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};

const ADMIN: &str = "Bearer t-admin";
const INGEST: &str = "Bearer t-ingest";

fn call_as(w: &World, auth: &str, method: &str, path: &str, body: Option<Value>) -> ApiResponse {
    w.request_json(method, path, auth, body.as_ref())
}

fn call(w: &World, method: &str, path: &str, body: Option<Value>) -> ApiResponse {
    call_as(w, INGEST, method, path, body)
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

fn text_of(doc: &str) -> String {
    format!("The document {doc} holds its own words: {doc} alpha {doc} beta {doc} gamma.")
}

fn open(w: &World, source: &str) -> String {
    let r = call(w, "POST", "/v1/syncs", Some(json!({ "source": source })));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["state"], "open");
    assert_eq!(r.body["source"], source);
    r.body["sync_id"].as_str().unwrap().to_string()
}

fn put(w: &World, doc: &str, text: &str, source: &str, sync: &str) -> ApiResponse {
    call(
        w,
        "PUT",
        &format!("/v1/documents/{doc}"),
        Some(json!({ "text": text, "source": source, "sync_id": sync })),
    )
}

fn commit(w: &World, sync: &str, body: Option<Value>) -> ApiResponse {
    call(w, "POST", &format!("/v1/syncs/{sync}/commit"), body)
}

fn view(w: &World, sync: &str) -> Value {
    let r = call(w, "GET", &format!("/v1/syncs/{sync}"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// Writes `docs` into source `source` in one committed session (nothing
/// deleted), indexed.
fn seed(w: &World, source: &str, docs: &[&str]) {
    let s = open(w, source);
    for d in docs {
        let r = put(w, d, &text_of(d), source, &s);
        assert!(r.status == 202 || r.status == 200, "{}", r.body);
    }
    let r = commit(w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    // A commit that settles no page per request ends in the cron.
    for _ in 0..3 {
        if view(w, &s)["state"] == "committed" {
            break;
        }
        w.cron();
    }
    assert_eq!(view(w, &s)["state"], "committed");
    w.deliver_all();
}

/// The ledger's rows but the tenants' request counters (which every API
/// call moves).
fn rows(w: &World) -> String {
    w.db.dump(&["rate_minute", "rate_requests"])
}

fn hash_of(text: &str) -> String {
    content_hash(&DocumentInput {
        doc_id: DocId::parse("x").unwrap(),
        text: text.into(),
        metadata: Map::new(),
        content_type: ContentType::Plain,
    })
}

fn mark_seen(w: &World, sync: &str, docs: &[(&str, String)]) -> ApiResponse {
    let documents: Vec<Value> = docs
        .iter()
        .map(|(d, h)| json!({ "doc_id": d, "content_hash": h }))
        .collect();
    call(
        w,
        "POST",
        &format!("/v1/syncs/{sync}/seen"),
        Some(json!({ "documents": documents })),
    )
}

fn served(w: &World, doc: &str) -> bool {
    w.search(&text_of(doc), 10)
        .iter()
        .any(|h| h.doc_id == doc && h.text.contains(&format!("{doc} alpha")))
}

#[test]
fn sync_unchanged_documents_are_seen_and_a_removed_one_is_deleted_after_the_commit() {
    let w = World::new();
    seed(&w, "docs", &["a", "b", "c"]);
    assert!(served(&w, "c"));

    let s = open(&w, "docs");
    // Sent unchanged: 200 unchanged, and seen.
    let r = put(&w, "a", &text_of("a"), "docs", &s);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["unchanged"], true);
    // Marked seen by its content hash, without its text; a wrong hash is not.
    let r = mark_seen(
        &w,
        &s,
        &[("b", hash_of(&text_of("b"))), ("c", hash_of("other"))],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["results"],
        json!([{ "doc_id": "b", "seen": true }, { "doc_id": "c", "seen": false }])
    );
    assert_eq!(view(&w, &s)["seen"], 2);
    assert!(served(&w, "c"), "nothing is deleted before the commit");

    let r = commit(&w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["state"], "committed");
    assert_eq!(r.body["seen"], 2);
    assert_eq!(r.body["to_delete"], 1);
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(r.body["pending"], 0);
    w.deliver_all();
    assert_eq!(w.state("c"), DocumentState::Deleted);
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(w.state("b"), DocumentState::Indexed);
    assert!(
        !served(&w, "c"),
        "the removed document's text is no longer served"
    );
    assert!(served(&w, "a") && served(&w, "b"));

    // Commit is idempotent: again, the same answer, nothing more written.
    let before = rows(&w);
    let again = commit(&w, &s, None);
    assert_eq!(again.status, 202);
    assert_eq!(again.body, r.body);
    assert!(rows(&w) == before, "an idempotent commit writes nothing");
    // The committed session takes no more writes.
    let r = put(&w, "d", &text_of("d"), "docs", &s);
    assert_eq!((r.status, code(&r)), (409, "sync_not_open"), "{}", r.body);
    let r = mark_seen(&w, &s, &[("a", hash_of(&text_of("a")))]);
    assert_eq!((r.status, code(&r)), (409, "sync_not_open"), "{}", r.body);
}

#[test]
fn sync_an_expired_session_deletes_nothing_and_shows_expired() {
    let w = World::new();
    seed(&w, "docs", &["a", "b"]);
    let s = open(&w, "docs");
    put(&w, "a", &text_of("a"), "docs", &s);
    w.clock
        .advance_ms(w.cfg.sync_session_ttl_seconds as i64 * 1000 + 1);
    assert_eq!(view(&w, &s)["state"], "expired", "visible at once");
    let r = put(&w, "c", &text_of("c"), "docs", &s);
    assert_eq!((r.status, code(&r)), (409, "sync_not_open"), "{}", r.body);
    let r = commit(&w, &s, None);
    assert_eq!((r.status, code(&r)), (409, "sync_expired"), "{}", r.body);
    let report = w.cron();
    assert_eq!(report.syncs_expired, 1);
    assert_eq!(view(&w, &s)["state"], "expired");
    w.deliver_all();
    assert_eq!(w.state("b"), DocumentState::Indexed);
    assert!(served(&w, "b"));
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE doc_id = 'c'"),
        0
    );
}

#[test]
fn sync_the_mass_delete_guard_refuses_more_than_the_share_unless_allowed() {
    let w = World::new();
    seed(&w, "docs", &["a", "b", "c", "d"]);
    // Half the source: at the default 50%, allowed.
    let s = open(&w, "docs");
    put(&w, "a", &text_of("a"), "docs", &s);
    put(&w, "b", &text_of("b"), "docs", &s);
    put(&w, "e", &text_of("e"), "docs", &s);
    // a, b, e seen of a..e: 2 of 5 deleted.
    let r = commit(&w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["to_delete"], 2);
    w.deliver_all();

    // Now a, b, e: a session that saw only a would delete 2 of 3 (67%).
    let s = open(&w, "docs");
    put(&w, "a", &text_of("a"), "docs", &s);
    let before = rows(&w);
    let r = commit(&w, &s, None);
    assert_eq!(
        (r.status, code(&r)),
        (409, "sync_delete_guard"),
        "{}",
        r.body
    );
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("2 of the source's 3"), "{msg}");
    assert!(rows(&w) == before, "a refused commit writes nothing");
    assert_eq!(view(&w, &s)["state"], "open", "and leaves the session open");
    let r = commit(&w, &s, Some(json!({ "allow_mass_delete": true })));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["deleted"], 2);
    w.deliver_all();
    assert_eq!(w.state("b"), DocumentState::Deleted);
    assert_eq!(w.state("e"), DocumentState::Deleted);
    assert_eq!(w.state("a"), DocumentState::Indexed);

    // A stricter share is configurable.
    let w = World::with(Config {
        sync_delete_share_max_percent: 0,
        embedding_dimensions: 64,
        ..Config::default()
    });
    seed(&w, "docs", &["a", "b"]);
    let s = open(&w, "docs");
    put(&w, "a", &text_of("a"), "docs", &s);
    let r = commit(&w, &s, None);
    assert_eq!(
        (r.status, code(&r)),
        (409, "sync_delete_guard"),
        "{}",
        r.body
    );
}

#[test]
fn sync_the_later_commit_wins_and_the_earlier_session_is_superseded() {
    let w = World::new();
    seed(&w, "docs", &["a", "b", "c", "d"]);
    let s1 = open(&w, "docs");
    let s2 = open(&w, "docs");
    for d in ["a", "b", "c"] {
        put(&w, d, &text_of(d), "docs", &s1);
    }
    for d in ["a", "b", "d"] {
        put(&w, d, &text_of(d), "docs", &s2);
    }
    let r = commit(&w, &s2, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(view(&w, &s1)["state"], "superseded");
    let r = commit(&w, &s1, None);
    assert_eq!((r.status, code(&r)), (409, "sync_superseded"), "{}", r.body);
    let r = put(&w, "a", &text_of("a"), "docs", &s1);
    assert_eq!((r.status, code(&r)), (409, "sync_not_open"), "{}", r.body);
    w.deliver_all();
    assert_eq!(w.state("c"), DocumentState::Deleted);
    assert_eq!(
        w.state("d"),
        DocumentState::Indexed,
        "the later session saw d"
    );

    // An earlier session that commits first deletes nothing a later open
    // session saw: e is kept, f (seen by neither) is deleted.
    seed(&w, "site", &["e", "f", "g", "h"]);
    let early = open(&w, "site");
    let late = open(&w, "site");
    put(&w, "g", &text_of("g"), "site", &early);
    put(&w, "h", &text_of("h"), "site", &early);
    put(&w, "e", &text_of("e"), "site", &late);
    let r = commit(&w, &early, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["to_delete"], 2);
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(r.body["kept"], 1);
    w.deliver_all();
    assert_eq!(w.state("e"), DocumentState::Indexed);
    assert_eq!(w.state("f"), DocumentState::Deleted);
    // Sources are separate: committing "site" touched nothing of "docs".
    assert_eq!(w.state("a"), DocumentState::Indexed);
}

#[test]
fn sync_a_commit_in_progress_keeps_what_a_later_session_saw_or_a_newer_version_replaced() {
    let w = World::with(Config {
        sync_commit_page_size: 1,
        sync_commit_pages_per_request: 0,
        sync_delete_share_max_percent: 100,
        chunk_size_max_tokens: 160,
        chunk_overlap_tokens: 16,
        embedding_dimensions: 64,
        ..Config::default()
    });
    seed(&w, "docs", &["a", "b", "c", "d"]);
    let s = open(&w, "docs");
    put(&w, "a", &text_of("a"), "docs", &s);
    let r = commit(&w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["state"], "committing");
    assert_eq!(r.body["to_delete"], 3);
    assert_eq!(r.body["pending"], 3);
    // Meanwhile: a later session sees b, and c gets a new version.
    let later = open(&w, "docs");
    put(&w, "b", &text_of("b"), "docs", &later);
    let r = call(
        &w,
        "PUT",
        "/v1/documents/c",
        Some(json!({ "text": "c, rewritten at the source" })),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    // The cron continues the commit, a page at a time.
    let report = w.cron();
    assert_eq!(report.sync_pages, 3);
    let v = view(&w, &s);
    assert_eq!(v["state"], "committed", "{v}");
    assert_eq!(
        (v["deleted"].as_u64(), v["kept"].as_u64()),
        (Some(1), Some(2))
    );
    w.deliver_all();
    assert_eq!(w.state("b"), DocumentState::Indexed);
    assert_eq!(w.state("c"), DocumentState::Indexed);
    assert_eq!(w.state("d"), DocumentState::Deleted);
}

#[test]
fn sync_bad_requests_get_a_clear_4xx_and_write_nothing() {
    let w = World::new();
    let s = open(&w, "docs");
    let before = rows(&w);
    let long = "s".repeat(129);
    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({})),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({ "source": "" })),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({ "source": long })),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({ "source": "a\u{7}b" })),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({ "source": 7 })),
            422,
            "invalid_field",
        ),
        (
            "POST",
            "/v1/syncs".into(),
            Some(json!({ "source": "x", "y": 1 })),
            422,
            "unknown_field",
        ),
        (
            "GET",
            "/v1/syncs/sy-nope".into(),
            None,
            404,
            "sync_not_found",
        ),
        (
            "POST",
            "/v1/syncs/sy-nope/commit".into(),
            None,
            404,
            "sync_not_found",
        ),
        (
            "DELETE",
            format!("/v1/syncs/{s}"),
            None,
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            format!("/v1/syncs/{s}/commit"),
            None,
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            format!("/v1/syncs/{s}/commit"),
            Some(json!({ "allow_mass_delete": "yes" })),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a".into(),
            Some(json!({ "text": "t", "sync_id": s })),
            422,
            "invalid_field",
        ),
        (
            "PUT",
            "/v1/documents/a".into(),
            Some(json!({ "text": "t", "source": "other", "sync_id": s })),
            409,
            "sync_not_open",
        ),
        (
            "PUT",
            "/v1/documents/a".into(),
            Some(json!({ "text": "t", "source": "docs", "sync_id": "sy-unknown" })),
            409,
            "sync_not_open",
        ),
        (
            "POST",
            format!("/v1/syncs/{s}/seen"),
            Some(json!({ "documents": [{ "doc_id": "a", "content_hash": "xyz" }] })),
            422,
            "invalid_field",
        ),
        (
            "POST",
            format!("/v1/syncs/{s}/seen"),
            Some(json!({ "documents": [] })),
            422,
            "invalid_field",
        ),
    ];
    for (method, path, body, status, want) in cases {
        let r = call(&w, method, &path, body.clone());
        assert_eq!(
            (r.status, code(&r)),
            (status, want),
            "{method} {path} {body:?}: {}",
            r.body
        );
    }
    assert!(rows(&w) == before, "nothing was written");

    // A batch whose items name different sources: those items are refused.
    let r = call(
        &w,
        "POST",
        "/v1/documents",
        Some(json!({ "documents": [
            { "doc_id": "a", "text": text_of("a"), "source": "docs", "sync_id": s },
            { "doc_id": "b", "text": text_of("b"), "source": "other" },
        ] })),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["results"][0]["status"], 202);
    assert_eq!(r.body["results"][1]["status"], 422);
    assert_eq!(
        w.count("SELECT count(*) AS n FROM documents WHERE doc_id = 'b'"),
        0
    );
    assert_eq!(view(&w, &s)["seen"], 1);
}

#[test]
fn sync_a_session_is_its_tenants_alone() {
    let w = World::new();
    let r = call_as(
        &w,
        ADMIN,
        "POST",
        "/v1/admin/tenants",
        Some(json!({ "tenant_id": "acme" })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = call_as(
        &w,
        ADMIN,
        "POST",
        "/v1/admin/tenants/acme/tokens",
        Some(json!({ "scopes": ["ingest", "search"] })),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let acme = format!("Bearer {}", r.body["token"].as_str().unwrap());

    seed(&w, "docs", &["a", "b"]);
    let s = open(&w, "docs");
    let r = call_as(&w, &acme, "GET", &format!("/v1/syncs/{s}"), None);
    assert_eq!((r.status, code(&r)), (404, "sync_not_found"));
    let r = call_as(&w, &acme, "POST", &format!("/v1/syncs/{s}/commit"), None);
    assert_eq!((r.status, code(&r)), (404, "sync_not_found"));
    let r = call_as(
        &w,
        &acme,
        "PUT",
        "/v1/documents/x",
        Some(json!({ "text": "x", "source": "docs", "sync_id": s })),
    );
    assert_eq!((r.status, code(&r)), (409, "sync_not_open"), "{}", r.body);
    // acme's own session of a source of the same name sees none of the
    // default tenant's documents, and deletes none.
    let mine = call_as(
        &w,
        &acme,
        "POST",
        "/v1/syncs",
        Some(json!({ "source": "docs" })),
    );
    let mine = mine.body["sync_id"].as_str().unwrap().to_string();
    let r = call_as(&w, &acme, "POST", &format!("/v1/syncs/{mine}/commit"), None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["to_delete"], 0);
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(w.state("b"), DocumentState::Indexed);
}

/// A ledger that crashes at its `at`-th call (counted from 1): before the
/// call has any effect, or after it took effect (the caller never hears).
struct CrashAt<'a> {
    db: &'a ingest_pipeline::native::SqliteDb,
    calls: Cell<usize>,
    at: usize,
    after: bool,
}

impl CrashAt<'_> {
    fn tick(&self) -> bool {
        let n = self.calls.get() + 1;
        self.calls.set(n);
        n == self.at
    }
    fn crash() -> PortError {
        PortError::new(FailureBucket::DbUnavailable, "crash")
    }
}

impl Database for CrashAt<'_> {
    async fn query_billed<T: DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, Rows), PortError> {
        if self.tick() {
            if self.after {
                let _ = self.db.query::<Value>(stmt).await;
            }
            return Err(Self::crash());
        }
        self.db.query_billed(stmt).await
    }
    async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
        if self.tick() {
            if self.after {
                let _ = self.db.execute_billed(stmt).await;
            }
            return Err(Self::crash());
        }
        self.db.execute_billed(stmt).await
    }
    async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
        if self.tick() {
            if self.after {
                let _ = self.db.batch_billed(stmts).await;
            }
            return Err(Self::crash());
        }
        self.db.batch_billed(stmts).await
    }
}

/// The world after a commit that deletes 3 of 6 documents in pages of 1,
/// crashed at call `crash` (before or after it), then retried until it
/// answers: the session's figures and every document's state.
fn crashed_commit(crash: Option<(usize, bool)>) -> (Value, Vec<DocumentState>, usize) {
    let w = World::with(Config {
        sync_commit_page_size: 1,
        sync_commit_pages_per_request: 10,
        chunk_size_max_tokens: 160,
        chunk_overlap_tokens: 16,
        embedding_dimensions: 64,
        ..Config::default()
    });
    let docs = ["a", "b", "c", "d", "e", "f"];
    seed(&w, "docs", &docs);
    let s = open(&w, "docs");
    for d in ["a", "c", "e"] {
        put(&w, d, &text_of(d), "docs", &s);
    }
    let tenant = TenantId::default_tenant();
    let crashing = CrashAt {
        db: &w.db,
        calls: Cell::new(0),
        at: crash.map_or(0, |c| c.0),
        after: crash.is_some_and(|c| c.1),
    };
    let first = block_on(w.p_over(&crashing).commit_sync(&tenant, &s, false));
    let calls = crashing.calls.get();
    if crash.is_none() {
        assert!(first.is_ok(), "an uncrashed commit answers");
    }
    // The client retries; the cron would too.
    let mut answer = None;
    for _ in 0..5 {
        let r = commit(&w, &s, None);
        assert_eq!(r.status, 202, "{}", r.body);
        if r.body["state"] == "committed" {
            answer = Some(r.body);
            break;
        }
    }
    let mut answer = answer.expect("the retried commit ends");
    for k in ["sync_id", "committed_at", "finished_at"] {
        answer.as_object_mut().unwrap().remove(k);
    }
    // A tombstone whose pointer a crash kept from the queue is sent again
    // by the cron once its job stalls.
    w.deliver_all();
    w.clock
        .advance_ms(i64::from(w.cfg.job_stall_seconds) * 1000 + 1);
    w.cron();
    w.deliver_all();
    let states = docs.iter().map(|d| w.state(d)).collect();
    (answer, states, calls)
}

#[test]
fn sync_a_crash_before_or_after_any_call_of_a_commit_ends_the_same() {
    let (reference, states, calls) = crashed_commit(None);
    assert_eq!(reference["deleted"], 3, "{reference}");
    assert_eq!(reference["kept"], 0);
    use DocumentState::{Deleted, Indexed};
    assert_eq!(
        states,
        [Indexed, Deleted, Indexed, Deleted, Indexed, Deleted]
    );
    assert!(calls >= 10, "the commit makes {calls} calls");
    for at in 1..=calls {
        for after in [false, true] {
            let (answer, got, _) = crashed_commit(Some((at, after)));
            assert_eq!(answer, reference, "crash at call {at} (after: {after})");
            assert_eq!(got, states, "crash at call {at} (after: {after})");
        }
    }
}

/// Defect: a commit deleted a document written into its source, outside
/// any session, after the session opened (`SYNC_PLAN_DELETES` never
/// looked at when the document was written). The README's recipe: nine
/// documents in session S, `late` written with only `"source"`, commit.
#[test]
fn sync_a_plain_write_into_the_source_during_a_session_is_not_deleted_by_its_commit() {
    let w = World::new();
    let s = open(&w, "s");
    for i in 1..=9 {
        let d = format!("d{i}");
        let r = put(&w, &d, &text_of(&d), "s", &s);
        assert_eq!(r.status, 202, "{}", r.body);
    }
    let r = call(
        &w,
        "PUT",
        "/v1/documents/late",
        Some(json!({ "text": text_of("late"), "source": "s" })),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let r = commit(&w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["to_delete"], 0, "{}", r.body);
    w.deliver_all();
    assert_eq!(w.state("late"), DocumentState::Indexed);
    assert!(served(&w, "late"));

    // The next session that does not see it deletes it: it was written
    // before that session opened.
    let s2 = open(&w, "s");
    for i in 1..=9 {
        let d = format!("d{i}");
        put(&w, &d, &text_of(&d), "s", &s2);
    }
    let r = commit(&w, &s2, None);
    assert_eq!(
        (r.status, r.body["deleted"].as_u64()),
        (202, Some(1)),
        "{}",
        r.body
    );
    w.deliver_all();
    assert_eq!(w.state("late"), DocumentState::Deleted);
}

/// The other orders of a write and a session: a plain unchanged write
/// into the source, and a plain write without a source of a member, both
/// during the session, are kept; a write of an older session that is
/// still open is the older session's view (the later session wins); a
/// document deleted during the session stays deleted, once.
#[test]
fn sync_writes_around_a_session_are_kept_or_deleted_by_when_and_how_they_were_written() {
    let w = World::new();
    seed(
        &w,
        "s",
        &[
            "kept-unchanged",
            "kept-edited",
            "by-older",
            "gone",
            "deleted",
        ],
    );
    let older = open(&w, "s");
    let s = open(&w, "s");
    // Unchanged, with only the source: 200 unchanged, but a write.
    let r = call(
        &w,
        "PUT",
        "/v1/documents/kept-unchanged",
        Some(json!({ "text": text_of("kept-unchanged"), "source": "s" })),
    );
    assert_eq!(
        (r.status, &r.body["unchanged"]),
        (200, &json!(true)),
        "{}",
        r.body
    );
    // A new version without any source: still a member of s.
    let r = call(
        &w,
        "PUT",
        "/v1/documents/kept-edited",
        Some(json!({ "text": "kept-edited, rewritten by hand" })),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    // The older session's write lands after s opened: its view, not news.
    let r = put(&w, "by-older", &text_of("by-older"), "s", &older);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&w, "DELETE", "/v1/documents/deleted", None);
    assert_eq!(r.status, 202, "{}", r.body);
    let r = commit(&w, &s, Some(json!({ "allow_mass_delete": true })));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        (r.body["to_delete"].as_u64(), r.body["deleted"].as_u64()),
        (Some(2), Some(2)),
        "by-older and gone: {}",
        r.body
    );
    w.deliver_all();
    assert_eq!(w.state("kept-unchanged"), DocumentState::Indexed);
    assert_eq!(w.state("kept-edited"), DocumentState::Indexed);
    assert_eq!(w.state("by-older"), DocumentState::Deleted);
    assert_eq!(w.state("gone"), DocumentState::Deleted);
    assert_eq!(w.state("deleted"), DocumentState::Deleted);
}

/// A plain write that lands while a commit pages through its plan keeps
/// the document: before the page is read (the read keeps it), and between
/// the read and the page's tombstones (their batch's guard aborts, and the
/// next read keeps it).
#[test]
fn sync_a_plain_write_during_the_commits_paging_keeps_the_document() {
    let w = World::with(Config {
        sync_commit_page_size: 1,
        sync_commit_pages_per_request: 0,
        sync_delete_share_max_percent: 100,
        ..Config::default()
    });
    seed(&w, "s", &["a", "b", "c"]);
    let s = open(&w, "s");
    let r = commit(&w, &s, None);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["to_delete"], 3, "{}", r.body);
    // Before the first page: `a` unchanged with only its source.
    let r = call(
        &w,
        "PUT",
        "/v1/documents/a",
        Some(json!({ "text": text_of("a"), "source": "s" })),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Between the read of `b`'s page and its tombstone: `b` unchanged with
    // only its source (its statement, as intake binds it for a plain write).
    let db = crate::common::Hooked {
        db: &w.db,
        before: sql::SYNC_RETIRE_GUARD,
        hook: RefCell::new(Some(Box::new(|db: &SqliteDb| {
            let _: Vec<Value> = db.inspect(
                sql::SOURCE_SET_DOCUMENTS,
                vec![
                    "default".into(),
                    "s".into(),
                    r#"["b"]"#.into(),
                    SqlValue::Int(1),
                ],
            );
        }))),
    };
    let report = block_on(w.p_over(db).repair());
    assert_eq!(report.sync_pages, 1, "the page of b stopped at its guard");
    let report = w.cron();
    assert_eq!(report.sync_pages, 2, "b read again, then c");
    let v = view(&w, &s);
    assert_eq!(v["state"], "committed", "{v}");
    assert_eq!(
        (v["deleted"].as_u64(), v["kept"].as_u64()),
        (Some(1), Some(2)),
        "{v}"
    );
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(w.state("b"), DocumentState::Indexed);
    assert_eq!(w.state("c"), DocumentState::Deleted);
}
