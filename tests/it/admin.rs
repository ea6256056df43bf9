//! Dead letters, diagnosis, canary redrives and repair-run reports, through
//! the HTTP contract (`/v1/admin/*`, admin token only).

use crate::common;
use crate::common::default_key;

use crate::common::{oracle, World};
use futures::executor::block_on;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentState};
use ingest_pipeline::ports::JobMessage;
use serde_json::{json, Value};

const ADMIN: &str = "Bearer t-admin";
const INGEST: &str = "Bearer t-ingest";

fn call(w: &World, method: &str, path: &str, auth: &str, body: Option<Value>) -> ApiResponse {
    w.request_json(method, path, auth, body.as_ref())
}

/// `PUT /v1/documents/{doc}` of plain `text`, with the ingest token.
fn put(w: &World, doc: &str, text: impl AsRef<str>) -> ApiResponse {
    call(
        w,
        "PUT",
        &format!("/v1/documents/{doc}"),
        INGEST,
        Some(json!({"text": text.as_ref()})),
    )
}

/// `POST /v1/admin/redrives` of `body`: a preflight, or with a `plan_id` an
/// execution.
fn redrives(w: &World, body: Value) -> ApiResponse {
    call(w, "POST", "/v1/admin/redrives", ADMIN, Some(body))
}

/// `GET /v1/admin/redrives/{id}`.
fn redrive(w: &World, id: &str) -> ApiResponse {
    call(w, "GET", &format!("/v1/admin/redrives/{id}"), ADMIN, None)
}

/// The plan id of a preflight's answer.
fn plan_id(r: &ApiResponse) -> String {
    r.body["plan"]["plan_id"].as_str().unwrap().to_string()
}

/// A world where document `a` was put (`text`) and the index rejects its
/// first upsert (a permanent failure); returns it and `a`'s message, taken
/// from the queue, not yet delivered.
fn a_rejected_message(text: &str) -> (World, JobMessage) {
    let w = World::new();
    put(&w, "a", text);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    let msg = w.queue.take_all().remove(0);
    (w, msg)
}

/// Delivers messages like the Worker's queue handler: a dead letter is
/// archived (message id = job id here) and acknowledged.
fn deliver(w: &World) -> Vec<ConsumeOutcome> {
    let mut out = Vec::new();
    for _ in 0..100 {
        let batch = w.queue.take_all();
        if batch.is_empty() {
            break;
        }
        for m in batch {
            let o = w.consume(&m);
            match o {
                ConsumeOutcome::DeadLetter { .. } => {
                    block_on(w.p().archive_dead_letter(&format!("msg-{}", m.job_id), &m)).unwrap()
                }
                ConsumeOutcome::Retry { delay_seconds } => {
                    w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    w.queue.sent.borrow_mut().push_back(m);
                }
                ConsumeOutcome::Ack { .. } => {}
            }
            out.push(o);
        }
    }
    out
}

#[test]
fn admin_routes_need_the_admin_token() {
    let w = World::new();
    let r = call(&w, "GET", "/v1/admin/dead-letters/summary", INGEST, None);
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let r = call(
        &w,
        "GET",
        "/v1/admin/dead-letters/summary",
        "Bearer nope",
        None,
    );
    assert_eq!(r.status, 401);
    let r = call(&w, "GET", "/v1/admin/dead-letters/summary", ADMIN, None);
    assert_eq!((r.status, r.body.clone()), (200, json!({ "groups": [] })));
    // And the admin token is not an ingest token.
    assert_eq!(call(&w, "GET", "/v1/documents/x", ADMIN, None).status, 401);
}

#[test]
fn a_permanent_failure_is_archived_diagnosed_and_redriven_by_canary() {
    let w = World::new();
    assert_eq!(put(&w, "a", "alpha bravo charlie").status, 202);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    assert_eq!(
        deliver(&w),
        vec![ConsumeOutcome::DeadLetter { reason: "failed" }]
    );
    assert_eq!(w.state("a"), DocumentState::Failed);

    // Read-only diagnosis.
    let r = call(&w, "GET", "/v1/admin/dead-letters/summary", ADMIN, None);
    let g = &r.body["groups"][0];
    assert_eq!(
        (
            g["failure_bucket"].as_str(),
            g["version_is_latest"].as_i64(),
            g["letters"].as_i64()
        ),
        (Some("index_rejected"), Some(1), Some(1))
    );
    assert_eq!(g["chunk_count_bucket"], "0-10");
    let r = call(
        &w,
        "GET",
        "/v1/admin/dead-letters?bucket=index_rejected&limit=10",
        ADMIN,
        None,
    );
    assert_eq!(r.body["letters"][0]["doc_id"], "a");
    assert_eq!(r.body["letters"][0]["job_state"], "failed");

    // The cause is gone (no more injected faults). A preflight changes nothing.
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    let r = redrives(&w, json!({"filter": {"bucket": "index_rejected"}}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["plan"]["matched"], 1);
    assert_eq!(r.body["plan"]["documents"], json!(["a"]));
    let plan_id = plan_id(&r);
    assert_eq!(
        w.db.dump(oracle::REQUEST_COUNTERS),
        before,
        "the preflight wrote something"
    );
    assert!(w.queue.take_all().is_empty());

    // Execute: the canary is sent, indexed, and the redrive completes.
    let r = redrives(
        &w,
        json!({"filter": {"bucket": "index_rejected"}, "plan_id": plan_id}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["redrive_id"].as_str().unwrap().to_string();
    assert_eq!(r.body["counts"]["sent"], 1);
    // A plan runs at most once.
    let again = redrives(
        &w,
        json!({"filter": {"bucket": "index_rejected"}, "plan_id": plan_id}),
    );
    assert_eq!(
        (again.status, again.body["error"]["code"].as_str()),
        (409, Some("plan_changed"))
    );
    deliver(&w);
    let r = redrive(&w, &id);
    assert_eq!(r.body["state"], "completed", "{}", r.body);
    assert_eq!(r.body["counts"]["succeeded"], 1);
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert!(w.search("alpha", 3).iter().any(|h| h.doc_id == "a"));
    // Every step is in the audit trail; the letter is kept.
    let events: Vec<&str> = r.body["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        vec!["created", "sent", "canaries_passed", "completed"]
    );
    assert_eq!(oracle::archived_letters(&w.db).len(), 1);
    // The same plan cannot run twice: the letter is now redriven.
    let r = redrives(&w, json!({"filter": {"bucket": "index_rejected"}}));
    assert_eq!(r.body["plan"]["eligible"], json!([]));
    assert_eq!(r.body["plan"]["skipped"][0]["reason"], "already_redriven");
    // Cron cleans the failed version's vectors up; the index matches D1.
    w.cron();
    assert_eq!(w.index.ids(), w.live_vector_ids());
}

#[test]
fn a_redrive_whose_canary_fails_stops_without_sending_the_rest() {
    let w = World::new();
    five_letters(&w);
    let r = redrives(&w, json!({"canary_size": 3}));
    assert_eq!(r.body["plan"]["eligible"].as_array().unwrap().len(), 5);
    let plan_id = plan_id(&r);
    // A stale plan id is refused.
    let r2 = redrives(&w, json!({"canary_size": 4, "plan_id": plan_id}));
    assert_eq!(
        (r2.status, r2.body["error"]["code"].as_str()),
        (409, Some("plan_changed"))
    );
    // The cause is still there: the canaries fail.
    w.index
        .upsert_faults
        .fail_next(3, FailureBucket::IndexRejected);
    let r = redrives(&w, json!({"canary_size": 3, "plan_id": plan_id}));
    assert_eq!(r.body["counts"]["sent"], 3);
    let id = r.body["redrive_id"].as_str().unwrap().to_string();
    deliver(&w);
    w.cron(); // cron advances redrives too
    let r = redrive(&w, &id);
    assert_eq!(
        (r.body["state"].as_str(), r.body["stop_reason"].as_str()),
        (Some("stopped"), Some("canary_failed")),
        "{}",
        r.body
    );
    assert_eq!(r.body["counts"]["pending"], 2, "the rest was never sent");
    assert_eq!(r.body["counts"]["failed"], 3);
    assert!(w.queue.take_all().is_empty());
}

#[test]
fn repair_runs_are_recorded_and_listed() {
    let w = World::new();
    put(&w, "a", "one two three");
    deliver(&w);
    put(&w, "a", "four five six");
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    deliver(&w);
    w.clock.advance_ms(60_000);
    let report = w.cron();
    assert!(report.intents_deleted > 0);
    w.cron(); // nothing to do: not recorded
    let r = call(&w, "GET", "/v1/admin/repair/runs?limit=5", ADMIN, None);
    let runs = r.body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{}", r.body);
    assert_eq!(runs[0]["report"]["intents_deleted"], report.intents_deleted);
    assert_eq!(runs[0]["budget_hit"], false);
    assert_eq!(
        call(&w, "GET", "/v1/admin/repair/runs?limit=0", ADMIN, None).status,
        422
    );
}

#[test]
fn cron_finds_missing_live_vectors_and_repairs_the_document() {
    let w = World::new();
    put(&w, "a", "sierra tango uniform. ".repeat(30));
    put(&w, "b", "victor whiskey");
    deliver(&w);
    // Too recent to verify: nothing is checked yet.
    assert_eq!(w.cron().chunks_verified, 0);
    // The index loses one of a's vectors (e.g. an index rebuilt from an old snapshot).
    // (Only a has a chunk 1.)
    let lost = oracle::live_chunks(&w.db)
        .into_iter()
        .find(|c| c.ord == 1.0)
        .unwrap()
        .vector_id;
    w.index.vectors.borrow_mut().remove(&lost);
    w.clock
        .advance_ms(i64::from(w.cfg.index_visibility_window_seconds) * 1000 + 1);
    let report = w.cron();
    assert!(report.chunks_verified > 1);
    assert_eq!(report.documents_repaired, 1);
    assert_eq!(w.state("a"), DocumentState::RepairNeeded);
    assert_eq!(w.state("b"), DocumentState::Indexed);
    deliver(&w);
    let doc = block_on(w.p().document(&default_key("a")))
        .unwrap()
        .unwrap();
    assert_eq!(
        (doc.state, doc.live_version),
        (DocumentState::Indexed, Some(2))
    );
    w.cron();
    assert_eq!(w.index.ids(), w.live_vector_ids(), "no hole, no orphan");
    let r = call(&w, "GET", "/v1/admin/repair/runs", ADMIN, None);
    assert!(r.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|run| run["report"]["documents_repaired"] == 1));
}

#[test]
fn a_cron_run_stops_at_its_subrequest_budget_and_the_next_run_goes_on() {
    let mut cfg = World::new().cfg;
    cfg.cron_subrequests_max = 10;
    cfg.delete_batch_size = 2;
    let w = World::with(cfg);
    put(&w, "a", "alpha bravo charlie delta echo. ".repeat(40));
    deliver(&w);
    let old = w.live_vector_ids().len();
    assert!(old >= 8, "{old} chunks");
    put(&w, "a", "foxtrot");
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    deliver(&w);
    w.clock.advance_ms(60_000);
    let first = w.cron();
    assert!(first.budget_hit);
    assert!(first.subrequests_used <= 10, "{first:?}");
    assert_eq!(
        first.intents_deleted, 4,
        "1 sweep + 2 for retiring generations + 2 batches of 3 calls fit in 10"
    );
    let mut runs = 1;
    while oracle::cleanup_intents(&w.db) > 0 {
        let r = w.cron();
        assert!(r.subrequests_used <= 10);
        runs += 1;
        assert!(runs < 10, "the cleanup does not progress");
    }
    assert_eq!(w.index.ids(), w.live_vector_ids());
    let r = call(&w, "GET", "/v1/admin/repair/runs", ADMIN, None);
    assert_eq!(
        r.body["runs"].as_array().unwrap().last().unwrap()["budget_hit"],
        true
    );
}

#[test]
fn an_unknown_field_is_422_on_every_route() {
    let w = World::new();
    let before = w.db.dump(oracle::REQUEST_COUNTERS);
    for (path, body) in [
        ("/v1/admin/reindex", json!({ "scope": "all", "colour": 1 })),
        ("/v1/admin/redrives", json!({ "purge": true })),
        ("/v1/admin/redrives", json!({ "filter": { "colour": "x" } })),
    ] {
        let r = call(&w, "POST", path, ADMIN, Some(body.clone()));
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (422, Some("unknown_field")),
            "{path} {body}"
        );
    }
    for (path, body) in [
        ("/v1/documents/a", json!({ "text": "x", "colour": 1 })),
        ("/v1/search", json!({ "query": "x", "colour": 1 })),
        (
            "/v1/search",
            json!({ "query": "x", "filter": { "colour": 1 } }),
        ),
    ] {
        let method = if path == "/v1/search" { "POST" } else { "PUT" };
        let r = call(&w, method, path, "Bearer t-ingest", Some(body.clone()));
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (422, Some("unknown_field")),
            "{path} {body}"
        );
    }
    assert_eq!(w.db.dump(oracle::REQUEST_COUNTERS), before);
}

#[test]
fn a_client_can_resubmit_a_failed_latest_version() {
    let w = World::new();
    let body = json!({"text": "alpha bravo charlie"});
    assert_eq!(
        call(&w, "PUT", "/v1/documents/a", INGEST, Some(body.clone())).status,
        202
    );
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    deliver(&w);
    assert_eq!(w.state("a"), DocumentState::Failed);
    // The same content again is a resubmission, not "unchanged".
    let r = call(&w, "PUT", "/v1/documents/a", INGEST, Some(body.clone()));
    assert_eq!(
        (r.status, r.body["version"].as_u64()),
        (202, Some(2)),
        "{}",
        r.body
    );
    deliver(&w);
    assert_eq!(w.state("a"), DocumentState::Indexed);
    // Once indexed, the same content is unchanged again.
    let r = call(&w, "PUT", "/v1/documents/a", INGEST, Some(body.clone()));
    assert_eq!(
        (r.status, r.body["unchanged"].as_bool()),
        (200, Some(true)),
        "{}",
        r.body
    );

    // A failed update over a live version: /reindex re-runs the failed version.
    let r = put(&w, "a", "delta echo");
    assert_eq!(r.status, 202);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    deliver(&w);
    assert_eq!(w.state("a"), DocumentState::Failed);
    let r = call(&w, "POST", "/v1/documents/a/reindex", INGEST, None);
    assert_eq!(
        (r.status, r.body["version"].as_u64()),
        (202, Some(4)),
        "{}",
        r.body
    );
    deliver(&w);
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert!(w
        .search("delta echo", 3)
        .iter()
        .any(|h| h.version == 4 && h.text == "delta echo"));
}

/// Five documents whose first version failed for good: five letters.
fn five_letters(w: &World) {
    for d in ["a", "b", "c", "d", "e"] {
        put(w, d, format!("text of {d}"));
    }
    w.index
        .upsert_faults
        .fail_next(5, FailureBucket::IndexRejected);
    deliver(w);
}

#[test]
fn two_advances_of_one_redrive_at_once_track_every_item() {
    // Issue: of two concurrent advances (cron and GET), the loser marked an
    // item `skipped` while the winner's pending→sent changed nothing, so a
    // re-run went untracked. The second advance starts `offset` calls after
    // the first, for every offset that overlaps them.
    for (offset, slow) in (0..24).flat_map(|o| (1..4).map(move |s| (o, s))) {
        let w = World::new();
        five_letters(&w);
        let r = redrives(&w, json!({"canary_size": 3, "batch_size": 2}));
        let plan_id = plan_id(&r);
        let r = redrives(
            &w,
            json!({"canary_size": 3, "batch_size": 2, "plan_id": plan_id}),
        );
        let id = r.body["redrive_id"].as_str().unwrap().to_string();
        deliver(&w);
        let a = w.p_over(common::Uneven(&w.db, slow));
        let b = w.p_over(common::Interleaved(&w.db));
        let later = async {
            for _ in 0..offset {
                common::yield_now().await;
            }
            b.redrive_advance(&id).await
        };
        let (ra, rb) = block_on(futures::future::join(a.redrive_advance(&id), later));
        ra.unwrap();
        rb.unwrap();
        let r = redrive(&w, &id);
        assert_eq!(
            r.body["counts"]["skipped"], 0,
            "offset {offset}, slow {slow}: {}",
            r.body
        );
        for i in r.body["items"].as_array().unwrap() {
            assert!(
                i["state"] == "pending" || i["new_job_id"].is_string(),
                "offset {offset}, slow {slow}: untracked {i}"
            );
        }
        deliver(&w);
        let r = redrive(&w, &id);
        assert_eq!(
            (
                r.body["state"].as_str(),
                r.body["counts"]["succeeded"].as_u64()
            ),
            (Some("completed"), Some(5)),
            "offset {offset}, slow {slow}: {}",
            r.body
        );
    }
}

#[test]
fn a_letter_waiting_in_an_active_redrive_is_not_redriven_by_a_second_one() {
    // Issue (found by the simulation): an operator whose execute timed out
    // planned again; letters still pending in the first redrive were
    // eligible, so a second redrive re-ran them and the first one recorded
    // its items as skipped.
    let w = World::new();
    five_letters(&w);
    let body = json!({"canary_size": 3, "batch_size": 1});
    let r = redrives(&w, body.clone());
    let plan_id = r.body["plan"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", r.body))
        .to_string();
    let mut execute = body.clone();
    execute["plan_id"] = json!(plan_id);
    let first = redrives(&w, execute);
    assert_eq!(
        (
            first.body["counts"]["sent"].as_u64(),
            first.body["counts"]["pending"].as_u64()
        ),
        (Some(3), Some(2)),
        "{}",
        first.body
    );
    // The operator plans again before the first one finished.
    let again = redrives(&w, body);
    assert_eq!(
        again.body["plan"]["eligible"].as_array().map(Vec::len),
        Some(0),
        "{}",
        again.body
    );
    let reasons: Vec<&str> = again.body["plan"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["reason"].as_str())
        .collect();
    assert_eq!(reasons, ["already_redriven"; 5], "{}", again.body);
}

#[test]
fn a_redrive_whose_canaries_were_all_skipped_stops_without_evidence() {
    // Issue: skipped canaries counted as passed, so a redrive whose canaries
    // were all skipped went on to its batches with no evidence.
    let w = World::new();
    five_letters(&w);
    let r = redrives(&w, json!({"canary_size": 3}));
    let plan_id = plan_id(&r);
    // The canaries (the first three letters) are each replaced by a new
    // version after the plan... by the planner's clock, at execution.
    let canary_jobs: Vec<&Value> = r.body["plan"]["canaries"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let first3: Vec<String> = r.body["plan"]["eligible"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| canary_jobs.contains(&&e["job_id"]))
        .map(|e| e["doc_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(first3.len(), 3, "{}", r.body);
    let r = redrives(&w, json!({"canary_size": 3, "plan_id": plan_id}));
    let id = r.body["redrive_id"].as_str().unwrap().to_string();
    // Every canary's re-run is superseded by a newer client version.
    for d in &first3 {
        let r = put(&w, d, format!("newer text of {d}"));
        assert_eq!(r.status, 202, "{}", r.body);
    }
    deliver(&w);
    w.cron();
    let r = redrive(&w, &id);
    assert_eq!(r.body["counts"]["succeeded"], 0, "{}", r.body);
    assert_eq!(
        (r.body["state"].as_str(), r.body["stop_reason"].as_str()),
        (Some("stopped"), Some("no_canary_evidence")),
        "{}",
        r.body
    );
    assert_eq!(r.body["counts"]["pending"], 2, "no batch was sent");
}

fn letter_row(w: &World, job_id: &str) -> Value {
    oracle::dead_letter(&w.db, job_id).unwrap_or(Value::Null)
}

#[test]
fn a_dead_letter_is_archived_once_sent_marked_and_confirmed_without_counting_twice() {
    // Issue: the consumer and the DLQ consumer both archived each letter,
    // doubling times_seen.
    use ingest_pipeline::pipeline::Settle;
    let (w, msg) = a_rejected_message("alpha");
    let p = w.p();
    let outcome = block_on(p.consume(&msg));
    assert_eq!(outcome, ConsumeOutcome::DeadLetter { reason: "failed" });
    assert_eq!(block_on(p.settle("m-1", &msg, outcome)), Settle::Ack);
    let sent = w
        .queue
        .dead
        .borrow_mut()
        .pop_front()
        .expect("the pointer reached the dead-letter queue");
    assert!(sent.archived);
    assert_eq!(
        (sent.job_id.as_str(), sent.version),
        (msg.job_id.as_str(), 1)
    );
    // The dead-letter consumer confirms it: still seen once.
    assert_eq!(
        block_on(p.consume_dead_letter("d-1", Some(&sent), 0)),
        Settle::Ack
    );
    assert_eq!(letter_row(&w, &msg.job_id)["times_seen"], 1);
    // A letter Queues forwarded itself (its retries used up) is a new sighting.
    assert_eq!(
        block_on(p.consume_dead_letter("d-2", Some(&msg), 0)),
        Settle::Ack
    );
    assert_eq!(letter_row(&w, &msg.job_id)["times_seen"], 2);
    // A body that is not a pointer is kept as evidence.
    assert_eq!(block_on(p.consume_dead_letter("d-3", None, 0)), Settle::Ack);
    assert_eq!(letter_row(&w, "malformed:d-3")["times_seen"], 1);
}

#[test]
fn a_dead_letter_that_cannot_be_archived_or_sent_is_retried_and_nothing_is_lost() {
    use ingest_pipeline::pipeline::Settle;
    let (w, msg) = a_rejected_message("alpha");
    let p = w.p();
    let outcome = block_on(p.consume(&msg));
    // The dead-letter queue is down: retried, then settled.
    w.queue
        .dead_faults
        .fail_next(1, FailureBucket::QueueUnavailable);
    assert!(matches!(
        block_on(p.settle("m-1", &msg, outcome)),
        Settle::Retry { .. }
    ));
    let again = block_on(p.consume(&msg));
    assert_eq!(
        again,
        ConsumeOutcome::DeadLetter {
            reason: "already_failed"
        }
    );
    assert_eq!(block_on(p.settle("m-1", &msg, outcome)), Settle::Ack);
    assert_eq!(w.queue.dead.borrow().len(), 1);
    // D1 is down for the dead-letter consumer: retried later the older the
    // letter is, up to RETRY_MAX_DELAY_SECONDS.
    let forwarded = JobMessage::new("j-x", "x", 1);
    let now = ingest_pipeline::ports::Clock::now_ms(&w.clock);
    *w.db.fail_sql.borrow_mut() = Some((
        ingest_pipeline::store::sql::DEAD_LETTER_ARCHIVE,
        FailureBucket::DbUnavailable,
    ));
    assert_eq!(
        block_on(p.consume_dead_letter("d-1", Some(&forwarded), now)),
        Settle::Retry { delay_seconds: 60 }
    );
    *w.db.fail_sql.borrow_mut() = Some((
        ingest_pipeline::store::sql::DEAD_LETTER_ARCHIVE,
        FailureBucket::DbUnavailable,
    ));
    assert_eq!(
        block_on(p.consume_dead_letter("d-1", Some(&forwarded), now - 4 * 3_600_000)),
        Settle::Retry {
            delay_seconds: 3600
        }
    );
    assert_eq!(
        block_on(p.consume_dead_letter("d-1", Some(&forwarded), now)),
        Settle::Ack
    );
    assert_eq!(letter_row(&w, "j-x")["times_seen"], 1);
}

#[test]
fn a_repeated_archive_keeps_the_first_final_evidence() {
    // Issue: archiving a letter again overwrote the first failure's
    // evidence (state, bucket, attempts).
    let (w, msg) = a_rejected_message("alpha");
    let p = w.p();
    block_on(p.consume(&msg));
    block_on(p.archive_dead_letter("m-1", &msg)).unwrap();
    let first = letter_row(&w, &msg.job_id);
    assert_eq!(
        (
            first["job_state"].as_str(),
            first["failure_bucket"].as_str()
        ),
        (Some("failed"), Some("index_rejected"))
    );
    // The job row says something else later (as a misbehaving writer could):
    // the letter keeps what it recorded first.
    let _: Vec<Value> = w.db.inspect("UPDATE jobs SET last_failure_bucket = 'db_busy', attempts = 9 WHERE job_id = ?1 RETURNING job_id", vec![msg.job_id.as_str().into()]);
    block_on(p.archive_dead_letter("m-2", &msg)).unwrap();
    let second = letter_row(&w, &msg.job_id);
    assert_eq!(
        (
            second["failure_bucket"].as_str(),
            second["attempts"].as_i64(),
            second["message_id"].as_str()
        ),
        (Some("index_rejected"), Some(1), Some("m-1"))
    );
    assert_eq!(second["times_seen"], 2);
}

#[test]
fn a_letter_of_a_job_still_in_flight_is_not_redriven_and_busy_deliveries_wait_for_the_lease() {
    // Issue: after a crashed invocation the lease held the job for 960 s and
    // busy redeliveries retried every 60 s, so Queues moved the message to
    // the DLQ in about 10 minutes; its letter was archived as `running` and
    // looked redrivable, and a redrive would supersede the version still
    // being written.
    use ingest_pipeline::pipeline::Settle;
    let w = World::new();
    put(&w, "a", "alpha bravo");
    let msg = w.queue.take_all().remove(0);
    // An invocation claims the job and dies (its lease is held).
    let lease =
        ingest_pipeline::ports::Clock::now_ms(&w.clock) + i64::from(w.cfg.job_lease_seconds) * 1000;
    let _: Vec<Value> = w.db.inspect(
        "UPDATE jobs SET state = 'running', attempts = 1, lease_until = ?2 WHERE job_id = ?1 RETURNING job_id",
        vec![msg.job_id.as_str().into(), lease.into()],
    );
    // A redelivery finds it busy: it looks again when the lease ends, not
    // every CLAIM_BUSY_RETRY_SECONDS.
    let out = block_on(w.p().consume(&msg));
    let ConsumeOutcome::Retry { delay_seconds } = out else {
        panic!("{out:?}")
    };
    assert!(
        delay_seconds >= w.cfg.job_lease_seconds - 1,
        "busy retry after {delay_seconds} s"
    );
    // Queues gives up on the message anyway (its retries used up): the
    // letter is kept, but a redrive does not touch a job still in flight.
    assert_eq!(
        block_on(w.p().consume_dead_letter("d-1", Some(&msg), 0)),
        Settle::Ack
    );
    let r = redrives(&w, json!({}));
    assert_eq!(
        r.body["plan"]["eligible"].as_array().unwrap().len(),
        0,
        "{}",
        r.body
    );
    assert_eq!(
        r.body["plan"]["skipped"][0]["reason"], "in_flight",
        "{}",
        r.body
    );
}

#[test]
fn a_backfill_action_the_api_does_not_know_is_404_and_changes_nothing() {
    let w = World::new();
    w.put("a", &common::document(3, None));
    w.deliver_all();
    let body = json!({ "scope": "all" });
    let r = call(&w, "POST", "/v1/admin/reindex", ADMIN, Some(body));
    assert_eq!(r.status, 202, "{}", r.body);
    let path = format!(
        "/v1/admin/reindex/{}",
        r.body["backfill"]["backfill_id"].as_str().unwrap()
    );
    for action in ["frobnicate", "Cancel", ""] {
        let r = call(&w, "POST", &format!("{path}/{action}"), ADMIN, None);
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (404, Some("not_found")),
            "{action:?}: no route takes it (a 405 would name the methods it takes)"
        );
    }
    assert_eq!(call(&w, "GET", &path, ADMIN, None).body["state"], "running");
    let r = call(&w, "POST", &format!("{path}/cancel"), ADMIN, None);
    assert_eq!((r.status, &r.body["state"]), (200, &json!("cancelled")));
}

/// Defect: cron ended a stalled job `dead` in one batch and archived its
/// letter in a second call; when that call failed, the job was dead
/// without its letter, and the next run no longer saw it as stalled, so
/// the evidence was never written (and no redrive could select it). A
/// failure of any statement of the run leaves the job either stalled
/// (the next run ends it) or dead with its letter.
#[test]
fn cron_ends_a_stalled_job_dead_with_its_letter_whatever_call_fails() {
    for (name, sql) in ingest_pipeline::store::sql::ALL {
        let mut cfg = World::new().cfg;
        cfg.job_attempts_max = 1;
        let w = World::with(cfg);
        w.queue.faults.fail_next(1, FailureBucket::QueueUnavailable);
        w.put("stalled", "a job whose message was lost");
        let jid = oracle::job_ids(&w.db).remove(0);
        block_on(
            w.p()
                .store
                .claim(&jid, w.clock.0.get(), w.clock.0.get(), None),
        )
        .unwrap();
        w.clock
            .advance_ms(i64::from(w.cfg.job_stall_seconds) * 1000 + 1);
        let failing = common::FailOn { db: &w.db, sql };
        block_on(w.p_over(failing).repair());
        w.clock.advance_ms(60_000);
        w.cron();
        let dead: Vec<Value> =
            w.db.inspect("SELECT job_id FROM jobs WHERE state = 'dead'", vec![]);
        assert_eq!(dead.len(), 1, "{name}: the stalled job ended dead");
        assert_eq!(
            oracle::failed_jobs_without_evidence(&w.db),
            Vec::<String>::new(),
            "{name}: a dead job without its letter"
        );
    }
}

/// The built-in `default` tenant and generation 1 were shown as created in
/// 1970 (`created_at: 0`, written so by their migrations): migration 0015
/// dates them to when the ledger was made (its first document, else the
/// migration's run).
#[test]
fn the_default_tenant_and_generation_one_are_dated_when_the_ledger_was_made() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 1_000;
    let w = World::new();
    let t = call(&w, "GET", "/v1/admin/tenants/default", ADMIN, None);
    assert_eq!(t.status, 200, "{:?}", t.body);
    let g = call(&w, "GET", "/v1/admin/generations", ADMIN, None);
    assert_eq!(g.status, 200, "{:?}", g.body);
    let g1 = g.body["generations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["generation"] == 1)
        .cloned()
        .unwrap();
    for (what, v) in [("tenant", &t.body), ("generation 1", &g1)] {
        let created = v["created_at"].as_i64().unwrap();
        assert!(created >= before, "{what}: {v}");
        assert!(v["updated_at"].as_i64().unwrap() >= created, "{what}: {v}");
    }
}
