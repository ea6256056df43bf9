//! Embedding reuse across versions: a new version's chunks whose text the
//! live version holds, embedded with the same configuration, take the live
//! vectors' values instead of reaching the embedder; everything else about
//! the protocol stays the same (vectors under the new version's own IDs,
//! upsert before replace, old vectors deleted through intents).

use crate::common::default_key;
use crate::common::{
    changed_chunks, chunk_texts, counted, document, oracle, paragraph, Counted, World,
};
use futures::executor::block_on;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::ids::sha256_hex;
use ingest_pipeline::core::ids::TenantId;
use ingest_pipeline::core::local_embed;
use ingest_pipeline::native::sim::{self, CallKind, FaultKind, FaultPlan, Mode, Op, Sched, Script};
use ingest_pipeline::native::{CountingEmbedder, CountingIndex, MemIndex};
use ingest_pipeline::pipeline::bugs::Bugs;
use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentState, SearchRequest};
use ingest_pipeline::ports::{MetadataFilter, PortError, VectorIndex, VectorMatch, VectorRecord};
use std::collections::BTreeSet;

/// Every live chunk's vector holds exactly what embedding its text gives
/// (the local embedder is deterministic), with this version's metadata.
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
        assert_eq!(v.metadata["version"], serde_json::json!(r.version));
        assert_eq!(v.metadata["chunk"], serde_json::json!(r.chunk_index));
    }
}

#[test]
fn reingest_with_one_paragraph_changed_embeds_only_the_changed_chunks() {
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
    assert_eq!(
        first.index.get_calls.get(),
        0,
        "nothing to reuse: no live version"
    );
    let v1_ids = w.index.ids();

    // Version 2: paragraph 100 rewritten.
    let v2 = document(200, Some((100, "Paragraph 100 now covers zeppelins and marmalade instead; nothing else in the document changed at all, not one byte.")));
    let changed = changed_chunks(&v1, &v2, &w);
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
    let reused = (n2 - changed) as u64;
    assert_eq!(second.index.ids_got.get(), reused);
    assert_eq!(
        second.index.get_calls.get(),
        reused.div_ceil(w.cfg.delete_batch_size as u64)
    );
    assert_eq!(
        second.index.vectors_written.get(),
        n2 as u64,
        "every chunk of v2 has its own vector"
    );
    assert_eq!(second.index.upsert_calls.get(), 1);

    assert_eq!(w.state("doc"), DocumentState::Indexed);
    assert_eq!(
        w.index.ids(),
        w.live_vector_ids(),
        "the index holds exactly the live vectors"
    );
    assert!(
        v1_ids.iter().all(|id| !w.index.ids().contains(id)),
        "v1's vectors were deleted after the replace"
    );
    assert!(w.live_vector_ids().iter().all(|id| id.contains(":2:")));
    assert_eq!(oracle::cleanup_intents(&w.db), 0);
    assert_vectors_are_fresh_embeddings(&w);

    // Search finds the new text and the reused text, both in version 2.
    let hits = w.search("zeppelins marmalade", 3);
    assert_eq!(
        (hits[0].version, hits[0].text.contains("zeppelins")),
        (2, true),
        "{hits:?}"
    );
    let hits = w.search(&paragraph(42), 3);
    assert_eq!(hits[0].version, 2);
    assert!(hits[0].text.contains(&paragraph(42)), "{hits:?}");

    // Version 3 goes back to v1's text: v3 reuses v2's vectors (themselves
    // copies of v1's), and only the paragraph that differs from v2 is embedded.
    let third = counted(&w);
    w.put("doc", &v1);
    third.deliver_all();
    assert_eq!(
        third.embedder.texts.get(),
        changed_chunks(&v2, &v1, &w) as u64
    );
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
fn a_vector_the_index_does_not_return_is_embedded() {
    let w = World::new();
    let v1 = document(30, None);
    w.put("doc", &v1);
    w.deliver_all();
    // Eventual consistency (or a lost vector): the index does not return
    // one of the live vectors.
    let lost = w.live_vector_ids()[7].clone();
    w.index.vectors.borrow_mut().remove(&lost);
    let v2 = document(30, Some((20, "Paragraph 020 is brand new.")));
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    assert_eq!(
        c.embedder.texts.get(),
        changed_chunks(&v1, &v2, &w) as u64 + 1
    );
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
    let v2 = document(30, Some((3, "Paragraph 003 is brand new.")));
    let c = Counted {
        w: &w,
        embedder: CountingEmbedder::new(&w.embedder),
        index: CountingIndex::new(GetFails(&w.index)),
    };
    w.put("doc", &v2);
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
    assert_eq!(c.embedder.texts.get(), chunk_texts(&v2, &w).len() as u64);
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
}

#[test]
fn a_repeated_text_is_fetched_once_and_reused_everywhere() {
    // The same paragraph block twice: two chunks per repeated text.
    let w = World::new();
    let block = document(6, None);
    let v1 = format!("{block}\n\n{block}\n\n{}", paragraph(50));
    w.put("doc", &v1);
    w.deliver_all();
    let v2 = format!("{block}\n\n{block}\n\n{}", paragraph(51));
    let c = counted(&w);
    w.put("doc", &v2);
    c.deliver_all();
    let texts = chunk_texts(&v2, &w);
    let distinct: BTreeSet<&String> = texts.iter().collect();
    assert!(
        distinct.len() < texts.len(),
        "the test needs repeated chunks"
    );
    assert_eq!(c.embedder.texts.get(), changed_chunks(&v1, &v2, &w) as u64);
    let reusable_distinct = distinct
        .iter()
        .filter(|t| chunk_texts(&v1, &w).contains(t))
        .count() as u64;
    assert_eq!(
        c.index.ids_got.get(),
        reusable_distinct,
        "one fetch per distinct text"
    );
    assert_eq!(w.index.ids(), w.live_vector_ids());
    assert_vectors_are_fresh_embeddings(&w);
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
    let script = sim_script(vec![Op::Put(v1), Op::Settle, Op::Put(v2)]);
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
            Op::Put(v1.clone()),
            Op::Settle,
            Op::Put(v2.clone()),
            Op::Put(v3.clone()),
        ]),
        sim_script(vec![
            Op::Put(v1.clone()),
            Op::Settle,
            Op::Put(v2.clone()),
            Op::Settle,
            Op::Delete,
            Op::Put(v3),
        ]),
        sim_script(vec![
            Op::Put(v1.clone()),
            Op::Put(v2.clone()),
            Op::Settle,
            Op::Put(v1),
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
        let key = |h: &Vec<ingest_pipeline::pipeline::SearchHit>| {
            h.iter()
                .map(|x| (x.chunk, x.text.clone(), x.score))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&ha), key(&hb), "query {q}");
    }
}
