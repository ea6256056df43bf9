//! The integration tests, one binary (the simulation's, `tests/sim.rs` and
//! `tests/sim_bugs.rs`, are their own). Each module is one former test
//! file; a test's name starts with its module, so `cargo test --test it
//! token_bound` or `cargo test --test it chunk_props` runs one of them.
//!
//! - `pipeline` — scenarios of intake, consume and repair.
//! - `sql` — every statement on SQLite, the migrations, the local index.
//! - `local_index` — the offline index: exact below its threshold, its
//!   blocks above it (recall, moves, deletes, filters, limits), the write
//!   guard, and the upgrade of an index from before its blocks.
//! - `api` — the HTTP contract.
//! - `body_props` — property tests of request bodies: arbitrary JSON to
//!   every route that reads one (`PROPTEST_CASES`).
//! - `budget` — the consumer's invocation budget.
//! - `generations` — backfills and index generations.
//! - `model_switch` — a new embedding model rolled out without downtime.
//! - `reuse` — embedding reuse.
//! - `search` — hybrid search: the keyword index, its fences, fusion, snippets.
//! - `admin` — dead letters, redrives and repair runs, through the API.
//! - `console` — the console's reads (documents by state, the listing, jobs
//!   over time) and its files.
//! - `tenants` — tenants, tokens, scopes, quotas and isolation, through the API.
//! - `sync` — source sync sessions: seen, commit, the guard, expiry, crashes.
//! - `listings` — a tenant's listings of its documents and sync sessions
//!   (paging, filters, isolation), and the `Allow` of every 405.
//! - `chunk_props` — property tests of the chunkers over arbitrary Unicode
//!   (`PROPTEST_CASES` per property).
//! - `keyword_props` — property tests of the keyword index's text rules
//!   (`core::keyword`) on a real SQLite FTS5 table (`PROPTEST_CASES` per
//!   property).
//! - `token_bound` — the token bound against every scalar value and a real
//!   WordPiece tokenizer (`--ignored`).
//! - `layers` — the dependency direction of `src/`'s modules.
//! - `common` — the test kit (`src/native/testkit.rs`), re-exported.

mod admin;
mod api;
mod body_props;
mod budget;
mod chunk_props;
mod common;
mod console;
mod d1_rows;
mod generations;
mod keyword_props;
mod layers;
mod listings;
mod local_index;
mod model_switch;
mod moves;
mod pipeline;
mod plans;
mod retention;
mod reuse;
mod search;
mod shards;
mod sql;
mod sync;
mod tenants;
mod token_bound;
