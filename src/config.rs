//! Every tunable and platform limit, in one named place. A leaf: this
//! module imports nothing from the crate, and any module may import it.
//!
//! Each field has a default taken from the platform figures
//! (`shared/reference/platform-limits.md`) and can be overridden by a Worker
//! variable of the same name in SCREAMING_SNAKE_CASE (see [`SETTINGS`]). The
//! table in `docs/configuration.md` lists the same names and defaults; a test
//! keeps the two in step.
//!
//! Beside the settings: what this project knows of the models and tokenizer
//! families they name ([`known_model`], [`TokenFamily`] and its limits,
//! [`SPECIAL_TOKENS`]) and the consumer's fixed budget figures
//! ([`CONSUME_RESERVE`], [`CONSUME_SUBREQUESTS_MIN`]), since checking a
//! configuration needs them. What needs the core's types is written beside
//! them: the token bound in `core::chunk::tokens`, and `Config`'s index
//! configuration (its chunker and the JSON recorded with each generation) in
//! `core::index_config`.

use thiserror::Error;

/// Which vector index implementation the Worker uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexBackend {
    /// Brute-force cosine over a separate D1 database (`VECTORS_DB`), offline.
    LocalD1,
    /// Cloudflare Vectorize (`VECTORIZE` binding).
    Vectorize,
}

/// Which embedder the Worker uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedderBackend {
    /// Hashed word and character n-grams, deterministic and offline.
    LocalHash,
    /// Workers AI (`AI` binding).
    WorkersAi,
}

/// How Workers AI pools token embeddings into one vector (bge models).
/// Vectors made with different poolings are not comparable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    Mean,
    Cls,
}

impl Pooling {
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
}

/// The distance metric a Vectorize index was created with (fixed at creation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorMetric {
    Cosine,
    Euclidean,
    DotProduct,
}

impl VectorMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            VectorMetric::Cosine => "cosine",
            VectorMetric::Euclidean => "euclidean",
            VectorMetric::DotProduct => "dot-product",
        }
    }

    pub fn parse(raw: &str) -> Option<VectorMetric> {
        [
            VectorMetric::Cosine,
            VectorMetric::Euclidean,
            VectorMetric::DotProduct,
        ]
        .into_iter()
        .find(|m| m.as_str() == raw)
    }
}

/// The kind of tokenizer an embedding model uses, which fixes the token
/// bound (`core::chunk::tokens`, which also counts with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenFamily {
    WordPiece,
    SentencePiece,
    ByteLevel,
}

/// Special tokens a model adds to every input, beyond the text's own.
pub const SPECIAL_TOKENS: usize = 2;

/// The smallest chunk limit any family allows.
pub const CHUNK_TOKENS_FLOOR: usize = 16;

/// The words of a tokenizer family and the figures settings are checked
/// against. The bound itself (`weight`, `count`, over a per-character table)
/// is in `core::chunk::tokens`.
impl TokenFamily {
    pub const ALL: [TokenFamily; 3] = [
        TokenFamily::WordPiece,
        TokenFamily::SentencePiece,
        TokenFamily::ByteLevel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TokenFamily::WordPiece => "wordpiece",
            TokenFamily::SentencePiece => "sentencepiece",
            TokenFamily::ByteLevel => "byte-level",
        }
    }

    pub fn parse(raw: &str) -> Option<TokenFamily> {
        TokenFamily::ALL.into_iter().find(|f| f.as_str() == raw)
    }

    /// Tokens the tokenizer may add before the first character (a `▁` or
    /// a byte-level prefix space), not counting [`SPECIAL_TOKENS`].
    pub(crate) fn prefix(self) -> usize {
        match self {
            TokenFamily::WordPiece => 0,
            TokenFamily::SentencePiece | TokenFamily::ByteLevel => 1,
        }
    }

    /// The most any one character weighs (`tests/token_bound.rs` checks it
    /// against every scalar value): 3 for a Hangul syllable, 18 for `ﷺ`
    /// (NFKC: 18 characters), 33 for its UTF-8.
    pub fn char_weight_max(self) -> usize {
        match self {
            TokenFamily::WordPiece => 3,
            TokenFamily::SentencePiece => 18,
            TokenFamily::ByteLevel => 33,
        }
    }

    /// The smallest chunk limit: one that holds any single character.
    pub fn chunk_tokens_min(self) -> usize {
        CHUNK_TOKENS_FLOOR.max(self.prefix() + self.char_weight_max())
    }
}

/// What this project knows of a Workers AI embedding model: a configuration
/// naming it must agree (`shared/reference/platform-limits.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownModel {
    pub dimensions: usize,
    /// Input limit in tokens, special tokens included.
    pub max_input_tokens: usize,
    pub tokenizer: TokenFamily,
    /// Whether its Workers AI input takes `pooling` (`mean` or `cls`).
    pub takes_pooling: bool,
}

pub fn known_model(model: &str) -> Option<KnownModel> {
    let (dimensions, max_input_tokens, tokenizer, takes_pooling) = match model {
        "@cf/baai/bge-small-en-v1.5" => (384, 512, TokenFamily::WordPiece, true),
        "@cf/baai/bge-base-en-v1.5" => (768, 512, TokenFamily::WordPiece, true),
        "@cf/baai/bge-large-en-v1.5" => (1024, 512, TokenFamily::WordPiece, true),
        // XLM-RoBERTa's SentencePiece; sources disagree on the limit (512
        // or 8,192): 512 until measured. Its input is `{text}` (CLS-pooled).
        "@cf/baai/bge-m3" => (1024, 512, TokenFamily::SentencePiece, false),
        // Byte-level BPE; sources give 4,096 to 8,192.
        "@cf/qwen/qwen3-embedding-0.6b" => (1024, 4096, TokenFamily::ByteLevel, false),
        // SentencePiece with byte fallback.
        "@cf/google/embeddinggemma-300m" => (768, 512, TokenFamily::ByteLevel, false),
        _ => return None,
    };
    Some(KnownModel {
        dimensions,
        max_input_tokens,
        tokenizer,
        takes_pooling,
    })
}

/// Subrequests every step of the consumer (`pipeline::consume`) keeps free,
/// so an invocation can always end cleanly: a checkpoint (D1) and its
/// continuation message (queue), or a failure: the job's update (D1), the
/// dead-letter archive (D1) and the dead-letter queue send (queue).
pub const CONSUME_RESERVE: u64 = 3;

/// The smallest `CONSUME_SUBREQUESTS_MAX` that always makes progress: load
/// and claim (2), a page query, one embed or get, one upsert (3), and the
/// reserve, with room to spare for the staging invocation's text read and
/// staging batch.
pub const CONSUME_SUBREQUESTS_MIN: u64 = 10;

/// The settings that were replaced, and by what: refused, never ignored.
const REMOVED_SETTINGS: &[(&str, &str)] = &[
    ("CHUNK_SIZE_MAX_CHARS", "CHUNK_SIZE_MAX_TOKENS"),
    ("CHUNK_OVERLAP_CHARS", "CHUNK_OVERLAP_TOKENS"),
];

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    // Chunking.
    /// Largest chunk, in tokens by the conservative bound of
    /// `EMBEDDING_TOKENIZER` (at most `EMBEDDING_MAX_INPUT_TOKENS` minus
    /// the model's special tokens).
    pub chunk_size_max_tokens: usize,
    /// Tokens shared by consecutive chunks (same bound).
    pub chunk_overlap_tokens: usize,

    // Intake.
    /// Largest document text accepted, in UTF-8 bytes (413 above).
    pub document_bytes_max: usize,
    /// Largest request body accepted, in bytes (413 above).
    pub request_bytes_max: usize,
    /// Items in one `POST /v1/documents` batch.
    pub intake_batch_documents_max: usize,
    /// Serialized metadata per document, in bytes (must leave room inside
    /// Vectorize's 10 KiB per-vector metadata).
    pub metadata_bytes_max: usize,

    // D1.
    /// Bytes of one JSON parameter passed to a `json_each` bulk statement
    /// (D1 rejects strings over 2,000,000 bytes).
    pub d1_json_param_bytes_max: usize,
    /// Bytes of document text stored in one `version_parts` row.
    pub d1_text_part_bytes_max: usize,

    // Vector index and embedder.
    /// `local-d1` (offline, brute force over `VECTORS_DB`) or `vectorize`.
    pub index_backend: IndexBackend,
    /// `local-hash` (offline, hashed n-grams) or `workers-ai`.
    pub embedder_backend: EmbedderBackend,
    /// Dimensions of every embedding (Vectorize: at most 1,536).
    pub embedding_dimensions: usize,
    /// Workers AI model used by the `workers-ai` embedder.
    pub embedding_model: String,
    /// Pooling passed explicitly to the `workers-ai` embedder (`mean` or `cls`).
    pub embedding_pooling: Pooling,
    /// The model's input limit in tokens, special tokens included (bge-*:
    /// 512). Chunks and search queries are kept under it.
    pub embedding_max_input_tokens: usize,
    /// The model's tokenizer family (`wordpiece`, `sentencepiece`,
    /// `byte-level`), which fixes the token bound.
    pub embedding_tokenizer: TokenFamily,
    /// Metric the Vectorize index must have been created with.
    pub vectorize_metric: VectorMetric,
    /// How long a successful (or mismatching) check of the Vectorize index
    /// against the configuration is reused by an isolate; 0 checks on every
    /// queue and cron invocation.
    pub index_check_ttl_seconds: u32,
    /// Texts per embedder call (Workers AI: 100).
    pub embed_batch_size: usize,
    /// Vectors per upsert call (Vectorize from a Worker: 1,000).
    pub upsert_batch_size: usize,
    /// IDs per deleteByIds call (Vectorize: 100).
    pub delete_batch_size: usize,
    /// Vector IDs are at most this many bytes (Vectorize: 64).
    pub vector_id_bytes_max: usize,

    // Search.
    /// Results returned when a search gives no `top_k`.
    pub search_top_k_default: usize,
    /// Largest `top_k` a search may ask for.
    pub search_top_k_max: usize,
    /// Candidates asked from the index per result wanted, since stale and
    /// orphan candidates are filtered out against D1.
    pub search_overfetch_factor: usize,
    /// Largest topK asked of the index (Vectorize: 100, 50 with metadata).
    pub index_query_top_k_max: usize,
    /// Retries, inside one search request, of an embedder or index call
    /// that failed transiently (no delay between them).
    pub search_retries_max: u32,
    /// Largest serialized metadata filter the index takes (Vectorize: 2048
    /// bytes); a search whose filter is larger is refused with 422.
    pub index_filter_bytes_max: usize,

    // Retries and leases.
    /// Attempts (deliveries that claimed the job, since its last progress)
    /// before a job is `dead`, whatever the window.
    pub job_attempts_max: u32,
    /// How long a job keeps retrying transient failures without progress
    /// before it is `dead`: an outage of the embedder, index or D1 up to
    /// this long is survived.
    pub job_retry_window_seconds: u32,
    /// First retry delay; doubles per attempt, with deterministic jitter.
    pub retry_base_delay_seconds: u32,
    /// Cap of the backoff (Queues: at most 24 h). Small against the window,
    /// so that a job tries again soon after an outage ends, and its
    /// attempts (`JOB_ATTEMPTS_MAX` × at least half the cap) span the window.
    pub retry_max_delay_seconds: u32,
    /// Cap of the dead-letter consumer's retry delay (which grows with the
    /// letter's age): Queues' 100 deliveries span about 90 hours at one hour.
    pub dead_letter_retry_max_delay_seconds: u32,
    /// How long a claim holds a job. Longer than `INVOCATION_WALL_SECONDS_MAX`,
    /// so an expired lease means its holder is dead.
    pub job_lease_seconds: u32,
    /// The longest one queue invocation can run: the platform's 15 min
    /// wall-clock limit. Only a deployment whose invocations are bounded
    /// otherwise sets it lower (the offline profile: its steps take
    /// milliseconds and `CONSUME_WALL_SECONDS_MAX` ends each invocation).
    pub invocation_wall_seconds_max: u32,
    /// Delay before a delivery that found the job claimed by another looks again.
    pub claim_busy_retry_seconds: u32,

    // Consumer invocation budget.
    /// Subrequests (every D1, embed, index and queue call counts as one) one
    /// queue invocation may make for its job. Before each step the consumer
    /// checks that the step, plus a reserve to checkpoint or fail, still
    /// fits; otherwise it checkpoints in D1 and continues in a new message.
    /// Default: the Workers Free plan's 50 external subrequests.
    pub consume_subrequests_max: u64,
    /// Wall time one queue invocation may spend on its job before it
    /// checkpoints (must stay under `JOB_LEASE_SECONDS`).
    pub consume_wall_seconds_max: u32,

    // Backfills.
    /// Documents a backfill enqueues per page (its default page size).
    pub backfill_page_size: u32,
    /// Pages a scheduled run enqueues for the running backfill.
    pub backfill_pages_per_run: usize,
    /// Passes a generation backfill makes over documents still missing
    /// before it ends `failed` (a pass re-enqueues failed builds).
    pub backfill_passes_max: u32,

    // Cron.
    /// Cleanup intents drained per scheduled run (in batches of `delete_batch_size`).
    pub cron_cleanup_intents_max: usize,
    /// Chunk rows of abandoned versions turned into cleanup intents per scheduled run.
    pub cron_abandoned_chunks_max: usize,
    /// A `queued` or `up_for_retry` job with no progress for this long is
    /// presumed to have lost its queue message and is re-enqueued by cron.
    pub job_stall_seconds: u32,
    /// Stalled jobs re-enqueued per scheduled run.
    pub cron_requeue_jobs_max: usize,
    /// Subrequests (D1, index, queue calls) one scheduled run may make; the
    /// run stops between steps when the next would pass it (Workers Free:
    /// 1,000 to Cloudflare services per invocation).
    pub cron_subrequests_max: u64,
    /// Wall time one scheduled run may take before it stops between steps.
    pub cron_wall_seconds_max: u32,
    /// Live chunks checked against the index per scheduled run (getByIds,
    /// in calls of at most 100).
    pub cron_verify_chunks_max: usize,
    /// Only versions live for longer than this are verified: the index's
    /// visibility delay (Vectorize: p99 under 2 minutes).
    pub index_visibility_window_seconds: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            chunk_size_max_tokens: 500,
            chunk_overlap_tokens: 50,
            document_bytes_max: 10_000_000,
            request_bytes_max: 12_000_000,
            intake_batch_documents_max: 100,
            metadata_bytes_max: 8192,
            d1_json_param_bytes_max: 900_000,
            d1_text_part_bytes_max: 900_000,
            index_backend: IndexBackend::LocalD1,
            embedder_backend: EmbedderBackend::LocalHash,
            embedding_dimensions: 384,
            embedding_model: "@cf/baai/bge-base-en-v1.5".to_string(),
            embedding_pooling: Pooling::Mean,
            embedding_max_input_tokens: 512,
            embedding_tokenizer: TokenFamily::WordPiece,
            vectorize_metric: VectorMetric::Cosine,
            index_check_ttl_seconds: 300,
            embed_batch_size: 100,
            upsert_batch_size: 1000,
            delete_batch_size: 100,
            vector_id_bytes_max: 64,
            search_top_k_default: 5,
            search_top_k_max: 50,
            search_overfetch_factor: 3,
            index_query_top_k_max: 100,
            search_retries_max: 2,
            index_filter_bytes_max: 2048,
            job_attempts_max: 30,
            job_retry_window_seconds: 3600,
            retry_base_delay_seconds: 5,
            retry_max_delay_seconds: 300,
            dead_letter_retry_max_delay_seconds: 3600,
            job_lease_seconds: 960,
            invocation_wall_seconds_max: 900,
            claim_busy_retry_seconds: 60,
            consume_subrequests_max: 50,
            consume_wall_seconds_max: 300,
            backfill_page_size: 50,
            backfill_pages_per_run: 5,
            backfill_passes_max: 5,
            cron_cleanup_intents_max: 1000,
            cron_abandoned_chunks_max: 1000,
            job_stall_seconds: 900,
            cron_requeue_jobs_max: 100,
            cron_verify_chunks_max: 100,
            cron_subrequests_max: 500,
            cron_wall_seconds_max: 60,
            index_visibility_window_seconds: 300,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("setting {name} is not a valid value")]
    Unparsable { name: &'static str },
    #[error("setting {name} is out of range: {why}")]
    OutOfRange {
        name: &'static str,
        why: &'static str,
    },
    #[error("setting {name} was replaced by {replacement}")]
    Removed {
        name: &'static str,
        replacement: &'static str,
    },
}

impl ConfigError {
    /// The setting at fault.
    pub fn setting(&self) -> &'static str {
        match self {
            ConfigError::Unparsable { name }
            | ConfigError::OutOfRange { name, .. }
            | ConfigError::Removed { name, .. } => name,
        }
    }
}

/// The names of every setting, as Worker variables, with their defaults
/// rendered as strings. `docs/configuration.md` must list each of them.
pub const SETTINGS: &[&str] = &[
    "CHUNK_SIZE_MAX_TOKENS",
    "CHUNK_OVERLAP_TOKENS",
    "DOCUMENT_BYTES_MAX",
    "REQUEST_BYTES_MAX",
    "INTAKE_BATCH_DOCUMENTS_MAX",
    "METADATA_BYTES_MAX",
    "D1_JSON_PARAM_BYTES_MAX",
    "D1_TEXT_PART_BYTES_MAX",
    "INDEX_BACKEND",
    "EMBEDDER_BACKEND",
    "EMBEDDING_DIMENSIONS",
    "EMBEDDING_MODEL",
    "EMBEDDING_POOLING",
    "EMBEDDING_MAX_INPUT_TOKENS",
    "EMBEDDING_TOKENIZER",
    "VECTORIZE_METRIC",
    "INDEX_CHECK_TTL_SECONDS",
    "EMBED_BATCH_SIZE",
    "UPSERT_BATCH_SIZE",
    "DELETE_BATCH_SIZE",
    "VECTOR_ID_BYTES_MAX",
    "SEARCH_TOP_K_DEFAULT",
    "SEARCH_TOP_K_MAX",
    "SEARCH_OVERFETCH_FACTOR",
    "INDEX_QUERY_TOP_K_MAX",
    "INDEX_FILTER_BYTES_MAX",
    "SEARCH_RETRIES_MAX",
    "JOB_ATTEMPTS_MAX",
    "JOB_RETRY_WINDOW_SECONDS",
    "RETRY_BASE_DELAY_SECONDS",
    "RETRY_MAX_DELAY_SECONDS",
    "DEAD_LETTER_RETRY_MAX_DELAY_SECONDS",
    "JOB_LEASE_SECONDS",
    "INVOCATION_WALL_SECONDS_MAX",
    "CLAIM_BUSY_RETRY_SECONDS",
    "CRON_CLEANUP_INTENTS_MAX",
    "CRON_ABANDONED_CHUNKS_MAX",
    "JOB_STALL_SECONDS",
    "CRON_REQUEUE_JOBS_MAX",
    "CRON_VERIFY_CHUNKS_MAX",
    "CRON_SUBREQUESTS_MAX",
    "CONSUME_SUBREQUESTS_MAX",
    "CONSUME_WALL_SECONDS_MAX",
    "BACKFILL_PAGE_SIZE",
    "BACKFILL_PAGES_PER_RUN",
    "BACKFILL_PASSES_MAX",
    "CRON_WALL_SECONDS_MAX",
    "INDEX_VISIBILITY_WINDOW_SECONDS",
];

impl Config {
    /// The longest search query, in tokens by the bound of
    /// `EMBEDDING_TOKENIZER`: what the model takes beside its special tokens.
    pub fn query_tokens_max(&self) -> usize {
        self.embedding_max_input_tokens
            .saturating_sub(SPECIAL_TOKENS)
    }

    /// Builds the configuration from named variables; `lookup` returns the
    /// raw value of a variable, or `None` to keep the default.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        if let Some((name, replacement)) = REMOVED_SETTINGS
            .iter()
            .find(|(name, _)| lookup(name).is_some())
        {
            return Err(ConfigError::Removed { name, replacement });
        }
        let mut c = Config::default();
        macro_rules! num {
            ($field:ident, $name:literal) => {
                if let Some(raw) = lookup($name) {
                    c.$field = raw
                        .trim()
                        .parse()
                        .map_err(|_| ConfigError::Unparsable { name: $name })?;
                }
            };
        }
        num!(chunk_size_max_tokens, "CHUNK_SIZE_MAX_TOKENS");
        num!(chunk_overlap_tokens, "CHUNK_OVERLAP_TOKENS");
        num!(document_bytes_max, "DOCUMENT_BYTES_MAX");
        num!(request_bytes_max, "REQUEST_BYTES_MAX");
        num!(intake_batch_documents_max, "INTAKE_BATCH_DOCUMENTS_MAX");
        num!(metadata_bytes_max, "METADATA_BYTES_MAX");
        num!(d1_json_param_bytes_max, "D1_JSON_PARAM_BYTES_MAX");
        num!(d1_text_part_bytes_max, "D1_TEXT_PART_BYTES_MAX");
        num!(embedding_dimensions, "EMBEDDING_DIMENSIONS");
        num!(embed_batch_size, "EMBED_BATCH_SIZE");
        num!(upsert_batch_size, "UPSERT_BATCH_SIZE");
        num!(delete_batch_size, "DELETE_BATCH_SIZE");
        num!(vector_id_bytes_max, "VECTOR_ID_BYTES_MAX");
        num!(search_top_k_default, "SEARCH_TOP_K_DEFAULT");
        num!(search_top_k_max, "SEARCH_TOP_K_MAX");
        num!(search_overfetch_factor, "SEARCH_OVERFETCH_FACTOR");
        num!(index_query_top_k_max, "INDEX_QUERY_TOP_K_MAX");
        num!(index_filter_bytes_max, "INDEX_FILTER_BYTES_MAX");
        num!(search_retries_max, "SEARCH_RETRIES_MAX");
        num!(job_attempts_max, "JOB_ATTEMPTS_MAX");
        num!(job_retry_window_seconds, "JOB_RETRY_WINDOW_SECONDS");
        num!(retry_base_delay_seconds, "RETRY_BASE_DELAY_SECONDS");
        num!(retry_max_delay_seconds, "RETRY_MAX_DELAY_SECONDS");
        num!(
            dead_letter_retry_max_delay_seconds,
            "DEAD_LETTER_RETRY_MAX_DELAY_SECONDS"
        );
        num!(job_lease_seconds, "JOB_LEASE_SECONDS");
        num!(invocation_wall_seconds_max, "INVOCATION_WALL_SECONDS_MAX");
        num!(claim_busy_retry_seconds, "CLAIM_BUSY_RETRY_SECONDS");
        num!(cron_cleanup_intents_max, "CRON_CLEANUP_INTENTS_MAX");
        num!(cron_abandoned_chunks_max, "CRON_ABANDONED_CHUNKS_MAX");
        num!(job_stall_seconds, "JOB_STALL_SECONDS");
        num!(cron_requeue_jobs_max, "CRON_REQUEUE_JOBS_MAX");
        num!(cron_verify_chunks_max, "CRON_VERIFY_CHUNKS_MAX");
        num!(cron_subrequests_max, "CRON_SUBREQUESTS_MAX");
        num!(consume_subrequests_max, "CONSUME_SUBREQUESTS_MAX");
        num!(consume_wall_seconds_max, "CONSUME_WALL_SECONDS_MAX");
        num!(backfill_page_size, "BACKFILL_PAGE_SIZE");
        num!(backfill_pages_per_run, "BACKFILL_PAGES_PER_RUN");
        num!(backfill_passes_max, "BACKFILL_PASSES_MAX");
        num!(cron_wall_seconds_max, "CRON_WALL_SECONDS_MAX");
        num!(
            index_visibility_window_seconds,
            "INDEX_VISIBILITY_WINDOW_SECONDS"
        );
        num!(index_check_ttl_seconds, "INDEX_CHECK_TTL_SECONDS");
        if let Some(raw) = lookup("EMBEDDING_MODEL") {
            c.embedding_model = raw.trim().to_string();
        }
        // The model's limit and tokenizer, unless set: a known model's, else
        // the safest (512 tokens, byte-level).
        let known = known_model(&c.embedding_model);
        c.embedding_max_input_tokens = known.map_or(512, |m| m.max_input_tokens);
        c.embedding_tokenizer = known.map_or(TokenFamily::ByteLevel, |m| m.tokenizer);
        num!(embedding_max_input_tokens, "EMBEDDING_MAX_INPUT_TOKENS");
        if let Some(raw) = lookup("EMBEDDING_TOKENIZER") {
            c.embedding_tokenizer =
                TokenFamily::parse(raw.trim()).ok_or(ConfigError::Unparsable {
                    name: "EMBEDDING_TOKENIZER",
                })?;
        }
        if let Some(raw) = lookup("EMBEDDING_POOLING") {
            c.embedding_pooling = match raw.trim() {
                "mean" => Pooling::Mean,
                "cls" => Pooling::Cls,
                _ => {
                    return Err(ConfigError::Unparsable {
                        name: "EMBEDDING_POOLING",
                    })
                }
            };
        }
        if let Some(raw) = lookup("VECTORIZE_METRIC") {
            c.vectorize_metric =
                VectorMetric::parse(raw.trim()).ok_or(ConfigError::Unparsable {
                    name: "VECTORIZE_METRIC",
                })?;
        }
        if let Some(raw) = lookup("INDEX_BACKEND") {
            c.index_backend = match raw.trim() {
                "local-d1" => IndexBackend::LocalD1,
                "vectorize" => IndexBackend::Vectorize,
                _ => {
                    return Err(ConfigError::Unparsable {
                        name: "INDEX_BACKEND",
                    })
                }
            };
        }
        if let Some(raw) = lookup("EMBEDDER_BACKEND") {
            c.embedder_backend = match raw.trim() {
                "local-hash" => EmbedderBackend::LocalHash,
                "workers-ai" => EmbedderBackend::WorkersAi,
                _ => {
                    return Err(ConfigError::Unparsable {
                        name: "EMBEDDER_BACKEND",
                    })
                }
            };
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks the relations between settings and the hard platform ceilings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(ok: bool, name: &'static str, why: &'static str) -> Result<(), ConfigError> {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { name, why })
            }
        }
        check(
            (64..=32_768).contains(&self.embedding_max_input_tokens),
            "EMBEDDING_MAX_INPUT_TOKENS",
            "must be 64..=32768",
        )?;
        check(
            self.chunk_size_max_tokens >= self.embedding_tokenizer.chunk_tokens_min(),
            "CHUNK_SIZE_MAX_TOKENS",
            "must hold the heaviest character of EMBEDDING_TOKENIZER (at least 16; sentencepiece 19, byte-level 34)",
        )?;
        check(
            self.chunk_size_max_tokens + SPECIAL_TOKENS <= self.embedding_max_input_tokens,
            "CHUNK_SIZE_MAX_TOKENS",
            "must leave the model's 2 special tokens within EMBEDDING_MAX_INPUT_TOKENS",
        )?;
        check(
            self.chunk_overlap_tokens * 2 <= self.chunk_size_max_tokens,
            "CHUNK_OVERLAP_TOKENS",
            "must be at most half of CHUNK_SIZE_MAX_TOKENS",
        )?;
        check(
            self.document_bytes_max >= 1,
            "DOCUMENT_BYTES_MAX",
            "must be positive",
        )?;
        check(
            self.request_bytes_max >= 1024,
            "REQUEST_BYTES_MAX",
            "must be at least 1024",
        )?;
        check(
            (1..=1000).contains(&self.intake_batch_documents_max),
            "INTAKE_BATCH_DOCUMENTS_MAX",
            "must be 1..=1000",
        )?;
        check(
            self.metadata_bytes_max <= 9216,
            "METADATA_BYTES_MAX",
            "must leave room in 10 KiB",
        )?;
        check(
            (4096..=1_900_000).contains(&self.d1_json_param_bytes_max),
            "D1_JSON_PARAM_BYTES_MAX",
            "must be 4096..=1900000",
        )?;
        check(
            (4096..=1_900_000).contains(&self.d1_text_part_bytes_max),
            "D1_TEXT_PART_BYTES_MAX",
            "must be 4096..=1900000",
        )?;
        check(
            (8..=1536).contains(&self.embedding_dimensions),
            "EMBEDDING_DIMENSIONS",
            "must be 8..=1536",
        )?;
        check(
            !self.embedding_model.is_empty()
                && self.embedding_model.len() <= 128
                && self.embedding_model.bytes().all(|b| b.is_ascii_graphic()),
            "EMBEDDING_MODEL",
            "must be 1..=128 printable ASCII characters",
        )?;
        if let (EmbedderBackend::WorkersAi, Some(known)) =
            (self.embedder_backend, known_model(&self.embedding_model))
        {
            check(
                known.dimensions == self.embedding_dimensions,
                "EMBEDDING_DIMENSIONS",
                "must equal the output dimensions of EMBEDDING_MODEL",
            )?;
            check(
                self.embedding_max_input_tokens <= known.max_input_tokens,
                "EMBEDDING_MAX_INPUT_TOKENS",
                "must be at most the input limit of EMBEDDING_MODEL",
            )?;
            check(
                self.embedding_tokenizer == known.tokenizer,
                "EMBEDDING_TOKENIZER",
                "must be the tokenizer family of EMBEDDING_MODEL",
            )?;
        }
        check(
            self.index_check_ttl_seconds <= 3600,
            "INDEX_CHECK_TTL_SECONDS",
            "must be 0..=3600",
        )?;
        check(
            (1..=100).contains(&self.embed_batch_size),
            "EMBED_BATCH_SIZE",
            "must be 1..=100",
        )?;
        check(
            (1..=1000).contains(&self.upsert_batch_size),
            "UPSERT_BATCH_SIZE",
            "must be 1..=1000",
        )?;
        check(
            (1..=100).contains(&self.delete_batch_size),
            "DELETE_BATCH_SIZE",
            "must be 1..=100",
        )?;
        check(
            (48..=64).contains(&self.vector_id_bytes_max),
            "VECTOR_ID_BYTES_MAX",
            "must be 48..=64",
        )?;
        check(
            self.search_top_k_default >= 1 && self.search_top_k_default <= self.search_top_k_max,
            "SEARCH_TOP_K_DEFAULT",
            "must be 1..=SEARCH_TOP_K_MAX",
        )?;
        check(
            (1..=100).contains(&self.search_top_k_max),
            "SEARCH_TOP_K_MAX",
            "must be 1..=100",
        )?;
        check(
            (1..=10).contains(&self.search_overfetch_factor),
            "SEARCH_OVERFETCH_FACTOR",
            "must be 1..=10",
        )?;
        check(
            (1..=100).contains(&self.index_query_top_k_max),
            "INDEX_QUERY_TOP_K_MAX",
            "must be 1..=100",
        )?;
        check(
            self.search_retries_max <= 3,
            "SEARCH_RETRIES_MAX",
            "must be 0..=3",
        )?;
        check(
            (64..=65_536).contains(&self.index_filter_bytes_max),
            "INDEX_FILTER_BYTES_MAX",
            "must be 64..=65536",
        )?;
        check(
            (1..=90).contains(&self.job_attempts_max),
            "JOB_ATTEMPTS_MAX",
            "must be 1..=90 (under the queue's max_retries of 100, so that D1 decides first)",
        )?;
        check(
            (60..=7 * 86_400).contains(&self.job_retry_window_seconds),
            "JOB_RETRY_WINDOW_SECONDS",
            "must be 60..=604800",
        )?;
        check(
            self.retry_base_delay_seconds >= 1
                && self.retry_base_delay_seconds <= self.retry_max_delay_seconds,
            "RETRY_BASE_DELAY_SECONDS",
            "must be 1..=RETRY_MAX_DELAY_SECONDS",
        )?;
        check(
            self.retry_max_delay_seconds <= 86_400,
            "RETRY_MAX_DELAY_SECONDS",
            "must be at most 86400 (Queues' delay limit)",
        )?;
        check(
            (60..=86_400).contains(&self.dead_letter_retry_max_delay_seconds),
            "DEAD_LETTER_RETRY_MAX_DELAY_SECONDS",
            "must be 60..=86400 (Queues' delay limit)",
        )?;
        check(
            (1..=900).contains(&self.invocation_wall_seconds_max),
            "INVOCATION_WALL_SECONDS_MAX",
            "must be 1..=900 (the platform ends a queue invocation after 15 min)",
        )?;
        check(
            self.job_lease_seconds > self.invocation_wall_seconds_max && self.job_lease_seconds <= 86_400,
            "JOB_LEASE_SECONDS",
            "must be over INVOCATION_WALL_SECONDS_MAX (900: a lease must outlive any invocation that holds it) and at most 86400",
        )?;
        check(
            self.claim_busy_retry_seconds >= 1 && self.claim_busy_retry_seconds <= 86_400,
            "CLAIM_BUSY_RETRY_SECONDS",
            "must be 1..=86400",
        )?;
        check(
            self.cron_cleanup_intents_max >= 1,
            "CRON_CLEANUP_INTENTS_MAX",
            "must be positive",
        )?;
        check(
            self.cron_abandoned_chunks_max >= 1,
            "CRON_ABANDONED_CHUNKS_MAX",
            "must be positive",
        )?;
        check(
            self.job_stall_seconds >= 1,
            "JOB_STALL_SECONDS",
            "must be positive",
        )?;
        check(
            (1..=100).contains(&self.cron_requeue_jobs_max),
            "CRON_REQUEUE_JOBS_MAX",
            "must be 1..=100",
        )?;
        check(
            self.cron_verify_chunks_max <= 1000,
            "CRON_VERIFY_CHUNKS_MAX",
            "must be 0..=1000",
        )?;
        check(
            self.cron_subrequests_max >= 10,
            "CRON_SUBREQUESTS_MAX",
            "must be at least 10",
        )?;
        check(
            self.consume_subrequests_max >= CONSUME_SUBREQUESTS_MIN,
            "CONSUME_SUBREQUESTS_MAX",
            "must be at least 10 (one page of one chunk, plus the checkpoint reserve)",
        )?;
        check(
            self.consume_wall_seconds_max >= 1
                && self.consume_wall_seconds_max < self.invocation_wall_seconds_max,
            "CONSUME_WALL_SECONDS_MAX",
            "must be 1..INVOCATION_WALL_SECONDS_MAX (an invocation checkpoints before the platform ends it)",
        )?;
        check(
            (1..=100).contains(&self.backfill_page_size),
            "BACKFILL_PAGE_SIZE",
            "must be 1..=100 (one queue send per page)",
        )?;
        check(
            (1..=50).contains(&self.backfill_pages_per_run),
            "BACKFILL_PAGES_PER_RUN",
            "must be 1..=50",
        )?;
        check(
            (1..=100).contains(&self.backfill_passes_max),
            "BACKFILL_PASSES_MAX",
            "must be 1..=100",
        )?;
        check(
            (1..=900).contains(&self.cron_wall_seconds_max),
            "CRON_WALL_SECONDS_MAX",
            "must be 1..=900 (the cron wall-clock limit is 15 min)",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn overrides_apply_and_are_validated() {
        let c = Config::from_lookup(|n| match n {
            "CHUNK_SIZE_MAX_TOKENS" => Some("200".into()),
            "CHUNK_OVERLAP_TOKENS" => Some("20".into()),
            "INDEX_BACKEND" => Some("vectorize".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.chunk_size_max_tokens, 200);
        assert_eq!(c.chunk_overlap_tokens, 20);
        // The character settings were replaced: refused, not ignored.
        let err =
            Config::from_lookup(|n| (n == "CHUNK_SIZE_MAX_CHARS").then(|| "1000".to_string()))
                .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Removed {
                name: "CHUNK_SIZE_MAX_CHARS",
                replacement: "CHUNK_SIZE_MAX_TOKENS"
            }
        );
        // A lease must outlive the platform's longest invocation.
        let err = Config::from_lookup(|n| (n == "JOB_LEASE_SECONDS").then(|| "300".to_string()))
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "JOB_LEASE_SECONDS",
                    ..
                }
            ),
            "{err:?}"
        );
        let local = |n: &str| match n {
            "INVOCATION_WALL_SECONDS_MAX" => Some("30".to_string()),
            "CONSUME_WALL_SECONDS_MAX" => Some("15".to_string()),
            "JOB_LEASE_SECONDS" => Some("40".to_string()),
            _ => None,
        };
        assert_eq!(Config::from_lookup(local).unwrap().job_lease_seconds, 40);
        // A chunk must fit the model with its special tokens.
        let err =
            Config::from_lookup(|n| (n == "CHUNK_SIZE_MAX_TOKENS").then(|| "511".to_string()))
                .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "CHUNK_SIZE_MAX_TOKENS",
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(c.index_backend, IndexBackend::Vectorize);

        let err = Config::from_lookup(|n| (n == "UPSERT_BATCH_SIZE").then(|| "5000".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::OutOfRange {
                name: "UPSERT_BATCH_SIZE",
                why: "must be 1..=1000"
            }
        );
        let err = Config::from_lookup(|n| (n == "EMBED_BATCH_SIZE").then(|| "ten".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Unparsable {
                name: "EMBED_BATCH_SIZE"
            }
        );
    }

    #[test]
    fn embedding_and_index_settings() {
        let c = Config::default();
        assert_eq!(c.embedding_model, "@cf/baai/bge-base-en-v1.5");
        assert_eq!(c.embedding_pooling, Pooling::Mean);
        assert_eq!(c.vectorize_metric, VectorMetric::Cosine);

        let prod = |extra: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                let base = [
                    ("INDEX_BACKEND", "vectorize"),
                    ("EMBEDDER_BACKEND", "workers-ai"),
                    ("EMBEDDING_DIMENSIONS", "768"),
                ];
                extra
                    .iter()
                    .chain(base.iter())
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = Config::from_lookup(prod(&[
            ("EMBEDDING_POOLING", "cls"),
            ("VECTORIZE_METRIC", "dot-product"),
        ]))
        .unwrap();
        assert_eq!(c.embedding_pooling, Pooling::Cls);
        assert_eq!(c.vectorize_metric, VectorMetric::DotProduct);
        assert_eq!(c.embedding_dimensions, 768);

        let err = Config::from_lookup(prod(&[("EMBEDDING_POOLING", "max")])).unwrap_err();
        assert_eq!(
            err,
            ConfigError::Unparsable {
                name: "EMBEDDING_POOLING"
            }
        );
        let err = Config::from_lookup(prod(&[("VECTORIZE_METRIC", "manhattan")])).unwrap_err();
        assert_eq!(
            err,
            ConfigError::Unparsable {
                name: "VECTORIZE_METRIC"
            }
        );
        // A known model fixes the dimensions...
        let err = Config::from_lookup(prod(&[("EMBEDDING_MODEL", "@cf/baai/bge-small-en-v1.5")]))
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "EMBEDDING_DIMENSIONS",
                    ..
                }
            ),
            "{err:?}"
        );
        let c = Config::from_lookup(prod(&[
            ("EMBEDDING_MODEL", "@cf/baai/bge-small-en-v1.5"),
            ("EMBEDDING_DIMENSIONS", "384"),
        ]))
        .unwrap();
        assert_eq!(c.embedding_model, "@cf/baai/bge-small-en-v1.5");
        // ...an unknown one is taken at its configured word, and the local embedder ignores the model.
        Config::from_lookup(prod(&[
            ("EMBEDDING_MODEL", "@cf/acme/embed-v9"),
            ("EMBEDDING_DIMENSIONS", "512"),
        ]))
        .unwrap();
        Config::from_lookup(|n| (n == "EMBEDDING_DIMENSIONS").then(|| "64".to_string())).unwrap();
        let err = Config::from_lookup(prod(&[("EMBEDDING_MODEL", "bad model")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "EMBEDDING_MODEL",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = Config::from_lookup(prod(&[("INDEX_CHECK_TTL_SECONDS", "3601")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "INDEX_CHECK_TTL_SECONDS",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn configuration_doc_lists_every_setting() {
        let doc = include_str!("../docs/configuration.md");
        for name in SETTINGS {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/configuration.md does not list {name}"
            );
        }
    }
}
