//! The pure core: no I/O, no async, no clock. Everything here is a function
//! of its arguments, which is what makes chunk boundaries, vector IDs and D1
//! rows depend only on (document, version, configuration).
//!
//! It handles untrusted input (document text, ids), so it may not panic:
//! indexing, slicing, `unwrap`, `expect` and `panic!` are denied outside
//! tests (`cargo clippy`, run by `make test`), and the property tests in
//! `tests/it/chunk_props.rs` feed the chunkers arbitrary Unicode.
//!
//! Here: chunking ([`chunk`]), identifiers ([`ids`]), tenant tokens and
//! their scopes ([`credentials`]), failure buckets and
//! the retry policy ([`failure`]), the ledger's state enums ([`state`]),
//! the local embedder ([`local_embed`]), the offline index's vector codes
//! ([`vector_codes`]), the keyword index's text rules
//! and rank fusion ([`keyword`]), the keyword index's terms and bm25
//! weights ([`terms`]), metadata equality as the index has it
//! ([`metadata`]), shard bindings and the placement policy ([`shards`])
//! and `Config`'s index configuration.
//!
//! May import: `config` (a leaf) and libraries. Nothing in the crate
//! besides config: every other module imports this one.

#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod chunk;
pub mod credentials;
pub mod failure;
pub mod ids;
pub mod index_config;
pub mod keyword;
pub mod local_embed;
pub mod metadata;
pub mod row_plan;
pub mod shards;
pub mod state;
pub mod terms;
pub mod text_parts;
pub mod vector_codes;
