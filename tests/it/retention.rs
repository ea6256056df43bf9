//! Retention (docs/ARCHITECTURE.md, "Retention"): cron prunes history past
//! its retention, a page of each kind per run; nothing that may still be
//! served, re-run or inspected goes, and dead letters never do. A tenant's
//! bytes are what its versions' texts hold, history included, until the
//! prune gives them back; a re-run stores no second copy.

use crate::common::{default_key, World, TEST_INGEST_TOKEN};
use futures::executor::block_on;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::ids::TenantId;
use ingest_pipeline::native::oracle;
use ingest_pipeline::pipeline::{BackfillScope, DocumentState, RepairReport, Settle};

/// Moves the clock past `seconds` of retention.
fn age(w: &World, seconds: u64) {
    w.clock.advance_ms(seconds as i64 * 1000 + 1);
}

/// The default tenant's recorded bytes.
fn bytes(w: &World) -> i64 {
    w.count("SELECT bytes AS n FROM tenants WHERE tenant_id = 'default'")
}

/// Cron runs until one prunes nothing; the runs' reports summed.
fn prune_all(w: &World) -> RepairReport {
    let mut sum = RepairReport::default();
    for _ in 0..20 {
        let r = w.cron();
        if r.pruned() == 0 {
            return sum;
        }
        sum.texts_pruned += r.texts_pruned;
        sum.versions_pruned += r.versions_pruned;
        sum.jobs_pruned += r.jobs_pruned;
        sum.syncs_pruned += r.syncs_pruned;
        sum.backfills_pruned += r.backfills_pruned;
        sum.redrives_pruned += r.redrives_pruned;
        sum.history_rows_pruned += r.history_rows_pruned;
        sum.repair_runs_pruned += r.repair_runs_pruned;
        sum.tokens_pruned += r.tokens_pruned;
    }
    panic!("cron still prunes after 20 runs");
}

#[test]
fn a_superseded_text_goes_at_the_next_run_and_its_row_after_the_history() {
    let w = World::new();
    w.put("a", "first text of a");
    w.deliver_all();
    w.put("a", "second text of a");
    w.deliver_all();
    w.put("a", "third"); // the latest, not live yet
    assert_eq!(bytes(&w), 15 + 16 + 5, "every stored text counts");
    let r = w.cron();
    assert_eq!(r.texts_pruned, 1, "{r:?}");
    assert_eq!(w.count("SELECT count(*) AS n FROM version_parts"), 2);
    assert_eq!(
        bytes(&w),
        16 + 5,
        "the tenant got the pruned text's bytes back"
    );
    // The live version (2) and the latest (3) keep theirs: 3 goes live.
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(prune_all(&w).texts_pruned, 1);
    assert_eq!(bytes(&w), 5);
    // Rows and jobs stay for the history's retention, then go.
    assert_eq!(w.count("SELECT count(*) AS n FROM versions"), 3);
    age(&w, w.cfg.history_retention_seconds);
    let r = prune_all(&w);
    assert_eq!((r.versions_pruned, r.jobs_pruned), (2, 2), "{r:?}");
    assert_eq!(
        w.count("SELECT count(*) AS n FROM versions WHERE doc_id = 'a'"),
        1
    );
    assert_eq!(w.count("SELECT count(*) AS n FROM jobs"), 1);
    let hits = w.search("third", 3);
    assert_eq!(hits.len(), 1, "the live version is served: {hits:?}");
    // A new version of the document after the prune: numbers go on.
    w.put("a", "fourth text");
    w.deliver_all();
    assert_eq!(w.count("SELECT live_version AS n FROM documents"), 4);
}

/// A world whose texts are cut into parts of about 1 KB (at most 4 KB).
fn small_parts() -> World {
    let mut cfg = World::new().cfg;
    cfg.d1_text_part_bytes_max = 4096;
    cfg.text_part_bytes_target = 1024;
    World::with(cfg)
}

/// 400 paragraphs, Japanese and English, about 40 KB.
fn long_text(paragraphs: &[String]) -> String {
    paragraphs.join("\n\n")
}

fn paragraphs() -> Vec<String> {
    (0..400)
        .map(|i| {
            format!(
                "第{i}段落：再配送されたメッセージは冪等に処理される。Paragraph {i} notes rule {} of the ledger.",
                i * 7919 % 1000
            )
        })
        .collect()
}

/// The parts version `v` of `doc` wrote itself.
fn parts_written(w: &World, doc: &str, v: u32) -> i64 {
    w.count(&format!(
        "SELECT count(*) AS n FROM version_parts WHERE doc_id = '{}' AND version = {v}",
        default_key(doc).as_str()
    ))
}

#[test]
fn a_new_version_writes_only_the_text_parts_its_edit_touched_and_the_prune_keeps_the_shared_ones() {
    // Issue 35: an edit stored the whole new text again (D1 rows and bytes
    // in proportion to the document, not to the change).
    let w = small_parts();
    let mut ps = paragraphs();
    let v1 = long_text(&ps);
    w.put("a", &v1);
    w.deliver_all();
    let n1 = parts_written(&w, "a", 1);
    assert!(n1 > 10, "{n1} parts");
    assert_eq!(bytes(&w), v1.len() as i64);

    // One paragraph in the middle: one or two parts written, every other
    // named from version 1; the tenant's bytes grow by those parts only.
    ps[200] = "第200段落は書き換えられた。Paragraph 200 was rewritten after review.".into();
    let v2 = long_text(&ps);
    w.put("a", &v2);
    let n2 = parts_written(&w, "a", 2);
    assert!((1..=2).contains(&n2), "{n2} of {n1} parts written again");
    let stored = w.count("SELECT sum(length(CAST(text AS BLOB))) AS n FROM version_parts");
    assert_eq!(bytes(&w), stored);
    assert!(stored < v1.len() as i64 + 4 * 4096, "{stored}");
    w.deliver_all();
    assert_eq!(w.state("a"), DocumentState::Indexed);
    assert_eq!(
        oracle::version_text(&w.db, default_key("a").as_str(), 2).as_deref(),
        Some(v2.as_str())
    );

    // The prune of version 1's text deletes only the parts version 2 no
    // longer names, and gives back their bytes.
    let r = w.cron();
    assert_eq!(r.texts_pruned, 1, "{r:?}");
    assert_eq!(
        w.count("SELECT count(*) AS n FROM version_parts WHERE to_version IS NOT NULL"),
        0,
        "the closed parts went"
    );
    assert_eq!(
        bytes(&w),
        v2.len() as i64,
        "what is stored is version 2's text, once"
    );
    assert_eq!(
        oracle::version_text(&w.db, default_key("a").as_str(), 2).as_deref(),
        Some(v2.as_str())
    );

    // A paragraph inserted at the top: the parts after it are shared.
    ps.insert(0, "新しい冒頭の段落。A new opening paragraph.".into());
    let v3 = long_text(&ps);
    w.put("a", &v3);
    let n3 = parts_written(&w, "a", 3);
    assert!((1..=2).contains(&n3), "{n3} parts written again");
    w.deliver_all();
    w.cron();
    assert_eq!(bytes(&w), v3.len() as i64);
    assert_eq!(w.search("新しい冒頭の段落", 1).len(), 1);
    assert_eq!(
        oracle::live_text(&w.db, default_key("a").as_str())[0]["text"],
        v3.as_str()
    );
}

#[test]
fn two_versions_of_one_document_in_one_batch_share_parts_and_close_what_the_second_drops() {
    // The second version's parts are matched against the first's (written
    // in the same batch), and the part it drops, written by the first, is
    // closed in that batch too (else no prune could reach it).
    let w = small_parts();
    let mut ps = paragraphs();
    let first = long_text(&ps);
    ps[100] =
        "第100段落は同じバッチで書き換えられた。Paragraph 100 changed in the same batch.".into();
    let second = long_text(&ps);
    let body = serde_json::json!({"documents": [
        {"doc_id": "a", "text": first},
        {"doc_id": "a", "text": second},
    ]});
    let r = w.request_json(
        "POST",
        "/v1/documents",
        &format!("Bearer {TEST_INGEST_TOKEN}"),
        Some(&body),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let n2 = parts_written(&w, "a", 2);
    assert!((1..=2).contains(&n2), "{n2} parts written again");
    assert!(
        oracle::parts_left_open(&w.db).is_empty(),
        "{:?}",
        oracle::parts_left_open(&w.db)
    );
    assert_eq!(
        w.count("SELECT count(*) AS n FROM version_parts WHERE to_version = 2"),
        n2,
        "what the second version rewrote, the first's parts closed at it"
    );
    w.deliver_all();
    w.cron();
    assert_eq!(bytes(&w), second.len() as i64);
    assert_eq!(
        oracle::live_text(&w.db, default_key("a").as_str())[0]["text"],
        second.as_str()
    );
}

#[test]
fn a_text_stays_while_a_running_job_or_a_re_run_needs_it_and_a_dead_letter_keeps_its_version() {
    let w = World::new();
    w.put("k", "sigma tau upsilon");
    w.index
        .upsert_faults
        .fail_next(1, FailureBucket::IndexRejected);
    // It fails for good, and its letter is archived.
    let p = w.p();
    let msgs = w.queue.take_all();
    let outcome = w.consume(&msgs[0]);
    assert_eq!(block_on(p.settle("m-1", &msgs[0], outcome)), Settle::Ack);
    let letter = w.queue.dead.borrow_mut().pop_front().unwrap();
    assert_eq!(
        block_on(p.consume_dead_letter("d-1", Some(&letter), 0)),
        Settle::Ack
    );
    assert_eq!(w.state("k"), DocumentState::Failed);
    let stored = w.count("SELECT count(*) AS n FROM version_parts");
    let before = bytes(&w);
    // A client's reindex re-runs the failed version: no second copy of
    // its text, no bytes added; the copy reads the first's parts.
    assert!(block_on(p.reindex_document(&default_key("k")))
        .unwrap()
        .is_ok());
    assert_eq!(w.count("SELECT count(*) AS n FROM version_parts"), stored);
    assert_eq!(bytes(&w), before);
    assert_eq!(
        w.count("SELECT text_version AS n FROM versions WHERE version = 2"),
        1
    );
    w.deliver_all();
    assert_eq!(w.state("k"), DocumentState::Indexed);
    assert_eq!(w.search("sigma", 3).len(), 1);
    // Version 1 is superseded, but version 2 (live) reads its parts.
    assert_eq!(prune_all(&w).texts_pruned, 0);
    assert_eq!(w.count("SELECT count(*) AS n FROM version_parts"), stored);
    // A newer version supersedes both: both go (the bytes once: version
    // 2 owned none).
    w.put("k", "phi chi psi");
    w.deliver_all();
    let r = prune_all(&w);
    assert_eq!(r.texts_pruned, 2, "{r:?}");
    assert_eq!(bytes(&w), "phi chi psi".len() as i64);
    // Version 1 has a dead letter: its row stays, with its job, forever.
    age(&w, w.cfg.history_retention_seconds);
    let r = prune_all(&w);
    assert_eq!(r.versions_pruned, 1, "only version 2: {r:?}");
    assert_eq!(
        w.count("SELECT count(*) AS n FROM versions WHERE version = 1"),
        1
    );
    assert_eq!(w.count("SELECT count(*) AS n FROM dead_letters"), 1);
}

#[test]
fn finished_sessions_ended_backfills_and_old_repair_runs_go_after_the_history() {
    let w = World::new();
    for d in ["b1", "b2"] {
        w.put(d, &format!("text of {d}"));
    }
    w.deliver_all();
    // A reindex of everything (a backfill), run to its end.
    assert!(block_on(w.p().start_backfill(&BackfillScope::All, 10))
        .unwrap()
        .is_ok());
    for _ in 0..5 {
        w.cron();
        w.deliver_all();
    }
    assert_eq!(
        w.count("SELECT count(*) AS n FROM backfills WHERE state = 'completed'"),
        1
    );
    // A sync session, committed.
    let t = TenantId::default_tenant();
    let s = block_on(w.p().open_sync(&t, "docs", &[7; 32]))
        .unwrap()
        .unwrap();
    assert!(block_on(w.p().commit_sync(&t, &s.sync_id, true))
        .unwrap()
        .is_ok());
    // An edit after it: the run that prunes the texts it superseded is
    // recorded.
    w.put("b1", "new text of b1");
    w.deliver_all();
    assert_eq!(
        prune_all(&w).texts_pruned,
        2,
        "the re-run's, then the first's"
    );
    let runs = w.count("SELECT count(*) AS n FROM repair_runs");
    assert!(runs > 0);
    // Within the retention nothing of it goes.
    let r = prune_all(&w);
    assert_eq!(
        (r.syncs_pruned, r.backfills_pruned, r.repair_runs_pruned),
        (0, 0, 0)
    );
    age(&w, w.cfg.history_retention_seconds);
    let r = prune_all(&w);
    assert_eq!((r.syncs_pruned, r.backfills_pruned), (1, 1), "{r:?}");
    assert!(r.repair_runs_pruned >= runs as u64, "{r:?}");
    for table in [
        "backfills",
        "backfill_items",
        "syncs",
        "sync_seen",
        "sync_deletes",
    ] {
        assert_eq!(
            w.count(&format!("SELECT count(*) AS n FROM {table}")),
            0,
            "{table}"
        );
    }
    // What is live stays: both documents, searchable.
    assert_eq!(w.search("text", 5).len(), 2);
}

#[test]
fn a_revoked_token_goes_after_the_history_and_a_live_one_stays() {
    use ingest_pipeline::core::credentials::Scopes;
    use ingest_pipeline::store::Quotas;
    let w = World::new();
    let p = w.p();
    let acme = TenantId::parse("acme").unwrap();
    block_on(p.create_tenant(&acme, &Quotas::default()))
        .unwrap()
        .unwrap();
    let kept = block_on(p.mint_token(&acme, &Scopes::all(), &[1; 32]))
        .unwrap()
        .unwrap();
    let revoked = block_on(p.mint_token(&acme, &Scopes::all(), &[2; 32]))
        .unwrap()
        .unwrap();
    block_on(p.revoke_token(&acme, &revoked.token_id))
        .unwrap()
        .unwrap();
    assert_eq!(prune_all(&w).tokens_pruned, 0, "within the retention");
    age(&w, w.cfg.history_retention_seconds);
    assert_eq!(prune_all(&w).tokens_pruned, 1);
    let left: Vec<String> = block_on(p.tokens(&acme))
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| t.token_id)
        .collect();
    assert_eq!(left, [kept.token_id]);
}
