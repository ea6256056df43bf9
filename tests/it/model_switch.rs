//! A model upgrade without downtime: documents indexed by one Workers AI
//! model, the Worker redeployed with another of the same dimensions, a
//! `config` backfill to a generation of the new model, and its switch.
//! Search answers at every step with the active generation's own model,
//! and an index job during the backfill writes both generations, each with
//! its own model's vectors (`ModelEmbedder`: vectors that depend on the
//! model, so a query embedded by the wrong one does not find its document).

use crate::common::{oracle, paragraph, ModelEmbedder, World};
use futures::executor::block_on;
use ingest_pipeline::config::Config;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::ids::TenantId;
use ingest_pipeline::core::index_config::EmbedModel;
use ingest_pipeline::pipeline::{BackfillScope, ConsumeOutcome, SearchRequest};
use serde::Deserialize;

const LARGE: &str = "@cf/baai/bge-large-en-v1.5";
const M3: &str = "@cf/baai/bge-m3";

/// Documents on unrelated subjects, each found by its own `query`.
const DOCS: [(&str, &str, &str); 4] = [
    (
        "lighthouse",
        "The lighthouse keeper trims the lamp wick every evening so ships clear the rocky headland safely.",
        "lighthouse keeper lamp wick headland",
    ),
    (
        "sourdough",
        "A sourdough starter needs flour, water and patience; feed it daily and the loaf rises with a tangy crumb.",
        "sourdough starter flour loaf crumb",
    ),
    (
        "glacier",
        "Glaciers carve valleys as compacted snow turns to ice and creeps downhill, dragging boulders called moraines.",
        "glaciers carve valleys ice moraines",
    ),
    (
        "violin",
        "Violin makers season spruce and maple for years before carving the arched belly and scroll of an instrument.",
        "violin makers spruce maple scroll",
    ),
];

/// The document put during the backfill: its first paragraph, then
/// [`late_text`] adds more, so that it has several chunks.
const LATE: (&str, &str, &str) = (
    "orchard",
    "Apple orchards are pruned in winter; grafted saplings bear fruit after three seasons of careful watering.",
    "apple orchards pruned grafted saplings",
);

/// The late document's text: [`LATE`]'s paragraph and eight more.
fn late_text() -> String {
    let mut text = LATE.1.to_string();
    for i in 0..8 {
        text.push_str("\n\n");
        text.push_str(&paragraph(i));
    }
    text
}

/// A Workers AI configuration of `model` (1,024 dimensions), with small chunks.
fn workers_ai(model: &str) -> Config {
    Config::from_lookup(|n| {
        let v = match n {
            "EMBEDDER_BACKEND" => "workers-ai",
            "EMBEDDING_MODEL" => model,
            "EMBEDDING_DIMENSIONS" => "1024",
            "CHUNK_SIZE_MAX_TOKENS" => "160",
            "CHUNK_OVERLAP_TOKENS" => "16",
            // Small, so that a page spans several calls per model.
            "EMBED_BATCH_SIZE" => "3",
            _ => return None,
        };
        Some(v.to_string())
    })
    .unwrap()
}

fn request(query: &str) -> SearchRequest {
    SearchRequest {
        mode: ingest_pipeline::pipeline::SearchMode::Hybrid,
        highlight: false,
        query: query.into(),
        top_k: 3,
        doc_id: None,
        metadata: Default::default(),
    }
}

/// The model the active generation's index configuration names.
fn active_model(w: &World) -> String {
    let view = serde_json::to_value(block_on(w.p().generations_view()).unwrap()).unwrap();
    let active = view["active"].clone();
    let g = view["generations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["generation"] == active)
        .expect("the active generation is listed");
    g["index_config"]["embedder"].as_str().unwrap().to_string()
}

/// Every live document is found, first, by its own query; the query was
/// embedded by the active generation's model, and the results are of the
/// active generation.
fn every_document_is_found(w: &World, e: &ModelEmbedder, docs: &[(&str, &str, &str)], at: &str) {
    let model = active_model(w);
    let active = oracle::active_generation(&w.db);
    for (doc, _, query) in docs {
        let hits = block_on(
            w.p_with(e)
                .search(&TenantId::default_tenant(), &request(query)),
        )
        .unwrap_or_else(|err| panic!("{at}: search for {doc} answered {err:?}"));
        let top = hits
            .first()
            .unwrap_or_else(|| panic!("{at}: no hit for {doc}"));
        assert_eq!(top.doc_id, *doc, "{at}: the top hit for {doc}: {hits:?}");
        assert_eq!(
            top.generation, active,
            "{at}: served from the active generation"
        );
        assert_eq!(
            e.last_model().as_deref(),
            Some(model.as_str()),
            "{at}: the query is embedded by the active generation's model"
        );
    }
}

#[derive(Deserialize)]
struct ChunkRow {
    vector_id: String,
    generation: u32,
    text: String,
    index_config: String,
}

/// The live chunk rows of `doc`, with their generation's configuration.
fn live_rows(w: &World, doc: &str) -> Vec<ChunkRow> {
    w.db.inspect(
        "SELECT c.vector_id, c.generation, c.text, g.index_config FROM chunks c
         JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
           AND (c.to_version IS NULL OR c.to_version > d.live_version)
         JOIN generations g ON g.generation = c.generation
         WHERE c.doc_id = ?1 ORDER BY c.generation, c.ord",
        vec![doc.into()],
    )
}

#[test]
fn model_switch_search_answers_with_the_active_generations_model_before_during_and_after() {
    let mut w = World::with(workers_ai(LARGE));
    let e = ModelEmbedder::new(&w.cfg);
    for (doc, text, _) in DOCS {
        w.put(doc, text);
    }
    w.deliver_all_with(&e);
    every_document_is_found(&w, &e, &DOCS, "indexed by bge-large");

    // The Worker is redeployed with bge-m3: search still embeds with
    // generation 1's bge-large (it answered 503 index_misconfigured before).
    w.cfg = workers_ai(M3);
    assert_eq!(active_model(&w), LARGE);
    every_document_is_found(&w, &e, &DOCS, "after the deploy, before the backfill");

    // The config backfill builds generation 2 with bge-m3.
    let view = block_on(w.p_with(&e).start_backfill(&BackfillScope::Config, 2))
        .unwrap()
        .expect("a new model is a new configuration");
    let view = serde_json::to_value(view.unwrap()).unwrap();
    let id = view["backfill_id"].as_str().unwrap().to_string();
    assert_eq!(view["generation"]["to"], 2);
    every_document_is_found(&w, &e, &DOCS, "backfill started");

    // A document put during the backfill: its index job is delivered first.
    w.put(LATE.0, &late_text());
    let late = w.queue.sent.borrow_mut().pop_back().unwrap();
    assert_eq!(late.doc_id, LATE.0);
    let calls_before = e.calls.borrow().len();
    assert!(matches!(
        block_on(w.p_with(&e).consume(&late)),
        ConsumeOutcome::Ack {
            reason: "committed"
        }
    ));
    // Its chunks were embedded model by model, within the batch limit
    // (the fake refuses more than 3 texts a call).
    let calls: Vec<String> = e.calls.borrow()[calls_before..].to_vec();
    assert!(calls.len() >= 4, "{calls:?}");
    assert!(calls.iter().any(|m| m == LARGE) && calls.iter().any(|m| m == M3));
    let mut all: Vec<(&str, &str, &str)> = DOCS.to_vec();
    all.push(LATE);
    every_document_is_found(&w, &e, &all, "the late document indexed");
    // It is written in both generations, each with its own model's vectors.
    let rows = live_rows(&w, LATE.0);
    let gens: Vec<u32> = rows.iter().map(|r| r.generation).collect();
    assert!(gens.contains(&1) && gens.contains(&2), "{gens:?}");
    assert!(rows.len() >= 4, "several chunks per generation: {gens:?}");
    let index = w.index.vectors.borrow();
    for r in &rows {
        let model = EmbedModel::of_index_config(&r.index_config).unwrap();
        let expected = if r.generation == 1 { LARGE } else { M3 };
        assert_eq!(model.name, expected);
        let stored = &index
            .get(&r.vector_id)
            .expect("the vector is written")
            .values;
        assert_eq!(
            stored,
            &ModelEmbedder::vector(&model, &r.text),
            "generation {}'s vector is its own model's",
            r.generation
        );
        let other = EmbedModel {
            name: if r.generation == 1 { M3 } else { LARGE }.to_string(),
            ..model.clone()
        };
        let cosine: f32 = stored
            .iter()
            .zip(ModelEmbedder::vector(&other, &r.text))
            .map(|(a, b)| a * b)
            .sum();
        assert!(
            cosine.abs() < 0.5,
            "the two models' vectors differ: {cosine}"
        );
    }
    drop(index);

    // Drive the backfill to its switch, one message at a time, searching
    // after every delivery and every cron run.
    let mut switched_at = None;
    for round in 0..50 {
        let state = serde_json::to_value(block_on(w.p().backfill_view(&id)).unwrap().unwrap())
            .unwrap()["state"]
            .clone();
        if state != "running" {
            assert_eq!(state, "completed");
            break;
        }
        loop {
            let next = w.queue.sent.borrow_mut().pop_front();
            let Some(m) = next else { break };
            if let ConsumeOutcome::Retry { delay_seconds } = block_on(w.p_with(&e).consume(&m)) {
                w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                w.queue.sent.borrow_mut().push_back(m);
            }
            every_document_is_found(&w, &e, &all, &format!("round {round}, after a delivery"));
        }
        w.clock.advance_ms(60_000);
        block_on(w.p_with(&e).repair());
        if switched_at.is_none() && oracle::active_generation(&w.db) == 2 {
            switched_at = Some(round);
        }
        every_document_is_found(&w, &e, &all, &format!("round {round}, after cron"));
    }
    assert!(switched_at.is_some(), "the backfill switched");
    assert_eq!(oracle::active_generation(&w.db), 2);
    assert_eq!(active_model(&w), M3);
    every_document_is_found(&w, &e, &all, "after the switch");
}

#[test]
fn model_switch_a_worker_that_cannot_embed_for_the_active_generation_refuses() {
    let mut w = World::with(workers_ai(LARGE));
    let e = ModelEmbedder::new(&w.cfg);
    for (doc, text, _) in DOCS {
        w.put(doc, text);
    }
    w.deliver_all_with(&e);
    // Other dimensions (one index, fixed dimensions), or the local embedder:
    // no generation in use can be embedded for.
    let base = Config::from_lookup(|n| match n {
        "EMBEDDER_BACKEND" => Some("workers-ai".into()),
        "EMBEDDING_MODEL" => Some("@cf/baai/bge-base-en-v1.5".into()),
        "EMBEDDING_DIMENSIONS" => Some("768".into()),
        _ => None,
    })
    .unwrap();
    let local = Config {
        embedding_dimensions: 1024,
        ..Config::default()
    };
    for (k, cfg) in [base, local].into_iter().enumerate() {
        w.cfg = cfg;
        let err = block_on(
            w.p_with(&e)
                .search(&TenantId::default_tenant(), &request(DOCS[0].2)),
        )
        .unwrap_err();
        assert_eq!(err.bucket, FailureBucket::IndexMisconfigured);
        w.put(
            DOCS[0].0,
            &format!("New version {k}, which no generation in use can embed."),
        );
        let m = w.queue.take_all().remove(0);
        assert!(matches!(
            block_on(w.p_with(&e).consume(&m)),
            ConsumeOutcome::Retry { .. }
        ));
        assert_eq!(
            oracle::last_failure_bucket(&w.db, &m.job_id).as_deref(),
            Some("index_misconfigured")
        );
    }
}

/// A configuration of `model` with `dimensions` (Workers AI).
fn workers_ai_of(model: &str, dimensions: &str) -> Config {
    Config::from_lookup(|n| match n {
        "EMBEDDER_BACKEND" => Some("workers-ai".into()),
        "EMBEDDING_MODEL" => Some(model.into()),
        "EMBEDDING_DIMENSIONS" => Some(dimensions.into()),
        _ => None,
    })
    .unwrap()
}

/// Delivers every message (a retry after its delay) and runs cron, until
/// the backfill `id` ends.
fn run_backfill(w: &World, e: &ModelEmbedder, id: &str) {
    for _ in 0..50 {
        let view =
            serde_json::to_value(block_on(w.p().backfill_view(id)).unwrap().unwrap()).unwrap();
        if view["state"] != "running" {
            assert_eq!(view["state"], "completed", "{view}");
            return;
        }
        w.deliver_all_with(e);
        w.clock.advance_ms(60_000);
        block_on(w.p_with(e).repair());
    }
    panic!("the backfill never ended");
}

#[test]
fn model_switch_a_retained_generation_a_staging_left_out_is_not_rolled_back_to() {
    // Migration 0031: the switch back to a retained generation no longer
    // checks every live document; it trusts that every version staged
    // since was written there, unless a staging left it out (a Worker that
    // cannot embed for it: here the local embedder's generation, after a
    // deploy of Workers AI). Without the mark (`skipped_at`), this rollback
    // would serve a generation without the document's newest version.
    let mut w = World::with(Config {
        embedding_dimensions: 1024,
        ..Config::default()
    });
    for (doc, text, _) in DOCS {
        w.put(doc, text);
    }
    w.deliver_all();
    assert_eq!(oracle::chunks_in_generation(&w.db, 1), DOCS.len() as i64);
    // A deploy of a Workers AI model builds generation 2.
    w.cfg = workers_ai_of(LARGE, "1024");
    let e = ModelEmbedder::new(&w.cfg);
    let view = block_on(w.p_with(&e).start_backfill(&BackfillScope::Config, 2))
        .unwrap()
        .expect("a new model is a new configuration");
    let id = serde_json::to_value(view.unwrap()).unwrap()["backfill_id"]
        .as_str()
        .unwrap()
        .to_string();
    run_backfill(&w, &e, &id);
    assert_eq!(oracle::active_generation(&w.db), 2);
    assert_eq!(oracle::chunks_in_generation(&w.db, 2), DOCS.len() as i64);
    // Generation 1 is retained, every version in it: it may be rolled back to.
    let skipped = |w: &World| -> Vec<serde_json::Value> {
        w.db.inspect(
            "SELECT generation, skipped_at FROM generations WHERE skipped_at IS NOT NULL",
            vec![],
        )
    };
    assert_eq!(skipped(&w), Vec::<serde_json::Value>::new());
    // A new version is staged in generation 2 only: this Worker cannot
    // embed for generation 1.
    w.put(DOCS[0].0, "A new version that only generation 2 holds.");
    w.deliver_all_with(&e);
    let refused = block_on(w.p_with(&e).activate_generation(1)).unwrap();
    assert!(
        matches!(
            refused,
            Err(ingest_pipeline::pipeline::Refused::GenerationIncomplete { generation: 1 })
        ),
        "{refused:?}"
    );
    assert_eq!(oracle::active_generation(&w.db), 2);
    assert_eq!(skipped(&w).len(), 1, "{:?}", skipped(&w));
}
