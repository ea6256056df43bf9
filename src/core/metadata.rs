//! Metadata values compared as the vector index compares them. Vectorize
//! runs in JavaScript: a filter's and a vector's values are parsed JSON,
//! and equality is `===` on them, so numbers compare as IEEE doubles (`1`
//! equals `1.0` and `1e0`, `-0` equals `0`, an integer past 2^53 equals
//! the double it rounds to), while a string or a boolean never equals a
//! number. serde_json's `Value` equality tells `1` from `1.0`; every
//! comparison of a filter with stored metadata goes through [`value_eq`]
//! instead, so the keyword and vector rankings, the index fakes and the
//! offline index all agree with Vectorize.

use serde_json::Value;

/// Whether a stored metadata value equals a filter's, as `===` on the
/// parsed JSON would say.
pub fn value_eq(stored: &Value, wanted: &Value) -> bool {
    match (stored, wanted) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => a == b,
        },
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(a: &str, b: &str) -> bool {
        value_eq(
            &serde_json::from_str(a).unwrap(),
            &serde_json::from_str(b).unwrap(),
        )
    }

    #[test]
    fn numbers_compare_as_doubles_and_nothing_else_equals_a_number() {
        assert!(eq("1", "1.0"));
        assert!(eq("1e0", "1"));
        assert!(eq("-0.0", "0"));
        assert!(eq("9007199254740993", "9007199254740992"));
        assert!(!eq("9007199254740994", "9007199254740992"));
        assert!(!eq("1.5", "1"));
        assert!(!eq("\"1\"", "1"));
        assert!(!eq("true", "1"));
        assert!(!eq("false", "0"));
        assert!(eq("\"a\"", "\"a\""));
        assert!(!eq("\"a\"", "\"b\""));
        assert!(eq("true", "true"));
        assert!(eq("null", "null"));
    }
}
