//! The keyword index's terms and scores: what the index holds for a chunk,
//! the terms of a user's query, and their bm25 weights. No I/O.
//!
//! The index (migration 0021) is one contentless FTS5 table whose
//! tokenizer (`ascii`) only splits at ASCII spaces and punctuation: every
//! term in it is made here. Each term carries its tenant's key
//! ([`scoped`]: `17z` + `report`), so each tenant's terms, and the lists of
//! rows that hold them, are its own: a lookup of one tenant's term never
//! reads another's rows, and the counts bm25 uses (rows holding a term,
//! rows, tokens) are the tenant's alone. The score is computed by the
//! search statement from those counts ([`idf`], [`BM25_K1`], [`BM25_B`]),
//! not by FTS5's `bm25()`, whose row and token totals are the whole
//! table's.
//!
//! The terms of a text ([`tokens`]):
//! - a word of a script written with spaces (a run of letters and numbers)
//!   is one term, lowercased, Latin diacritics removed (`Café` → `cafe`),
//!   and, when it is made of ASCII letters, reduced to its English stem
//!   (Snowball's English stemmer: `indexing` → `index`);
//! - a run of characters of a script written without spaces
//!   ([`keyword::is_unspaced`]: Japanese, Chinese, Thai, …) gives each
//!   character (grapheme cluster) and each adjacent pair as terms:
//!   `東京都` → `東`, `東京`, `京`, `京都`, `都`. A query's run of two or
//!   more gives its pairs (`東京都` → `東京`, `京都`), a query's single
//!   character itself, so a query finds its pairs wherever they stand and
//!   bm25 counts how many a chunk holds.

use crate::core::keyword::is_unspaced;
use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// bm25's term-frequency saturation (the value FTS5 and Lucene use).
pub const BM25_K1: f64 = 1.2;
/// bm25's length normalization (the value FTS5 and Lucene use).
pub const BM25_B: f64 = 0.75;
/// Characters of a term at most: a longer run of letters (a hash, a
/// base64 blob) is cut, so no term is larger than FTS5 handles well.
pub const TERM_CHARS_MAX: usize = 64;

/// One term of a text, in order: a word, or a character or a pair of a
/// run of unspaced characters.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece<'a> {
    Word(String),
    Run(Vec<&'a str>),
}

/// The words and unspaced runs of `text`, in order. A grapheme cluster
/// belongs to a word when its first character is a letter or number of a
/// spaced script, to a run when it is unspaced; anything else separates.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut run: Vec<&str> = Vec::new();
    for g in text.graphemes(true) {
        let first = g.chars().next().unwrap_or(' ');
        let (in_word, in_run) = match (first.is_alphanumeric(), is_unspaced(first)) {
            (true, true) => (false, true),
            (true, false) => (true, false),
            _ => (false, false),
        };
        if !in_word && !word.is_empty() {
            out.push(Piece::Word(std::mem::take(&mut word)));
        }
        if !in_run && !run.is_empty() {
            out.push(Piece::Run(std::mem::take(&mut run)));
        }
        if in_word {
            word.push_str(g);
        } else if in_run {
            run.push(g);
        }
    }
    if !word.is_empty() {
        out.push(Piece::Word(word));
    }
    if !run.is_empty() {
        out.push(Piece::Run(run));
    }
    out
}

/// A word's term: lowercased, Latin diacritics removed (decomposed, the
/// combining marks U+0300–U+036F dropped from Latin letters only: a kana's
/// sound mark stays), only letters and numbers kept, at most
/// [`TERM_CHARS_MAX`] characters, an ASCII word stemmed.
fn word_term(word: &str, stemmer: &Stemmer) -> String {
    let lower: String = word.chars().flat_map(char::to_lowercase).collect();
    let mut out = String::with_capacity(lower.len());
    let mut after_latin = false;
    for c in lower.nfd() {
        if ('\u{300}'..='\u{36f}').contains(&c) {
            if after_latin {
                continue;
            }
        } else {
            after_latin = c.is_ascii_alphabetic() || ('\u{c0}'..='\u{24f}').contains(&c);
        }
        if !c.is_ascii() || c.is_ascii_alphanumeric() {
            out.push(c);
        }
    }
    let out: String = out.nfc().take(TERM_CHARS_MAX).collect();
    if !out.is_empty() && out.bytes().all(|b| b.is_ascii_lowercase()) {
        return stemmer.stem(&out).into_owned();
    }
    out
}

/// A grapheme cluster of an unspaced run as a term: lowercased, ASCII
/// punctuation (which the tokenizer would split at) dropped.
fn unit(g: &str) -> String {
    g.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| !c.is_ascii() || c.is_ascii_alphanumeric())
        .collect()
}

fn stemmer() -> Stemmer {
    Stemmer::create(Algorithm::English)
}

/// The terms the keyword index holds for `text`, in order: each word, and
/// each character and adjacent pair of each unspaced run.
pub fn tokens(text: &str) -> Vec<String> {
    let stemmer = stemmer();
    let mut out = Vec::new();
    for piece in pieces(text) {
        match piece {
            Piece::Word(w) => {
                let t = word_term(&w, &stemmer);
                if !t.is_empty() {
                    out.push(t);
                }
            }
            Piece::Run(units) => {
                let units: Vec<String> = units.iter().map(|g| unit(g)).collect();
                for (i, u) in units.iter().enumerate() {
                    out.push(u.clone());
                    if let Some(next) = units.get(i + 1) {
                        out.push(format!("{u}{next}"));
                    }
                }
            }
        }
    }
    out.retain(|t| !t.is_empty());
    out
}

/// The terms of a user's query, without repeats, at most `max`, in order:
/// each word; each pair of an unspaced run of two or more, or the single
/// character of a run of one. Whatever the user typed is only text: the
/// terms go to the index as bound values, never as query syntax.
pub fn query_terms(query: &str, max: usize) -> Vec<String> {
    let stemmer = stemmer();
    let mut out: Vec<String> = Vec::new();
    let add = |t: String, out: &mut Vec<String>| {
        if !t.is_empty() && out.len() < max && !out.contains(&t) {
            out.push(t);
        }
    };
    for piece in pieces(query) {
        match piece {
            Piece::Word(w) => add(word_term(&w, &stemmer), &mut out),
            Piece::Run(units) => {
                let units: Vec<String> = units.iter().map(|g| unit(g)).collect();
                if let [only] = units.as_slice() {
                    add(only.clone(), &mut out);
                }
                for pair in units.windows(2) {
                    add(pair.concat(), &mut out);
                }
            }
        }
    }
    out
}

/// `term` as the index holds it for the tenant whose keyword key is `key`
/// (`tenants.keyword_key`): the key's digits, `z`, the term. The key ends
/// at its first letter, so no two tenants' terms are ever equal.
pub fn scoped(key: i64, term: &str) -> String {
    format!("{key}z{term}")
}

/// What a chunk's row gives the index: its terms scoped to the tenant,
/// separated by spaces (the tokenizer's separator), and how many.
pub fn index_document(key: i64, text: &str) -> (String, u32) {
    let terms = tokens(text);
    let mut out = String::with_capacity(text.len().saturating_mul(2));
    for t in &terms {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&scoped(key, t));
    }
    (out, u32::try_from(terms.len()).unwrap_or(u32::MAX))
}

/// bm25's inverse document frequency of a term held by `df` of a tenant's
/// `rows` rows: ln(1 + (N − n + 0.5) / (n + 0.5)), Lucene's form, positive
/// whatever the counts.
pub fn idf(rows: u64, df: u64) -> f64 {
    let (n, df) = (rows as f64, df.min(rows) as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Of a query's terms with the rows holding each (`df`), those a query
/// ranks and those it leaves out: the rarest first, each kept while the
/// rows holding the kept ones add up to at most `matches_max`; the others,
/// the commonest, are skipped (in the query's order). A term no row holds
/// is neither: it matches nothing.
pub fn within_matches(df: &[(String, u64)], matches_max: u64) -> (Vec<(String, u64)>, Vec<String>) {
    let mut held: Vec<&(String, u64)> = df.iter().filter(|(_, n)| *n > 0).collect();
    // Stable: equally common terms keep the query's order.
    held.sort_by_key(|(_, n)| *n);
    let mut total = 0u64;
    let mut kept = Vec::new();
    for (t, n) in held {
        if total.saturating_add(*n) > matches_max {
            break;
        }
        total += n;
        kept.push((t.clone(), *n));
    }
    let skipped = df
        .iter()
        .filter(|(t, n)| *n > 0 && !kept.iter().any(|(k, _)| k == t))
        .map(|(t, _)| t.clone())
        .collect();
    (kept, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_query_keeps_its_rarest_terms_within_the_rows_it_may_rank() {
        let df = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
            v.iter().map(|(t, n)| (t.to_string(), *n)).collect()
        };
        let q = df(&[
            ("index", 900),
            ("tagaze", 20),
            ("data", 800),
            ("nothing", 0),
        ]);
        assert_eq!(
            within_matches(&q, 10_000),
            (df(&[("tagaze", 20), ("data", 800), ("index", 900)]), vec![])
        );
        assert_eq!(
            within_matches(&q, 1000),
            (
                df(&[("tagaze", 20), ("data", 800)]),
                vec!["index".to_string()]
            )
        );
        // The commonest go first, even if a rarer one would still fit
        // after them: the query's best evidence is its rarest terms.
        assert_eq!(
            within_matches(&q, 700),
            (
                df(&[("tagaze", 20)]),
                vec!["index".to_string(), "data".to_string()]
            )
        );
        assert_eq!(
            within_matches(&q, 10),
            (
                vec![],
                vec![
                    "index".to_string(),
                    "tagaze".to_string(),
                    "data".to_string()
                ]
            )
        );
    }

    #[test]
    fn words_are_lowercased_stemmed_and_stripped_of_latin_diacritics() {
        assert_eq!(
            tokens("Indexing the Café's reports, 2026!"),
            ["index", "the", "cafe", "s", "report", "2026"]
        );
        // A word of letters beyond ASCII keeps them, unstemmed.
        assert_eq!(tokens("Übersetzungen naïve"), ["ubersetzungen", "naiv"]);
    }

    #[test]
    fn an_unspaced_run_gives_each_character_and_each_pair() {
        assert_eq!(
            tokens("東京都の人口"),
            [
                "東", "東京", "京", "京都", "都", "都の", "の", "の人", "人", "人口", "口"
            ]
        );
        // A kana's sound mark is not a diacritic to remove.
        assert_eq!(tokens("ガ"), ["ガ"]);
        assert_eq!(
            tokens("Vectorizeの索引"),
            ["vector", "の", "の索", "索", "索引", "引"]
        );
    }

    #[test]
    fn a_query_gives_pairs_of_runs_words_and_lone_characters_once() {
        assert_eq!(
            query_terms("東京都 indexing 東京 京", 10),
            ["東京", "京都", "index", "京"]
        );
        assert_eq!(query_terms("a b c", 2), ["a", "b"]);
        assert!(query_terms("、。!? ", 10).is_empty());
    }

    #[test]
    fn scoped_terms_of_two_tenants_never_meet() {
        let (a, n) = index_document(1, "report 東京");
        assert_eq!((a.as_str(), n), ("1zreport 1z東 1z東京 1z京", 4));
        assert_ne!(scoped(1, "1zx"), scoped(11, "x"));
    }

    #[test]
    fn idf_is_positive_and_falls_as_more_rows_hold_the_term() {
        assert!(idf(10, 10) > 0.0);
        assert!(idf(10, 1) > idf(10, 2));
        assert!(idf(0, 0) > 0.0);
    }

    proptest! {
        /// Whatever the text, every term is non-empty, holds no ASCII
        /// character the tokenizer splits at, and is at most
        /// TERM_CHARS_MAX characters for a word; the index's text splits
        /// back into exactly the counted terms, each scoped to its key.
        #[test]
        fn index_terms_survive_the_tokenizer(text in "\\PC{0,80}", key in 1i64..100_000) {
            let (doc, n) = index_document(key, &text);
            let split: Vec<&str> = doc.split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric())
                .filter(|t| !t.is_empty()).collect();
            prop_assert_eq!(split.len(), n as usize);
            let prefix = format!("{key}z");
            for t in split {
                prop_assert!(t.starts_with(&prefix));
                prop_assert!(t.len() > prefix.len());
            }
            for q in query_terms(&text, 64) {
                prop_assert!(!q.is_empty());
                prop_assert!(!q.chars().any(|c| c.is_ascii() && !c.is_ascii_alphanumeric()));
            }
        }

        /// A query made of a text's own words finds its terms in the text's
        /// terms: what a chunk says, a query for it matches.
        #[test]
        fn a_query_of_the_texts_words_finds_them(text in "[a-zA-Zé東京都の ]{1,40}") {
            let held = tokens(&text);
            for q in query_terms(&text, 64) {
                prop_assert!(held.contains(&q), "{q} not in {held:?}");
            }
        }
    }
}
