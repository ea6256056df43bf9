//! Identifiers: validated document and tenant IDs, the ledger's document
//! key, deterministic job and vector IDs, content hashes.

use sha2::{Digest, Sha256};
use std::fmt;

/// Largest `doc_id`, in UTF-8 bytes.
pub const DOC_ID_BYTES_MAX: usize = 256;

/// A document ID: 1–256 bytes of UTF-8 without control characters, and not
/// `.` or `..` (a URL path normalizes those away, so such a document could
/// never be fetched or deleted by its path).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocId(String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocIdError {
    Empty,
    TooLong,
    ControlCharacter,
    DotSegment,
}

impl DocId {
    pub fn parse(raw: &str) -> Result<DocId, DocIdError> {
        if raw.is_empty() {
            return Err(DocIdError::Empty);
        }
        if raw.len() > DOC_ID_BYTES_MAX {
            return Err(DocIdError::TooLong);
        }
        if raw.chars().any(char::is_control) {
            return Err(DocIdError::ControlCharacter);
        }
        if raw == "." || raw == ".." {
            return Err(DocIdError::DotSegment);
        }
        Ok(DocId(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Largest `tenant_id`, in bytes (a Vectorize namespace name: 64).
pub const TENANT_ID_BYTES_MAX: usize = 64;

/// The built-in tenant of the single-tenant setup: `INGEST_TOKEN` acts as
/// its token, and every row written before tenants existed is its own.
pub const DEFAULT_TENANT: &str = "default";

/// A tenant ID: 1–64 bytes of `[a-z0-9_-]`. It names the tenant's
/// Vectorize namespace too.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(raw: &str) -> Option<TenantId> {
        let ok = !raw.is_empty()
            && raw.len() <= TENANT_ID_BYTES_MAX
            && raw
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        ok.then(|| TenantId(raw.to_owned()))
    }

    pub fn default_tenant() -> TenantId {
        TenantId(DEFAULT_TENANT.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_TENANT
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Separates the tenant from the document ID in a [`DocKey`]: a control
/// character, which neither a tenant ID nor a document ID may contain.
pub const KEY_SEPARATOR: char = '\u{1f}';

/// The ledger's key of a document: its tenant and its ID, in the `doc_id`
/// column of every ledger table (and in queue messages and vector
/// metadata). `<tenant>\x1f<doc_id>`, except for the default tenant, whose
/// key is the bare document ID: rows written before tenants existed keep
/// their keys, and with them their job and vector IDs. Unambiguous, since
/// a document ID has no control character.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocKey(String);

impl DocKey {
    pub fn new(tenant: &TenantId, doc: &DocId) -> DocKey {
        if tenant.is_default() {
            DocKey(doc.as_str().to_owned())
        } else {
            DocKey(format!(
                "{}{KEY_SEPARATOR}{}",
                tenant.as_str(),
                doc.as_str()
            ))
        }
    }

    /// A key as stored, checked: `None` if either part is invalid.
    pub fn from_stored(stored: &str) -> Option<DocKey> {
        let (tenant, doc) = split_key(stored);
        if stored.contains(KEY_SEPARATOR) && tenant == DEFAULT_TENANT {
            return None; // the default tenant's keys carry no prefix
        }
        TenantId::parse(tenant)?;
        DocId::parse(doc).ok()?;
        Some(DocKey(stored.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn tenant(&self) -> &str {
        split_key(&self.0).0
    }

    pub fn doc_id(&self) -> &str {
        split_key(&self.0).1
    }
}

/// Serializes a stored key as its bare document ID (rows shown by the API
/// carry the tenant in a `tenant_id` field beside it).
pub fn serialize_doc_id<S: serde::Serializer>(key: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(split_key(key).1)
}

/// A stored key's tenant and document ID (the default tenant's for a key
/// without a separator). Never fails: views of rows use it as they are.
pub fn split_key(stored: &str) -> (&str, &str) {
    stored
        .split_once(KEY_SEPARATOR)
        .unwrap_or((DEFAULT_TENANT, stored))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The vector ID of a chunk: a pure function of the document `key`, the
/// index `generation`, the chunk's `content_hash` (hex SHA-256 of its
/// text), its `occurrence` (how many earlier chunks of the same version and
/// generation have the same text) and the document's user `metadata` (its
/// canonical JSON), and of nothing else: not the version, nor the chunk's
/// position. A chunk unchanged in a new version (same text, same
/// metadata) has the same ID, so it keeps its vector; one moved elsewhere in
/// the document too; a text repeated twice has two (occurrences 0 and 1).
///
/// `<32 hex of sha256(key)>.<24 hex of sha256(generation, content hash,
/// occurrence, metadata)>`: always 57 bytes, under Vectorize's 64. The key
/// holds the tenant, so two tenants' documents of the same ID have
/// different IDs (Vectorize's IDs are unique across namespaces); the
/// metadata the index filters on is part of the identity, so a vector's
/// metadata never changes under its ID. The `.` keeps these IDs apart from
/// the version-derived ones rows written before recorded
/// ([`legacy_vector_id`]), which contain `:` and no `.`.
pub fn vector_id(
    key: &DocKey,
    generation: u32,
    content_hash: &str,
    occurrence: u32,
    metadata: &str,
) -> String {
    let doc = sha256_hex(key.as_str().as_bytes());
    let what = format!("{generation}\u{0}{content_hash}\u{0}{occurrence}\u{0}{metadata}");
    let chunk = sha256_hex(what.as_bytes());
    format!(
        "{}.{}",
        doc.get(..32).unwrap_or(&doc),
        chunk.get(..24).unwrap_or(&chunk)
    )
}

/// The version-derived vector ID rows staged before content-derived IDs
/// recorded (`<32 hex of sha256(key)>:<version>:<chunk>`, and `:g<n>` after
/// it for a generation from 2 on). Nothing writes new rows with it; such
/// rows keep their IDs, and cleanup treats them as any other (a vector is
/// deleted when no row that may be served or written refers to it). Tests
/// use it to write a ledger as it was before.
pub fn legacy_vector_id(key: &DocKey, version: u32, chunk_index: u32, generation: u32) -> String {
    let h = sha256_hex(key.as_str().as_bytes());
    let base = format!("{}:{version}:{chunk_index}", h.get(..32).unwrap_or(&h));
    if generation <= 1 {
        base
    } else {
        format!("{base}:g{generation}")
    }
}

/// Each chunk's occurrence index, for chunks with these content hashes in
/// order: how many earlier ones have the same hash.
pub fn occurrences<'h>(hashes: impl IntoIterator<Item = &'h str>) -> Vec<u32> {
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    hashes
        .into_iter()
        .map(|h| {
            let n = seen.entry(h).or_insert(0);
            let k = *n;
            *n += 1;
            k
        })
        .collect()
}

/// Deterministic job ID for `(key, version, kind, generation)`: a UUIDv5,
/// so re-running intake of the same version yields the same job row.
pub fn job_id(key: &DocKey, version: u32, kind: &str, generation: u32) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6c1f_3b0e_8a52_4f7d_9e0b_51c4_2d6a_7e19);
    let name = format!("{}\u{0}{version}\u{0}{kind}\u{0}{generation}", key.as_str());
    uuid::Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(doc: &str) -> DocKey {
        DocKey::new(&TenantId::default_tenant(), &DocId::parse(doc).unwrap())
    }

    #[test]
    fn tenant_id_rules() {
        assert!(TenantId::parse("acme_co-2").is_some());
        assert!(TenantId::parse(&"a".repeat(64)).is_some());
        assert!(TenantId::parse(&"a".repeat(65)).is_none());
        for bad in ["", "Acme", "a b", "a/b", "a.b", "a\u{1f}b", "日本"] {
            assert!(TenantId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn keys_hold_the_tenant_and_the_default_tenant_keeps_bare_ids() {
        let doc = DocId::parse("a:b/日本語").unwrap();
        let default = DocKey::new(&TenantId::default_tenant(), &doc);
        assert_eq!(default.as_str(), "a:b/日本語");
        assert_eq!(
            (default.tenant(), default.doc_id()),
            ("default", "a:b/日本語")
        );
        let acme = DocKey::new(&TenantId::parse("acme").unwrap(), &doc);
        assert_eq!(acme.as_str(), "acme\u{1f}a:b/日本語");
        assert_eq!((acme.tenant(), acme.doc_id()), ("acme", "a:b/日本語"));
        assert_ne!(
            vector_id(&default, 1, "h", 0, "{}"),
            vector_id(&acme, 1, "h", 0, "{}")
        );
        assert_ne!(
            job_id(&default, 1, "index", 0),
            job_id(&acme, 1, "index", 0)
        );
        assert_eq!(DocKey::from_stored(acme.as_str()), Some(acme));
        assert_eq!(DocKey::from_stored("a:b/日本語"), Some(default));
        assert_eq!(DocKey::from_stored("default\u{1f}x"), None);
        assert_eq!(DocKey::from_stored("Bad\u{1f}x"), None);
        assert_eq!(DocKey::from_stored("acme\u{1f}"), None);
    }

    #[test]
    fn legacy_ids_keep_their_format() {
        let d = key("doc");
        assert_eq!(
            legacy_vector_id(&d, 1, 0, 1),
            "139d544b821b13ebea14f1b0fe185772:1:0"
        );
        assert_eq!(
            legacy_vector_id(&d, 3, 7, 2),
            "139d544b821b13ebea14f1b0fe185772:3:7:g2"
        );
        // A content-derived ID never has the legacy shape.
        assert!(!vector_id(&d, 1, "h", 0, "{}").contains(':'));
    }

    #[test]
    fn doc_id_rules() {
        assert!(DocId::parse("a").is_ok());
        assert!(DocId::parse("日本語/ドキュメント #1").is_ok());
        assert_eq!(DocId::parse(""), Err(DocIdError::Empty));
        assert_eq!(DocId::parse("a\nb"), Err(DocIdError::ControlCharacter));
        assert_eq!(DocId::parse("a\u{7f}"), Err(DocIdError::ControlCharacter));
        assert!(DocId::parse(&"x".repeat(256)).is_ok());
        assert_eq!(DocId::parse(&"x".repeat(257)), Err(DocIdError::TooLong));
        // 86 three-byte chars = 258 bytes.
        assert_eq!(DocId::parse(&"語".repeat(86)), Err(DocIdError::TooLong));
    }

    #[test]
    fn vector_ids_are_deterministic_distinct_and_short() {
        let d = DocKey::new(
            &TenantId::parse(&"t".repeat(64)).unwrap(),
            &DocId::parse(&"語".repeat(85)).unwrap(),
        );
        let h = sha256_hex(b"text");
        let a = vector_id(&d, u32::MAX, &h, u32::MAX, &"m".repeat(4096));
        assert_eq!(a.len(), 57);
        assert_eq!(a, vector_id(&d, u32::MAX, &h, u32::MAX, &"m".repeat(4096)));
        let e = key("doc");
        let base = vector_id(&e, 1, &h, 0, "{}");
        assert!(
            base.starts_with("139d544b821b13ebea14f1b0fe185772."),
            "{base}"
        );
        // Every part of the identity matters; nothing else is in it.
        assert_ne!(base, vector_id(&e, 2, &h, 0, "{}"));
        assert_ne!(base, vector_id(&e, 1, &sha256_hex(b"other"), 0, "{}"));
        assert_ne!(base, vector_id(&e, 1, &h, 1, "{}"));
        assert_ne!(base, vector_id(&e, 1, &h, 0, r#"{"k":1}"#));
        assert_ne!(base, vector_id(&key("doc2"), 1, &h, 0, "{}"));
    }

    #[test]
    fn occurrences_count_earlier_equal_hashes() {
        assert_eq!(
            occurrences(["a", "b", "a", "a", "c", "b"]),
            [0, 0, 1, 2, 0, 1]
        );
        assert!(occurrences([]).is_empty());
    }

    #[test]
    fn job_ids_are_deterministic() {
        let d = key("doc");
        assert_eq!(job_id(&d, 1, "index", 0), job_id(&d, 1, "index", 0));
        assert_ne!(job_id(&d, 1, "index", 0), job_id(&d, 2, "index", 0));
        assert_ne!(job_id(&d, 1, "index", 0), job_id(&d, 1, "index", 1));
    }
}
