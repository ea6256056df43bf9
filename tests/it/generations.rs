//! Reindexing and backfills: one document, a metadata filter, everything,
//! and a configuration change built as a new index generation alongside
//! the served one, switched atomically, rolled back, and retired.

use crate::common;
use crate::common::default_key;
use ingest_pipeline::core::ids::TenantId;

use crate::common::{document, oracle, World};
use futures::executor::block_on;
use ingest_pipeline::core::chunk::tokens::TokenFamily;
use ingest_pipeline::core::chunk::{Chunker, ContentType};
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::pipeline::{
    BackfillAction, BackfillScope, ConsumeOutcome, DocumentState, Refused, SearchHit, SearchRequest,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const DOCS: usize = 12;

fn doc_id(i: usize) -> String {
    format!("doc-{i:02}")
}

/// A world with `DOCS` documents indexed, half `lang: en`, half `lang: de`.
fn world() -> World {
    let w = World::new();
    for i in 0..DOCS {
        let mut m = serde_json::Map::new();
        m.insert("lang".into(), json!(if i % 2 == 0 { "en" } else { "de" }));
        w.put_with(
            &doc_id(i),
            &document(6 + i, None),
            m,
            ingest_pipeline::core::chunk::ContentType::Plain,
        );
    }
    w.deliver_all();
    w
}

/// [`world`], then the chunk size changes to `tokens`: a config backfill
/// has a new generation to build.
fn rechunked_world(tokens: usize) -> World {
    let mut w = world();
    w.cfg.chunk_size_max_tokens = tokens;
    w
}

/// Starts a config backfill with pages of `page` documents; returns its id.
fn start_config(w: &World, page: u32) -> String {
    start(w, BackfillScope::Config, page)["backfill_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn search(w: &World, q: &str) -> Vec<SearchHit> {
    block_on(w.p().search(
        &TenantId::default_tenant(),
        &SearchRequest {
            query: q.into(),
            top_k: 10,
            doc_id: None,
            metadata: Default::default(),
            mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
            highlight: false,
        },
    ))
    .unwrap()
}

/// Every result of one search comes from one generation; returns it.
fn served_generation(w: &World) -> u32 {
    let hits = search(w, &common::paragraph(3));
    assert!(!hits.is_empty(), "search serves results");
    let gens: BTreeSet<u32> = hits.iter().map(|h| h.generation).collect();
    assert_eq!(gens.len(), 1, "one response, one generation: {gens:?}");
    *gens.iter().next().unwrap()
}

fn generations(w: &World) -> Value {
    serde_json::to_value(block_on(w.p().generations_view()).unwrap()).unwrap()
}

fn generation(w: &World, g: u64) -> Value {
    generations(w)["generations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["generation"] == g)
        .cloned()
        .expect("generation exists")
}

/// The progress counts add up.
fn check_counts(view: &Value) {
    let p = &view["progress"];
    let n = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("{k} in {view}"));
    assert_eq!(
        n("enqueued"),
        n("done") + n("pending") + n("failed"),
        "{view}"
    );
    assert_eq!(n("remaining"), n("pending") + n("not_enqueued"), "{view}");
}

fn start(w: &World, scope: BackfillScope, page: u32) -> Value {
    let view = block_on(w.p().start_backfill(&scope, page))
        .unwrap()
        .expect("backfill starts");
    serde_json::to_value(view).unwrap()
}

fn view(w: &World, id: &str) -> Value {
    serde_json::to_value(block_on(w.p().backfill_view(id)).unwrap().unwrap()).unwrap()
}

/// A backfill's pause, resume or cancel, as JSON.
fn transition(w: &World, id: &str, action: BackfillAction) -> Result<Value, Refused> {
    let out = block_on(w.p().backfill_transition(id, action)).unwrap();
    out.map(|v| serde_json::to_value(v).unwrap())
}

/// Delivers and runs cron until the backfill ends, checking at every step
/// that search serves exactly one generation and never goes back, and the
/// counts add up. Returns the generations served, in order.
fn run_to_end(w: &World, id: &str) -> Vec<u32> {
    let mut served = vec![served_generation(w)];
    for _ in 0..50 {
        let v = view(w, id);
        check_counts(&v);
        if v["state"] != "running" {
            return served;
        }
        // One message at a time, checking search in between.
        loop {
            let next = w.queue.sent.borrow_mut().pop_front();
            let Some(m) = next else { break };
            if let ConsumeOutcome::Retry { delay_seconds } = w.consume(&m) {
                w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                w.queue.sent.borrow_mut().push_back(m);
            }
            let g = served_generation(w);
            if g != *served.last().unwrap() {
                served.push(g);
            }
            check_counts(&view(w, id));
        }
        w.clock.advance_ms(60_000);
        w.cron();
        let g = served_generation(w);
        if g != *served.last().unwrap() {
            served.push(g);
        }
    }
    panic!("the backfill did not end: {}", view(w, id));
}

#[test]
fn a_chunk_size_change_is_built_alongside_switched_rolled_back_and_retired() {
    let mut w = world();
    assert_eq!(served_generation(&w), 1);
    assert_eq!(generations(&w)["active"], 1);
    // Nothing to do while the configuration is the active generation's.
    let refused = block_on(w.p().start_backfill(&BackfillScope::Config, 5))
        .unwrap()
        .unwrap_err();
    assert_eq!(refused, Refused::ConfigUnchanged);

    // The chunk size changes: nothing served changes until a backfill.
    w.cfg.chunk_size_max_tokens = 96;
    w.cfg.chunk_overlap_tokens = 8;
    assert_eq!(served_generation(&w), 1);
    let chunks_g1 = generation(&w, 1)["chunks"].as_u64().unwrap();

    let b = start(&w, BackfillScope::Config, 5);
    let id = b["backfill_id"].as_str().unwrap().to_string();
    assert_eq!(b["generation"], json!({ "from": 1, "to": 2 }));
    assert_eq!(generation(&w, 2)["state"], "building");
    // A second one is refused while this one is open.
    let again = block_on(w.p().start_backfill(&BackfillScope::All, 5))
        .unwrap()
        .unwrap_err();
    assert_eq!(again, Refused::BackfillOpen);

    // A document ingested during the backfill is written in both generations.
    w.put("late", &document(5, None));
    let served = run_to_end(&w, &id);
    assert_eq!(
        served,
        vec![1, 2],
        "generation 1 until the switch, then generation 2, never mixed"
    );
    let done = view(&w, &id);
    assert_eq!(done["state"], "completed");
    assert_eq!(done["progress"]["failed"], 0);
    let gens = generations(&w);
    assert_eq!(gens["active"], 2);
    assert_eq!(generation(&w, 1)["state"], "retained");
    assert!(
        generation(&w, 1)["chunks"].as_u64().unwrap() >= chunks_g1,
        "generation 1 kept for a rollback"
    );
    // Generation 2 is the new chunker's: no chunk over 96 tokens.
    for h in search(&w, &common::paragraph(4)) {
        assert!(TokenFamily::WordPiece.count(&h.text) <= 96, "{}", h.text);
    }
    assert!(search(&w, &common::paragraph(2))
        .iter()
        .all(|h| h.generation == 2));
    assert_eq!(w.state("late"), DocumentState::Indexed);

    // Rollback while the old vectors exist, and forward again.
    let back = block_on(w.p().activate_generation(1)).unwrap().unwrap();
    assert_eq!(back.active, Some(1));
    assert_eq!(served_generation(&w), 1);
    let late = block_on(w.p().search(
        &TenantId::default_tenant(),
        &SearchRequest {
            query: common::paragraph(2),
            top_k: 5,
            doc_id: Some("late".into()),
            metadata: Default::default(),
            mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
            highlight: false,
        },
    ))
    .unwrap();
    assert!(
        !late.is_empty() && late.iter().all(|h| h.generation == 1),
        "the late document is in generation 1 too"
    );
    assert!(matches!(
        block_on(w.p().activate_generation(1)).unwrap().unwrap_err(),
        Refused::GenerationNotRetained { generation: 1, .. }
    ));
    block_on(w.p().activate_generation(2)).unwrap().unwrap();
    assert_eq!(served_generation(&w), 2);

    // Retire generation 1: cron turns its rows into intents and deletes its vectors.
    assert!(matches!(
        block_on(w.p().retire_generation(2)).unwrap().unwrap_err(),
        Refused::GenerationInUse { generation: 2, .. }
    ));
    block_on(w.p().retire_generation(1)).unwrap().unwrap();
    w.cron_runs(10);
    assert_eq!(generation(&w, 1)["state"], "retired");
    assert_eq!(generation(&w, 1)["chunks"], 0);
    assert_eq!(oracle::chunks_in_generation(&w.db, 1), 0);
    // The index holds exactly the served vectors, all of generation 2.
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert!(w
        .index
        .vectors
        .borrow()
        .values()
        .all(|v| v.metadata["generation"] == 2));
    assert_eq!(served_generation(&w), 2);
    // Later versions are written in generation 2 only.
    w.put("doc-00", &document(3, None));
    w.deliver_all();
    assert!(w
        .index
        .vectors
        .borrow()
        .values()
        .all(|v| v.metadata["generation"] == 2));
}

#[test]
fn a_failed_build_is_retried_in_another_pass_and_the_switch_waits_for_it() {
    let w = rechunked_world(120);
    let id = start_config(&w, 20);
    // The first build's upsert is rejected: that job fails permanently.
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    let served = run_to_end(&w, &id);
    assert_eq!(served, vec![1, 2]);
    let v = view(&w, &id);
    assert_eq!(v["state"], "completed");
    assert!(
        v["passes"].as_u64().unwrap() >= 2,
        "a second pass rebuilt the failed one: {v}"
    );
    assert_eq!(v["progress"]["failed"], 1, "{v}");
    // Every live document is served from generation 2.
    for i in 0..DOCS {
        let hits = block_on(w.p().search(
            &TenantId::default_tenant(),
            &SearchRequest {
                query: document(6 + i, None),
                top_k: 3,
                doc_id: Some(doc_id(i)),
                metadata: Default::default(),
                mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
                highlight: false,
            },
        ))
        .unwrap();
        assert!(!hits.is_empty(), "{} is served", doc_id(i));
    }
    // The failed build's vectors are deleted through intents: the index
    // holds exactly the live chunks of both generations (1 is retained).
    w.cron_runs(5);
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids(),
        "no orphan vector of the failed build"
    );
    assert_eq!(oracle::cleanup_intents(&w.db), 0);
}

#[test]
fn pause_resume_cancel_and_an_abandoned_generation_is_cleaned_up() {
    let w = rechunked_world(120);
    let id = start_config(&w, 3);
    let p = transition(&w, &id, BackfillAction::Pause).unwrap();
    assert_eq!(p["state"], "paused");
    check_counts(&p);
    let cursor = p["cursor"].clone();
    w.deliver_all();
    w.cron();
    assert_eq!(
        view(&w, &id)["cursor"],
        cursor,
        "a paused backfill does not move"
    );
    assert!(matches!(
        transition(&w, &id, BackfillAction::Pause),
        Err(Refused::BackfillState { .. })
    ));
    transition(&w, &id, BackfillAction::Resume).unwrap();
    w.cron();
    assert_ne!(view(&w, &id)["cursor"], cursor, "resumed from its cursor");
    let c = transition(&w, &id, BackfillAction::Cancel).unwrap();
    assert_eq!(c["state"], "cancelled");
    check_counts(&c);
    assert_eq!(generation(&w, 2)["state"], "abandoned");
    for again in [
        BackfillAction::Resume,
        BackfillAction::Cancel,
        BackfillAction::Pause,
    ] {
        assert!(
            matches!(
                transition(&w, &id, again),
                Err(Refused::BackfillState { .. })
            ),
            "{again:?} of a cancelled backfill"
        );
    }
    // Its vectors are deleted once its jobs are done; generation 1 is served throughout.
    for _ in 0..10 {
        w.deliver_all();
        w.clock.advance_ms(60_000);
        w.cron();
        assert_eq!(served_generation(&w), 1);
    }
    assert_eq!(generation(&w, 2)["state"], "retired");
    assert_eq!(w.index.ids(), w.live_vector_ids());
    // A new backfill can start (it builds generation 3).
    let again = start(&w, BackfillScope::Config, 50);
    assert_eq!(again["generation"]["to"], 3);
}

#[test]
fn a_filter_backfill_and_a_single_document_reindex_rerun_versions() {
    let w = world();
    let b = start(
        &w,
        BackfillScope::Filter(json!({ "lang": "de" }).as_object().unwrap().clone()),
        4,
    );
    let id = b["backfill_id"].as_str().unwrap().to_string();
    assert_eq!(b["progress"]["total"], DOCS / 2);
    let served = run_to_end(&w, &id);
    assert_eq!(served, vec![1]);
    let v = view(&w, &id);
    assert_eq!(
        (v["state"].as_str(), v["progress"]["done"].as_u64()),
        (Some("completed"), Some((DOCS / 2) as u64))
    );
    for i in 0..DOCS {
        let d = block_on(w.p().document(&default_key(&doc_id(i))))
            .unwrap()
            .unwrap();
        let want = if i % 2 == 1 { 2 } else { 1 };
        assert_eq!(
            (d.live_version, d.state),
            (Some(want), DocumentState::Indexed),
            "{}",
            doc_id(i)
        );
    }
    // One document.
    let (version, _job) = block_on(w.p().reindex_document(&default_key("doc-00")))
        .unwrap()
        .unwrap();
    assert_eq!(version, 2);
    w.deliver_all();
    assert_eq!(
        block_on(w.p().document(&default_key("doc-00")))
            .unwrap()
            .unwrap()
            .live_version,
        Some(2)
    );
    assert_eq!(
        block_on(w.p().reindex_document(&default_key("nope")))
            .unwrap()
            .unwrap_err(),
        Refused::DocumentNotFound
    );
    w.delete("doc-02");
    w.deliver_all();
    assert_eq!(
        block_on(w.p().reindex_document(&default_key("doc-02")))
            .unwrap()
            .unwrap_err(),
        Refused::DocumentNotIndexed
    );
    // Everything: every live document gets a new version.
    let all = start(&w, BackfillScope::All, 50);
    run_to_end(&w, all["backfill_id"].as_str().unwrap());
    assert_eq!(
        view(&w, all["backfill_id"].as_str().unwrap())["progress"]["done"],
        DOCS - 1
    );
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids().into_iter().collect::<Vec<_>>(),
        "old versions cleaned up"
    );
    let list = block_on(w.p().backfills(10)).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].scope, "all", "newest first");
}

#[test]
fn a_greedy_v1_generation_keeps_its_chunker_until_a_config_backfill_moves_it_to_unicode_v2() {
    // A deployment from before `unicode-v2`: generation 1 was recorded with
    // the first chunker (same embedder).
    let w = World::new();
    let legacy = json!({ "chunker": "greedy-v1", "chunk_size_max_chars": 200, "chunk_overlap_chars": 20,
                         "embedder": "local-hash-v2", "pooling": "none", "dimensions": 64 });
    let _: Vec<Value> = w.db.inspect(
        "UPDATE generations SET index_config = ?1 WHERE generation = 1 RETURNING generation",
        vec![legacy.to_string().into()],
    );
    let text = format!(
        "{}\n\n日本語の文章です。{}",
        document(8, None),
        "とても長い文、句読点、そして続く。".repeat(30)
    );
    w.put("legacy", &text);
    w.deliver_all();
    let greedy = Chunker::Greedy {
        size_max_chars: 200,
        overlap_chars: 20,
    };
    let texts = |c: Chunker| {
        c.chunk(&text, ContentType::Plain)
            .iter()
            .map(|c| c.text.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        oracle::live_chunk_texts(&w.db, "legacy", 1),
        texts(greedy),
        "written with the generation's own chunker"
    );
    assert_ne!(
        texts(greedy),
        texts(w.cfg.chunker()),
        "the two chunkers differ on this text"
    );

    // A config backfill builds generation 2 with `unicode-v2` and switches.
    let id = start_config(&w, 5);
    let served = run_to_end(&w, &id);
    assert_eq!(served, vec![1, 2]);
    assert_eq!(generation(&w, 2)["index_config"]["chunker"], "unicode-v2");
    assert_eq!(
        oracle::live_chunk_texts(&w.db, "legacy", 2),
        texts(w.cfg.chunker())
    );
    for t in oracle::live_chunk_texts(&w.db, "legacy", 2) {
        assert!(
            TokenFamily::WordPiece.count(&t) <= w.cfg.chunk_size_max_tokens,
            "{t}"
        );
    }
}

/// Every chunk search may serve (a live version's, in the active
/// generation) has its vector in the index (the simulation's I1).
fn served_chunks_have_vectors(w: &World) -> Result<(), String> {
    let have: BTreeSet<String> = w.index.ids().into_iter().collect();
    let missing: Vec<String> = oracle::served_vector_ids(&w.db)
        .into_iter()
        .filter(|id| !have.contains(id))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} served chunks without a vector: {:?}",
            missing.len(),
            &missing[..missing.len().min(3)]
        ))
    }
}

#[test]
fn a_build_job_cron_ends_dead_leaves_a_gap_the_switch_waits_for() {
    // Issue: cron ended a stalled build job `dead` with the loser statement,
    // which skips live versions, so its staged rows had no intents and the
    // switch went ahead with that document's vectors missing.
    let mut w = rechunked_world(96);
    let id = start_config(&w, 20);
    // The first build job stages its rows in generation 2, then its upsert
    // fails transiently: it waits `up_for_retry` with its rows staged.
    let first = w.queue.sent.borrow_mut().pop_front().expect("a build job");
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    assert!(matches!(w.consume(&first), ConsumeOutcome::Retry { .. }));
    // Its retry message is lost; meanwhile the attempts limit is lowered to
    // what it used, so cron ends it `dead` instead of re-enqueueing it.
    w.cfg.job_attempts_max = 1;
    w.clock.advance_ms(3_600_000);
    let report = w.cron();
    assert_eq!(report.jobs_dead, 1, "{report:?}");
    w.cfg.job_attempts_max = 6;
    run_to_end(&w, &id);
    assert_eq!(view(&w, &id)["state"], "completed", "{}", view(&w, &id));
    served_chunks_have_vectors(&w).unwrap();
}

#[test]
fn two_identical_config_reindex_requests_at_once_start_one_backfill_and_keep_its_generation() {
    // Issue: the loser of two concurrent POSTs (a client retrying after a
    // timeout) abandoned the generation the winner had just created.
    let w = rechunked_world(96);
    let a = w.p_over(common::Interleaved(&w.db));
    let b = w.p_over(common::Interleaved(&w.db));
    let (ra, rb) = block_on(futures::future::join(
        a.start_backfill(&BackfillScope::Config, 5),
        b.start_backfill(&BackfillScope::Config, 5),
    ));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(
        u8::from(ra.is_ok()) + u8::from(rb.is_ok()),
        1,
        "exactly one starts: {ra:?} {rb:?}"
    );
    let started = serde_json::to_value(ra.clone().or(rb.clone()).unwrap()).unwrap();
    let refused = ra.err().or(rb.err()).unwrap();
    assert!(matches!(
        refused,
        Refused::BackfillOpen | Refused::BackfillStartedMeanwhile
    ));
    assert_eq!(
        generation(&w, 2)["state"],
        "building",
        "the running backfill's generation is kept: {}",
        generations(&w)
    );
    let id = started["backfill_id"].as_str().unwrap().to_string();
    assert_eq!(run_to_end(&w, &id), vec![1, 2]);
    assert_eq!(view(&w, &id)["state"], "completed");
}

#[test]
fn a_reindex_start_that_fails_leaves_no_generation_building_without_its_backfill() {
    // Issue (found by the simulation, a duplicate reindex request): the
    // generation was created, then the backfill insert failed. The
    // generation stayed `building` with no backfill: every index job wrote
    // it too, and once a retry's backfill had switched, a later start found
    // the configuration active and left it building for good.
    let w = rechunked_world(96);
    let failing = w.p_over(common::FailOn {
        db: &w.db,
        sql: ingest_pipeline::store::sql::BACKFILL_INSERT,
    });
    assert!(
        block_on(failing.start_backfill(&BackfillScope::Config, 5)).is_err(),
        "the start fails"
    );
    let building: Vec<Value> = generations(&w)["generations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["state"] == "building")
        .cloned()
        .collect();
    assert!(
        building.is_empty(),
        "nothing is built without a backfill: {}",
        generations(&w)
    );
    // The retry starts it, and it runs to the switch.
    let started = start(&w, BackfillScope::Config, 5);
    let id = started["backfill_id"].as_str().unwrap().to_string();
    assert_eq!(run_to_end(&w, &id), vec![1, 2]);
    assert_eq!(generation(&w, 2)["state"], "active", "{}", generations(&w));
}

#[test]
fn a_cancel_that_fails_halfway_does_not_leave_its_generation_building() {
    // Issue (found by the simulation's cancel flow): the backfill was
    // cancelled, then abandoning its generation failed; the retry was
    // refused (a cancelled backfill cannot cancel) and the generation
    // stayed `building` for good.
    let w = rechunked_world(96);
    let started = start(&w, BackfillScope::Config, 5);
    let id = started["backfill_id"].as_str().unwrap().to_string();
    let failing = w.p_over(common::FailOn {
        db: &w.db,
        sql: ingest_pipeline::store::sql::GENERATION_ABANDON,
    });
    assert!(
        block_on(failing.backfill_transition(&id, BackfillAction::Cancel)).is_err(),
        "the cancel fails"
    );
    // The operator retries.
    let retried = block_on(w.p().backfill_transition(&id, BackfillAction::Cancel)).unwrap();
    assert!(retried.is_ok(), "the retry cancels: {retried:?}");
    assert_eq!(
        generation(&w, 2)["state"],
        "abandoned",
        "{}",
        generations(&w)
    );
}

/// Runs the switch batch to `g` directly (as `switch_to` does), for
/// backfill `id` at its pass 1.
fn switch_batch(w: &World, g: u32, id: &str) -> Vec<u64> {
    use ingest_pipeline::ports::SqlValue;
    use ingest_pipeline::store::sql;
    let p = || {
        vec![
            SqlValue::from(g),
            SqlValue::Int(ingest_pipeline::ports::Clock::now_ms(&w.clock)),
        ]
    };
    let checked = || {
        let mut v = p();
        v.extend([SqlValue::from(id), SqlValue::from(1u32)]);
        v
    };
    block_on(ingest_pipeline::ports::Database::batch(
        &w.db,
        vec![
            ingest_pipeline::ports::Stmt::new(sql::GENERATION_SWITCH_RETIRE_OLDER, checked()),
            ingest_pipeline::ports::Stmt::new(sql::GENERATION_SWITCH_RETAIN, checked()),
            ingest_pipeline::ports::Stmt::new(sql::GENERATION_SWITCH_ACTIVATE, p()),
        ],
    ))
    .unwrap()
}

#[test]
fn a_switch_that_does_not_apply_retires_nothing() {
    // Issue: the statement retiring the retained generation had no gap
    // condition, so a switch refused for a gap still retired the rollback.
    let mut w = rechunked_world(96);
    let id = start_config(&w, 20);
    run_to_end(&w, &id);
    assert_eq!(
        (
            generation(&w, 1)["state"].clone(),
            generation(&w, 2)["state"].clone()
        ),
        (json!("retained"), json!("active"))
    );
    // A third generation is being built, with nothing built yet: its
    // build jobs are in flight.
    w.cfg.chunk_size_max_tokens = 80;
    let b = start(&w, BackfillScope::Config, 20);
    assert_eq!(generation(&w, 3)["state"], "building");
    let changes = switch_batch(&w, 3, b["backfill_id"].as_str().unwrap());
    assert_eq!(changes, vec![0, 0, 0], "the switch does not apply");
    assert_eq!(
        generation(&w, 1)["state"],
        "retained",
        "the rollback generation is kept"
    );
    assert_eq!(generation(&w, 2)["state"], "active");
}

#[test]
fn a_crash_between_the_switch_and_completing_the_backfill_still_completes_it() {
    // Issue: the switch and BACKFILL_COMPLETE were separate calls; after a
    // crash between them the backfill looped to `failed` over a done switch.
    let w = rechunked_world(96);
    let id = start_config(&w, 20);
    *w.db.fail_sql.borrow_mut() = Some((
        ingest_pipeline::store::sql::BACKFILL_COMPLETE,
        FailureBucket::DbUnavailable,
    ));
    run_to_end(&w, &id);
    assert_eq!(view(&w, &id)["state"], "completed", "{}", view(&w, &id));
    assert_eq!(generations(&w)["active"], 2);
}

#[test]
fn an_index_job_does_not_stage_into_a_generation_retired_since_it_read_its_targets() {
    // Issue: staging ignored the generations' state, so a job that read its
    // targets before cron retired one wrote rows there, orphaned for good.
    let w = rechunked_world(96);
    let id = start_config(&w, 20);
    run_to_end(&w, &id);
    assert_eq!(generation(&w, 1)["state"], "retained");
    w.put("doc-00", &document(4, None));
    let msg = w.queue.sent.borrow_mut().pop_front().unwrap();
    // Between the job's read of its targets (generation 1 retained, so a
    // target) and its staging batch, an operator retires generation 1 and
    // cron finishes retiring it.
    let db = common::Hooked {
        db: &w.db,
        before: ingest_pipeline::store::sql::CONSUME_STAGE_CHUNKS,
        hook: std::cell::RefCell::new(Some(Box::new(|db: &ingest_pipeline::native::SqliteDb| {
            let _: Vec<Value> = db.inspect(
                "DELETE FROM chunks WHERE generation = 1 RETURNING vector_id",
                vec![],
            );
            let _: Vec<Value> = db.inspect("UPDATE generations SET state = 'retired' WHERE generation = 1 RETURNING generation", vec![]);
        }))),
    };
    let p = w.p_over(db);
    let out = block_on(p.consume(&msg));
    assert_eq!(
        out,
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(
        oracle::chunks_in_retired_generations(&w.db),
        0,
        "rows in a retired generation"
    );
    assert_eq!(w.state("doc-00"), DocumentState::Indexed);
    served_chunks_have_vectors(&w).unwrap();
}

#[test]
fn a_version_records_the_active_generations_chunk_count_and_configuration() {
    // Issue: with two generations written, a version recorded the lowest
    // generation's chunk count and configuration, not the served one's.
    let w = rechunked_world(64);
    let id = start_config(&w, 20);
    run_to_end(&w, &id);
    assert_eq!(generations(&w)["active"], 2);
    // A new version is written in generation 1 (retained) and 2 (active).
    w.put("doc-00", &document(20, None));
    w.deliver_all();
    let doc = block_on(w.p().document(&default_key("doc-00")))
        .unwrap()
        .unwrap();
    let ic = doc.index_config.expect("recorded");
    assert_eq!(
        ic["chunk_size_max_tokens"], 64,
        "the active generation's: {ic}"
    );
    assert_eq!(
        doc.chunk_count as usize,
        oracle::live_chunk_texts(&w.db, "doc-00", 2).len(),
        "the active generation's chunk count"
    );
}

#[test]
fn generation_one_adopts_the_configuration_its_versions_were_indexed_with() {
    // Issue: a ledger from before generations (generation 1 recorded as '')
    // adopted the running configuration, not that of its existing vectors.
    let w = World::new();
    w.put("old", &document(10, None));
    w.deliver_all();
    let legacy =
        json!({ "chunker": "greedy-v1", "chunk_size_max_chars": 200, "chunk_overlap_chars": 20,
                         "embedder": "local-hash-v2", "pooling": "none", "dimensions": 64 })
        .to_string();
    let _: Vec<Value> = w.db.inspect(
        "UPDATE generations SET index_config = '' WHERE generation = 1 RETURNING generation",
        vec![],
    );
    let _: Vec<Value> = w.db.inspect(
        "UPDATE versions SET index_config = ?1 RETURNING version",
        vec![legacy.as_str().into()],
    );
    let text = document(12, None);
    w.put("new", &text);
    w.deliver_all();
    assert_eq!(
        generation(&w, 1)["index_config"],
        serde_json::from_str::<Value>(&legacy).unwrap()
    );
    let greedy = Chunker::Greedy {
        size_max_chars: 200,
        overlap_chars: 20,
    };
    let want: Vec<String> = greedy
        .chunk(&text, ContentType::Plain)
        .iter()
        .map(|c| c.text.to_string())
        .collect();
    assert_eq!(
        oracle::live_chunk_texts(&w.db, "new", 1),
        want,
        "the new version is chunked as generation 1's vectors were"
    );
}

#[test]
fn the_switch_waits_for_an_index_job_in_flight_that_has_not_staged_yet() {
    // Issue (found by the simulation): the switch waited only for index
    // jobs that had staged. A delivery that read its target generations
    // before the new one existed, and staged after the switch, wrote its
    // version in the old generations only: once live, that document had no
    // rows in the generation search serves.
    let mut w = world();
    let (_, job_id) = common::queued(&w.put("doc-00", &document(4, None)));
    let msg = w.queue.sent.borrow_mut().pop_front().unwrap();
    // That delivery has claimed its job (and read its targets: generation 1).
    let now = w.clock.0.get();
    let lease_until = now + i64::from(w.cfg.job_lease_seconds) * 1000;
    block_on(w.p().store.claim(&job_id, now, lease_until, None))
        .unwrap()
        .expect("claimed");
    w.cfg.chunk_size_max_tokens = 96;
    let id = start_config(&w, 20);
    // Every build job runs, and cron looks again and again.
    for _ in 0..5 {
        w.deliver_all();
        w.clock.advance_ms(60_000);
        w.cron();
        assert_eq!(
            generation(&w, 2)["state"],
            "building",
            "switched while an index job was in flight: {}",
            view(&w, &id)
        );
    }
    // The delivery dies; its redelivery, after the lease, stages in both
    // generations, and then the switch goes ahead.
    w.clock
        .advance_ms(i64::from(w.cfg.job_lease_seconds) * 1000);
    w.queue.sent.borrow_mut().push_back(msg);
    run_to_end(&w, &id);
    assert_eq!(view(&w, &id)["state"], "completed", "{}", view(&w, &id));
    assert_eq!(generation(&w, 2)["state"], "active");
    assert!(
        !oracle::live_chunk_texts(&w.db, "doc-00", 2).is_empty(),
        "doc-00 has rows in generation 2"
    );
    served_chunks_have_vectors(&w).unwrap();
}

/// A backfill's filter compares metadata as search's does (and Vectorize):
/// numbers as numbers, never a string or a boolean for a number (SQLite's
/// `json_extract` reads `true` as 1, and compares integers past 2^53
/// exactly).
#[test]
fn a_filter_backfill_compares_numbers_as_numbers_and_types_apart() {
    let metadata = [
        ("int", json!({ "rank": 1, "big": 9_007_199_254_740_993u64 })),
        (
            "float",
            json!({ "rank": 1.0, "big": 9_007_199_254_740_992.0 }),
        ),
        ("string", json!({ "rank": "1", "big": "9007199254740992" })),
        ("bool", json!({ "rank": true, "big": true })),
    ];
    for (filter, want) in [
        (json!({ "rank": 1 }), 2),
        (json!({ "rank": "1" }), 1),
        (json!({ "rank": true }), 1),
        (json!({ "big": 9_007_199_254_740_992u64 }), 2),
    ] {
        let w = World::new();
        for (doc, m) in &metadata {
            w.put_with(
                doc,
                &format!("words of {doc}"),
                m.as_object().unwrap().clone(),
                ContentType::Plain,
            );
        }
        w.deliver_all();
        let b = start(
            &w,
            BackfillScope::Filter(filter.as_object().unwrap().clone()),
            4,
        );
        assert_eq!(b["progress"]["total"], want, "{filter}");
        let id = b["backfill_id"].as_str().unwrap().to_string();
        run_to_end(&w, &id);
        let v = view(&w, &id);
        assert_eq!(v["progress"]["done"], want, "{filter}");
    }
}

/// A retired generation's cleanup used to take one page of rows a cron run
/// (63,000 rows: 60 runs, five hours at production's schedule). A run now
/// spends what its subrequest budget holds on cleanup passes: with pages of
/// two rows, a generation of over a hundred rows is gone in two runs (it
/// took one run per two rows), and the generations view said so beforehand.
#[test]
fn a_retired_generation_is_cleaned_up_at_the_budgets_pace_and_says_how_long() {
    let mut w = rechunked_world(96);
    w.cfg.chunk_overlap_tokens = 8;
    let id = start_config(&w, 100);
    run_to_end(&w, &id);
    assert_eq!(served_generation(&w), 2);
    w.cfg.cron_abandoned_chunks_max = 2;
    w.cfg.cron_cleanup_intents_max = 2;
    w.cfg.delete_batch_size = 1;
    let rows = generation(&w, 1)["chunks"].as_u64().unwrap();
    assert!((101..=200).contains(&rows), "{rows} rows: two runs' worth");
    assert_eq!(
        generation(&w, 1)["retire_estimate"],
        Value::Null,
        "retained"
    );

    block_on(w.p().retire_generation(1)).unwrap().unwrap();
    let estimate = generation(&w, 1)["retire_estimate"].clone();
    // A pass: step 1 (2 calls: the page, then its batch), 1b (2), 2's
    // retire (1) and two batches of one intent (3 each) = 11 calls of 500:
    // 45 passes of 2 rows a run.
    assert_eq!(estimate["rows"], rows, "{estimate}");
    assert_eq!(estimate["rows_per_run"], 90, "{estimate}");
    assert_eq!(estimate["cron_runs"], 2, "{estimate}");
    assert_eq!(estimate["seconds"], 600, "{estimate}");

    w.cron_runs(2);
    assert_eq!(oracle::chunks_in_generation(&w.db, 1), 0, "two runs");
    assert_eq!(w.index.ids(), w.live_vector_ids(), "its vectors are gone");
    w.cron_runs(1);
    assert_eq!(generation(&w, 1)["state"], "retired");
    assert_eq!(served_generation(&w), 2);
}

/// Retiring walks the documents a page at a time from a cursor (issue 36):
/// pages of documents that hold no row of the retiring generation (here
/// 30 deleted documents whose keys sort first) move the cursor on without
/// ending the run's cleanup, so the rows behind them are reached in the
/// same run, and the generation is retired once the round is through.
#[test]
fn retiring_walks_past_pages_of_documents_without_rows_in_the_same_run() {
    let mut w = rechunked_world(96);
    for i in 0..30 {
        w.put(&format!("aaa-{i:02}"), &document(3, None));
    }
    w.deliver_all();
    for i in 0..30 {
        w.delete(&format!("aaa-{i:02}"));
    }
    w.deliver_all();
    w.cron_runs(1);
    let id = start_config(&w, 100);
    run_to_end(&w, &id);
    assert_eq!(served_generation(&w), 2);
    w.cfg.cron_abandoned_chunks_max = 2;
    let rows = oracle::chunks_in_generation(&w.db, 1);
    assert!(rows > 0);
    block_on(w.p().retire_generation(1)).unwrap().unwrap();
    // 15 pages of two deleted documents first: the first run walks past
    // them and reaches the 12 documents' rows behind them.
    w.cron_runs(1);
    let left = oracle::chunks_in_generation(&w.db, 1);
    assert!(
        left < rows,
        "the first run retired rows: {left} of {rows} left"
    );
    let mut runs = 1;
    while generation(&w, 1)["state"] != "retired" {
        assert!(
            runs < 20,
            "retired within 20 runs: {left} rows were left after one"
        );
        w.cron_runs(1);
        runs += 1;
    }
    assert_eq!(oracle::chunks_in_generation(&w.db, 1), 0);
    assert_eq!(w.index.ids(), w.live_vector_ids(), "its vectors are gone");
}

/// Regression (simulation seed 540, with one more query in the backfill's
/// start): a build job redelivered late upserted its vectors seconds before
/// the switch; the first cron run after it verified the new generation's
/// chunks by their documents' age (old: a backfill does not change a
/// document), found the vectors not yet visible, and re-ran a document that
/// had lost nothing, as a version the client never wrote.
#[test]
fn cron_does_not_verify_a_generation_switched_to_within_the_visibility_window() {
    let w = rechunked_world(96);
    let window_ms = i64::from(w.cfg.index_visibility_window_seconds) * 1000;
    w.clock.advance_ms(window_ms + 1);
    let id = start_config(&w, 100);
    // The build's vectors are written just before the switch, and the index
    // does not show them yet.
    let mut hidden = std::collections::BTreeMap::new();
    for _ in 0..10 {
        w.deliver_all();
        for v in oracle::vector_ids_in_generation(&w.db, 2) {
            if let Some(r) = w.index.vectors.borrow_mut().remove(&v) {
                hidden.insert(v, r);
            }
        }
        w.cron();
        if view(&w, &id)["state"] != "running" {
            break;
        }
    }
    assert_eq!(generation(&w, 2)["state"], "active");
    assert!(!hidden.is_empty());
    let report = w.cron();
    assert_eq!(
        (report.chunks_verified, report.documents_repaired),
        (0, 0),
        "the new generation is not verified within the window: {report:?}"
    );
    // Once visible, and past the window, it is verified and nothing is amiss.
    w.index.vectors.borrow_mut().extend(hidden);
    w.clock.advance_ms(window_ms + 1);
    let report = w.cron();
    assert!(report.chunks_verified > 0, "{report:?}");
    assert_eq!(report.documents_repaired, 0, "{report:?}");
    for i in 0..DOCS {
        assert_eq!(
            block_on(w.p().document(&default_key(&doc_id(i))))
                .unwrap()
                .unwrap()
                .latest_version,
            1
        );
    }
}

#[test]
fn a_page_walks_at_most_backfill_walk_max_documents_when_few_need_a_job() {
    // Issue 36: a page read documents from the cursor until it had found a
    // page of documents that need a job; for a narrow filter, or a later
    // pass of a generation backfill, that was every document in one
    // statement. Now a page walks at most BACKFILL_WALK_MAX documents and
    // moves the cursor to the last one walked, a job or not.
    // A page that enqueues nothing does not count against
    // BACKFILL_PAGES_PER_RUN (it costs a few calls): one run walks on to
    // the page that does.
    let mut w = World::new();
    w.cfg.backfill_walk_max = 100;
    w.cfg.backfill_pages_per_run = 1;
    for i in 0..250 {
        let mut m = serde_json::Map::new();
        m.insert("lang".into(), json!(if i == 230 { "x" } else { "y" }));
        w.put_with(&format!("doc-{i:03}"), "a few words", m, ContentType::Plain);
    }
    w.deliver_all();
    let b = start(
        &w,
        BackfillScope::Filter(json!({ "lang": "x" }).as_object().unwrap().clone()),
        50,
    );
    assert_eq!(b["cursor"], "doc-099", "{b}");
    assert_eq!(b["progress"]["enqueued"], 0, "{b}");
    let id = b["backfill_id"].as_str().unwrap().to_string();
    w.clock.advance_ms(60_000);
    block_on(w.p().advance_backfills(1_000)).unwrap();
    let v = view(&w, &id);
    assert_eq!(
        v["cursor"], "doc-249",
        "two more pages of 100 and 50, the first without a job: {v}"
    );
    assert_eq!(v["progress"]["enqueued"], 1, "{v}");
    run_to_end(&w, &id);
    let v = view(&w, &id);
    assert_eq!(
        (v["state"].clone(), v["progress"]["done"].clone()),
        (json!("completed"), json!(1)),
        "{v}"
    );
}
