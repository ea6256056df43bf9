//! [`Embedder`] over the deterministic hashed n-gram embedder of the core.

use crate::core::failure::FailureBucket;
use crate::core::index_config::EmbedModel;
use crate::core::local_embed;
use crate::ports::{Embedder, PortError};

/// The local embedder: it runs one model, [`local_embed::EMBEDDER_ID`], at
/// the dimensions each call names.
pub struct LocalEmbedder {
    /// Texts per call, as the production embedder would enforce.
    pub batch_size_max: usize,
}

impl Embedder for LocalEmbedder {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        if model.name != local_embed::EMBEDDER_ID {
            return Err(PortError::new(
                FailureBucket::ConfigInvalid,
                "embed_model_unsupported",
            ));
        }
        if texts.len() > self.batch_size_max {
            return Err(PortError::new(
                FailureBucket::EmbedRejected,
                "embed_batch_too_large",
            ));
        }
        Ok(texts
            .iter()
            .map(|t| local_embed::embed(t, model.dimensions))
            .collect())
    }
}
