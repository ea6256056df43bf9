//! Every tunable and platform limit, in one named place. A leaf: this
//! module imports nothing from the crate, and any module may import it.
//!
//! Each setting is written once, in the `settings!` table below: its field
//! and doc comment, the Worker variable that overrides it (SCREAMING_SNAKE_CASE,
//! see [`SETTINGS`]), its type, its default (from the platform figures,
//! `shared/reference/platform-limits.md`) and the range (or check) it must
//! pass. The rules between settings are in [`Config::validate`]. The table
//! in `docs/configuration.md` lists the same names and defaults; a test
//! keeps the two in step.
//!
//! Beside the table: the words a setting may take (`choices!`), what this
//! project knows of the models and tokenizer families the settings name
//! ([`known_model`], [`TokenFamily`]'s limits, [`SPECIAL_TOKENS`]) and the
//! consumer's fixed budget figures ([`CONSUME_RESERVE`],
//! [`CONSUME_SUBREQUESTS_MIN`]), since checking a configuration needs them.
//! What needs the core's types is written beside them: the token bound in
//! `core::chunk::tokens`, and `Config`'s index configuration (its chunker and
//! the JSON recorded with each generation) in `core::index_config`.

use thiserror::Error;

/// A type a setting can have: read from the Worker variable's text, trimmed
/// of surrounding whitespace first, and rendered as `docs/configuration.md`
/// writes a default.
trait SettingValue: Sized {
    fn parse_setting(raw: &str) -> Option<Self>;
    /// Only the test that compares the defaults with the doc renders them.
    #[cfg_attr(not(test), allow(dead_code))]
    fn render(&self) -> String;
}

/// Numbers, in decimal as `str::parse` reads them.
macro_rules! number_settings {
    ($($t:ty),*) => {$(
        impl SettingValue for $t {
            fn parse_setting(raw: &str) -> Option<Self> {
                raw.parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

number_settings!(u16, u32, u64, usize);

/// Text, as given.
impl SettingValue for String {
    fn parse_setting(raw: &str) -> Option<Self> {
        Some(raw.to_string())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

/// Declares enums whose values are words a setting takes, each word written
/// once: `as_str` gives a value's word, `parse` the value of a word, `ALL`
/// every value in the order declared.
macro_rules! choices {
    ($(
        $(#[$attr:meta])*
        $name:ident { $( $(#[$vattr:meta])* $variant:ident = $word:literal, )* }
    )*) => {$(
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vattr])* $variant, )*
        }

        impl $name {
            /// Every value, in the order declared.
            pub const ALL: [$name; [$($word),*].len()] = [$($name::$variant),*];

            /// The word a Worker variable (and a recorded configuration) uses.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                }
            }

            /// The value a word names, if any.
            pub fn parse(raw: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|v| v.as_str() == raw)
            }
        }

        impl SettingValue for $name {
            fn parse_setting(raw: &str) -> Option<Self> {
                $name::parse(raw)
            }
            fn render(&self) -> String {
                self.as_str().to_string()
            }
        }
    )*};
}

choices! {
    /// Which vector index implementation the Worker uses.
    IndexBackend {
        /// A separate D1 database (`VECTORS_DB`), offline: exact cosine over a
        /// small namespace, quantized blocks past `LOCAL_INDEX_EXHAUSTIVE_MAX`.
        LocalD1 = "local-d1",
        /// Cloudflare Vectorize (`VECTORIZE` binding).
        Vectorize = "vectorize",
    }

    /// Which embedder the Worker uses.
    EmbedderBackend {
        /// Hashed word and character n-grams, deterministic and offline.
        LocalHash = "local-hash",
        /// Workers AI (`AI` binding).
        WorkersAi = "workers-ai",
    }

    /// How Workers AI pools token embeddings into one vector (bge models).
    /// Vectors made with different poolings are not comparable.
    Pooling {
        Mean = "mean",
        Cls = "cls",
    }

    /// The distance metric a Vectorize index was created with (fixed at creation).
    VectorMetric {
        Cosine = "cosine",
        Euclidean = "euclidean",
        DotProduct = "dot-product",
    }

    /// The kind of tokenizer an embedding model uses, which fixes the token
    /// bound (`core::chunk::tokens`, which also counts with it).
    TokenFamily {
        WordPiece = "wordpiece",
        SentencePiece = "sentencepiece",
        ByteLevel = "byte-level",
    }
}

/// Special tokens a model adds to every input, beyond the text's own.
pub const SPECIAL_TOKENS: usize = 2;

/// The smallest chunk limit any family allows.
pub const CHUNK_TOKENS_FLOOR: usize = 16;

/// The figures of a tokenizer family that settings are checked against. The
/// bound itself (`weight`, `count`, over a per-character table) is in
/// `core::chunk::tokens`.
impl TokenFamily {
    /// Tokens the tokenizer may add before the first character (a `▁` or
    /// a byte-level prefix space), not counting [`SPECIAL_TOKENS`].
    pub(crate) fn prefix(self) -> usize {
        match self {
            TokenFamily::WordPiece => 0,
            TokenFamily::SentencePiece | TokenFamily::ByteLevel => 1,
        }
    }

    /// The most any one character weighs (`tests/it/token_bound.rs` checks it
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
    /// Whether it was trained on many languages (Japanese among them), not
    /// on English alone.
    pub multilingual: bool,
}

/// What the offline embedder (`local-hash`) sizes its chunks by: it has no
/// tokenizer and takes `EMBEDDING_DIMENSIONS`, so `EMBEDDING_MODEL` (a
/// Workers AI setting) does not apply; its chunks are sized as bge-*-en's
/// (WordPiece, 512 tokens), which is what every offline figure in
/// docs/performance.md was measured with.
pub const LOCAL_HASH_SIZING: KnownModel = KnownModel {
    dimensions: 0,
    max_input_tokens: 512,
    tokenizer: TokenFamily::WordPiece,
    takes_pooling: false,
    multilingual: true,
};

/// The model the settings derived from a model (`from_known_model`) take
/// after: the configured Workers AI model's, or the offline embedder's.
fn sizing_model(backend: EmbedderBackend, model: &str) -> Option<KnownModel> {
    match backend {
        EmbedderBackend::WorkersAi => known_model(model),
        EmbedderBackend::LocalHash => Some(LOCAL_HASH_SIZING),
    }
}

pub fn known_model(model: &str) -> Option<KnownModel> {
    let (dimensions, max_input_tokens, tokenizer, takes_pooling, multilingual) = match model {
        "@cf/baai/bge-small-en-v1.5" => (384, 512, TokenFamily::WordPiece, true, false),
        "@cf/baai/bge-base-en-v1.5" => (768, 512, TokenFamily::WordPiece, true, false),
        "@cf/baai/bge-large-en-v1.5" => (1024, 512, TokenFamily::WordPiece, true, false),
        // XLM-RoBERTa's SentencePiece; sources disagree on the limit (512
        // or 8,192): 512 until measured. Its input is `{text}` (CLS-pooled).
        "@cf/baai/bge-m3" => (1024, 512, TokenFamily::SentencePiece, false, true),
        // Byte-level BPE; sources give 4,096 to 8,192.
        "@cf/qwen/qwen3-embedding-0.6b" => (1024, 4096, TokenFamily::ByteLevel, false, true),
        // SentencePiece with byte fallback.
        "@cf/google/embeddinggemma-300m" => (768, 512, TokenFamily::ByteLevel, false, true),
        _ => return None,
    };
    Some(KnownModel {
        dimensions,
        max_input_tokens,
        tokenizer,
        takes_pooling,
        multilingual,
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

/// Declares every setting, once. An entry reads
///
/// ```text
/// /// What it is: the field's doc comment.
/// field: Type = DEFAULT, "WORKER_VARIABLE"
///     [, from_known_model |m| VALUE]  unset, with a known EMBEDDING_MODEL m: VALUE
///     [, in RANGE, "why"]             the value must lie in RANGE
///     [, if PREDICATE, "why"];        PREDICATE(&value) must hold
/// ```
///
/// and the macro writes the [`Config`] struct, its `Default`, [`SETTINGS`],
/// `Config::read` (each variable parsed into its field, or
/// `ConfigError::Unparsable`), `Config::check_each` (each setting's own
/// check, or `ConfigError::OutOfRange { name, why }`) and, for the test that
/// keeps `docs/configuration.md` in step, each default as the doc writes it
/// (`the model's; DEFAULT` for a `from_known_model` setting). Variables are
/// read, and settings checked, in the order of the table.
macro_rules! settings {
    ($(
        $(#[$attr:meta])*
        $field:ident: $ty:ty = $default:expr, $var:literal
        $(, from_known_model $derive:expr)?
        $(, in $range:expr, $why_in:literal)?
        $(, if $pred:expr, $why_if:literal)?;
    )*) => {
        /// Every tunable and platform limit: one field per setting of the
        /// table, from the Worker's variables ([`Config::from_lookup`]) or
        /// the defaults.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Config {
            $( $(#[$attr])* pub $field: $ty, )*
        }

        impl Default for Config {
            fn default() -> Self {
                let mut c = Config {
                    $( $field: $default, )*
                };
                let known = sizing_model(c.embedder_backend, &c.embedding_model);
                $( $( c.$field = known.map_or($default, $derive); )? )*
                c
            }
        }

        /// The name of every setting: the Worker variable that overrides it.
        /// `docs/configuration.md` must list each of them, with its default.
        pub const SETTINGS: &[&str] = &[$( $var, )*];

        impl Config {
            /// Sets each field whose variable `lookup` returns, then each
            /// `from_known_model` field left unset from the model now set.
            fn read(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
                $(
                    if let Some(raw) = lookup($var) {
                        self.$field = <$ty as SettingValue>::parse_setting(raw.trim())
                            .ok_or(ConfigError::Unparsable { name: $var })?;
                    }
                )*
                let known = sizing_model(self.embedder_backend, &self.embedding_model);
                $( $(
                    if lookup($var).is_none() {
                        self.$field = known.map_or($default, $derive);
                    }
                )? )*
                Ok(())
            }

            /// Checks each setting on its own; `validate` adds the rules
            /// between settings.
            fn check_each(&self) -> Result<(), ConfigError> {
                $(
                    $( check(($range).contains(&self.$field), $var, $why_in)?; )?
                    $( check(($pred)(&self.$field), $var, $why_if)?; )?
                )*
                Ok(())
            }

            /// Each setting's default as `docs/configuration.md` writes it.
            #[cfg(test)]
            fn documented_defaults() -> Vec<(&'static str, String)> {
                vec![$(
                    ($var, {
                        let written = <$ty as SettingValue>::render(&$default);
                        $(
                            let _derived = stringify!($derive);
                            let written = format!("the model's; {written}");
                        )?
                        written
                    }),
                )*]
            }
        }
    };
}

/// `Err(OutOfRange)` for `name` unless `ok`.
fn check(ok: bool, name: &'static str, why: &'static str) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange { name, why })
    }
}

/// A Workers AI model name: 1 to 128 printable ASCII characters.
pub fn is_model_name(model: &str) -> bool {
    !model.is_empty() && model.len() <= 128 && model.bytes().all(|b| b.is_ascii_graphic())
}

settings! {
    // Chunking.
    /// Largest chunk, in tokens by the conservative bound of
    /// `EMBEDDING_TOKENIZER` (at most `EMBEDDING_MAX_INPUT_TOKENS` minus
    /// the model's special tokens).
    chunk_size_max_tokens: usize = 500, "CHUNK_SIZE_MAX_TOKENS";
    /// Tokens shared by consecutive chunks (same bound).
    chunk_overlap_tokens: usize = 50, "CHUNK_OVERLAP_TOKENS";

    // Intake.
    /// Largest document text accepted, in UTF-8 bytes (413 above).
    document_bytes_max: usize = 10_000_000, "DOCUMENT_BYTES_MAX",
        in 1.., "must be positive";
    /// Largest body of a document write (`PUT /v1/documents/{id}`, `POST
    /// /v1/documents`), in bytes (413 above, nothing read past it).
    request_bytes_max: usize = 12_000_000, "REQUEST_BYTES_MAX",
        in 1024.., "must be at least 1024";
    /// Largest body of `POST /v1/search`: a query of at most 4,096 bytes and
    /// a filter, each possibly written with JSON escapes.
    search_request_bytes_max: usize = 65_536, "SEARCH_REQUEST_BYTES_MAX",
        in 1024.., "must be at least 1024";
    /// Largest body of a `/v1/syncs` route: the largest is a `seen` of
    /// `INTAKE_BATCH_DOCUMENTS_MAX` document IDs and hashes.
    sync_request_bytes_max: usize = 262_144, "SYNC_REQUEST_BYTES_MAX",
        in 1024.., "must be at least 1024";
    /// Largest body of a `/v1/admin/*` route: the largest is a redrive's
    /// filter of 100 document IDs.
    admin_request_bytes_max: usize = 262_144, "ADMIN_REQUEST_BYTES_MAX",
        in 1024.., "must be at least 1024";
    /// Largest body of any other route (none of them reads one).
    other_request_bytes_max: usize = 4096, "OTHER_REQUEST_BYTES_MAX",
        in 2.., "must be at least 2";
    /// A refused body (past its route's cap, or of a refused caller) is
    /// read and dropped, up to this many bytes, before the answer, so that
    /// a client still sending reads it instead of a reset connection (a
    /// lingering close); past it the body is cancelled. The platform
    /// refuses bodies past 100 MB itself on most plans.
    request_discard_bytes_max: usize = 104_857_600, "REQUEST_DISCARD_BYTES_MAX";
    /// How long a refused body may be read and dropped, in seconds.
    request_discard_seconds_max: u64 = 10, "REQUEST_DISCARD_SECONDS_MAX",
        in 0..=60, "must be 0..=60";
    /// Items in one `POST /v1/documents` batch.
    intake_batch_documents_max: usize = 100, "INTAKE_BATCH_DOCUMENTS_MAX",
        in 1..=1000, "must be 1..=1000";
    /// Serialized metadata per document, in bytes (must leave room inside
    /// Vectorize's 10 KiB per-vector metadata).
    metadata_bytes_max: usize = 8192, "METADATA_BYTES_MAX",
        in ..=9216, "must leave room in 10 KiB";

    // Tenants.
    /// Tenants the platform may hold, the built-in `default` one included
    /// (each is a Vectorize namespace: at most 50,000 per index).
    tenants_max: u64 = 50_000, "TENANTS_MAX",
        in 1..=50_000, "must be 1..=50000 (Vectorize's namespaces per index)";
    /// Documents a tenant may store (those whose latest version is not a
    /// delete), unless its own quota says otherwise.
    tenant_documents_max: u64 = 1_000_000, "TENANT_DOCUMENTS_MAX",
        in 1.., "must be positive";
    /// Text bytes a tenant may store (every version's text the ledger
    /// still holds, history included, until cron prunes it:
    /// `TEXT_RETENTION_SECONDS`), unless its own quota says otherwise.
    tenant_bytes_max: u64 = 1_000_000_000, "TENANT_BYTES_MAX",
        in 1.., "must be positive";
    /// Requests a tenant's tokens may make per minute (a fixed window per
    /// clock minute), unless its own quota says otherwise.
    tenant_requests_per_minute: u64 = 6000, "TENANT_REQUESTS_PER_MINUTE",
        in 1.., "must be positive";

    // Shards (docs/ARCHITECTURE.md, "Shards and the directory").
    /// Shards the deployment's bindings declare: each is one D1 ledger and
    /// one vector index. Shard 0 is `DB` and `VECTORIZE` (offline:
    /// `VECTORS_DB`) and holds the directory; shard n is `DB_SHARD_<n>` and
    /// `VECTORIZE_SHARD_<n>` (`VECTORS_DB_SHARD_<n>`). With one shard
    /// nothing is looked up. A scheduled run shares `CRON_SUBREQUESTS_MAX`
    /// and `CRON_WALL_SECONDS_MAX` evenly among them (and, with more than
    /// one, the tenants' moves between them: one share more).
    shards: u16 = 1, "SHARDS",
        in 1..=64, "must be 1..=64";
    /// A shard whose D1 database is this large takes no new tenant (a pin
    /// still may): under D1's 10 GB, with room for its tenants to grow.
    shard_full_bytes: u64 = 8_000_000_000, "SHARD_FULL_BYTES",
        in 1..=10_000_000_000, "must be 1..=10000000000 (D1's 10 GB)";
    /// How long an isolate keeps what the directory said of a token or a
    /// tenant (its shard), so that a request of a known token reads
    /// nothing on shard 0 (0: every request reads the directory). A
    /// placement changes only by a move, after which the shard the tenant
    /// left sends its requests back to the directory; the shard checks the
    /// token itself on every request.
    directory_cache_seconds: u32 = 60, "DIRECTORY_CACHE_SECONDS",
        in 0..=3600, "must be 0..=3600";
    /// Entries an isolate's directory cache holds at most; a full cache is
    /// emptied and starts again.
    directory_cache_entries: usize = 10_000, "DIRECTORY_CACHE_ENTRIES",
        in 1..=1_000_000, "must be 1..=1000000";
    /// Documents a tenant's move copies (or removes) per page: one D1
    /// batch on the new shard, and the page's vectors read and upserted.
    /// A page holds every version's text of its documents, so it is
    /// bounded by bytes too (`D1_JSON_PARAM_BYTES_MAX` per statement).
    move_page_documents: usize = 20, "MOVE_PAGE_DOCUMENTS",
        in 1..=500, "must be 1..=500";
    /// Documents whose marks (what a copy must match) a move compares on
    /// both shards per read: the catch-up, while the tenant is fenced,
    /// reads every document's mark, so this sets how many reads the fence
    /// lasts (two per page, and a copy of what changed).
    move_marks_page: usize = 500, "MOVE_MARKS_PAGE",
        in 1..=5000, "must be 1..=5000";

    // Source sync.
    /// How long a sync session stays open for writes before it expires,
    /// deleting nothing.
    sync_session_ttl_seconds: u64 = 86_400, "SYNC_SESSION_TTL_SECONDS",
        in 60..=2_592_000, "must be 60..=2592000 (30 days)";
    /// Largest share of a source, in percent, a commit may delete without
    /// `allow_mass_delete` (`409 sync_delete_guard` above).
    sync_delete_share_max_percent: u32 = 50, "SYNC_DELETE_SHARE_MAX_PERCENT",
        in ..=100, "must be 0..=100";
    /// Planned deletes a commit settles per page (one intake batch each).
    sync_commit_page_size: u32 = 100, "SYNC_COMMIT_PAGE_SIZE",
        in 1..=1000, "must be 1..=1000";
    /// Pages a `POST /v1/syncs/{id}/commit` request settles before it
    /// answers; the cron and later calls continue.
    sync_commit_pages_per_request: u32 = 4, "SYNC_COMMIT_PAGES_PER_REQUEST",
        in ..=50, "must be 0..=50";
    /// Time buckets one `GET /v1/admin/jobs/timeline` answers at most (the
    /// console's chart of jobs over time).
    timeline_buckets_max: u32 = 500, "TIMELINE_BUCKETS_MAX",
        in 1..=10_000, "must be 1..=10000";
    /// Items a page of a listing holds when the request names no `limit`
    /// (`GET /v1/documents`, `GET /v1/syncs`, `GET /v1/admin/documents`).
    listing_page_default: usize = 50, "LISTING_PAGE_DEFAULT",
        in 1..=1000, "must be 1..=1000";
    /// The largest `limit` of those listings (a page reads its documents'
    /// views in one statement: keep it small).
    listing_page_max: usize = 100, "LISTING_PAGE_MAX",
        in 1..=1000, "must be 1..=1000";
    /// Pages of sync commits one cron invocation settles.
    cron_sync_pages_max: u32 = 20, "CRON_SYNC_PAGES_MAX",
        in ..=200, "must be 0..=200";

    // D1.
    /// Bytes of one JSON parameter passed to a `json_each` bulk statement
    /// (D1 rejects strings over 2,000,000 bytes).
    d1_json_param_bytes_max: usize = 900_000, "D1_JSON_PARAM_BYTES_MAX",
        in 4096..=1_900_000, "must be 4096..=1900000";
    /// Bytes of document text stored in one `version_parts` row.
    d1_text_part_bytes_max: usize = 900_000, "D1_TEXT_PART_BYTES_MAX",
        in 4096..=1_900_000, "must be 4096..=1900000";
    /// The average size of a text part (`core::text_parts`: cut where the
    /// content says, so versions share the parts an edit leaves alone):
    /// an edit writes about one part again, a new document
    /// ⌈bytes / this⌉ parts. Capped at a quarter of D1_TEXT_PART_BYTES_MAX.
    text_part_bytes_target: usize = 65_536, "TEXT_PART_BYTES_TARGET",
        in 1024..=1_048_576, "must be 1024..=1048576";

    // Vector index and embedder.
    /// `local-d1` (offline, over `VECTORS_DB`) or `vectorize`.
    index_backend: IndexBackend = IndexBackend::LocalD1, "INDEX_BACKEND";
    /// `local-hash` (offline, hashed n-grams) or `workers-ai`.
    embedder_backend: EmbedderBackend = EmbedderBackend::LocalHash, "EMBEDDER_BACKEND";
    /// Dimensions of every embedding (Vectorize: at most 1,536).
    embedding_dimensions: usize = 384, "EMBEDDING_DIMENSIONS",
        in 8..=1536, "must be 8..=1536";
    /// Workers AI model used by the `workers-ai` embedder: multilingual by
    /// default (Japanese is as important as English here), and the
    /// cheapest per token of the known ones (docs/deploy.md).
    embedding_model: String = "@cf/baai/bge-m3".to_string(), "EMBEDDING_MODEL",
        if is_model_name, "must be 1..=128 printable ASCII characters";
    /// Pooling passed explicitly to the `workers-ai` embedder (`mean` or
    /// `cls`) when its model takes one (bge-*-en); recorded with every
    /// generation. The default is bge-m3's own (its dense vectors are CLS
    /// vectors; its input takes no pooling).
    embedding_pooling: Pooling = Pooling::Cls, "EMBEDDING_POOLING";
    /// The model's input limit in tokens, special tokens included (bge-*:
    /// 512). Chunks and search queries are kept under it. Unset: a known
    /// model's, else 512.
    embedding_max_input_tokens: usize = 512, "EMBEDDING_MAX_INPUT_TOKENS",
        from_known_model |m| m.max_input_tokens,
        in 64..=32_768, "must be 64..=32768";
    /// The model's tokenizer family (`wordpiece`, `sentencepiece`,
    /// `byte-level`), which fixes the token bound. Unset: a known model's,
    /// else the safest, `byte-level`.
    embedding_tokenizer: TokenFamily = TokenFamily::ByteLevel, "EMBEDDING_TOKENIZER",
        from_known_model |m| m.tokenizer;
    /// Metric the Vectorize index must have been created with.
    vectorize_metric: VectorMetric = VectorMetric::Cosine, "VECTORIZE_METRIC";
    /// How long a successful (or mismatching) check of the Vectorize index
    /// against the configuration is reused by an isolate; 0 checks on every
    /// queue and cron invocation.
    index_check_ttl_seconds: u32 = 300, "INDEX_CHECK_TTL_SECONDS",
        in ..=3600, "must be 0..=3600";
    /// Texts per embedder call (Workers AI: 100).
    embed_batch_size: usize = 100, "EMBED_BATCH_SIZE",
        in 1..=100, "must be 1..=100";
    /// Vectors per upsert call (Vectorize from a Worker: 1,000).
    upsert_batch_size: usize = 1000, "UPSERT_BATCH_SIZE",
        in 1..=1000, "must be 1..=1000";
    /// IDs per deleteByIds call (Vectorize: 100).
    delete_batch_size: usize = 100, "DELETE_BATCH_SIZE",
        in 1..=100, "must be 1..=100";
    /// Vector IDs are at most this many bytes (Vectorize: 64).
    vector_id_bytes_max: usize = 64, "VECTOR_ID_BYTES_MAX",
        in 48..=64, "must be 48..=64";

    // The offline index (`INDEX_BACKEND=local-d1`, `adapters::local_index`).
    /// A namespace of at most this many vectors, without blocks yet, is
    /// searched exhaustively (exact cosine over every vector); past it,
    /// its next upsert also keeps its vectors quantized in blocks stored by
    /// dimension, which a query reads only its largest dimensions of.
    local_index_exhaustive_max: usize = 4096, "LOCAL_INDEX_EXHAUSTIVE_MAX",
        in 1..=1_000_000, "must be 1..=1000000";
    /// Vectors per block: the length of one row of codes (bytes), and what
    /// an upsert rewrites of a block per dimension.
    local_index_block_vectors: usize = 4096, "LOCAL_INDEX_BLOCK_VECTORS",
        in 64..=262_144, "must be 64..=262144";
    /// Dimensions of a query (those of largest magnitude) the first pass
    /// reads: a query embedded by the local embedder has a few dozen
    /// non-zero ones; a dense query is approximated on these.
    local_index_query_dims_max: usize = 64, "LOCAL_INDEX_QUERY_DIMS_MAX",
        in 1..=1536, "must be 1..=1536";
    /// Candidates of the first pass scored exactly (at least the query's topK).
    local_index_rerank: usize = 100, "LOCAL_INDEX_RERANK",
        in 1..=10_000, "must be 1..=10000";
    /// Vectors one upsert (or query) places in blocks at most, and rows one
    /// round of a filtered query reads at most: the most work it adds.
    local_index_maintain_rows_max: usize = 8192, "LOCAL_INDEX_MAINTAIN_ROWS_MAX",
        in 64..=200_000, "must be 64..=200000";

    // Search.
    /// Results returned when a search gives no `top_k`.
    search_top_k_default: usize = 5, "SEARCH_TOP_K_DEFAULT";
    /// Largest `top_k` a search may ask for.
    search_top_k_max: usize = 50, "SEARCH_TOP_K_MAX",
        in 1..=100, "must be 1..=100";
    /// Candidates asked from the index per result wanted, since stale and
    /// orphan candidates are filtered out against D1.
    search_overfetch_factor: usize = 3, "SEARCH_OVERFETCH_FACTOR",
        in 1..=10, "must be 1..=10";
    /// Largest topK asked of the index (Vectorize: 100, 50 with metadata).
    index_query_top_k_max: usize = 100, "INDEX_QUERY_TOP_K_MAX",
        in 1..=100, "must be 1..=100";
    /// Retries, inside one search request, of an embedder or index call
    /// that failed transiently (no delay between them).
    search_retries_max: u32 = 2, "SEARCH_RETRIES_MAX",
        in ..=3, "must be 0..=3";
    /// Largest serialized metadata filter the index takes (Vectorize: 2048
    /// bytes); a search whose filter is larger is refused with 422.
    index_filter_bytes_max: usize = 2048, "INDEX_FILTER_BYTES_MAX",
        in 64..=65_536, "must be 64..=65536";
    /// Reciprocal rank fusion's constant k: a result's fused score is the
    /// sum over the rankings it is in of weight / (k + rank). The usual 60
    /// (Cormack et al., 2009) flattens the difference between top ranks.
    search_rrf_k: u32 = 60, "SEARCH_RRF_K",
        in 1..=1000, "must be 1..=1000";
    /// The vector ranking's weight in the fusion, in percent.
    search_vector_weight_percent: u32 = 100, "SEARCH_VECTOR_WEIGHT_PERCENT",
        in ..=1000, "must be 0..=1000";
    /// The keyword ranking's weight in the fusion, in percent.
    search_keyword_weight_percent: u32 = 100, "SEARCH_KEYWORD_WEIGHT_PERCENT",
        in ..=1000, "must be 0..=1000";
    /// The weight, in percent, of hybrid search's third ranking: the
    /// candidates (of either ranking) that hold the query verbatim,
    /// ignoring case and spacing, in keyword order. An exact phrase or code
    /// pasted by a user then outranks chunks both rankings only half like.
    search_verbatim_weight_percent: u32 = 100, "SEARCH_VERBATIM_WEIGHT_PERCENT",
        in ..=1000, "must be 0..=1000";
    /// How much, in percent, a keyword candidate's bm25 score is raised if
    /// it holds the query verbatim (ignoring case and spacing): a pasted
    /// phrase ranks above chunks holding its words or characters apart,
    /// in keyword mode and so in hybrid's keyword ranking.
    search_keyword_phrase_boost_percent: u32 = 100, "SEARCH_KEYWORD_PHRASE_BOOST_PERCENT",
        in ..=1000, "must be 0..=1000";
    /// Terms of a query the keyword index is asked for (its words, and the
    /// character pairs of its Japanese or Chinese runs: `core::terms`), at
    /// most.
    search_keyword_phrases_max: usize = 32, "SEARCH_KEYWORD_PHRASES_MAX",
        in 1..=256, "must be 1..=256";
    /// Rows of its tenant one keyword query ranks, at most: its commonest
    /// terms are left out (and named in the answer's
    /// `keyword_terms_skipped`) until the rows holding the others are this
    /// many or fewer. A term in more rows than this is never searched (and
    /// its rows are counted only up to one more than this). The
    /// ranking scores every row holding a term (about 4 µs a row natively,
    /// 13.6 s for 2,538,335 rows, `make bench-scale`), and D1 runs one
    /// query at a time and stops one at 30 s; a tenant under this many
    /// rows is never affected.
    keyword_matches_max: u64 = 100_000, "KEYWORD_MATCHES_MAX",
        in 1..=10_000_000, "must be 1..=10000000";
    /// Bytes of a search query, at most, in every mode. A `hybrid` or
    /// `vector` query must also fit the embedding model's input (its
    /// tokens, counted conservatively); a `keyword` query only this.
    search_query_bytes_max: usize = 4096, "SEARCH_QUERY_BYTES_MAX",
        in 1..=65_536, "must be 1..=65536";
    /// Characters of a highlight snippet (`"highlight": true`).
    search_snippet_chars: usize = 200, "SEARCH_SNIPPET_CHARS",
        in 16..=4096, "must be 16..=4096";

    // Retries and leases.
    /// Attempts (deliveries that claimed the job, since its last progress)
    /// before a job is `dead`, whatever the window.
    job_attempts_max: u32 = 30, "JOB_ATTEMPTS_MAX",
        in 1..=90, "must be 1..=90 (under the queue's max_retries of 100, so that D1 decides first)";
    /// How long a job keeps retrying transient failures without progress
    /// before it is `dead`: an outage of the embedder, index or D1 up to
    /// this long is survived.
    job_retry_window_seconds: u32 = 3600, "JOB_RETRY_WINDOW_SECONDS",
        in 60..=7 * 86_400, "must be 60..=604800";
    /// First retry delay; doubles per attempt, with deterministic jitter.
    retry_base_delay_seconds: u32 = 5, "RETRY_BASE_DELAY_SECONDS";
    /// Cap of the backoff (Queues: at most 24 h). Small against the window,
    /// so that a job tries again soon after an outage ends, and its
    /// attempts (`JOB_ATTEMPTS_MAX` × at least half the cap) span the window.
    retry_max_delay_seconds: u32 = 300, "RETRY_MAX_DELAY_SECONDS",
        in ..=86_400, "must be at most 86400 (Queues' delay limit)";
    /// Cap of the dead-letter consumer's retry delay (which grows with the
    /// letter's age): Queues' 100 deliveries span about 90 hours at one hour.
    dead_letter_retry_max_delay_seconds: u32 = 3600, "DEAD_LETTER_RETRY_MAX_DELAY_SECONDS",
        in 60..=86_400, "must be 60..=86400 (Queues' delay limit)";
    /// How long a claim holds a job. Longer than `INVOCATION_WALL_SECONDS_MAX`,
    /// so an expired lease means its holder is dead.
    job_lease_seconds: u32 = 960, "JOB_LEASE_SECONDS";
    /// The longest one queue invocation can run: the platform's 15 min
    /// wall-clock limit. Only a deployment whose invocations are bounded
    /// otherwise sets it lower (the offline profile: its steps take
    /// milliseconds and `CONSUME_WALL_SECONDS_MAX` ends each invocation).
    invocation_wall_seconds_max: u32 = 900, "INVOCATION_WALL_SECONDS_MAX",
        in 1..=900, "must be 1..=900 (the platform ends a queue invocation after 15 min)";
    /// Delay before a delivery that found the job claimed by another looks again.
    claim_busy_retry_seconds: u32 = 60, "CLAIM_BUSY_RETRY_SECONDS",
        in 1..=86_400, "must be 1..=86400";

    // Consumer invocation budget.
    /// Subrequests (every D1, embed, index and queue call counts as one) one
    /// queue invocation may make for its job. Before each step the consumer
    /// checks that the step, plus a reserve to checkpoint or fail, still
    /// fits; otherwise it checkpoints in D1 and continues in a new message.
    /// Default: the Workers Free plan's 50 external subrequests.
    consume_subrequests_max: u64 = 50, "CONSUME_SUBREQUESTS_MAX",
        in CONSUME_SUBREQUESTS_MIN.., "must be at least 10 (one page of one chunk, plus the checkpoint reserve)";
    /// Wall time one queue invocation may spend on its job before it
    /// checkpoints (under `INVOCATION_WALL_SECONDS_MAX`, itself under
    /// `JOB_LEASE_SECONDS`).
    consume_wall_seconds_max: u32 = 300, "CONSUME_WALL_SECONDS_MAX";

    // Backfills.
    /// Documents a backfill enqueues per page (its default page size).
    backfill_page_size: u32 = 50, "BACKFILL_PAGE_SIZE",
        in 1..=100, "must be 1..=100 (one queue send per page)";
    /// Pages a scheduled run enqueues for the running backfill.
    backfill_pages_per_run: usize = 5, "BACKFILL_PAGES_PER_RUN",
        in 1..=50, "must be 1..=50";
    /// Documents a backfill's page reads at most to find its page (every
    /// one is checked for vectors in the generation being built): what
    /// bounds a page's cost in a pass where few documents need a job (a
    /// later pass, a narrow filter). At least the largest page size; 250
    /// reads in about 5 ms at 1,000,000 documents (`make bench-scale`).
    backfill_walk_max: u32 = 250, "BACKFILL_WALK_MAX",
        in 100..=100_000, "must be 100..=100000";
    /// Passes a generation backfill makes over documents still missing
    /// before it ends `failed` (a pass re-enqueues failed builds).
    backfill_passes_max: u32 = 5, "BACKFILL_PASSES_MAX",
        in 1..=100, "must be 1..=100";

    // Cron.
    /// Cleanup intents drained per cleanup pass of a scheduled run (in
    /// batches of `delete_batch_size`); a run makes passes while its
    /// subrequest budget lasts.
    cron_cleanup_intents_max: usize = 1000, "CRON_CLEANUP_INTENTS_MAX",
        in 1.., "must be positive";
    /// Closed chunk rows the sweep for abandoned versions examines per
    /// cleanup pass of a scheduled run (a page after its cursor; those no
    /// version may serve or write become cleanup intents), and rows of a
    /// retiring generation turned into intents per pass; a run makes
    /// passes while its subrequest budget lasts.
    cron_abandoned_chunks_max: usize = 1000, "CRON_ABANDONED_CHUNKS_MAX",
        in 1.., "must be positive";
    /// Seconds between scheduled runs: wrangler.toml's `[triggers]` (`*/5 *
    /// * * *`); used only to say how long a retire will take.
    cron_interval_seconds: u32 = 300, "CRON_INTERVAL_SECONDS",
        in 1..=86_400, "must be 1..=86400";
    /// A `queued` or `up_for_retry` job with no progress for this long is
    /// presumed to have lost its queue message and is re-enqueued by cron.
    job_stall_seconds: u32 = 900, "JOB_STALL_SECONDS",
        in 1.., "must be positive";
    /// Stalled jobs re-enqueued per scheduled run.
    cron_requeue_jobs_max: usize = 100, "CRON_REQUEUE_JOBS_MAX",
        in 1..=100, "must be 1..=100";
    /// Subrequests (D1, index, queue calls) one scheduled run may make; the
    /// run stops between steps when the next would pass it (Workers Free:
    /// 1,000 to Cloudflare services per invocation).
    cron_subrequests_max: u64 = 500, "CRON_SUBREQUESTS_MAX",
        in 10.., "must be at least 10";
    /// Wall time one scheduled run may take before it stops between steps.
    cron_wall_seconds_max: u32 = 60, "CRON_WALL_SECONDS_MAX",
        in 1..=900, "must be 1..=900 (the cron wall-clock limit is 15 min)";
    /// Live chunks checked against the index per scheduled run (getByIds,
    /// in calls of at most 100).
    cron_verify_chunks_max: usize = 100, "CRON_VERIFY_CHUNKS_MAX",
        in ..=1000, "must be 0..=1000";
    /// Only versions live for longer than this are verified: the index's
    /// visibility delay (Vectorize: p99 under 2 minutes).
    index_visibility_window_seconds: u32 = 300, "INDEX_VISIBILITY_WINDOW_SECONDS";

    // Retention (docs/ARCHITECTURE.md, "Retention"; docs/runbook.md).
    /// How long a superseded version's text is kept after a later version
    /// went live (nothing serves or re-runs it; 0: cron's next run prunes
    /// it). A tenant's byte quota counts it until then.
    text_retention_seconds: u64 = 0, "TEXT_RETENTION_SECONDS",
        in ..=31_536_000, "must be 0..=31536000 (a year)";
    /// How long history is kept: a superseded version's row and its jobs
    /// (after it was superseded), finished sync sessions with their marks
    /// and planned deletes, repair runs, ended backfills with their items
    /// and build jobs, revoked tokens. A month, what operators of job
    /// schedulers expect.
    history_retention_seconds: u64 = 2_592_000, "HISTORY_RETENTION_SECONDS",
        in 3600..=315_360_000, "must be 3600..=315360000 (an hour to ten years)";
    /// How long an ended redrive (its items and audit trail) is kept. The
    /// dead letters it re-ran are never pruned.
    redrive_retention_seconds: u64 = 7_776_000, "REDRIVE_RETENTION_SECONDS",
        in 3600..=315_360_000, "must be 3600..=315360000 (an hour to ten years)";
    /// Rows one prune statement deletes at most, per kind of history per
    /// scheduled run (versions' texts and rows, sessions, runs, backfills
    /// and redrives each take a page of it); also the chunk rows written
    /// before migration 0021 that a run enters into the keyword index.
    cron_prune_rows_max: usize = 500, "CRON_PRUNE_ROWS_MAX",
        in 1..=10_000, "must be 1..=10000";
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

impl Config {
    /// How many even shares a scheduled run's budget is cut into: one per
    /// shard, and one more for the tenants' moves when there are shards
    /// to move between (a deployment of one shard spends as before).
    pub fn cron_shares(&self) -> u64 {
        let shards = u64::from(self.shards.max(1));
        if shards > 1 {
            shards + 1
        } else {
            shards
        }
    }

    /// How long after a move's switch the shard left keeps the tenant's
    /// rows: every directory cache that named it has expired, and every
    /// lease a delivery there held (`DIRECTORY_CACHE_SECONDS` +
    /// `JOB_LEASE_SECONDS`).
    pub fn move_cleanup_delay_ms(&self) -> i64 {
        (i64::from(self.directory_cache_seconds) + i64::from(self.job_lease_seconds)) * 1000
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
        c.read(&lookup)?;
        c.validate()?;
        Ok(c)
    }

    /// Checks each setting's own range, then the rules between settings:
    /// what a chunk must fit, what a known model fixes, and the order of
    /// the search sizes, the retry delays and the time limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_each()?;
        check(
            self.chunk_size_max_tokens >= self.embedding_tokenizer.chunk_tokens_min(),
            "CHUNK_SIZE_MAX_TOKENS",
            "must hold the heaviest character of EMBEDDING_TOKENIZER (at least 16; sentencepiece 19, byte-level 34)",
        )?;
        check(
            self.chunk_size_max_tokens.saturating_add(SPECIAL_TOKENS)
                <= self.embedding_max_input_tokens,
            "CHUNK_SIZE_MAX_TOKENS",
            "must leave the model's 2 special tokens within EMBEDDING_MAX_INPUT_TOKENS",
        )?;
        check(
            self.chunk_overlap_tokens.saturating_mul(2) <= self.chunk_size_max_tokens,
            "CHUNK_OVERLAP_TOKENS",
            "must be at most half of CHUNK_SIZE_MAX_TOKENS",
        )?;
        self.check_known_model()?;
        check(
            self.sync_commit_pages_per_request > 0 || self.cron_sync_pages_max > 0,
            "CRON_SYNC_PAGES_MAX",
            "must be positive when SYNC_COMMIT_PAGES_PER_REQUEST is 0 (else no commit ends)",
        )?;
        check(
            self.cron_subrequests_max / self.cron_shares() >= CONSUME_SUBREQUESTS_MIN,
            "CRON_SUBREQUESTS_MAX",
            "must give each of SHARDS (and, with more than one, the moves) at least 10 subrequests per scheduled run",
        )?;
        check(
            self.listing_page_default <= self.listing_page_max,
            "LISTING_PAGE_DEFAULT",
            "must be at most LISTING_PAGE_MAX",
        )?;
        check(
            self.search_top_k_default >= 1 && self.search_top_k_default <= self.search_top_k_max,
            "SEARCH_TOP_K_DEFAULT",
            "must be 1..=SEARCH_TOP_K_MAX",
        )?;
        check(
            self.retry_base_delay_seconds >= 1
                && self.retry_base_delay_seconds <= self.retry_max_delay_seconds,
            "RETRY_BASE_DELAY_SECONDS",
            "must be 1..=RETRY_MAX_DELAY_SECONDS",
        )?;
        check(
            self.job_lease_seconds > self.invocation_wall_seconds_max && self.job_lease_seconds <= 86_400,
            "JOB_LEASE_SECONDS",
            "must be over INVOCATION_WALL_SECONDS_MAX (900: a lease must outlive any invocation that holds it) and at most 86400",
        )?;
        check(
            self.consume_wall_seconds_max >= 1
                && self.consume_wall_seconds_max < self.invocation_wall_seconds_max,
            "CONSUME_WALL_SECONDS_MAX",
            "must be 1..INVOCATION_WALL_SECONDS_MAX (an invocation checkpoints before the platform ends it)",
        )?;
        Ok(())
    }

    /// With the `workers-ai` embedder and a model this project knows, the
    /// dimensions, input limit and tokenizer must be the model's (an unknown
    /// model is taken at its configured word).
    fn check_known_model(&self) -> Result<(), ConfigError> {
        let (EmbedderBackend::WorkersAi, Some(known)) =
            (self.embedder_backend, known_model(&self.embedding_model))
        else {
            return Ok(());
        };
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
        )
    }

    /// The longest search query, in tokens by the bound of
    /// `EMBEDDING_TOKENIZER`: what the model takes beside its special tokens.
    pub fn query_tokens_max(&self) -> usize {
        self.embedding_max_input_tokens
            .saturating_sub(SPECIAL_TOKENS)
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
        assert_eq!(c.index_backend, IndexBackend::Vectorize);
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
    }

    #[test]
    fn out_of_range_and_unparsable_values_are_refused() {
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

        let err = Config::from_lookup(|n| (n == "UPSERT_BATCH_SIZE").then(|| "5000".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::OutOfRange {
                name: "UPSERT_BATCH_SIZE",
                why: "must be 1..=1000"
            }
        );
        // A commit must have someone to settle its pages.
        let err = Config::from_lookup(|n| {
            matches!(n, "SYNC_COMMIT_PAGES_PER_REQUEST" | "CRON_SYNC_PAGES_MAX").then(|| "0".into())
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    name: "CRON_SYNC_PAGES_MAX",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(Config::from_lookup(|n| (n == "CRON_SYNC_PAGES_MAX").then(|| "0".into())).is_ok());
        let err = Config::from_lookup(|n| (n == "EMBED_BATCH_SIZE").then(|| "ten".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Unparsable {
                name: "EMBED_BATCH_SIZE"
            }
        );
    }

    /// A production profile (Vectorize, Workers AI, bge-base's 768
    /// dimensions) with `extra` settings on top.
    fn prod(extra: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |n: &str| {
            let base = [
                ("INDEX_BACKEND", "vectorize"),
                ("EMBEDDER_BACKEND", "workers-ai"),
                ("EMBEDDING_MODEL", "@cf/baai/bge-base-en-v1.5"),
                ("EMBEDDING_DIMENSIONS", "768"),
            ];
            extra
                .iter()
                .chain(base.iter())
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        }
    }

    /// The `[vars]` of wrangler.toml's top level (production), as written.
    fn production_vars() -> Vec<(String, String)> {
        let toml = include_str!("../wrangler.toml");
        toml.lines()
            .skip_while(|l| l.trim() != "[vars]")
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with('['))
            .filter_map(|l| {
                let (k, v) = l.split_once('=')?;
                let v = v.split('#').next()?.trim().trim_matches('"');
                Some((k.trim().to_string(), v.to_string()))
            })
            .collect()
    }

    /// Defect: production embedded with bge-base-en-v1.5, trained on
    /// English only (and about 6,058 neurons per million tokens against
    /// bge-m3's 1,075). A new deployment's model, and the default one,
    /// embed Japanese as well as English.
    #[test]
    fn production_embeds_with_a_multilingual_model() {
        let vars = production_vars();
        assert!(vars.iter().any(|(k, _)| k == "EMBEDDING_MODEL"), "{vars:?}");
        let c = Config::from_lookup(|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
            .unwrap();
        assert_eq!(c.embedder_backend, EmbedderBackend::WorkersAi);
        let known = known_model(&c.embedding_model).expect("a known model");
        assert!(known.multilingual, "{} is English-only", c.embedding_model);
        assert_eq!(c.embedding_dimensions, known.dimensions);
        assert_eq!(c.embedding_tokenizer, known.tokenizer);
        let default = known_model(&Config::default().embedding_model).expect("a known model");
        assert!(default.multilingual);
    }

    #[test]
    fn embedding_and_index_settings() {
        let c = Config::default();
        assert_eq!(c.embedding_model, "@cf/baai/bge-m3");
        assert_eq!(c.embedding_pooling, Pooling::Cls);
        assert_eq!(c.vectorize_metric, VectorMetric::Cosine);

        let c = Config::from_lookup(prod(&[
            ("EMBEDDING_POOLING", "mean"),
            ("VECTORIZE_METRIC", "dot-product"),
        ]))
        .unwrap();
        assert_eq!(c.embedding_pooling, Pooling::Mean);
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
    }

    #[test]
    fn model_settings_are_checked() {
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
    fn chunk_sizes_near_the_integer_limit_are_refused_not_wrapped() {
        // Issue: `size + SPECIAL_TOKENS` and `overlap * 2` overflowed; a
        // release build (the Worker) wrapped and accepted the setting.
        for (name, value) in [
            ("CHUNK_SIZE_MAX_TOKENS", usize::MAX.to_string()),
            ("CHUNK_OVERLAP_TOKENS", (usize::MAX / 2 + 1).to_string()),
        ] {
            let got = Config::from_lookup(|n| (n == name).then(|| value.clone()));
            assert!(
                matches!(got, Err(ConfigError::OutOfRange { .. })),
                "{name}={value}: {got:?}"
            );
        }
    }

    #[test]
    fn unset_variables_give_the_defaults() {
        assert_eq!(Config::from_lookup(|_| None).unwrap(), Config::default());
        // A known model fixes what is left unset; an unknown one the safest.
        let m3 = Config::from_lookup(prod(&[
            ("EMBEDDING_MODEL", "@cf/baai/bge-m3"),
            ("EMBEDDING_DIMENSIONS", "1024"),
        ]))
        .unwrap();
        assert_eq!(m3.embedding_tokenizer, TokenFamily::SentencePiece);
        // The offline embedder sizes chunks as bge-*-en's whatever the
        // (Workers AI) model says.
        let local = Config::from_lookup(|n| {
            (n == "EMBEDDING_MODEL").then(|| "@cf/baai/bge-m3".to_string())
        })
        .unwrap();
        assert_eq!(local.embedding_tokenizer, TokenFamily::WordPiece);
        assert_eq!(
            Config::default().embedding_tokenizer,
            TokenFamily::WordPiece
        );
        let unknown = Config::from_lookup(prod(&[
            ("EMBEDDING_MODEL", "@cf/acme/embed-v9"),
            ("EMBEDDING_DIMENSIONS", "1024"),
        ]))
        .unwrap();
        assert_eq!(unknown.embedding_tokenizer, TokenFamily::ByteLevel);
        assert_eq!(unknown.embedding_max_input_tokens, 512);
    }

    /// The rows of the settings table of `docs/configuration.md` (the one
    /// before its first `##` section): each variable and its default, with
    /// backticks removed.
    fn doc_rows(doc: &str) -> Vec<(&str, String)> {
        doc.lines()
            .take_while(|l| !l.starts_with("## "))
            .filter_map(|l| {
                let mut cells = l.strip_prefix('|')?.split('|').map(str::trim);
                let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
                Some((name, cells.next()?.replace('`', "")))
            })
            .collect()
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
        let rows = doc_rows(doc);
        for (name, default) in Config::documented_defaults() {
            let written = rows.iter().find(|(n, _)| *n == name).map(|(_, d)| d);
            assert_eq!(
                written,
                Some(&default),
                "docs/configuration.md: the row of {name} and its default in the code"
            );
        }
        for (name, _) in &rows {
            assert!(
                SETTINGS.contains(name),
                "docs/configuration.md lists {name}, which is not a setting"
            );
        }
    }
}
