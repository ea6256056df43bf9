//! Property tests of the keyword index's terms (`core::terms`) on a real
//! SQLite FTS5 table made as migration 0021 makes `keyword_index`
//! (contentless, `ascii` tokenizer, read through `fts5vocab`), and of the
//! search's text rules (`core::keyword`):
//!
//! - whatever the text, the tokenizer makes exactly the terms
//!   `index_document` counts, in order, each under the tenant's key;
//! - whatever the query, its terms are few, distinct, never empty, and the
//!   lookup with them (bound values, never query syntax) runs;
//! - a substring of a text, cut between words (or between unspaced
//!   characters), finds the text's row: every term of it is the row's;
//! - `snippet` never panics, stays within its length, and is a substring of
//!   the text once its marks and escapes are removed;
//! - `fuse` is deterministic, sums reciprocal ranks, and an id first in
//!   every list comes first.
//!
//! `PROPTEST_CASES` cases per property (default 2,000).

use ingest_pipeline::core::keyword::{fuse, is_unspaced, snippet};
use ingest_pipeline::core::terms::{index_document, query_terms, scoped};
use proptest::prelude::*;
use rusqlite::Connection;
use unicode_segmentation::UnicodeSegmentation;

const SCHEMA: &str =
    "CREATE VIRTUAL TABLE t USING fts5(terms, content = '', contentless_delete = 1, tokenize = 'ascii');
     CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');";

/// The tenant key the tests index under.
const KEY: i64 = 7;

/// Pieces of real text, of FTS5 syntax and of what breaks tokenizers.
const PIECES: &[&str] = &[
    "index",
    "Indexing",
    "indexes",
    "DELETE",
    "deleted",
    "documents",
    "the",
    "a",
    "E1234",
    "3.14",
    "e.g.",
    "café",
    "cafe\u{301}",
    "naïve",
    "İstanbul",
    "ß",
    "Ａｂｃ１２３",
    "Привет",
    "مرحبا",
    "한국어",
    "東京都",
    "の",
    "人口",
    "検索",
    "索引",
    "更新",
    "Vectorize",
    "々",
    "〇",
    "ひらがな",
    "が",
    "か\u{3099}",
    "カタカナー",
    "ｶﾀｶﾅｰ",
    "ﾞ",
    "𠀋",
    "、",
    "。",
    "「",
    "」",
    "（",
    "）",
    "・",
    "ภาษาไทย",
    "กิน",
    "ก่",
    "ລາວ",
    "ខ្មែរ",
    "မြန်မာ",
    "\"",
    "\"\"",
    "*",
    "^",
    ":",
    "(",
    ")",
    "+",
    "-",
    "{",
    "}",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(a b)",
    "terms:",
    "<",
    ">",
    "&",
    "'",
    "…",
    "😀",
    "👩\u{200d}👩\u{200d}👧",
    "\u{301}",
    "\u{200d}",
    "\u{fe0f}",
    "\u{1}",
];

const SPACES: &[&str] = &[
    " ", " ", " ", "  ", "\n", "\t", "\r\n", "\u{3000}", "\u{a0}",
];

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => proptest::sample::select(PIECES).prop_map(str::to_string),
        4 => proptest::sample::select(SPACES).prop_map(str::to_string),
        1 => proptest::char::range('\u{4e00}', '\u{9fff}').prop_map(|c| c.to_string()),
        1 => proptest::char::range('\u{3041}', '\u{3096}').prop_map(|c| c.to_string()),
        1 => "[a-zA-Z0-9]{1,8}",
    ]
}

/// Text of pieces only: every character's class is known to agree between
/// `char::is_alphanumeric` and unicode61 (no private-use or unassigned
/// characters, which unicode61 may take as letters).
fn known_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(piece(), 0..40).prop_map(|v| v.concat())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => known_text(),
        1 => proptest::collection::vec(prop_oneof![piece(), Just("\0".to_string())], 0..20).prop_map(|v| v.concat()),
        2 => any::<String>(),
        1 => "\\PC{1,40}",
    ]
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

fn index() -> Connection {
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(SCHEMA).unwrap();
    db
}

fn insert(db: &Connection, rowid: i64, text: &str) {
    db.execute(
        "INSERT INTO t (rowid, terms) VALUES (?1, ?2)",
        rusqlite::params![rowid, index_document(KEY, text).0],
    )
    .unwrap();
}

/// The rows holding any of `terms` (scoped to `KEY`), as the search's
/// statement looks them up: bound values, through `fts5vocab`.
fn rows_holding(db: &Connection, terms: &[String]) -> rusqlite::Result<Vec<i64>> {
    let scoped: Vec<String> = terms.iter().map(|t| scoped(KEY, t)).collect();
    let mut st = db.prepare(
        "SELECT DISTINCT doc FROM v WHERE term IN (SELECT value FROM json_each(?1)) ORDER BY doc",
    )?;
    let rows = st.query_map([serde_json::to_string(&scoped).unwrap()], |r| r.get(0))?;
    rows.collect()
}

/// The tokens the index holds for row `rowid`, in order.
fn held_tokens(db: &Connection, rowid: i64) -> Vec<String> {
    let mut st = db
        .prepare("SELECT term FROM v WHERE doc = ?1 ORDER BY offset")
        .unwrap();
    st.query_map([rowid], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The byte offsets where a query may cut `text`: grapheme cluster
/// boundaries not inside a word of a spaced script. A cluster belongs to a
/// word when its first character is a letter or number of a spaced script
/// (a combining diacritic, U+0300–U+0331, alone: it continues its word),
/// whatever follows in it (`x` with a halfwidth sound mark is a word's).
fn boundaries(text: &str) -> Vec<usize> {
    let wordy = |g: &str| {
        g.chars().next().is_some_and(|c| {
            (c.is_alphanumeric() && !is_unspaced(c)) || ('\u{300}'..='\u{331}').contains(&c)
        })
    };
    let mut out = vec![0];
    let graphemes: Vec<(usize, &str)> = text.grapheme_indices(true).collect();
    for pair in graphemes.windows(2) {
        if !(wordy(pair[0].1) && wordy(pair[1].1)) {
            out.push(pair[1].0);
        }
    }
    if !text.is_empty() {
        out.push(text.len());
    }
    out
}

/// `out` with its marks and escapes removed and one ellipsis at each end,
/// checking the marks are balanced, unnested and hold a letter or number.
fn plain(out: &str) -> Result<String, TestCaseError> {
    let mut rest = out;
    let mut text = String::new();
    let mut open = false;
    let mut marked = String::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("<mark>") {
            prop_assert!(!open, "nested mark in {:?}", out);
            open = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix("</mark>") {
            prop_assert!(open, "unopened mark in {:?}", out);
            prop_assert!(
                marked.chars().any(char::is_alphanumeric),
                "mark without a letter: {:?}",
                out
            );
            marked.clear();
            open = false;
            rest = r;
        } else {
            let c = rest.chars().next().unwrap();
            prop_assert!(
                c != '<' && c != '>' && c != '"' && c != '\'',
                "unescaped {:?} in {:?}",
                c,
                out
            );
            if open {
                marked.push(c);
            }
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    prop_assert!(!open, "unclosed mark in {:?}", out);
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let text = text.strip_prefix('…').unwrap_or(&text);
    let text = text.strip_suffix('…').unwrap_or(text);
    Ok(text.to_string())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn keyword_the_tokenizer_makes_exactly_the_counted_terms(text in any_text()) {
        let (doc, n) = index_document(KEY, &text);
        prop_assert_eq!(index_document(KEY, &text.clone()), (doc.clone(), n));
        let db = index();
        insert(&db, 1, &text);
        let held = held_tokens(&db, 1);
        let made: Vec<&str> = doc.split(' ').filter(|t| !t.is_empty()).collect();
        prop_assert_eq!(held.len(), n as usize, "{:?} -> {:?}", text, held);
        prop_assert_eq!(&held, &made);
        let prefix = format!("{KEY}z");
        prop_assert!(held.iter().all(|t| t.starts_with(&prefix) && t.len() > prefix.len()));
        // The row leaves as it entered (contentless_delete).
        db.execute("DELETE FROM t WHERE rowid = 1", []).unwrap();
        prop_assert!(held_tokens(&db, 1).is_empty());
    }

    #[test]
    fn keyword_query_terms_are_few_distinct_and_only_values(
        query in any_text(),
        max in 0usize..40,
        rows in proptest::collection::vec(known_text(), 0..4),
    ) {
        let terms = query_terms(&query, max);
        prop_assert_eq!(&query_terms(&query.clone(), max), &terms);
        prop_assert!(terms.len() <= max);
        let mut distinct = terms.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(distinct.len(), terms.len());
        prop_assert!(terms.iter().all(|t| !t.is_empty() && !t.contains(' ')));
        // A grapheme cluster that begins with a letter or number is a term
        // (or part of one); one that begins with anything else separates.
        let lettered = query
            .graphemes(true)
            .any(|g| g.chars().next().is_some_and(char::is_alphanumeric));
        if max > 0 && lettered {
            prop_assert!(!terms.is_empty(), "{:?}", query);
        }
        let db = index();
        insert(&db, 1, &query);
        for (i, row) in rows.iter().enumerate() {
            insert(&db, 2 + i as i64, row);
        }
        let found = rows_holding(&db, &terms);
        prop_assert!(found.is_ok(), "{:?}: {:?}", query, found);
        if !terms.is_empty() {
            prop_assert!(found.unwrap().contains(&1), "a query finds its own text: {:?}", query);
        }
    }

    #[test]
    fn keyword_a_substring_finds_its_row(
        text in known_text(),
        from in any::<proptest::sample::Index>(),
        to in any::<proptest::sample::Index>(),
        others in proptest::collection::vec(known_text(), 0..3),
    ) {
        let cuts = boundaries(&text);
        let (a, b) = (from.get(&cuts), to.get(&cuts));
        let (a, b) = (*a.min(b), *a.max(b));
        let sub = &text[a..b];
        let terms = query_terms(sub, 1000);
        // Only a substring with a term of its own can be found (empty,
        // spaces, punctuation have none).
        if terms.is_empty() {
            return Ok(());
        }
        let db = index();
        insert(&db, 1, &text);
        for (i, other) in others.iter().enumerate() {
            insert(&db, 2 + i as i64, other);
        }
        let held = held_tokens(&db, 1);
        for t in &terms {
            prop_assert!(held.contains(&scoped(KEY, t)), "{:?} of {:?} not in {:?}", t, sub, held);
        }
        prop_assert!(rows_holding(&db, &terms).unwrap().contains(&1));
    }

    #[test]
    fn keyword_snippet_is_an_escaped_marked_excerpt(
        text in any_text(),
        query in any_text(),
        chars_max in 0usize..120,
    ) {
        let out = snippet(&text, &query, chars_max);
        prop_assert_eq!(&snippet(&text.clone(), &query.clone(), chars_max), &out);
        let excerpt = plain(&out)?;
        prop_assert!(excerpt.chars().count() <= chars_max, "{:?} is longer than {}", out, chars_max);
        prop_assert!(text.contains(&excerpt), "{:?} is not in {:?}", excerpt, text);
        if chars_max > 0 && text.chars().any(|c| !c.is_whitespace()) {
            // (The excerpt may be the text's own `…`, stripped by `plain`.)
            prop_assert!(!out.is_empty(), "empty snippet of {:?}", text);
        }
    }

    #[test]
    fn keyword_fuse_sums_reciprocal_ranks(
        lists in proptest::collection::vec(
            (0.01f64..10.0, proptest::collection::vec(proptest::sample::select(&["a", "b", "c", "d", "e", "f"][..]), 0..8)),
            1..5,
        ),
        k in 0.0f64..100.0,
    ) {
        let owned: Vec<(f64, Vec<String>)> = lists
            .iter()
            .map(|(w, ids)| (*w, ids.iter().map(|s| s.to_string()).collect()))
            .collect();
        let borrowed: Vec<(f64, &[String])> = owned.iter().map(|(w, ids)| (*w, ids.as_slice())).collect();
        let fused = fuse(&borrowed, k);
        prop_assert_eq!(&fuse(&borrowed, k), &fused);
        // Each id once, scores as the formula says, highest first.
        let mut ids: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
        for (id, score) in &fused {
            let mut want = 0.0;
            for (w, list) in &owned {
                if let Some(p) = list.iter().position(|x| x == id) {
                    want += w / (k + (p + 1) as f64);
                }
            }
            prop_assert!((score - want).abs() <= 1e-12 * want.abs().max(1.0), "{}: {} vs {}", id, score, want);
        }
        prop_assert!(fused.windows(2).all(|w| w[0].1 >= w[1].1), "{:?}", fused);
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), fused.len());
        // An id first in every list comes first.
        let mut winner = owned.clone();
        for (_, list) in &mut winner {
            list.insert(0, "winner".to_string());
        }
        let borrowed: Vec<(f64, &[String])> = winner.iter().map(|(w, ids)| (*w, ids.as_slice())).collect();
        let fused = fuse(&borrowed, k);
        prop_assert_eq!(fused.first().map(|f| f.0.as_str()), Some("winner"));
    }
}

/// Every Japanese and Chinese character `is_unspaced` accepts is a term
/// of its own through the tokenizer, in one long run.
#[test]
fn keyword_every_han_and_kana_character_is_its_own_term() {
    let ranges = [
        0x3005..=0x303C,
        0x3040..=0x30FF,
        0x31F0..=0x31FF,
        0x3400..=0x4DBF,
        0x4E00..=0x9FFF,
        0xF900..=0xFAFF,
        0xFF66..=0xFF9F,
        0x1AFF0..=0x1B16F,
        0x20000..=0x3FFFF,
    ];
    let text: String = ranges
        .into_iter()
        .flatten()
        .filter_map(char::from_u32)
        .filter(|c| is_unspaced(*c))
        .collect();
    let count = text.chars().count();
    assert!(count > 90_000, "{count}");
    let (_, n) = index_document(KEY, &text);
    let db = index();
    insert(&db, 1, &text);
    let held = held_tokens(&db, 1);
    assert_eq!(held.len(), n as usize);
    for c in ['東', 'の', 'カ', '𠀋', '〇'] {
        assert!(held.contains(&scoped(KEY, &c.to_string())), "{c}");
    }
}

/// Japanese and English queries find their rows (the rows holding any of
/// their terms), and one tenant's terms never find another's rows.
#[test]
fn keyword_japanese_and_english_queries_find_their_rows() {
    let db = index();
    let rows = [
        (1, "東京都の人口は約1400万人です。"),
        (2, "京都の人口は約140万人です。"),
        (3, "Vectorizeの索引を更新する手順"),
        (4, "Deleted documents are removed from the index."),
        (5, "The error E1234 means the index is being rebuilt."),
        (6, "「検索」の設定"),
    ];
    for (id, text) in rows {
        insert(&db, id, text);
    }
    let find = |q: &str| rows_holding(&db, &query_terms(q, 32)).unwrap();
    assert_eq!(find("東京都"), [1, 2]); // 京都 as a pair matches row 2 too
    assert_eq!(find("東京"), [1]);
    assert_eq!(find("索引の更新"), [3]);
    assert_eq!(find("delete document"), [4]);
    assert_eq!(find("indexing"), [4, 5]);
    assert_eq!(find("E1234"), [5]);
    assert_eq!(find("\"検索\""), [6]);
    assert_eq!(find("「検索」"), [6]);
    // Query syntax of FTS5 is only text: its words are terms, the rest nothing.
    assert_eq!(find("NEAR(index E1234)"), [4, 5]);
    assert!(find("\" * ( ) : ^").is_empty());
    // Another tenant's row with the same words is not this tenant's.
    db.execute(
        "INSERT INTO t (rowid, terms) VALUES (9, ?1)",
        [index_document(KEY + 1, "東京都 index").0],
    )
    .unwrap();
    assert_eq!(find("東京 index"), [1, 4, 5]);
}
