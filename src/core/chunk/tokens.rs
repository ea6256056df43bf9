//! A conservative token count: an upper bound on the tokens an embedding
//! model's tokenizer can make of a text, without its vocabulary.
//!
//! Embedding models take tokens, not characters (`@cf/baai/bge-*`: 512), and
//! a text over the limit is truncated or refused. The chunker keeps every
//! chunk's count here within the limit, so no tokenizer of the family can
//! exceed it, whatever the script. The bounds, per family:
//!
//! - **WordPiece** (BERT; bge-*-en-v1.5). The normalizer removes control
//!   characters, strips accents (NFD, then drops nonspacing marks) and
//!   lowercases; the pre-tokenizer splits on whitespace, punctuation and
//!   around every CJK ideograph; WordPiece then covers each word with
//!   pieces of at least one character, or one `[UNK]`. So the tokens are at
//!   most the non-whitespace characters *after normalization*: 1 for most
//!   characters, 0 for whitespace, 2 or 3 for a Hangul syllable (NFD makes
//!   2 or 3 jamo), 2 for `İ` (lowercase adds a dot) and for the characters
//!   whose NFD has two spacing parts (the table).
//! - **SentencePiece** (unigram or BPE without byte fallback, NFKC; XLM-R,
//!   bge-m3). Pieces cover at least one character of the NFKC text, where a
//!   run of whitespace is one `▁`, plus a `▁` before the first word: at
//!   most 1 + the NFKC length of each character (up to 18, `ﷺ`) + 1 per
//!   whitespace run.
//! - **Byte-level** (byte-level BPE, or SentencePiece with byte fallback;
//!   Qwen, Gemma). Every token covers at least one byte of the normalized
//!   text: at most 1 + the UTF-8 length of each character's NFC or NFKC form,
//!   whichever is longer.
//!
//! The model's special tokens (`[CLS]`/`[SEP]`, `<s>`/`</s>`) come on top:
//! [`SPECIAL_TOKENS`]. The per-character weights are a generated table
//! (`token_table.rs`); `tests/it/token_bound.rs` recomputes it from the Unicode
//! normalization data for every scalar value and checks the bound against
//! a real WordPiece tokenizer.

use super::token_table::{BYTE_LEVEL, SENTENCE_PIECE, WORD_PIECE};

// The family, its words and its figures (the heaviest character, the
// smallest chunk limit, the special tokens) are what settings are checked
// against, so they are declared in `config`, a leaf; the bound itself, over
// the per-character table, is here.
pub use crate::config::{TokenFamily, CHUNK_TOKENS_FLOOR, SPECIAL_TOKENS};

/// The bound.
impl TokenFamily {
    /// The most tokens one non-whitespace character can become.
    pub fn weight(self, c: char) -> usize {
        if c.is_ascii() {
            // No normalization changes ASCII: one token at most, one byte.
            return 1;
        }
        let table = match self {
            TokenFamily::WordPiece => {
                if let Some(w) = hangul_jamo(c) {
                    return w;
                }
                WORD_PIECE
            }
            TokenFamily::SentencePiece => SENTENCE_PIECE,
            TokenFamily::ByteLevel => BYTE_LEVEL,
        };
        let cp = u32::from(c);
        let i = table.partition_point(|&(_, hi, _)| hi < cp);
        match table.get(i) {
            Some(&(lo, _, w)) if lo <= cp => usize::from(w),
            _ => match self {
                TokenFamily::ByteLevel => c.len_utf8(),
                TokenFamily::WordPiece | TokenFamily::SentencePiece => 1,
            },
        }
    }

    /// The upper bound on the tokens of `text` (special tokens excluded).
    pub fn count(self, text: &str) -> usize {
        let mut meter = Meter::new(self);
        for c in text.chars() {
            meter.push(c);
        }
        meter.total()
    }
}

/// Hangul syllables decompose (NFD) into a leading consonant, a vowel and
/// an optional final consonant, which WordPiece may split one per token.
fn hangul_jamo(c: char) -> Option<usize> {
    let s = u32::from(c).checked_sub(0xAC00).filter(|s| *s < 11_172)?;
    Some(if s % 28 == 0 { 2 } else { 3 })
}

/// A running count over a text read one character at a time.
#[derive(Clone, Copy, Debug)]
pub struct Meter {
    family: TokenFamily,
    total: usize,
    in_space: bool,
}

impl Meter {
    pub fn new(family: TokenFamily) -> Meter {
        Meter {
            family,
            total: family.prefix(),
            in_space: false,
        }
    }

    /// Adds one character; returns what it added.
    pub fn push(&mut self, c: char) -> usize {
        let added = if c.is_whitespace() {
            let starts_run = !self.in_space;
            self.in_space = true;
            match self.family {
                TokenFamily::WordPiece => 0,
                TokenFamily::SentencePiece => usize::from(starts_run),
                TokenFamily::ByteLevel => c.len_utf8(),
            }
        } else {
            self.in_space = false;
            self.family.weight(c)
        };
        self.total += added;
        added
    }

    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_per_family() {
        let wp = TokenFamily::WordPiece;
        assert_eq!(wp.count("hello world"), 10);
        assert_eq!(wp.count("日本語。"), 4);
        assert_eq!(wp.count("한국"), 6, "NFD: 한 = ᄒ ᅡ ᆫ, 국 = ᄀ ᅮ ᆨ");
        assert_eq!(wp.count("가"), 2, "no final consonant");
        assert_eq!(wp.count("İ"), 2);
        let sp = TokenFamily::SentencePiece;
        assert_eq!(sp.count("a  b"), 1 + 1 + 1 + 1, "prefix, a, one run, b");
        assert_eq!(sp.count("ﷺ"), 1 + 18);
        assert_eq!(sp.count("…"), 1 + 3, "NFKC: ...");
        let bl = TokenFamily::ByteLevel;
        assert_eq!(bl.count("日本"), 1 + 6);
        assert_eq!(bl.count("a b"), 1 + 3);
        for f in TokenFamily::ALL {
            assert_eq!(TokenFamily::parse(f.as_str()), Some(f));
            assert_eq!(f.count(""), f.prefix());
        }
    }
}
