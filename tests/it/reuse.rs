//! Vectors that outlive versions. A vector's ID comes from the document,
//! the generation, the chunk's text, its occurrence and the document's
//! metadata, not from the version: a chunk unchanged in a new version keeps
//! its vector (no embed, no read, no write, no delete); a text the live
//! version holds under another ID (a repeat that gained an occurrence, a
//! metadata change) copies the live vector's values (`get_by_ids`) instead
//! of reaching the embedder; only new text is embedded. Old vectors are
//! deleted by reference: only once no row that may be served or written
//! refers to them. Everything else about the protocol stays the same
//! (upsert before replace, intents, cleanup).

use crate::common::default_key;
use crate::common::{
    changed_chunks, chunk_texts, counted, document, oracle, paragraph, Counted, World,
};
use futures::executor::block_on;
use ingest_pipeline::core::chunk::ContentType;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::ids::sha256_hex;
use ingest_pipeline::core::ids::{legacy_vector_id, TenantId};
use ingest_pipeline::core::local_embed;
use ingest_pipeline::native::sim::{self, CallKind, FaultKind, FaultPlan, Mode, Op, Sched, Script};
use ingest_pipeline::native::{CountingEmbedder, CountingIndex, MemIndex};
use ingest_pipeline::pipeline::bugs::Bugs;
use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentState, SearchRequest};
use ingest_pipeline::ports::{
    Database, MetadataFilter, PortError, Stmt, VectorIndex, VectorMatch, VectorRecord,
};
use serde_json::json;
use std::collections::BTreeSet;

/// Every live chunk's vector holds exactly what embedding its text gives
/// (the local embedder is deterministic), with the document's metadata and
/// nothing of a version (a vector may be shared by several).
fn assert_vectors_are_fresh_embeddings(w: &World) {
    let rows = oracle::live_chunks(&w.db);
    assert!(!rows.is_empty());
    let index = w.index.vectors.borrow();
    for r in &rows {
        let v = index
            .get(&r.vector_id)
            .unwrap_or_else(|| panic!("live chunk {} has no vector", r.vector_id));
        assert_eq!(
            v.values,
            local_embed::embed(&r.text, w.cfg.embedding_dimensions),
            "vector {} differs",
            r.vector_id
        );
        assert!(!v.metadata.contains_key("version"), "{:?}", v.metadata);
        assert!(!v.metadata.contains_key("chunk"), "{:?}", v.metadata);
        assert!(v.metadata.contains_key("doc_id"));
    }
}

/// The job of the latest version of `doc`.
fn latest_job(w: &World, doc: &str) -> ingest_pipeline::pipeline::JobView {
    let view = block_on(w.p().document(&default_key(doc)))
        .unwrap()
        .unwrap();
    let id = view.job_id.expect("a job");
    block_on(w.p().store.job_view(&id))
        .unwrap()
        .map(|r| ingest_pipeline::pipeline::JobView::from_row(r, 0))
        .unwrap()
}

#[test]
fn an_edit_keeps_the_unchanged_vectors_and_writes_only_the_changed_chunks() {
    let w = World::new();
    let v1 = document(200, None);
    let n1 = chunk_texts(&v1, &w).len();
    assert!((190..=210).contains(&n1), "about 200 chunks, got {n1}");

    let first = counted(&w);
    w.put("doc", &v1);
    assert_eq!(
        first.deliver_all(),
        vec![ConsumeOutcome::Ack {
            reason: "committed"
        }]
    );
    assert_eq!(
        first.embedder.texts.get(),
        n1 as u64,
        "a first version embeds every chunk"
    );
    assert_eq!(first.index.get_calls.get(), 0, "nothing to reuse");
    let v1_ids: BTreeSet<String> = w.index.ids().into_iter().collect();

    // Version 2: paragraph 100 rewritten.
    let v2 = document(200, Some((100, "Paragraph 100 now covers zeppelins and marmalade instead; nothing else in the document changed at all, not one byte.")));
    let changed = changed_chunks(&v1, &v2, &w);
    let removed = changed_chunks(&v2, &v1, &w);
    assert!(
        (1..=2).contains(&changed),
        "one paragraph changes one or two chunks, got {changed}"
    );
    let n2 = chunk_texts(&v2, &w).len();
    let second = counted(&w);
    w.put("doc", &v2);
    assert_eq!(
        second.deliver_all(),
        vec![ConsumeOutcome::Ack {
            reason: "committed"
        }]
    );
    assert_eq!(
        second.embedder.texts.get(),
        changed as u64,
        "only the changed chunks reach the embedder"
    );
    assert_eq!(second.embedder.calls.get(), 1);
    assert_eq!(second.index.get_calls.get(), 0, "no vector is read");
    assert_eq!(second.index.upsert_calls.get(), 1);
    assert_eq!(
        second.index.vectors_written.get(),
        changed as u64,
        "only the changed chunks are written"
    );
    assert_eq!(second.index.delete_calls.get(), 1);
    assert_eq!(
        second.index.ids_deleted.get(),
        removed as u64,
        "only the replaced chunks' vectors are deleted"
    );
    let job = latest_job(&w, "doc");
    assert_eq!(
        (
            job.progress.chunks_embedded,
            job.progress.chunks_reused,
            job.progress.chunks_kept
        ),
        (changed as u64, 0, (n2 - changed) as u64)
    );

    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids(),
        "the index holds exactly the live vectors"
    );
    let now: BTreeSet<String> = w.index.ids().into_iter().collect();
    assert_eq!(
        v1_ids.intersection(&now).count(),
        n2 - changed,
        "every unchanged chunk kept its vector ID"
    );
    assert_eq!(oracle::cleanup_intents(&w.db), 0);
    assert_eq!(oracle::chunks_of_version(&w.db, 1), 0, "v1's rows are gone");
    assert_vectors_are_fresh_embeddings(&w);

    // Search finds the new text and the kept text, both in version 2.
    let hits = w.search("zeppelins marmalade", 3);
    assert_eq!(
        (hits[0].version, hits[0].text.contains("zeppelins")),
        (2, true),
        "{hits:?}"
    );
    let hits = w.search(&paragraph(42), 3);
    assert_eq!(hits[0].version, 2);
    assert!(hits[0].text.contains(&paragraph(42)), "{hits:?}");

    // Version 3 goes back to v1's text: only the paragraph that differs
    // from v2 is embedded again (its old vector was deleted).
    let third = counted(&w);
    w.put("doc", &v1);
    third.deliver_all();
    assert_eq!(third.embedder.texts.get(), removed as u64);
    assert_eq!(third.index.vectors_written.get(), removed as u64);
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    let back: BTreeSet<String> = w.index.ids().into_iter().collect();
    assert_eq!(back, v1_ids, "the same text has the same vector IDs again");
    assert_vectors_are_fresh_embeddings(&w);
}

/// A world whose chunks do not overlap: a paragraph is a chunk, whose text
/// does not depend on its neighbours (with an overlap, a chunk begins with
/// the end of the one before it, so a moved paragraph is new text).
fn world_without_overlap() -> World {
    let mut cfg = World::new().cfg;
    cfg.chunk_overlap_tokens = 0;
    World::with(cfg)
}

#[test]
fn a_moved_chunk_keeps_its_vector_and_is_served_at_its_new_place() {
    let w = world_without_overlap();
    let v1 = document(30, None);
    w.put("doc", &v1);
    w.deliver_all();
    // Paragraph 5 moves to the end.
    let mut ps: Vec<String> = (0..30).map(paragraph).collect();
    let moved = ps.remove(5);
    ps.push(moved.clone());
    let v2 = ps.join("\n\n");
    let texts = chunk_texts(&v2, &w);
    let at = texts.iter().position(|t| *t == moved).expect("one chunk");
    assert_eq!(changed_chunks(&v1, &v2, &w), 0, "no text is new");
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), 0);
    assert_eq!(c.index.vectors_written.get(), 0, "nothing to write");
    assert_eq!(c.index.get_calls.get(), 0);
    assert_eq!(c.index.ids_deleted.get(), 0, "nothing to delete");
    let hits = w.search(&moved, 3);
    let found: Vec<_> = hits.iter().filter(|h| h.text == moved).collect();
    assert_eq!(found.len(), 1, "{hits:?}");
    // Its place: last, after every chunk that stayed (their order keys
    // unchanged: 0, 1, 2, … up to v1's last, 29), the key after the last
    // one's.
    assert_eq!(at, texts.len() - 1);
    assert_eq!((found[0].version, found[0].chunk), (2, texts.len() as f64));
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_chunk_repeated_twice_has_two_vectors_the_copy_reused_and_both_are_served() {
    // The same paragraph once, then twice: the first occurrence keeps its
    // vector, the second (occurrence 1, a new ID) copies its values.
    let w = world_without_overlap();
    let v1 = document(10, None);
    w.put("doc", &v1);
    w.deliver_all();
    let repeated = paragraph(3);
    let v2 = format!("{v1}\n\n{repeated}");
    let texts = chunk_texts(&v2, &w);
    let places: Vec<usize> = texts
        .iter()
        .enumerate()
        .filter(|(_, t)| **t == repeated)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        places.len(),
        2,
        "the test needs the paragraph as two chunks"
    );
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), 0, "no text is new");
    assert_eq!((c.index.get_calls.get(), c.index.ids_got.get()), (1, 1));
    assert_eq!(c.index.vectors_written.get(), 1, "the copy's vector");
    let job = latest_job(&w, "doc");
    assert_eq!(
        (job.progress.chunks_reused, job.progress.chunks_kept),
        (1, texts.len() as u64 - 1)
    );
    let hits = w.search(&repeated, 5);
    let mut found: Vec<f64> = hits
        .iter()
        .filter(|h| h.text == repeated && h.version == 2)
        .map(|h| h.chunk)
        .collect();
    found.sort_by(f64::total_cmp);
    // Appended chunks: their order keys are their places.
    assert_eq!(
        found,
        places.iter().map(|&k| k as f64).collect::<Vec<_>>(),
        "{hits:?}"
    );
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_metadata_change_moves_every_vector_to_new_ids_with_copied_values() {
    // The metadata the index filters on is part of a vector's identity.
    let w = World::new();
    let v1 = document(20, None);
    let meta = |lang: &str| {
        let mut m = serde_json::Map::new();
        m.insert("lang".into(), json!(lang));
        m
    };
    w.put_with("doc", &v1, meta("en"), ContentType::Plain);
    w.deliver_all();
    let old: BTreeSet<String> = w.index.ids().into_iter().collect();
    let n = old.len() as u64;
    let c = counted(&w);
    w.put_with("doc", &v1, meta("fr"), ContentType::Plain);
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), 0, "the values are copied");
    assert_eq!(c.index.ids_got.get(), n);
    assert_eq!(c.index.vectors_written.get(), n);
    assert_eq!(c.index.ids_deleted.get(), n);
    let now: BTreeSet<String> = w.index.ids().into_iter().collect();
    assert!(old.is_disjoint(&now));
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert!(w
        .index
        .vectors
        .borrow()
        .values()
        .all(|v| v.metadata["lang"] == "fr"));
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_vector_lost_from_the_index_is_repaired_even_when_the_next_version_keeps_it() {
    let w = World::new();
    let v1 = document(30, None);
    w.put("doc", &v1);
    w.deliver_all();
    // The index loses a live vector (an index restored from an old snapshot).
    // The next version keeps it: nothing checks it on the way.
    let v2 = document(30, Some((20, "Paragraph 020 is brand new.")));
    let kept = chunk_texts(&v2, &w);
    let lost = oracle::live_chunks(&w.db)
        .into_iter()
        .find(|c| c.ord == 7.0 && kept.contains(&c.text))
        .expect("chunk 7 is unchanged")
        .vector_id;
    w.index.vectors.borrow_mut().remove(&lost);
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), changed_chunks(&v1, &v2, &w) as u64);
    assert!(w.live_vector_ids().contains(&lost), "kept, and still lost");
    // Cron's verification finds it, and the re-run writes every vector
    // (a version marked for repair keeps none).
    w.clock
        .advance_ms(i64::from(w.cfg.index_visibility_window_seconds) * 1000 + 1);
    assert_eq!(w.cron().documents_repaired, 1);
    w.deliver_all();
    w.cron();
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_vector_the_index_does_not_return_is_embedded() {
    // A metadata change copies every value; one the index does not return
    // (not visible yet, or gone) is embedded instead.
    let w = World::new();
    let v1 = document(30, None);
    w.put("doc", &v1);
    w.deliver_all();
    let lost = w.live_vector_ids()[7].clone();
    w.index.vectors.borrow_mut().remove(&lost);
    let mut m = serde_json::Map::new();
    m.insert("k".into(), json!(1));
    let c = counted(&w);
    w.put_with("doc", &v1, m, ContentType::Plain);
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), 1);
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

/// The world's index, but `get_by_ids` fails.
struct GetFails<'a>(&'a MemIndex);

impl VectorIndex for GetFails<'_> {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        self.0.upsert(vectors).await
    }
    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        self.0.delete_by_ids(ids).await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        self.0.query(vector, top_k, namespace, filter).await
    }
    async fn get_by_ids(&self, _: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        Err(PortError::new(FailureBucket::IndexRejected, "injected"))
    }
}

#[test]
fn a_failing_fetch_falls_back_to_embedding() {
    let w = World::new();
    let v1 = document(30, None);
    w.put("doc", &v1);
    w.deliver_all();
    // New metadata: every chunk has a new ID, its values to copy.
    let mut m = serde_json::Map::new();
    m.insert("k".into(), json!(1));
    let c = Counted {
        w: &w,
        embedder: CountingEmbedder::new(&w.embedder),
        index: CountingIndex::new(GetFails(&w.index)),
    };
    w.put_with("doc", &v1, m, ContentType::Plain);
    assert_eq!(
        c.deliver_all(),
        vec![ConsumeOutcome::Ack {
            reason: "committed"
        }],
        "reuse never fails a job"
    );
    assert_eq!(
        c.index.get_calls.get(),
        1,
        "one failed fetch, then no more tries"
    );
    assert_eq!(c.embedder.texts.get(), chunk_texts(&v1, &w).len() as u64);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

/// Rewrites `doc`'s live rows and vectors to the version-derived IDs rows
/// had before content-derived ones (and the metadata vectors had then):
/// a ledger and an index as an earlier release left them.
fn to_legacy_ids(w: &World, doc: &str) -> BTreeSet<String> {
    const SET_ID: &str = "UPDATE chunks SET vector_id = ?2 WHERE vector_id = ?1";
    let key = default_key(doc);
    let mut legacy = BTreeSet::new();
    for r in oracle::live_chunks(&w.db) {
        let id = legacy_vector_id(&key, r.version, r.ord as u32, 1);
        block_on(w.db.execute(Stmt::new(
            SET_ID,
            vec![r.vector_id.as_str().into(), id.as_str().into()],
        )))
        .unwrap();
        let mut v = w.index.vectors.borrow_mut().remove(&r.vector_id).unwrap();
        v.id = id.clone();
        v.metadata.insert("version".into(), json!(r.version));
        v.metadata.insert("chunk".into(), json!(r.ord as u32));
        w.index.vectors.borrow_mut().insert(id.clone(), v);
        legacy.insert(id);
    }
    legacy
}

#[test]
fn rows_with_version_derived_ids_keep_working_and_move_to_content_ids_on_their_next_version() {
    // No migration cliff: a ledger written before content-derived IDs is
    // served as it is, and its next version copies the values to new IDs.
    let w = World::new();
    let v1 = document(20, None);
    w.put("doc", &v1);
    w.deliver_all();
    let legacy = to_legacy_ids(&w, "doc");
    assert_eq!(w.index.ids(), w.live_vector_ids());
    let hits = w.search(&paragraph(4), 3);
    assert_eq!(
        (hits[0].version, hits[0].text.contains(&paragraph(4))),
        (1, true)
    );
    let v2 = document(20, Some((10, "Paragraph 010 is new text now.")));
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    let changed = changed_chunks(&v1, &v2, &w) as u64;
    assert_eq!(c.embedder.texts.get(), changed, "the rest is copied");
    assert_eq!(
        c.index.ids_deleted.get(),
        legacy.len() as u64,
        "every legacy vector goes once nothing refers to it"
    );
    let now: BTreeSet<String> = w.index.ids().into_iter().collect();
    assert!(now.is_disjoint(&legacy));
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_eq!(oracle::cleanup_intents(&w.db), 0);
    assert_vectors_are_fresh_embeddings(&w);
}

/// A paragraph removed, then restored while a drain holds the claim on its
/// old vector's intent: the restoring version's staging waits for the
/// delete (a vector is never deleted while a row that may be served or
/// written refers to it), then writes the vector again. Returns the world.
pub(crate) fn restore_during_a_delete() -> World {
    let w = World::new();
    let v1 = document(12, None);
    w.put("doc", &v1);
    w.deliver_all();
    let v2 = document(12, Some((6, "Paragraph 006 is gone for a while.")));
    // v2's own cleanup fails: the intent for paragraph 6's vector stays.
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    w.put("doc", &v2);
    w.deliver_all();
    let intents = oracle::cleanup_intents(&w.db);
    assert!(intents >= 1);
    w.clock
        .advance_ms(i64::from(w.cfg.retry_base_delay_seconds) * 1000 + 1);
    // A drain claims it, and has not deleted the vector yet.
    let key = default_key("doc");
    let now = w.clock.0.get();
    let claimed = block_on(w.p().store.claim_intents(
        Some(key.as_str()),
        now,
        now + 60_000,
        100,
        Bugs::default(),
    ))
    .unwrap();
    assert_eq!(claimed.len() as i64, intents);
    // v3 restores paragraph 6: its staging is refused while the claim holds.
    w.put("doc", &v1);
    let m = w.queue.take_all().remove(0);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Retry { .. }));
    let job = latest_job(&w, "doc");
    assert_eq!(job.last_failure_bucket.as_deref(), Some("db_busy"));
    assert_eq!(job.step, "claimed", "nothing staged");
    // The drain deletes, then records it.
    block_on(w.index.delete_by_ids(&claimed)).unwrap();
    block_on(w.p().store.intents_done(&claimed)).unwrap();
    // The retry stages and writes the vector again.
    w.clock.advance_ms(60_000);
    w.queue.sent.borrow_mut().push_back(m);
    w.deliver_all();
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    let hits = w.search(&paragraph(6), 3);
    assert_eq!(
        (hits[0].version, hits[0].text.contains(&paragraph(6))),
        (3, true)
    );
    w
}

#[test]
fn a_restored_paragraph_waits_for_the_delete_of_its_old_vector() {
    let w = restore_during_a_delete();
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_staging_refused_by_a_delete_that_ends_meanwhile_is_retried_not_failed() {
    // Issue (simulation seed 1364): the staging batch aborted on a claim,
    // the drain recorded its delete before the consumer asked why, so the
    // consumer saw no claim and failed the job as `db_rejected`.
    let w = World::new();
    let v1 = document(12, None);
    w.put("doc", &v1);
    w.deliver_all();
    w.index
        .delete_faults
        .fail_next(1, FailureBucket::IndexUnavailable);
    w.put(
        "doc",
        &document(12, Some((6, "Paragraph 006 is gone for a while."))),
    );
    w.deliver_all();
    w.clock
        .advance_ms(i64::from(w.cfg.retry_base_delay_seconds) * 1000 + 1);
    let key = default_key("doc");
    let now = w.clock.0.get();
    let claimed = block_on(w.p().store.claim_intents(
        Some(key.as_str()),
        now,
        now + 60_000,
        100,
        Bugs::default(),
    ))
    .unwrap();
    assert!(!claimed.is_empty());
    block_on(w.index.delete_by_ids(&claimed)).unwrap();
    // v3 restores paragraph 6; its staging is refused by the claim, and the
    // drain records its delete right after.
    w.put("doc", &v1);
    let m = w.queue.take_all().remove(0);
    let ids = serde_json::to_string(&claimed).unwrap();
    let db = crate::common::HookedAfter {
        db: &w.db,
        after: ingest_pipeline::store::sql::CONSUME_STAGE_GUARD,
        hook: std::cell::RefCell::new(Some(Box::new(
            move |db: &ingest_pipeline::native::SqliteDb| {
                for stmt in [
                    ingest_pipeline::store::sql::INTENTS_DONE_DELETE_CHUNKS,
                    ingest_pipeline::store::sql::INTENTS_DONE_DELETE,
                ] {
                    let _: Vec<serde_json::Value> = db.inspect(stmt, vec![ids.clone().into()]);
                }
            },
        ))),
    };
    let out = block_on(w.p_over(db).consume(&m));
    assert!(matches!(out, ConsumeOutcome::Retry { .. }), "{out:?}");
    let job = latest_job(&w, "doc");
    assert_eq!(job.last_failure_bucket.as_deref(), Some("db_busy"));
    assert_eq!(job.step, "claimed", "nothing staged");
    // The retry stages and writes the vector again.
    w.clock.advance_ms(60_000);
    w.queue.sent.borrow_mut().push_back(m);
    w.deliver_all();
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_configuration_change_takes_effect_through_a_new_generation_only() {
    let v1 = document(40, None);
    let v2 = document(40, Some((20, "Paragraph 020 is different now.")));

    // A chunker change alone changes nothing served: a new version is still
    // written in the active generation, with that generation's chunker
    // (so reuse applies as before); the change takes effect through a
    // backfill to a new generation (tests/it/generations.rs).
    let mut w = World::new();
    w.put("doc", &v1);
    w.deliver_all();
    let before = block_on(w.p().document(&default_key("doc")))
        .unwrap()
        .unwrap()
        .index_config
        .unwrap();
    w.cfg.chunk_size_max_tokens = 144;
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    let changed = changed_chunks(&v1, &v2, &w) as u64;
    assert_eq!(
        c.embedder.texts.get(),
        changed,
        "the active generation's chunker, so only changed chunks"
    );
    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    let doc = block_on(w.p().document(&default_key("doc")))
        .unwrap()
        .unwrap();
    assert_eq!(
        doc.index_config.unwrap(),
        before,
        "recorded: the active generation's configuration"
    );

    // Different dimensions: this Worker's embedder made no generation in
    // use, so it refuses to write (index_misconfigured, retried) rather
    // than mix embeddings in one index.
    let mut w = World::new();
    w.put("doc", &v1);
    w.deliver_all();
    let served = w.live_vector_ids();
    w.cfg.embedding_dimensions = 32;
    w.index.dimensions = 32;
    w.put("doc", &v2);
    let m = w.queue.take_all().remove(0);
    assert!(matches!(w.consume(&m), ConsumeOutcome::Retry { .. }));
    assert_eq!(
        oracle::last_failure_bucket(&w.db, &m.job_id).as_deref(),
        Some("index_misconfigured")
    );
    assert_eq!(w.live_vector_ids(), served);
    let doc = block_on(w.p().document(&default_key("doc")))
        .unwrap()
        .unwrap();
    assert_eq!(doc.live_version, Some(1), "the old version is still served");
}

#[test]
fn reuse_is_recorded_per_chunk_hash_in_d1() {
    // The reuse decision rests on D1: content hashes of chunk rows are the
    // sha256 of the chunk text.
    let w = World::new();
    w.put("doc", &document(5, None));
    w.deliver_all();
    let rows = oracle::chunk_hashes_and_texts(&w.db);
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|(hash, text)| *hash == sha256_hex(text.as_bytes())));
}

// ------------------------------------------------------------------ simulation

/// A version that shares most chunks with the one before it, under the
/// simulation's small chunks.
fn sim_texts() -> (String, String, String) {
    let s = |i: usize| {
        format!(
            "{} {} golf hotel {i}.",
            ["alpha", "bravo", "kilo", "lima"][i % 4],
            ["echo", "india"][i % 2]
        )
    };
    let v1: Vec<String> = (0..8).map(s).collect();
    let mut v2 = v1.clone();
    v2[5] = "juliet foxtrot charlie delta.".into();
    // A repeat: its second occurrence copies the first one's values.
    v2.push(v1[0].clone());
    let mut v3 = v2.clone();
    v3[1] = "mike november oscar papa.".into();
    (v1.join(" "), v2.join(" "), v3.join(" "))
}

fn sim_script(ops: Vec<Op>) -> Script {
    Script::clients(vec![("doc".into(), ops)])
}

#[test]
fn every_crash_point_of_an_update_that_reuses_vectors() {
    let cfg = sim::sim_config();
    let (v1, v2, _) = sim_texts();
    let script = sim_script(vec![Op::Put(v1.into()), Op::Settle, Op::Put(v2.into())]);
    let clean = Sched::new(0, FaultPlan::None);
    sim::run(&script, &cfg, Bugs::default(), &clean, Mode::Sequential)
        .expect("the fault-free run holds");
    assert!(
        clean.kinds_seen.borrow().contains(&CallKind::IndexGet),
        "the update must reuse vectors"
    );
    let n = clean.calls.get();
    let mut gets = 0;
    for at in 0..n {
        for kind in FaultKind::ALL {
            let sched = Sched::new(0, FaultPlan::At { at, kind });
            if let Err(v) = sim::run(&script, &cfg, Bugs::default(), &sched, Mode::Sequential) {
                panic!(
                    "{} violated, fault {} at call {at}: {}",
                    v.invariant,
                    kind.name(),
                    v.detail
                );
            }
            gets += sched
                .injected
                .borrow()
                .iter()
                .filter(|(c, _)| *c == CallKind::IndexGet)
                .count();
        }
    }
    assert!(
        gets >= 3,
        "faults were injected at the fetch of reusable vectors"
    );
}

#[test]
fn random_interleavings_of_versions_that_reuse_vectors() {
    let cfg = sim::sim_config();
    let (v1, v2, v3) = sim_texts();
    let scripts = [
        sim_script(vec![
            Op::Put(v1.clone().into()),
            Op::Settle,
            Op::Put(v2.clone().into()),
            Op::Put(v3.clone().into()),
        ]),
        sim_script(vec![
            Op::Put(v1.clone().into()),
            Op::Settle,
            Op::Put(v2.clone().into()),
            Op::Settle,
            Op::Delete,
            Op::Put(v3.into()),
        ]),
        sim_script(vec![
            Op::Put(v1.clone().into()),
            Op::Put(v2.clone().into()),
            Op::Settle,
            Op::Put(v1.into()),
        ]),
    ];
    // REUSE_SIM_SEEDS=N runs more seeds per script.
    let seeds: u64 = std::env::var("REUSE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let faulted_gets: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = scripts
            .iter()
            .enumerate()
            .map(|(k, script)| {
                let cfg = &cfg;
                scope.spawn(move || {
                    let mut faulted_gets = 0;
                    for seed in 0..seeds {
                        let sched = Sched::new(seed, FaultPlan::Random { per_mille: 60 });
                        if let Err(v) = sim::run(script, cfg, Bugs::default(), &sched, Mode::Random)
                        {
                            panic!(
                                "{} violated, script {k}, seed {seed}: {}",
                                v.invariant, v.detail
                            );
                        }
                        faulted_gets += sched
                            .injected
                            .borrow()
                            .iter()
                            .filter(|(c, _)| *c == CallKind::IndexGet)
                            .count();
                    }
                    faulted_gets
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a simulation thread failed"))
            .sum()
    });
    assert!(
        faulted_gets > 0,
        "faults were injected at fetches of reusable vectors"
    );
}

#[test]
fn searching_through_reused_vectors_matches_fresh_ones() {
    // Two worlds, same final text: one reached it through an update (reuse),
    // the other ingested it directly. Search answers identically.
    let v1 = document(60, None);
    let v2 = document(
        60,
        Some((30, "Paragraph 030 was rewritten about lighthouses.")),
    );
    let a = World::new();
    a.put("doc", &v1);
    a.deliver_all();
    a.put("doc", &v2);
    a.deliver_all();
    let b = World::new();
    b.put("doc", &v2);
    b.deliver_all();
    for q in [
        "lighthouses",
        "leases and intents interact",
        "Paragraph 059",
    ] {
        let req = SearchRequest {
            query: q.into(),
            top_k: 5,
            doc_id: None,
            metadata: Default::default(),
            mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
            highlight: false,
        };
        let ha = block_on(a.p().search(&TenantId::default_tenant(), &req)).unwrap();
        let hb = block_on(b.p().search(&TenantId::default_tenant(), &req)).unwrap();
        // Order keys differ (an edit inserts between its neighbours' keys;
        // a first version counts 0, 1, 2, …): the hits and their scores
        // must not.
        let key = |h: &Vec<ingest_pipeline::pipeline::SearchHit>| {
            h.iter()
                .map(|x| (x.text.clone(), x.score))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&ha), key(&hb), "query {q}");
    }
}

#[test]
fn a_reindex_of_the_same_content_rewrites_every_vector_with_copied_values() {
    // An operator's re-run (a reindex, a backfill, a repair) is asked to
    // write the vectors again (e.g. after a metadata index was created:
    // Vectorize's metadata indexes are not retroactive), so it keeps none.
    let w = World::new();
    let v1 = document(20, None);
    w.put("doc", &v1);
    w.deliver_all();
    let ids = w.index.ids();
    let c = counted(&w);
    block_on(w.p().reindex_document(&default_key("doc")))
        .unwrap()
        .unwrap();
    c.deliver_all();
    assert_eq!(c.embedder.texts.get(), 0, "the values are copied");
    assert_eq!(c.index.vectors_written.get(), ids.len() as u64);
    assert_eq!(
        c.index.ids_deleted.get(),
        0,
        "the same IDs: nothing to delete"
    );
    let job = latest_job(&w, "doc");
    assert_eq!(
        (
            job.version,
            job.progress.chunks_reused,
            job.progress.chunks_kept
        ),
        (2, ids.len() as u64, 0)
    );
    assert_eq!(w.index.ids(), ids);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_staging_planned_against_open_rows_another_staging_changed_is_refused_and_writes_nothing() {
    // Two stagings of one document never interleave: a plan applies only
    // if the document's open rows are still those it read (its stamp).
    let w = world_without_overlap();
    w.put("doc", &document(10, None));
    w.deliver_all();
    w.put("doc", &document(10, Some((4, "Paragraph 004 is new."))));
    let key = default_key("doc");
    let job = latest_job(&w, "doc");
    let open = block_on(w.p().store.open_rows(key.as_str())).unwrap();
    let rows_before = oracle::chunks_in_generation(&w.db, 1);
    let close: Vec<i64> = open
        .rows
        .iter()
        .filter_map(|r| r.chunk_id)
        .take(1)
        .collect();
    let stage = |stamp: i64| ingest_pipeline::store::Staging {
        rows: &[],
        close: &close,
        kept: 0,
        stamp,
        to_version: None,
        version_chunks: None,
        adopt_config: None,
        build_generation: None,
        keyword_key: open.keyword_key,
        skipped: &[],
    };
    // Another staging moved the stamp on since the read.
    let stale = block_on(w.p().store.stage_chunks(
        &job.job_id,
        key.as_str(),
        2,
        &stage(open.stamp - 1),
        0,
        Default::default(),
    ))
    .unwrap_err();
    assert_eq!(
        (stale.bucket, stale.code),
        (FailureBucket::DbBusy, "rows_changed")
    );
    let after = block_on(w.p().store.open_rows(key.as_str())).unwrap();
    assert_eq!(after.stamp, open.stamp, "nothing written");
    assert_eq!(after.rows.len(), open.rows.len(), "no row closed");
    assert_eq!(oracle::chunks_in_generation(&w.db, 1), rows_before);
    // With the stamp it read, the plan applies and moves the stamp on, so
    // the same plan cannot apply twice.
    block_on(w.p().store.stage_chunks(
        &job.job_id,
        key.as_str(),
        2,
        &stage(open.stamp),
        0,
        Default::default(),
    ))
    .unwrap();
    let moved = block_on(w.p().store.open_rows(key.as_str())).unwrap();
    assert_eq!(
        (moved.stamp, moved.rows.len()),
        (open.stamp + 1, open.rows.len() - 1)
    );
    let again = block_on(w.p().store.stage_chunks(
        &job.job_id,
        key.as_str(),
        2,
        &stage(open.stamp),
        0,
        Default::default(),
    ))
    .unwrap_err();
    assert_eq!(again.code, "rows_changed");
}
