//! Deterministic chunking: chunk boundaries depend only on (text, content
//! type, [`Chunker`]), and every chunk is a slice of the text on `char`
//! boundaries, so no input can make the chunker panic.
//!
//! Two chunkers, named in each index generation's recorded configuration:
//!
//! - `unicode-v2` ([`segment`]): sized in conservative tokens for the
//!   embedding model's tokenizer family ([`tokens`]), split at Unicode
//!   segmentation boundaries (Markdown headings and fences, paragraphs,
//!   lines, sentences, clauses, words, grapheme clusters). What new
//!   generations use.
//! - `greedy-v1` ([`greedy`]): the first chunker, sized in characters. It
//!   is kept, unchanged except that it no longer panics, so that a generation
//!   built with it is still written the same way until a `config` backfill
//!   moves the deployment to a `unicode-v2` generation.
//!
//! Why not the `text-splitter` crate (measured side by side in
//! `docs/performance.md`, `make bench`): its word segmenter compiles in
//! ICU's dictionaries, which take the Worker from about 0.4 MB to about
//! 2.7 MB gzip, nine tenths of the Free plan's 3 MB; and it has no level for
//! clauses (`、`), which long Japanese sentences need.
//!
//! May import: `config` (the tokenizer family) and the Unicode libraries;
//! nothing else of the crate.

pub mod greedy;
mod segment;
#[cfg(feature = "text-splitter")]
pub mod text_splitter;
mod token_table;
pub mod tokens;

use tokens::TokenFamily;

/// How the text is to be read; Markdown adds headings and code fences as
/// preferred boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    Plain,
    Markdown,
}

impl ContentType {
    pub fn parse(raw: &str) -> Option<ContentType> {
        match raw {
            "text/plain" => Some(ContentType::Plain),
            "text/markdown" => Some(ContentType::Markdown),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Plain => "text/plain",
            ContentType::Markdown => "text/markdown",
        }
    }
}

/// One chunk: `text == &document[start..end]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub index: u32,
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

/// `unicode-v2` itself, whatever the build (the bench compares it with
/// `text_splitter` in one binary).
pub fn unicode_v2<'a>(
    text: &'a str,
    kind: ContentType,
    size_max_tokens: usize,
    overlap_tokens: usize,
    tokens: TokenFamily,
) -> Vec<Chunk<'a>> {
    segment::chunk_text(text, kind, size_max_tokens, overlap_tokens, tokens)
}

/// A chunker and its settings: part of an index generation's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunker {
    /// `greedy-v1`: at most `size_max_chars` characters, about
    /// `overlap_chars` shared.
    Greedy {
        size_max_chars: usize,
        overlap_chars: usize,
    },
    /// `unicode-v2`: at most `size_max_tokens` tokens by the bound of
    /// `tokens`, about `overlap_tokens` shared.
    Unicode {
        size_max_tokens: usize,
        overlap_tokens: usize,
        tokens: TokenFamily,
    },
}

impl Chunker {
    pub const GREEDY_V1: &'static str = "greedy-v1";
    pub const UNICODE_V2: &'static str = "unicode-v2";

    /// The name recorded in an index configuration.
    pub fn name(self) -> &'static str {
        match self {
            Chunker::Greedy { .. } => Chunker::GREEDY_V1,
            Chunker::Unicode { .. } => Chunker::UNICODE_V2,
        }
    }

    /// Whether the settings are ones the chunker takes (a configuration
    /// read back from D1 is checked with this before use).
    pub fn is_valid(self) -> bool {
        match self {
            Chunker::Greedy {
                size_max_chars,
                overlap_chars,
            } => size_max_chars >= 2 && overlap_chars * 2 <= size_max_chars,
            Chunker::Unicode {
                size_max_tokens,
                overlap_tokens,
                tokens,
            } => {
                size_max_tokens >= tokens.chunk_tokens_min()
                    && overlap_tokens * 2 <= size_max_tokens
            }
        }
    }

    /// Splits `text` into chunks. Whitespace-only stretches produce no
    /// chunk. Settings out of range are clamped into range, never a panic.
    pub fn chunk<'a>(self, text: &'a str, kind: ContentType) -> Vec<Chunk<'a>> {
        match self {
            Chunker::Greedy {
                size_max_chars,
                overlap_chars,
            } => {
                let size = size_max_chars.max(2);
                greedy::chunk_text(text, kind, size, overlap_chars.min(size / 2))
            }
            #[cfg(not(feature = "text-splitter"))]
            Chunker::Unicode {
                size_max_tokens,
                overlap_tokens,
                tokens,
            } => segment::chunk_text(text, kind, size_max_tokens, overlap_tokens, tokens),
            // A measurement build only (`make bench`): see `text_splitter`.
            #[cfg(feature = "text-splitter")]
            Chunker::Unicode {
                size_max_tokens,
                overlap_tokens,
                tokens,
            } => text_splitter::chunk_text(text, kind, size_max_tokens, overlap_tokens, tokens),
        }
    }
}

/// Pushes `text[start..end]` with its surrounding whitespace trimmed, unless
/// nothing is left.
fn push_trimmed<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<Chunk<'a>>) {
    let slice = text.get(start..end).unwrap_or_default();
    let trimmed_start = slice.trim_start();
    let s = start + (slice.len() - trimmed_start.len());
    let e = s + trimmed_start.trim_end().len();
    if let Some(t) = text.get(s..e).filter(|t| !t.is_empty()) {
        out.push(Chunk {
            index: u32::try_from(out.len()).unwrap_or(u32::MAX),
            start: s,
            end: e,
            text: t,
        });
    }
}

/// The first position at or after `from` that is not whitespace (or the end).
fn skip_whitespace(text: &str, from: usize) -> usize {
    match text
        .get(from..)
        .and_then(|t| t.char_indices().find(|(_, c)| !c.is_whitespace()))
    {
        Some((i, _)) => from + i,
        None => text.len(),
    }
}
