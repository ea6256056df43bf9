//! `make bench-index`: the offline vector index (`INDEX_BACKEND=local-d1`,
//! `adapters::local_index`) at a real corpus's size (issue 36, item 6).
//! Measured, not asserted.
//!
//! 1. Makes the vectors: by default synthetic clustered data (deterministic:
//!    `BENCH_INDEX_CLUSTERS` centres on the sphere, each vector a centre
//!    plus Gaussian noise, queries new points drawn the same way); with
//!    `BENCH_INDEX_TEXT_DIR`, the chunks of that directory's files (sorted,
//!    chunked by the configured chunker) embedded by the local embedder,
//!    and queries of 2 to 6 consecutive words taken from chunks, as a user
//!    types them.
//! 2. Loads them through the real `LocalIndex` over native SQLite with the
//!    real migrations, in upserts of `UPSERT_BATCH_SIZE` (the maintenance
//!    each upsert runs included), and prints the partitions it made.
//! 3. Queries (top 10, one namespace, no filter) with each
//!    `LOCAL_INDEX_QUERY_DIMS_MAX` of `BENCH_INDEX_DIMS` and each
//!    `LOCAL_INDEX_RERANK` of `BENCH_INDEX_RERANKS` (default: the configured
//!    ones): p50 and p95 time, rows read (SQLite's, as D1 counts them),
//!    recall@10 against an exhaustive scan in memory (a result counts if
//!    its exact score is at least the exact 10th best's: identical vectors
//!    tie).
//! 4. The index as it was (one JSON text per vector, every vector of the
//!    namespace read and parsed per query), on the migrations before 0003,
//!    with the same vectors and `BENCH_INDEX_OLD_QUERIES` of the queries.
//!
//! With `BENCH_INDEX_CHECK_DB` (the local index's SQLite file under `make
//! dev`'s state) and `BENCH_INDEX_CHECK_ANSWERS` (the answers file of
//! `scripts/bench-dev-index.mjs search`), it does only this: the recall@10
//! of `make dev`'s answers against an exhaustive scan of that database's
//! namespace `BENCH_INDEX_CHECK_NAMESPACE` (`default`), each query embedded
//! by the local embedder as the Worker embeds it.
//!
//! Sizes (environment): `BENCH_INDEX_VECTORS` (100,000),
//! `BENCH_INDEX_QUERIES` (200), `BENCH_INDEX_OLD_QUERIES` (20; 0: skip),
//! `BENCH_INDEX_CLUSTERS` (1,000, of synthetic data). The index's
//! own settings are read as the Worker reads them (`LOCAL_INDEX_*`,
//! `EMBEDDING_DIMENSIONS`, ...).
//!
//! Native only: on wasm32 (the Worker build) this binary is an empty `main`.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    bench::main();
}

#[cfg(not(target_arch = "wasm32"))]
mod bench {
    use futures::executor::block_on;
    use ingest_pipeline::adapters::local_index::{LocalIndex, LocalIndexTuning};
    use ingest_pipeline::adapters::IndexLimits;
    use ingest_pipeline::config::Config;
    use ingest_pipeline::core::chunk::ContentType;
    use ingest_pipeline::core::local_embed::{cosine, embed};
    use ingest_pipeline::core::vector_codes;
    use ingest_pipeline::native::sim::Rng;
    use ingest_pipeline::native::{SqliteDb, LOCAL_INDEX_MIGRATIONS};
    use ingest_pipeline::ports::{
        Database, MetadataFilter, Stmt, VectorIndex, VectorMetadata, VectorRecord,
    };
    use ingest_pipeline::store::vector_rows;
    use serde::Deserialize;
    use serde_json::json;
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    const NAMESPACE: &str = "bench";
    const TOP_K: usize = 10;

    struct Settings {
        vectors: usize,
        queries: usize,
        old_queries: usize,
        clusters: usize,
        dims: Vec<usize>,
        reranks: Vec<usize>,
        text_dir: Option<PathBuf>,
    }

    fn number(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().replace('_', "").parse().ok())
            .unwrap_or(default)
    }

    impl Settings {
        fn from_env(cfg: &Config) -> Settings {
            let list = |name: &str, default: usize| {
                std::env::var(name)
                    .ok()
                    .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
                    .filter(|v: &Vec<usize>| !v.is_empty())
                    .unwrap_or_else(|| vec![default])
            };
            Settings {
                vectors: number("BENCH_INDEX_VECTORS", 100_000),
                queries: number("BENCH_INDEX_QUERIES", 200),
                old_queries: number("BENCH_INDEX_OLD_QUERIES", 20),
                clusters: number("BENCH_INDEX_CLUSTERS", 1_000),
                dims: list("BENCH_INDEX_DIMS", cfg.local_index_query_dims_max),
                reranks: list("BENCH_INDEX_RERANKS", cfg.local_index_rerank),
                text_dir: std::env::var_os("BENCH_INDEX_TEXT_DIR").map(PathBuf::from),
            }
        }
    }

    /// The vectors (ID, document) and the query vectors.
    struct Data {
        ids: Vec<(String, String)>,
        vectors: Vec<Vec<f32>>,
        queries: Vec<Vec<f32>>,
        what: String,
    }

    pub fn main() {
        let cfg = Config::from_lookup(|name| std::env::var(name).ok())
            .unwrap_or_else(|e| panic!("configuration: {e}"));
        if let (Some(db), Some(answers)) = (
            std::env::var_os("BENCH_INDEX_CHECK_DB"),
            std::env::var_os("BENCH_INDEX_CHECK_ANSWERS"),
        ) {
            return check(Path::new(&db), Path::new(&answers), &cfg);
        }
        let s = Settings::from_env(&cfg);
        let started = Instant::now();
        let data = match &s.text_dir {
            Some(dir) => text(dir, &s, &cfg),
            None => synthetic(&s, cfg.embedding_dimensions),
        };
        println!(
            "## The offline vector index: {} vectors of {} dimensions ({}), {} queries\n",
            data.vectors.len(),
            cfg.embedding_dimensions,
            data.what,
            data.queries.len()
        );
        println!("made in {:.1} s", started.elapsed().as_secs_f64());
        let truth = exact(&data);
        new_index(&cfg, &s, &data, &truth);
        if s.old_queries > 0 {
            old_index(&cfg, &s, &data, &truth);
        }
    }

    /// A standard normal deviate (Box-Muller), from the bench's own RNG.
    fn gauss(rng: &mut Rng) -> f32 {
        let u1 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.max(1e-300).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = vector_codes::norm(&v);
        v.into_iter()
            .map(|x| x / n.max(f32::MIN_POSITIVE))
            .collect()
    }

    /// Clustered vectors: each a centre plus noise whose norm is about the
    /// centre's (neighbours within a cluster at cosine about 0.5), each
    /// document 20 vectors of one cluster.
    fn synthetic(s: &Settings, dims: usize) -> Data {
        let mut rng = Rng::new(36);
        let centres: Vec<Vec<f32>> = (0..s.clusters.max(1))
            .map(|_| unit((0..dims).map(|_| gauss(&mut rng)).collect()))
            .collect();
        let noise = 1.0 / (dims as f32).sqrt();
        let point = |rng: &mut Rng, c: usize| -> Vec<f32> {
            let centre = &centres[c % centres.len()];
            unit(centre.iter().map(|x| x + noise * gauss(rng)).collect())
        };
        let mut ids = Vec::with_capacity(s.vectors);
        let mut vectors = Vec::with_capacity(s.vectors);
        for doc in 0..s.vectors.div_ceil(20) {
            let c = rng.below(centres.len() as u64) as usize;
            for k in 0..20.min(s.vectors - doc * 20) {
                ids.push((format!("v{doc:06}.{k:02}"), format!("doc-{doc:06}")));
                vectors.push(point(&mut rng, c));
            }
        }
        let queries = (0..s.queries)
            .map(|_| {
                let c = rng.below(centres.len() as u64) as usize;
                point(&mut rng, c)
            })
            .collect();
        let what = format!("synthetic: {} clusters", centres.len());
        Data {
            ids,
            vectors,
            queries,
            what,
        }
    }

    /// Every file under `dir`, sorted by path.
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }

    /// The chunks of `dir`'s text files, embedded by the local embedder, and
    /// queries of a few consecutive words of every so many chunks.
    fn text(dir: &Path, s: &Settings, cfg: &Config) -> Data {
        let mut paths = Vec::new();
        files(dir, &mut paths);
        let chunker = cfg.chunker();
        let (mut ids, mut vectors, mut texts) = (Vec::new(), Vec::new(), Vec::new());
        let mut used = 0;
        for path in &paths {
            if vectors.len() >= s.vectors {
                break;
            }
            let Ok(body) = std::fs::read_to_string(path) else {
                continue;
            };
            used += 1;
            let doc = format!("doc-{used:06}");
            for c in chunker.chunk(&body, ContentType::Plain) {
                if vectors.len() >= s.vectors {
                    break;
                }
                ids.push((format!("{doc}.{:05}", c.index), doc.clone()));
                vectors.push(embed(c.text, cfg.embedding_dimensions));
                texts.push(c.text.to_string());
            }
        }
        let mut rng = Rng::new(36);
        let mut queries = Vec::new();
        while queries.len() < s.queries && !texts.is_empty() {
            let t = &texts[rng.below(texts.len() as u64) as usize];
            let words: Vec<&str> = t.split_whitespace().collect();
            let len = 2 + rng.below(5) as usize;
            if words.len() < len {
                continue;
            }
            let at = rng.below((words.len() - len + 1) as u64) as usize;
            queries.push(embed(
                &words[at..at + len].join(" "),
                cfg.embedding_dimensions,
            ));
        }
        let what = format!("{used} files of {}, local-hash embedder", dir.display());
        Data {
            ids,
            vectors,
            queries,
            what,
        }
    }

    /// For each query, the exact scores of all vectors' top 10, best first.
    fn exact(data: &Data) -> Vec<Vec<(f32, usize)>> {
        let norms: Vec<f32> = data.vectors.iter().map(|v| vector_codes::norm(v)).collect();
        data.queries
            .iter()
            .map(|q| {
                let qn = vector_codes::norm(q);
                let mut all: Vec<(f32, usize)> = data
                    .vectors
                    .iter()
                    .zip(&norms)
                    .enumerate()
                    .map(|(i, (v, n))| (vector_codes::cosine_normed(q, qn, v, *n), i))
                    .collect();
                all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                all.truncate(TOP_K);
                all
            })
            .collect()
    }

    /// The share of the exact top 10 a result holds (a result counts if its
    /// exact score reaches the exact 10th best's).
    fn recall(data: &Data, q: usize, truth: &[(f32, usize)], got: &[String]) -> f64 {
        let Some(&(tenth, _)) = truth.last() else {
            return 1.0;
        };
        let query = &data.queries[q];
        let index: std::collections::HashMap<&str, usize> = truth
            .iter()
            .map(|&(_, i)| (data.ids[i].0.as_str(), i))
            .collect();
        let hits = got
            .iter()
            .filter(|id| {
                index.contains_key(id.as_str())
                    || lookup(data, id).is_some_and(|i| cosine(query, &data.vectors[i]) >= tenth)
            })
            .count();
        hits as f64 / truth.len() as f64
    }

    fn lookup(data: &Data, id: &str) -> Option<usize> {
        data.ids.binary_search_by(|(i, _)| i.as_str().cmp(id)).ok()
    }

    fn record(data: &Data, i: usize) -> VectorRecord {
        let (id, doc) = &data.ids[i];
        let mut metadata = VectorMetadata::new();
        metadata.insert("doc_id".into(), json!(doc));
        metadata.insert("source".into(), json!("bench"));
        VectorRecord {
            id: id.clone(),
            namespace: NAMESPACE.into(),
            values: data.vectors[i].clone(),
            metadata,
        }
    }

    fn percentile(sorted: &[f64], p: f64) -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[i]
    }

    /// Times queries: p50 and p95 in ms, the mean rows read, the mean recall.
    fn time_queries(
        db: &SqliteDb,
        n: usize,
        data: &Data,
        truth: &[Vec<(f32, usize)>],
        query: impl Fn(&[f32]) -> Vec<String>,
    ) -> (f64, f64, f64, f64) {
        let (mut times, mut rows, mut recalls) = (Vec::new(), 0u64, 0.0);
        for (q, vector) in data.queries.iter().take(n).enumerate() {
            let before = db.rows().read;
            let t = Instant::now();
            let got = query(vector);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            rows += db.rows().read - before;
            recalls += recall(data, q, &truth[q], &got);
        }
        let count = times.len().max(1) as f64;
        times.sort_by(f64::total_cmp);
        (
            percentile(&times, 0.5),
            percentile(&times, 0.95),
            rows as f64 / count,
            recalls / count,
        )
    }

    fn new_index(cfg: &Config, s: &Settings, data: &Data, truth: &[Vec<(f32, usize)>]) {
        let db = SqliteDb::local_index();
        let mut idx = LocalIndex {
            db: &db,
            limits: IndexLimits::from_config(cfg),
            tuning: LocalIndexTuning::from_config(cfg),
            json_param_bytes_max: cfg.d1_json_param_bytes_max,
            reject_doc_prefix: None,
        };
        let t = Instant::now();
        let (mut slowest, mut total) = (0.0f64, 0usize);
        for batch in (0..data.vectors.len())
            .collect::<Vec<_>>()
            .chunks(cfg.upsert_batch_size)
        {
            let records: Vec<VectorRecord> = batch.iter().map(|&i| record(data, i)).collect();
            let u = Instant::now();
            block_on(idx.upsert(&records)).expect("upsert");
            slowest = slowest.max(u.elapsed().as_secs_f64());
            total += 1;
        }
        println!(
            "\n### Compact vectors, quantized blocks by dimension\n\n{:?}\n\nloaded in {:.1} s: {} upserts, the slowest {:.0} ms (the placement it ran included)",
            idx.tuning,
            t.elapsed().as_secs_f64(),
            total,
            slowest * 1000.0
        );
        print_space(&db, data);
        println!("\n| query dims max | rerank | p50 ms | p95 ms | rows read per query | recall@10 |\n|---:|---:|---:|---:|---:|---:|");
        for &dims in &s.dims {
            for &rerank in &s.reranks {
                idx.tuning.query_dims_max = dims;
                idx.tuning.rerank = rerank;
                let (p50, p95, rows, r) = time_queries(&db, s.queries, data, truth, |q| {
                    let hits = block_on(idx.query(q, TOP_K, NAMESPACE, &MetadataFilter::new()));
                    hits.expect("query").into_iter().map(|m| m.id).collect()
                });
                println!("| {dims} | {rerank} | {p50:.2} | {p95:.2} | {rows:.0} | {r:.3} |");
            }
        }
    }

    /// The namespace's counts and blocks, and the queries' non-zero dimensions.
    fn print_space(db: &SqliteDb, data: &Data) {
        let space = block_on(vector_rows::space(&db, NAMESPACE)).expect("space");
        let nonzero: usize = data
            .queries
            .iter()
            .map(|q| q.iter().filter(|x| **x != 0.0).count())
            .sum();
        println!(
            "{} vectors, {} unplaced, {} slots in blocks; a query has {:.1} non-zero dimensions on average",
            space.vectors,
            space.unplaced,
            space.slots,
            nonzero as f64 / data.queries.len().max(1) as f64
        );
    }

    /// The index before migration 0003, as it was: these statements and
    /// this query are the old `LocalIndex`'s.
    const OLD_UPSERT: &str = "\
INSERT INTO vectors (id, namespace, doc_id, vec, metadata)
SELECT json_extract(value, '$.id'), json_extract(value, '$.namespace'), json_extract(value, '$.doc_id'), json_extract(value, '$.vec'), json_extract(value, '$.metadata')
FROM json_each(?1) WHERE true
ON CONFLICT (id) DO UPDATE SET namespace = excluded.namespace, doc_id = excluded.doc_id, vec = excluded.vec, metadata = excluded.metadata";
    const OLD_SCAN: &str =
        "SELECT id, namespace, vec, metadata FROM vectors WHERE namespace = ?1 AND (?2 IS NULL OR doc_id = ?2)";

    #[derive(Deserialize)]
    struct OldRow {
        id: String,
        vec: String,
        metadata: String,
    }

    fn old_query(db: &SqliteDb, q: &[f32]) -> Vec<String> {
        let stmt = Stmt::new(OLD_SCAN, vec![NAMESPACE.into(), None::<String>.into()]);
        let rows: Vec<OldRow> = block_on(db.query(stmt)).expect("scan");
        let mut scored: Vec<(f32, String)> = rows
            .into_iter()
            .map(|r| {
                let values: Vec<f32> = serde_json::from_str(&r.vec).expect("vec");
                let _: VectorMetadata = serde_json::from_str(&r.metadata).expect("metadata");
                (cosine(q, &values), r.id)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        scored.into_iter().take(TOP_K).map(|(_, id)| id).collect()
    }

    fn old_index(cfg: &Config, s: &Settings, data: &Data, truth: &[Vec<(f32, usize)>]) {
        let db = SqliteDb::open(&LOCAL_INDEX_MIGRATIONS[..2]);
        let t = Instant::now();
        for batch in (0..data.vectors.len())
            .collect::<Vec<_>>()
            .chunks(cfg.upsert_batch_size)
        {
            let rows: Vec<serde_json::Value> = batch
                .iter()
                .map(|&i| {
                    let r = record(data, i);
                    json!({
                        "id": r.id, "namespace": r.namespace, "doc_id": data.ids[i].1,
                        "vec": serde_json::to_string(&r.values).expect("floats"),
                        "metadata": serde_json::to_string(&r.metadata).expect("metadata"),
                    })
                })
                .collect();
            let page = serde_json::to_string(&rows).expect("page");
            block_on(db.execute(Stmt::new(OLD_UPSERT, vec![page.into()]))).expect("old upsert");
        }
        let json: usize = data
            .vectors
            .iter()
            .map(|v| serde_json::to_string(v).expect("floats").len())
            .sum();
        let base64: usize = data
            .vectors
            .iter()
            .map(|v| vector_codes::encode_vector(v).len())
            .sum();
        let n = data.vectors.len().max(1);
        println!(
            "\n### As it was (JSON text, every vector read per query)\n\nloaded in {:.1} s; a vector's text: {} bytes of JSON on average, {} of base64 now",
            t.elapsed().as_secs_f64(),
            json / n,
            base64 / n
        );
        let (p50, p95, rows, r) =
            time_queries(&db, s.old_queries, data, truth, |q| old_query(&db, q));
        println!("\n| queries | p50 ms | p95 ms | vectors read per query | recall@10 |\n|---:|---:|---:|---:|---:|");
        println!(
            "| {} | {p50:.2} | {p95:.2} | {rows:.0} | {r:.3} |",
            s.old_queries.min(data.queries.len())
        );
    }

    #[derive(Deserialize)]
    struct Answer {
        query: String,
        ms: f64,
        scores: Vec<Option<f32>>,
    }

    /// Every vector of `namespace` in the local index's database at `path`.
    fn stored(path: &Path, namespace: &str) -> Vec<(Vec<f32>, f32)> {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let conn = rusqlite::Connection::open_with_flags(path, flags).expect("the database opens");
        // A database from before migration 0003 has no `norm`: all JSON.
        let mut q = conn
            .prepare("SELECT vec, norm FROM vectors WHERE namespace = ?1")
            .or_else(|_| conn.prepare("SELECT vec, NULL AS norm FROM vectors WHERE namespace = ?1"))
            .expect("a local index database");
        let rows = q
            .query_map([namespace], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<f64>>(1)?))
            })
            .expect("vectors");
        rows.map(|r| {
            let (vec, norm) = r.expect("row");
            match norm {
                Some(n) => (vector_codes::decode_vector(&vec).expect("base64"), n as f32),
                None => {
                    let v: Vec<f32> = serde_json::from_str(&vec).expect("JSON");
                    let n = vector_codes::norm(&v);
                    (v, n)
                }
            }
        })
        .collect()
    }

    /// The recall@10 of `make dev`'s answers (a result counts if its score
    /// reaches the exhaustive scan's 10th best).
    fn check(db: &Path, answers: &Path, cfg: &Config) {
        let namespace = std::env::var("BENCH_INDEX_CHECK_NAMESPACE").unwrap_or("default".into());
        let vectors = stored(db, &namespace);
        let text = std::fs::read_to_string(answers).expect("the answers file");
        let answers: Vec<Answer> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("an answer"))
            .collect();
        let (mut recall, mut times) = (0.0, Vec::new());
        for a in &answers {
            let q = embed(&a.query, cfg.embedding_dimensions);
            let qn = vector_codes::norm(&q);
            let mut exact: Vec<f32> = vectors
                .iter()
                .map(|(v, n)| vector_codes::cosine_normed(&q, qn, v, *n))
                .collect();
            exact.sort_by(|a, b| b.total_cmp(a));
            exact.truncate(TOP_K);
            let Some(&tenth) = exact.last() else { continue };
            let hits = a.scores.iter().flatten().filter(|s| **s >= tenth).count();
            recall += hits.min(exact.len()) as f64 / exact.len() as f64;
            times.push(a.ms);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{} answers of make dev over {} vectors (namespace {namespace:?}): recall@10 {:.3}; the requests' p50 {:.1} ms, p95 {:.1} ms",
            answers.len(),
            vectors.len(),
            recall / answers.len().max(1) as f64,
            percentile(&times, 0.5),
            percentile(&times, 0.95)
        );
    }
}
