//! The keyword search's text rules beside the index's terms
//! (`core::terms`): which characters belong to scripts written without
//! spaces, whether a text holds a query verbatim (hybrid's third ranking),
//! the highlighted excerpt of a result, and the fusion of ranked lists.
//!
//! Nothing here does I/O: the API renders [`snippet`]s and the search calls
//! [`fuse`].

use std::collections::{BTreeMap, BTreeSet};
use unicode_segmentation::UnicodeSegmentation;

/// Whether `c` is a letter or number (`char::is_alphanumeric`) of a script
/// written without spaces between words, which the index sets apart
/// character by character:
///
/// - Han: CJK Unified Ideographs (U+4E00–9FFF), Extension A (U+3400–4DBF),
///   CJK Compatibility Ideographs (U+F900–FAFF), and all of the
///   Supplementary and Tertiary Ideographic Planes (U+20000–3FFFF:
///   Extensions B–J and the Compatibility Ideographs Supplement); in CJK
///   Symbols and Punctuation, 々 〆 〇, the Hangzhou numerals 〡–〩 and
///   〸 〹 〺 〻 〼;
/// - Hiragana (U+3040–309F), Katakana (U+30A0–30FF, with ー U+30FC),
///   Katakana Phonetic Extensions (U+31F0–31FF), the halfwidth katakana of
///   Halfwidth and Fullwidth Forms (U+FF66–FF9F, with ｰ ﾞ ﾟ), the vertical
///   kana repeat marks 〱–〵, Kana Extended-B, Kana Supplement, Kana
///   Extended-A and Small Kana Extension (U+1AFF0–1B16F);
/// - Thai (U+0E00–0E7F), Lao (U+0E80–0EFF), Khmer (U+1780–17FF), Myanmar
///   (U+1000–109F) and Myanmar Extended-A, -B and -C (U+AA60–AA7F,
///   U+A9E0–A9FF, U+116D0–116FF).
///
/// Not Hangul (Korean is written with spaces), and not punctuation or
/// symbols (`、` `。` `「` `」` `・` `゛` are not letters). Other scripts
/// written without spaces (Tangut, Nüshu, Yi, Tai Tham, …) are not covered.
///
/// Explicit ranges rather than a script-property crate: `unicode-script`
/// (its Script and Script_Extensions tables) adds about 30 KB to the
/// Worker's wasm (12 KB gzipped) for these seven scripts, whose blocks are
/// stable; `char::is_alphanumeric` does the rest.
pub fn is_unspaced(c: char) -> bool {
    c.is_alphanumeric()
        && matches!(
            u32::from(c),
            // Thai, Lao.
            0x0E00..=0x0EFF
            // Myanmar.
            | 0x1000..=0x109F
            // Khmer.
            | 0x1780..=0x17FF
            // CJK Symbols and Punctuation: 々 〆 〇; 〡–〩; 〱–〵; 〸–〼.
            | 0x3005..=0x3007
            | 0x3021..=0x3029
            | 0x3031..=0x3035
            | 0x3038..=0x303C
            // Hiragana, Katakana.
            | 0x3040..=0x30FF
            // Katakana Phonetic Extensions.
            | 0x31F0..=0x31FF
            // CJK Unified Ideographs Extension A.
            | 0x3400..=0x4DBF
            // CJK Unified Ideographs.
            | 0x4E00..=0x9FFF
            // Myanmar Extended-B.
            | 0xA9E0..=0xA9FF
            // Myanmar Extended-A.
            | 0xAA60..=0xAA7F
            // CJK Compatibility Ideographs.
            | 0xF900..=0xFAFF
            // Halfwidth Katakana (Halfwidth and Fullwidth Forms).
            | 0xFF66..=0xFF9F
            // Myanmar Extended-C.
            | 0x116D0..=0x116FF
            // Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension.
            | 0x1AFF0..=0x1B16F
            // Supplementary and Tertiary Ideographic Planes.
            | 0x20000..=0x3FFFF
        )
}

/// A piece of a query term: a run of unspaced grapheme clusters, or the
/// text between two runs (spaced-script words, punctuation).
enum Part<'a> {
    Run(Vec<&'a str>),
    Segment(&'a str),
}

/// `term` cut into runs of grapheme clusters that begin with an unspaced
/// character, and the segments between them, in order.
fn parts(term: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut segment_start: Option<usize> = None;
    for (i, g) in term.grapheme_indices(true) {
        if g.chars().next().is_some_and(is_unspaced) {
            if let Some(segment) = segment_start.take().and_then(|s| term.get(s..i)) {
                out.push(Part::Segment(segment));
            }
            run.push(g);
        } else {
            if !run.is_empty() {
                out.push(Part::Run(std::mem::take(&mut run)));
            }
            segment_start.get_or_insert(i);
        }
    }
    if !run.is_empty() {
        out.push(Part::Run(run));
    }
    if let Some(segment) = segment_start.and_then(|s| term.get(s..)) {
        out.push(Part::Segment(segment));
    }
    out
}

/// Unicode's simple lowercase where it maps `c` to one character, else `c`:
/// matching compares character by character.
fn fold(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Whether `text` holds `query` verbatim, ignoring case and how much
/// whitespace separates words (a query of no letter or number holds
/// nothing): hybrid search's third ranking, the chunks that hold what the
/// user typed, whatever the two others make of it.
pub fn contains_verbatim(text: &str, query: &str) -> bool {
    fn normal(s: &str) -> Vec<char> {
        let mut out: Vec<char> = Vec::with_capacity(s.len());
        for word in s.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.extend(word.chars().map(fold));
        }
        out
    }
    if !query.chars().any(char::is_alphanumeric) {
        return false;
    }
    let (hay, needle) = (normal(text), normal(query));
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle.as_slice())
}

/// A keyword candidate's score: its bm25 score, raised by `boost_percent`
/// if its text holds the query verbatim ([`contains_verbatim`]). Terms are
/// scored apart (a Japanese run as its characters and their pairs), so a
/// chunk holding a pasted phrase in one piece and another holding its
/// pieces apart score alike without it; with it the first ranks above.
pub fn phrase_boosted(bm25: f64, text: &str, query: &str, boost_percent: u32) -> f64 {
    if boost_percent > 0 && contains_verbatim(text, query) {
        bm25 * (1.0 + f64::from(boost_percent) / 100.0)
    } else {
        bm25
    }
}

/// The most patterns [`snippet`] looks for (the words and runs of the
/// query, first ones first): each has a bit in a `u64`. Also the most
/// distinct pairs it looks for in one run.
const SNIPPET_PATTERNS_MAX: usize = 64;

/// How far [`snippet`] moves an excerpt's cut to fall between words
/// rather than inside one, in characters.
const SNIPPET_WORD_SNAP_CHARS: usize = 16;

/// What [`snippet`] marks for one word or run of the query.
enum Pattern {
    /// A spaced-script word (letters and numbers), found at word starts.
    Word(Vec<char>),
    /// A run of unspaced characters, found anywhere; if the whole run is
    /// nowhere in the text, its adjacent pairs (of grapheme clusters).
    Run {
        whole: Vec<char>,
        pairs: Vec<Vec<char>>,
    },
}

/// The patterns of `query`, lowercased, deduplicated, at most
/// [`SNIPPET_PATTERNS_MAX`].
fn patterns(query: &str) -> Vec<Pattern> {
    let mut seen: BTreeSet<Vec<char>> = BTreeSet::new();
    let mut out = Vec::new();
    for term in query.split(char::is_whitespace) {
        for part in parts(term) {
            match part {
                Part::Run(units) => {
                    let whole: Vec<char> = units.concat().chars().map(fold).collect();
                    if seen.insert(whole.clone()) {
                        let mut pairs: Vec<Vec<char>> = Vec::new();
                        for pair in units.windows(2) {
                            let pair: Vec<char> = pair.concat().chars().map(fold).collect();
                            if !pairs.contains(&pair) {
                                pairs.push(pair);
                            }
                            if pairs.len() >= SNIPPET_PATTERNS_MAX {
                                break;
                            }
                        }
                        out.push(Pattern::Run { whole, pairs });
                    }
                }
                Part::Segment(segment) => {
                    let mut word: Vec<char> = Vec::new();
                    for c in segment.chars().chain(std::iter::once(' ')) {
                        if c.is_alphanumeric() {
                            word.push(fold(c));
                        } else if !word.is_empty() {
                            let w = std::mem::take(&mut word);
                            if seen.insert(w.clone()) {
                                out.push(Pattern::Word(w));
                            }
                        }
                    }
                }
            }
        }
    }
    out.truncate(SNIPPET_PATTERNS_MAX);
    out
}

/// A marked span of the text, in characters, and the bits of the patterns
/// found in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    patterns: u64,
}

/// Where `needle` occurs in `hay` (at a position `at` accepts), as spans.
fn find(hay: &[char], needle: &[char], at: impl Fn(usize) -> bool, bit: u64, out: &mut Vec<Span>) {
    if needle.is_empty() || needle.len() > hay.len() {
        return;
    }
    for (i, window) in hay.windows(needle.len()).enumerate() {
        if window == needle && at(i) {
            out.push(Span {
                start: i,
                end: i.saturating_add(needle.len()),
                patterns: bit,
            });
        }
    }
}

/// Sorts `spans` and merges those that overlap or touch.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.start, s.end));
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => {
                last.end = last.end.max(s.end);
                last.patterns |= s.patterns;
            }
            _ => out.push(s),
        }
    }
    out
}

/// A highlight of `text` for a search result: an excerpt of at most
/// `chars_max` characters around its most match-dense place (the first of
/// the densest), HTML-escaped (`& < > " '`), every match of the query's
/// words and runs wrapped in `<mark>`…`</mark>`, and `…` where the excerpt
/// cuts text off (markup and ellipses are not counted in `chars_max`).
///
/// Matching is case-insensitive (simple lowercase, one character to one).
/// A spaced-script word of the query matches at the start of a word of the
/// text, and just that part is marked (`index` marks `<mark>index</mark>ing`,
/// which the porter stemmer finds too); a run of unspaced characters
/// matches anywhere as a whole or, when the whole run is nowhere in the
/// text, by its adjacent pairs. Overlapping or touching matches make one
/// mark, widened to whole grapheme clusters; the excerpt is the window
/// that holds the most distinct query words and runs, then the most marks,
/// with context around them, cut between grapheme clusters (and between
/// words when one is near), never inside a mark. A mark longer than
/// `chars_max` is not shown. With no match, the excerpt is the text's
/// first `chars_max` characters, without marks.
pub fn snippet(text: &str, query: &str, chars_max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    if chars_max == 0 || n == 0 {
        return String::new();
    }
    let folded: Vec<char> = chars.iter().copied().map(fold).collect();
    let is_alnum = |i: usize| chars.get(i).is_some_and(|c| c.is_alphanumeric());
    let unspaced_at = |i: usize| chars.get(i).is_some_and(|c| is_unspaced(*c));
    // Between words: not between two letters or numbers of a spaced script.
    let word_boundary = |i: usize| {
        i == 0 || i >= n || !is_alnum(i - 1) || !is_alnum(i) || unspaced_at(i - 1) || unspaced_at(i)
    };
    let word_start = |i: usize| i == 0 || !is_alnum(i - 1) || unspaced_at(i - 1) || unspaced_at(i);

    let mut found = Vec::new();
    for (p, pattern) in patterns(query).iter().enumerate() {
        let bit = 1u64 << p;
        match pattern {
            Pattern::Word(word) => find(&folded, word, word_start, bit, &mut found),
            Pattern::Run { whole, pairs } => {
                let before = found.len();
                find(&folded, whole, |_| true, bit, &mut found);
                if found.len() == before {
                    for pair in pairs {
                        find(&folded, pair, |_| true, bit, &mut found);
                    }
                }
            }
        }
    }

    // Grapheme cluster boundaries, in characters.
    let mut boundary = vec![false; n.saturating_add(1)];
    let mut at = 0usize;
    for g in text.graphemes(true) {
        if let Some(b) = boundary.get_mut(at) {
            *b = true;
        }
        at = at.saturating_add(g.chars().count());
    }
    if let Some(b) = boundary.get_mut(n) {
        *b = true;
    }
    let is_boundary = |i: usize| boundary.get(i).copied().unwrap_or(false);
    let boundary_at_or_before = |mut i: usize| {
        while i > 0 && !is_boundary(i) {
            i -= 1;
        }
        i
    };
    let boundary_at_or_after = |mut i: usize| {
        while i < n && !is_boundary(i) {
            i += 1;
        }
        i
    };

    let marks: Vec<Span> = merge(
        merge(found)
            .into_iter()
            .map(|s| Span {
                start: boundary_at_or_before(s.start),
                end: boundary_at_or_after(s.end),
                patterns: s.patterns,
            })
            .collect(),
    )
    .into_iter()
    .filter(|s| s.end - s.start <= chars_max)
    .collect();

    // The densest window of marks: most distinct patterns, then most marks.
    let mut best: Option<(u32, usize, usize, usize)> = None;
    let mut last = 0usize;
    for (first, mark) in marks.iter().enumerate() {
        last = last.max(first);
        while marks
            .get(last.saturating_add(1))
            .is_some_and(|m| m.end - mark.start <= chars_max)
        {
            last += 1;
        }
        let in_window = marks.get(first..=last).unwrap_or_default();
        let distinct = in_window
            .iter()
            .fold(0u64, |acc, m| acc | m.patterns)
            .count_ones();
        let score = (distinct, in_window.len());
        if best.is_none_or(|(d, c, _, _)| score > (d, c)) {
            best = Some((score.0, score.1, first, last));
        }
    }

    // A grapheme cluster of whitespace at `i`: its end.
    let blank_at = |i: usize| {
        let next = boundary_at_or_after(i.saturating_add(1));
        (i < n
            && chars
                .get(i..next)
                .is_some_and(|g| g.iter().all(|c| c.is_whitespace())))
        .then_some(next)
    };
    // A grapheme cluster of whitespace ending at `i`: its start.
    let blank_before = |i: usize| {
        let prev = boundary_at_or_before(i.saturating_sub(1));
        (prev < i
            && chars
                .get(prev..i)
                .is_some_and(|g| g.iter().all(|c| c.is_whitespace())))
        .then_some(prev)
    };

    let (a, b) = match best {
        None => {
            let mut a = 0;
            while let Some(next) = blank_at(a) {
                a = next;
            }
            let end = n.min(a.saturating_add(chars_max));
            let mut b = boundary_at_or_before(end);
            if b <= a {
                // One grapheme cluster longer than the excerpt: cut between characters.
                b = end;
            } else if let Some(w) = (b.saturating_sub(SNIPPET_WORD_SNAP_CHARS).max(a + 1)..=b)
                .rev()
                .find(|&i| word_boundary(i) && is_boundary(i))
            {
                b = w;
            }
            while let Some(prev) = blank_before(b).filter(|&prev| prev > a) {
                b = prev;
            }
            (a, b)
        }
        Some((_, _, first, last)) => {
            let (s, e) = match (marks.get(first), marks.get(last)) {
                (Some(f), Some(l)) => (f.start, l.end),
                _ => (0, 0),
            };
            // Context: half of what is left before the marks (less at the
            // text's start), the rest after (more at its end).
            let room = chars_max - (e - s);
            let mut a = s - (room / 2).min(s);
            let mut b = n.min(a.saturating_add(chars_max));
            if b - a < chars_max {
                a = b.saturating_sub(chars_max);
            }
            // Between words, when a word's edge is near.
            if let Some(w) =
                (a..=s.min(a.saturating_add(SNIPPET_WORD_SNAP_CHARS))).find(|&i| word_boundary(i))
            {
                a = w;
            }
            if let Some(w) = (e.max(b.saturating_sub(SNIPPET_WORD_SNAP_CHARS))..=b)
                .rev()
                .find(|&i| word_boundary(i))
            {
                b = w;
            }
            // Between grapheme clusters (marks begin and end on boundaries).
            a = boundary_at_or_after(a).min(s);
            b = boundary_at_or_before(b).max(e);
            // Never inside a mark: one the window cuts is left out.
            for m in &marks {
                if m.start < a && a < m.end {
                    a = m.end.min(s);
                }
                if m.start < b && b < m.end {
                    b = m.start.max(e);
                }
            }
            // No whitespace at the excerpt's edges.
            while let Some(next) = blank_at(a).filter(|&next| next <= s) {
                a = next;
            }
            while let Some(prev) = blank_before(b).filter(|&prev| prev >= e) {
                b = prev;
            }
            (a, b)
        }
    };

    let cut = |range: Option<&[char]>| range.is_some_and(|r| r.iter().any(|c| !c.is_whitespace()));
    let mut out = String::new();
    if cut(chars.get(..a)) {
        out.push('…');
    }
    let mut shown = marks
        .iter()
        .filter(|m| a <= m.start && m.end <= b)
        .peekable();
    for i in a..b {
        if shown.peek().is_some_and(|m| m.start == i) {
            out.push_str("<mark>");
        }
        if let Some(&c) = chars.get(i) {
            push_escaped(&mut out, c);
        }
        if shown.peek().is_some_and(|m| m.end == i + 1) {
            out.push_str("</mark>");
            shown.next();
        }
    }
    if cut(chars.get(b..)) {
        out.push('…');
    }
    out
}

/// Appends `c` to `out`, HTML-escaped.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        _ => out.push(c),
    }
}

/// Reciprocal rank fusion of ranked lists of ids, each with its weight:
/// an id's fused score is the sum, over the lists it is in, of
/// `weight / (k + rank)`, its rank in that list starting at 1 (a list's
/// position; an id repeated in one list counts at its first rank only).
/// Sorted by fused score, highest first, then by the id's best (lowest)
/// rank in any list, then by id: the same lists give the same order.
///
/// `k` is usually 60; with positive weights and `k > -1`, an id first in
/// every list comes first.
pub fn fuse(lists: &[(f64, &[String])], k: f64) -> Vec<(String, f64)> {
    let mut fused: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (weight, ids) in lists {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (position, id) in ids.iter().enumerate() {
            if !seen.insert(id.as_str()) {
                continue;
            }
            let rank = position.saturating_add(1);
            let entry = fused.entry(id.as_str()).or_insert((0.0, rank));
            entry.0 += weight / (k + rank as f64);
            entry.1 = entry.1.min(rank);
        }
    }
    let mut out: Vec<(&str, f64, usize)> = fused
        .into_iter()
        .map(|(id, (score, best))| (id, score, best))
        .collect();
    out.sort_by(|x, y| {
        y.1.total_cmp(&x.1)
            .then(x.2.cmp(&y.2))
            .then_with(|| x.0.cmp(y.0))
    });
    out.into_iter()
        .map(|(id, score, _)| (id.to_owned(), score))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_ignores_case_and_spacing_only() {
        let text = "The upload fails with Error  E4021\nwhen 東京都の人口 is read.";
        assert!(contains_verbatim(text, "error e4021 when"));
        assert!(contains_verbatim(text, "東京都の人口"));
        assert!(contains_verbatim(text, "  E4021 "));
        assert!(!contains_verbatim(text, "E4021 fails"));
        assert!(!contains_verbatim(text, "京都府"));
        assert!(!contains_verbatim(text, "!!!"));
        assert!(!contains_verbatim(text, " "));
    }

    #[test]
    fn unspaced_scripts() {
        for c in [
            '東',
            '京',
            '々',
            '〆',
            '〇',
            '〻',
            'の',
            'ゝ',
            'カ',
            'ー',
            'ヽ',
            'ｶ',
            'ｰ',
            'ﾞ',
            'ㇰ',
            '㐀',
            '丽',
            '𠀋',
            '𪚲',
            '\u{30000}',
            'ก',
            '๒',
            'ๆ',
            'ກ',
            'ក',
            'ៗ',
            'က',
            '၁',
        ] {
            assert!(is_unspaced(c), "{c} U+{:04X}", u32::from(c));
        }
        for c in [
            'a', 'Z', '1', 'é', 'Я', 'א', 'ا', '한', 'ㄱ', '、', '。', '「', '」', '・', '゛', '･',
            '｡', '！', 'Ａ', '１', '฿', '។', ' ', '\u{3000}', '⺀', '⼀', '〜', '🈀', '\u{3099}',
        ] {
            assert!(!is_unspaced(c), "{c} U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn snippet_marks_english_words_at_word_starts() {
        assert_eq!(
            snippet("deleted documents", "Delete", 100),
            "<mark>delete</mark>d documents"
        );
        assert_eq!(
            snippet("Reindex the index before indexing.", "INDEX", 100),
            "Reindex the <mark>index</mark> before <mark>index</mark>ing."
        );
        assert_eq!(
            snippet("Error E1234: <b>\"x\" & 'y'</b>", "error e1234", 100),
            "<mark>Error</mark> <mark>E1234</mark>: &lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"
        );
        // Query syntax is just words.
        assert_eq!(
            snippet("near a bar", r#"NEAR(a" bar*"#, 100),
            "<mark>near</mark> <mark>a</mark> <mark>bar</mark>"
        );
    }

    #[test]
    fn snippet_marks_japanese_runs_as_substrings() {
        assert_eq!(
            snippet("全文検索では、検索語を索引から探します。", "検索", 100),
            "全文<mark>検索</mark>では、<mark>検索</mark>語を索引から探します。"
        );
        // Overlapping matches make one mark.
        assert_eq!(
            snippet("東京都庁", "東京 京都", 100),
            "<mark>東京都</mark>庁"
        );
        // The whole run is nowhere: its pairs are marked.
        assert_eq!(
            snippet("京都タワーに行く", "東京タワー", 100),
            "京都<mark>タワー</mark>に行く"
        );
        assert_eq!(
            snippet("Vectorizeの索引を更新する", "索引の更新", 100),
            "Vectorizeの<mark>索引</mark>を<mark>更新</mark>する"
        );
    }

    #[test]
    fn snippet_cuts_around_the_densest_place() {
        let text = "Intro words that say nothing at all. The queue retries a failed job \
                    with backoff, then the job is dead. Closing words here.";
        assert_eq!(
            snippet(text, "job retries", 40),
            "…The queue <mark>retries</mark> a failed <mark>job</mark> with…"
        );
        // No match: the start, without marks.
        assert_eq!(snippet(text, "zebra", 18), "Intro words that…");
        assert_eq!(snippet("  short  ", "zzz", 20), "short");
        assert_eq!(snippet(text, "job", 0), "");
        assert_eq!(snippet("", "job", 10), "");
        // Japanese: the run as a whole, with context on both sides.
        let ja =
            "今日は晴れです。明日の天気予報によると、明日は雨が降るそうです。天気は変わります。";
        assert_eq!(
            snippet(ja, "明日の天気", 16),
            "…晴れです。<mark>明日の天気</mark>予報によると…"
        );
        // The window with both words beats the first match of one.
        let ja = "雨の日。今日は晴れです。明日は雨が降るそうです。";
        assert_eq!(
            snippet(ja, "雨 明日", 12),
            "…れです。<mark>明日</mark>は<mark>雨</mark>が降るそ…"
        );
    }

    #[test]
    fn snippet_never_cuts_a_mark_or_a_cluster() {
        // The only match does not fit: no marks.
        assert_eq!(snippet("abc documentation", "documentation", 5), "abc…");
        // A combining mark stays in the mark with its letter.
        assert_eq!(
            snippet("cafe\u{301} au lait", "cafe", 100),
            "<mark>cafe\u{301}</mark> au lait"
        );
        // A window edge inside a mark leaves that mark out.
        assert_eq!(
            snippet("東京と大阪", "東京 大阪", 4),
            "<mark>東京</mark>と…"
        );
        assert_eq!(
            snippet("aaaa c bbbb", "aaaa bbbb", 8),
            "<mark>aaaa</mark> c…"
        );
        // Marks merged past the window are not shown; the excerpt is the start.
        assert_eq!(snippet("東京都庁前", "東京 京都 都庁", 3), "東京都…");
    }

    #[test]
    fn fuse_sums_reciprocal_ranks() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let vector = s(&["a", "b", "c"]);
        let keyword = s(&["c", "a", "d", "a"]);
        let fused = fuse(&[(1.0, &vector), (1.0, &keyword)], 60.0);
        let ids: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b", "d"]);
        let score = |id: &str| fused.iter().find(|(x, _)| x == id).map(|(_, s)| *s);
        assert_eq!(score("a"), Some(1.0 / 61.0 + 1.0 / 62.0));
        assert_eq!(score("d"), Some(1.0 / 63.0));
        // Ties: best rank, then id.
        let x = s(&["q", "p"]);
        let y = s(&["p", "q"]);
        let tied = fuse(&[(1.0, &x), (1.0, &y)], 60.0);
        assert_eq!(tied.first().map(|t| t.0.as_str()), Some("p"));
        let one = s(&["z", "y"]);
        let two = s(&["y"]);
        // y: 1/62 + 1/61 (best rank 1), z: 1/61.
        let fused = fuse(&[(1.0, &one), (2.0, &two)], 60.0);
        assert_eq!(fused.first().map(|t| t.0.as_str()), Some("y"));
        assert!(fuse(&[], 60.0).is_empty());
    }
}
