//! The tests' harness is the library's test kit
//! (`src/native/testkit.rs`): `World`, `Counted`, the database wrappers and
//! the text helpers, re-exported here so every test reaches them as
//! `common::…`; and the oracle (`src/native/oracle.rs`), as
//! `common::oracle`, through which a test reads the ledger.

pub use ingest_pipeline::native::oracle;
pub use ingest_pipeline::native::testkit::*;
