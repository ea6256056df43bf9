//! The `text-splitter` crate as a chunker, for the side-by-side measurement
//! only (`--features text-splitter`, `make bench`): sized by the same token
//! bound as `unicode-v2`, so the two make chunks of the same limit. In a
//! Worker built with the feature, `unicode-v2` chunks through this instead,
//! which is how the bench measures the Worker's size with the crate in it;
//! such a build is never deployed.

use super::tokens::TokenFamily;
use super::{Chunk, ContentType};
use text_splitter::{ChunkConfig, ChunkSizer, MarkdownSplitter, TextSplitter};

/// The token bound as `text-splitter`'s chunk size.
struct Bound(TokenFamily);

impl ChunkSizer for Bound {
    fn size(&self, chunk: &str) -> usize {
        self.0.count(chunk)
    }
}

pub fn chunk_text<'a>(
    text: &'a str,
    kind: ContentType,
    size_max_tokens: usize,
    overlap_tokens: usize,
    family: TokenFamily,
) -> Vec<Chunk<'a>> {
    let size = size_max_tokens.max(family.chunk_tokens_min());
    let config = ChunkConfig::new(size).with_sizer(Bound(family));
    // Its overlap must be under the capacity; ours is at most half of it.
    let config = match config.with_overlap(overlap_tokens.min(size / 2)) {
        Ok(c) => c,
        Err(_) => ChunkConfig::new(size).with_sizer(Bound(family)),
    };
    let pieces: Vec<(usize, &str)> = match kind {
        ContentType::Plain => TextSplitter::new(config).chunk_indices(text).collect(),
        ContentType::Markdown => MarkdownSplitter::new(config).chunk_indices(text).collect(),
    };
    pieces
        .into_iter()
        .filter(|(_, t)| !t.trim().is_empty())
        .enumerate()
        .map(|(i, (start, t))| Chunk {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            start,
            end: start + t.len(),
            text: t,
        })
        .collect()
}
