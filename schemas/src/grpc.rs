//! The A2A gRPC binding's code, generated at build time from the vendored normative proto
//! (`a2a/proto/a2a.proto`, package `lf.a2a.v1`; see `build.rs`): the messages ([`v1`]), the
//! service a server implements ([`v1::a2a_service_server`]) and its client
//! ([`v1::a2a_service_client`]).
//!
//! A2A v1's JSON is the proto's ProtoJSON, and every generated message carries its ProtoJSON
//! (`pbjson`). So a binding turns a message into the typed model by reading its ProtoJSON with
//! the lenient reader ([`from_proto`]), and the model back into a message by writing strict
//! A2A v1 JSON and reading it as the message ([`to_proto`]): one mapping between the proto and
//! the model, the spec's own, and no second one written by hand to drift from it.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ReadError;

/// The generated `lf.a2a.v1` package.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::allow_attributes_without_reason,
    clippy::unwrap_used,
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms,
    reason = "generated code"
)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// The well-known types the messages use (`Struct`, `Value`, `Timestamp`, `Empty`), with their
/// ProtoJSON.
pub use pbjson_types as well_known;

/// The service's full name, the first segment of every method's path.
pub const SERVICE: &str = "lf.a2a.v1.A2AService";

impl v1::SendMessageRequest {
    /// A user's message `message_id` of one text part, starting a new task.
    pub fn text(message_id: &str, text: &str) -> Self {
        Self {
            message: Some(v1::Message {
                message_id: message_id.to_owned(),
                role: v1::Role::User as i32,
                parts: vec![v1::Part {
                    content: Some(v1::part::Content::Text(text.to_owned())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// A proto message as the model type `T`, through its ProtoJSON.
pub fn from_proto<P: Serialize, T: DeserializeOwned>(message: &P) -> Result<T, ReadError> {
    let json = serde_json::to_vec(message).map_err(|e| ReadError::Shape {
        path: ".".to_owned(),
        message: e.to_string(),
    })?;
    crate::read::from_slice(&json)
}

/// A model value, written as strict A2A v1 JSON ([`crate::write::a2a_v1::of`] for the types
/// whose JSON depends on the dialect), as the proto message `P` that JSON is the ProtoJSON of.
/// A value that cannot be written, or whose JSON is not the message's, is an error (never a
/// default message).
pub fn to_proto<P: DeserializeOwned>(value: &impl Serialize) -> Result<P, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(value)?)
}

#[cfg(test)]
mod tests {
    use super::v1;
    use super::*;
    use crate::write::a2a_v1;
    use crate::{SendMessageRequest, StreamEvent, Task, TaskState};

    fn task_json() -> serde_json::Value {
        serde_json::json!({
            "id": "t-1",
            "contextId": "c-1",
            "status": {
                "state": "TASK_STATE_COMPLETED",
                "timestamp": "2026-11-28T00:00:00.123Z",
                "message": {"role": "ROLE_AGENT", "messageId": "m-2", "parts": [{"text": "hi"}]}
            },
            "artifacts": [{
                "artifactId": "a-1",
                "parts": [
                    {"data": {"k": [1.5, "two", null, {"x": true}]}, "mediaType": "application/json"},
                    {"raw": "AAEC", "filename": "b.bin", "mediaType": "application/octet-stream"},
                    {"url": "https://example.com/f", "mediaType": "text/plain"}
                ]
            }],
            "history": [{"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}],
            "metadata": {"n": 1.5}
        })
    }

    #[test]
    fn a_task_goes_to_the_proto_and_back_unchanged() {
        let task: Task = crate::read::from_value(task_json()).expect("a task");
        let proto: v1::Task = to_proto(&a2a_v1::of(&task)).expect("the proto reads it");
        assert_eq!(proto.id, "t-1");
        assert_eq!(
            proto.status.as_ref().map(|s| s.state),
            Some(v1::TaskState::Completed as i32)
        );
        let raw = &proto.artifacts[0].parts[1];
        assert_eq!(raw.content, Some(v1::part::Content::Raw(vec![0, 1, 2])));
        let mut back: Task = from_proto(&proto).expect("the model reads the proto");
        // A Timestamp comes back as the same instant, written `+00:00` rather than `Z`.
        let instant = |t: &Task| {
            chrono::DateTime::parse_from_rfc3339(t.status.timestamp.as_deref().unwrap_or(""))
                .expect("RFC 3339")
        };
        assert_eq!(instant(&back), instant(&task));
        back.status.timestamp.clone_from(&task.status.timestamp);
        assert_eq!(back, task);
        assert_eq!(back.status.state, TaskState::Completed);
    }

    /// Every number in a `google.protobuf.Struct` is a double: an integer in `data` or
    /// `metadata` arrives over gRPC as the same number, written `1.0`.
    #[test]
    fn numbers_in_data_are_doubles_on_the_wire() {
        let task: Task = crate::read::from_value(serde_json::json!({
            "id": "t", "status": {"state": "TASK_STATE_WORKING"}, "metadata": {"n": 1}
        }))
        .expect("a task");
        let proto: v1::Task = to_proto(&a2a_v1::of(&task)).expect("reads");
        let back: Task = from_proto(&proto).expect("reads");
        let n = back
            .metadata
            .as_ref()
            .and_then(|m| m.get("n"))
            .and_then(serde_json::Value::as_f64);
        assert_eq!(n, Some(1.0));
    }

    #[test]
    fn a_request_from_the_proto_is_the_model_the_json_bindings_read() {
        let proto = v1::SendMessageRequest {
            configuration: Some(v1::SendMessageConfiguration {
                history_length: Some(2),
                return_immediately: true,
                ..Default::default()
            }),
            ..v1::SendMessageRequest::text("m-1", "hello")
        };
        let request: SendMessageRequest = from_proto(&proto).expect("reads");
        let json: SendMessageRequest = crate::read::from_value(serde_json::json!({
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
            "configuration": {"historyLength": 2, "returnImmediately": true}
        }))
        .expect("reads");
        assert_eq!(request, json);
    }

    #[test]
    fn every_stream_event_has_its_proto() {
        let task: Task = crate::read::from_value(task_json()).expect("a task");
        let event = StreamEvent::Task(task);
        let proto: v1::StreamResponse = to_proto(&a2a_v1::of(&event)).expect("reads");
        assert!(matches!(
            proto.payload,
            Some(v1::stream_response::Payload::Task(_))
        ));
    }
}
