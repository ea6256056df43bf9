//! Shared validation of requests: percent-decoding, document IDs, the query
//! string and its integers and limits, JSON bodies, unknown keys, metadata.
//! Every route validates with these, so one kind of mistake gets one answer
//! everywhere (`422 unknown_field` on every route, say).
//!
//! May import: `config`, `core`, and `super` (the API's error type). Nothing
//! here calls the pipeline.

use super::body::Shape;
use super::{ApiError, ApiRequest};
use crate::config::Config;
use crate::core::ids::{DocId, DocIdError};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// A query string, decoded: key → value (the last one wins).
pub(super) type Query = BTreeMap<String, String>;

pub(super) fn percent_decode(raw: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::new(
            400,
            "invalid_path",
            "the path is not valid percent-encoded UTF-8",
        )
    };
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = raw.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

pub(super) fn parse_doc_id(raw: &str, field: &str) -> Result<DocId, ApiError> {
    DocId::parse(raw).map_err(|e| {
        ApiError::field(
            field,
            match e {
                DocIdError::Empty => "must not be empty",
                DocIdError::TooLong => "must be at most 256 bytes of UTF-8",
                DocIdError::ControlCharacter => "must not contain control characters",
                DocIdError::DotSegment => "must not be . or .. (a URL path cannot address them)",
            },
        )
    })
}

/// A document ID from a path segment (still percent-encoded).
pub(super) fn path_doc_id(segment: &str) -> Result<DocId, ApiError> {
    parse_doc_id(&percent_decode(segment)?, "doc_id")
}

pub(super) fn parse_query(query: &str) -> Result<Query, ApiError> {
    let mut out = BTreeMap::new();
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(
            percent_decode(&k.replace('+', " "))?,
            percent_decode(&v.replace('+', " "))?,
        );
    }
    Ok(out)
}

/// An optional integer parameter (milliseconds since the epoch).
pub(super) fn query_int(q: &Query, name: &str) -> Result<Option<i64>, ApiError> {
    q.get(name)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::field(name, "must be an integer (milliseconds since the epoch)")
            })
        })
        .transpose()
}

/// The `limit` parameter: `default` if absent, else in `1..=max`.
pub(super) fn query_limit(q: &Query, default: usize, max: usize) -> Result<usize, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::field(
                "limit",
                &format!("must be an integer in 1..={max}"),
            )),
        },
    }
}

/// The request's body as JSON, built within the route's `shape`
/// (`body.rs`), sent as `application/json` (or without a content type).
/// Its size was checked against the route's cap before the route ran.
pub(super) fn json_body(
    cfg: &Config,
    req: &ApiRequest<'_>,
    shape: &Shape,
) -> Result<Value, ApiError> {
    if let Some(ct) = req.content_type {
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" {
            return Err(ApiError::new(
                415,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
    }
    super::body::parse(cfg, shape, req.body)
}

/// The body as an object (`400 invalid_body` otherwise).
pub(super) fn object(body: &Value) -> Result<&Map<String, Value>, ApiError> {
    body.as_object()
        .ok_or_else(|| ApiError::new(400, "invalid_body", "the body must be a JSON object"))
}

/// Refuses the first key of `obj` not in `allowed` (`prefix` names the
/// enclosing object, e.g. `"filter."`).
pub(super) fn only_fields(
    obj: &Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), ApiError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::unknown_field(prefix, k)),
        None => Ok(()),
    }
}

/// An optional integer field of `obj` in `range`, `default` if absent or null.
pub(super) fn uint_field(
    obj: &Map<String, Value>,
    name: &str,
    default: usize,
    range: RangeInclusive<usize>,
) -> Result<usize, ApiError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64().map(|n| n as usize) {
            Some(n) if range.contains(&n) => Ok(n),
            _ => Err(ApiError::field(
                name,
                &format!("must be an integer in {}..={}", range.start(), range.end()),
            )),
        },
    }
}

/// Keys the pipeline puts on every vector; user metadata may not use them.
const RESERVED_METADATA_KEYS: [&str; 4] = ["doc_id", "version", "chunk", "generation"];

/// Keys a metadata object may have.
pub(super) const METADATA_KEYS_MAX: usize = 32;

/// A metadata object (a document's, or a filter's): at most 32 keys the
/// index can filter on, scalar values, within `METADATA_BYTES_MAX`.
pub(super) fn parse_metadata(
    cfg: &Config,
    m: &Map<String, Value>,
    field: &str,
) -> Result<Map<String, Value>, ApiError> {
    if m.len() > METADATA_KEYS_MAX {
        return Err(ApiError::field(field, "must have at most 32 keys"));
    }
    for (k, v) in m {
        if k.is_empty()
            || k.len() > 64
            || k.starts_with('$')
            || k.contains('.')
            || k.contains('"')
            || k.chars().any(char::is_control)
        {
            return Err(ApiError::field(
                field,
                "keys must be 1-64 bytes, without '.', a leading '$' or control characters",
            ));
        }
        if RESERVED_METADATA_KEYS.contains(&k.as_str()) {
            return Err(ApiError::field(
                field,
                "keys doc_id, version, chunk and generation are reserved",
            ));
        }
        if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            return Err(ApiError::field(
                field,
                "values must be strings, numbers or booleans",
            ));
        }
    }
    let size = Value::Object(m.clone()).to_string().len();
    if size > cfg.metadata_bytes_max {
        return Err(ApiError::field(
            field,
            &format!("must serialize to at most {} bytes", cfg.metadata_bytes_max),
        ));
    }
    Ok(m.clone())
}

/// The first `n` characters of `s`.
pub(super) fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => s.get(..i).unwrap_or(s),
        None => s,
    }
}
