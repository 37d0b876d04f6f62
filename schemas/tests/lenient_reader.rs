//! The lenient reader, as a table: each accepted spelling in, the contract spelling out.

use daedalus_contract::write::contract;
use daedalus_contract::{AgentCard, Message, Schema, SendMessageRequest, StreamEvent, Task, read};
use serde_json::{Value, json};

/// Which model type a case reads as.
#[derive(Clone, Copy)]
enum As {
    Message,
    Task,
    Request,
    Event,
    Card,
}

fn read_then_write(kind: As, input: &Value) -> Result<Value, read::ReadError> {
    let v = input.clone();
    Ok(match kind {
        As::Message => contract::to_value(&read::from_value::<Message>(v)?),
        As::Task => contract::to_value(&read::from_value::<Task>(v)?),
        As::Request => contract::to_value(&read::from_value::<SendMessageRequest>(v)?),
        As::Event => contract::to_value(&read::from_value::<StreamEvent>(v)?),
        As::Card => contract::to_value(&read::from_value::<AgentCard>(v)?),
    })
}

fn schema_of(kind: As) -> Option<Schema> {
    match kind {
        As::Message => None,
        As::Task => Some(Schema::Task),
        As::Request => Some(Schema::SendMessageRequest),
        As::Event => Some(Schema::StreamEvent),
        As::Card => Some(Schema::AgentCard),
    }
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table of cases")]
fn each_spelling_in_the_contract_spelling_out() {
    let cases: Vec<(&str, As, Value, Value)> = vec![
        (
            "v1 role enum",
            As::Message,
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}),
            json!({"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}),
        ),
        (
            "proto role number",
            As::Message,
            json!({"messageId": "m", "role": 2, "parts": [{"text": "hi"}]}),
            json!({"messageId": "m", "role": "agent", "parts": [{"text": "hi"}]}),
        ),
        (
            "snake_case field names (ProtoJSON original names)",
            As::Message,
            json!({"message_id": "m", "role": "user", "task_id": "t", "context_id": "c",
                   "reference_task_ids": ["r"], "parts": [{"text": "x", "media_type": "text/plain"}]}),
            json!({"messageId": "m", "role": "user", "taskId": "t", "contextId": "c",
                   "referenceTaskIds": ["r"], "parts": [{"text": "x", "mediaType": "text/plain"}]}),
        ),
        (
            "v0.3 kinds on message and parts",
            As::Message,
            json!({"kind": "message", "messageId": "m", "role": "user", "contextId": "c",
                   "parts": [{"kind": "text", "text": "a"}, {"kind": "data", "data": {"k": 1}}]}),
            json!({"messageId": "m", "role": "user", "contextId": "c",
                   "parts": [{"text": "a"}, {"data": {"k": 1}}]}),
        ),
        (
            "v0.3 file part with bytes",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"kind": "file",
                   "file": {"bytes": "iVBORw0KGgo=", "mimeType": "image/png", "name": "a.png"}}]}),
            json!({"messageId": "m", "role": "user", "parts": [{"raw": "iVBORw0KGgo=",
                   "mediaType": "image/png", "filename": "a.png"}]}),
        ),
        (
            "v0.3 file part with uri",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"kind": "file",
                   "file": {"uri": "https://x/y.pdf", "mimeType": "application/pdf"}}]}),
            json!({"messageId": "m", "role": "user", "parts": [{"url": "https://x/y.pdf",
                   "mediaType": "application/pdf"}]}),
        ),
        (
            "mimeType at part level",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"raw": "AA==", "mimeType": "image/gif"}]}),
            json!({"messageId": "m", "role": "user", "parts": [{"raw": "AA==", "mediaType": "image/gif"}]}),
        ),
        (
            "data part holding null",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"data": null}]}),
            json!({"messageId": "m", "role": "user", "parts": [{"data": null}]}),
        ),
        (
            "v0.3 REST binding: content instead of parts",
            As::Message,
            json!({"messageId": "m7", "role": "ROLE_USER", "content": [{"text": "x"}]}),
            json!({"messageId": "m7", "role": "user", "parts": [{"text": "x"}]}),
        ),
        (
            "v1 task state enum",
            As::Task,
            json!({"id": "t", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message":
                   {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}}}),
            json!({"id": "t", "status": {"state": "input-required", "message":
                   {"messageId": "q", "role": "agent", "parts": [{"text": "which?"}]}}}),
        ),
        (
            "proto task state number",
            As::Task,
            json!({"id": "t", "status": {"state": 3},
                   "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}]}),
            json!({"id": "t", "status": {"state": "completed"},
                   "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}]}),
        ),
        (
            "British cancelled",
            As::Task,
            json!({"id": "t", "status": {"state": "cancelled"}}),
            json!({"id": "t", "status": {"state": "canceled"}}),
        ),
        (
            "v0.3 task as the a2a-sdk sends it",
            As::Task,
            json!({"artifacts": [{"artifactId": "a1", "name": "echo", "parts": [{"kind": "text", "text": "echo: x"}]}],
                   "contextId": "c1", "history": [{"contextId": "c1", "kind": "message", "messageId": "m2",
                   "parts": [{"kind": "text", "text": "x"}], "role": "user", "taskId": "t1"}],
                   "id": "t1", "kind": "task", "status": {"state": "completed", "timestamp": "2026-11-22T07:23:11.946688Z"}}),
            json!({"id": "t1", "contextId": "c1", "status": {"state": "completed", "timestamp": "2026-11-22T07:23:11.946688Z"},
                   "artifacts": [{"artifactId": "a1", "name": "echo", "parts": [{"text": "echo: x"}]}],
                   "history": [{"messageId": "m2", "role": "user", "parts": [{"text": "x"}], "taskId": "t1", "contextId": "c1"}]}),
        ),
        (
            "ProtoJSON historyLength as a string, snake_case configuration",
            As::Request,
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]},
                   "configuration": {"history_length": "5", "accepted_output_modes": ["text/plain"]}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]},
                   "configuration": {"historyLength": 5, "acceptedOutputModes": ["text/plain"]}}),
        ),
        (
            "v0.3 blocking: false means return immediately",
            As::Request,
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]},
                   "configuration": {"blocking": false}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]},
                   "configuration": {"returnImmediately": true}}),
        ),
        (
            "v1 status update: final derived from the state",
            As::Event,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "completed"}, "final": true}}),
        ),
        (
            "v1 working update is not final",
            As::Event,
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "working"}, "final": false}}),
        ),
        (
            "v0.3 kind-tagged status update",
            As::Event,
            json!({"contextId": "c", "final": true, "kind": "status-update",
                   "status": {"state": "completed"}, "taskId": "t"}),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "completed"}, "final": true}}),
        ),
        (
            "v0.3 kind-tagged artifact update",
            As::Event,
            json!({"append": false, "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "hi"}]},
                   "contextId": "c", "kind": "artifact-update", "lastChunk": true, "taskId": "t"}),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                   "artifact": {"artifactId": "a", "parts": [{"text": "hi"}]}, "append": false, "lastChunk": true}}),
        ),
        (
            "v0.3 kind-tagged task event",
            As::Event,
            json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "submitted"}}),
            json!({"task": {"id": "t", "contextId": "c", "status": {"state": "submitted"}}}),
        ),
        (
            "v0.3 card: url and transports become supportedInterfaces",
            As::Card,
            json!({"name": "a", "description": "d", "version": "1", "url": "http://h/a2a",
                   "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0",
                   "additionalInterfaces": [{"url": "http://h/rest", "transport": "HTTP+JSON"}],
                   "capabilities": {}, "defaultInputModes": ["text"], "defaultOutputModes": ["text"],
                   "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]}),
            json!({"name": "a", "description": "d", "version": "1",
                   "supportedInterfaces": [
                       {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
                       {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3.0"}],
                   "capabilities": {}, "defaultInputModes": ["text"], "defaultOutputModes": ["text"],
                   "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]}),
        ),
    ];
    for (name, kind, input, expected) in cases {
        let out = read_then_write(kind, &input)
            .unwrap_or_else(|e| panic!("{name}: the reader refused {input}: {e}"));
        assert_eq!(out, expected, "{name}");
        if let Some(Err(e)) = schema_of(kind).map(|schema| schema.validate(&out)) {
            panic!("{name}: the contract form is not valid: {e}");
        }
    }
}

#[test]
fn what_no_dialect_allows_is_refused_with_its_path() {
    let cases: Vec<(&str, As, Value, &str)> = vec![
        (
            "part with no content",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"mediaType": "text/plain"}]}),
            "parts[0]",
        ),
        (
            "part with two contents",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"text": "a", "raw": "AA=="}]}),
            "parts[0]",
        ),
        (
            "v0.3 file with both bytes and uri",
            As::Message,
            json!({"messageId": "m", "role": "user", "parts": [{"kind": "file", "file": {"bytes": "AA==", "uri": "u"}}]}),
            "parts[0]",
        ),
        (
            "unknown role",
            As::Message,
            json!({"messageId": "m", "role": "system", "parts": [{"text": "a"}]}),
            "role",
        ),
        (
            "unspecified state",
            As::Task,
            json!({"id": "t", "status": {"state": "TASK_STATE_UNSPECIFIED"}}),
            "status.state",
        ),
        (
            "negative historyLength",
            As::Request,
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "a"}]}, "configuration": {"historyLength": -2}}),
            "configuration.historyLength",
        ),
        (
            "an event holding two things",
            As::Event,
            json!({"task": {"id": "t", "status": {"state": "working"}}, "statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "working"}}}),
            ".",
        ),
    ];
    for (name, kind, input, path) in cases {
        match read_then_write(kind, &input) {
            Ok(out) => panic!("{name}: accepted as {out}"),
            Err(e) => assert!(
                e.path().is_some_and(|p| p.ends_with(path)),
                "{name}: expected the error at {path}, got {:?}: {e}",
                e.path()
            ),
        }
    }
}
