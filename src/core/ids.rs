//! Identifiers: validated document IDs, deterministic job and vector IDs,
//! content hashes.

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

/// The vector ID of chunk `chunk_index` of `version` of `doc_id`.
///
/// A pure function of its arguments: `<32 hex of sha256(doc_id)>:<version>:<chunk>`,
/// at most 32 + 1 + 10 + 1 + 10 = 54 bytes, under Vectorize's 64-byte limit.
/// The version is part of the ID, so a new version never overwrites a live
/// vector of another version, and redelivering a version overwrites its own
/// vectors with identical values.
pub fn vector_id(doc_id: &DocId, version: u32, chunk_index: u32) -> String {
    let h = sha256_hex(doc_id.as_str().as_bytes());
    format!("{}:{version}:{chunk_index}", h.get(..32).unwrap_or(&h))
}

/// The vector ID of a chunk in index generation `generation`: generation 1
/// keeps [`vector_id`] (the IDs written before generations existed stay
/// valid); later ones add `:g<generation>`, so the same chunk of the same
/// version has one vector per generation (at most 65 bytes; the consumer
/// refuses a version whose IDs pass `VECTOR_ID_BYTES_MAX`).
pub fn vector_id_in(doc_id: &DocId, version: u32, chunk_index: u32, generation: u32) -> String {
    let base = vector_id(doc_id, version, chunk_index);
    if generation <= 1 {
        base
    } else {
        format!("{base}:g{generation}")
    }
}

/// Deterministic job ID for `(doc_id, version, kind, generation)`: a UUIDv5,
/// so re-running intake of the same version yields the same job row.
pub fn job_id(doc_id: &DocId, version: u32, kind: &str, generation: u32) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6c1f_3b0e_8a52_4f7d_9e0b_51c4_2d6a_7e19);
    let name = format!(
        "{}\u{0}{version}\u{0}{kind}\u{0}{generation}",
        doc_id.as_str()
    );
    uuid::Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_ids_differ_and_generation_one_keeps_the_old_format() {
        let d = DocId::parse("doc").unwrap();
        assert_eq!(vector_id_in(&d, 3, 7, 1), vector_id(&d, 3, 7));
        assert_eq!(
            vector_id_in(&d, 3, 7, 2),
            format!("{}:g2", vector_id(&d, 3, 7))
        );
        assert_ne!(vector_id_in(&d, 3, 7, 2), vector_id_in(&d, 3, 7, 3));
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
        let d = DocId::parse(&"語".repeat(85)).unwrap();
        let a = vector_id(&d, u32::MAX, u32::MAX);
        assert!(a.len() <= 64, "{}", a.len());
        assert_eq!(a, vector_id(&d, u32::MAX, u32::MAX));
        let e = DocId::parse("doc").unwrap();
        assert_eq!(vector_id(&e, 1, 0), "139d544b821b13ebea14f1b0fe185772:1:0");
        assert_ne!(vector_id(&e, 1, 0), vector_id(&e, 2, 0));
        assert_ne!(vector_id(&e, 1, 0), vector_id(&e, 1, 1));
    }

    #[test]
    fn job_ids_are_deterministic() {
        let d = DocId::parse("doc").unwrap();
        assert_eq!(job_id(&d, 1, "index", 0), job_id(&d, 1, "index", 0));
        assert_ne!(job_id(&d, 1, "index", 0), job_id(&d, 2, "index", 0));
        assert_ne!(job_id(&d, 1, "index", 0), job_id(&d, 1, "index", 1));
    }
}
