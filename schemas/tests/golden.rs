//! Golden tests over `schemas/examples/`: every valid example validates against its schema and
//! round-trips through the lenient reader and the contract writer unchanged; every invalid
//! example is rejected at the path it names; the A2A v1 writer's output of every valid example
//! validates against the A2A v1.0 JSON Schema.

use std::fs;
use std::path::{Path, PathBuf};

use daedalus_contract::model::registry::ServerList;
use daedalus_contract::write::{a2a_v1, contract};
use daedalus_contract::{
    AgentCard, ErrorBody, RuntimeContract, Schema, SendMessageRequest, StreamEvent, Task, read,
};
use serde::Deserialize;
use serde_json::Value;

fn examples(kind: &str) -> Vec<(Schema, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(kind);
    let mut found = Vec::new();
    for dir in fs::read_dir(&root).expect("examples dir exists") {
        let dir = dir.expect("readable dir entry").path();
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 dir name")
            .to_owned();
        let schema = Schema::from_file_name(&name)
            .unwrap_or_else(|| panic!("{} names no contract schema", dir.display()));
        for file in fs::read_dir(&dir).expect("schema dir readable") {
            found.push((schema, file.expect("readable entry").path()));
        }
    }
    found.sort_by(|a, b| a.1.cmp(&b.1));
    assert!(
        found.len() >= 10,
        "expected a good number of {kind} examples, found {}",
        found.len()
    );
    found
}

fn load(path: &Path) -> Value {
    let text = fs::read_to_string(path).expect("example readable");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Reads `value` leniently as the schema's model type and writes it back in `dialect`.
fn round_trip(schema: Schema, value: &Value, v1: bool) -> Result<Value, read::ReadError> {
    fn go<T>(value: &Value, write: impl Fn(&T) -> Value) -> Result<Value, read::ReadError>
    where
        T: for<'de> Deserialize<'de>,
    {
        read::from_value::<T>(value.clone()).map(|t| write(&t))
    }
    match (schema, v1) {
        (Schema::Task, false) => go::<Task>(value, contract::to_value),
        (Schema::Task, true) => go::<Task>(value, a2a_v1::to_value),
        (Schema::SendMessageRequest, false) => go::<SendMessageRequest>(value, contract::to_value),
        (Schema::SendMessageRequest, true) => go::<SendMessageRequest>(value, a2a_v1::to_value),
        (Schema::AgentCard, false) => go::<AgentCard>(value, contract::to_value),
        (Schema::AgentCard, true) => go::<AgentCard>(value, a2a_v1::to_value),
        (Schema::StreamEvent, false) => go::<StreamEvent>(value, contract::to_value),
        (Schema::StreamEvent, true) => go::<StreamEvent>(value, a2a_v1::to_value),
        (Schema::RuntimeContract, _) => go::<RuntimeContract>(value, contract::to_value),
        (Schema::Error, _) => go::<ErrorBody>(value, contract::to_value),
        (Schema::McpRegistry, _) => go::<ServerList>(value, contract::to_value),
        (other, _) => panic!("no model type for {other:?}"),
    }
}

fn a2a_v1_schema(schema: Schema) -> Option<Schema> {
    match schema {
        Schema::Task => Some(Schema::A2aV1Task),
        Schema::SendMessageRequest => Some(Schema::A2aV1SendMessageRequest),
        Schema::AgentCard => Some(Schema::A2aV1AgentCard),
        Schema::StreamEvent => Some(Schema::A2aV1StreamResponse),
        _ => None,
    }
}

#[test]
fn every_valid_example_validates_and_round_trips() {
    for (schema, path) in examples("valid") {
        let value = load(&path);
        if let Err(e) = schema.validate(&value) {
            panic!("{}: {e}", path.display());
        }
        let written = round_trip(schema, &value, false)
            .unwrap_or_else(|e| panic!("{}: the reader refused it: {e}", path.display()));
        assert_eq!(
            written,
            value,
            "{}: contract writer changed the document",
            path.display()
        );
    }
}

#[test]
fn every_valid_example_writes_valid_a2a_v1() {
    let mut checked = 0;
    for (schema, path) in examples("valid") {
        let Some(v1_schema) = a2a_v1_schema(schema) else {
            continue;
        };
        let written = round_trip(schema, &load(&path), true).expect("reader accepts the example");
        if let Err(e) = v1_schema.validate(&written) {
            panic!("{}: A2A v1 output {written} {e}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} examples have an A2A v1 form");
}

#[test]
fn every_invalid_example_is_rejected_at_its_path() {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Invalid {
        expected_path: String,
        instance: Value,
    }
    for (schema, path) in examples("invalid") {
        let case: Invalid = serde_json::from_value(load(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let errors = match schema.validate(&case.instance) {
            Ok(()) => panic!("{}: accepted an invalid document", path.display()),
            Err(e) => e,
        };
        assert!(
            errors
                .errors
                .iter()
                .any(|e| e.instance_path == case.expected_path),
            "{}: expected an error at {:?}, got {errors}",
            path.display(),
            case.expected_path
        );
    }
}

#[test]
fn the_a2a_sdk_golden_task_reads_and_writes_back_exactly() {
    // Captured from the official Python a2a-sdk 1.3.0 (HTTP+JSON binding, A2A 1.0).
    let captured = serde_json::json!({"id":"ba294587-c031-40ef-92b8-88745cf54d3e","contextId":"ea9a6ea9-6c6c-4953-96e2-9c88f8f1724e","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-22T07:23:11.828308Z"},"artifacts":[{"artifactId":"29d33a5a-50c8-4355-b482-e81b29abaeea","name":"echo","parts":[{"text":"echo: Implement feature X"}]}],"history":[{"messageId":"msg-abc123","contextId":"ea9a6ea9-6c6c-4953-96e2-9c88f8f1724e","taskId":"ba294587-c031-40ef-92b8-88745cf54d3e","role":"ROLE_USER","parts":[{"text":"Implement feature X"}]}]});
    Schema::A2aV1Task
        .validate(&captured)
        .expect("the capture is valid A2A v1");
    let task: Task = read::from_value(captured.clone()).expect("reads");
    assert_eq!(a2a_v1::to_value(&task), captured);
    Schema::Task
        .validate(&contract::to_value(&task))
        .expect("and its contract form is valid");
}

#[test]
fn the_a2a_sdk_golden_card_validates_against_both_schemas() {
    let captured = serde_json::json!({"name":"Echo","description":"Echoes input","supportedInterfaces":[{"url":"http://127.0.0.1:41241/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://127.0.0.1:41241/a2a/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}],"version":"1.0.0","capabilities":{"streaming":true,"pushNotifications":false},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"echo","name":"Echo","description":"Echo text","tags":["echo"]}]});
    Schema::A2aV1AgentCard
        .validate(&captured)
        .expect("valid A2A v1");
    Schema::AgentCard
        .validate(&captured)
        .expect("valid contract card");
    let card: AgentCard = read::from_value(captured.clone()).expect("reads");
    assert_eq!(contract::to_value(&card), captured);
}
