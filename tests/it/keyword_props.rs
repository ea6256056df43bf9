//! Property tests of the keyword index's text rules (`core::keyword`), on a
//! real SQLite FTS5 table with the index's tokenizer:
//!
//! - `index_terms` keeps every character in order, adds only spaces, and is
//!   `None` exactly when the text has no unspaced character;
//! - for any query, `match_expression` is only quoted strings joined by
//!   ` OR ` and FTS5 accepts it;
//! - a substring of a text, cut between words (or made of unspaced
//!   characters), finds the text's row;
//! - `snippet` never panics, stays within its length, and is a substring of
//!   the text once its marks and escapes are removed;
//! - `fuse` is deterministic, sums reciprocal ranks, and an id first in
//!   every list comes first.
//!
//! `PROPTEST_CASES` cases per property (default 2,000).

use ingest_pipeline::core::keyword::{fuse, index_terms, is_unspaced, match_expression, snippet};
use proptest::prelude::*;
use rusqlite::Connection;

const SCHEMA: &str =
    "CREATE VIRTUAL TABLE t USING fts5(terms, tokenize='porter unicode61 remove_diacritics 2');
     CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');";

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

/// What the index holds for `text`.
fn terms(text: &str) -> String {
    index_terms(text).unwrap_or_else(|| text.to_string())
}

fn insert(db: &Connection, rowid: i64, text: &str) {
    db.execute(
        "INSERT INTO t (rowid, terms) VALUES (?1, ?2)",
        rusqlite::params![rowid, terms(text)],
    )
    .unwrap();
}

fn search(db: &Connection, expression: &str) -> rusqlite::Result<Vec<i64>> {
    let mut st = db.prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rowid")?;
    let rows = st.query_map([expression], |r| r.get(0))?;
    rows.collect()
}

/// How many tokens the index makes of `text`, alone in an index.
fn token_count(text: &str) -> i64 {
    let db = index();
    insert(&db, 1, text);
    db.query_row("SELECT count(*) FROM v", [], |r| r.get(0))
        .unwrap()
}

/// `expression` is `"…"( OR "…")*`, each string's inner quotes doubled.
fn phrases_of(expression: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = expression.chars().peekable();
    loop {
        if chars.next()? != '"' {
            return None;
        }
        let mut phrase = String::new();
        loop {
            match chars.next()? {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    phrase.push('"');
                }
                '"' => break,
                c => phrase.push(c),
            }
        }
        out.push(phrase);
        match chars.next() {
            None => return Some(out),
            Some(' ') => {
                for want in ['O', 'R', ' '] {
                    if chars.next()? != want {
                        return None;
                    }
                }
            }
            Some(_) => return None,
        }
    }
}

/// Where unicode61 (after `index_terms`) surely starts or ends a token: not
/// between two letters or numbers of a spaced script. With
/// `remove_diacritics`, a combining diacritic (U+0300–U+0331) continues a
/// token, so it counts as a letter here: that leaves out some boundaries,
/// never adds one.
fn boundaries(chars: &[char]) -> Vec<usize> {
    let letter = |c: char| c.is_alphanumeric() || ('\u{300}'..='\u{331}').contains(&c);
    (0..=chars.len())
        .filter(|&i| {
            if i == 0 || i == chars.len() {
                return true;
            }
            let (p, c) = (chars[i - 1], chars[i]);
            !(letter(p) && letter(c)) || is_unspaced(p) || is_unspaced(c)
        })
        .collect()
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
    fn keyword_index_terms_keep_every_character(text in any_text()) {
        let out = index_terms(&text);
        prop_assert_eq!(out.is_some(), text.chars().any(is_unspaced));
        prop_assert_eq!(&index_terms(&text.clone()), &out);
        let Some(out) = out else { return Ok(()) };
        // `out` is `text` with spaces added.
        let mut want = text.chars().peekable();
        let mut added = 0;
        for c in out.chars() {
            if want.peek() == Some(&c) {
                want.next();
            } else {
                prop_assert_eq!(c, ' ', "{:?} -> {:?}", text, out);
                added += 1;
            }
        }
        prop_assert!(want.next().is_none(), "{:?} -> {:?}", text, out);
        prop_assert_eq!(out.chars().count(), text.chars().count() + added);
        // Each unspaced character stands apart.
        let chars: Vec<char> = out.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            if is_unspaced(*c) {
                let apart = |n: Option<&char>| n.is_none_or(|n| n.is_whitespace());
                prop_assert!(apart(i.checked_sub(1).and_then(|p| chars.get(p))), "{:?}", out);
                prop_assert!(apart(chars.get(i + 1)), "{:?}", out);
            }
        }
    }

    #[test]
    fn keyword_match_expression_is_accepted_by_fts5(
        query in any_text(),
        phrases_max in 0usize..40,
        rows in proptest::collection::vec(known_text(), 0..4),
    ) {
        let db = index();
        insert(&db, 1, "Vectorizeの索引を更新する。Deleted documents are removed.");
        insert(&db, 2, &query);
        for (i, row) in rows.iter().enumerate() {
            insert(&db, 3 + i as i64, row);
        }
        let Some(expression) = match_expression(&query, phrases_max) else {
            prop_assert!(phrases_max == 0 || !query.chars().any(char::is_alphanumeric), "{:?}", query);
            return Ok(());
        };
        let phrases = phrases_of(&expression);
        prop_assert!(phrases.is_some(), "not strings joined by OR: {:?}", expression);
        let phrases = phrases.unwrap();
        prop_assert!(!phrases.is_empty() && phrases.len() <= phrases_max, "{:?}", expression);
        for phrase in &phrases {
            prop_assert!(phrase.chars().any(char::is_alphanumeric), "{:?}", expression);
            prop_assert!(!phrase.chars().any(char::is_control), "{:?}", expression);
        }
        let found = search(&db, &expression);
        prop_assert!(found.is_ok(), "{:?} for {:?}: {:?}", expression, query, found);
        prop_assert_eq!(match_expression(&query.clone(), phrases_max), Some(expression));
    }

    #[test]
    fn keyword_a_substring_finds_its_row(
        text in known_text(),
        from in any::<proptest::sample::Index>(),
        to in any::<proptest::sample::Index>(),
        others in proptest::collection::vec(known_text(), 0..3),
    ) {
        let chars: Vec<char> = text.chars().collect();
        let cuts = boundaries(&chars);
        let (a, b) = (from.get(&cuts), to.get(&cuts));
        let (a, b) = (*a.min(b), *a.max(b));
        let sub: String = chars[a..b].iter().collect();
        // Only a substring with a token of its own can be found (about one
        // case in five has none: empty, spaces, punctuation).
        if token_count(&sub) == 0 {
            return Ok(());
        }
        let db = index();
        insert(&db, 1, &text);
        for (i, other) in others.iter().enumerate() {
            insert(&db, 2 + i as i64, other);
        }
        let expression = match_expression(&sub, 1000);
        prop_assert!(expression.is_some(), "{:?}", sub);
        let expression = expression.unwrap();
        let found = search(&db, &expression).unwrap();
        prop_assert!(found.contains(&1), "{:?} ({:?}) not found in {:?}", sub, expression, terms(&text));
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

/// unicode61 takes every Japanese and Chinese character `is_unspaced`
/// accepts as a letter: set apart, each is a token of its own.
#[test]
fn keyword_every_han_and_kana_character_is_its_own_token() {
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
    let count = text.chars().count() as i64;
    assert!(count > 90_000, "{count}");
    assert_eq!(token_count(&text), count);
}

/// The examples of the task, end to end on FTS5.
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
    let find = |q: &str| search(&db, &match_expression(q, 32).unwrap()).unwrap();
    assert_eq!(find("東京都"), [1, 2]); // 京都 as a pair matches row 2 too
    assert_eq!(search(&db, "\"東 京 都\"").unwrap(), [1]);
    assert_eq!(find("東京都の人口"), [1, 2]);
    assert_eq!(find("索引の更新"), [3]);
    assert_eq!(find("delete document"), [4]);
    assert_eq!(find("indexing"), [4, 5]);
    assert_eq!(find("error E1234"), [5]);
    assert_eq!(find("\"検索\""), [6]);
    assert_eq!(find("「検索」"), [6]);
    // FTS5 syntax is text: none of these is an error.
    for q in [
        "foo\" OR bar*",
        "NEAR(a b)",
        "terms:x",
        "^東京",
        "a AND",
        "OR",
        "(",
        "-x",
        "{terms}: y",
    ] {
        if let Some(e) = match_expression(q, 32) {
            search(&db, &e).unwrap_or_else(|err| panic!("{q:?} -> {e:?}: {err}"));
        }
    }
    // bm25 ranks the exact phrase above the paraphrase.
    let mut st = db
        .prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY bm25(t)")
        .unwrap();
    let ranked: Vec<i64> = st
        .query_map([match_expression("東京都の人口", 32).unwrap()], |r| {
            r.get(0)
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(ranked, [1, 2]);
}
