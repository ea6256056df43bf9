//! `make bench`: a native benchmark of the pipeline (see `docs/performance.md`).
//!
//! Measured, not asserted. It prints these tables:
//!
//! 1. throughput of the pure core (chunk + hash + vector IDs) and, apart, of
//!    the local embedder;
//! 2. port calls of one document of about 10 … 20,000 chunks ingested
//!    through the real pipeline (the test kit's `World`: SQLite ledger with
//!    call and statement counters, in-memory index and queue; its `Counted`
//!    embedder and index), against the fewest calls the platform limits
//!    allow;
//! 3. an edit of one paragraph of a document of 200 … 20,000 chunks (v1
//!    ingested, then v2 put and delivered, then cron until quiescent): what
//!    reaches the embedder, what is written to and deleted from the index,
//!    D1 calls and rows written, the job's subrequests and invocations,
//!    against the platform minimum of an edit (`edit_minimum`); v1's own
//!    ingest beside it for scale;
//!
//!    3b. the same edit, a paragraph inserted at the top, one deleted, and
//!    ten edits in a row, in the units the platform bills (D1 rows written
//!    and read, tokens, stored dimensions), in dollars at dated list prices
//!    beside re-embedding every chunk and a record manager, with the
//!    ledger's bytes per live text byte;
//! 4. memory while ingesting: the process's peak RSS, and the Rust heap's
//!    peak and retained growth;
//! 5. shards' capacity: one workload (tenants pinned round-robin, their
//!    documents put and delivered until indexed, then searches) on 1, 2
//!    and 4 native shards, each shard's ledger timed: the busiest shard's
//!    statement time, which bounds what the deployment does, as one D1
//!    database runs one query at a time.
//!
//! Native only: on wasm32 (the Worker build) this binary is an empty `main`.
//! It may import the library's native test kit and oracle (its harness) and
//! the core it measures.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    bench::main();
}

#[cfg(not(target_arch = "wasm32"))]
mod bench {
    use futures::executor::block_on;
    use ingest_pipeline::adapters::local_embedder::LocalEmbedder;
    use ingest_pipeline::adapters::ShardQueue;
    use ingest_pipeline::api::{self, ApiRequest, ApiResponse, Secrets};
    use ingest_pipeline::config::Config;
    use ingest_pipeline::core::chunk::{Chunker, ContentType};
    use ingest_pipeline::core::ids::{occurrences, sha256_hex, vector_id, DocId, DocKey, TenantId};
    use ingest_pipeline::core::local_embed;
    use ingest_pipeline::native::cluster::Cluster;
    use ingest_pipeline::native::oracle;
    use ingest_pipeline::native::rows::between;
    use ingest_pipeline::native::sim::Rng;
    use ingest_pipeline::native::testkit::{
        changed_chunks, counted, queued, Counted, World, TEST_ADMIN_TOKEN, TEST_INGEST_TOKEN,
    };
    use ingest_pipeline::native::{heap, ManualClock, MemIndex, MemQueue, SqliteDb};
    use ingest_pipeline::pipeline::fleet::Fleet;
    use ingest_pipeline::pipeline::moves::advance_moves;
    use ingest_pipeline::pipeline::{ConsumeOutcome, DocumentInput, IntakeItem, Pipeline};
    use ingest_pipeline::ports::{
        Database, MetadataFilter, PortError, Rows, Stmt, VectorIndex, VectorMatch, VectorRecord,
    };
    use ingest_pipeline::store::sql;
    use serde::de::DeserializeOwned;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeSet;
    use std::time::{Duration, Instant};

    // ---------------------------------------------------------------- heap accounting

    #[global_allocator]
    static ALLOC: heap::Tracking = heap::Tracking;

    fn reset_heap_peak() -> usize {
        heap::reset_peak()
    }

    fn heap_peak() -> usize {
        heap::peak()
    }

    /// A field of `/proc/self/status`, in KiB (Linux only).
    fn proc_status_kib(field: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Resets the process's peak RSS (VmHWM) to its current RSS (Linux ≥ 4.0).
    fn reset_peak_rss() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }

    fn mib(bytes: usize) -> f64 {
        bytes as f64 / (1024.0 * 1024.0)
    }

    // ---------------------------------------------------------------- documents

    /// A vocabulary of made-up words, so the embedder sees varied text.
    fn vocabulary(rng: &mut Rng) -> Vec<String> {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "de", "po", "ga", "hu", "ze", "bi",
            "fo", "ja", "qu", "re", "sa", "ti", "wo", "xe", "ya", "nu",
        ];
        (0..3000)
            .map(|_| {
                (0..2 + rng.below(3))
                    .map(|_| SYLLABLES[rng.below(24) as usize])
                    .collect::<String>()
            })
            .collect()
    }

    /// A paragraph of at most `chars` characters (and not much less):
    /// sentences of 6–16 words.
    fn paragraph(rng: &mut Rng, vocab: &[String], chars: usize) -> String {
        let mut p = String::with_capacity(chars);
        let mut left_in_sentence = 0;
        loop {
            let word = &vocab[rng.below(vocab.len() as u64) as usize];
            if p.len() + 1 + word.len() + 1 > chars {
                break;
            }
            if left_in_sentence == 0 {
                if !p.is_empty() {
                    p.push_str(". ");
                }
                left_in_sentence = 6 + rng.below(11);
            } else {
                p.push(' ');
            }
            p.push_str(word);
            left_in_sentence -= 1;
        }
        p.push('.');
        p
    }

    /// A document of `n` paragraphs, each a little shorter than a chunk, so
    /// that it chunks into about `n` chunks.
    fn document(seed: u64, n: usize, paragraph_chars: usize) -> Vec<String> {
        let mut rng = Rng::new(seed);
        let vocab = vocabulary(&mut rng);
        (0..n)
            .map(|_| paragraph(&mut rng, &vocab, paragraph_chars))
            .collect()
    }

    /// The benchmark's configuration: the defaults (384 dimensions, 100
    /// texts per embed call, 1,000 vectors per upsert, 100 IDs per delete),
    /// with 500-token chunks so that 20,000 chunks (≈ 9 MB) fit under
    /// the default 10 MB `DOCUMENT_BYTES_MAX`.
    fn bench_config() -> Config {
        let cfg = Config {
            chunk_size_max_tokens: 500,
            chunk_overlap_tokens: 50,
            ..Config::default()
        };
        cfg.validate().expect("bench configuration is valid");
        cfg
    }

    /// Paragraph length: about 375 non-whitespace characters (tokens, by the
    /// WordPiece bound); with ≤ 50 tokens of overlap a paragraph fits one
    /// 500-token chunk and two do not, so `n` paragraphs make `n` chunks.
    const PARAGRAPH_CHARS: usize = 440;

    fn chunk_cfg(cfg: &Config) -> Chunker {
        cfg.chunker()
    }

    // ---------------------------------------------------------------- 1. core throughput

    fn core_throughput() {
        let cfg = bench_config();
        let text = document(1, 4000, PARAGRAPH_CHARS).join("\n\n");
        let mb = text.len() as f64 / 1e6;
        let doc = DocKey::new(
            &TenantId::default_tenant(),
            &DocId::parse("bench-core").unwrap(),
        );
        println!("### 1. Pure core throughput (native, one thread; {mb:.1} MB of text, 500-token chunks)\n");
        println!("| stage | input | time | throughput |");
        println!("|---|---:|---:|---:|");

        let reps = 5;
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..reps {
            n = chunk_cfg(&cfg).chunk(&text, ContentType::Plain).len();
        }
        let chunk_s = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "| chunk | {mb:.1} MB → {n} chunks | {:.1} ms | {:.0} MB/s |",
            chunk_s * 1e3,
            mb / chunk_s
        );

        let t = Instant::now();
        let mut sink = 0usize;
        for _ in 0..reps {
            let chunks = chunk_cfg(&cfg).chunk(&text, ContentType::Plain);
            let hashes: Vec<String> = chunks
                .iter()
                .map(|c| sha256_hex(c.text.as_bytes()))
                .collect();
            for (h, k) in hashes
                .iter()
                .zip(occurrences(hashes.iter().map(String::as_str)))
            {
                sink += vector_id(&doc, 1, h, k, "{}").len();
            }
        }
        let all_s = t.elapsed().as_secs_f64() / reps as f64;
        std::hint::black_box(sink);
        println!(
            "| chunk + sha256 + vector IDs | {mb:.1} MB → {n} chunks | {:.1} ms | {:.0} MB/s |",
            all_s * 1e3,
            mb / all_s
        );

        let chunks = chunk_cfg(&cfg).chunk(&text, ContentType::Plain);
        let chunk_bytes: usize = chunks.iter().map(|c| c.text.len()).sum();
        let t = Instant::now();
        let mut sink = 0.0f32;
        for c in &chunks {
            sink += local_embed::embed(c.text, cfg.embedding_dimensions)[0];
        }
        let embed_s = t.elapsed().as_secs_f64();
        std::hint::black_box(sink);
        println!(
            "| local embedder ({} dims) | {:.1} MB in {n} chunks | {:.0} ms | {:.1} MB/s ({:.0} chunks/s) |",
            cfg.embedding_dimensions,
            chunk_bytes as f64 / 1e6,
            embed_s * 1e3,
            chunk_bytes as f64 / 1e6 / embed_s,
            n as f64 / embed_s
        );
        println!();
    }

    // ---------------------------------------------------------------- 2–4. the pipeline

    #[derive(Clone, Copy, Debug, Default)]
    struct Counts {
        d1_calls: u64,
        d1_statements: u64,
        embed_calls: u64,
        texts_embedded: u64,
        upsert_calls: u64,
        vectors_written: u64,
        delete_calls: u64,
        ids_deleted: u64,
        get_calls: u64,
        ids_fetched: u64,
        queue_sends: u64,
        /// Wall-clock milliseconds since the bench started.
        ms: f64,
    }

    fn elapsed_ms() -> f64 {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
    }

    impl Counts {
        fn since(self, before: Counts) -> Counts {
            Counts {
                d1_calls: self.d1_calls - before.d1_calls,
                d1_statements: self.d1_statements - before.d1_statements,
                embed_calls: self.embed_calls - before.embed_calls,
                texts_embedded: self.texts_embedded - before.texts_embedded,
                upsert_calls: self.upsert_calls - before.upsert_calls,
                vectors_written: self.vectors_written - before.vectors_written,
                delete_calls: self.delete_calls - before.delete_calls,
                ids_deleted: self.ids_deleted - before.ids_deleted,
                get_calls: self.get_calls - before.get_calls,
                ids_fetched: self.ids_fetched - before.ids_fetched,
                queue_sends: self.queue_sends - before.queue_sends,
                ms: self.ms - before.ms,
            }
        }

        /// Every call that is a subrequest on the platform.
        fn subrequests(&self) -> u64 {
            self.d1_calls
                + self.embed_calls
                + self.upsert_calls
                + self.delete_calls
                + self.get_calls
                + self.queue_sends
        }
    }

    /// D1 calls a consumer cannot do without: load the job, claim it, read
    /// the text, stage the chunks, replace.
    const D1_FLOOR: u64 = 5;

    /// What the counted ports of `c` and its world's ledger and queue saw
    /// so far.
    fn counts(c: &Counted<'_>) -> Counts {
        Counts {
            d1_calls: c.w.db.calls.get(),
            d1_statements: c.w.db.statements.get(),
            embed_calls: c.embedder.calls.get(),
            texts_embedded: c.embedder.texts.get(),
            upsert_calls: c.index.upsert_calls.get(),
            vectors_written: c.index.vectors_written.get(),
            delete_calls: c.index.delete_calls.get(),
            ids_deleted: c.index.ids_deleted.get(),
            get_calls: c.index.get_calls.get(),
            ids_fetched: c.index.ids_got.get(),
            queue_sends: c.w.queue.send_calls.get(),
            ms: elapsed_ms(),
        }
    }

    /// Puts `text` as document `doc` through the counted ports.
    fn put(c: &Counted<'_>, doc: &str, text: String) {
        let item = IntakeItem::Put(DocumentInput {
            doc_id: DocId::parse(doc).unwrap(),
            text,
            metadata: Default::default(),
            content_type: ContentType::Plain,
        });
        block_on(c.p().intake(&TenantId::default_tenant(), &[item]))
            .expect("intake accepts the document");
    }

    /// Whether a delivery ended as the bench expects: committed, or
    /// checkpointed (its continuation is delivered next), or retried.
    fn expected(outcome: &ConsumeOutcome) -> bool {
        matches!(
            outcome,
            ConsumeOutcome::Ack {
                reason: "committed" | "checkpointed"
            } | ConsumeOutcome::Retry { .. }
        )
    }

    /// Delivers every queued message through the counted ports, one
    /// invocation each; returns the number of deliveries.
    fn deliver_all(c: &Counted<'_>) -> u64 {
        let outcomes = c.deliver_all();
        if let Some(o) = outcomes.iter().find(|o| !expected(o)) {
            panic!("unexpected outcome {o:?}");
        }
        outcomes.len() as u64
    }

    /// Chunks of live versions (every generation; the bench has one).
    fn live_chunks(w: &World) -> usize {
        oracle::live_vector_ids(&w.db).len()
    }

    struct Ingest {
        chunks: usize,
        bytes: usize,
        intake: Counts,
        consume: Counts,
        deliveries: u64,
        consume_ms: f64,
        rss_peak_kib: Option<u64>,
        /// Rust heap peak of the consumer alone (see `consumer_heap_peak`).
        consumer_heap_peak: usize,
    }

    fn ingest(target_chunks: usize) -> Ingest {
        let w = World::with(bench_config());
        let c = counted(&w);
        let text = document(target_chunks as u64, target_chunks, PARAGRAPH_CHARS).join("\n\n");
        let bytes = text.len();
        let c0 = counts(&c);
        put(&c, "bench", text);
        let c1 = counts(&c);
        let rss_reset = reset_peak_rss();
        let t = Instant::now();
        let deliveries = deliver_all(&c);
        let consume_ms = t.elapsed().as_secs_f64() * 1e3;
        let rss_peak_kib = if rss_reset {
            proc_status_kib("VmHWM:")
        } else {
            None
        };
        let c2 = counts(&c);
        let chunks = live_chunks(&w);
        assert_eq!(
            w.index.vectors.borrow().len(),
            chunks,
            "the index holds the live vectors"
        );
        Ingest {
            chunks,
            bytes,
            intake: c1.since(c0),
            consume: c2.since(c1),
            deliveries,
            consume_ms,
            rss_peak_kib,
            consumer_heap_peak: consumer_heap_peak(target_chunks),
        }
    }

    /// An index that checks and counts what it is given and keeps nothing:
    /// in production the index is remote, so what it stores is not the
    /// Worker's memory.
    struct DiscardIndex {
        dimensions: usize,
    }

    impl VectorIndex for DiscardIndex {
        async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
            assert!(
                vectors.len() <= 1000 && vectors.iter().all(|v| v.values.len() == self.dimensions)
            );
            Ok(())
        }
        async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
            assert!(ids.len() <= 100);
            Ok(())
        }
        async fn query(
            &self,
            _: &[f32],
            _: usize,
            _: &str,
            _: &MetadataFilter,
        ) -> Result<Vec<VectorMatch>, PortError> {
            Ok(Vec::new())
        }
        async fn get_by_ids(&self, _: &[String]) -> Result<Vec<VectorRecord>, PortError> {
            Ok(Vec::new())
        }
    }

    /// The Rust heap's peak above its level before the consume step, for one
    /// document of `target_chunks` chunks, with the index discarding what it
    /// gets. It counts the text, chunks, IDs, hashes, the staged rows' JSON,
    /// one page of vectors and the rows read back from the ledger (as D1's
    /// results would be); not the ledger itself (SQLite allocates on its own).
    fn consumer_heap_peak(target_chunks: usize) -> usize {
        let cfg = bench_config();
        // The test kit's world for the ledger, the embedder, the queue and
        // the clock; its index stays unused (and empty).
        let w = World::with(cfg.clone());
        let index = DiscardIndex {
            dimensions: cfg.embedding_dimensions,
        };
        let p = Pipeline::new(cfg, &w.db, &index, &w.embedder, &w.queue, &w.clock);
        let text = document(target_chunks as u64, target_chunks, PARAGRAPH_CHARS).join("\n\n");
        let item = IntakeItem::Put(DocumentInput {
            doc_id: DocId::parse("bench").unwrap(),
            text,
            metadata: Default::default(),
            content_type: ContentType::Plain,
        });
        block_on(p.intake(&TenantId::default_tenant(), &[item]))
            .expect("intake accepts the document");
        let before = reset_heap_peak();
        // Delivered here, not by the test kit's drain, which would allocate
        // its list of outcomes inside the measurement.
        loop {
            let messages = w.queue.take_all();
            if messages.is_empty() {
                break;
            }
            for m in &messages {
                let outcome = block_on(p.consume(m));
                assert!(
                    matches!(
                        outcome,
                        ConsumeOutcome::Ack {
                            reason: "committed" | "checkpointed"
                        }
                    ),
                    "unexpected outcome {outcome:?}"
                );
            }
        }
        heap_peak() - before
    }

    fn pipeline_table(runs: &[Ingest]) {
        println!("### 2. One document through the real pipeline (SQLite ledger, in-memory index and queue)\n");
        println!("Consumer side (the queue invocations); intake is one HTTP invocation apart.\n");
        println!(
            "| chunks | text | intake D1 calls / stmts | invocations | D1 calls | D1 stmts | embed calls | upsert calls | delete calls | get calls | queue sends | subrequests | minimum | ratio | consume time |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            let n = r.chunks as u64;
            let min = n.div_ceil(100) + n.div_ceil(1000) + D1_FLOOR;
            let c = &r.consume;
            println!(
                "| {} | {:.2} MB | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.0} ms |",
                r.chunks,
                r.bytes as f64 / 1e6,
                r.intake.d1_calls,
                r.intake.d1_statements,
                r.deliveries,
                c.d1_calls,
                c.d1_statements,
                c.embed_calls,
                c.upsert_calls,
                c.delete_calls,
                c.get_calls,
                c.queue_sends,
                c.subrequests(),
                min,
                c.subrequests() as f64 / min as f64,
                r.consume_ms
            );
        }
        println!();
        println!("minimum = ⌈n/100⌉ embed calls + ⌈n/1000⌉ upserts + {D1_FLOOR} D1 calls (load, claim, text, stage, replace); subrequests = D1 calls + embed + upsert + delete + get calls + continuation messages of the consumer, over all its invocations (each within CONSUME_SUBREQUESTS_MAX = {}).\n", bench_config().consume_subrequests_max);
    }

    fn memory_table(runs: &[Ingest]) {
        println!("### 4. Memory while consuming one document\n");
        println!("| chunks | text | process peak RSS (VmHWM, reset before consume) | consumer's Rust heap peak (index discarded) |");
        println!("|---:|---:|---:|---:|");
        for r in runs {
            println!(
                "| {} | {:.2} MB | {} | {:.1} MiB |",
                r.chunks,
                r.bytes as f64 / 1e6,
                r.rss_peak_kib.map_or("n/a".to_string(), |k| format!(
                    "{:.1} MiB",
                    k as f64 / 1024.0
                )),
                mib(r.consumer_heap_peak)
            );
        }
        println!();
        println!("Peak RSS is the whole native process, with the in-memory SQLite ledger (text, parts, chunk rows) and the in-memory index (every vector) inside it; on the platform both are remote. The consumer's heap peak is measured in a second run whose index keeps nothing: the text, chunks, IDs, hashes, staged rows' JSON, one page of vectors and the rows read back from the ledger; the closest native stand-in for the Worker's own memory (128 MB per isolate).\n");
    }

    // ---------------------------------------------------------------- 3. an edit

    /// Document sizes (in chunks) of the edit table.
    const EDIT_SIZES: [usize; 4] = [200, 1_000, 10_000, 20_000];

    /// D1 calls of one edit's job that do not grow with the document (the
    /// staging is counted apart): load the job, claim it, read the
    /// generations to write, read the text, read the one page of rows to
    /// write, replace (one batch, which also records the usage and makes
    /// the intents).
    const EDIT_D1_FIXED: u64 = 6;
    /// D1 calls of the cleanup, when old vectors are removed: claim their
    /// intents, mark them done, record the cleanup's usage.
    const EDIT_D1_CLEANUP: u64 = 3;

    /// The fewest subrequests an edit can cost on the platform: what must
    /// reach the embedder and the index, and the D1 calls no design avoids.
    #[derive(Clone, Copy, Debug)]
    struct Minimum {
        embed: u64,
        upsert: u64,
        delete: u64,
        d1: u64,
    }

    impl Minimum {
        fn total(&self) -> u64 {
            self.embed + self.upsert + self.delete + self.d1
        }
    }

    /// The platform minimum of an edit that writes `added` vectors, removes
    /// `removed` and stages its rows in `staging_calls`: ⌈added / EMBED_BATCH_SIZE⌉
    /// embed calls, ⌈added / UPSERT_BATCH_SIZE⌉ upserts (1 here),
    /// ⌈removed / DELETE_BATCH_SIZE⌉ deletes, and D1 calls: `staging_calls`
    /// to stage the version's rows, plus [`EDIT_D1_FIXED`], plus
    /// [`EDIT_D1_CLEANUP`] if anything is removed.
    fn edit_minimum(cfg: &Config, added: u64, removed: u64, staging_calls: u64) -> Minimum {
        Minimum {
            embed: added.div_ceil(cfg.embed_batch_size as u64),
            upsert: added.div_ceil(cfg.upsert_batch_size as u64),
            delete: removed.div_ceil(cfg.delete_batch_size as u64),
            d1: staging_calls + EDIT_D1_FIXED + if removed > 0 { EDIT_D1_CLEANUP } else { 0 },
        }
    }

    /// Staging calls as the issue counts them: one per started MB of text.
    fn staging_calls_per_mb(bytes: usize) -> u64 {
        (bytes as u64).div_ceil(1_000_000)
    }

    /// The job's usage as `GET /v1/jobs/{id}` reports it.
    #[derive(Clone, Copy, Debug, Default)]
    struct JobUsage {
        invocations: u64,
        d1: u64,
        embed: u64,
        index: u64,
        queue: u64,
        embedded: u64,
        reused: u64,
        kept: u64,
    }

    impl JobUsage {
        fn subrequests(&self) -> u64 {
            self.d1 + self.embed + self.index + self.queue
        }
    }

    fn job_usage(c: &Counted<'_>, job_id: &str) -> JobUsage {
        let v = block_on(c.w.p().store.job_view(job_id))
            .expect("the job view reads")
            .expect("the job exists");
        JobUsage {
            invocations: u64::from(v.invocations),
            d1: v.subrequests_d1,
            embed: v.subrequests_embed,
            index: v.subrequests_index,
            queue: v.subrequests_queue,
            embedded: v.chunks_embedded,
            reused: v.chunks_reused,
            kept: v.chunks_kept,
        }
    }

    /// What cron did after the edit's job, run by run until quiescent.
    #[derive(Clone, Copy, Debug, Default)]
    struct Cron {
        runs: u64,
        delete_calls: u64,
        ids_deleted: u64,
        intents_retired: u64,
    }

    /// The ledger, counting the rows each kind of statement writes
    /// (SQLite's `total_changes`, triggers included) — to show where an
    /// edit's D1 rows written go.
    struct RowsBySql<'a> {
        db: &'a SqliteDb,
        rows: RefCell<RowsWritten>,
    }

    /// Rows written by the consumer, by statement.
    #[derive(Clone, Copy, Debug, Default)]
    struct RowsWritten {
        /// `CONSUME_STAGE_CHUNKS`: the chunk rows the version adds.
        staged: u64,
        /// `KEYWORD_STAGE` and `KEYWORD_STAGE_COUNT`: the new rows' keyword
        /// entries and their tenant's keyword totals.
        keyword: u64,
        /// `CONSUME_STAGE_CLOSE`: the old version's rows the new one does
        /// not hold, closed.
        closed: u64,
        /// Every other statement (jobs, usage, intents, chunks of removed
        /// vectors).
        other: u64,
    }

    impl RowsWritten {
        fn total(&self) -> u64 {
            self.staged + self.keyword + self.closed + self.other
        }
    }

    impl RowsBySql<'_> {
        fn add(&self, sql_text: &str, n: u64) {
            let mut r = self.rows.borrow_mut();
            let slot = if sql_text == sql::CONSUME_STAGE_CHUNKS {
                &mut r.staged
            } else if sql_text == sql::KEYWORD_STAGE || sql_text == sql::KEYWORD_STAGE_COUNT {
                &mut r.keyword
            } else if sql_text == sql::CONSUME_STAGE_CLOSE {
                &mut r.closed
            } else {
                &mut r.other
            };
            *slot += n;
        }
    }

    impl Database for RowsBySql<'_> {
        async fn query_billed<T: DeserializeOwned>(
            &self,
            stmt: Stmt,
        ) -> Result<(Vec<T>, Rows), PortError> {
            let (before, sql_text) = (self.db.total_changes(), stmt.sql);
            let out = self.db.query_billed(stmt).await;
            self.add(sql_text, self.db.total_changes() - before);
            out
        }
        async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
            let (before, sql_text) = (self.db.total_changes(), stmt.sql);
            let out = self.db.execute_billed(stmt).await;
            self.add(sql_text, self.db.total_changes() - before);
            out
        }
        async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
            // Statement by statement inside the one batch call (one
            // transaction, one subrequest, as before).
            let before = self.db.total_changes();
            let texts: Vec<&'static str> = stmts.iter().map(|s| s.sql).collect();
            let out = self.db.batch_billed(stmts).await;
            if let Ok((changes, _)) = &out {
                let mut counted = 0;
                for (t, &n) in texts.iter().zip(changes) {
                    // A RETURNING statement reports its rows returned.
                    if !t.contains("RETURNING") {
                        self.add(t, n);
                        counted += n;
                    }
                }
                self.add(
                    "",
                    (self.db.total_changes() - before).saturating_sub(counted),
                );
            }
            out
        }
    }

    /// [`deliver_all`] through the pipeline over `rows` (the world's ledger,
    /// wrapped) and `c`'s counted embedder and index.
    fn deliver_all_over(c: &Counted<'_>, rows: &RowsBySql<'_>) -> u64 {
        let p = Pipeline::new(
            c.w.cfg.clone(),
            rows,
            &c.index,
            &c.embedder,
            &c.w.queue,
            &c.w.clock,
        );
        let mut deliveries = 0;
        loop {
            let messages = c.w.queue.take_all();
            if messages.is_empty() {
                return deliveries;
            }
            for m in &messages {
                let outcome = block_on(p.consume(m));
                assert!(expected(&outcome), "unexpected outcome {outcome:?}");
                if let ConsumeOutcome::Retry { delay_seconds } = outcome {
                    c.w.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    c.w.queue.sent.borrow_mut().push_back(m.clone());
                }
                deliveries += 1;
            }
        }
    }

    struct Edit {
        chunks: usize,
        bytes: usize,
        /// Chunks of v2 whose text is not a chunk of v1.
        changed: usize,
        /// v2's live vectors that v1 did not have, and v1's that v2 has not.
        added: usize,
        removed: usize,
        /// v1 as a new document: the whole document embedded and written.
        v1: JobUsage,
        v1_counts: Counts,
        v1_rows: u64,
        intake: Counts,
        intake_rows: u64,
        /// v2's consumer: the counted ports, the ledger's rows written, the
        /// deliveries, and the job's own usage.
        consume: Counts,
        rows_written: u64,
        rows: RowsWritten,
        deliveries: u64,
        job: JobUsage,
        cron: Cron,
        /// D1's billing units, counted as D1 counts them
        /// (`native::rows`): v1's consumer, v2's intake, consumer and
        /// cron until quiet.
        billed: [Rows; 4],
    }

    /// Puts `text` as document `doc` through the counted ports; returns
    /// its job's ID.
    fn put_job(c: &Counted<'_>, doc: &str, text: String) -> String {
        let item = IntakeItem::Put(DocumentInput {
            doc_id: DocId::parse(doc).unwrap(),
            text,
            metadata: Default::default(),
            content_type: ContentType::Plain,
        });
        let outcomes = block_on(c.p().intake(&TenantId::default_tenant(), &[item]))
            .expect("intake accepts the document");
        queued(&outcomes[0]).1
    }

    /// Runs cron through the counted ports, a minute apart, until a run
    /// deletes and retires nothing and the index holds exactly the live
    /// vectors with no intent left; returns what the runs did.
    fn cron_until_quiet(c: &Counted<'_>) -> Cron {
        let mut cron = Cron::default();
        for _ in 0..100 {
            let (calls, ids) = (c.index.delete_calls.get(), c.index.ids_deleted.get());
            c.w.clock.advance_ms(60_000);
            let report = block_on(c.p().repair());
            cron.runs += 1;
            cron.delete_calls += c.index.delete_calls.get() - calls;
            cron.ids_deleted += c.index.ids_deleted.get() - ids;
            cron.intents_retired += report.intents_retired;
            let live: BTreeSet<String> = oracle::live_vector_ids(&c.w.db).into_iter().collect();
            let held: BTreeSet<String> = c.w.index.ids().into_iter().collect();
            let intents = oracle::count(&c.w.db, "SELECT count(*) AS n FROM cleanup_intents");
            if report.intents_deleted == 0
                && report.intents_retired == 0
                && intents == 0
                && live == held
            {
                return cron;
            }
        }
        panic!("cron did not bring the index to the live vectors in 100 runs");
    }

    /// v1 of about `target_chunks` chunks ingested and delivered, then v2
    /// (the middle paragraph replaced) put and delivered, then cron until
    /// quiescent; v2's intake, consumer and cron are counted apart.
    fn edit(target_chunks: usize) -> Edit {
        let cfg = bench_config();
        let mut paragraphs = document(7 + target_chunks as u64, target_chunks, PARAGRAPH_CHARS);
        let v1 = paragraphs.join("\n\n");
        let k = paragraphs.len() / 2;
        paragraphs[k] = document(99, 1, PARAGRAPH_CHARS).remove(0);
        let v2 = paragraphs.join("\n\n");
        let w = World::with(cfg);
        let changed = changed_chunks(&v1, &v2, &w);
        let c = counted(&w);

        let job1 = put_job(&c, "bench", v1);
        let (a, ra, ba) = (counts(&c), w.db.total_changes(), w.db.rows());
        deliver_all(&c);
        let (v1_counts, v1_rows) = (counts(&c).since(a), w.db.total_changes() - ra);
        let v1_billed = between(ba, w.db.rows());
        let v1_usage = job_usage(&c, &job1);
        cron_until_quiet(&c);
        let before: BTreeSet<String> = w.live_vector_ids().into_iter().collect();

        let bytes = v2.len();
        let (c0, r0, b0) = (counts(&c), w.db.total_changes(), w.db.rows());
        let job2 = put_job(&c, "bench", v2);
        let (c1, r1, b1) = (counts(&c), w.db.total_changes(), w.db.rows());
        let rows = RowsBySql {
            db: &w.db,
            rows: RefCell::default(),
        };
        let deliveries = deliver_all_over(&c, &rows);
        let (c2, r2, b2) = (counts(&c), w.db.total_changes(), w.db.rows());
        let rows = rows.rows.into_inner();
        assert_eq!(rows.total(), r2 - r1, "every row written is attributed");
        let job = job_usage(&c, &job2);
        let cron = cron_until_quiet(&c);
        let b3 = w.db.rows();

        let after: BTreeSet<String> = w.live_vector_ids().into_iter().collect();
        let held: BTreeSet<String> = w.index.ids().into_iter().collect();
        assert_eq!(held, after, "the index holds exactly the live vectors");
        Edit {
            chunks: after.len(),
            bytes,
            changed,
            added: after.difference(&before).count(),
            removed: before.difference(&after).count(),
            v1: v1_usage,
            v1_counts,
            v1_rows,
            intake: c1.since(c0),
            intake_rows: r1 - r0,
            consume: c2.since(c1),
            rows_written: r2 - r1,
            rows,
            deliveries,
            job,
            cron,
            billed: [v1_billed, between(b0, b1), between(b1, b2), between(b2, b3)],
        }
    }

    fn edit_table(runs: &[Edit]) {
        let cfg = bench_config();
        println!("### 3. An edit: one paragraph changed, v2 put and delivered after v1\n");
        println!("v2's job only (v1 ingested, delivered and cleaned up before; cron run after v2 until the index holds exactly the live vectors). Port calls as the counted embedder, index and ledger saw them; subrequests and invocations as the job's usage reports them (`GET /v1/jobs/{{id}}`).\n");
        println!("| chunks | text | changed chunks (vectors added / removed) | texts embedded (embed calls) | vectors written (upsert calls) | vectors deleted by the consumer (delete calls) | by cron (delete calls; cron runs) | getByIds calls | intake D1 calls / rows written | D1 calls | D1 stmts | D1 rows written | subrequests (d1 / embed / index / queue) | invocations | chunks kept / reused | minimum | ratio | minimum, staging as 1 call | ratio |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            let c = &r.consume;
            let j = &r.job;
            let (added, removed) = (r.added as u64, r.removed as u64);
            let issue = edit_minimum(&cfg, added, removed, staging_calls_per_mb(r.bytes));
            let strict = edit_minimum(&cfg, added, removed, 1);
            let measured = j.subrequests() + r.cron.delete_calls;
            println!(
                "| {} | {:.2} MB | {} ({} / {}) | {} ({}) | {} ({}) | {} ({}) | {} ({}; {}) | {} | {} / {} | {} | {} | {} | {} ({} / {} / {} / {}) | {} | {} / {} | {} | {:.2} | {} | {:.2} |",
                r.chunks,
                r.bytes as f64 / 1e6,
                r.changed,
                r.added,
                r.removed,
                c.texts_embedded,
                c.embed_calls,
                c.vectors_written,
                c.upsert_calls,
                c.ids_deleted,
                c.delete_calls,
                r.cron.ids_deleted,
                r.cron.delete_calls,
                r.cron.runs,
                c.get_calls,
                r.intake.d1_calls,
                r.intake_rows,
                c.d1_calls,
                c.d1_statements,
                r.rows_written,
                j.subrequests(),
                j.d1,
                j.embed,
                j.index,
                j.queue,
                j.invocations,
                j.kept,
                j.reused,
                issue.total(),
                measured as f64 / issue.total() as f64,
                strict.total(),
                measured as f64 / strict.total() as f64,
            );
            assert_eq!(j.invocations, r.deliveries, "one invocation per delivery");
            assert_eq!(
                j.embedded, c.texts_embedded,
                "the job counts what was embedded"
            );
        }
        println!();
        println!("minimum = ⌈added/{}⌉ embed calls + ⌈added/{}⌉ upserts + ⌈removed/{}⌉ deletes (added, removed: live vectors v2 has and v1 had not, and the reverse) + D1 calls: ⌈text bytes / 1 MB⌉ to stage v2's rows, + {EDIT_D1_FIXED} (load, claim, the generations to write, the text, the page of rows to write, the replace) + {EDIT_D1_CLEANUP} when something is removed (claim the intents, mark them done, record the cleanup's usage). The consumer stages in one D1 batch call (⌈JSON bytes / D1_JSON_PARAM_BYTES_MAX⌉ statements), so the second minimum counts staging as 1 call. measured = the job's subrequests + cron's delete calls. D1 rows written: SQLite's total_changes over v2's consumer (its triggers' rows, the keyword index's and FTS5's own, included); intake's apart. kept: chunks whose vector v1 wrote and v2 keeps (not embedded, not written, not deleted); reused: chunks whose vector values were copied from another ID (getByIds) instead of embedded.\n",
            cfg.embed_batch_size, cfg.upsert_batch_size, cfg.delete_batch_size);
        println!("For scale, v1 (a new document: every chunk embedded and written; what the edit would cost if no vector were kept, its cleanup of the old vectors not included):\n");
        println!("| chunks | texts embedded (embed calls) | vectors written (upsert calls) | D1 calls | D1 rows written | subrequests (d1 / embed / index / queue) | invocations |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            let (c, j) = (&r.v1_counts, &r.v1);
            println!(
                "| {} | {} ({}) | {} ({}) | {} | {} | {} ({} / {} / {} / {}) | {} |",
                r.chunks,
                c.texts_embedded,
                c.embed_calls,
                c.vectors_written,
                c.upsert_calls,
                c.d1_calls,
                r.v1_rows,
                j.subrequests(),
                j.d1,
                j.embed,
                j.index,
                j.queue,
                j.invocations
            );
        }
        println!();
        println!("What D1 bills, counted as D1 counts them (rows read / written: every table row and index entry, one per row handed to FTS5; `src/native/rows.rs`, whose reads are a lower bound: docs/performance.md, \"D1 rows\"):\n");
        println!("| chunks | v1's consumer | v2's intake | v2's consumer | cron after v2, until quiet | v2 in all: written | per chunk |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            let [v1, intake, consume, cron] = r.billed;
            let written = intake.written + consume.written + cron.written;
            println!(
                "| {} | {} / {} | {} / {} | {} / {} | {} / {} | {} | {:.1} |",
                r.chunks,
                v1.read,
                v1.written,
                intake.read,
                intake.written,
                consume.read,
                consume.written,
                cron.read,
                cron.written,
                written,
                written as f64 / r.chunks as f64
            );
        }
        println!();
        println!("Where v2's D1 rows written go (SQLite's total_changes per statement, triggers included):\n");
        println!("| chunks | staging: v2's new chunk rows | staging: their keyword entries and the tenant's totals | staging: v1's rows v2 lacks, closed | other | total | per chunk |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            let w = &r.rows;
            println!(
                "| {} | {} | {} | {} | {} | {} | {:.1} |",
                r.chunks,
                w.staged,
                w.keyword,
                w.closed,
                w.other,
                w.total(),
                w.total() as f64 / r.chunks as f64
            );
        }
        println!();
    }

    // ---------------------------------------------------------------- 3b. edits in D1's units and dollars

    /// List prices (Workers Paid, beyond what the plan includes), as found
    /// on Cloudflare's pricing pages on 2026-12-01
    /// (`../shared/reference/platform-limits.md`). The one place the bench
    /// keeps them.
    mod prices {
        pub const DATE: &str = "2026-12-01";
        /// D1: per row written, per row read.
        pub const D1_WRITE: f64 = 1.00 / 1e6;
        pub const D1_READ: f64 = 0.001 / 1e6;
        /// Workers AI: bge-m3's neurons per input token, and a neuron's price.
        pub const BGE_M3_NEURONS_PER_TOKEN: f64 = 1_075.0 / 1e6;
        pub const NEURON: f64 = 0.011 / 1_000.0;
        /// Vectorize: per stored dimension-month.
        pub const STORED_DIMENSION_MONTH: f64 = 0.05 / 1e8;
    }

    /// The kinds of edit measured.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum EditKind {
        /// The middle paragraph replaced.
        Middle,
        /// A paragraph inserted before the first.
        Top,
        /// The middle paragraph deleted.
        Delete,
    }

    impl EditKind {
        fn label(self) -> &'static str {
            match self {
                EditKind::Middle => "one paragraph replaced (middle)",
                EditKind::Top => "one paragraph inserted at the top",
                EditKind::Delete => "one paragraph deleted (middle)",
            }
        }

        /// `paragraphs` edited the `n`-th time (`n` picks the paragraph
        /// and the new text, so that ten edits touch ten places).
        fn apply(self, paragraphs: &mut Vec<String>, n: u64) {
            let at = (paragraphs.len() / 2 + 7 * n as usize) % paragraphs.len();
            let fresh = document(1_000 + n, 1, PARAGRAPH_CHARS).remove(0);
            match self {
                EditKind::Middle => paragraphs[at] = fresh,
                EditKind::Top => paragraphs.insert(0, fresh),
                EditKind::Delete => {
                    paragraphs.remove(at);
                }
            }
        }
    }

    /// What edits cost, summed over the edits measured: D1 rows (intake,
    /// consumer, cron until quiet), the tokens of the vectors they added
    /// (what was embedded, at most: a reused vector is copied), the live
    /// vectors added and removed, and the chunks of the last version.
    #[derive(Clone, Copy, Debug, Default)]
    struct EditCost {
        edits: u64,
        rows: Rows,
        tokens: u64,
        added: u64,
        removed: u64,
        chunks: u64,
        changed: u64,
        /// Tokens of every chunk of each edit's new version.
        all_tokens: u64,
    }

    /// The ledger's bytes in use (pages not free) and the live text's bytes.
    fn ledger_bytes(w: &World) -> (i64, i64) {
        let used = oracle::count(
            &w.db,
            "SELECT (p.page_count - f.freelist_count) * s.page_size AS n
             FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s",
        );
        let live = oracle::count(
            &w.db,
            "SELECT coalesce(sum(v.text_bytes), 0) AS n FROM documents d
             JOIN versions v ON v.doc_id = d.doc_id AND v.version = d.live_version",
        );
        (used, live)
    }

    /// The live chunks' texts by vector ID.
    fn live_texts(w: &World) -> std::collections::BTreeMap<String, String> {
        oracle::live_chunks(&w.db)
            .into_iter()
            .map(|c| (c.vector_id, c.text))
            .collect()
    }

    fn tokens(text: &str) -> u64 {
        ingest_pipeline::config::TokenFamily::SentencePiece.count(text) as u64
    }

    /// A document of about `target_chunks` chunks ingested (cron until
    /// quiet), then `edits` edits of `kind`, each put, delivered and
    /// followed by cron until quiet. Returns their summed cost and the
    /// ledger's bytes (in use, live text) before and after.
    fn edits_of(
        kind: EditKind,
        target_chunks: usize,
        edits: u64,
    ) -> (EditCost, [(i64, i64); 2], ByTable) {
        let cfg = bench_config();
        let mut paragraphs = document(7 + target_chunks as u64, target_chunks, PARAGRAPH_CHARS);
        let w = World::with(cfg);
        let c = counted(&w);
        put_job(&c, "bench", paragraphs.join("\n\n"));
        deliver_all(&c);
        cron_until_quiet(&c);
        let before = ledger_bytes(&w);
        let mut cost = EditCost::default();
        for n in 0..edits {
            let old = paragraphs.join("\n\n");
            kind.apply(&mut paragraphs, n);
            let new = paragraphs.join("\n\n");
            let was = live_texts(&w);
            let rows = w.db.rows();
            put_job(&c, "bench", new.clone());
            deliver_all(&c);
            cron_until_quiet(&c);
            let spent = between(rows, w.db.rows());
            let now = live_texts(&w);
            cost.edits += 1;
            cost.rows.read += spent.read;
            cost.rows.written += spent.written;
            cost.added += now.keys().filter(|id| !was.contains_key(*id)).count() as u64;
            cost.removed += was.keys().filter(|id| !now.contains_key(*id)).count() as u64;
            cost.tokens += now
                .iter()
                .filter(|(id, _)| !was.contains_key(*id))
                .map(|(_, t)| tokens(t))
                .sum::<u64>();
            cost.all_tokens += now.values().map(|t| tokens(t)).sum::<u64>();
            cost.chunks = now.len() as u64;
            cost.changed += changed_chunks(&old, &new, &w) as u64;
        }
        (cost, [before, ledger_bytes(&w)], bytes_by_table(&w))
    }

    /// Bytes in use by table or index, largest first.
    type ByTable = Vec<(String, i64)>;

    /// The ledger's bytes in use by table or index (SQLite's `dbstat`:
    /// pages), largest first; FTS5's shadow tables are summed as
    /// `chunks_fts*` (empty since migration 0021) and `keyword_index*`.
    fn bytes_by_table(w: &World) -> ByTable {
        let rows: Vec<serde_json::Value> = w.db.inspect(
            "SELECT CASE WHEN name LIKE 'chunks_fts%' THEN 'chunks_fts*'
                         WHEN name LIKE 'keyword_index%' THEN 'keyword_index*' ELSE name END AS name,
                    sum(pgsize) AS bytes
             FROM dbstat GROUP BY 1 ORDER BY bytes DESC",
            vec![],
        );
        rows.iter()
            .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["bytes"].as_i64()?)))
            .collect()
    }

    /// Dollars of `written` and `read` D1 rows, and of `tokens` embedded
    /// with bge-m3.
    fn dollars(written: u64, read: u64, tokens: u64) -> f64 {
        written as f64 * prices::D1_WRITE
            + read as f64 * prices::D1_READ
            + tokens as f64 * prices::BGE_M3_NEURONS_PER_TOKEN * prices::NEURON
    }

    fn edit_cost_table(sizes: &[usize]) {
        let dims = bench_config().embedding_dimensions as f64;
        let ten_max: usize = std::env::var("BENCH_TEN_EDITS_MAX")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000);
        println!("### 3b. What an edit costs, in the units the platform bills\n");
        println!("A document ingested and cleaned up, then the edit put, delivered and followed by cron until the index holds exactly the live vectors (every statement of intake, consumer and cron counted as D1 counts it: `src/native/rows.rs`). Per edit (ten edits: their mean). Dollars at list prices of {} (Workers Paid, beyond the included amounts): D1 $1.00 per million rows written and $0.001 per million read, bge-m3 1,075 neurons per million tokens at $0.011 per 1,000 neurons; tokens are the conservative bound of the vectors the edit added (`TokenFamily::SentencePiece`). Vectorize bills stored dimensions ($0.05 per 100 M per month): an edit changes them by (added − removed) × {} dimensions, shown as the month's dollars; it queries nothing.\n", prices::DATE, dims);
        let mut by_table: Vec<(usize, i64, ByTable)> = Vec::new();
        println!("| chunks | edit | changed chunks | vectors added / removed | D1 rows written | D1 rows read | tokens embedded | Δ stored dims | $ this pipeline | $ re-embed every chunk | $ record manager (LangChain `index()`) | ledger bytes per live text byte (before → after) | ledger bytes after / before |");
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for &n in sizes {
            let mut kinds: Vec<(EditKind, u64)> = vec![
                (EditKind::Middle, 1),
                (EditKind::Top, 1),
                (EditKind::Delete, 1),
            ];
            if n <= ten_max {
                kinds.push((EditKind::Middle, 10));
            }
            for (kind, edits) in kinds {
                let (c, [before, after], tables) = edits_of(kind, n, edits);
                if edits > 1 {
                    by_table.push((n, after.1, tables));
                }
                let e = c.edits as f64;
                let per = |x: u64| x as f64 / e;
                let stored = (c.added as f64 - c.removed as f64) / e * dims;
                let ours = dollars(c.rows.written, c.rows.read, c.tokens) / e
                    + stored * prices::STORED_DIMENSION_MONTH;
                // Re-embedding every chunk: every token of the new version,
                // and one D1 row written per chunk (its record), nothing read.
                let reembed = dollars(c.chunks * c.edits, 0, c.all_tokens) / e;
                // A record manager: only new content embedded, one row
                // written per chunk per run (its record, index entries not
                // counted: a lower bound) and one per record deleted.
                let record_manager = dollars(c.chunks * c.edits + c.removed, 0, c.tokens) / e;
                let label = if edits == 1 {
                    kind.label().to_string()
                } else {
                    format!("{edits} edits in a row, each {}", kind.label())
                };
                println!(
                    "| {} | {} | {:.1} | {:.1} / {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | ${:.6} | ${:.6} | ${:.6} | {:.2} → {:.2} | {:.2} |",
                    c.chunks,
                    label,
                    per(c.changed),
                    per(c.added),
                    per(c.removed),
                    per(c.rows.written),
                    per(c.rows.read),
                    per(c.tokens),
                    stored,
                    ours,
                    reembed,
                    record_manager,
                    before.0 as f64 / before.1 as f64,
                    after.0 as f64 / after.1 as f64,
                    after.0 as f64 / before.0 as f64,
                );
            }
        }
        println!();
        println!("re-embed every chunk = every chunk of the new version embedded (its tokens) + one D1 row written per chunk; record manager = what changed embedded + one D1 row written per chunk per run and one per record deleted (LangChain's `index()` upserts a record per chunk on every run; its index entries are left out, so both comparisons are lower bounds). Ledger bytes: the native SQLite ledger's pages in use (D1 stores the same file format), over the live versions' text bytes; ten edits at sizes up to BENCH_TEN_EDITS_MAX ({ten_max}) chunks.\n");
        for (n, live, tables) in by_table {
            println!("Where the ledger's bytes are after the ten edits ({n} chunks; SQLite's `dbstat`, pages in use; live text {live} bytes):\n");
            println!("| table or index | bytes | per live text byte |");
            println!("|---|---:|---:|");
            for (name, bytes) in tables.iter().filter(|(_, b)| *b > 8192) {
                println!(
                    "| `{name}` | {bytes} | {:.2} |",
                    *bytes as f64 / live as f64
                );
            }
            println!();
        }
    }

    // ---------------------------------------------------------------- shards: capacity

    /// A shard's ledger that forwards every call and adds up the wall time
    /// spent inside it (the statements, and turning their rows into
    /// values) and the calls: natively, what that shard's D1 database
    /// would serialize.
    struct Timed<'a> {
        db: &'a SqliteDb,
        spent: Cell<Duration>,
        calls: Cell<u64>,
    }

    impl<'a> Timed<'a> {
        fn new(db: &'a SqliteDb) -> Self {
            Timed {
                db,
                spent: Cell::new(Duration::ZERO),
                calls: Cell::new(0),
            }
        }

        /// Adds one call that started at `start`; returns its result.
        fn add<T>(&self, start: Instant, out: T) -> T {
            self.spent.set(self.spent.get() + start.elapsed());
            self.calls.set(self.calls.get() + 1);
            out
        }

        /// Statement time and calls so far.
        fn now(&self) -> Spent {
            Spent {
                time: self.spent.get(),
                calls: self.calls.get(),
            }
        }
    }

    impl Database for Timed<'_> {
        async fn query_billed<T: DeserializeOwned>(
            &self,
            stmt: Stmt,
        ) -> Result<(Vec<T>, Rows), PortError> {
            let start = Instant::now();
            let out = self.db.query_billed(stmt).await;
            self.add(start, out)
        }
        async fn execute_billed(&self, stmt: Stmt) -> Result<(u64, Rows), PortError> {
            let start = Instant::now();
            let out = self.db.execute_billed(stmt).await;
            self.add(start, out)
        }
        async fn batch_billed(&self, stmts: Vec<Stmt>) -> Result<(Vec<u64>, Rows), PortError> {
            let start = Instant::now();
            let out = self.db.batch_billed(stmts).await;
            self.add(start, out)
        }
        async fn size_after(&self, probe: Stmt) -> Result<u64, PortError> {
            let start = Instant::now();
            let out = self.db.size_after(probe).await;
            self.add(start, out)
        }
    }

    /// Statement time and calls of one shard's ledger.
    #[derive(Clone, Copy, Debug, Default)]
    struct Spent {
        time: Duration,
        calls: u64,
    }

    impl Spent {
        fn since(self, before: Spent) -> Spent {
            Spent {
                time: self.time - before.time,
                calls: self.calls - before.calls,
            }
        }
    }

    /// Every shard's [`Spent`] so far, shard 0 first.
    fn spent(ledgers: &[Timed<'_>]) -> Vec<Spent> {
        ledgers.iter().map(Timed::now).collect()
    }

    fn spent_since(after: &[Spent], before: &[Spent]) -> Vec<Spent> {
        after.iter().zip(before).map(|(a, b)| a.since(*b)).collect()
    }

    /// The deployment over a [`Cluster`]'s ports with each ledger timed.
    type TimedFleet<'a> = Fleet<
        &'a Timed<'a>,
        &'a MemIndex,
        &'a LocalEmbedder,
        ShardQueue<&'a MemQueue>,
        &'a ManualClock,
    >;

    /// Every shard's pipeline as `Cluster::fleet` builds them (with the
    /// cluster's directory cache, as the Worker keeps one per isolate),
    /// over the timed ledgers.
    fn timed_fleet<'a>(c: &'a Cluster, ledgers: &'a [Timed<'a>]) -> TimedFleet<'a> {
        c.fleet_over(ledgers.iter().collect())
    }

    /// One JSON request through the API, with bearer token `auth`.
    fn shard_request(
        fleet: &TimedFleet<'_>,
        method: &str,
        path: &str,
        auth: &str,
        body: &serde_json::Value,
        entropy: [u8; 32],
    ) -> ApiResponse {
        let secrets = Secrets {
            ingest_token: Some(TEST_INGEST_TOKEN.into()),
            admin_token: Some(TEST_ADMIN_TOKEN.into()),
        };
        let bytes = body.to_string();
        let req = ApiRequest {
            method,
            path,
            authorization: Some(&format!("Bearer {auth}")),
            content_type: Some("application/json"),
            body: bytes.as_bytes(),
            entropy,
        };
        block_on(api::handle(fleet, &secrets, req))
    }

    /// Delivers every queued message to the pipeline of the shard it names
    /// until the queue is empty (a retried one again after its delay);
    /// returns the deliveries.
    fn deliver_to_shards(c: &Cluster, fleet: &TimedFleet<'_>) -> u64 {
        let mut deliveries = 0;
        for _ in 0..1000 {
            let batch = c.queue.take_all();
            if batch.is_empty() {
                return deliveries;
            }
            for m in batch {
                let outcome = block_on(fleet.all()[usize::from(m.shard)].consume(&m));
                assert!(expected(&outcome), "unexpected outcome {outcome:?}");
                if let ConsumeOutcome::Retry { delay_seconds } = outcome {
                    c.clock.advance_ms(i64::from(delay_seconds) * 1000);
                    c.queue.sent.borrow_mut().push_back(m.clone());
                }
                deliveries += 1;
            }
        }
        panic!("the queue did not drain");
    }

    /// Japanese words for the workload's Japanese documents and queries.
    const JAPANESE_WORDS: [&str; 40] = [
        "港湾",
        "台帳",
        "検索",
        "文書",
        "東京",
        "大阪",
        "天気",
        "会議",
        "報告",
        "予算",
        "開発",
        "品質",
        "顧客",
        "契約",
        "配送",
        "倉庫",
        "在庫",
        "注文",
        "請求",
        "支払い",
        "確認",
        "変更",
        "担当者",
        "計画",
        "資料",
        "会社",
        "市場",
        "製品",
        "技術",
        "研究",
        "学校",
        "図書館",
        "電車",
        "駅",
        "料理",
        "季節",
        "春",
        "桜",
        "山",
        "川",
    ];
    const JAPANESE_PARTICLES: [&str; 7] = ["の", "は", "を", "に", "と", "で", "が"];

    /// A Japanese paragraph of at most `bytes` bytes: sentences of 4–8
    /// words joined by particles.
    fn japanese_paragraph(rng: &mut Rng, bytes: usize) -> String {
        let mut p = String::with_capacity(bytes);
        loop {
            let words = 4 + rng.below(5);
            let mut sentence = String::new();
            for w in 0..words {
                if w > 0 {
                    sentence.push_str(JAPANESE_PARTICLES[rng.below(7) as usize]);
                }
                sentence.push_str(JAPANESE_WORDS[rng.below(40) as usize]);
            }
            sentence.push_str(if rng.below(2) == 0 {
                "です。"
            } else {
                "ました。"
            });
            if p.len() + sentence.len() > bytes {
                return p;
            }
            p.push_str(&sentence);
        }
    }

    /// One tenant's share of the workload.
    struct TenantWork {
        tenant: String,
        /// Document ID and text.
        documents: Vec<(String, String)>,
        queries: Vec<String>,
    }

    /// Paragraphs of each workload document.
    const SHARD_DOC_PARAGRAPHS: usize = 3;

    /// `tenants` tenants, each with `docs` documents of
    /// [`SHARD_DOC_PARAGRAPHS`] paragraphs (every fourth one Japanese) and
    /// `searches` queries of two words from its own documents. From fixed
    /// seeds: the same whatever the shards.
    fn shard_workload(tenants: usize, docs: usize, searches: usize) -> Vec<TenantWork> {
        (0..tenants)
            .map(|i| {
                let mut rng = Rng::new(5_000 + i as u64);
                let vocab = vocabulary(&mut rng);
                let documents: Vec<(String, String)> = (0..docs)
                    .map(|j| {
                        let paragraphs: Vec<String> = (0..SHARD_DOC_PARAGRAPHS)
                            .map(|_| {
                                if j % 4 == 3 {
                                    japanese_paragraph(&mut rng, PARAGRAPH_CHARS)
                                } else {
                                    paragraph(&mut rng, &vocab, PARAGRAPH_CHARS)
                                }
                            })
                            .collect();
                        (format!("doc-{j}"), paragraphs.join("\n\n"))
                    })
                    .collect();
                let queries = (0..searches)
                    .map(|_| {
                        let j = rng.below(docs as u64) as usize;
                        if j % 4 == 3 {
                            let w = |rng: &mut Rng| JAPANESE_WORDS[rng.below(40) as usize];
                            format!("{}の{}", w(&mut rng), w(&mut rng))
                        } else {
                            let words: Vec<&str> = documents[j]
                                .1
                                .split_whitespace()
                                .map(|w| w.trim_end_matches('.'))
                                .collect();
                            let k = rng.below(words.len() as u64 - 1) as usize;
                            format!("{} {}", words[k], words[k + 1])
                        }
                    })
                    .collect();
                TenantWork {
                    tenant: format!("bench-{i}"),
                    documents,
                    queries,
                }
            })
            .collect()
    }

    /// What one deployment of `shards` shards spent on the workload.
    struct ShardRun {
        shards: u16,
        documents: usize,
        chunks: usize,
        /// Tenants placed on each shard.
        tenants: Vec<usize>,
        /// Each shard's statements over the puts and their deliveries.
        ingest: Vec<Spent>,
        /// Each shard's statements over the searches.
        search: Vec<Spent>,
        /// Per search, the statement time of the shard that spent most on it.
        search_busiest: Vec<Duration>,
    }

    /// Bytes of entropy for minting tenant `i`'s token.
    fn token_entropy(i: usize) -> [u8; 32] {
        let mut rng = Rng::new(9_000 + i as u64);
        std::array::from_fn(|_| rng.below(256) as u8)
    }

    /// A token of `tenant` with the ingest and search scopes, minted
    /// through the admin API (its ID and secret from `token_entropy(i)`).
    fn mint_token(fleet: &TimedFleet<'_>, tenant: &str, i: usize) -> String {
        let path = format!("/v1/admin/tenants/{tenant}/tokens");
        let body = serde_json::json!({ "scopes": ["ingest", "search"] });
        let r = shard_request(
            fleet,
            "POST",
            &path,
            TEST_ADMIN_TOKEN,
            &body,
            token_entropy(i),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.body["token"].as_str().expect("a token").to_string()
    }

    /// The workload on `shards` shards: tenants pinned round-robin and a
    /// token each (not timed); then every document put and delivered until
    /// indexed (timed), then every query (timed, one search at a time).
    fn shard_run(shards: u16, work: &[TenantWork]) -> ShardRun {
        let cluster = Cluster::with(Config {
            shards,
            ..bench_config()
        });
        let ledgers: Vec<Timed<'_>> = cluster.shards.iter().map(|s| Timed::new(&s.db)).collect();
        let fleet = timed_fleet(&cluster, &ledgers);
        let mut tenants = vec![0; usize::from(shards)];
        let mut tokens = Vec::with_capacity(work.len());
        for (i, t) in work.iter().enumerate() {
            let shard = i % usize::from(shards);
            let body = serde_json::json!({ "tenant_id": t.tenant, "shard": shard });
            let r = shard_request(
                &fleet,
                "POST",
                "/v1/admin/tenants",
                TEST_ADMIN_TOKEN,
                &body,
                [0; 32],
            );
            assert_eq!(
                (r.status, r.body["shard"].as_u64()),
                (201, Some(shard as u64)),
                "{}",
                r.body
            );
            tenants[shard] += 1;
            tokens.push(mint_token(&fleet, &t.tenant, i));
        }

        let before = spent(&ledgers);
        for (t, token) in work.iter().zip(&tokens) {
            for (doc, text) in &t.documents {
                let body = serde_json::json!({ "text": text });
                let path = format!("/v1/documents/{doc}");
                let r = shard_request(&fleet, "PUT", &path, token, &body, [0; 32]);
                assert_eq!(r.status, 202, "{}", r.body);
            }
        }
        deliver_to_shards(&cluster, &fleet);
        let indexed = spent(&ledgers);
        let ingest = spent_since(&indexed, &before);

        let mut search_busiest = Vec::new();
        for (t, token) in work.iter().zip(&tokens) {
            for q in &t.queries {
                let body = serde_json::json!({ "query": q, "top_k": 10 });
                let s0 = spent(&ledgers);
                let r = shard_request(&fleet, "POST", "/v1/search", token, &body, [0; 32]);
                let per_shard = spent_since(&spent(&ledgers), &s0);
                assert_eq!(r.status, 200, "{}", r.body);
                assert!(
                    r.body["results"].as_array().is_some_and(|h| !h.is_empty()),
                    "no results for {q:?}: {}",
                    r.body
                );
                search_busiest.push(per_shard.iter().map(|s| s.time).max().unwrap_or_default());
            }
        }
        let search = spent_since(&spent(&ledgers), &indexed);

        // Every document indexed (not timed).
        let documents: usize = work.iter().map(|t| t.documents.len()).sum();
        let indexed_docs: i64 = cluster
            .shards
            .iter()
            .map(|s| {
                oracle::count(
                    &s.db,
                    "SELECT count(*) AS n FROM documents WHERE live_version = latest_version",
                )
            })
            .sum();
        assert_eq!(indexed_docs, documents as i64, "every document is indexed");
        let chunks = cluster
            .shards
            .iter()
            .map(|s| oracle::live_vector_ids(&s.db).len())
            .sum();
        ShardRun {
            shards,
            documents,
            chunks,
            tenants,
            ingest,
            search,
            search_busiest,
        }
    }

    /// The `p`-th percentile (nearest rank) of `xs`, in ms.
    fn percentile_ms(xs: &[Duration], p: f64) -> f64 {
        let mut sorted = xs.to_vec();
        sorted.sort();
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    fn env_usize(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: a number")))
            .unwrap_or(default)
    }

    fn shards_table() {
        let tenants = env_usize("BENCH_SHARD_TENANTS", 8);
        let docs = env_usize("BENCH_SHARD_DOCS", 50);
        let searches = env_usize("BENCH_SHARD_SEARCHES", 20);
        let work = shard_workload(tenants, docs, searches);
        let runs: Vec<ShardRun> = [1, 2, 4].into_iter().map(|n| shard_run(n, &work)).collect();
        let chunks = runs.first().map_or(0, |r| r.chunks);
        println!("### Shards: capacity\n");
        println!("The same workload on 1, 2 and 4 native shards (each its own SQLite ledger and in-memory index; one queue, one clock): {tenants} tenants, tenant i pinned to shard i mod N (`POST /v1/admin/tenants`) with one token each (not timed); then each tenant puts {docs} documents of {SHARD_DOC_PARAGRAPHS} paragraphs (every fourth in Japanese; {} documents, {chunks} chunks), all delivered until indexed; then {searches} searches per tenant (two words from its documents, top 10), one at a time, through the API. A shard's statement time is the wall time spent inside its ledger's calls (`query_billed`, `execute_billed`, `batch_billed`, `size_after`: the statements and their rows turned into values), timed by a wrapper around each shard's ledger.\n", tenants * docs);
        println!("| shards | documents | busiest shard's statement time, puts + deliveries until indexed (ms) | statement time summed over shards, puts + deliveries until indexed (ms) | documents a second to indexed, bounded by the busiest shard | busiest shard's statement time per search, p50 (ms) | busiest shard's statement time per search, p95 (ms) |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for r in &runs {
            let busiest = r.ingest.iter().map(|s| s.time).max().unwrap_or_default();
            let sum: Duration = r.ingest.iter().map(|s| s.time).sum();
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.0} | {:.3} | {:.3} |",
                r.shards,
                r.documents,
                ms(busiest),
                ms(sum),
                r.documents as f64 / busiest.as_secs_f64(),
                percentile_ms(&r.search_busiest, 0.50),
                percentile_ms(&r.search_busiest, 0.95),
            );
        }
        println!();
        println!("Native SQLite in one process runs the shards one after another, so these figures are each shard's own statement time, which is what one D1 database serializes (D1 runs one query at a time per database); the documents a second are the documents over the busiest shard's seconds, not a wall-clock rate of this process. The embedder's, the index's and the queue's time is not counted (they are not D1). Per search: the statement time of the shard that spent longest on that search (with several shards a search reaches two: shard 0, whose directory names the token's tenant, and the tenant's shard), p50 and p95 over the {} searches.\n", tenants * searches);
        println!("Per shard:\n");
        println!("| shards | shard | tenants placed | puts + deliveries: D1 calls | puts + deliveries: statement time (ms) | searches: D1 calls | searches: statement time (ms) |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for r in &runs {
            for (n, ((t, i), s)) in r.tenants.iter().zip(&r.ingest).zip(&r.search).enumerate() {
                println!(
                    "| {} | {} | {} | {} | {:.1} | {} | {:.1} |",
                    r.shards,
                    n,
                    t,
                    i.calls,
                    ms(i.time),
                    s.calls,
                    ms(s.time)
                );
            }
        }
        println!();
        println!("Sizes: BENCH_SHARD_TENANTS ({tenants}), BENCH_SHARD_DOCS ({docs} per tenant), BENCH_SHARD_SEARCHES ({searches} per tenant).\n");
    }

    /// Where the moved tenant's move stands, read untimed from shard 0.
    fn move_state(c: &Cluster) -> (String, u64, u64, u64) {
        #[derive(serde::Deserialize)]
        struct M {
            state: String,
            copied: u64,
            vectors: u64,
            removed: u64,
        }
        let rows: Vec<M> = c.shards[0].db.inspect(
            "SELECT state, copied, vectors, removed FROM tenant_moves",
            vec![],
        );
        let m = rows.into_iter().next().expect("a move");
        (m.state, m.copied, m.vectors, m.removed)
    }

    /// What one phase of a move spent: scheduled runs, each shard's
    /// statement time, D1 calls and rows, the index's writes.
    struct MovePhase {
        runs: u64,
        spent: Vec<Spent>,
        rows: Vec<Rows>,
        upserts: u64,
        deletes: u64,
        wall: Duration,
    }

    /// Scheduled runs of the moves' share (what `advance_moves` does in
    /// the Worker's cron) a minute apart, until the move is in `until`.
    fn move_phase(
        c: &Cluster,
        fleet: &TimedFleet<'_>,
        ledgers: &[Timed<'_>],
        until: &str,
    ) -> MovePhase {
        let spent0 = spent(ledgers);
        let rows0: Vec<Rows> = c.shards.iter().map(|s| s.db.rows()).collect();
        let (up0, del0) = (
            c.shards[1].index.upsert_calls.get(),
            c.shards[0].index.delete_calls.get(),
        );
        let started = Instant::now();
        let mut runs = 0;
        while move_state(c).0 != until {
            assert!(runs < 100_000, "the move never reached {until}");
            c.clock.advance_ms(60_000);
            let report = block_on(advance_moves(fleet));
            assert!(report.failures.is_empty(), "{report:?}");
            runs += 1;
        }
        MovePhase {
            runs,
            wall: started.elapsed(),
            spent: spent_since(&spent(ledgers), &spent0),
            rows: c
                .shards
                .iter()
                .zip(&rows0)
                .map(|(s, r0)| between(*r0, s.db.rows()))
                .collect(),
            upserts: c.shards[1].index.upsert_calls.get() - up0,
            deletes: c.shards[0].index.delete_calls.get() - del0,
        }
    }

    /// A tenant of `BENCH_MOVE_DOCS` documents moved from shard 0 to shard
    /// 1 of two, through its scheduled runs: the copy, fence, catch-up and
    /// switch, then (past the cleanup delay) the cleanup of shard 0.
    fn move_table() {
        let docs = env_usize("BENCH_MOVE_DOCS", 10_000);
        let cluster = Cluster::with(Config {
            shards: 2,
            ..bench_config()
        });
        let ledgers: Vec<Timed<'_>> = cluster.shards.iter().map(|s| Timed::new(&s.db)).collect();
        let fleet = timed_fleet(&cluster, &ledgers);
        let work = shard_workload(1, docs, 0).remove(0);
        // Its own quotas: the bench puts every document at once.
        let quotas = serde_json::json!({ "documents_max": 1_000_000_000u64, "bytes_max": 1_000_000_000_000u64, "requests_per_minute_max": 1_000_000_000u64 });
        let body = serde_json::json!({ "tenant_id": work.tenant, "shard": 0, "quotas": quotas });
        let r = shard_request(
            &fleet,
            "POST",
            "/v1/admin/tenants",
            TEST_ADMIN_TOKEN,
            &body,
            [0; 32],
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let token = mint_token(&fleet, &work.tenant, 0);
        for (doc, text) in &work.documents {
            let body = serde_json::json!({ "text": text });
            let r = shard_request(
                &fleet,
                "PUT",
                &format!("/v1/documents/{doc}"),
                &token,
                &body,
                [0; 32],
            );
            assert_eq!(r.status, 202, "{}", r.body);
        }
        deliver_to_shards(&cluster, &fleet);
        let chunks = oracle::live_vector_ids(&cluster.shards[0].db).len();
        let path = format!("/v1/admin/tenants/{}/move", work.tenant);
        let r = shard_request(
            &fleet,
            "POST",
            &path,
            TEST_ADMIN_TOKEN,
            &serde_json::json!({ "shard": 1 }),
            [7; 32],
        );
        assert_eq!(r.status, 202, "{}", r.body);
        let copy = move_phase(&cluster, &fleet, &ledgers, "switched");
        let (_, copied, vectors, _) = move_state(&cluster);
        cluster
            .clock
            .advance_ms(cluster.cfg.move_cleanup_delay_ms());
        let clean = move_phase(&cluster, &fleet, &ledgers, "completed");
        let (_, _, _, removed) = move_state(&cluster);
        assert_eq!((copied, removed), (docs as u64, docs as u64));
        let cfg = &cluster.cfg;
        println!("### Shards: moving a tenant\n");
        println!("One tenant of {docs} documents ({SHARD_DOC_PARAGRAPHS} paragraphs each, every fourth in Japanese; {chunks} chunks), indexed on shard 0 of two native shards, moved to shard 1 (`POST /v1/admin/tenants/{{id}}/move`) by the moves' share of scheduled runs a minute apart (`advance_moves`: CRON_SUBREQUESTS_MAX {} over {} shares, MOVE_PAGE_DOCUMENTS {}, MOVE_MARKS_PAGE {}); the other steps of cron are not run. Statement time as in \"Shards: capacity\"; D1 rows as the ledger counts them (as D1 bills them); wall time is this process's, embedder and index fakes included. Nothing is embedded: {vectors} vectors were read by ID and upserted.\n", cfg.cron_subrequests_max, cfg.cron_shares(), cfg.move_page_documents, cfg.move_marks_page);
        println!("| phase | scheduled runs | wall (ms) | statement time, shard 0 (ms) | statement time, shard 1 (ms) | D1 calls, shard 0 / 1 | D1 rows read, both shards | D1 rows written, shard 0 / 1 | index upserts (shard 1) | index deletes (shard 0) |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (name, p) in [
            ("copy, fence, catch-up, switch", &copy),
            ("cleanup of shard 0", &clean),
        ] {
            // Rows read are counted per process (SQLite's trace callback
            // has no connection), rows written per ledger.
            println!(
                "| {name} | {} | {:.0} | {:.1} | {:.1} | {} / {} | {} | {} / {} | {} | {} |",
                p.runs,
                ms(p.wall),
                ms(p.spent[0].time),
                ms(p.spent[1].time),
                p.spent[0].calls,
                p.spent[1].calls,
                p.rows[0].read,
                p.rows[0].written,
                p.rows[1].written,
                p.upserts,
                p.deletes,
            );
        }
        println!();
        println!("Scheduled runs are the figure that sets how long a move takes in production (one a minute at the default cron): each copies as many pages as its share of subrequests allows. The tenant's writes are refused only from the fence to the switch, which happen in the same run (the catch-up reads every document's mark, MOVE_MARKS_PAGE at a time, and copies what changed). Size: BENCH_MOVE_DOCS ({docs}).\n");
    }

    pub fn main() {
        // `BENCH_ONLY=moves`: the move of a tenant alone.
        if std::env::var("BENCH_ONLY").as_deref() == Ok("moves") {
            move_table();
            return;
        }
        let sizes: Vec<usize> = match std::env::var("BENCH_SIZES") {
            Ok(s) => s
                .split(',')
                .map(|x| {
                    x.trim()
                        .parse()
                        .expect("BENCH_SIZES: comma-separated numbers")
                })
                .collect(),
            Err(_) => vec![10, 100, 1_000, 10_000, 20_000],
        };
        println!(
            "ingest-pipeline bench (native, profile `{}`)\n",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "optimized"
            }
        );
        let cfg = bench_config();
        println!(
            "config: CHUNK_SIZE_MAX_TOKENS={} CHUNK_OVERLAP_TOKENS={} EMBEDDING_DIMENSIONS={} EMBED_BATCH_SIZE={} UPSERT_BATCH_SIZE={} DELETE_BATCH_SIZE={} D1_JSON_PARAM_BYTES_MAX={} D1_TEXT_PART_BYTES_MAX={} TEXT_PART_BYTES_TARGET={} CONSUME_SUBREQUESTS_MAX={}\n",
            cfg.chunk_size_max_tokens,
            cfg.chunk_overlap_tokens,
            cfg.embedding_dimensions,
            cfg.embed_batch_size,
            cfg.upsert_batch_size,
            cfg.delete_batch_size,
            cfg.d1_json_param_bytes_max,
            cfg.d1_text_part_bytes_max,
            cfg.text_part_bytes_target,
            cfg.consume_subrequests_max
        );
        core_throughput();
        // Smallest first, so the largest document's ingest sets the peaks last.
        let runs: Vec<Ingest> = sizes.iter().map(|&n| ingest(n)).collect();
        pipeline_table(&runs);
        // The edits: 200 chunks, and each larger size up to the largest asked.
        let largest = sizes.iter().copied().max().unwrap_or(200);
        let edits: Vec<Edit> = EDIT_SIZES
            .into_iter()
            .filter(|&n| n == 200 || n <= largest)
            .map(edit)
            .collect();
        edit_table(&edits);
        let cost_sizes: Vec<usize> = EDIT_SIZES
            .into_iter()
            .filter(|&n| n == 200 || n <= largest)
            .collect();
        edit_cost_table(&cost_sizes);
        memory_table(&runs);
        shards_table();
        move_table();
    }
}
