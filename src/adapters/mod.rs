//! Port implementations that run on every target: the offline vector index
//! over any [`crate::ports::Database`] and the local embedder.
//!
//! May import: `ports`, `core`, `config` and `store` (the local index keeps
//! its rows through `store::vector_rows`); never `pipeline` or `api`.

mod local_blocks;
pub mod local_embedder;
pub mod local_index;

use crate::config::Config;
use crate::core::metadata::value_eq;
use crate::ports::{JobMessage, JobQueue, MetadataFilter, PortError, VectorMetadata};

/// Vectorize's equality filter, as the fakes reproduce it: every key must
/// match, numbers compare as numbers (`core::metadata`), and strings are
/// compared on their first 64 bytes (cut on a
/// character boundary), as Vectorize indexes them. Callers that need exact
/// equality check again (search does, in D1).
pub fn filter_matches(metadata: &VectorMetadata, filter: &MetadataFilter) -> bool {
    fn indexed(s: &str) -> &str {
        let mut end = s.len().min(64);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.get(..end).unwrap_or(s)
    }
    filter
        .iter()
        .all(|(k, want)| match (metadata.get(k), want) {
            (Some(serde_json::Value::String(have)), serde_json::Value::String(want)) => {
                indexed(have) == indexed(want)
            }
            (have, want) => have.is_some_and(|have| value_eq(have, want)),
        })
}

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
    pub filter_bytes_max: usize,
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
            filter_bytes_max: cfg.index_filter_bytes_max,
        }
    }
}

/// One shard's producer: every message it sends names the shard whose
/// ledger holds the job, so the consumer (one queue for every shard) runs
/// it against that shard.
pub struct ShardQueue<Q> {
    pub inner: Q,
    pub shard: crate::core::shards::ShardId,
}

impl<Q: JobQueue> JobQueue for ShardQueue<Q> {
    async fn send_batch(&self, messages: &[JobMessage]) -> Result<(), PortError> {
        let stamped: Vec<JobMessage> = messages.iter().map(|m| self.stamped(m)).collect();
        self.inner.send_batch(&stamped).await
    }
    async fn send_dead_letter(&self, message: &JobMessage) -> Result<(), PortError> {
        self.inner.send_dead_letter(&self.stamped(message)).await
    }
}

impl<Q> ShardQueue<Q> {
    fn stamped(&self, m: &JobMessage) -> JobMessage {
        JobMessage {
            shard: self.shard.0,
            ..m.clone()
        }
    }
}
