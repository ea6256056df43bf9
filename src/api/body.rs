//! Request bodies within bounds: a cap on each route's bytes, read before
//! the body is ([`body_bytes_max`]), and a parser that builds only what a
//! route's [`Shape`] can use, so a body's memory is a small multiple of
//! its bytes whatever it holds.
//!
//! A `serde_json::Value` of an arbitrary body costs 16 to 32 bytes per
//! value on wasm32: `{"query": "a", "pad": [0,0,…]}` of 12 MB is 6 million
//! values, past the isolate's 128 MB. Here, a value the shape has no place
//! for is skipped as it is read (`IgnoredAny`: nothing is built); the first
//! unknown key of an object stays, as `null`, so the route still answers
//! `422 unknown_field`; a container where the shape wants a scalar stands
//! as an empty one of its kind, so the route answers its usual "must be a
//! string"; an array or a map keeps one item past its maximum, so the route
//! answers its usual "at most N". Nesting is as deep as the shape; a skipped
//! value's nesting costs a byte a level (serde_json's own stack).
//!
//! May import: `config`, and `super` (the API's error type).

use super::ApiError;
use crate::config::Config;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// What a route's body may hold.
pub(super) enum Shape {
    /// A string, number, boolean or null.
    Scalar,
    /// An object with these keys.
    Object(&'static [(&'static str, Shape)]),
    /// An object of any keys (metadata, a filter): at most `max` entries.
    Map { max: usize, value: &'static Shape },
    /// An array of at most `max(cfg)` items.
    Array {
        max: fn(&Config) -> usize,
        item: &'static Shape,
    },
}

/// Which of `Config`'s body caps a route has: its bytes and the setting's
/// name (for the message of a 413).
pub fn body_bytes_max(cfg: &Config, method: &str, path: &str) -> (usize, &'static str) {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    match (method, segments.as_slice()) {
        ("PUT", ["v1", "documents", _]) | ("POST", ["v1", "documents"]) => {
            (cfg.request_bytes_max, "REQUEST_BYTES_MAX")
        }
        ("POST", ["v1", "search"]) => (cfg.search_request_bytes_max, "SEARCH_REQUEST_BYTES_MAX"),
        (_, ["v1", "syncs", ..]) => (cfg.sync_request_bytes_max, "SYNC_REQUEST_BYTES_MAX"),
        (_, ["v1", "admin", ..]) => (cfg.admin_request_bytes_max, "ADMIN_REQUEST_BYTES_MAX"),
        _ => (cfg.other_request_bytes_max, "OTHER_REQUEST_BYTES_MAX"),
    }
}

/// `413 payload_too_large` for a body past its route's cap.
pub fn too_large(cfg: &Config, method: &str, path: &str) -> ApiError {
    let (max, name) = body_bytes_max(cfg, method, path);
    ApiError::new(
        413,
        "payload_too_large",
        format!("the request body exceeds {max} bytes ({name})"),
    )
}

/// `body` as JSON, built within `shape` (`400 invalid_json` if it is not
/// JSON).
pub(super) fn parse(cfg: &Config, shape: &Shape, body: &[u8]) -> Result<Value, ApiError> {
    let invalid = || ApiError::new(400, "invalid_json", "the body is not valid JSON");
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Seed { shape, cfg }
        .deserialize(&mut de)
        .map_err(|_| invalid())?;
    de.end().map_err(|_| invalid())?;
    Ok(value)
}

/// A metadata object: the parser keeps one key past the 32 a metadata
/// object may have (`fields::parse_metadata` refuses it).
pub(super) const METADATA: Shape = Shape::Map {
    max: super::fields::METADATA_KEYS_MAX,
    value: &Shape::Scalar,
};

#[derive(Clone, Copy)]
struct Seed<'a> {
    shape: &'a Shape,
    cfg: &'a Config,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Shape::Array { max, item } = self.shape else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Array(Vec::new()));
        };
        let keep = max(self.cfg).saturating_add(1);
        let mut out = Vec::new();
        while out.len() < keep {
            let seed = Seed {
                shape: item,
                cfg: self.cfg,
            };
            match seq.next_element_seed(seed)? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        match self.shape {
            Shape::Object(fields) => {
                let mut unknown = false;
                while let Some(key) = map.next_key::<String>()? {
                    match fields.iter().find(|(name, _)| *name == key) {
                        Some((_, shape)) => {
                            let v = map.next_value_seed(Seed {
                                shape,
                                cfg: self.cfg,
                            })?;
                            out.insert(key, v);
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                            if !unknown {
                                // Kept for the route's `unknown_field`.
                                out.insert(key, Value::Null);
                                unknown = true;
                            }
                        }
                    }
                }
            }
            Shape::Map { max, value } => {
                while let Some(key) = map.next_key::<String>()? {
                    if out.len() <= *max || out.contains_key(&key) {
                        let v = map.next_value_seed(Seed {
                            shape: value,
                            cfg: self.cfg,
                        })?;
                        out.insert(key, v);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Shape::Scalar | Shape::Array { .. } => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DOC: Shape = Shape::Object(&[
        ("text", Shape::Scalar),
        ("metadata", METADATA),
        (
            "tags",
            Shape::Array {
                max: two,
                item: &Shape::Scalar,
            },
        ),
    ]);

    fn two(_: &Config) -> usize {
        2
    }

    fn p(body: &str) -> Result<Value, ApiError> {
        parse(&Config::default(), &DOC, body.as_bytes())
    }

    #[test]
    fn what_fits_the_shape_is_kept_as_sent() {
        let body = r#"{"text": "キュー", "metadata": {"a": 1, "b": 1.5, "c": true, "d": null}, "tags": ["x"]}"#;
        let want: Value = serde_json::from_str(body).unwrap();
        assert_eq!(p(body).unwrap(), want);
    }

    #[test]
    fn the_first_unknown_key_stays_as_null_and_the_rest_are_not_built() {
        let v = p(r#"{"zz": [1, 2, [3]], "text": "t", "aa": {"x": 1}}"#).unwrap();
        assert_eq!(v, json!({"zz": null, "text": "t"}));
    }

    #[test]
    fn a_container_where_a_scalar_belongs_stands_as_an_empty_one() {
        let v = p(r#"{"text": [1, [2, {"a": 3}]], "metadata": {"k": {"deep": [1]}}}"#).unwrap();
        assert_eq!(v, json!({"text": [], "metadata": {"k": {}}}));
        assert_eq!(p(r#"{"text": {"a": 1}}"#).unwrap(), json!({"text": {}}));
        assert_eq!(p("[1, 2]").unwrap(), json!([]));
        assert_eq!(p("7").unwrap(), json!(7));
    }

    #[test]
    fn arrays_and_maps_keep_one_past_their_maximum() {
        let v = p(r#"{"tags": [1, 2, 3, 4, 5]}"#).unwrap();
        assert_eq!(v, json!({"tags": [1, 2, 3]}));
        let keys: Vec<String> = (0..100).map(|i| format!("\"k{i:03}\": {i}")).collect();
        let v = p(&format!("{{\"metadata\": {{{}}}}}", keys.join(","))).unwrap();
        assert_eq!(v["metadata"].as_object().unwrap().len(), 33);
    }

    #[test]
    fn invalid_json_is_refused_wherever_it_is() {
        for body in [
            "",
            "{",
            r#"{"zz": [1,]}"#,
            r#"{"text": "a"} x"#,
            r#"{"a": nul}"#,
        ] {
            assert_eq!(p(body).unwrap_err().code, "invalid_json", "{body}");
        }
    }

    #[test]
    fn every_route_has_a_cap_of_its_own() {
        let cfg = Config::default();
        let cap = |m: &str, path: &str| body_bytes_max(&cfg, m, path).1;
        assert_eq!(cap("PUT", "/v1/documents/a%2Fb?x=1"), "REQUEST_BYTES_MAX");
        assert_eq!(cap("POST", "/v1/documents"), "REQUEST_BYTES_MAX");
        assert_eq!(cap("POST", "/v1/search"), "SEARCH_REQUEST_BYTES_MAX");
        assert_eq!(cap("POST", "/v1/syncs/x/seen"), "SYNC_REQUEST_BYTES_MAX");
        assert_eq!(cap("POST", "/v1/admin/redrives"), "ADMIN_REQUEST_BYTES_MAX");
        assert_eq!(
            cap("POST", "/v1/documents/a/reindex"),
            "OTHER_REQUEST_BYTES_MAX"
        );
    }
}
