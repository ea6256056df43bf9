//! `unicode-v2`: a greedy, token-aware splitter over Unicode segmentation.
//!
//! Each chunk is the longest stretch from its start whose conservative token
//! count ([`super::tokens`]) fits the limit, cut back to the strongest
//! boundary past the first quarter of that stretch (a low floor: after an
//! edit, chunk boundaries fall back onto the same paragraphs and sentences
//! within a chunk or two, so unchanged chunks keep their text and their
//! vectors are reused). Boundaries, strongest first:
//!
//! 1. a Markdown ATX heading (`#`–`######`) at a line start, outside code
//!    fences: the next chunk starts with the heading, with no overlap;
//! 2. a Markdown code fence (before its opening line, after its closing line);
//! 3. a paragraph: a blank line, or U+2029 PARAGRAPH SEPARATOR;
//! 4. a line break: LF, CR LF, CR, NEL, VT, FF, U+2028 LINE SEPARATOR;
//! 5. a sentence end: the Unicode sentence boundaries of UAX #29, which end
//!    sentences at `.!?` and at `。！？` without a following space;
//! 6. a clause: after `、，；：`, or after `,;:` followed by whitespace;
//! 7. the end of a word before whitespace (every Unicode White_Space
//!    character: no-break and ideographic spaces too);
//! 8. a UAX #29 word boundary (between ideographs, kana runs, punctuation);
//! 9. a grapheme cluster boundary (never inside an emoji ZWJ sequence or
//!    between a letter and its combining marks);
//! 10. a character boundary, only when one grapheme cluster is longer than
//!     a chunk.
//!
//! Every position is a byte offset on a `char` boundary by construction:
//! each comes from `char_indices`, a segmenter's offsets, or the end of a
//! character found by one of those. Consecutive chunks share about
//! `overlap` tokens, starting at a word boundary. Whitespace at either end
//! of a chunk is trimmed; whitespace-only stretches make no chunk.

use super::tokens::{Meter, TokenFamily};
use super::{push_trimmed, skip_whitespace, Chunk, ContentType};
use unicode_segmentation::UnicodeSegmentation;

pub(super) fn chunk_text<'a>(
    text: &'a str,
    kind: ContentType,
    size_max_tokens: usize,
    overlap_tokens: usize,
    family: TokenFamily,
) -> Vec<Chunk<'a>> {
    let size_max = size_max_tokens.max(family.chunk_tokens_min());
    let overlap = overlap_tokens.min(size_max / 2);
    let fences = match kind {
        ContentType::Markdown => fence_spans(text),
        ContentType::Plain => Vec::new(),
    };
    let len = text.len();
    let mut chunks = Vec::new();
    let mut start = skip_whitespace(text, 0);
    while start < len {
        let (floor, hard_end) = fit(text, start, size_max, family);
        let (end, at_heading) = if hard_end >= len {
            (len, false)
        } else {
            best_break(text, start, floor, hard_end, kind, &fences)
        };
        push_trimmed(text, start, end, &mut chunks);
        if end >= len {
            break;
        }
        let next = if at_heading || overlap == 0 {
            end
        } else {
            overlap_start(text, start, end, overlap, family)
        };
        start = skip_whitespace(text, next);
    }
    chunks
}

/// A chunk ends past this fraction of its limit (unless the text ends).
const FLOOR_DIVISOR: usize = 4;

/// From `start` (not whitespace): `(floor, hard_end)`, where `hard_end` ends
/// the longest stretch whose count fits `size_max` (at least one character,
/// so that the loop always advances) and `floor` is where the count first
/// passed a quarter of it.
fn fit(text: &str, start: usize, size_max: usize, family: TokenFamily) -> (usize, usize) {
    let tail = text.get(start..).unwrap_or_default();
    let mut meter = Meter::new(family);
    let (mut floor, mut hard_end) = (None, start);
    for (i, c) in tail.char_indices() {
        meter.push(c);
        if meter.total() > size_max && hard_end > start {
            break;
        }
        hard_end = start + i + c.len_utf8();
        if floor.is_none() && meter.total() > size_max / FLOOR_DIVISOR {
            floor = Some(hard_end);
        }
    }
    (floor.unwrap_or(hard_end).min(hard_end), hard_end)
}

/// Is `c` a line terminator (Unicode's mandatory breaks)?
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// The end of a chunk that starts at `start` and may not pass `hard_end`:
/// the strongest boundary in `(floor, hard_end]`, and whether it is a
/// Markdown heading.
fn best_break(
    text: &str,
    start: usize,
    floor: usize,
    hard_end: usize,
    kind: ContentType,
    fences: &[(usize, usize)],
) -> (usize, bool) {
    let w = Window {
        text,
        start,
        floor,
        hard_end,
    };
    if kind == ContentType::Markdown {
        if let Some(p) = w.last(heading_start(text, floor, hard_end, fences)) {
            return (p, true);
        }
        if let Some(p) = w.fence_edge(fences) {
            return (p, false);
        }
    }
    let found = w
        .paragraph_or_line()
        .or_else(|| w.sentence())
        .or_else(|| w.clause())
        .or_else(|| w.word_end())
        .or_else(|| w.segment(Segments::Words))
        .or_else(|| w.segment(Segments::Graphemes));
    (found.unwrap_or(hard_end), false)
}

/// Where a chunk from `start` may end: in `(floor, hard_end]`, each level
/// of the hierarchy a method that finds its last boundary there.
struct Window<'a> {
    text: &'a str,
    start: usize,
    floor: usize,
    hard_end: usize,
}

impl<'a> Window<'a> {
    fn text(&self) -> &'a str {
        self.text.get(self.floor..self.hard_end).unwrap_or_default()
    }

    fn contains(&self, p: usize) -> bool {
        p > self.floor.max(self.start) && p <= self.hard_end
    }

    fn last(&self, found: Option<usize>) -> Option<usize> {
        found.filter(|&p| self.contains(p))
    }

    /// 2. The last code fence edge in the window.
    fn fence_edge(&self, fences: &[(usize, usize)]) -> Option<usize> {
        fences
            .iter()
            .flat_map(|&(open, close)| [open, close])
            .filter(|&p| self.contains(p))
            .max()
    }

    /// 3 and 4: paragraphs, then lines, found in one pass.
    fn paragraph_or_line(&self) -> Option<usize> {
        let (mut paragraph, mut line, mut breaks) = (None, None, 0u32);
        let mut chars = self.text().char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if is_line_break(c) {
                // CR LF is one break; U+2029 ends a paragraph on its own.
                if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
                    continue;
                }
                breaks += if c == '\u{2029}' { 2 } else { 1 };
                let p = self.floor + i + c.len_utf8();
                line = Some(p);
                if breaks >= 2 {
                    paragraph = Some(p);
                }
            } else if !c.is_whitespace() {
                breaks = 0;
            }
        }
        self.last(paragraph).or(self.last(line))
    }

    /// 5. Sentences, segmented from the chunk's start with some text past
    ///    the window as context.
    fn sentence(&self) -> Option<usize> {
        self.segment(Segments::Sentences)
    }

    /// 6. Clauses.
    fn clause(&self) -> Option<usize> {
        let mut clause = None;
        let mut chars = self.text().char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let next_is_space = chars.peek().is_some_and(|&(_, n)| n.is_whitespace());
            if matches!(c, '、' | '，' | '；' | '：')
                || (matches!(c, ',' | ';' | ':') && next_is_space)
            {
                clause = Some(self.floor + i + c.len_utf8());
            }
        }
        self.last(clause)
    }

    /// 7. The end of a word before whitespace.
    fn word_end(&self) -> Option<usize> {
        let mut word_end = None;
        let mut prev_space = true;
        for (i, c) in self.text().char_indices() {
            let space = c.is_whitespace();
            if space && !prev_space {
                word_end = Some(self.floor + i);
            }
            prev_space = space;
        }
        self.last(word_end)
    }

    /// The last boundary a UAX #29 segmenter finds in the window, reading
    /// from the chunk's start to `LOOKAHEAD_BYTES` past `hard_end`.
    fn segment(&self, segments: Segments) -> Option<usize> {
        let from_start = context(self.text, self.start, self.hard_end);
        let at = |(i, _): (usize, &str)| self.start + i;
        let contains = |p: usize| self.contains(p);
        match segments {
            Segments::Sentences => last_bound(
                from_start.split_sentence_bound_indices().map(at),
                self.hard_end,
                contains,
            ),
            Segments::Words => last_bound(
                from_start.split_word_bound_indices().map(at),
                self.hard_end,
                contains,
            ),
            Segments::Graphemes => last_bound(
                from_start.grapheme_indices(true).map(at),
                self.hard_end,
                contains,
            ),
        }
    }
}

/// The UAX #29 segmentations of the hierarchy (levels 5, 8 and 9).
#[derive(Clone, Copy)]
enum Segments {
    Sentences,
    Words,
    Graphemes,
}

/// How far past the position it decides about a segmenter reads. UAX #29
/// decides almost every boundary from a few characters around it, but a
/// segmenter finds a boundary by reading on to the next one, which in text
/// without sentence ends, or in one long word, is the end of the text: read
/// from every chunk, that made chunking quadratic (400 KB of words without
/// a full stop or a line break took 3.6 s). The one rule that looks
/// further is SB8 (no sentence break after `x. ` when a lowercase letter
/// follows after only digits, punctuation and spaces): with more than this
/// many bytes of those before the letter, the sentence breaks. Part of
/// `unicode-v2`'s definition, like its hierarchy, so not a setting: another
/// value could move chunk boundaries of recorded generations.
pub const LOOKAHEAD_BYTES: usize = 1024;

/// The text from `from` to `LOOKAHEAD_BYTES` past `until` (or to its end),
/// ending on a character boundary: what a segmenter deciding about
/// positions up to `until` reads.
fn context(text: &str, from: usize, until: usize) -> &str {
    let mut end = until.saturating_add(LOOKAHEAD_BYTES).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text.get(from..end).unwrap_or_default()
}

/// The last of the increasing `bounds` that is in the window, reading no
/// further than `hard_end`.
fn last_bound(
    bounds: impl Iterator<Item = usize>,
    hard_end: usize,
    in_window: impl Fn(usize) -> bool,
) -> Option<usize> {
    bounds
        .take_while(|&p| p <= hard_end)
        .filter(|&p| in_window(p))
        .last()
}

/// The last Markdown heading line that starts in `(floor, hard_end]`,
/// outside a code fence.
fn heading_start(
    text: &str,
    floor: usize,
    hard_end: usize,
    fences: &[(usize, usize)],
) -> Option<usize> {
    let window = text.get(floor..hard_end)?;
    window
        .match_indices('\n')
        .map(|(i, _)| floor + i + 1)
        .filter(|&p| is_heading_line(text.get(p..).unwrap_or_default()))
        .rfind(|&p| !fences.iter().any(|&(open, close)| p > open && p < close))
}

/// Does `line` (text from a line start on) open with an ATX heading?
fn is_heading_line(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes)
        && line
            .as_bytes()
            .get(hashes)
            .is_none_or(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Fenced code blocks (``` or ~~~, up to three spaces of indentation):
/// `(start of the opening line, end of the closing line)`; an unclosed
/// fence runs to the end of the text.
fn fence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, u8, usize)> = None;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let fence_char = body.bytes().next().filter(|b| matches!(b, b'`' | b'~'));
        let run = fence_char.map_or(0, |f| body.bytes().take_while(|&b| b == f).count());
        match (open, fence_char) {
            (None, Some(f)) if indent <= 3 && run >= 3 => open = Some((line_start, f, run)),
            (Some((start, f, n)), Some(g))
                if g == f
                    && indent <= 3
                    && run >= n
                    && body.get(run..).is_some_and(|rest| rest.trim().is_empty()) =>
            {
                spans.push((start, line_end));
                open = None;
            }
            _ => {}
        }
        line_start = line_end;
    }
    if let Some((start, _, _)) = open {
        spans.push((start, text.len()));
    }
    spans
}

/// Where the chunk after `[start, end)` begins: about `overlap` tokens
/// before `end`, at the first UAX #29 word boundary (segmented from
/// `start`) from there that starts a word after whitespace, else at the
/// first word boundary from there (unspaced text); `end` itself (no overlap)
/// when there is none after `start`.
fn overlap_start(
    text: &str,
    start: usize,
    end: usize,
    overlap: usize,
    family: TokenFamily,
) -> usize {
    let chunk = text.get(start..end).unwrap_or_default();
    let mut weight = 0;
    let mut from = end;
    for (i, c) in chunk.char_indices().rev() {
        weight += if c.is_whitespace() {
            usize::from(family != TokenFamily::WordPiece)
        } else {
            family.weight(c)
        };
        if weight > overlap {
            break;
        }
        from = start + i;
    }
    // Word boundaries after a whitespace character do not depend on what
    // precedes it, so segmenting from the last one before `from` finds the
    // same boundaries as segmenting from `start`, reading less.
    let anchor = text
        .get(start..from)
        .and_then(|head| head.char_indices().rev().find(|(_, c)| c.is_whitespace()))
        .map_or(start, |(i, _)| start + i);
    let bounds: Vec<usize> = context(text, anchor, end)
        .split_word_bound_indices()
        .map(|(i, _)| anchor + i)
        .skip_while(|&p| p < from)
        .take_while(|&p| p < end)
        .collect();
    let starts_word = |p: usize| {
        let before = text.get(..p).and_then(|h| h.chars().next_back());
        let at = text.get(p..).and_then(|t| t.chars().next());
        before.is_some_and(char::is_whitespace) && at.is_some_and(|c| !c.is_whitespace())
    };
    let next = bounds
        .iter()
        .copied()
        .find(|&p| starts_word(p))
        .or(bounds.first().copied());
    match next {
        Some(p) if p > start && p < end => p,
        _ => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WP: TokenFamily = TokenFamily::WordPiece;

    fn chunks(text: &str, kind: ContentType, size: usize, overlap: usize) -> Vec<String> {
        chunk_text(text, kind, size, overlap, WP)
            .into_iter()
            .map(|c| c.text.to_string())
            .collect()
    }

    /// Chunk ends depend on no text more than `LOOKAHEAD_BYTES` past the
    /// chunk's window; that is what keeps chunking linear in the text.
    /// Here the full text would keep `x. ` unbroken (SB8: a lowercase
    /// letter follows after only digits and spaces), its prefix breaks it.
    #[test]
    fn chunk_ends_read_a_bounded_lookahead() {
        let head = format!("{}x. ", "w ".repeat(150));
        let digits = "1 ".repeat(4000);
        let full = format!("{head}{digits}a end");
        let prefix = &full[..head.len() + 6000];
        let (a, b) = (
            chunks(&full, ContentType::Plain, 200, 0),
            chunks(prefix, ContentType::Plain, 200, 0),
        );
        assert!(a[0].ends_with("x."), "{:?}", a[0]);
        assert_eq!(a[0], b[0]);
        // And the segmenters read only so far: the context ends
        // LOOKAHEAD_BYTES past its position, on a character boundary.
        let ja = "日本語".repeat(1000);
        let c = context(&ja, 3, 10);
        // 10 + 1,024 = 1,034 is inside a character; 1,035 is the next boundary.
        assert_eq!(c.len(), 10 + LOOKAHEAD_BYTES + 1 - 3);
        assert_eq!(context(&ja, 0, ja.len()).len(), ja.len());
    }

    #[test]
    fn japanese_breaks_after_sentence_ends() {
        // 20 sentences of 12 characters; 64 tokens hold five of them.
        let text = "日本語の文章を書きました。".repeat(20);
        let c = chunks(&text, ContentType::Plain, 64, 0);
        assert!(c.len() >= 4, "{c:?}");
        for chunk in &c {
            assert!(chunk.ends_with('。'), "{chunk:?}");
            assert!(WP.count(chunk) <= 64);
        }
    }

    #[test]
    fn a_sentence_longer_than_a_chunk_breaks_after_a_clause() {
        // One sentence, clauses of 9 characters joined by 、.
        let text = format!("{}終わり。", "長い文の一部分です、".repeat(30));
        let c = chunks(&text, ContentType::Plain, 64, 0);
        assert!(c.len() > 2, "{c:?}");
        for chunk in &c[..c.len() - 1] {
            assert!(chunk.ends_with('、'), "{chunk:?}");
        }
    }

    #[test]
    fn unbroken_ideographs_split_between_characters_under_the_limit() {
        let text = "語".repeat(1000);
        let c = chunks(&text, ContentType::Plain, 100, 10);
        assert!(c.iter().all(|t| WP.count(t) <= 100));
        assert!(c.len() >= 10);
    }

    #[test]
    fn emoji_sequences_stay_whole() {
        let family = "👩\u{200d}👩\u{200d}👧\u{200d}👦";
        let text = family.repeat(200);
        for t in chunks(&text, ContentType::Plain, 40, 8) {
            assert!(
                t.starts_with('👩') && t.ends_with('👦'),
                "cut inside a ZWJ sequence: {t:?}"
            );
        }
    }

    #[test]
    fn markdown_headings_start_chunks_and_fenced_hashes_do_not() {
        let body = "Some words of a section body. ".repeat(8);
        let text = format!("# One\n{body}\n```sh\n# not a heading\n{body}\n```\n# Two\n{body}");
        let c = chunks(&text, ContentType::Markdown, 100, 10);
        assert!(c.iter().any(|t| t.starts_with("# Two")), "{c:?}");
        assert!(!c.iter().any(|t| t.starts_with("# not a heading")), "{c:?}");
    }

    #[test]
    fn overlap_starts_at_a_word() {
        let text = (0..300)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let c = chunk_text(&text, ContentType::Plain, 100, 20, WP);
        for w in c.windows(2) {
            assert!(w[1].start < w[0].end, "consecutive chunks overlap");
            assert!(w[1].text.starts_with('w'), "{:?}", w[1].text);
        }
    }

    #[test]
    fn an_edit_moves_few_chunk_boundaries() {
        let para = |i: usize| {
            format!(
                "Paragraph {i} tells how leases and queues interact; rule {i} is learnt by heart."
            )
        };
        let doc = |edit: Option<usize>| {
            (0..60)
                .map(|i| {
                    if Some(i) == edit {
                        "A much shorter paragraph.".to_string()
                    } else {
                        para(i)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        let before: std::collections::BTreeSet<String> =
            chunks(&doc(None), ContentType::Plain, 160, 16)
                .into_iter()
                .collect();
        let after = chunks(&doc(Some(30)), ContentType::Plain, 160, 16);
        let changed = after.iter().filter(|t| !before.contains(*t)).count();
        assert!(changed <= 3, "{changed} chunks changed");
    }
}
