//! `make bench` (chunker section): three chunkers side by side on the same
//! documents, measured, not asserted (`docs/performance.md`).
//!
//! - `greedy-v1` at its old defaults (1,000 characters, 100 overlap): the
//!   chunker before `unicode-v2`;
//! - `unicode-v2` at the new defaults (500 tokens, 50 overlap, WordPiece
//!   bound): this project's chunker;
//! - the `text-splitter` crate (0.33.1), sized by the same token bound with
//!   the same limits: the library considered instead.
//!
//! For each: chunking throughput on English and Japanese text; the chunks'
//! real size in bert-base-uncased WordPiece tokens (the tokenizer of
//! bge-*-en-v1.5, which takes 512 with 2 special) and how many exceed 510,
//! i.e. lose their end when embedded; and retrieval quality: every sampled
//! sentence (and a phrase from its middle) is a query whose relevant chunks
//! are those containing it whole; chunks are embedded as the model would
//! see them (cut at 510 real tokens) by the offline embedder, and ranked by
//! cosine. hit@1, hit@5 and MRR per language and query kind.
//!
//! Documents: English, the licenses in /usr/share/common-licenses (GPL-3,
//! Apache-2.0, MPL-2.0); Japanese, the project's two seed documents and,
//! where the Rust toolchain's docs are installed, Rust by Example's
//! Japanese pages (text only).
//!
//! Run: `cargo run --profile sim --features text-splitter --example chunkers`
//! (needs `scripts/fetch-test-data.sh` for the tokenizer).

use ingest_pipeline::core::chunk::text_splitter;
use ingest_pipeline::core::chunk::tokens::TokenFamily;
use ingest_pipeline::core::chunk::{unicode_v2, Chunk, Chunker, ContentType};
use ingest_pipeline::core::local_embed::{cosine, embed};
use std::path::{Path, PathBuf};
use std::time::Instant;

const MODEL_TOKENS: usize = 510;
const DIMS: usize = 384;

#[derive(Clone, Copy)]
enum Which {
    Greedy,
    Unicode,
    TextSplitter,
}

impl Which {
    const ALL: [Which; 3] = [Which::Greedy, Which::Unicode, Which::TextSplitter];

    fn label(self) -> &'static str {
        match self {
            Which::Greedy => "greedy-v1 (before), 1,000/100 chars",
            Which::Unicode => "unicode-v2 (after), 500/50 tokens",
            Which::TextSplitter => "text-splitter 0.33.1, 500/50 tokens",
        }
    }

    fn chunk(self, text: &str) -> Vec<Chunk<'_>> {
        let family = TokenFamily::WordPiece;
        match self {
            Which::Greedy => Chunker::Greedy {
                size_max_chars: 1000,
                overlap_chars: 100,
            }
            .chunk(text, ContentType::Plain),
            Which::Unicode => unicode_v2(text, ContentType::Plain, 500, 50, family),
            Which::TextSplitter => {
                text_splitter::chunk_text(text, ContentType::Plain, 500, 50, family)
            }
        }
    }
}

struct Doc {
    text: String,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn english() -> Vec<Doc> {
    ["GPL-3", "Apache-2.0", "MPL-2.0"]
        .iter()
        .filter_map(|n| read(&Path::new("/usr/share/common-licenses").join(n)))
        .map(|text| Doc { text })
        .collect()
}

/// The text of an HTML page's `<main>`, tags and code blocks dropped.
fn html_text(html: &str) -> String {
    let main = html
        .split("<main>")
        .nth(1)
        .and_then(|m| m.split("</main>").next())
        .unwrap_or("");
    let mut out = String::new();
    let mut rest = main;
    while let Some(i) = rest.find("<pre") {
        out.push_str(&rest[..i]);
        rest = rest[i..].split_once("</pre>").map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    let mut text = String::new();
    let mut in_tag = false;
    for c in out.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn japanese() -> (Vec<Doc>, usize) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<Doc> = ["000_23c333604504c1bd.txt", "002_d1dd9a78ce7dea22.txt"]
        .iter()
        .filter_map(|n| read(&root.join("tests/data/seeds").join(n)))
        .map(|text| Doc { text })
        .collect();
    let mut rbe = 0;
    let sysroot = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok();
    if let Some(out) = sysroot {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            .join("share/doc/rust/html/rust-by-example/ja");
        let mut pages: Vec<PathBuf> = walk(&dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "html"))
            .collect();
        pages.sort();
        for p in pages {
            let text = read(&p).map(|h| html_text(&h)).unwrap_or_default();
            let kana = text
                .chars()
                .filter(|c| ('\u{3040}'..='\u{30ff}').contains(c))
                .count();
            if text.len() > 2000 && kana > 200 {
                docs.push(Doc { text });
                rbe += 1;
            }
            if rbe == 60 {
                break;
            }
        }
    }
    (docs, rbe)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Sentences (byte spans) of 15–200 characters: split after `。！？` and
/// after `.!?` before whitespace, and at line breaks.
fn sentences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let next = chars.get(k + 1).map(|&(_, n)| n);
        let end = match c {
            '。' | '！' | '？' => Some(i + c.len_utf8()),
            '.' | '!' | '?' if next.is_none_or(char::is_whitespace) => Some(i + 1),
            '\n' => Some(i),
            _ => None,
        };
        if let Some(e) = end {
            let s = text[start..e].trim_start();
            let s0 = e - s.len();
            let n = s.chars().count();
            if (15..=200).contains(&n) {
                out.push((s0, e));
            }
            start = e;
        }
    }
    out
}

/// The middle third of a span, on char boundaries, at least 6 characters.
fn middle(text: &str, (s, e): (usize, usize)) -> (usize, usize) {
    let idx: Vec<usize> = text[s..e]
        .char_indices()
        .map(|(i, _)| s + i)
        .chain(std::iter::once(e))
        .collect();
    let n = idx.len() - 1;
    let (a, b) = (n / 3, (2 * n / 3).max(n / 3 + 6).min(n));
    (idx[a], idx[b])
}

struct Quality {
    queries: usize,
    hit1: usize,
    hit5: usize,
    rr: f64,
}

/// What the model sees of a chunk: its first 510 real tokens.
fn model_view<'a>(tok: &tokenizers::Tokenizer, text: &'a str) -> (&'a str, usize) {
    let enc = tok.encode(text, false).expect("tokenize");
    let n = enc.get_ids().len();
    if n <= MODEL_TOKENS {
        return (text, n);
    }
    let cut = enc.get_offsets()[MODEL_TOKENS - 1].1;
    (&text[..cut], n)
}

struct Stats {
    chunks: usize,
    tokens_mean: f64,
    tokens_max: usize,
    over: usize,
}

fn evaluate(which: Which, docs: &[Doc], tok: &tokenizers::Tokenizer) -> (Stats, Quality, Quality) {
    // Chunk every document; embed each chunk as the model would see it.
    let mut chunks: Vec<(usize, usize, usize, Vec<f32>)> = Vec::new(); // doc, start, end, vector
    let (mut total, mut max, mut over) = (0usize, 0usize, 0usize);
    for (d, doc) in docs.iter().enumerate() {
        for c in which.chunk(&doc.text) {
            let (seen, n) = model_view(tok, c.text);
            total += n;
            max = max.max(n);
            over += usize::from(n > MODEL_TOKENS);
            chunks.push((d, c.start, c.end, embed(seen, DIMS)));
        }
    }
    let stats = Stats {
        chunks: chunks.len(),
        tokens_mean: total as f64 / chunks.len().max(1) as f64,
        tokens_max: max,
        over,
    };
    let mut sentence_q = Quality {
        queries: 0,
        hit1: 0,
        hit5: 0,
        rr: 0.0,
    };
    let mut phrase_q = Quality {
        queries: 0,
        hit1: 0,
        hit5: 0,
        rr: 0.0,
    };
    for (d, doc) in docs.iter().enumerate() {
        let spans = sentences(&doc.text);
        let step = (spans.len() / 40).max(1);
        for &span in spans.iter().step_by(step) {
            for (q, (s, e)) in [
                (&mut sentence_q, span),
                (&mut phrase_q, middle(&doc.text, span)),
            ] {
                let query = embed(&doc.text[s..e], DIMS);
                let mut scored: Vec<(f32, bool)> = chunks
                    .iter()
                    .map(|(cd, cs, ce, v)| (cosine(&query, v), *cd == d && *cs <= s && e <= *ce))
                    .collect();
                scored.sort_by(|a, b| b.0.total_cmp(&a.0));
                q.queries += 1;
                if let Some(rank) = scored.iter().position(|(_, rel)| *rel) {
                    q.hit1 += usize::from(rank == 0);
                    q.hit5 += usize::from(rank < 5);
                    q.rr += 1.0 / (rank + 1) as f64;
                }
            }
        }
    }
    (stats, sentence_q, phrase_q)
}

/// MB/s of chunking `text`, the best of 3 runs.
fn throughput(which: Which, text: &str) -> (f64, usize) {
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..3 {
        let t = Instant::now();
        n = which.chunk(text).len();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (text.len() as f64 / 1e6 / best, n)
}

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/test-data/bert-base-uncased-tokenizer.json"
    );
    let mut tok =
        tokenizers::Tokenizer::from_file(path).expect("run scripts/fetch-test-data.sh first");
    tok.with_truncation(None).expect("no truncation");
    tok.with_padding(None);
    let en = english();
    let (ja, rbe) = japanese();
    let bytes = |d: &[Doc]| d.iter().map(|d| d.text.len()).sum::<usize>();
    println!("### Chunkers side by side (native, optimized, one thread)\n");
    println!(
        "Documents: English {} ({} KB: /usr/share/common-licenses GPL-3, Apache-2.0, MPL-2.0); Japanese {} ({} KB: the 2 seed documents and {rbe} pages of Rust by Example in Japanese).\n",
        en.len(),
        bytes(&en) / 1000,
        ja.len(),
        bytes(&ja) / 1000
    );
    // Throughput on about 5 MB of each language.
    let big = |docs: &[Doc]| {
        let one: String = docs
            .iter()
            .map(|d| d.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        one.repeat((5_000_000 / one.len().max(1)).max(1))
    };
    let (en_big, ja_big) = (big(&en), big(&ja));
    // The same English, 1 MB of it, with no sentence end and no line break:
    // the text where a segmenter reads furthest for each boundary.
    let flat: String = en_big
        .chars()
        .take(1_000_000)
        .map(|c| match c {
            '.' | '!' | '?' | '\n' | '\r' => ' ',
            c => c,
        })
        .collect();
    println!("| chunker | English MB/s | Japanese MB/s | English without sentence ends or line breaks MB/s |");
    println!("|---|---:|---:|---:|");
    for w in Which::ALL {
        let (e, _) = throughput(w, &en_big);
        let (j, _) = throughput(w, &ja_big);
        let (f, _) = throughput(w, &flat);
        println!("| {} | {e:.1} | {j:.1} | {f:.1} |", w.label());
    }
    println!(
        "\n({:.1} MB of English, {:.1} MB of Japanese, {:.1} MB without breaks; best of 3.)\n",
        en_big.len() as f64 / 1e6,
        ja_big.len() as f64 / 1e6,
        flat.len() as f64 / 1e6
    );

    for (lang, docs) in [("English", &en), ("Japanese", &ja)] {
        println!("#### {lang}: chunk sizes in real WordPiece tokens, and retrieval (offline embedder, chunks cut at 510 tokens as bge-* would)\n");
        println!("| chunker | chunks | mean tokens | max tokens | over 510 | sentence hit@1 | hit@5 | MRR | phrase hit@1 | hit@5 | MRR |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for w in Which::ALL {
            let (s, q1, q2) = evaluate(w, docs, &tok);
            let f = |q: &Quality| {
                let n = q.queries.max(1) as f64;
                format!(
                    "{:.2} | {:.2} | {:.2}",
                    q.hit1 as f64 / n,
                    q.hit5 as f64 / n,
                    q.rr / n
                )
            };
            println!(
                "| {} | {} | {:.0} | {} | {} | {} | {} |",
                w.label(),
                s.chunks,
                s.tokens_mean,
                s.tokens_max,
                s.over,
                f(&q1),
                f(&q2)
            );
            if matches!(w, Which::TextSplitter) {
                println!(
                    "\n({} sentence and {} phrase queries.)\n",
                    q1.queries, q2.queries
                );
            }
        }
    }
}
