//! How a version's text is stored: in parts cut where the content says
//! (content-defined chunking, FastCDC), so that two versions of a document
//! share every part the edit did not touch.
//!
//! A part boundary depends only on the bytes just before it (a rolling
//! hash over a small window), not on its offset: an edit moves the
//! boundaries of the part it falls in and, at most, of the next one, and a
//! paragraph inserted at the top leaves every later part as it was. A new
//! version therefore writes the parts its text does not share with the
//! version before, and names the others (its manifest, [`PartRef`]);
//! parts of fixed size would shift, and be written again, after any
//! insertion.
//!
//! Pure: no I/O. Cuts move forward to the next character boundary (a part
//! is stored as TEXT), so a part is at most `part_max` bytes.

use fastcdc::v2020::{
    FastCDC, AVERAGE_MAX, AVERAGE_MIN, MAXIMUM_MAX, MAXIMUM_MIN, MINIMUM_MAX, MINIMUM_MIN,
};
use serde::{Deserialize, Serialize};

/// One entry of a version's manifest: the `version_parts` row
/// (`version`, `part`) that holds this piece of the text, and the piece's
/// hash ([`part_hash`]; `None` for a part written before migration 0022,
/// which no later version shares). Stored as a JSON array `[v, p, h]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRef(pub u32, pub u32, pub Option<String>);

/// The cutter's (minimum, average, maximum) part sizes for a target
/// average and a largest part (`D1_TEXT_PART_BYTES_MAX`): even, inside the
/// library's bounds, with room under `part_max` for a cut moved to the
/// end of a character (at most 3 bytes).
fn bounds(target: usize, part_max: usize) -> (usize, usize, usize) {
    let max = (part_max.saturating_sub(4) & !1).clamp(MAXIMUM_MIN, MAXIMUM_MAX);
    let avg = (target.min(max / 4) & !1).clamp(AVERAGE_MIN, AVERAGE_MAX);
    let min = ((avg / 4) & !1).clamp(MINIMUM_MIN, MINIMUM_MAX);
    (min, avg, max)
}

/// `text` cut into parts of about `target` bytes on content-defined
/// boundaries, each at most `part_max` bytes and on a character boundary;
/// joined, they are `text`. The empty text is one empty part.
pub fn split(text: &str, target: usize, part_max: usize) -> Vec<&str> {
    if text.is_empty() {
        return vec![""];
    }
    let (min, avg, max) = bounds(target, part_max);
    let cdc = FastCDC::new(text.as_bytes(), min, avg, max);
    let mut parts = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let (_, cut) = cdc.cut(start, text.len() - start);
        let mut end = cut.clamp(start + 1, text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        match text.get(start..end) {
            Some(part) => parts.push(part),
            // Unreachable: both ends are character boundaries of `text`.
            None => break,
        }
        start = end;
    }
    parts
}

/// A part's identity within its document: the first 128 bits of its
/// SHA-256, in hex (a collision between two parts of one document is
/// beyond any realistic count of versions).
pub fn part_hash(part: &str) -> String {
    let hex = super::ids::sha256_hex(part.as_bytes());
    hex.get(..32).unwrap_or(&hex).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(paragraphs: usize, seed: usize) -> String {
        (0..paragraphs)
            .map(|i| {
                let n = i + seed;
                format!(
                    "段落{n}は冪等な取り込みについて述べる。Paragraph {n} explains rule {} of the pipeline, {} times over.",
                    n * 7919 % 1000,
                    n * 104_729 % 97
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    #[test]
    fn parts_join_to_the_text_each_within_the_largest_and_on_character_boundaries() {
        for t in [
            text(2000, 0),
            "語".repeat(100_000),
            "x".repeat(70_000),
            "a".into(),
        ] {
            let parts = split(&t, 16_384, 65_536);
            assert_eq!(parts.concat(), t);
            assert!(parts.iter().all(|p| !p.is_empty() && p.len() <= 65_536));
        }
        assert_eq!(split("", 16_384, 65_536), vec![""]);
        assert!(split(&text(2000, 0), 16_384, 65_536).len() > 4);
    }

    #[test]
    fn an_insertion_at_the_top_or_an_edit_in_the_middle_leaves_the_other_parts_as_they_were() {
        let old = text(3000, 0);
        let old_parts = split(&old, 16_384, 65_536);
        let shared = |new: &str| {
            let new_parts = split(new, 16_384, 65_536);
            let fresh = new_parts.iter().filter(|p| !old_parts.contains(p)).count();
            (fresh, new_parts.len())
        };
        let top = format!("新しい段落が先頭に入る。A new paragraph at the top.\n\n{old}");
        let (fresh, n) = shared(&top);
        assert!(n > 8 && fresh <= 2, "{fresh} of {n} parts written again");
        let mid = old.replacen("Paragraph 1500 explains", "Paragraph 1500 now says", 1);
        let (fresh, n) = shared(&mid);
        assert!(fresh <= 2, "{fresh} of {n} parts written again");
    }

    #[test]
    fn the_hash_names_the_content() {
        assert_eq!(part_hash("abc"), part_hash("abc"));
        assert_ne!(part_hash("abc"), part_hash("abd"));
        assert_eq!(part_hash("abc").len(), 32);
    }
}
