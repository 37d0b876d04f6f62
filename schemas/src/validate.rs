//! Validation against the contract's JSON Schemas and the vendored A2A v1.0 JSON Schema.
//!
//! The schema files are embedded at build time; each validator is compiled once, on first use.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::{Draft, Registry, Validator};
use serde_json::Value;

/// A schema a JSON document can be checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Schema {
    /// `send-message-request.schema.json`
    SendMessageRequest,
    /// `task.schema.json`
    Task,
    /// `agent-card.schema.json`
    AgentCard,
    /// `stream-event.schema.json`
    StreamEvent,
    /// `runtime-contract.schema.json`
    RuntimeContract,
    /// `error.schema.json`
    Error,
    /// `mcp-registry.schema.json`
    McpRegistry,
    /// The A2A v1.0 `AgentCard` definition.
    A2aV1AgentCard,
    /// The A2A v1.0 `Task` definition.
    A2aV1Task,
    /// The A2A v1.0 `Message` definition.
    A2aV1Message,
    /// The A2A v1.0 `SendMessageRequest` definition.
    A2aV1SendMessageRequest,
    /// The A2A v1.0 `StreamResponse` definition.
    A2aV1StreamResponse,
    /// The A2A v1.0 `SendMessageResponse` definition.
    A2aV1SendMessageResponse,
    /// The A2A v1.0 `ListTasksResponse` definition.
    A2aV1ListTasksResponse,
    /// The A2A v1.0 `GetTaskRequest` definition.
    A2aV1GetTaskRequest,
    /// The A2A v1.0 `ListTasksRequest` definition.
    A2aV1ListTasksRequest,
    /// The A2A v1.0 `CancelTaskRequest` definition.
    A2aV1CancelTaskRequest,
    /// The A2A v1.0 `SubscribeToTaskRequest` definition.
    A2aV1SubscribeToTaskRequest,
    /// A2A v0.3's `SendMessageSuccessResponse` (also what `tasks/get` and `tasks/cancel`
    /// answer: a JSON-RPC response whose result is a Task).
    A2aV03SendMessageSuccessResponse,
    /// A2A v0.3's `SendStreamingMessageSuccessResponse`: one SSE `data` of a v0.3 stream.
    A2aV03StreamingResponse,
}

/// The contract's schema files, by file name, as embedded in this crate.
pub const CONTRACT_SCHEMA_FILES: [(&str, &str); 7] = [
    (
        "send-message-request.schema.json",
        include_str!("../send-message-request.schema.json"),
    ),
    ("task.schema.json", include_str!("../task.schema.json")),
    (
        "agent-card.schema.json",
        include_str!("../agent-card.schema.json"),
    ),
    (
        "stream-event.schema.json",
        include_str!("../stream-event.schema.json"),
    ),
    (
        "runtime-contract.schema.json",
        include_str!("../runtime-contract.schema.json"),
    ),
    ("error.schema.json", include_str!("../error.schema.json")),
    (
        "mcp-registry.schema.json",
        include_str!("../mcp-registry.schema.json"),
    ),
];

const CONTRACT_BASE: &str = "https://schemas.daedalus.local/contract/v1/";
const A2A_V1_BASE: &str = "https://schemas.daedalus.local/a2a/v1/";
const A2A_V1_BUNDLE: &str = include_str!("../a2a/a2a-v1.0.schema.json");
const A2A_V03_URI: &str = "https://schemas.daedalus.local/a2a/v0.3.0/a2a.json";
const A2A_V03_SCHEMA: &str = include_str!("../a2a/a2a-v0.3.0.schema.json");

impl Schema {
    /// Every schema, contract first.
    pub const ALL: [Schema; 20] = [
        Schema::SendMessageRequest,
        Schema::Task,
        Schema::AgentCard,
        Schema::StreamEvent,
        Schema::RuntimeContract,
        Schema::Error,
        Schema::McpRegistry,
        Schema::A2aV1AgentCard,
        Schema::A2aV1Task,
        Schema::A2aV1Message,
        Schema::A2aV1SendMessageRequest,
        Schema::A2aV1StreamResponse,
        Schema::A2aV1SendMessageResponse,
        Schema::A2aV1ListTasksResponse,
        Schema::A2aV1GetTaskRequest,
        Schema::A2aV1ListTasksRequest,
        Schema::A2aV1CancelTaskRequest,
        Schema::A2aV1SubscribeToTaskRequest,
        Schema::A2aV03SendMessageSuccessResponse,
        Schema::A2aV03StreamingResponse,
    ];

    /// A short name for reports: the file name, or `a2a-v1.0#<Definition>`.
    pub fn name(self) -> &'static str {
        match self {
            Schema::SendMessageRequest => "send-message-request.schema.json",
            Schema::Task => "task.schema.json",
            Schema::AgentCard => "agent-card.schema.json",
            Schema::StreamEvent => "stream-event.schema.json",
            Schema::RuntimeContract => "runtime-contract.schema.json",
            Schema::Error => "error.schema.json",
            Schema::McpRegistry => "mcp-registry.schema.json",
            Schema::A2aV1AgentCard => "a2a-v1.0#AgentCard",
            Schema::A2aV1Task => "a2a-v1.0#Task",
            Schema::A2aV1Message => "a2a-v1.0#Message",
            Schema::A2aV1SendMessageRequest => "a2a-v1.0#SendMessageRequest",
            Schema::A2aV1StreamResponse => "a2a-v1.0#StreamResponse",
            Schema::A2aV1SendMessageResponse => "a2a-v1.0#SendMessageResponse",
            Schema::A2aV1ListTasksResponse => "a2a-v1.0#ListTasksResponse",
            Schema::A2aV1GetTaskRequest => "a2a-v1.0#GetTaskRequest",
            Schema::A2aV1ListTasksRequest => "a2a-v1.0#ListTasksRequest",
            Schema::A2aV1CancelTaskRequest => "a2a-v1.0#CancelTaskRequest",
            Schema::A2aV1SubscribeToTaskRequest => "a2a-v1.0#SubscribeToTaskRequest",
            Schema::A2aV03SendMessageSuccessResponse => "a2a-v0.3.0#SendMessageSuccessResponse",
            Schema::A2aV03StreamingResponse => "a2a-v0.3.0#SendStreamingMessageSuccessResponse",
        }
    }

    /// The contract schema with this file name (`task.schema.json`, or just `task`).
    pub fn from_file_name(name: &str) -> Option<Schema> {
        let stem = name.trim_end_matches(".json").trim_end_matches(".schema");
        Schema::ALL
            .into_iter()
            .take(CONTRACT_SCHEMA_FILES.len())
            .find(|s| s.name().starts_with(&format!("{stem}.")))
    }

    fn root_uri(self) -> String {
        match self {
            Schema::A2aV1AgentCard => a2a_uri("AgentCard"),
            Schema::A2aV1Task => a2a_uri("Task"),
            Schema::A2aV1Message => a2a_uri("Message"),
            Schema::A2aV1SendMessageRequest => a2a_uri("SendMessageRequest"),
            Schema::A2aV1StreamResponse => a2a_uri("StreamResponse"),
            Schema::A2aV1SendMessageResponse => a2a_uri("SendMessageResponse"),
            Schema::A2aV1ListTasksResponse => a2a_uri("ListTasksResponse"),
            Schema::A2aV1GetTaskRequest => a2a_uri("GetTaskRequest"),
            Schema::A2aV1ListTasksRequest => a2a_uri("ListTasksRequest"),
            Schema::A2aV1CancelTaskRequest => a2a_uri("CancelTaskRequest"),
            Schema::A2aV1SubscribeToTaskRequest => a2a_uri("SubscribeToTaskRequest"),
            Schema::A2aV03SendMessageSuccessResponse => {
                format!("{A2A_V03_URI}#/definitions/SendMessageSuccessResponse")
            }
            Schema::A2aV03StreamingResponse => {
                format!("{A2A_V03_URI}#/definitions/SendStreamingMessageSuccessResponse")
            }
            contract => format!("{CONTRACT_BASE}{}", contract.name()),
        }
    }

    fn index(self) -> usize {
        Schema::ALL
            .iter()
            .position(|s| *s == self)
            .expect("every schema is in ALL")
    }

    /// Checks `instance` against this schema, returning every violation.
    pub fn validate(self, instance: &Value) -> Result<(), SchemaErrors> {
        let validator = validator(self);
        let errors: Vec<SchemaError> = validator
            .iter_errors(instance)
            .map(|e| SchemaError {
                instance_path: e.instance_path().as_str().to_owned(),
                schema_path: e.schema_path().as_str().to_owned(),
                keyword: e.kind().keyword().to_owned(),
                missing_property: match e.kind() {
                    jsonschema::error::ValidationErrorKind::Required { property } => {
                        property.as_str().map(str::to_owned)
                    }
                    _ => None,
                },
                message: e.to_string(),
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(SchemaErrors {
                schema: self,
                errors,
            })
        }
    }
}

/// One violation: where in the instance, which rule, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON Pointer into the instance (`/status/message`; empty for the root).
    pub instance_path: String,
    /// JSON Pointer into the schema to the failing keyword.
    pub schema_path: String,
    /// The failing keyword (`required`, `oneOf`, `minItems`, ...).
    pub keyword: String,
    /// For a `required` failure, the missing property.
    pub missing_property: Option<String>,
    pub message: String,
}

/// The task schema's contract rules, by the name of their `$defs` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRule {
    /// A completed task includes at least one artifact.
    CompletedHasArtifact,
    /// A failed task includes `status.message`.
    FailedHasMessage,
}

impl SchemaError {
    /// Whether this error comes from the task schema's `rule`.
    pub fn breaks(&self, rule: TaskRule) -> bool {
        let name = match rule {
            TaskRule::CompletedHasArtifact => "CompletedHasArtifact",
            TaskRule::FailedHasMessage => "FailedHasMessage",
        };
        self.schema_path.contains(&format!("/$defs/{name}/"))
    }
}

/// Every violation of one schema by one instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SchemaErrors {
    pub schema: Schema,
    pub errors: Vec<SchemaError>,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(f, "{at}: {}", self.message)
    }
}

impl fmt::Display for SchemaErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "does not match {}: ", self.schema.name())?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

fn a2a_uri(definition: &str) -> String {
    format!("{A2A_V1_BASE}lf.a2a.v1.{definition}.jsonschema.json")
}

fn validator(schema: Schema) -> &'static Validator {
    static VALIDATORS: [OnceLock<Validator>; Schema::ALL.len()] =
        [const { OnceLock::new() }; Schema::ALL.len()];
    VALIDATORS[schema.index()].get_or_init(|| {
        let registry = registry();
        jsonschema::options()
            .with_draft(Draft::Draft202012)
            .should_validate_formats(true)
            .with_registry(registry)
            .build(&serde_json::json!({ "$ref": schema.root_uri() }))
            .unwrap_or_else(|e| panic!("embedded schema {} does not compile: {e}", schema.name()))
    })
}

/// All embedded schema documents, each under the URI its `$ref`s expect.
fn registry() -> &'static Registry<'static> {
    static REGISTRY: OnceLock<Registry<'static>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut resources: Vec<(String, Value)> = CONTRACT_SCHEMA_FILES
            .iter()
            .map(|(name, text)| (format!("{CONTRACT_BASE}{name}"), parse_embedded(name, text)))
            .collect();
        resources.extend(a2a_v1_definitions());
        resources.push((
            A2A_V03_URI.to_owned(),
            parse_embedded("a2a-v0.3.0.schema.json", A2A_V03_SCHEMA),
        ));
        Registry::new()
            .extend(resources)
            .and_then(jsonschema::RegistryBuilder::prepare)
            .expect("embedded schemas form a valid registry")
    })
}

/// The A2A v1.0 bundle's definitions, each named as its siblings `$ref` it: "Agent Card" is
/// `lf.a2a.v1.AgentCard.jsonschema.json`, "Struct" is `google.protobuf.Struct.jsonschema.json`.
fn a2a_v1_definitions() -> impl Iterator<Item = (String, Value)> {
    let Value::Object(mut bundle) = parse_embedded("a2a-v1.0.schema.json", A2A_V1_BUNDLE) else {
        panic!("the A2A v1.0 bundle is a JSON object");
    };
    let Some(Value::Object(definitions)) = bundle.remove("definitions") else {
        panic!("the A2A v1.0 bundle has definitions");
    };
    definitions.into_iter().map(|(title, schema)| {
        let name: String = title.split_whitespace().collect();
        let uri = match name.as_str() {
            "Struct" | "Value" | "Timestamp" => {
                format!("{A2A_V1_BASE}google.protobuf.{name}.jsonschema.json")
            }
            _ => a2a_uri(&name),
        };
        (uri, schema)
    })
}

fn parse_embedded(name: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("embedded {name} is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_schema_compiles() {
        for schema in Schema::ALL {
            let _ = schema.validate(&json!({}));
        }
    }

    #[test]
    fn compaction_metadata_is_typed_on_the_task_and_on_the_final_status_update() {
        let compaction = json!({"strategy": "summarize", "messagesBefore": 12, "messagesAfter": 5, "tokensBefore": 9000, "tokensAfter": 3100});
        let task = |compaction: serde_json::Value| json!({"id": "t", "status": {"state": "working"}, "metadata": {"compaction": compaction, "other": 1}});
        assert!(Schema::Task.validate(&task(compaction.clone())).is_ok());
        assert!(Schema::Task.validate(&task(json!({"strategy": "forget", "messagesBefore": 1, "messagesAfter": 1, "tokensBefore": 1, "tokensAfter": 1}))).is_err());
        assert!(
            Schema::Task
                .validate(&task(json!({"strategy": "truncate", "messagesBefore": 3})))
                .is_err()
        );
        let update = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "completed"}, "final": true, "metadata": {"compaction": {"strategy": "truncate", "messagesBefore": -1, "messagesAfter": 1, "tokensBefore": 1, "tokensAfter": 1}}}});
        assert!(Schema::StreamEvent.validate(&update).is_err());
        assert!(Schema::Task.validate(&json!({"id": "t", "status": {"state": "working"}, "metadata": {"anything": true}})).is_ok());
    }

    #[test]
    fn file_names_map_back() {
        assert_eq!(
            Schema::from_file_name("task.schema.json"),
            Some(Schema::Task)
        );
        assert_eq!(Schema::from_file_name("task"), Some(Schema::Task));
        assert_eq!(Schema::from_file_name("error"), Some(Schema::Error));
        assert_eq!(Schema::from_file_name("nope"), None);
    }

    #[test]
    fn a2a_v1_refs_resolve_into_nested_definitions() {
        let bad = json!({"id": "t", "status": {"state": "completed"}});
        let err = Schema::A2aV1Task.validate(&bad).unwrap_err();
        assert_eq!(err.errors[0].instance_path, "/status/state", "{err}");
        let good = json!({"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}});
        Schema::A2aV1Task.validate(&good).unwrap();
    }

    #[test]
    fn rule_violations_are_attributed_to_their_rule() {
        let completed = json!({"id": "t", "status": {"state": "completed"}});
        let err = Schema::Task.validate(&completed).unwrap_err();
        assert!(
            err.errors
                .iter()
                .all(|e| e.breaks(TaskRule::CompletedHasArtifact)),
            "{err}"
        );
        let failed = json!({"id": "t", "status": {"state": "failed"}});
        let err = Schema::Task.validate(&failed).unwrap_err();
        assert!(
            err.errors
                .iter()
                .all(|e| e.breaks(TaskRule::FailedHasMessage)),
            "{err}"
        );
        let no_id = json!({"status": {"state": "working"}});
        let err = Schema::Task.validate(&no_id).unwrap_err();
        assert_eq!(err.errors[0].missing_property.as_deref(), Some("id"));
        assert!(!err.errors[0].breaks(TaskRule::FailedHasMessage));
    }

    #[test]
    fn formats_are_checked() {
        let task = json!({"id": "t", "status": {"state": "working", "timestamp": "yesterday"}});
        let err = Schema::Task.validate(&task).unwrap_err();
        assert_eq!(err.errors[0].instance_path, "/status/timestamp", "{err}");
    }
}
