//! Port implementations that run on every target: the offline vector index
//! over any [`crate::ports::Database`] and the local embedder.

pub mod local_embedder;
pub mod local_index;
