//! Port implementations that run on every target: the offline vector index
//! over any [`crate::ports::Database`] and the local embedder.

pub mod local_embedder;
pub mod local_index;

use crate::config::Config;

/// The limits every vector-index adapter enforces on each call (Vectorize's,
/// from the configuration): callers batch within them, adapters refuse more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexLimits {
    pub dimensions: usize,
    pub upsert_batch_max: usize,
    pub delete_batch_max: usize,
    /// getByIds has no documented limit: the delete limit is used.
    pub get_batch_max: usize,
    pub id_bytes_max: usize,
    pub top_k_max: usize,
}

impl IndexLimits {
    pub fn from_config(cfg: &Config) -> IndexLimits {
        IndexLimits {
            dimensions: cfg.embedding_dimensions,
            upsert_batch_max: cfg.upsert_batch_size,
            delete_batch_max: cfg.delete_batch_size,
            get_batch_max: cfg.delete_batch_size,
            id_bytes_max: cfg.vector_id_bytes_max,
            top_k_max: cfg.index_query_top_k_max,
        }
    }
}
