//! The OpenTelemetry conventions for A2A and MCP, as vendored in `test-kit/conventions/` (see
//! its `PROVENANCE.md`), and a check of exported spans against them: every attribute of the
//! namespaces they cover is defined there and has its type (an enum's value is one of its
//! members); an A2A span is named `{a2a.method.name}` and has a kind its model gives it; an
//! MCP span is named `{mcp.method.name} {target}`; an `invoke_agent` span is named for its
//! agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::otlp::{ReceivedSpan, SpanKind, Value};

/// The namespaces whose attributes must be defined by the conventions.
const CHECKED: [&str; 9] = [
    "a2a.", "mcp.", "gen_ai.", "jsonrpc.", "rpc.", "server.", "client.", "network.", "error.",
];

/// An attribute's type, as a model file writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    String,
    Int,
    StringArray,
    /// One of these values.
    Enum(Vec<String>),
}

#[derive(Debug, Deserialize)]
struct Registry {
    attributes: Vec<Definition>,
}

#[derive(Debug, Deserialize)]
struct Definition {
    key: String,
    #[serde(rename = "type")]
    kind: DefinedType,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DefinedType {
    Named(String),
    Enum { members: Vec<Member> },
}

#[derive(Debug, Deserialize)]
struct Member {
    value: String,
}

#[derive(Debug, Deserialize)]
struct SpanFile {
    spans: Vec<SpanDefinition>,
}

#[derive(Debug, Deserialize)]
struct SpanDefinition {
    #[serde(rename = "type")]
    id: String,
    kind: String,
}

/// The vendored conventions.
#[derive(Debug)]
pub struct Conventions {
    attributes: BTreeMap<String, Type>,
    /// Span kinds by span type (`a2a.server` → `server`).
    span_kinds: BTreeMap<String, String>,
}

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conventions")
}

fn read<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = folder().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a model file: {e}", path.display()))
}

impl Conventions {
    /// Reads the vendored model files.
    pub fn load() -> Self {
        let mut attributes = BTreeMap::new();
        for file in ["a2a/registry.yaml", "mcp/registry.yaml", "referenced.yaml"] {
            for definition in read::<Registry>(file).attributes {
                let kind = match definition.kind {
                    DefinedType::Named(name) => match name.as_str() {
                        "string" => Type::String,
                        "int" => Type::Int,
                        "string[]" => Type::StringArray,
                        other => panic!(
                            "{file}: {} has a type this check does not know: {other}",
                            definition.key
                        ),
                    },
                    DefinedType::Enum { members } => {
                        Type::Enum(members.into_iter().map(|m| m.value).collect())
                    }
                };
                attributes.insert(definition.key, kind);
            }
        }
        let mut span_kinds = BTreeMap::new();
        for file in ["a2a/spans.yaml", "mcp/spans.yaml"] {
            for span in read::<SpanFile>(file).spans {
                span_kinds.insert(span.id, span.kind);
            }
        }
        Self {
            attributes,
            span_kinds,
        }
    }

    /// The type the conventions give `key`.
    pub fn type_of(&self, key: &str) -> Option<&Type> {
        self.attributes.get(key)
    }

    /// The members of the enum `key`.
    pub fn members(&self, key: &str) -> Vec<&str> {
        match self.attributes.get(key) {
            Some(Type::Enum(members)) => members.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// What in `span` the conventions do not allow; empty when it keeps to them.
    pub fn problems(&self, span: &ReceivedSpan) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, value) in &span.values {
            if !CHECKED.iter().any(|ns| key.starts_with(ns)) {
                continue;
            }
            match self.attributes.get(key) {
                None => problems.push(format!("{key} is not an attribute of the conventions")),
                Some(expected) if !has_type(value, expected) => {
                    problems.push(format!("{key} = {value:?} is not a {expected:?}"));
                }
                Some(_) => {}
            }
        }
        let text = |key: &str| span.attribute(key);
        if let Some(method) = text("a2a.method.name") {
            if span.name != method {
                problems.push(format!(
                    "an A2A span is named {{a2a.method.name}} ({method}), not {:?}",
                    span.name
                ));
            }
            let side = format!("a2a.{}", span.kind.name());
            if !self.span_kinds.contains_key(&side) {
                problems.push(format!(
                    "an A2A span of kind {:?}: the conventions have none",
                    span.kind
                ));
            }
        }
        if let Some(method) = text("mcp.method.name")
            && span.kind == SpanKind::Server
        {
            let target = text("gen_ai.tool.name").or(text("gen_ai.prompt.name"));
            let expected = target.map_or_else(|| method.to_owned(), |t| format!("{method} {t}"));
            if span.name != expected {
                problems.push(format!(
                    "an MCP server span is named {expected:?}, not {:?}",
                    span.name
                ));
            }
        }
        if text("gen_ai.operation.name") == Some("invoke_agent") {
            let expected = text("gen_ai.agent.name").map_or_else(
                || "invoke_agent".to_owned(),
                |a| format!("invoke_agent {a}"),
            );
            if span.name != expected {
                problems.push(format!(
                    "an invoke_agent span is named {expected:?}, not {:?}",
                    span.name
                ));
            }
            if !matches!(span.kind, SpanKind::Internal | SpanKind::Client) {
                problems.push(format!(
                    "invoke_agent is CLIENT or INTERNAL, not {:?}",
                    span.kind
                ));
            }
        }
        problems
    }

    /// Panics naming every span of `spans` that does not keep to the conventions.
    pub fn assert_kept_by(&self, spans: &[ReceivedSpan]) {
        let broken: Vec<String> = spans
            .iter()
            .filter_map(|span| {
                let problems = self.problems(span);
                (!problems.is_empty())
                    .then(|| format!("{} ({}): {}", span.name, span.service, problems.join("; ")))
            })
            .collect();
        assert!(
            broken.is_empty(),
            "spans that break the conventions:\n{}",
            broken.join("\n")
        );
    }
}

fn has_type(value: &Value, expected: &Type) -> bool {
    match (expected, value) {
        (Type::String, Value::Str(_)) | (Type::Int, Value::Int(_)) => true,
        (Type::StringArray, Value::StrArray(items)) => items.iter().all(Option::is_some),
        (Type::Enum(members), Value::Str(s)) => members.contains(s),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, kind: SpanKind, values: &[(&str, Value)]) -> ReceivedSpan {
        ReceivedSpan {
            service: "s".into(),
            name: name.into(),
            kind,
            trace_id: String::new(),
            span_id: String::new(),
            parent_span_id: String::new(),
            failed: false,
            attributes: values
                .iter()
                .filter_map(|(k, v)| match v {
                    Value::Str(s) => Some(((*k).to_owned(), s.clone())),
                    Value::Int(i) => Some(((*k).to_owned(), i.to_string())),
                    _ => None,
                })
                .collect(),
            values: values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    fn s(text: &str) -> Value {
        Value::Str(text.to_owned())
    }

    #[test]
    fn the_vendored_files_define_the_a2a_and_mcp_vocabulary() {
        let conventions = Conventions::load();
        assert!(
            conventions
                .members("a2a.method.name")
                .contains(&"SendStreamingMessage")
        );
        assert!(
            conventions
                .members("a2a.task.state")
                .contains(&"TASK_STATE_INPUT_REQUIRED")
        );
        assert!(
            conventions
                .members("mcp.method.name")
                .contains(&"tools/call")
        );
        assert_eq!(
            conventions.type_of("a2a.message.reference_task_ids"),
            Some(&Type::StringArray)
        );
        assert_eq!(conventions.type_of("server.port"), Some(&Type::Int));
    }

    #[test]
    fn a_span_that_keeps_to_them_has_no_problem_and_each_breach_is_named() {
        let conventions = Conventions::load();
        let good = span(
            "SendMessage",
            SpanKind::Server,
            &[
                ("a2a.method.name", s("SendMessage")),
                ("a2a.task.state", s("TASK_STATE_COMPLETED")),
                ("server.port", Value::Int(80)),
                (
                    "a2a.message.reference_task_ids",
                    Value::StrArray(vec![Some("t".into())]),
                ),
            ],
        );
        assert_eq!(conventions.problems(&good), Vec::<String>::new());

        let renamed = span(
            "message/send",
            SpanKind::Server,
            &[("a2a.method.name", s("SendMessage"))],
        );
        assert_eq!(
            conventions.problems(&renamed).len(),
            1,
            "named for the method"
        );
        let unknown_state = span(
            "GetTask",
            SpanKind::Server,
            &[
                ("a2a.method.name", s("GetTask")),
                ("a2a.task.state", s("completed")),
            ],
        );
        assert_eq!(
            conventions.problems(&unknown_state).len(),
            1,
            "an enum's member"
        );
        let made_up = span(
            "GetTask",
            SpanKind::Server,
            &[
                ("a2a.method.name", s("GetTask")),
                ("a2a.task.status", s("x")),
            ],
        );
        assert_eq!(
            conventions.problems(&made_up).len(),
            1,
            "an attribute they define"
        );
        let port_as_text = span("x", SpanKind::Client, &[("server.port", s("80"))]);
        assert_eq!(
            conventions.problems(&port_as_text).len(),
            1,
            "the type they give"
        );
        let internal_a2a = span(
            "GetTask",
            SpanKind::Internal,
            &[("a2a.method.name", s("GetTask"))],
        );
        assert_eq!(
            conventions.problems(&internal_a2a).len(),
            1,
            "a kind they give A2A spans"
        );
        let mcp = span(
            "tools/call",
            SpanKind::Server,
            &[
                ("mcp.method.name", s("tools/call")),
                ("gen_ai.tool.name", s("send_message")),
            ],
        );
        assert_eq!(
            conventions.problems(&mcp).len(),
            1,
            "{{mcp.method.name}} {{target}}"
        );
        let ours = span(
            "execute_tool add",
            SpanKind::Internal,
            &[("daedalus.tool.server", s("fx"))],
        );
        assert!(
            conventions.problems(&ours).is_empty(),
            "our own namespace is ours"
        );
    }
}
