//! Property tests of the chunkers over arbitrary Unicode: every White_Space
//! character (alone and in long runs), combining marks, ZWJ emoji, CJK with
//! its punctuation, RTL scripts, CRLF, Markdown headings and code fences,
//! and arbitrary scalar values. For every input and configuration:
//!
//! - each chunk is a slice of the text on `char` boundaries;
//! - each chunk is within the configured limit (`unicode-v2`: the token
//!   bound of its family; `greedy-v1`: characters);
//! - the chunks cover every non-whitespace character of the text;
//! - the output is deterministic;
//! - chunks advance, and an overlap starts on a word boundary.
//!
//! `make test` runs `PROPTEST_CASES` cases (default 2,000 per property);
//! `make proptest-long` runs 1,000,000.

use ingest_pipeline::core::chunk::tokens::TokenFamily;
use ingest_pipeline::core::chunk::{Chunk, Chunker, ContentType};
use proptest::prelude::*;
use unicode_segmentation::UnicodeSegmentation;

/// Every White_Space character.
const SPACES: &[char] = &[
    '\u{9}', '\u{a}', '\u{b}', '\u{c}', '\u{d}', ' ', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}',
    '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}',
    '\u{2009}', '\u{200a}', '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}',
];

/// Pieces real text is made of, and the ones that break splitters.
const PIECES: &[&str] = &[
    "word",
    "The",
    "quick",
    "a",
    "I",
    ". ",
    ", ",
    "; ",
    ": ",
    "! ",
    "? ",
    "...",
    "Mr. ",
    "e.g. ",
    "3.14",
    "日本語",
    "漢字",
    "ひらがな",
    "カタカナー",
    "。",
    "、",
    "！",
    "？",
    "「引用」",
    "（注）",
    "中文，",
    "句子；",
    "한국어",
    "문장입니다",
    "مرحبا",
    "بالعالم",
    "שלום",
    "\u{200f}",
    "\u{200e}",
    "\u{202b}",
    "Привет",
    "a\u{301}",
    "e\u{301}\u{302}\u{303}",
    "\u{301}",
    "\u{94d}",
    "क्षि",
    "👩\u{200d}👩\u{200d}👧\u{200d}👦",
    "🏳\u{fe0f}\u{200d}🌈",
    "👍🏽",
    "🇯🇵",
    "🇫🇷🇩🇪",
    "\u{200d}",
    "\u{fe0f}",
    "\r\n",
    "\r",
    "\n",
    "\n\n",
    "\r\n\r\n",
    "\u{2028}",
    "\u{2029}",
    "# ",
    "## Heading\n",
    "\n# Title\n",
    "###### h6\n",
    "#hashtag",
    "```\n",
    "```rust\n",
    "~~~\n",
    "    ```\n",
    "- item\n",
    "> quote\n",
    "| a | b |\n",
    "`code`",
    "**bold**",
    "\u{200b}",
    "\u{feff}",
    "\u{ad}",
    "ﷺ",
    "…",
    "㍿",
    "½",
    "İ",
    "ß",
    "ﬁ",
    "https://example.com/path?query=1#frag",
];

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(PIECES).prop_map(str::to_string),
        2 => proptest::sample::select(SPACES).prop_map(|c| c.to_string()),
        // Long runs: of one space (the no-break-space report), of one piece.
        1 => (proptest::sample::select(SPACES), 1usize..400).prop_map(|(c, n)| std::iter::repeat_n(c, n).collect()),
        1 => (proptest::sample::select(PIECES), 1usize..120).prop_map(|(p, n)| p.repeat(n)),
        1 => (proptest::sample::select(SPACES), 1usize..200)
            .prop_map(|(c, n)| format!("abcdefghi{c}").repeat(n)),
        // A letter with many combining marks: one grapheme longer than a chunk.
        1 => (1usize..600).prop_map(|n| format!("a{}", "\u{301}".repeat(n))),
        2 => any::<char>().prop_map(|c| c.to_string()),
        1 => "\\PC{1,40}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::collection::vec(piece(), 0..80).prop_map(|v| v.concat()),
        1 => any::<String>(),
    ]
}

fn family() -> impl Strategy<Value = TokenFamily> {
    proptest::sample::select(TokenFamily::ALL.to_vec())
}

fn chunker() -> impl Strategy<Value = Chunker> {
    prop_oneof![
        3 => (family(), 0usize..300, 0usize..=100).prop_map(|(tokens, extra, overlap_pct)| {
            let size_max_tokens = tokens.chunk_tokens_min() + extra;
            Chunker::Unicode { size_max_tokens, overlap_tokens: size_max_tokens / 2 * overlap_pct / 100, tokens }
        }),
        1 => (2usize..300, 0usize..=100).prop_map(|(size_max_chars, overlap_pct)| Chunker::Greedy {
            size_max_chars,
            overlap_chars: size_max_chars / 2 * overlap_pct / 100,
        }),
    ]
}

fn kind() -> impl Strategy<Value = ContentType> {
    prop_oneof![Just(ContentType::Plain), Just(ContentType::Markdown)]
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Checks every property of one chunking.
fn check(text: &str, kind: ContentType, chunker: Chunker) -> Result<Vec<Chunk<'_>>, TestCaseError> {
    let chunks = chunker.chunk(text, kind);
    // Deterministic, also on a copy of the text elsewhere in memory.
    let copy = text.to_string();
    let again: Vec<(usize, usize)> = chunker
        .chunk(&copy, kind)
        .iter()
        .map(|c| (c.start, c.end))
        .collect();
    prop_assert_eq!(
        chunks.iter().map(|c| (c.start, c.end)).collect::<Vec<_>>(),
        again,
        "not deterministic"
    );
    let mut covered = vec![false; text.len()];
    for (i, c) in chunks.iter().enumerate() {
        prop_assert_eq!(c.index as usize, i);
        prop_assert!(
            text.is_char_boundary(c.start) && text.is_char_boundary(c.end),
            "chunk {} not on char boundaries",
            i
        );
        prop_assert_eq!(text.get(c.start..c.end), Some(c.text));
        prop_assert!(!c.text.trim().is_empty(), "chunk {} is blank", i);
        prop_assert_eq!(c.text.trim(), c.text, "chunk {} is not trimmed", i);
        match chunker {
            Chunker::Unicode {
                size_max_tokens,
                tokens,
                ..
            } => {
                let n = tokens.count(c.text);
                prop_assert!(
                    n <= size_max_tokens,
                    "chunk {} has {} tokens > {} ({})",
                    i,
                    n,
                    size_max_tokens,
                    tokens.as_str()
                );
            }
            Chunker::Greedy { size_max_chars, .. } => {
                prop_assert!(
                    c.text.chars().count() <= size_max_chars,
                    "chunk {} too long",
                    i
                );
            }
        }
        if let Some(prev) = i.checked_sub(1).and_then(|j| chunks.get(j)) {
            prop_assert!(c.start > prev.start, "no progress at chunk {}", i);
            if c.start < prev.end {
                // An overlap starts at a word: after whitespace, or on a
                // word boundary seen from the previous chunk's start.
                let after_space = text
                    .get(..c.start)
                    .and_then(|h| h.chars().next_back())
                    .is_some_and(char::is_whitespace);
                let on_word_bound = matches!(chunker, Chunker::Greedy { .. })
                    || text
                        .get(prev.start..)
                        .unwrap_or_default()
                        .split_word_bound_indices()
                        .any(|(k, _)| prev.start + k == c.start);
                prop_assert!(
                    after_space || on_word_bound,
                    "overlap of chunk {} starts inside a word at {}",
                    i,
                    c.start
                );
            }
        }
        covered
            .get_mut(c.start..c.end)
            .into_iter()
            .flatten()
            .for_each(|b| *b = true);
    }
    for (i, ch) in text.char_indices() {
        prop_assert!(
            ch.is_whitespace() || covered.get(i) == Some(&true),
            "byte {} ({:?}) is in no chunk",
            i,
            ch
        );
    }
    Ok(chunks)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_text_chunks_safely(text in text(), kind in kind(), chunker in chunker()) {
        check(&text, kind, chunker)?;
    }

    #[test]
    fn default_sized_chunks_of_long_texts(parts in proptest::collection::vec(piece(), 60..300), kind in kind(), tokens in family()) {
        let text = parts.concat();
        let chunker = Chunker::Unicode { size_max_tokens: 500, overlap_tokens: 50, tokens };
        check(&text, kind, chunker)?;
    }
}

#[test]
fn the_reported_no_break_space_document() {
    // `"x"*10 + "abcdefghi\u00a0"*300` used to panic greedy-v1; every
    // multi-byte space did.
    for space in ['\u{a0}', '\u{202f}', '\u{3000}', '\u{2028}'] {
        let text = format!(
            "{}{}",
            "x".repeat(10),
            format!("abcdefghi{space}").repeat(300)
        );
        for chunker in [
            Chunker::Greedy {
                size_max_chars: 1000,
                overlap_chars: 100,
            },
            Chunker::Unicode {
                size_max_tokens: 500,
                overlap_tokens: 50,
                tokens: TokenFamily::WordPiece,
            },
        ] {
            let chunks = check(&text, ContentType::Plain, chunker).unwrap();
            assert!(chunks.len() > 1);
        }
    }
}
