//! The tests' harness is the library's test kit
//! (`src/native/testkit.rs`): `World`, `Counted`, the database wrappers and
//! the text helpers, re-exported here so every test reaches them as
//! `common::…`.

pub use ingest_pipeline::native::testkit::*;
