//! Pipeline scenarios on real SQLite with native fakes: ingest, unchanged
//! re-ingest, update, delete, redelivery, out-of-order messages, failures,
//! and the side-effect order upsert → replace → cleanup.

use crate::common;
use crate::common::default_key;
use ingest_pipeline::core::ids::TenantId;

use crate::common::{oracle, queued, World, VOLATILE};
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentState, IntakeOutcome};
use ingest_pipeline::store::sql;

const TEXT_A: &str =
    "Cloudflare Queues deliver every message at least once, so consumers must be idempotent.";
const TEXT_B: &str = "Bananas are yellow and grow in tropical climates near the equator.";

fn long_text(words: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{words} sentence number {i}."))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn ingest_indexes_and_search_finds_it() {
    let w = World::new();
    let (version, job_id) = queued(&w.put("a", TEXT_A));
    assert_eq!(version, 1);
    assert_eq!(w.state("a"), DocumentState::Queued);
    assert_eq!(
        w.deliver_all(),
        vec![ConsumeOutcome::Ack {
            reason: "committed"
        }]
    );
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert!(!w.index.ids().is_empty());
    let hits = w.search("queues deliver at least once", 5);
    assert_eq!(hits[0].doc_id, "a");
    assert_eq!(hits[0].version, 1);
    let job = futures::executor::block_on(w.p().store.job_view(&job_id))
        .unwrap()
        .unwrap();
    assert_eq!((job.state.as_str(), job.attempts), ("succeeded", 1));
    // D1 records which configuration produced the vectors.
    let doc = futures::executor::block_on(w.p().document(&default_key("a")))
        .unwrap()
        .unwrap();
    let ic = doc.index_config.expect("index config recorded");
    assert_eq!(ic["dimensions"], 64);
    assert_eq!(ic["embedder"], "local-hash-v2");
    assert_eq!(ic["chunker"], "unicode-v2");
    assert_eq!(ic["chunk_size_max_tokens"], 160);
    assert_eq!(ic["tokenizer"], "wordpiece");
}

#[test]
fn unchanged_reingest_creates_no_version_and_no_job() {
    let w = World::new();
    w.put("a", TEXT_A);
    w.deliver_all();
    let before = w.db.dump(&[]);
    assert_eq!(
        w.put("a", TEXT_A),
        IntakeOutcome::Unchanged {
            doc_id: "a".into(),
            version: 1
        }
    );
    assert!(w.queue.take_all().is_empty());
    assert_eq!(
        w.db.dump(&[]),
        before,
        "an unchanged PUT must write nothing"
    );
    // Metadata is part of the content.
    let mut m = serde_json::Map::new();
    m.insert("lang".into(), "en".into());
    assert!(matches!(
        w.put_with(
            "a",
            TEXT_A,
            m,
            ingest_pipeline::core::chunk::ContentType::Plain
        ),
        IntakeOutcome::Queued { version: 2, .. }
    ));
}

#[test]
fn update_replaces_old_vectors_and_old_text_is_never_served() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 20));
    w.deliver_all();
    let old_ids = w.index.ids();
    assert!(old_ids.len() > 3);
    w.put("a", TEXT_B);
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids(),
        "old vectors are gone, new ones are there"
    );
    assert!(old_ids.iter().all(|id| !w.index.ids().contains(id)));
    let hits = w.search("queues deliver at least once idempotent", 10);
    assert!(
        hits.iter()
            .all(|h| h.version == 2 && !h.text.contains("Queues")),
        "{hits:?}"
    );
    assert_eq!(oracle::cleanup_intents(&w.db), 0);
}

#[test]
fn delete_removes_every_vector_and_a_later_put_revives() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    w.deliver_all();
    let (v, _) = queued(&w.delete("a"));
    assert_eq!(v, 2);
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Deleted);
    assert!(w.index.ids().is_empty());
    assert!(w.search("queues", 5).is_empty());
    // Deleting again changes nothing; deleting the unknown is not found.
    assert_eq!(
        w.delete("a"),
        IntakeOutcome::Unchanged {
            doc_id: "a".into(),
            version: 2
        }
    );
    assert_eq!(
        w.delete("nope"),
        IntakeOutcome::NotFound {
            doc_id: "nope".into()
        }
    );
    // A newer PUT brings it back, even with the same text as before.
    assert!(matches!(
        w.put("a", &long_text(TEXT_A, 10)),
        IntakeOutcome::Queued { version: 3, .. }
    ));
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
}

#[test]
fn redelivery_is_harmless_and_leaves_identical_state() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    let msgs = w.queue.take_all();
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    let dump = w.db.dump(VOLATILE);
    let index = w.index.ids();
    for _ in 0..3 {
        assert_eq!(
            w.consume(&msgs[0]),
            ConsumeOutcome::Ack {
                reason: "already_final"
            }
        );
    }
    assert_eq!(w.db.dump(VOLATILE), dump);
    assert_eq!(w.index.ids(), index);
}

#[test]
fn out_of_order_delivery_never_makes_an_older_version_live() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    w.put("a", TEXT_B);
    let msgs = w.queue.take_all();
    assert_eq!(msgs.len(), 2);
    // Version 2 first, then the late version 1.
    assert_eq!(
        w.consume(&msgs[1]),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Ack {
            reason: "superseded"
        }
    );
    let doc = futures::executor::block_on(w.p().document(&default_key("a")))
        .unwrap()
        .unwrap();
    assert_eq!(
        (doc.live_version, doc.state),
        (Some(2), DocumentState::Indexed)
    );
    assert_eq!(w.index.ids(), w.live_vector_ids());
}

#[test]
fn a_stale_message_cannot_resurrect_a_deleted_document() {
    let w = World::new();
    w.put("a", TEXT_A);
    w.delete("a");
    let msgs = w.queue.take_all();
    assert_eq!(
        w.consume(&msgs[1]),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Ack {
            reason: "superseded"
        }
    );
    assert_eq!(w.state("a"), DocumentState::Deleted);
    assert!(w.index.ids().is_empty());
}

#[test]
fn a_version_that_loses_the_race_cleans_up_its_own_vectors() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    let first = w.queue.take_all();
    // Version 1 is claimed and runs up to the replace, but version 2 is
    // accepted meanwhile: v1's compare-and-set must fail.
    w.db.fail_sql
        .replace(Some((sql::COMMIT_SET_LIVE, FailureBucket::DbBusy)));
    assert!(matches!(w.consume(&first[0]), ConsumeOutcome::Retry { .. }));
    assert!(!w.index.ids().is_empty(), "v1's vectors were upserted");
    w.put("a", TEXT_B);
    // The lease of v1's failed attempt was released: v1 is now stale.
    assert_eq!(
        w.consume(&first[0]),
        ConsumeOutcome::Ack {
            reason: "superseded"
        }
    );
    w.deliver_all();
    w.cron();
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids(),
        "v1's abandoned vectors were swept"
    );
    assert_eq!(oracle::chunks_of_version(&w.db, 1), 0);
}

#[test]
fn side_effect_order_is_upsert_then_replace_then_cleanup() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    w.deliver_all();
    let v1_ids = w.index.ids();
    w.index.log.borrow_mut().clear();

    // If the new vectors cannot be written, nothing else happens: the old
    // version stays live and fully served.
    w.put("a", TEXT_B);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    let msgs = w.queue.take_all();
    w.consume_retried(&msgs[0]);
    assert_eq!(w.index.ids(), v1_ids);
    assert_eq!(w.live_vector_ids(), v1_ids);
    assert_eq!(w.state("a"), DocumentState::Queued);
    assert_eq!(oracle::cleanup_intents(&w.db), 0);

    // If the replace fails after the upsert, the old version is still live
    // and none of its vectors was deleted.
    w.db.fail_sql
        .replace(Some((sql::COMMIT_SET_LIVE, FailureBucket::DbBusy)));
    w.consume_retried(&msgs[0]);
    assert!(v1_ids.iter().all(|id| w.index.ids().contains(id)));
    assert_eq!(w.live_vector_ids(), v1_ids);
    assert!(w
        .index
        .log
        .borrow()
        .iter()
        .all(|l| l.starts_with("upsert ")));

    // The delete of old vectors fails: v2 is live anyway; the intents stay
    // and cron drains them.
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(oracle::cleanup_intents(&w.db), v1_ids.len() as i64);
    w.clock.advance_ms(60_000);
    let report = w.cron();
    assert_eq!(report.intents_deleted, v1_ids.len() as u64);
    assert_eq!(w.index.ids(), w.live_vector_ids());

    // And in the log: every upsert of v2 came before every delete of v1.
    let log = w.index.log.borrow();
    let last_upsert = log.iter().rposition(|l| l.starts_with("upsert ")).unwrap();
    let first_delete = log.iter().position(|l| l.starts_with("delete ")).unwrap();
    assert!(last_upsert < first_delete, "{log:?}");
}

#[test]
fn transient_failures_retry_with_backoff_then_succeed() {
    let w = World::new();
    let (_, job_id) = queued(&w.put("a", TEXT_A));
    w.index
        .upsert_faults
        .fail_next(2, FailureBucket::IndexRateLimited);
    let outcomes = w.deliver_all();
    assert!(matches!(outcomes[0], ConsumeOutcome::Retry { delay_seconds } if delay_seconds >= 1));
    assert!(matches!(outcomes[1], ConsumeOutcome::Retry { .. }));
    assert_eq!(
        outcomes[2],
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    let job = futures::executor::block_on(w.p().store.job_view(&job_id))
        .unwrap()
        .unwrap();
    assert_eq!(job.state.as_str(), "succeeded");
    assert_eq!(job.attempts, 3);
    assert_eq!(
        job.last_failure_bucket.as_deref(),
        Some("index_rate_limited")
    );
}

#[test]
fn permanent_failures_end_failed_and_leave_no_orphans() {
    let w = World::new();
    w.put("a", &long_text(TEXT_A, 10));
    w.deliver_all();
    w.put("a", &long_text(TEXT_B, 10));
    // The upsert of the first page succeeds, the replace is refused for good.
    w.db.fail_sql
        .replace(Some((sql::COMMIT_SET_LIVE, FailureBucket::DbRejected)));
    assert_eq!(
        w.deliver_all(),
        vec![ConsumeOutcome::DeadLetter { reason: "failed" }]
    );
    let doc = futures::executor::block_on(w.p().document(&default_key("a")))
        .unwrap()
        .unwrap();
    assert_eq!(
        (doc.state, doc.live_version),
        (DocumentState::Failed, Some(1))
    );
    assert_eq!(doc.last_failure_bucket.as_deref(), Some("db_rejected"));
    // v1 is still served; v2's vectors were recorded as intents and go away.
    assert!(w.search("queues", 3).iter().all(|h| h.version == 1));
    w.cron();
    assert_eq!(w.index.ids(), w.live_vector_ids());
}

#[test]
fn exhausted_attempts_end_dead() {
    let mut cfg = World::new().cfg;
    cfg.job_attempts_max = 2;
    let w = World::with(cfg);
    w.put("a", TEXT_A);
    w.index
        .upsert_faults
        .fail_next(5, FailureBucket::IndexUnavailable);
    let outcomes = w.deliver_all();
    assert_eq!(
        outcomes.last(),
        Some(&ConsumeOutcome::DeadLetter { reason: "dead" })
    );
    assert_eq!(outcomes.len(), 2);
    assert_eq!(w.state("a"), DocumentState::Failed);
}

#[test]
fn a_claimed_job_is_not_run_twice_until_its_lease_expires() {
    let w = World::new();
    let (_, job_id) = queued(&w.put("a", TEXT_A));
    let msgs = w.queue.take_all();
    let now = w.clock.0.get();
    let lease = now + i64::from(w.cfg.job_lease_seconds) * 1000;
    // Another delivery holds the claim (e.g. a concurrent duplicate).
    assert_eq!(
        futures::executor::block_on(w.p().store.claim(&job_id, now, lease, None))
            .unwrap()
            .map(|c| c.attempts),
        Some(1)
    );
    // It looks again when the lease ends (plus a second).
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Retry {
            delay_seconds: w.cfg.job_lease_seconds + 1
        }
    );
    assert_eq!(w.state("a"), DocumentState::Indexing);
    // Its holder died: after the lease, the next delivery takes over.
    w.clock
        .advance_ms(i64::from(w.cfg.job_lease_seconds) * 1000 + 1);
    assert_eq!(
        w.consume(&msgs[0]),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(w.state("a"), DocumentState::Indexed);
}

#[test]
fn a_lost_message_is_requeued_by_cron() {
    let w = World::new();
    w.queue.faults.fail_next(1, FailureBucket::QueueUnavailable);
    let (_, job_id) = queued(&w.put("a", TEXT_A));
    assert!(w.queue.take_all().is_empty(), "the send failed");
    assert_eq!(w.cron().jobs_requeued, 0, "not stalled yet");
    w.clock
        .advance_ms(i64::from(w.cfg.job_stall_seconds) * 1000 + 1);
    let report = w.cron();
    assert_eq!(report.jobs_requeued, 1);
    let msgs = w.queue.take_all();
    assert_eq!(msgs[0].job_id, job_id);
    w.queue.sent.borrow_mut().extend(msgs);
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
}

#[test]
fn chunk_rows_are_written_in_few_statements() {
    // 2,000 chunks: D1 calls must not grow with the number of chunks.
    let mut cfg = World::new().cfg;
    cfg.chunk_size_max_tokens = 64;
    cfg.chunk_overlap_tokens = 0;
    let w = World::with(cfg);
    let text: String = (0..2000)
        .map(|i| format!("chunk {i:05} {}\n\n", "w".repeat(50)))
        .collect();
    w.put("big", &text);
    let before = w.db.calls.get();
    w.deliver_all();
    let calls = w.db.calls.get() - before;
    assert_eq!(w.live_vector_ids().len(), 2000);
    // load, supersede-check, claim, parts, open rows, stage, step, commit,
    // and cleanup probe.
    assert!(calls <= 11, "{calls} D1 calls for 2,000 chunks");
    assert_eq!(w.index.upsert_calls.get(), 2, "⌈2000/1000⌉ upserts");
}

#[test]
fn batch_intake_uses_one_read_and_one_write() {
    let w = World::new();
    let items: Vec<_> = (0..100)
        .map(|i| {
            ingest_pipeline::pipeline::IntakeItem::Put(ingest_pipeline::pipeline::DocumentInput {
                doc_id: ingest_pipeline::core::ids::DocId::parse(&format!("doc-{i}")).unwrap(),
                text: format!("{TEXT_A} {i}"),
                metadata: Default::default(),
                content_type: ingest_pipeline::core::chunk::ContentType::Plain,
            })
        })
        .collect();
    let before = w.db.calls.get();
    let out =
        futures::executor::block_on(w.p().intake(&TenantId::default_tenant(), &items)).unwrap();
    assert_eq!(out.len(), 100);
    assert_eq!(w.db.calls.get() - before, 2);
    assert_eq!(w.queue.send_calls.get(), 1);
    w.deliver_all();
    assert_eq!(
        oracle::live_versions(&w.db)
            .values()
            .filter(|v| **v == Some(1))
            .count(),
        100
    );
}

#[test]
fn large_documents_are_split_into_parts_and_round_trip() {
    let mut cfg = World::new().cfg;
    cfg.d1_text_part_bytes_max = 4096;
    cfg.d1_json_param_bytes_max = 4096;
    let w = World::with(cfg);
    let text: String = (0..3000).map(|i| format!("語{i} ")).collect();
    w.put("big", &text);
    assert!(oracle::version_parts(&w.db) > 3);
    let back = futures::executor::block_on(w.p().store.load_text(
        "big",
        1,
        oracle::part_count(&w.db, "big", 1),
    ))
    .unwrap();
    assert_eq!(back, text);
    w.deliver_all();
    assert_eq!(w.state("big"), DocumentState::Indexed);
}

#[test]
fn a_job_survives_a_transient_outage_within_the_retry_window_and_dies_after_it() {
    // Issue: the whole retry budget (6 attempts, 5 s doubling) was about
    // 2.5 minutes, so a 3-minute Vectorize or Workers AI incident killed
    // every job in flight.
    let w = World::new();
    w.put("a", TEXT_A);
    // The index is down for the first fifteen attempts (over half an hour
    // with the backoff capped at five minutes).
    w.index
        .upsert_faults
        .fail_next(15, FailureBucket::IndexUnavailable);
    let started = w.clock.0.get();
    let outcomes = w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed, "{outcomes:?}");
    let outage_ms = w.clock.0.get() - started;
    assert!(
        outage_ms > 30 * 60 * 1000,
        "the outage lasted {} s: {outcomes:?}",
        outage_ms / 1000
    );
    // An outage longer than JOB_RETRY_WINDOW_SECONDS ends the job dead.
    w.put("b", TEXT_B);
    w.index
        .upsert_faults
        .fail_next(1000, FailureBucket::IndexUnavailable);
    let started = w.clock.0.get();
    let outcomes = w.deliver_all();
    assert_eq!(
        outcomes.last(),
        Some(&ConsumeOutcome::DeadLetter { reason: "dead" })
    );
    assert_eq!(w.state("b"), DocumentState::Failed);
    let gave_up_after = (w.clock.0.get() - started) / 1000;
    assert!(
        gave_up_after >= i64::from(w.cfg.job_retry_window_seconds),
        "gave up after {gave_up_after} s"
    );
    assert!(
        (outcomes.len() as u32) < w.cfg.job_attempts_max,
        "the window ended it, not the attempts"
    );
}

#[test]
fn an_attempt_that_made_progress_starts_its_count_again() {
    // Issue: JOB_UP_FOR_RETRY kept `attempts` even when the attempt made
    // progress, so a long job failing now and then died of its length.
    let mut cfg = World::new().cfg;
    cfg.job_attempts_max = 3;
    cfg.upsert_batch_size = 2;
    cfg.chunk_size_max_tokens = 64;
    cfg.chunk_overlap_tokens = 0;
    let w = World::with(cfg);
    let text: String = (0..12)
        .map(|i| format!("paragraph {i} {}\n\n", "w".repeat(40)))
        .collect();
    w.put("long", &text);
    // Each page's upsert fails once after the first page was written: every
    // attempt writes a page, then fails. More failures than JOB_ATTEMPTS_MAX.
    let mut failures = 0;
    for _ in 0..100 {
        let batch = w.queue.take_all();
        if batch.is_empty() {
            break;
        }
        for m in batch {
            if failures < 5 {
                // This attempt writes one page, then its second upsert fails.
                w.index
                    .upsert_faults
                    .fail_nth(2, FailureBucket::IndexUnavailable);
                failures += 1;
            }
            let o = w.consume(&m);
            if let ConsumeOutcome::Retry { delay_seconds } = o {
                w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                w.queue.sent.borrow_mut().push_back(m);
            }
            assert_ne!(
                o,
                ConsumeOutcome::DeadLetter { reason: "dead" },
                "died of its length"
            );
        }
    }
    assert!(failures > w.cfg.job_attempts_max as usize, "{failures}");
    assert_eq!(w.state("long"), DocumentState::Indexed);
}

#[test]
fn an_index_known_to_refuse_ends_the_attempt_before_any_embedding() {
    // Issue: a failing describe() at start-up made every index call fail,
    // but the consumer still embedded its chunks before the refused upsert.
    let w = World::new();
    w.put("a", TEXT_A);
    w.index
        .refused
        .set(Some(ingest_pipeline::ports::PortError::new(
            FailureBucket::IndexUnavailable,
            "index_check",
        )));
    let c = common::counted(&w);
    let msg = w.queue.take_all().remove(0);
    let out = futures::executor::block_on(c.p().consume(&msg));
    assert!(matches!(out, ConsumeOutcome::Retry { .. }), "{out:?}");
    assert_eq!(c.embedder.texts.get(), 0, "nothing was embedded");
    w.index.refused.set(None);
    w.queue.sent.borrow_mut().push_back(msg);
    w.clock.advance_ms(60_000);
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
}

fn search_with(
    w: &World,
    query: &str,
    top_k: usize,
    metadata: &[(&str, serde_json::Value)],
) -> Result<Vec<ingest_pipeline::pipeline::SearchHit>, ingest_pipeline::ports::PortError> {
    futures::executor::block_on(
        w.p().search(
            &TenantId::default_tenant(),
            &ingest_pipeline::pipeline::SearchRequest {
                query: query.into(),
                top_k,
                doc_id: None,
                metadata: metadata
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
                highlight: false,
            },
        ),
    )
}

#[test]
fn a_metadata_filter_is_checked_exactly_in_d1_not_on_its_first_64_bytes() {
    // Issue: Vectorize compares string metadata on its first 64 bytes; only
    // doc_id was checked again in D1, so a filter on another string matched
    // documents whose value shares those bytes.
    let w = World::new();
    let prefix = "x".repeat(64);
    let mine = format!("{prefix}-mine");
    let theirs = format!("{prefix}-theirs");
    for (doc, tag) in [("mine", &mine), ("theirs", &theirs)] {
        let mut m = serde_json::Map::new();
        m.insert("tag".into(), serde_json::json!(tag));
        w.put_with(
            doc,
            "Harbour lanterns burn through the winter night.",
            m,
            ingest_pipeline::core::chunk::ContentType::Plain,
        );
    }
    w.deliver_all();
    let hits = search_with(
        &w,
        "harbour lanterns",
        5,
        &[("tag", serde_json::json!(mine))],
    )
    .unwrap();
    assert_eq!(
        hits.iter().map(|h| h.doc_id.as_str()).collect::<Vec<_>>(),
        vec!["mine"]
    );
}

#[test]
fn search_fills_top_k_when_stale_candidates_take_the_first_slots() {
    // Issue: candidates of old versions or other generations took the
    // over-fetched slots, and search returned fewer than top_k.
    let w = World::new();
    let text: String = (0..12)
        .map(|i| format!("Section {i}: harbour lanterns and tide tables, part {i}.\n\n"))
        .collect();
    let mut cfg = w.cfg.clone();
    cfg.chunk_size_max_tokens = 40;
    cfg.chunk_overlap_tokens = 0;
    let w = World::with(cfg);
    w.put("doc", &text);
    w.deliver_all();
    // Thirty vectors D1 does not know (orphans) that match the query best.
    let q = ingest_pipeline::core::local_embed::embed(
        "harbour lanterns tide tables",
        w.cfg.embedding_dimensions,
    );
    for i in 0..30 {
        let mut md = std::collections::BTreeMap::new();
        md.insert("doc_id".to_string(), serde_json::json!("gone"));
        md.insert("version".to_string(), serde_json::json!(1));
        w.index.vectors.borrow_mut().insert(
            format!("orphan-{i:02}"),
            ingest_pipeline::ports::VectorRecord {
                id: format!("orphan-{i:02}"),
                namespace: "default".into(),
                values: q.clone(),
                metadata: md,
            },
        );
    }
    let hits = search_with(&w, "harbour lanterns tide tables", 5, &[]).unwrap();
    assert_eq!(hits.len(), 5, "{hits:?}");
    assert!(hits.iter().all(|h| h.doc_id == "doc"));
}

#[test]
fn search_retries_a_transient_failure_within_its_bound() {
    // Issue: under 20% transient failures a search answered 5xx about one
    // time in two; a bounded retry inside the request (SEARCH_RETRIES_MAX).
    let w = World::new();
    w.put("a", TEXT_A);
    w.deliver_all();
    let retries = w.cfg.search_retries_max as usize;
    w.index
        .query_faults
        .fail_next(retries, FailureBucket::IndexUnavailable);
    assert!(!search_with(&w, "queues", 3, &[]).unwrap().is_empty());
    // One more in a row fails the request (bounded).
    w.index
        .query_faults
        .fail_next(retries + 1, FailureBucket::IndexUnavailable);
    assert!(search_with(&w, "queues", 3, &[]).is_err());
}

#[test]
fn with_the_default_policy_a_job_that_outlived_an_outage_survives_a_blip_just_after_it() {
    // Issue (found by the simulation with the production policy): with the
    // backoff capped at an hour, a job failing through a 34-minute outage
    // next ran 84 minutes in, past its one-hour window, so one unrelated
    // failure then ended it `dead`.
    use ingest_pipeline::core::failure::{RetryDecision, RetryPolicy};
    let cfg = ingest_pipeline::config::Config::default();
    let policy = RetryPolicy {
        attempts_max: cfg.job_attempts_max,
        base_delay_seconds: cfg.retry_base_delay_seconds,
        max_delay_seconds: cfg.retry_max_delay_seconds,
        window_seconds: cfg.job_retry_window_seconds,
    };
    let window = i64::from(cfg.job_retry_window_seconds);
    for outage_minutes in [1, 5, 20, 34, 45, 50] {
        let outage_end = outage_minutes * 60;
        let (mut t, mut attempt) = (0i64, 1u32);
        // Every attempt fails until the outage is over.
        while t < outage_end {
            match policy.decide(FailureBucket::IndexUnavailable, "job", attempt, t) {
                RetryDecision::RetryAfter { delay_seconds } => t += i64::from(delay_seconds),
                other => panic!("{outage_minutes} min outage: gave up at attempt {attempt}, {t} s in: {other:?}"),
            }
            attempt += 1;
        }
        // The first attempt after it fails once more, for another reason.
        assert!(
            t < window - 5 * 60,
            "{outage_minutes} min outage: the first attempt after it came {t} s in, near the {window} s window"
        );
        assert!(
            matches!(
                policy.decide(FailureBucket::EmbedUnavailable, "job", attempt, t),
                RetryDecision::RetryAfter { .. }
            ),
            "{outage_minutes} min outage: a blip {t} s in ended the job"
        );
    }
}

#[test]
fn time_a_job_spent_waiting_does_not_count_against_its_retry_window() {
    // Issue (found by the simulation with the production policy): the
    // window counted from the first failure of a job however long ago, so
    // a job that failed once, then waited (on a dead invocation's lease, a
    // queue backlog) past JOB_RETRY_WINDOW_SECONDS, ended `dead` at its
    // next transient failure, its second.
    let w = World::new();
    w.put("a", TEXT_A);
    let m = w.queue.take_all().remove(0);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Retry { .. }));
    // Longer than any wait between two failures of one outage.
    let gap = w.cfg.retry_max_delay_seconds + w.cfg.job_lease_seconds;
    w.clock
        .advance_ms(i64::from(w.cfg.job_retry_window_seconds.max(gap) + 1) * 1000);
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    let o = w.consume(&m);
    assert!(
        matches!(o, ConsumeOutcome::Retry { .. }),
        "the second failure ended the job: {o:?}"
    );
    w.clock
        .advance_ms(i64::from(w.cfg.retry_max_delay_seconds) * 1000);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Ack { .. }));
    assert_eq!(w.state("a"), DocumentState::Indexed);

    // Failures within the gap of each other are one run: the window still ends it.
    w.put("b", TEXT_B);
    let m = w.queue.take_all().remove(0);
    w.index
        .upsert_faults
        .fail_next(1000, FailureBucket::IndexUnavailable);
    let started = w.clock.0.get();
    let mut last = None;
    for _ in 0..w.cfg.job_attempts_max {
        let o = w.consume(&m);
        match o {
            ConsumeOutcome::Retry { delay_seconds } => {
                w.clock.advance_ms(i64::from(delay_seconds) * 1000)
            }
            _ => {
                last = Some(o);
                break;
            }
        }
    }
    assert_eq!(last, Some(ConsumeOutcome::DeadLetter { reason: "dead" }));
    assert!((w.clock.0.get() - started) / 1000 >= i64::from(w.cfg.job_retry_window_seconds));
}

#[test]
fn a_duplicate_delivery_before_the_retry_time_is_not_an_attempt() {
    // Issue (found by the simulation with the production policy): a
    // duplicated message (Queues delivers at least once) was claimed at
    // once, each copy on its own backoff, so an outage used the job's
    // attempts twice as fast and a 40-minute outage ended it `dead`.
    let w = World::new();
    w.put("a", TEXT_A);
    let m = w.queue.take_all().remove(0);
    // The first two attempts fail.
    w.index
        .upsert_faults
        .fail_next(2, FailureBucket::IndexUnavailable);
    let ConsumeOutcome::Retry { delay_seconds } = w.consume(&m) else {
        panic!("not retried")
    };
    let attempts = || oracle::job_attempts(&w.db, &m.job_id);
    assert_eq!(attempts(), 1);
    // The duplicate, a second later: it waits for the retry time.
    w.clock.advance_ms(1000);
    assert_eq!(
        w.consume(&m),
        ConsumeOutcome::Retry {
            delay_seconds: delay_seconds - 1
        },
        "the duplicate waits until the job's retry time"
    );
    assert_eq!(attempts(), 1, "the duplicate was counted as an attempt");
    // At the retry time, the attempt runs (and fails again).
    w.clock.advance_ms(i64::from(delay_seconds - 1) * 1000);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Retry { .. }));
    assert_eq!(attempts(), 2);
    // Once the index is back, one of the copies indexes the document, and
    // the other one finds it done.
    w.clock
        .advance_ms(i64::from(w.cfg.retry_max_delay_seconds) * 1000);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Ack { .. }));
    assert!(matches!(w.consume(&m), ConsumeOutcome::Ack { .. }));
    assert_eq!(w.state("a"), DocumentState::Indexed);
}

/// Defect (found by the simulation once it panicked deliveries, seed
/// 1717): the entry point's call after a panicking consume ended the
/// message's job `failed` whenever it was running, even when the panic
/// came before the claim and a duplicate delivery of the message held the
/// job; that delivery's next upsert then wrote a vector whose rows the
/// failure had already cleaned up (an orphan, I3). A crashed delivery now
/// ends only a job its own claim holds (its token, `lease_owner`).
#[test]
fn a_crashed_delivery_ends_only_a_job_it_holds() {
    let w = World::new();
    let (_, job_id) = queued(&w.put("a", TEXT_A));
    let msg = w.queue.take_all().remove(0);
    let now = w.clock.0.get();
    let lease = now + i64::from(w.cfg.job_lease_seconds) * 1000;
    // Delivery "a" holds the job; delivery "b" of the same message panics
    // before its claim.
    block_on_claim(&w, &job_id, now, lease, "a");
    let mut b = w.p();
    b.delivery = Some("b".into());
    assert!(matches!(
        futures::executor::block_on(b.end_crashed(&msg)),
        ConsumeOutcome::Retry { .. }
    ));
    assert_eq!(w.state("a"), DocumentState::Indexing, "a's job still runs");
    assert!(oracle::failed_jobs_without_evidence(&w.db).is_empty());
    // Delivery "a" panics after its claim: its job ends failed, dead-lettered.
    let mut a = w.p();
    a.delivery = Some("a".into());
    assert_eq!(
        futures::executor::block_on(a.end_crashed(&msg)),
        ConsumeOutcome::DeadLetter { reason: "crashed" }
    );
    assert_eq!(w.state("a"), DocumentState::Failed);
}

fn block_on_claim(w: &World, job_id: &str, now: i64, lease: i64, owner: &str) {
    let claim = futures::executor::block_on(w.p().store.claim(job_id, now, lease, Some(owner)));
    assert!(claim.unwrap().is_some(), "claimed by {owner}");
}

/// Defect (found by the simulation's document-reindexing operator, seed
/// 407): a document's re-run decided whether its copy of version v as v+1
/// applied by v+1's creation time alone; when a delete of the document
/// wrote v+1 in the same millisecond, the re-run's last statement added a
/// second job to that tombstone, with the re-run's ID. Now v+1 must also
/// hold v's content to be the re-run's.
#[test]
fn a_rerun_that_loses_to_a_write_in_the_same_millisecond_adds_nothing() {
    let w = World::new();
    w.put("a", TEXT_A);
    w.deliver_all();
    let now = w.clock.0.get();
    // Between the re-run's decision and its batch, a delete writes v2 at
    // the same time (the clock does not move): its intake batch, by hand.
    let db = common::Hooked {
        db: &w.db,
        before: sql::REPAIR_RERUN_ADVANCE,
        hook: std::cell::RefCell::new(Some(Box::new(
            move |db: &ingest_pipeline::native::SqliteDb| {
                let _: Vec<serde_json::Value> = db.inspect(
                    "UPDATE documents SET latest_version = 2 WHERE doc_id = 'a' RETURNING doc_id",
                    vec![],
                );
                let _: Vec<serde_json::Value> = db.inspect(
                "INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, created_at)
                 VALUES ('a', 2, 1, 'tombstone', 'text/plain', '{}', 0, 1, ?1) RETURNING version",
                vec![ingest_pipeline::ports::SqlValue::Int(now)],
            );
                let _: Vec<serde_json::Value> = db.inspect(
                "INSERT INTO jobs (job_id, doc_id, version, kind, state, step, attempts, created_at, updated_at)
                 VALUES ('the-delete', 'a', 2, 'delete', 'queued', 'queued', 0, ?1, ?1) RETURNING job_id",
                vec![ingest_pipeline::ports::SqlValue::Int(now)],
            );
            },
        ))),
    };
    let out =
        futures::executor::block_on(w.p_over(db).reindex_document(&default_key("a"))).unwrap();
    assert!(out.is_err(), "the re-run lost to the delete: {out:?}");
    let jobs: Vec<serde_json::Value> = w.db.inspect(
        "SELECT job_id FROM jobs WHERE doc_id = 'a' AND version = 2",
        vec![],
    );
    assert_eq!(jobs.len(), 1, "only the delete's job: {jobs:?}");
}
