//! The bytes an agent card's signatures cover (A2A §8.4.1): the card as it was received
//! (never through a typed model, which would drop or reorder what it does not know), without
//! its `signatures`, with what protobuf's JSON leaves out left out (empty strings, arrays and
//! objects, and `null`, at any depth: the official SDKs' rule), in the RFC 8785 (JCS)
//! canonical form.
//!
//! RFC 8785 itself is `serde_json_canonicalizer`'s: keys ordered by UTF-16 code units,
//! strings as UTF-8 with only the mandatory escapes, numbers as ECMAScript writes a double.
//! Checked here against the RFC's examples and the reference implementation's test data
//! (`tests/jcs/`).

use serde_json::{Map, Value};

/// The deepest nesting a card may have (containers on the path, the card itself at 1), as
/// the official Python SDK bounds it: nesting is the sender's to choose
/// (`AgentExtension.params`).
pub const MAX_DEPTH: usize = 128;

/// The largest integer a JSON number holds exactly (RFC 8785 §3.2.2.3: numbers are doubles).
const SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why a card has no canonical form (and so no signature of it can verify).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("an agent card is a JSON object")]
    NotAnObject,
    #[error("the card nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("the number {0} has no exact JSON form (integers are at most 2^53 - 1)")]
    Number(String),
    #[error("the card does not serialize canonically: {0}")]
    Serialize(String),
}

/// The canonical bytes a signature of `card` covers.
pub fn signed_bytes(card: &Value) -> Result<Vec<u8>, CanonicalError> {
    let Value::Object(fields) = card else {
        return Err(CanonicalError::NotAnObject);
    };
    let mut fields = fields.clone();
    fields.remove("signatures");
    let kept = without_empty(Value::Object(fields), 1)?.unwrap_or(Value::Null);
    canonical(&kept)
}

/// `value` in the RFC 8785 canonical form, as UTF-8.
pub fn canonical(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    check(value, 1)?;
    serde_json_canonicalizer::to_vec(value).map_err(|e| CanonicalError::Serialize(e.to_string()))
}

/// Refuses nesting past [`MAX_DEPTH`] and integers a double does not hold exactly.
fn check(value: &Value, depth: usize) -> Result<(), CanonicalError> {
    match value {
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(CanonicalError::TooDeep);
            }
            items.iter().try_for_each(|v| check(v, depth + 1))
        }
        Value::Object(fields) => {
            if depth > MAX_DEPTH {
                return Err(CanonicalError::TooDeep);
            }
            fields.values().try_for_each(|v| check(v, depth + 1))
        }
        Value::Number(n) => {
            let exact = n
                .as_u64()
                .map(|u| u <= SAFE_INTEGER)
                .or_else(|| n.as_i64().map(|i| i.unsigned_abs() <= SAFE_INTEGER));
            match exact {
                Some(false) => Err(CanonicalError::Number(n.to_string())),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// `value` without empty strings, arrays and objects and without `null`s, at any depth (an
/// array or object left empty by that is left out too); `None` when nothing is left.
fn without_empty(value: Value, depth: usize) -> Result<Option<Value>, CanonicalError> {
    let container = matches!(value, Value::Array(_) | Value::Object(_));
    if container && depth > MAX_DEPTH {
        return Err(CanonicalError::TooDeep);
    }
    Ok(match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Array(items) => {
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                kept.extend(without_empty(item, depth + 1)?);
            }
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(fields) => {
            let mut kept = Map::new();
            for (key, field) in fields {
                if let Some(field) = without_empty(field, depth + 1)? {
                    kept.insert(key, field);
                }
            }
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(value: &Value) -> String {
        String::from_utf8(canonical(value).expect("a canonical form")).expect("UTF-8")
    }

    #[test]
    fn the_rfcs_number_examples_are_written_as_ecmascript_writes_them() {
        // RFC 8785 §3.2.2.3 and appendix B.
        let numbers: Value =
            serde_json::from_str("[0.0, -0.0, 1.0, 1e21, 1e20, 1e-7, 1e-6, 4.50, 2e-3, 333333333.33333329, 1E30, 5e-324, 1.7976931348623157e308, -1.0, 9007199254740991]")
                .expect("numbers");
        assert_eq!(
            text(&numbers),
            "[0,0,1,1e+21,100000000000000000000,1e-7,0.000001,4.5,0.002,333333333.3333333,1e+30,5e-324,1.7976931348623157e+308,-1,9007199254740991]"
        );
    }

    #[test]
    fn keys_are_ordered_by_utf16_code_units_not_code_points() {
        // U+1F600 (a surrogate pair, D83D DE00) sorts before U+FB33 (a single unit) in
        // UTF-16, after it by code point.
        let object = json!({"\u{fb33}": 1, "\u{1f600}": 2, "a": 3, "A": 4, "": 5});
        assert_eq!(
            text(&object),
            "{\"\":5,\"A\":4,\"a\":3,\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn strings_are_utf8_with_only_the_mandatory_escapes() {
        let value = json!(["é€😂", "\u{0f}\n\"\\/", "</script>"]);
        assert_eq!(
            text(&value),
            "[\"é€😂\",\"\\u000f\\n\\\"\\\\/\",\"</script>\"]"
        );
    }

    #[test]
    fn integers_a_double_does_not_hold_have_no_canonical_form() {
        let big: Value = serde_json::from_str("[9007199254740993]").expect("a number");
        assert_eq!(
            canonical(&big),
            Err(CanonicalError::Number("9007199254740993".to_owned()))
        );
    }

    #[test]
    fn a_cards_signed_bytes_leave_out_its_signatures_and_what_is_empty() {
        let card = json!({
            "name": "Example Agent",
            "description": "",
            "capabilities": {"streaming": false, "pushNotifications": false, "extensions": []},
            "skills": [{"id": "a", "tags": [], "examples": [""]}],
            "iconUrl": null,
            "signatures": [{"protected": "x", "signature": "y"}],
            "provider": {"url": ""},
        });
        let bytes = signed_bytes(&card).expect("a canonical form");
        assert_eq!(
            String::from_utf8(bytes).expect("UTF-8"),
            r#"{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent","skills":[{"id":"a"}]}"#
        );
    }

    #[test]
    fn a_card_nested_past_the_bound_has_no_canonical_form() {
        let mut deep = json!({"x": 1});
        for _ in 0..MAX_DEPTH {
            deep = json!({"d": deep});
        }
        let card = json!({"name": "n", "capabilities": {"extensions": [{"params": deep}]}});
        assert_eq!(signed_bytes(&card), Err(CanonicalError::TooDeep));
        assert_eq!(signed_bytes(&json!([1])), Err(CanonicalError::NotAnObject));
    }
}
