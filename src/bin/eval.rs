//! `make eval`: search quality on a labelled query set (see
//! `docs/performance.md`, "Search quality"). Measured, not asserted.
//!
//! The corpus and the queries are committed under `tests/data/eval/`
//! (`README.md` there: each file's source and license). Every document of
//! `corpus.tsv` is ingested through the real pipeline (the test kit's
//! `World`: SQLite ledger with the real migrations, in-memory index, the
//! local hashed n-gram embedder) under the default configuration; then each
//! query of `queries-exact.tsv` (generated, `gen_exact.py`) and
//! `queries-manual.tsv` (written by hand) is searched in each mode, top 10.
//! A query's relevant chunks are those of its labelled document whose text
//! contains its anchor. It prints:
//!
//! 1. hit@1, hit@5 and MRR (over the top 10) per language and slice
//!    (`exact`, `paraphrase`, `short`) and overall, each mode side by side;
//! 2. the keyword index's size in the ledger (its FTS5 shadow tables and
//!    the chunks' `terms` column), per chunk;
//! 3. each mode's query latency (native SQLite, this machine);
//! 4. tokenizers side by side on the same chunks, in an SQLite of its own
//!    (independent of the pipeline, ranked by FTS5's bm25): the terms of
//!    `core::terms` under FTS5's `ascii` tokenizer (the chosen scheme),
//!    trigram over the raw text, plain unicode61 over the raw text;
//!    keyword-only quality and index bytes.
//!
//! `EVAL_VERBOSE=1` also lists each query's first relevant rank per mode;
//! a setting's variable (`SEARCH_RRF_K=20`, `SEARCH_KEYWORD_WEIGHT_PERCENT=150`)
//! overrides its default, as it would the Worker's.
//!
//! Native only: on wasm32 (the Worker build) this binary is an empty `main`.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eval::main();
}

#[cfg(not(target_arch = "wasm32"))]
mod eval {
    use futures::executor::block_on;
    use ingest_pipeline::config::Config;
    use ingest_pipeline::core::ids::TenantId;
    use ingest_pipeline::core::terms;
    use ingest_pipeline::native::oracle;
    use ingest_pipeline::native::testkit::World;
    use ingest_pipeline::pipeline::{ConsumeOutcome, SearchMode, SearchRequest};
    use serde::Deserialize;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    const TOP_K: usize = 10;

    // ---------------------------------------------------------------- data

    struct Doc {
        id: String,
        lang: String,
        text: String,
    }

    #[derive(Clone)]
    struct Query {
        id: String,
        lang: String,
        slice: String,
        doc: String,
        anchor: String,
        query: String,
    }

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn data_dir() -> PathBuf {
        root().join("tests/data/eval")
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The rows of a TSV file with a header line, each as its fields.
    fn tsv(path: &Path, columns: usize) -> Vec<Vec<String>> {
        read(path)
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| {
                let fields: Vec<String> = l.split('\t').map(str::to_string).collect();
                assert_eq!(fields.len(), columns, "{}: {l}", path.display());
                fields
            })
            .collect()
    }

    fn corpus() -> Vec<Doc> {
        tsv(&data_dir().join("corpus.tsv"), 5)
            .into_iter()
            .map(|f| Doc {
                id: f[0].clone(),
                lang: f[1].clone(),
                text: read(&root().join(&f[2])),
            })
            .collect()
    }

    fn queries() -> Vec<Query> {
        ["queries-exact.tsv", "queries-manual.tsv"]
            .iter()
            .flat_map(|n| tsv(&data_dir().join(n), 6))
            .map(|f| Query {
                id: f[0].clone(),
                lang: f[1].clone(),
                slice: f[2].clone(),
                doc: f[3].clone(),
                anchor: f[4].clone(),
                query: f[5].clone(),
            })
            .collect()
    }

    /// A chunk: its document and index.
    type ChunkRef = (String, u32);

    struct Chunk {
        doc: String,
        index: u32,
        text: String,
    }

    // ---------------------------------------------------------------- metrics

    /// The 1-based rank of the first relevant chunk in `ranked`, if any.
    fn first_relevant(ranked: &[ChunkRef], relevant: &BTreeSet<ChunkRef>) -> Option<usize> {
        ranked
            .iter()
            .take(TOP_K)
            .position(|c| relevant.contains(c))
            .map(|i| i + 1)
    }

    #[derive(Clone, Copy, Default)]
    struct Quality {
        n: usize,
        hit1: usize,
        hit5: usize,
        rr: f64,
    }

    impl Quality {
        fn add(&mut self, rank: Option<usize>) {
            self.n += 1;
            if let Some(r) = rank {
                self.hit1 += usize::from(r == 1);
                self.hit5 += usize::from(r <= 5);
                self.rr += 1.0 / r as f64;
            }
        }
        fn hit1(&self) -> f64 {
            self.hit1 as f64 / self.n.max(1) as f64
        }
        fn hit5(&self) -> f64 {
            self.hit5 as f64 / self.n.max(1) as f64
        }
        fn mrr(&self) -> f64 {
            self.rr / self.n.max(1) as f64
        }
        fn cells(&self) -> String {
            format!(
                "{:.2} | {:.2} | {:.3}",
                self.hit1(),
                self.hit5(),
                self.mrr()
            )
        }
    }

    /// The rows of a quality table: each (language, slice), each language,
    /// and everything.
    fn groups() -> Vec<(&'static str, &'static str)> {
        let mut g = Vec::new();
        for lang in ["en", "ja"] {
            for slice in ["exact", "paraphrase", "short"] {
                g.push((lang, slice));
            }
        }
        g.extend([("en", "all"), ("ja", "all"), ("all", "all")]);
        g
    }

    fn in_group(q: &Query, (lang, slice): (&str, &str)) -> bool {
        (lang == "all" || q.lang == lang) && (slice == "all" || q.slice == slice)
    }

    /// Per group, per method: the quality of `ranks[method][query]`.
    fn tabulate(
        queries: &[Query],
        ranks: &[Vec<Option<usize>>],
    ) -> Vec<((&'static str, &'static str), Vec<Quality>)> {
        groups()
            .into_iter()
            .map(|g| {
                let per_method = ranks
                    .iter()
                    .map(|r| {
                        let mut q = Quality::default();
                        for (i, query) in queries.iter().enumerate() {
                            if in_group(query, g) {
                                q.add(r[i]);
                            }
                        }
                        q
                    })
                    .collect();
                (g, per_method)
            })
            .collect()
    }

    fn print_quality(title: &str, methods: &[&str], table: &[((&str, &str), Vec<Quality>)]) {
        if !title.is_empty() {
            println!("{title}\n");
        }
        let mut head = "| language | slice | n |".to_string();
        let mut rule = "|---|---|---:|".to_string();
        for m in methods {
            head.push_str(&format!(" {m} hit@1 | hit@5 | MRR |"));
            rule.push_str("---:|---:|---:|");
        }
        println!("{head}\n{rule}");
        for ((lang, slice), qs) in table {
            let n = qs.first().map_or(0, |q| q.n);
            let cells: Vec<String> = qs.iter().map(Quality::cells).collect();
            println!("| {lang} | {slice} | {n} | {} |", cells.join(" | "));
        }
        println!();
    }

    // ---------------------------------------------------------------- the pipeline

    const MODES: [SearchMode; 3] = [SearchMode::Vector, SearchMode::Keyword, SearchMode::Hybrid];

    fn label(mode: SearchMode) -> &'static str {
        match mode {
            SearchMode::Vector => "vector",
            SearchMode::Keyword => "keyword",
            SearchMode::Hybrid => "hybrid",
        }
    }

    /// The pipeline's search in `mode`, top 10: the ranked chunks.
    fn search(w: &World, mode: SearchMode, query: &str) -> Vec<ChunkRef> {
        let req = SearchRequest {
            mode,
            ..SearchRequest::new(query, TOP_K)
        };
        let hits = block_on(w.p().search(&TenantId::default_tenant(), &req)).expect("search");
        hits.into_iter()
            .map(|h| (h.doc_id, h.chunk as u32))
            .collect()
    }

    /// The defaults, with any setting overridden by the environment
    /// variable of its name (`SEARCH_KEYWORD_WEIGHT_PERCENT=150 make eval`),
    /// as the Worker reads its variables.
    fn config() -> Config {
        Config::from_lookup(|name| std::env::var(name).ok()).expect("a valid configuration")
    }

    /// The settings the environment overrides, as `NAME=value`.
    fn overrides() -> Vec<String> {
        ingest_pipeline::config::SETTINGS
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| format!("{n}={v}")))
            .collect()
    }

    fn ingest(docs: &[Doc]) -> World {
        let w = World::with(config());
        for d in docs {
            w.put(&d.id, &d.text);
        }
        let outcomes = w.deliver_all();
        if let Some(o) = outcomes.iter().find(|o| {
            !matches!(
                o,
                ConsumeOutcome::Ack {
                    reason: "committed" | "checkpointed"
                }
            )
        }) {
            panic!("unexpected outcome {o:?}");
        }
        w
    }

    fn served_chunks(w: &World) -> Vec<Chunk> {
        oracle::served_chunks(&w.db)
            .into_iter()
            .map(|c| Chunk {
                doc: c.doc_id,
                // The eval's documents have one version each: their order
                // keys are their chunk indexes.
                index: c.ord as u32,
                text: c.text,
            })
            .collect()
    }

    /// Each query's relevant chunks: its document's chunks containing its anchor.
    fn relevant(queries: &[Query], chunks: &[Chunk]) -> Vec<BTreeSet<ChunkRef>> {
        queries
            .iter()
            .map(|q| {
                chunks
                    .iter()
                    .filter(|c| c.doc == q.doc && c.text.contains(&q.anchor))
                    .map(|c| (c.doc.clone(), c.index))
                    .collect()
            })
            .collect()
    }

    fn percentile(sorted_ms: &[f64], p: f64) -> f64 {
        if sorted_ms.is_empty() {
            return f64::NAN;
        }
        let i = ((sorted_ms.len() as f64 - 1.0) * p).round() as usize;
        sorted_ms[i.min(sorted_ms.len() - 1)]
    }

    #[derive(Deserialize)]
    struct SizeRow {
        name: String,
        payload: i64,
        pages: i64,
    }

    /// Payload and page bytes of each table (and index) whose name starts
    /// with `prefix`, from SQLite's `dbstat`.
    fn table_sizes(w: &World, prefix: &str) -> Vec<SizeRow> {
        w.db.inspect(
            "SELECT name, sum(payload) AS payload, sum(pgsize) AS pages FROM dbstat WHERE name LIKE ?1 || '%' GROUP BY name ORDER BY name",
            vec![prefix.into()],
        )
    }

    fn print_ledger_sizes(w: &World, chunks: usize) {
        println!("### 2. The keyword index in the ledger (SQLite's dbstat; {chunks} chunks)\n");
        let sizes = table_sizes(w, "keyword_index");
        if sizes.is_empty() {
            println!("No keyword index in this ledger (no `keyword_index` table).\n");
            return;
        }
        println!("| table | payload bytes | per chunk | page bytes |");
        println!("|---|---:|---:|---:|");
        let (mut payload, mut pages) = (0, 0);
        for s in &sizes {
            println!(
                "| {} | {} | {:.0} | {} |",
                s.name,
                s.payload,
                s.payload as f64 / chunks as f64,
                s.pages
            );
            payload += s.payload;
            pages += s.pages;
        }
        println!(
            "| all of them | {payload} | {:.0} | {pages} |",
            payload as f64 / chunks as f64
        );
        let text = oracle::count(
            &w.db,
            "SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) AS n FROM chunks",
        );
        let terms = terms_bytes(w);
        println!();
        match terms {
            Some((bytes, rows)) => println!(
                "The chunks' `terms` column: {bytes} bytes in {rows} rows (NULL where it would be the text itself), {:.0} per chunk; their `text`: {text} bytes, {:.0} per chunk.\n",
                bytes as f64 / chunks as f64,
                text as f64 / chunks as f64
            ),
            None => println!(
                "No `terms` column in `chunks`; their `text`: {text} bytes, {:.0} per chunk.\n",
                text as f64 / chunks as f64
            ),
        }
    }

    /// Bytes of the chunks' `terms` column and the rows that have one, if
    /// the column exists.
    fn terms_bytes(w: &World) -> Option<(i64, i64)> {
        let has = oracle::count(
            &w.db,
            "SELECT count(*) AS n FROM pragma_table_info('chunks') WHERE name = 'terms'",
        );
        (has > 0).then(|| {
            (
                oracle::count(
                    &w.db,
                    "SELECT coalesce(sum(length(CAST(terms AS BLOB))), 0) AS n FROM chunks",
                ),
                oracle::count(
                    &w.db,
                    "SELECT count(*) AS n FROM chunks WHERE terms IS NOT NULL",
                ),
            )
        })
    }

    // ---------------------------------------------------------------- tokenizers

    /// The chosen scheme's indexed text: `core::terms::index_document`
    /// (words lowercased, folded and stemmed; each character of a script
    /// written without spaces and each adjacent pair), under one tenant's key.
    fn spaced(text: &str) -> String {
        terms::index_document(1, text).0
    }

    fn quoted(s: &str) -> String {
        format!("\"{}\"", s.replace('"', "\"\""))
    }

    /// The chosen scheme's query: `core::terms::query_terms` (at most the
    /// configured `SEARCH_KEYWORD_PHRASES_MAX`), OR-ed, under the same key.
    /// FTS5's bm25 ranks them here; the pipeline (section 1) computes bm25
    /// itself from the tenant's counts, with idf ln(1 + (N − n + 0.5)/(n + 0.5)).
    fn match_expression(query: &str) -> Option<String> {
        let t = terms::query_terms(query, config().search_keyword_phrases_max);
        (!t.is_empty()).then(|| {
            t.iter()
                .map(|t| quoted(&terms::scoped(1, t)))
                .collect::<Vec<_>>()
                .join(" OR ")
        })
    }

    /// Plain unicode61's query: each whitespace-separated term as a phrase, OR-ed.
    fn terms_or(query: &str) -> Option<String> {
        let phrases: Vec<String> = query
            .split_whitespace()
            .filter(|t| t.chars().any(char::is_alphanumeric))
            .map(quoted)
            .collect();
        (!phrases.is_empty()).then(|| phrases.join(" OR "))
    }

    /// Trigram's query: the whole query as one quoted string (it matches
    /// nothing under 3 characters).
    fn whole(query: &str) -> Option<String> {
        let q = query.trim();
        (!q.is_empty()).then(|| quoted(q))
    }

    struct Scheme {
        label: &'static str,
        table: &'static str,
        tokenize: &'static str,
        index_text: fn(&str) -> String,
        expression: fn(&str) -> Option<String>,
    }

    const SCHEMES: [Scheme; 3] = [
        Scheme {
            label: "core::terms, ascii (chosen)",
            table: "fts_spaced",
            tokenize: "ascii",
            index_text: spaced,
            expression: match_expression,
        },
        Scheme {
            label: "trigram, raw text",
            table: "fts_trigram",
            tokenize: "trigram",
            index_text: str::to_string,
            expression: whole,
        },
        Scheme {
            label: "unicode61, raw text",
            table: "fts_plain",
            tokenize: "unicode61",
            index_text: str::to_string,
            expression: terms_or,
        },
    ];

    struct SchemeResult {
        ranks: Vec<Option<usize>>,
        index_bytes: i64,
        content_bytes: i64,
    }

    fn run_scheme(
        scheme: &Scheme,
        chunks: &[Chunk],
        queries: &[Query],
        relevant: &[BTreeSet<ChunkRef>],
    ) -> SchemeResult {
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite opens");
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE {} USING fts5(body, tokenize = '{}');",
            scheme.table, scheme.tokenize
        ))
        .expect("fts5 table");
        {
            let mut insert = conn
                .prepare(&format!(
                    "INSERT INTO {} (rowid, body) VALUES (?1, ?2)",
                    scheme.table
                ))
                .expect("insert");
            for (i, c) in chunks.iter().enumerate() {
                insert
                    .execute(rusqlite::params![i as i64, (scheme.index_text)(&c.text)])
                    .expect("row");
            }
        }
        let mut search = conn
            .prepare(&format!(
                "SELECT rowid FROM {t} WHERE {t} MATCH ?1 ORDER BY bm25({t}), rowid LIMIT {TOP_K}",
                t = scheme.table
            ))
            .expect("query");
        let ranks = queries
            .iter()
            .zip(relevant)
            .map(|(q, rel)| {
                let expr = (scheme.expression)(&q.query)?;
                let rows: Vec<i64> = search
                    .query_map([expr], |r| r.get(0))
                    .and_then(|rows| rows.collect())
                    .unwrap_or_default();
                let ranked: Vec<ChunkRef> = rows
                    .into_iter()
                    .map(|i| {
                        let c = &chunks[i as usize];
                        (c.doc.clone(), c.index)
                    })
                    .collect();
                first_relevant(&ranked, rel)
            })
            .collect();
        let size = |suffixes: &[&str]| -> i64 {
            suffixes
                .iter()
                .map(|s| {
                    conn.query_row(
                        "SELECT coalesce(sum(payload), 0) FROM dbstat WHERE name = ?1",
                        [format!("{}_{s}", scheme.table)],
                        |r| r.get::<_, i64>(0),
                    )
                    .expect("dbstat")
                })
                .sum()
        };
        SchemeResult {
            ranks,
            index_bytes: size(&["data", "idx", "docsize", "config"]),
            content_bytes: size(&["content"]),
        }
    }

    fn tokenizers(chunks: &[Chunk], queries: &[Query], relevant: &[BTreeSet<ChunkRef>]) {
        let results: Vec<SchemeResult> = SCHEMES
            .iter()
            .map(|s| run_scheme(s, chunks, queries, relevant))
            .collect();
        let ranks: Vec<Vec<Option<usize>>> = results.iter().map(|r| r.ranks.clone()).collect();
        let labels: Vec<&str> = SCHEMES.iter().map(|s| s.label).collect();
        println!("### 4. Tokenizers side by side (keyword only, top {TOP_K}, the same {} chunks, an SQLite of their own)\n", chunks.len());
        println!(
            "{}.\n",
            labels
                .iter()
                .enumerate()
                .map(|(i, l)| format!("({}) {l}", i + 1))
                .collect::<Vec<_>>()
                .join("; ")
        );
        let numbered: Vec<String> = (1..=SCHEMES.len()).map(|i| format!("({i})")).collect();
        let numbered: Vec<&str> = numbered.iter().map(String::as_str).collect();
        print_quality("", &numbered, &tabulate(queries, &ranks));
        let n = chunks.len() as f64;
        let text: usize = chunks.iter().map(|c| c.text.len()).sum();
        println!("| scheme | index bytes per chunk (data, idx, docsize, config) | stored copy per chunk (content) | total per chunk |");
        println!("|---|---:|---:|---:|");
        for (s, r) in SCHEMES.iter().zip(&results) {
            println!(
                "| {} | {:.0} | {:.0} | {:.0} |",
                s.label,
                r.index_bytes as f64 / n,
                r.content_bytes as f64 / n,
                (r.index_bytes + r.content_bytes) as f64 / n
            );
        }
        println!(
            "\nPayload bytes (dbstat); the chunks' own text is {:.0} bytes per chunk. Trigram matches nothing for a query under 3 characters.\n",
            text as f64 / n
        );
    }

    // ---------------------------------------------------------------- main

    pub fn main() {
        let docs = corpus();
        let queries = queries();
        let t = Instant::now();
        let w = ingest(&docs);
        let ingest_ms = t.elapsed().as_secs_f64() * 1e3;
        let chunks = served_chunks(&w);
        let all_relevant = relevant(&queries, &chunks);

        // Queries whose anchor is in no chunk of their document are left out
        // (their label names no chunk under this chunker).
        let unlabelled: Vec<&Query> = queries
            .iter()
            .zip(&all_relevant)
            .filter(|(_, r)| r.is_empty())
            .map(|(q, _)| q)
            .collect();
        let (queries, relevant): (Vec<Query>, Vec<BTreeSet<ChunkRef>>) = queries
            .iter()
            .cloned()
            .zip(all_relevant)
            .filter(|(_, r)| !r.is_empty())
            .unzip();

        let cfg = &w.cfg;
        let bytes = |lang: &str| -> usize {
            docs.iter()
                .filter(|d| d.lang == lang)
                .map(|d| d.text.len())
                .sum()
        };
        let chunks_of = |lang: &str| -> usize {
            let ids: BTreeSet<&str> = docs
                .iter()
                .filter(|d| d.lang == lang)
                .map(|d| d.id.as_str())
                .collect();
            chunks
                .iter()
                .filter(|c| ids.contains(c.doc.as_str()))
                .count()
        };
        println!(
            "ingest-pipeline eval (native, profile `{}`)\n",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "optimized"
            }
        );
        println!(
            "config: {} (chunker {:?}; fusion k {}, weights vector {}% keyword {}% verbatim {}%), the local embedder ({} dimensions), top_k {TOP_K}\n",
            match overrides() {
                o if o.is_empty() => "the defaults".to_string(),
                o => format!("the defaults but {}", o.join(" ")),
            },
            cfg.chunker(),
            cfg.search_rrf_k,
            cfg.search_vector_weight_percent,
            cfg.search_keyword_weight_percent,
            cfg.search_verbatim_weight_percent,
            cfg.embedding_dimensions
        );
        println!(
            "corpus: {} documents ({} en, {:.0} KB, {} chunks; {} ja, {:.0} KB, {} chunks), ingested in {ingest_ms:.0} ms; {} queries ({} left out: anchor in no chunk{})\n",
            docs.len(),
            docs.iter().filter(|d| d.lang == "en").count(),
            bytes("en") as f64 / 1e3,
            chunks_of("en"),
            docs.iter().filter(|d| d.lang == "ja").count(),
            bytes("ja") as f64 / 1e3,
            chunks_of("ja"),
            queries.len(),
            unlabelled.len(),
            if unlabelled.is_empty() {
                String::new()
            } else {
                format!(
                    ": {}",
                    unlabelled
                        .iter()
                        .map(|q| q.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );

        // 1 and 3: every query in every mode.
        let mut ranks: Vec<Vec<Option<usize>>> = Vec::new();
        let mut latencies: Vec<Vec<f64>> = Vec::new();
        for mode in MODES {
            let mut r = Vec::new();
            let mut ms = Vec::new();
            for (q, rel) in queries.iter().zip(&relevant) {
                let t = Instant::now();
                let ranked = search(&w, mode, &q.query);
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                r.push(first_relevant(&ranked, rel));
            }
            ms.sort_by(f64::total_cmp);
            ranks.push(r);
            latencies.push(ms);
        }
        let labels: Vec<&str> = MODES.iter().map(|m| label(*m)).collect();
        let table = tabulate(&queries, &ranks);
        print_quality(
            &format!("### 1. Search quality through the pipeline (top {TOP_K}; MRR over the top {TOP_K})"),
            &labels,
            &table,
        );
        goal(&table, &labels);
        losses(&queries, &ranks);

        print_ledger_sizes(&w, chunks.len());

        println!("### 3. Query latency through the pipeline (native SQLite, this machine; {} queries each)\n", queries.len());
        println!("| mode | median | p95 |");
        println!("|---|---:|---:|");
        for (mode, ms) in MODES.iter().zip(&latencies) {
            println!(
                "| {} | {:.2} ms | {:.2} ms |",
                label(*mode),
                percentile(ms, 0.5),
                percentile(ms, 0.95)
            );
        }
        println!();

        tokenizers(&chunks, &queries, &relevant);

        if std::env::var_os("EVAL_VERBOSE").is_some() {
            verbose(&queries, &relevant, &ranks, &labels);
        }
    }

    /// Where hybrid ranks a query's first relevant chunk below the better
    /// of the two single modes, per slice: how often, and how often the
    /// better mode had it first and hybrid second (a rank-1 candidate of
    /// one list only ties, under equal weights, with the other list's).
    fn losses(queries: &[Query], ranks: &[Vec<Option<usize>>]) {
        let at = |m: SearchMode| MODES.iter().position(|x| *x == m).unwrap_or(0);
        let (v, k, h) = (
            at(SearchMode::Vector),
            at(SearchMode::Keyword),
            at(SearchMode::Hybrid),
        );
        let rank = |r: Option<usize>| r.unwrap_or(usize::MAX);
        println!(
            "Queries where hybrid ranks the relevant chunk lower than the better single mode:\n"
        );
        println!("| language | slice | n | lower | of them: best mode 1st, hybrid 2nd | best mode in top 10, hybrid not |");
        println!("|---|---|---:|---:|---:|---:|");
        for g in groups() {
            let (mut n, mut lower, mut second, mut dropped) = (0, 0, 0, 0);
            for (i, q) in queries.iter().enumerate() {
                if !in_group(q, g) {
                    continue;
                }
                n += 1;
                let best = rank(ranks[v][i]).min(rank(ranks[k][i]));
                let got = rank(ranks[h][i]);
                if got > best {
                    lower += 1;
                    second += usize::from(best == 1 && got == 2);
                    dropped += usize::from(got == usize::MAX);
                }
            }
            println!(
                "| {} | {} | {n} | {lower} | {second} | {dropped} |",
                g.0, g.1
            );
        }
        println!();
    }

    type Metric = fn(&Quality) -> f64;

    /// The goal, read off table 1: hybrid at least as good as both
    /// other modes on every slice, and Japanese exact hit@1 ≥ 0.9.
    fn goal(table: &[((&str, &str), Vec<Quality>)], labels: &[&str]) {
        let at = |m: &str| labels.iter().position(|l| *l == m);
        let (Some(v), Some(k), Some(h)) = (at("vector"), at("keyword"), at("hybrid")) else {
            println!("Goal (hybrid ≥ both on every slice; ja exact hybrid hit@1 ≥ 0.9): not measurable without the three modes.\n");
            return;
        };
        println!("Goal: hybrid at least as good as vector and keyword on every slice (each of hit@1, hit@5, MRR), and Japanese exact hit@1 ≥ 0.9.\n");
        println!("| language | slice | hybrid ≥ both? | short of the best by |");
        println!("|---|---|---|---|");
        for ((lang, slice), qs) in table {
            if *slice == "all" {
                continue;
            }
            let metrics: [(&str, Metric); 3] = [
                ("hit@1", Quality::hit1),
                ("hit@5", Quality::hit5),
                ("MRR", Quality::mrr),
            ];
            let mut short = Vec::new();
            for (name, f) in metrics {
                let best = f(&qs[v]).max(f(&qs[k]));
                let got = f(&qs[h]);
                if got + 1e-9 < best {
                    short.push(format!("{name} {:.3}", best - got));
                }
            }
            println!(
                "| {lang} | {slice} | {} | {} |",
                if short.is_empty() { "yes" } else { "no" },
                if short.is_empty() {
                    "—".to_string()
                } else {
                    short.join(", ")
                }
            );
        }
        if let Some((_, qs)) = table.iter().find(|(g, _)| *g == ("ja", "exact")) {
            let hit1 = qs[h].hit1();
            println!(
                "\nJapanese exact phrases, hybrid hit@1: {hit1:.2} (goal ≥ 0.90: {}).\n",
                if hit1 >= 0.9 { "met" } else { "not met" }
            );
        }
    }

    fn verbose(
        queries: &[Query],
        relevant: &[BTreeSet<ChunkRef>],
        ranks: &[Vec<Option<usize>>],
        labels: &[&str],
    ) {
        println!("### Each query: first relevant rank per mode (– = not in the top {TOP_K})\n");
        println!("| id | relevant chunks | {} | query |", labels.join(" | "));
        println!("|---|---:|{}---|", "---:|".repeat(labels.len()));
        for (i, q) in queries.iter().enumerate() {
            let cells: Vec<String> = ranks
                .iter()
                .map(|r| r[i].map_or("–".to_string(), |x| x.to_string()))
                .collect();
            println!(
                "| {} | {} | {} | {} |",
                q.id,
                relevant[i].len(),
                cells.join(" | "),
                q.query
            );
        }
        println!();
    }
}
