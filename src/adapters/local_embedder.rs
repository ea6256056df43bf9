//! [`Embedder`] over the deterministic hashed n-gram embedder of the core.

use crate::core::failure::FailureBucket;
use crate::core::local_embed;
use crate::ports::{Embedder, PortError};

pub struct LocalEmbedder {
    pub dimensions: usize,
    /// Texts per call, as the production embedder would enforce.
    pub batch_size_max: usize,
}

impl Embedder for LocalEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        if texts.len() > self.batch_size_max {
            return Err(PortError::new(
                FailureBucket::EmbedRejected,
                "embed_batch_too_large",
            ));
        }
        Ok(texts
            .iter()
            .map(|t| local_embed::embed(t, self.dimensions))
            .collect())
    }
}
