//! What a test can name: dot-paths into an answer (`task.artifacts[0].parts[*].text`), the
//! variables it sees (`{{step.name}}` captures, `{{step.response}}`, document variables,
//! `{{env.NAME}}`, `{{$uuid}}`), and substitution of `{{...}}` references in a structure.
//!
//! A reference that names nothing is an error of the test (it would otherwise be sent as a
//! literal and look like a server's fault); a path that reads nothing is [`Read::Missing`],
//! which presence assertions rely on (`{absent: true}` on a field that is not there).

use std::collections::BTreeMap;

use serde_json::Value;

/// A value read by a path: there (possibly `null`), or not there at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Read<'a> {
    Found(&'a Value),
    Missing,
}

/// One segment of a dot-path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
    /// `[*]`: every element (collection assertions only).
    Every,
}

/// A dot-path that cannot be parsed, or a reference nothing defines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("cannot parse the path {0:?}")]
    Path(String),
    #[error("{0}")]
    Unresolved(String),
}

/// The segments of `path`; an empty path is the value itself.
pub fn parse_path(path: &str) -> Result<Vec<Segment>, ScopeError> {
    let bad = || ScopeError::Path(path.to_owned());
    let mut segments = Vec::new();
    for part in path.trim().split('.').filter(|p| !p.is_empty()) {
        let (name, mut rest) = match part.find('[') {
            Some(at) => part.split_at(at),
            None => (part, ""),
        };
        if !name.is_empty() {
            segments.push(Segment::Key(name.to_owned()));
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').ok_or_else(bad)?;
            let index = inner[..end].trim();
            segments.push(if index == "*" {
                Segment::Every
            } else {
                Segment::Index(index.parse().map_err(|_| bad())?)
            });
            rest = &inner[end + 1..];
        }
        if !rest.is_empty() {
            return Err(bad());
        }
    }
    Ok(segments)
}

/// The one value `path` reaches in `value` (a `[*]` is refused: a capture needs one value).
pub fn read<'a>(value: &'a Value, path: &str) -> Result<Read<'a>, ScopeError> {
    let mut at = value;
    for segment in parse_path(path)? {
        let next = match segment {
            Segment::Key(key) => at.as_object().and_then(|o| o.get(&key)),
            Segment::Index(i) => at.as_array().and_then(|a| a.get(i)),
            Segment::Every => return Err(ScopeError::Path(path.to_owned())),
        };
        match next {
            Some(next) => at = next,
            None => return Ok(Read::Missing),
        }
    }
    Ok(Read::Found(at))
}

/// Every value `path` reaches in `value`, a `[*]` reaching each element.
pub fn read_all<'a>(value: &'a Value, path: &str) -> Result<Vec<&'a Value>, ScopeError> {
    let mut reached = vec![value];
    for segment in parse_path(path)? {
        reached = reached
            .into_iter()
            .flat_map(|at| -> Vec<&'a Value> {
                match &segment {
                    Segment::Key(key) => at
                        .as_object()
                        .and_then(|o| o.get(key))
                        .into_iter()
                        .collect(),
                    Segment::Index(i) => {
                        at.as_array().and_then(|a| a.get(*i)).into_iter().collect()
                    }
                    Segment::Every => at
                        .as_array()
                        .map(|a| a.iter().collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
    }
    Ok(reached)
}

/// The variables one test sees; a fresh one per test, so no test depends on another.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    variables: BTreeMap<String, Value>,
    captures: BTreeMap<String, BTreeMap<String, Value>>,
}

/// The capture every step gets: its whole answer.
pub const RESPONSE: &str = "response";

impl Scope {
    /// A scope with document (and runner) `variables`.
    pub fn new(variables: BTreeMap<String, Value>) -> Self {
        Self {
            variables,
            captures: BTreeMap::new(),
        }
    }

    /// `{{step.response}}`: a step's whole answer.
    pub fn record_response(&mut self, step: &str, response: &Value) {
        self.captures
            .entry(step.to_owned())
            .or_default()
            .entry(RESPONSE.to_owned())
            .or_insert_with(|| response.clone());
    }

    /// Applies a step's `capture` to its answer; a path that reads nothing is the server's
    /// answer missing what the test needs.
    pub fn capture(
        &mut self,
        step: &str,
        capture: &BTreeMap<String, String>,
        answer: &Value,
    ) -> Result<(), String> {
        for (name, path) in capture {
            match read(answer, path) {
                Ok(Read::Found(value)) => {
                    self.captures
                        .entry(step.to_owned())
                        .or_default()
                        .insert(name.clone(), value.clone());
                }
                Ok(Read::Missing) => {
                    return Err(format!(
                        "step {step} cannot capture {name}: the answer has nothing at {path}"
                    ));
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    /// A runner variable of this test alone (over a document variable of the same name).
    pub fn set_variable(&mut self, name: &str, value: Value) {
        self.variables.insert(name.to_owned(), value);
    }

    /// The value some step captured as `name`, the first step's if several did.
    pub fn captured(&self, name: &str) -> Option<&Value> {
        self.captures.values().find_map(|c| c.get(name))
    }

    /// The value of the reference inside `{{ }}`.
    pub fn resolve(&self, reference: &str) -> Result<Value, ScopeError> {
        let reference = reference.trim();
        if reference == "$uuid" {
            return Ok(Value::String(uuid::Uuid::new_v4().to_string()));
        }
        if let Some((head, tail)) = reference.split_once('.') {
            if let Some(value) = self.captures.get(head).and_then(|c| c.get(tail)) {
                return Ok(value.clone());
            }
            if let Some(value) = self.variables.get(reference) {
                return Ok(value.clone());
            }
            if head == "env" {
                return std::env::var(tail).map(Value::String).map_err(|_| {
                    ScopeError::Unresolved(format!("the environment variable {tail} is not set"))
                });
            }
            return Err(ScopeError::Unresolved(match self.captures.get(head) {
                Some(captured) => format!(
                    "step {head} captured nothing called {tail}; it has {:?}",
                    captured.keys().collect::<Vec<_>>()
                ),
                None => format!("no step {head} has run, and no variable is named {reference}"),
            }));
        }
        self.variables
            .get(reference)
            .cloned()
            .ok_or_else(|| ScopeError::Unresolved(format!("no variable is named {reference}")))
    }

    /// `node` with every `{{...}}` resolved: a string that is one reference becomes the value
    /// with its own type; a reference inside text is interpolated. Keys are left alone.
    pub fn substitute(&self, node: &Value) -> Result<Value, ScopeError> {
        Ok(match node {
            Value::String(text) => self.substitute_text(text)?,
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.substitute(v))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.substitute(v)?)))
                    .collect::<Result<_, ScopeError>>()?,
            ),
            other => other.clone(),
        })
    }

    /// `text` with its references resolved.
    pub fn substitute_text(&self, text: &str) -> Result<Value, ScopeError> {
        let trimmed = text.trim();
        if let Some(inner) = trimmed
            .strip_prefix("{{")
            .and_then(|t| t.strip_suffix("}}"))
            .filter(|inner| !inner.contains("{{") && !inner.contains("}}"))
        {
            return self.resolve(inner);
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let Some(end) = rest[start..].find("}}") else {
                break;
            };
            out.push_str(&rest[..start]);
            match self.resolve(&rest[start + 2..start + end])? {
                Value::String(s) => out.push_str(&s),
                other => out.push_str(&other.to_string()),
            }
            rest = &rest[start + end + 2..];
        }
        out.push_str(rest);
        Ok(Value::String(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_reads_keys_and_indexes_and_tells_missing_from_null() {
        let answer = json!({"task": {"id": "t", "artifacts": [{"parts": [{"text": "hi"}]}], "metadata": null}});
        assert_eq!(read(&answer, "task.id"), Ok(Read::Found(&json!("t"))));
        assert_eq!(
            read(&answer, "task.artifacts[0].parts[0].text"),
            Ok(Read::Found(&json!("hi")))
        );
        assert_eq!(
            read(&answer, "task.metadata"),
            Ok(Read::Found(&Value::Null))
        );
        assert_eq!(read(&answer, "task.history"), Ok(Read::Missing));
        assert_eq!(read(&answer, "task.artifacts[3]"), Ok(Read::Missing));
        assert!(
            read(&answer, "task.artifacts[*]").is_err(),
            "one value only"
        );
        assert!(parse_path("a[x]").is_err());
        assert_eq!(
            parse_path("a.b[2][*]").expect("parses"),
            [
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(2),
                Segment::Every
            ]
        );
    }

    #[test]
    fn a_wildcard_path_reaches_every_element() {
        let answer = json!({"task": {"artifacts": [{"parts": [{"text": "a"}, {"data": {}}]}, {"parts": [{"text": "b"}]}]}});
        let texts: Vec<&Value> =
            read_all(&answer, "task.artifacts[*].parts[*].text").expect("a path");
        assert_eq!(texts, [&json!("a"), &json!("b")]);
        assert!(
            read_all(&answer, "task.history[*]")
                .expect("a path")
                .is_empty()
        );
    }

    #[test]
    fn references_keep_their_type_alone_and_interpolate_in_text() {
        let mut scope = Scope::new(BTreeMap::from([("baseUrl".to_owned(), json!("http://x"))]));
        scope
            .capture(
                "send",
                &BTreeMap::from([("n".to_owned(), "count".to_owned())]),
                &json!({"count": 3}),
            )
            .expect("captured");
        assert_eq!(scope.substitute(&json!("{{send.n}}")), Ok(json!(3)));
        assert_eq!(
            scope.substitute(&json!("n={{ send.n }} at {{baseUrl}}")),
            Ok(json!("n=3 at http://x"))
        );
        assert_eq!(
            scope.substitute(&json!({"{{keys}}": ["{{send.n}}"]})),
            Ok(json!({"{{keys}}": [3]})),
            "keys are left alone"
        );
        assert!(matches!(
            scope.substitute(&json!("{{other.id}}")),
            Err(ScopeError::Unresolved(_))
        ));
        assert!(matches!(
            scope.substitute(&json!("{{send.m}}")),
            Err(ScopeError::Unresolved(_))
        ));
        let a = scope.substitute(&json!("{{$uuid}}")).expect("a uuid");
        assert_ne!(a, scope.substitute(&json!("{{$uuid}}")).expect("another"));
    }

    #[test]
    fn a_capture_of_nothing_is_the_answers_fault_named() {
        let mut scope = Scope::default();
        let why = scope
            .capture(
                "s",
                &BTreeMap::from([("id".to_owned(), "task.id".to_owned())]),
                &json!({"message": {}}),
            )
            .expect_err("nothing to capture");
        assert!(why.contains("task.id"), "{why}");
    }
}
