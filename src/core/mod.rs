//! The pure core: no I/O, no async, no clock. Everything here is a function
//! of its arguments, which is what makes chunk boundaries, vector IDs and D1
//! rows depend only on (document, version, configuration).

pub mod chunk;
pub mod failure;
pub mod ids;
pub mod local_embed;
