//! The index configuration: the canonical JSON recorded with every staged
//! version and index generation, naming the chunker (and its settings), the
//! embedder, the pooling and the dimensions that made its vectors. Written
//! from a [`Config`] and read back against it.
//!
//! Here too: [`EmbedModel`], the model one configuration records, which the
//! embedder is given per call, and which configurations this Worker can
//! embed for (`cfg.embed_model_for(…)`).
//!
//! These are methods of `Config` (`cfg.index_config()`, `cfg.chunker()`,
//! …), written here because they need the core's [`Chunker`] and the local
//! embedder's name, which `config`, a leaf, does not import. This module
//! imports `config` and the rest of `core`; like all of `core` it does no I/O.

use super::chunk::Chunker;
use super::local_embed::EMBEDDER_ID;
use crate::config::{is_model_name, known_model, Config, EmbedderBackend, Pooling, TokenFamily};

/// The embedding model that made (or makes) one generation's vectors, as
/// its index configuration records it: what the consumer and search ask the
/// embedder for, per call, so that every generation is written, and the
/// active one searched, with its own model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbedModel {
    /// A Workers AI model name, or the local hash embedder's
    /// [`EMBEDDER_ID`].
    pub name: String,
    /// The pooling recorded (`None`: `"none"`, the local embedder's). A
    /// Workers AI model whose input takes no pooling ignores it.
    pub pooling: Option<Pooling>,
    /// The dimensions of its vectors.
    pub dimensions: usize,
}

impl EmbedModel {
    /// The model an index configuration (as [`Config::index_config`]
    /// renders it) records: its `embedder`, `pooling` and `dimensions`;
    /// `None` if one is missing or not a value this project writes.
    pub fn of_index_config(index_config: &str) -> Option<EmbedModel> {
        let v: serde_json::Value = serde_json::from_str(index_config).ok()?;
        let pooling = match v.get("pooling")?.as_str()? {
            POOLING_NONE => None,
            word => Some(Pooling::parse(word)?),
        };
        Some(EmbedModel {
            name: v.get("embedder")?.as_str()?.to_string(),
            pooling,
            dimensions: usize::try_from(v.get("dimensions")?.as_u64()?).ok()?,
        })
    }

    /// The word recorded for the pooling.
    pub fn pooling_str(&self) -> &'static str {
        self.pooling.map_or(POOLING_NONE, Pooling::as_str)
    }
}

/// The pooling recorded for the local embedder, which pools nothing.
const POOLING_NONE: &str = "none";

impl Config {
    /// The model this Worker's configuration names (what
    /// [`Self::index_config`] records for a new generation).
    pub fn embed_model(&self) -> EmbedModel {
        match self.embedder_backend {
            EmbedderBackend::LocalHash => EmbedModel {
                name: EMBEDDER_ID.to_string(),
                pooling: None,
                dimensions: self.embedding_dimensions,
            },
            EmbedderBackend::WorkersAi => EmbedModel {
                name: self.embedding_model.clone(),
                pooling: Some(self.embedding_pooling),
                dimensions: self.embedding_dimensions,
            },
        }
    }

    /// The model with which this Worker embeds for a generation of this
    /// index configuration (`""` is generation 1's before its first
    /// staging, taken as ours: [`Self::embed_model`]); `None` if it cannot
    /// embed for it at all. Vectors of different models are not
    /// comparable, so each generation is written and searched with its own.
    ///
    /// The vectors must have the index's dimensions (one index, fixed
    /// dimensions: `EMBEDDING_DIMENSIONS`). With the `workers-ai` backend,
    /// any Workers AI model name with a pooling qualifies; a model this
    /// project knows ([`known_model`]) must also have those dimensions.
    /// With the `local-hash` backend, only the local hash embedder.
    pub fn embed_model_for(&self, index_config: &str) -> Option<EmbedModel> {
        if index_config.is_empty() {
            return Some(self.embed_model());
        }
        let model = EmbedModel::of_index_config(index_config)?;
        if model.dimensions != self.embedding_dimensions {
            return None;
        }
        let ok = match self.embedder_backend {
            EmbedderBackend::LocalHash => model.name == EMBEDDER_ID && model.pooling.is_none(),
            EmbedderBackend::WorkersAi => {
                model.name != EMBEDDER_ID
                    && is_model_name(&model.name)
                    && model.pooling.is_some()
                    && known_model(&model.name).is_none_or(|k| k.dimensions == model.dimensions)
            }
        };
        ok.then_some(model)
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
        let model = self.embed_model();
        serde_json::json!({
            "chunker": Chunker::UNICODE_V2,
            "chunk_size_max_tokens": self.chunk_size_max_tokens,
            "chunk_overlap_tokens": self.chunk_overlap_tokens,
            "tokenizer": self.embedding_tokenizer.as_str(),
            "embedder": model.name,
            "pooling": model.pooling_str(),
            "dimensions": model.dimensions,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Workers AI configuration of `model` with `dimensions`.
    fn workers_ai(model: &str, dimensions: usize) -> Config {
        Config {
            embedder_backend: EmbedderBackend::WorkersAi,
            embedding_model: model.to_string(),
            embedding_pooling: Pooling::Mean,
            embedding_dimensions: dimensions,
            ..Config::default()
        }
    }

    #[test]
    fn an_index_configuration_names_its_model() {
        let large = workers_ai("@cf/baai/bge-large-en-v1.5", 1024);
        let m = EmbedModel::of_index_config(&large.index_config()).unwrap();
        assert_eq!(m, large.embed_model());
        assert_eq!(
            (m.name.as_str(), m.pooling, m.dimensions),
            ("@cf/baai/bge-large-en-v1.5", Some(Pooling::Mean), 1024)
        );
        let local = Config::default();
        let m = EmbedModel::of_index_config(&local.index_config()).unwrap();
        assert_eq!((m.name.as_str(), m.pooling_str()), (EMBEDDER_ID, "none"));
        for bad in [
            "",
            "{}",
            "[1]",
            r#"{"embedder":"x","pooling":"max","dimensions":8}"#,
        ] {
            assert_eq!(EmbedModel::of_index_config(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_worker_embeds_for_every_model_of_the_index_dimensions_its_backend_runs() {
        let large = workers_ai("@cf/baai/bge-large-en-v1.5", 1024);
        let m3 = workers_ai("@cf/baai/bge-m3", 1024);
        let small = workers_ai("@cf/baai/bge-small-en-v1.5", 384);
        let unknown = workers_ai("@cf/acme/embed-v9", 1024);
        let local = Config {
            embedding_dimensions: 1024,
            ..Config::default()
        };
        // A Workers AI Worker embeds for another model of the same dimensions,
        // with that model (not its own).
        let got = m3.embed_model_for(&large.index_config()).unwrap();
        assert_eq!(got.name, "@cf/baai/bge-large-en-v1.5");
        assert_eq!(
            m3.embed_model_for(&unknown.index_config()).unwrap().name,
            "@cf/acme/embed-v9"
        );
        assert_eq!(
            m3.embed_model_for(&m3.index_config()),
            Some(m3.embed_model())
        );
        // Not for other dimensions (one index, fixed dimensions), nor for
        // the local embedder, nor a known model recorded with dimensions
        // that are not its own.
        assert_eq!(m3.embed_model_for(&small.index_config()), None);
        assert_eq!(large.embed_model_for(&local.index_config()), None);
        let lying = workers_ai("@cf/baai/bge-small-en-v1.5", 1024).index_config();
        assert_eq!(m3.embed_model_for(&lying), None);
        let pooled_none = large.index_config().replace("\"mean\"", "\"none\"");
        assert_eq!(m3.embed_model_for(&pooled_none), None);
        // The local backend embeds only for the local embedder at its dimensions.
        assert_eq!(
            local.embed_model_for(&local.index_config()),
            Some(local.embed_model())
        );
        assert_eq!(local.embed_model_for(&large.index_config()), None);
        assert_eq!(
            Config::default().embed_model_for(&local.index_config()),
            None
        );
        // "" is generation 1 before its first staging: ours.
        assert_eq!(m3.embed_model_for(""), Some(m3.embed_model()));
        assert_eq!(m3.embed_model_for("not json"), None);
    }
}
