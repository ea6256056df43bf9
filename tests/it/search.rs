//! Hybrid search: the keyword index (FTS5, kept by triggers) beside the
//! vector ranking, fused by reciprocal rank; its fences (deleted documents,
//! old versions, other generations, other tenants, filters), its scores and
//! snippets, and what each mode costs in embedder and index calls.

use crate::common::{counted, oracle, paragraph, World};
use futures::executor::block_on;
use ingest_pipeline::core::ids::{DocId, TenantId};
use ingest_pipeline::pipeline::{
    BackfillScope, DocumentInput, IntakeItem, Quotas, SearchHit, SearchMode, SearchRequest,
};
use serde_json::json;

fn req(q: &str, mode: SearchMode) -> SearchRequest {
    SearchRequest {
        mode,
        ..SearchRequest::new(q, 5)
    }
}

fn search(w: &World, q: &str, mode: SearchMode) -> Vec<SearchHit> {
    w.search_by(&req(q, mode))
}

fn docs(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.doc_id.as_str()).collect()
}

/// Twelve filler documents of look-alike English paragraphs, and three
/// that hold the exact terms the tests look for.
fn world() -> World {
    let w = World::new();
    for i in 0..12 {
        w.put(
            &format!("filler-{i:02}"),
            &format!("{}\n\n{}", paragraph(i), paragraph(i + 40)),
        );
    }
    w.put(
        "errors",
        &format!(
            "{}\n\nThe upload fails with error E4021 when the token has expired; call parse_config_v2 again.",
            paragraph(3)
        ),
    );
    w.put(
        "tokyo",
        "東京都の人口は約千四百万人で、日本の総人口の一割を超える。検索インデックスの再構築は夜間に行う。",
    );
    w.put(
        "osaka",
        "大阪府の人口は約八百八十万人である。ベクトル索引の更新は毎朝行う。",
    );
    w.deliver_all();
    w
}

#[test]
fn search_keyword_mode_finds_exact_terms_in_english_and_japanese() {
    let w = world();
    for (q, doc) in [
        ("E4021", "errors"),
        ("parse_config_v2", "errors"),
        ("東京都の人口", "tokyo"),
        ("検索インデックスの再構築", "tokyo"),
        ("検索", "tokyo"),
        ("ベクトル索引", "osaka"),
    ] {
        let hits = search(&w, q, SearchMode::Keyword);
        assert_eq!(docs(&hits).first(), Some(&doc), "keyword {q:?}: {hits:?}");
        let top = &hits[0];
        assert!(top.scores.keyword.is_some_and(|s| s > 0.0), "{top:?}");
        assert_eq!(top.scores.vector, None, "keyword mode has no vector score");
        assert_eq!(top.score, top.scores.keyword.unwrap());
    }
    // A phrase that is in no document: nothing, not a near miss.
    assert!(search(&w, "京都府の人口", SearchMode::Keyword)
        .iter()
        .all(|h| h.text.contains("京都") || h.text.contains("人口")));
}

#[test]
fn search_hybrid_puts_the_exact_term_first_where_vectors_alone_do_not() {
    let w = world();
    let q = "error E4021";
    let vector = search(&w, q, SearchMode::Vector);
    let hybrid = search(&w, q, SearchMode::Hybrid);
    assert_eq!(docs(&hybrid).first(), Some(&"errors"), "{hybrid:?}");
    let top = &hybrid[0];
    assert!(
        top.scores.keyword.is_some() && top.scores.fused > 0.0,
        "{top:?}"
    );
    assert_eq!(top.score, top.scores.fused);
    // Fused scores are in order, and every vector hit carries its score.
    assert!(hybrid
        .windows(2)
        .all(|p| p[0].scores.fused >= p[1].scores.fused));
    assert!(vector
        .iter()
        .all(|h| h.scores.vector.is_some() && h.scores.keyword.is_none()));
    // A query with nothing to match by keyword is the vector ranking.
    let punct = search(&w, "!!! ???", SearchMode::Hybrid);
    let punct_vector = search(&w, "!!! ???", SearchMode::Vector);
    assert_eq!(docs(&punct), docs(&punct_vector));
    assert!(search(&w, "!!! ???", SearchMode::Keyword).is_empty());
}

#[test]
fn search_fts_syntax_in_the_query_is_literal_text() {
    let w = world();
    for q in [
        "\"unbalanced",
        "foo AND OR",
        "NEAR(a b)",
        "terms:E4021",
        "*",
        "^start",
        "a - b",
        "(((",
        "{terms}: x",
        "E4021\" OR \"x",
        "NOT",
        "\u{0}",
    ] {
        for mode in [SearchMode::Keyword, SearchMode::Hybrid] {
            // A panic or an error here is the 500 the API must never give.
            let _ = search(&w, q, mode);
        }
    }
    // A user's quotes are text too: the term inside still matches.
    for q in ["\"E4021\"", "E4021*", "(E4021)"] {
        assert_eq!(
            docs(&search(&w, q, SearchMode::Keyword)).first(),
            Some(&"errors"),
            "{q}"
        );
    }
}

#[test]
fn search_keyword_results_never_serve_a_deleted_document_or_an_old_version() {
    let w = world();
    assert_eq!(docs(&search(&w, "E4021", SearchMode::Keyword)), ["errors"]);
    // A new version without the term: the old version's rows left the index.
    w.put("errors", "The upload now fails with error E5000 instead.");
    w.deliver_all();
    assert!(search(&w, "E4021", SearchMode::Keyword).is_empty());
    let new = search(&w, "E5000", SearchMode::Keyword);
    assert_eq!(docs(&new), ["errors"]);
    assert_eq!(new[0].version, 2);
    // Deleted: nothing of it, in any mode.
    w.delete("tokyo");
    w.deliver_all();
    for mode in [SearchMode::Keyword, SearchMode::Hybrid, SearchMode::Vector] {
        let hits = search(&w, "東京都の人口", mode);
        assert!(!docs(&hits).contains(&"tokyo"), "{mode:?}: {hits:?}");
    }
    // The index holds exactly the live chunks' rows.
    let (held, live) = oracle::keyword_rows(&w.db);
    assert_eq!(held, live);
    assert!(!held.is_empty());
}

#[test]
fn search_keyword_results_are_the_asking_tenants_only() {
    let w = world();
    let acme = TenantId::parse("acme").unwrap();
    block_on(w.p().create_tenant(&acme, &Quotas::default()))
        .unwrap()
        .unwrap();
    // The same document ID as the default tenant's, another text.
    let item = IntakeItem::Put(DocumentInput {
        doc_id: DocId::parse("errors").unwrap(),
        text: "Acme's runbook: error Z9911 means the 倉庫管理システム is down.".into(),
        metadata: Default::default(),
        content_type: ingest_pipeline::core::chunk::ContentType::Plain,
    });
    block_on(w.p().intake(&acme, &[item])).unwrap();
    w.deliver_all();
    for mode in [SearchMode::Keyword, SearchMode::Hybrid] {
        for q in ["Z9911", "倉庫管理"] {
            assert!(
                w.search_by(&req(q, mode))
                    .iter()
                    .all(|h| !h.text.contains("Z9911")),
                "the default tenant sees acme's {q:?} ({mode:?})"
            );
            let theirs = block_on(w.p().search(&acme, &req(q, mode))).unwrap();
            assert_eq!(docs(&theirs).first(), Some(&"errors"), "{q:?}");
            assert!(
                theirs.iter().all(|h| h.text.contains("Z9911")),
                "{theirs:?}"
            );
        }
        let theirs = block_on(w.p().search(&acme, &req("E4021", mode))).unwrap();
        assert!(
            theirs.iter().all(|h| h.text.contains("Z9911")),
            "acme sees the default tenant's: {theirs:?}"
        );
    }
}

/// Tenant `t`'s keyword answer to `q`: each hit's document, chunk and
/// keyword score, in order.
fn keyword_answer(w: &World, t: &TenantId, q: &str) -> Vec<(String, String, f32)> {
    block_on(w.p().search(t, &req(q, SearchMode::Keyword)))
        .unwrap()
        .into_iter()
        .map(|h| (h.doc_id.clone(), h.text.clone(), h.scores.keyword.unwrap()))
        .collect()
}

fn put_as(w: &World, t: &TenantId, doc: &str, text: &str) {
    let item = IntakeItem::Put(DocumentInput {
        doc_id: DocId::parse(doc).unwrap(),
        text: text.into(),
        metadata: Default::default(),
        content_type: ingest_pipeline::core::chunk::ContentType::Plain,
    });
    block_on(w.p().intake(t, &[item])).unwrap();
    w.deliver_all();
}

#[test]
fn a_tenants_keyword_scores_and_order_do_not_move_when_another_tenant_writes() {
    // Tenant A's two reports; tenant B then writes many rows holding the
    // same words (and the Japanese one), and deletes some. With one index's
    // statistics for all tenants, A's scores fell and its top hit for
    // "alpha beta" flipped (issue 35); each tenant's counts are its own now.
    let w = World::new();
    let a = TenantId::parse("tenant-a").unwrap();
    let b = TenantId::parse("tenant-b").unwrap();
    for t in [&a, &b] {
        block_on(w.p().create_tenant(t, &Quotas::default()))
            .unwrap()
            .unwrap();
    }
    put_as(&w, &a, "alpha", "alpha report on quarterly figures");
    put_as(&w, &a, "beta", "beta notes beta figures for the alpha team");
    put_as(&w, &a, "tokyo", "東京の四半期報告書、売上の数字");
    put_as(&w, &a, "other", "gamma delta epsilon");
    let queries = ["alpha beta", "alpha", "figures", "東京", "報告書"];
    let before: Vec<_> = queries.iter().map(|q| keyword_answer(&w, &a, q)).collect();
    assert!(before.iter().all(|hits| !hits.is_empty()), "{before:?}");
    for i in 0..20 {
        put_as(
            &w,
            &b,
            &format!("probe-{i}"),
            &format!("alpha alpha probe {i} 東京 報告書 figures"),
        );
    }
    put_as(&w, &b, "beta-heavy", &"beta ".repeat(50));
    block_on(
        w.p()
            .intake(&b, &[IntakeItem::Delete(DocId::parse("probe-3").unwrap())]),
    )
    .unwrap();
    w.deliver_all();
    let after: Vec<_> = queries.iter().map(|q| keyword_answer(&w, &a, q)).collect();
    assert_eq!(after, before, "A's scores and order moved with B's writes");
    // And B's rows are never A's hits, nor A's B's.
    assert!(after.iter().flatten().all(|(_, t, _)| !t.contains("probe")));
    let theirs = keyword_answer(&w, &b, "quarterly");
    assert!(theirs.is_empty(), "{theirs:?}");
}

#[test]
fn search_keyword_results_are_of_the_active_generation_throughout_a_backfill() {
    let mut w = world();
    w.cfg.chunk_size_max_tokens = 64;
    w.cfg.chunk_overlap_tokens = 8;
    let started = block_on(w.p().start_backfill(&BackfillScope::Config, 4))
        .unwrap()
        .expect("backfill starts");
    let id = serde_json::to_value(started).unwrap()["backfill_id"]
        .as_str()
        .unwrap()
        .to_string();
    let active = |w: &World| oracle::active_generation(&w.db);
    let check = |w: &World| {
        let g = active(w);
        for q in ["E4021", "東京都の人口", "検索"] {
            let hits = search(w, q, SearchMode::Keyword);
            assert!(
                !hits.is_empty(),
                "{q:?} found while generation {g} is active"
            );
            assert!(hits.iter().all(|h| h.generation == g), "{q:?}: {hits:?}");
        }
    };
    let mut switched = false;
    for _ in 0..40 {
        check(&w);
        loop {
            let next = w.queue.sent.borrow_mut().pop_front();
            let Some(m) = next else { break };
            w.consume(&m);
            check(&w);
        }
        w.clock.advance_ms(60_000);
        w.cron();
        let view =
            serde_json::to_value(block_on(w.p().backfill_view(&id)).unwrap().unwrap()).unwrap();
        if view["state"] != "running" {
            switched = true;
            break;
        }
    }
    assert!(switched, "the backfill ended");
    assert_eq!(active(&w), 2);
    check(&w);
    // Both generations' live rows are in the index until generation 1
    // retires; it holds exactly the live chunks' rows either way.
    let (held, live) = oracle::keyword_rows(&w.db);
    assert_eq!(held, live);
}

#[test]
fn search_filters_apply_to_keyword_results_exactly() {
    let w = World::new();
    for (doc, lang) in [("a", "en"), ("b", "de"), ("c", "en")] {
        let mut m = serde_json::Map::new();
        m.insert("lang".into(), json!(lang));
        w.put_with(
            doc,
            &format!("Release notes for {doc}: the flag --strict-mode is now on."),
            m,
            ingest_pipeline::core::chunk::ContentType::Plain,
        );
    }
    w.deliver_all();
    let mut r = req("strict-mode", SearchMode::Keyword);
    r.metadata.insert("lang".into(), json!("en"));
    let mut got = docs(&w.search_by(&r))
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["a", "c"]);
    r.doc_id = Some("c".into());
    assert_eq!(docs(&w.search_by(&r)), ["c"]);
    r.doc_id = Some("b".into());
    assert!(w.search_by(&r).is_empty(), "b is lang de");
}

#[test]
fn search_highlights_only_when_asked() {
    let w = world();
    let plain = search(&w, "E4021", SearchMode::Hybrid);
    assert!(plain.iter().all(|h| h.snippet.is_none()));
    let r = SearchRequest {
        highlight: true,
        ..req("E4021", SearchMode::Hybrid)
    };
    let hits = w.search_by(&r);
    let snippet = hits[0].snippet.as_deref().expect("a snippet");
    assert!(
        snippet.chars().count() <= w.cfg.search_snippet_chars + 64,
        "{snippet}"
    );
    assert!(!snippet.is_empty());
}

#[test]
fn search_in_keyword_mode_calls_neither_the_embedder_nor_the_index() {
    let w = world();
    let c = counted(&w);
    let p = c.p();
    let tenant = TenantId::default_tenant();
    block_on(p.search(&tenant, &req("E4021", SearchMode::Keyword))).unwrap();
    assert_eq!((c.embedder.calls.get(), c.index.query_calls.get()), (0, 0));
    block_on(p.search(&tenant, &req("E4021", SearchMode::Hybrid))).unwrap();
    assert_eq!(c.embedder.calls.get(), 1, "hybrid embeds the query once");
    assert!(c.index.query_calls.get() >= 1);
}

/// Defect: a numeric filter missed a document whose number was written
/// differently (`{"rank": 1}` dropped `{"rank": 1.0}`: serde_json's `1`
/// and `1.0` differ), where Vectorize, which compares JavaScript numbers,
/// matches it. Both rankings, on the same documents and filters, must
/// answer what JavaScript's `===` on parsed JSON answers: numbers as
/// numbers (`1` = `1.0`, `-0` = `0`, integers past 2^53 as doubles), and
/// never a string or a boolean for a number.
#[test]
fn search_metadata_filters_compare_numbers_as_numbers_on_both_rankings() {
    let w = World::new();
    let docs: &[(&str, &str)] = &[
        ("int", r#"{"rank": 1, "big": 9007199254740993, "z": 0}"#),
        (
            "float",
            r#"{"rank": 1.0, "big": 9007199254740992, "z": -0.0}"#,
        ),
        (
            "float-exp",
            r#"{"rank": 1e0, "big": 9.007199254740992e15, "z": 0.0}"#,
        ),
        ("other", r#"{"rank": 1.5, "big": 9007199254740994, "z": 1}"#),
        (
            "string",
            r#"{"rank": "1", "big": "9007199254740992", "z": "0"}"#,
        ),
        ("bool", r#"{"rank": true, "big": false, "z": false}"#),
    ];
    for (doc, metadata) in docs {
        let body = format!(
            r#"{{"text": "shared words about the ledger and {doc}", "metadata": {metadata}}}"#
        );
        let r = w.request(
            "PUT",
            &format!("/v1/documents/{doc}"),
            Some("Bearer t-ingest"),
            Some("application/json"),
            body.as_bytes(),
        );
        assert_eq!(r.status, 202, "{}", r.body);
    }
    w.deliver_all();
    let cases: &[(&str, &[&str])] = &[
        (r#"{"rank": 1}"#, &["float", "float-exp", "int"]),
        (r#"{"rank": 1.0}"#, &["float", "float-exp", "int"]),
        (r#"{"rank": 1.5}"#, &["other"]),
        (r#"{"rank": "1"}"#, &["string"]),
        (r#"{"rank": true}"#, &["bool"]),
        (r#"{"z": 0}"#, &["float", "float-exp", "int"]),
        (r#"{"z": -0.0}"#, &["float", "float-exp", "int"]),
        (r#"{"z": false}"#, &["bool"]),
        (
            r#"{"big": 9007199254740992}"#,
            &["float", "float-exp", "int"],
        ),
        (r#"{"big": 9007199254740994}"#, &["other"]),
        (r#"{"big": "9007199254740992"}"#, &["string"]),
    ];
    for (filter, want) in cases {
        for mode in ["vector", "keyword", "hybrid"] {
            let body = format!(
                r#"{{"query": "shared words about the ledger", "top_k": 20, "mode": "{mode}", "filter": {{"metadata": {filter}}}}}"#
            );
            let r = w.request(
                "POST",
                "/v1/search",
                Some("Bearer t-ingest"),
                Some("application/json"),
                body.as_bytes(),
            );
            assert_eq!(r.status, 200, "{}", r.body);
            let mut got: Vec<&str> = r.body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["doc_id"].as_str().unwrap())
                .collect();
            got.sort_unstable();
            got.dedup();
            assert_eq!(&got, want, "filter {filter}, mode {mode}");
        }
    }
}

#[test]
fn a_chunk_holding_the_query_verbatim_ranks_first_in_keyword_mode() {
    // A Japanese run is scored as its characters and their pairs, apart:
    // a chunk that repeats the pieces of 「東京都庁」 without holding it
    // outscored the one that holds it (Japanese exact phrases' keyword
    // hit@1 fell from 0.97 to 0.78 in make eval after migration 0021).
    // The verbatim chunk's bm25 is raised by
    // SEARCH_KEYWORD_PHRASE_BOOST_PERCENT; 0 shows the order without it.
    let mut w = World::new();
    w.put("exact", "東京都庁の展望室は無料で入れる。");
    w.put(
        "apart",
        "東京と京都。京都の都庁。東京の都庁舎、京都の東京。",
    );
    w.put(
        "english-exact",
        "The error budget policy is reviewed every quarter.",
    );
    w.put(
        "english-apart",
        "An error in the budget; the budget policy of error, policy and budget.",
    );
    w.deliver_all();
    let ranked = |w: &World, q: &str| -> Vec<(String, f32)> {
        search(w, q, SearchMode::Keyword)
            .into_iter()
            .map(|h| (h.doc_id, h.score))
            .collect()
    };
    let boosted = [ranked(&w, "東京都庁"), ranked(&w, "error budget policy")];
    w.cfg.search_keyword_phrase_boost_percent = 0;
    let plain = [ranked(&w, "東京都庁"), ranked(&w, "error budget policy")];
    for (lang, (with, without)) in ["ja", "en"].iter().zip(boosted.iter().zip(&plain)) {
        let (exact, apart) = match *lang {
            "ja" => ("exact", "apart"),
            _ => ("english-exact", "english-apart"),
        };
        let first = |hits: &[(String, f32)]| hits.first().map(|h| h.0.clone());
        assert_eq!(
            first(without).as_deref(),
            Some(apart),
            "{lang}: {without:?}"
        );
        assert_eq!(first(with).as_deref(), Some(exact), "{lang}: {with:?}");
        let score = |hits: &[(String, f32)], d: &str| hits.iter().find(|h| h.0 == d).map(|h| h.1);
        // Raised by 100 %, the default; the other chunk's score unchanged.
        let (b, p) = (score(with, exact).unwrap(), score(without, exact).unwrap());
        assert!((b - 2.0 * p).abs() < 1e-4 * b, "{lang}: {b} vs {p}");
        assert_eq!(score(with, apart), score(without, apart), "{lang}");
    }
}
