//! The consumer's invocation budget: a version too large for one
//! invocation's subrequests or wall time checkpoints in D1 and continues in
//! a new message, never exceeding the budget, never redoing finished pages,
//! and ends exactly as a single-invocation run would.

use crate::common;
use ingest_pipeline::core::ids::TenantId;

use crate::common::{changed_chunks, chunk_texts, counted, document, Counted, World};
use futures::executor::block_on;
use ingest_pipeline::config::Config;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::index_config::EmbedModel;
use ingest_pipeline::native::{CountingEmbedder, CountingIndex};
use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentState, JobView, SearchRequest};
use ingest_pipeline::ports::{Clock, Embedder, PortError, VectorIndex};

/// A small budget: a page of 50 chunks costs a read, 5 embed calls and an
/// upsert, so each invocation writes one page or two.
fn small_budget() -> Config {
    Config {
        chunk_size_max_tokens: 160,
        chunk_overlap_tokens: 16,
        embedding_dimensions: 64,
        embed_batch_size: 10,
        upsert_batch_size: 50,
        consume_subrequests_max: 12,
        ..Config::default()
    }
}

/// Subrequests made so far through the counted ports and the world's
/// database and queue.
fn subrequests<V: VectorIndex>(c: &Counted<'_, V>) -> u64 {
    let i = &c.index;
    c.w.db.calls.get()
        + c.embedder.calls.get()
        + i.upsert_calls.get()
        + i.delete_calls.get()
        + i.get_calls.get()
        + i.query_calls.get()
        + c.w.queue.send_calls.get()
}

/// Delivers messages one at a time, measuring each invocation from the
/// outside. Returns (outcome, subrequests) per delivery.
fn deliver_measured<V: VectorIndex>(c: &Counted<'_, V>) -> Vec<(ConsumeOutcome, u64)> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let Some(m) = c.w.queue.sent.borrow_mut().pop_front() else {
            return out;
        };
        let before = subrequests(c);
        let o = block_on(c.p().consume(&m));
        out.push((o, subrequests(c) - before));
        if let ConsumeOutcome::Retry { delay_seconds } = o {
            c.w.clock.advance_ms(i64::from(delay_seconds) * 1000);
            c.w.queue.sent.borrow_mut().push_back(m);
        }
    }
    panic!("the queue did not drain");
}

fn job(w: &World, job_id: &str) -> JobView {
    let row = block_on(w.p().store.job_view(job_id))
        .unwrap()
        .expect("job exists");
    JobView::from_row(row, w.cfg.consume_subrequests_max)
}

fn put_job(w: &World, doc: &str, text: &str) -> String {
    match w.put(doc, text) {
        ingest_pipeline::pipeline::IntakeOutcome::Queued { job_id, .. } => job_id,
        other => panic!("not accepted: {other:?}"),
    }
}

#[test]
fn a_large_version_spans_invocations_within_the_budget() {
    let w = World::with(small_budget());
    let text = document(600, None);
    let n = chunk_texts(&text, &w).len() as u32;
    let job_id = put_job(&w, "big", &text);
    let c = counted(&w);
    let runs = deliver_measured(&c);

    let budget = w.cfg.consume_subrequests_max;
    for (o, used) in &runs {
        assert!(
            *used <= budget,
            "an invocation made {used} subrequests, over {budget} ({o:?})"
        );
    }
    let checkpoints = runs
        .iter()
        .filter(|(o, _)| {
            *o == ConsumeOutcome::Ack {
                reason: "checkpointed",
            }
        })
        .count();
    assert!(
        checkpoints >= 5,
        "{n} chunks in pages of 50 need several invocations, saw {checkpoints} checkpoints"
    );
    assert_eq!(
        runs.last().unwrap().0,
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    );
    assert_eq!(w.state("big"), DocumentState::Indexed);

    // The job's own counters agree with the outside measurement.
    let j = job(&w, &job_id);
    assert_eq!(j.state.as_str(), "succeeded");
    assert_eq!(j.usage.invocations as usize, runs.len());
    assert_eq!(
        j.usage.subrequests.total,
        runs.iter().map(|(_, u)| u).sum::<u64>()
    );
    assert_eq!(
        j.usage.subrequests_peak_per_invocation,
        runs.iter().map(|(_, u)| *u).max().unwrap()
    );
    assert!(j.usage.subrequests_peak_per_invocation <= budget);
    assert_eq!(j.usage.subrequests.embed, c.embedder.calls.get());
    assert_eq!(
        j.usage.subrequests.queue, checkpoints as u64,
        "one continuation message per checkpoint"
    );
    assert_eq!(
        (j.progress.chunks_total, j.progress.chunks_done),
        (Some(n), n)
    );
    // No page was embedded twice.
    assert_eq!(j.progress.chunks_embedded, u64::from(n));
    assert_eq!(c.embedder.texts.get(), u64::from(n));
    assert_eq!(c.index.vectors_written.get(), u64::from(n));

    // Every chunk has the vector of its own text, and search finds it.
    assert_eq!(w.live_vector_ids().len() as u32, n);
    for id in w.live_vector_ids() {
        assert!(w.index.vectors.borrow().contains_key(&id), "{id} missing");
    }
    let q = common::paragraph(321);
    let hits = block_on(w.p().search(
        &TenantId::default_tenant(),
        &SearchRequest {
            query: q.clone(),
            top_k: 3,
            doc_id: None,
            metadata: Default::default(),
            mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
            highlight: false,
        },
    ))
    .unwrap();
    assert!(
        hits.iter().any(|h| h.text.contains("Paragraph 321")),
        "search finds paragraph 321: {hits:?}"
    );
}

#[test]
fn a_new_version_with_one_changed_paragraph_writes_only_that_in_one_invocation() {
    // One subrequest more than the smallest budget: the staging reads the
    // document's open rows (the rows it shares with the new version).
    let w = World::with(Config {
        consume_subrequests_max: 13,
        ..small_budget()
    });
    let v1 = document(600, None);
    put_job(&w, "big", &v1);
    w.deliver_all();
    let v2 = document(
        600,
        Some((
            300,
            "Paragraph 300 now says something entirely different about tokens and leases.",
        )),
    );
    let changed = changed_chunks(&v1, &v2, &w) as u64;
    assert!(
        (1..=3).contains(&changed),
        "one paragraph touches one to three chunks, got {changed}"
    );
    let job_id = put_job(&w, "big", &v2);
    let c = counted(&w);
    let runs = deliver_measured(&c);
    assert!(runs
        .iter()
        .all(|(_, u)| *u <= w.cfg.consume_subrequests_max));
    assert_eq!(
        runs.len(),
        1,
        "the unchanged chunks keep their vectors: nothing to copy, one invocation"
    );
    assert_eq!(c.index.get_calls.get(), 0, "no vector is read");
    assert_eq!(c.index.upsert_calls.get(), 1);
    assert_eq!(c.index.vectors_written.get(), changed);
    assert_eq!(w.state("big"), DocumentState::Indexed);
    assert_eq!(
        c.embedder.texts.get(),
        changed,
        "only the changed chunks reached the embedder"
    );
    let j = job(&w, &job_id);
    let n = chunk_texts(&v2, &w).len() as u64;
    assert_eq!(
        (
            j.progress.chunks_embedded,
            j.progress.chunks_reused,
            j.progress.chunks_kept
        ),
        (changed, 0, n - changed)
    );
    // The old version's vectors are gone (or waiting as intents for cron).
    w.clock.advance_ms(60_000);
    for _ in 0..10 {
        w.cron();
    }
    assert_eq!(w.index.ids(), w.live_vector_ids());
}

#[test]
fn a_retry_after_a_failure_continues_from_the_checkpoint() {
    let w = World::with(small_budget());
    let text = document(300, None);
    let n = chunk_texts(&text, &w).len() as u64;
    let job_id = put_job(&w, "big", &text);
    let c = counted(&w);
    // Two invocations: staging, then at least one page.
    for _ in 0..2 {
        let m = w.queue.sent.borrow_mut().pop_front().unwrap();
        assert_eq!(
            block_on(c.p().consume(&m)),
            ConsumeOutcome::Ack {
                reason: "checkpointed"
            }
        );
    }
    let done_before = job(&w, &job_id).progress.chunks_done;
    assert!(done_before > 0);
    // The next page's upsert fails: the job keeps its checkpoint plus
    // whatever pages this attempt finished.
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    let m = w.queue.sent.borrow_mut().pop_front().unwrap();
    assert!(matches!(
        block_on(c.p().consume(&m)),
        ConsumeOutcome::Retry { .. }
    ));
    let after_failure = job(&w, &job_id);
    assert_eq!(after_failure.state.as_str(), "up_for_retry");
    assert_eq!(
        after_failure.progress.chunks_done, done_before,
        "the failed page is not counted"
    );
    assert_eq!(w.state("big"), DocumentState::PartiallyIndexed);
    w.queue.sent.borrow_mut().push_back(m);
    w.clock.advance_ms(3_600_000);
    deliver_measured(&c);
    assert_eq!(w.state("big"), DocumentState::Indexed);
    // Only the failed page (at most 50 chunks) was embedded twice.
    let extra = c.embedder.texts.get() - n;
    assert!(extra <= 50, "{extra} chunks embedded again");
    let j = job(&w, &job_id);
    assert_eq!(j.attempts, 1, "attempts count since the last progress");
}

#[test]
fn a_lost_continuation_is_requeued_by_cron() {
    let w = World::with(small_budget());
    let job_id = put_job(&w, "big", &document(200, None));
    let m = w.queue.take_all().remove(0);
    w.queue.faults.fail_next(1, FailureBucket::QueueUnavailable);
    assert_eq!(
        w.consume(&m),
        ConsumeOutcome::Ack {
            reason: "checkpointed"
        }
    );
    assert!(
        w.queue.sent.borrow().is_empty(),
        "the continuation was lost"
    );
    assert_eq!(job(&w, &job_id).state.as_str(), "queued");
    w.clock
        .advance_ms(i64::from(w.cfg.job_stall_seconds) * 1000 + 1);
    assert_eq!(w.cron().jobs_requeued, 1);
    w.deliver_all();
    assert_eq!(w.state("big"), DocumentState::Indexed);
}

/// An embedder that takes 100 s of the injected clock per call.
struct Slow<'a>(&'a World);
impl Embedder for Slow<'_> {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        self.0.clock.advance_ms(100_000);
        self.0.embedder.embed(model, texts).await
    }
}

#[test]
fn the_wall_time_budget_checkpoints_too() {
    let w = World::with(Config {
        consume_subrequests_max: 1000,
        consume_wall_seconds_max: 250,
        ..small_budget()
    });
    let job_id = put_job(&w, "big", &document(100, None));
    let slow = CountingEmbedder::new(Slow(&w));
    let index = CountingIndex::new(&w.index);
    let p = ingest_pipeline::pipeline::Pipeline::new(
        w.cfg.clone(),
        &w.db,
        &index,
        &slow,
        &w.queue,
        &w.clock,
    );
    let mut outcomes = Vec::new();
    loop {
        let next = w.queue.sent.borrow_mut().pop_front();
        let Some(m) = next else { break };
        let started = w.clock.now_ms();
        let calls = slow.calls.get();
        outcomes.push(block_on(p.consume(&m)));
        // The budget is checked before each call: at most one call starts
        // after the wall time is spent.
        assert!(
            slow.calls.get() - calls <= 3,
            "{} embed calls of 100 s in a 250 s budget",
            slow.calls.get() - calls
        );
        assert!(w.clock.now_ms() - started <= 300_000);
    }
    assert!(
        outcomes
            .iter()
            .filter(|o| **o
                == ConsumeOutcome::Ack {
                    reason: "checkpointed"
                })
            .count()
            >= 3
    );
    assert_eq!(w.state("big"), DocumentState::Indexed);
    assert_eq!(
        job(&w, &job_id).progress.chunks_embedded,
        chunk_texts(&document(100, None), &w).len() as u64
    );
}

#[test]
fn budgets_that_cannot_make_progress_are_refused() {
    let too_small = Config {
        consume_subrequests_max: 9,
        ..Config::default()
    };
    assert!(too_small
        .validate()
        .unwrap_err()
        .to_string()
        .contains("CONSUME_SUBREQUESTS_MAX"));
    let outlives_lease = Config {
        consume_wall_seconds_max: 960,
        job_lease_seconds: 960,
        ..Config::default()
    };
    assert!(outlives_lease
        .validate()
        .unwrap_err()
        .to_string()
        .contains("CONSUME_WALL_SECONDS_MAX"));
    assert!(Config {
        consume_subrequests_max: 10,
        ..Config::default()
    }
    .validate()
    .is_ok());
}

#[test]
fn a_deleted_document_needs_one_invocation() {
    let w = World::with(small_budget());
    put_job(&w, "big", &document(100, None));
    w.deliver_all();
    let job_id = match w.delete("big") {
        ingest_pipeline::pipeline::IntakeOutcome::Queued { job_id, .. } => job_id,
        other => panic!("{other:?}"),
    };
    let outs = w.deliver_all();
    assert_eq!(
        outs,
        vec![ConsumeOutcome::Ack {
            reason: "committed"
        }]
    );
    let j = job(&w, &job_id);
    assert_eq!((j.state.as_str(), j.usage.invocations), ("succeeded", 1));
    assert!(j.usage.subrequests_peak_per_invocation <= w.cfg.consume_subrequests_max);
}
