//! The lenient reader: JSON bytes in any accepted dialect ⇒ the typed model.
//!
//! The spellings accepted are those of the model's `Deserialize` impls (see the crate docs);
//! this module adds errors that say where a body went wrong, so a 400 can name the field.

use serde::de::{DeserializeOwned, IgnoredAny};

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes are not JSON at all (or are truncated).
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The JSON is well formed but not the expected shape.
    #[error("{message} (at {path})")]
    Shape { path: String, message: String },
}

impl ReadError {
    /// The path of the offending field for a shape error (`message.parts[0]`), `.` for the root.
    pub fn path(&self) -> Option<&str> {
        match self {
            ReadError::Syntax { .. } => None,
            ReadError::Shape { path, .. } => Some(path),
        }
    }
}

/// Reads `bytes` as a `T`, accepting every dialect the model accepts.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ReadError> {
    // The common case first, without path tracking; parse again only to explain a failure.
    if let Ok(value) = serde_json::from_slice::<T>(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = serde_path_to_error::deserialize(&mut de).map_err(|e| classify(&e));
    let read = read.and_then(|value| de.end().map(|()| value).map_err(|e| syntax(&e)));
    match read {
        // A shape error found before the parser reached a syntax error later in the body: the
        // body is malformed JSON, and that is the more useful thing to say.
        Err(ReadError::Shape { .. }) => match serde_json::from_slice::<IgnoredAny>(bytes) {
            Err(e) if e.is_syntax() || e.is_eof() => Err(syntax(&e)),
            _ => read,
        },
        // serde_json calls an array with more elements than a struct has fields "trailing
        // characters", a syntax error; in well-formed JSON it is a shape error at that path.
        Err(ReadError::Syntax { .. }) if serde_json::from_slice::<IgnoredAny>(bytes).is_ok() => {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            match serde_path_to_error::deserialize::<_, T>(&mut de) {
                Err(e) => Err(ReadError::Shape {
                    path: e.path().to_string(),
                    message: strip_position(&e.inner().to_string()),
                }),
                Ok(_) => read,
            }
        }
        other => other,
    }
}

/// Reads an already-parsed JSON value as a `T`.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ReadError> {
    if let Ok(read) = T::deserialize(&value) {
        return Ok(read);
    }
    serde_path_to_error::deserialize(value).map_err(|e| classify(&e))
}

fn classify(e: &serde_path_to_error::Error<serde_json::Error>) -> ReadError {
    let inner = e.inner();
    if inner.is_syntax() || inner.is_eof() {
        return syntax(inner);
    }
    let message = strip_position(&inner.to_string());
    ReadError::Shape {
        path: e.path().to_string(),
        message,
    }
}

fn syntax(e: &serde_json::Error) -> ReadError {
    ReadError::Syntax {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    }
}

/// serde_json appends " at line L column C" to its messages; the path says it better.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SendMessageRequest;

    #[test]
    fn syntax_errors_say_where() {
        let err = from_slice::<SendMessageRequest>(b"{\"message\": ").unwrap_err();
        assert!(matches!(err, ReadError::Syntax { line: 1, .. }), "{err:?}");
    }

    #[test]
    fn an_array_where_an_object_belongs_is_a_shape_error_not_a_syntax_error() {
        // Found by the property tests: serde_json reports the extra elements as "trailing
        // characters".
        let err =
            from_slice::<SendMessageRequest>(br#"{"configuration":[null,null,null,null,null]}"#)
                .unwrap_err();
        assert!(
            matches!(&err, ReadError::Shape { path, .. } if path.starts_with("configuration")),
            "{err:?}"
        );
    }

    #[test]
    fn trailing_garbage_is_a_syntax_error() {
        let body = br#"{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}} x"#;
        let err = from_slice::<SendMessageRequest>(body).unwrap_err();
        assert!(matches!(err, ReadError::Syntax { .. }), "{err:?}");
    }

    #[test]
    fn malformed_json_is_reported_as_such_even_after_a_shape_error() {
        let err = from_slice::<SendMessageRequest>(b"[1,2").unwrap_err();
        assert!(matches!(err, ReadError::Syntax { .. }), "{err:?}");
    }

    #[test]
    fn shape_errors_name_the_field() {
        let body =
            br#"{"message":{"messageId":"m","role":"user","parts":[{"text":"a","url":"b"}]}}"#;
        let err = from_slice::<SendMessageRequest>(body).unwrap_err();
        assert_eq!(err.path(), Some("message.parts[0]"));
        assert!(
            err.to_string()
                .contains("exactly one of text, raw, url, data"),
            "{err}"
        );

        let err = from_slice::<SendMessageRequest>(br#"{"message":{"role":"user","parts":[]}}"#)
            .unwrap_err();
        assert_eq!(err.path(), Some("message"));
        assert!(err.to_string().contains("messageId"), "{err}");
    }
}
