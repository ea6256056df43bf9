//! `greedy-v1`: the first chunker, kept for generations recorded with it.
//!
//! Each chunk holds at most `size_max_chars` characters and ends at the
//! strongest boundary found in the second half of its window (Markdown
//! heading, blank line, line break, sentence end, whitespace, and only then
//! an arbitrary character). Consecutive chunks share about `overlap_chars`
//! characters, starting at a word boundary.
//!
//! Its chunks are exactly those it always made, on every input it did not
//! panic on. It used to panic when its last fallback (whitespace) found a
//! multi-byte whitespace character (U+00A0, U+202F, U+3000, U+2028, …): it
//! cut one byte after the character's start, inside it. It now cuts after
//! the whole character; inputs that did not panic are unaffected.

use super::{push_trimmed, skip_whitespace, Chunk, ContentType};

/// `size_max_chars >= 2` and `overlap_chars * 2 <= size_max_chars`
/// ([`super::Chunker::chunk`] clamps them so).
pub(super) fn chunk_text(
    text: &str,
    kind: ContentType,
    size_max_chars: usize,
    overlap_chars: usize,
) -> Vec<Chunk<'_>> {
    let len = text.len();
    let mut chunks = Vec::new();
    let mut start = skip_whitespace(text, 0);
    while start < len {
        let hard_end = advance_chars(text, start, size_max_chars);
        let (end, at_heading) = if hard_end == len {
            (len, false)
        } else {
            best_break(text, start, hard_end, kind, size_max_chars)
        };
        push_trimmed(text, start, end, &mut chunks);
        if end >= len || end <= start {
            break;
        }
        // A heading starts a section: the next chunk starts with it, no overlap.
        let overlap = if at_heading { 0 } else { overlap_chars };
        let mut next = retreat_chars(text, end, overlap);
        if let Some((i, c)) = text
            .get(next..end)
            .and_then(|t| t.char_indices().find(|(_, c)| c.is_whitespace()))
        {
            next += i + c.len_utf8();
        }
        if next <= start {
            next = end;
        }
        start = skip_whitespace(text, next);
    }
    chunks
}

/// Byte position `n` chars after `from` (or the end of the text).
fn advance_chars(text: &str, from: usize, n: usize) -> usize {
    match text.get(from..).and_then(|t| t.char_indices().nth(n)) {
        Some((i, _)) => from + i,
        None => text.len(),
    }
}

/// Byte position `n` chars before `to` (or the start of the text).
fn retreat_chars(text: &str, to: usize, n: usize) -> usize {
    if n == 0 {
        return to;
    }
    match text
        .get(..to)
        .and_then(|t| t.char_indices().rev().nth(n - 1))
    {
        Some((i, _)) => i,
        None => 0,
    }
}

/// The end of a chunk that starts at `start` and may not pass `hard_end`:
/// the strongest boundary in the second half of the window, and whether it
/// is a Markdown heading.
fn best_break(
    text: &str,
    start: usize,
    hard_end: usize,
    kind: ContentType,
    size_max_chars: usize,
) -> (usize, bool) {
    let floor = advance_chars(text, start, size_max_chars / 2);
    let window = text.get(floor..hard_end).unwrap_or_default();
    let after =
        |found: Option<usize>, skip: usize| found.map(|i| floor + i + skip).filter(|&p| p > start);

    if kind == ContentType::Markdown {
        // A heading starts a new chunk: break just after the newline.
        if let Some(p) = after(window.rfind("\n#"), 1) {
            return (p, true);
        }
    }
    if let Some(p) = after(window.rfind("\n\n"), 2) {
        return (p, false);
    }
    if let Some(p) = after(window.rfind('\n'), 1) {
        return (p, false);
    }
    let sentence = window
        .char_indices()
        .zip(
            window
                .chars()
                .skip(1)
                .map(Some)
                .chain(std::iter::once(None)),
        )
        .filter(|((_, c), next)| match c {
            '.' | '!' | '?' => next.is_some_and(char::is_whitespace),
            '。' | '！' | '？' => true,
            _ => false,
        })
        .map(|((i, c), _)| i + c.len_utf8())
        .last();
    if let Some(p) = after(sentence, 0) {
        return (p, false);
    }
    // After the last whitespace character: its whole length, not one byte.
    let space = window.char_indices().rfind(|(_, c)| c.is_whitespace());
    if let Some(p) = after(space.map(|(i, c)| i + c.len_utf8()), 0) {
        return (p, false);
    }
    (hard_end, false)
}

#[cfg(test)]
mod tests {
    use super::super::Chunker;
    use super::*;

    fn greedy(size_max_chars: usize, overlap_chars: usize) -> Chunker {
        Chunker::Greedy {
            size_max_chars,
            overlap_chars,
        }
    }

    #[test]
    fn short_text_is_one_chunk() {
        let c = greedy(100, 20).chunk("  hello world \n", ContentType::Plain);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c.first().map(|c| (c.text, c.start, c.end)),
            Some(("hello world", 2, 13))
        );
    }

    #[test]
    fn prefers_paragraphs_then_sentences() {
        let p1 = "First paragraph has some words in it. ".repeat(2);
        let p2 = "Second paragraph is here. It goes on and on and on for a while.";
        let text = format!("{p1}\n\n{p2}");
        let c = greedy(100, 20).chunk(&text, ContentType::Plain);
        assert_eq!(c.first().map(|c| c.text), Some(p1.trim_end()));
        let s = "One sentence here. Another one follows it. ".repeat(5);
        for chunk in greedy(100, 20).chunk(&s, ContentType::Plain).iter().take(2) {
            assert!(chunk.text.ends_with('.'), "{:?}", chunk.text);
        }
    }

    #[test]
    fn multi_byte_whitespace_no_longer_panics() {
        // The report: a run of more than half a chunk joined by no-break
        // spaces made the whitespace fallback cut inside U+00A0.
        for space in [
            '\u{a0}', '\u{202f}', '\u{3000}', '\u{2028}', '\u{85}', '\u{1680}',
        ] {
            let text = format!(
                "{}{}",
                "x".repeat(10),
                format!("abcdefghi{space}").repeat(300)
            );
            let chunks = greedy(1000, 100).chunk(&text, ContentType::Plain);
            assert!(chunks.len() > 1, "{space:?}");
            for c in &chunks {
                assert_eq!(text.get(c.start..c.end), Some(c.text));
            }
        }
    }
}
