//! The index configuration: the canonical JSON recorded with every staged
//! version and index generation, naming the chunker (and its settings), the
//! embedder, the pooling and the dimensions that made its vectors. Written
//! from a [`Config`] and read back against it.
//!
//! These are methods of `Config` (`cfg.index_config()`, `cfg.chunker()`,
//! …), written here because they need the core's [`Chunker`] and the local
//! embedder's name, which `config`, a leaf, does not import. This module
//! imports `config` and the rest of `core`; like all of `core` it does no I/O.

use super::chunk::Chunker;
use super::local_embed::EMBEDDER_ID;
use crate::config::{Config, EmbedderBackend, TokenFamily};

impl Config {
    /// Whether an index configuration (as [`Self::index_config`] renders it;
    /// `""` is generation 1's before its first staging, taken as ours) was
    /// made by this Worker's embedder: same embedder, pooling and
    /// dimensions. Vectors of different embedders are not comparable.
    pub fn embeds_like(&self, index_config: &str) -> bool {
        if index_config.is_empty() {
            return true;
        }
        let (Ok(theirs), Ok(ours)) = (
            serde_json::from_str::<serde_json::Value>(index_config),
            serde_json::from_str::<serde_json::Value>(&self.index_config()),
        ) else {
            return false;
        };
        ["embedder", "pooling", "dimensions"]
            .iter()
            .all(|k| theirs.get(k) == ours.get(k))
    }

    /// The chunker an index configuration names, with its settings (`""`:
    /// ours); `None` for one this Worker does not know or that is invalid.
    pub fn chunking_of(&self, index_config: &str) -> Option<Chunker> {
        if index_config.is_empty() {
            return Some(self.chunker());
        }
        let v: serde_json::Value = serde_json::from_str(index_config).ok()?;
        let num = |key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
        };
        let chunker = match v.get("chunker")?.as_str()? {
            Chunker::GREEDY_V1 => Chunker::Greedy {
                size_max_chars: num("chunk_size_max_chars")?,
                overlap_chars: num("chunk_overlap_chars")?,
            },
            Chunker::UNICODE_V2 => Chunker::Unicode {
                size_max_tokens: num("chunk_size_max_tokens")?,
                overlap_tokens: num("chunk_overlap_tokens")?,
                tokens: TokenFamily::parse(v.get("tokenizer")?.as_str()?)?,
            },
            _ => return None,
        };
        chunker.is_valid().then_some(chunker)
    }

    /// The chunker new generations are built with.
    pub fn chunker(&self) -> Chunker {
        Chunker::Unicode {
            size_max_tokens: self.chunk_size_max_tokens,
            overlap_tokens: self.chunk_overlap_tokens,
            tokens: self.embedding_tokenizer,
        }
    }

    /// The configuration that determines chunks and vectors, as a canonical
    /// JSON object: recorded with every staged version and generation, so
    /// D1 knows which chunker, model, pooling and dimensions made each vector.
    pub fn index_config(&self) -> String {
        let (embedder, pooling) = match self.embedder_backend {
            EmbedderBackend::LocalHash => (EMBEDDER_ID, "none"),
            EmbedderBackend::WorkersAi => (
                self.embedding_model.as_str(),
                self.embedding_pooling.as_str(),
            ),
        };
        serde_json::json!({
            "chunker": Chunker::UNICODE_V2,
            "chunk_size_max_tokens": self.chunk_size_max_tokens,
            "chunk_overlap_tokens": self.chunk_overlap_tokens,
            "tokenizer": self.embedding_tokenizer.as_str(),
            "embedder": embedder,
            "pooling": pooling,
            "dimensions": self.embedding_dimensions,
        })
        .to_string()
    }
}
