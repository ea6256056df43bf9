//! Deterministic, UTF-8-safe chunking.
//!
//! A greedy splitter: each chunk holds at most `size_max_chars` characters and
//! ends at the strongest boundary found in the second half of its window
//! (Markdown heading, blank line, line break, sentence end, whitespace, and
//! only then an arbitrary character). Consecutive chunks share about
//! `overlap_chars` characters, starting at a word boundary. Offsets are byte
//! offsets into the original text, always on `char` boundaries.
//!
//! Why not the `text-splitter` crate: its Markdown and Unicode segmentation
//! pull `icu_segmenter` with its compiled segmentation data and `getrandom`
//! 0.3 (through `ahash`), which needs a custom backend on
//! `wasm32-unknown-unknown`; this splitter is ~150 lines and has no
//! dependencies. Chunk boundaries depend only on (text, content type, config).

/// How the text is to be read; Markdown adds headings as preferred boundaries.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkConfig {
    pub size_max_chars: usize,
    pub overlap_chars: usize,
}

/// One chunk: `text == &document[start..end]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub index: u32,
    pub start: usize,
    pub end: usize,
    pub text: &'a str,
}

/// Splits `text` into chunks. Whitespace-only stretches produce no chunk.
pub fn chunk_text<'a>(text: &'a str, kind: ContentType, cfg: ChunkConfig) -> Vec<Chunk<'a>> {
    assert!(cfg.size_max_chars >= 2 && cfg.overlap_chars * 2 <= cfg.size_max_chars);
    let len = text.len();
    let mut chunks = Vec::new();
    let mut start = skip_whitespace(text, 0);
    while start < len {
        let hard_end = advance_chars(text, start, cfg.size_max_chars);
        let (end, at_heading) = if hard_end == len {
            (len, false)
        } else {
            best_break(text, start, hard_end, kind, cfg)
        };
        debug_assert!(end > start && end <= hard_end);
        push_trimmed(text, start, end, &mut chunks);
        if end >= len {
            break;
        }
        // A heading starts a section: the next chunk starts with it, no overlap.
        let overlap = if at_heading { 0 } else { cfg.overlap_chars };
        let mut next = retreat_chars(text, end, overlap);
        if let Some((i, c)) = text[next..end]
            .char_indices()
            .find(|(_, c)| c.is_whitespace())
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

fn push_trimmed<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<Chunk<'a>>) {
    let slice = &text[start..end];
    let trimmed_start = slice.trim_start();
    let s = start + (slice.len() - trimmed_start.len());
    let e = s + trimmed_start.trim_end().len();
    if e > s {
        let index = u32::try_from(out.len()).expect("more than u32::MAX chunks");
        out.push(Chunk {
            index,
            start: s,
            end: e,
            text: &text[s..e],
        });
    }
}

fn skip_whitespace(text: &str, from: usize) -> usize {
    match text[from..]
        .char_indices()
        .find(|(_, c)| !c.is_whitespace())
    {
        Some((i, _)) => from + i,
        None => text.len(),
    }
}

/// Byte position `n` chars after `from` (or the end of the text).
fn advance_chars(text: &str, from: usize, n: usize) -> usize {
    match text[from..].char_indices().nth(n) {
        Some((i, _)) => from + i,
        None => text.len(),
    }
}

/// Byte position `n` chars before `to` (or the start of the text).
fn retreat_chars(text: &str, to: usize, n: usize) -> usize {
    if n == 0 {
        return to;
    }
    match text[..to].char_indices().rev().nth(n - 1) {
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
    cfg: ChunkConfig,
) -> (usize, bool) {
    let floor = advance_chars(text, start, cfg.size_max_chars / 2);
    let window = &text[floor..hard_end];
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
    if let Some(p) = after(
        window
            .char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, _)| i)
            .last(),
        1,
    ) {
        return (p, false);
    }
    (hard_end, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: ChunkConfig = ChunkConfig {
        size_max_chars: 100,
        overlap_chars: 20,
    };

    /// Checks the properties every chunking must have and returns the chunks.
    fn check<'a>(text: &'a str, kind: ContentType, cfg: ChunkConfig) -> Vec<Chunk<'a>> {
        let chunks = chunk_text(text, kind, cfg);
        assert_eq!(chunks, chunk_text(text, kind, cfg), "not deterministic");
        let mut covered = vec![false; text.len()];
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.index as usize, i);
            assert_eq!(c.text, &text[c.start..c.end]);
            assert!(
                c.text.chars().count() <= cfg.size_max_chars,
                "chunk {i} too long"
            );
            assert!(!c.text.trim().is_empty());
            if i > 0 {
                assert!(c.start > chunks[i - 1].start, "no progress at {i}");
            }
            covered[c.start..c.end].iter_mut().for_each(|b| *b = true);
        }
        for (i, ch) in text.char_indices() {
            assert!(
                ch.is_whitespace() || covered[i],
                "byte {i} ({ch:?}) is in no chunk"
            );
        }
        chunks
    }

    #[test]
    fn short_text_is_one_chunk() {
        let c = check("  hello world \n", ContentType::Plain, CFG);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "hello world");
        assert_eq!((c[0].start, c[0].end), (2, 13));
    }

    #[test]
    fn empty_and_whitespace_give_nothing() {
        assert!(check("", ContentType::Plain, CFG).is_empty());
        assert!(check(" \n\t ", ContentType::Plain, CFG).is_empty());
    }

    #[test]
    fn prefers_paragraphs_then_sentences() {
        let p1 = "First paragraph has some words in it. ".repeat(2);
        let p2 = "Second paragraph is here. It goes on and on and on for a while.";
        let text = format!("{p1}\n\n{p2}");
        let c = check(&text, ContentType::Plain, CFG);
        assert_eq!(c[0].text, p1.trim_end());
        let s = "One sentence here. Another one follows it. ".repeat(5);
        for chunk in check(&s, ContentType::Plain, CFG).iter().take(2) {
            assert!(chunk.text.ends_with('.'), "{:?}", chunk.text);
        }
    }

    #[test]
    fn markdown_headings_start_chunks() {
        let text = format!(
            "# Title\n{}\n# Next\n{}",
            "a b c ".repeat(10),
            "d e f ".repeat(10)
        );
        let c = check(&text, ContentType::Markdown, CFG);
        assert!(c.iter().any(|c| c.text.starts_with("# Next")), "{c:?}");
    }

    #[test]
    fn utf8_and_unbroken_text_are_safe() {
        check(&"語".repeat(1000), ContentType::Plain, CFG);
        check(&"é🙂".repeat(333), ContentType::Markdown, CFG);
        check(&"x".repeat(10_001), ContentType::Plain, CFG);
        check(
            "日本語の文です。次の文です。".repeat(40).as_str(),
            ContentType::Plain,
            CFG,
        );
        check(
            &"ab\u{301} ".repeat(300),
            ContentType::Plain,
            ChunkConfig {
                size_max_chars: 16,
                overlap_chars: 8,
            },
        );
    }

    #[test]
    fn consecutive_chunks_overlap() {
        let text = (0..200)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let c = check(&text, ContentType::Plain, CFG);
        for w in c.windows(2) {
            assert!(
                w[1].start < w[0].end,
                "no overlap between {:?} and {:?}",
                w[0].text,
                w[1].text
            );
            assert!(
                w[1].text.starts_with('w'),
                "overlap starts mid-word: {:?}",
                w[1].text
            );
        }
        let none = check(
            &text,
            ContentType::Plain,
            ChunkConfig {
                size_max_chars: 100,
                overlap_chars: 0,
            },
        );
        for w in none.windows(2) {
            assert!(w[1].start >= w[0].end);
        }
    }

    #[test]
    fn pseudo_random_texts_keep_the_properties() {
        // A small deterministic generator: no dependency, no wall clock.
        let alphabet = [
            "a", "bb", " ", "\n", "\n\n", ". ", "語", "🙂", "#", "\t", "。",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..300 {
            let mut s = String::new();
            for _ in 0..(round * 7 % 900) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                s.push_str(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let size = 16 + (round % 50);
            let cfg = ChunkConfig {
                size_max_chars: size,
                overlap_chars: (round % 3) * size / 4,
            };
            check(&s, ContentType::Markdown, cfg);
            check(&s, ContentType::Plain, cfg);
        }
    }
}
