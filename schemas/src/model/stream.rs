//! The SSE events of a streaming `POST /` (contract level 3).
//!
//! Contract dialect: each event is an object holding exactly one of `task`, `statusUpdate`,
//! `artifactUpdate`; a status update carries `final`. The reader also takes A2A v1 events
//! (no `final`: it is derived from the state) and v0.3 events (`kind`-tagged, unwrapped).

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use super::{Artifact, Message, Metadata, Task, TaskStatus};
use crate::write::{Dialect, DialectSerialize, InDialect};

/// The key, in the `metadata` of a stream's final status update, of a turn the runtime cut
/// before it finished (it is shutting down): the task was not done and belongs on another
/// replica, as a `503` says without streaming. Its value is `true`.
pub const RETRY_ELSEWHERE: &str = "retryElsewhere";

/// A change of a task's status.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "StatusUpdateIn")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// True on the last event of the stream.
    pub r#final: bool,
    pub metadata: Option<Metadata>,
}

/// A new artifact, or a chunk of one.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default, alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// One event of a task's stream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "StreamEventIn")]
pub enum StreamEvent {
    /// The task as it stands when the stream opens; always the first event.
    Task(Task),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl DialectSerialize for TaskStatusUpdateEvent {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TaskStatusUpdateEvent", 6)?;
        if dialect == Dialect::A2aV03 {
            st.serialize_field("kind", "status-update")?;
        }
        st.serialize_field("taskId", &self.task_id)?;
        st.serialize_field("contextId", &self.context_id)?;
        st.serialize_field("status", &InDialect(&self.status, dialect))?;
        // A2A v1 dropped `final`: the stream simply ends.
        if dialect != Dialect::A2aV1 {
            st.serialize_field("final", &self.r#final)?;
        }
        if let Some(m) = &self.metadata {
            st.serialize_field("metadata", m)?;
        }
        st.end()
    }
}

impl DialectSerialize for TaskArtifactUpdateEvent {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TaskArtifactUpdateEvent", 7)?;
        if dialect == Dialect::A2aV03 {
            st.serialize_field("kind", "artifact-update")?;
        }
        st.serialize_field("taskId", &self.task_id)?;
        st.serialize_field("contextId", &self.context_id)?;
        st.serialize_field("artifact", &InDialect(&self.artifact, dialect))?;
        st.serialize_field("append", &self.append)?;
        st.serialize_field("lastChunk", &self.last_chunk)?;
        if let Some(m) = &self.metadata {
            st.serialize_field("metadata", m)?;
        }
        st.end()
    }
}

impl Serialize for TaskArtifactUpdateEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

/// One item of a streamed A2A answer (A2A's `StreamResponse`): a task's event, or the message
/// an agent answered with, which is then the stream's only item (A2A §3.1.2). Read from A2A
/// v1 (`{"message": …}` or an event) and written in any dialect (v0.3: the message itself,
/// with its `kind`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StreamResponse {
    Message { message: Message },
    Event(StreamEvent),
}

impl DialectSerialize for StreamResponse {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StreamResponse::Event(event) => event.serialize_in(dialect, s),
            StreamResponse::Message { message } if dialect == Dialect::A2aV03 => {
                message.serialize_in(dialect, s)
            }
            StreamResponse::Message { message } => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("message", &InDialect(message, dialect))?;
                map.end()
            }
        }
    }
}

impl DialectSerialize for StreamEvent {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        if dialect == Dialect::A2aV03 {
            // v0.3 results are the event itself, told apart by its `kind`.
            return match self {
                StreamEvent::Task(t) => t.serialize_in(dialect, s),
                StreamEvent::StatusUpdate(u) => u.serialize_in(dialect, s),
                StreamEvent::ArtifactUpdate(u) => u.serialize_in(dialect, s),
            };
        }
        let mut map = s.serialize_map(Some(1))?;
        match self {
            StreamEvent::Task(t) => map.serialize_entry("task", &InDialect(t, dialect))?,
            StreamEvent::StatusUpdate(u) => {
                map.serialize_entry("statusUpdate", &InDialect(u, dialect))?;
            }
            StreamEvent::ArtifactUpdate(u) => {
                map.serialize_entry("artifactUpdate", &InDialect(u, dialect))?;
            }
        }
        map.end()
    }
}

impl Serialize for TaskStatusUpdateEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

impl Serialize for StreamEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusUpdateIn {
    #[serde(alias = "task_id")]
    task_id: String,
    #[serde(alias = "context_id")]
    context_id: String,
    status: TaskStatus,
    #[serde(default)]
    r#final: Option<bool>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

impl From<StatusUpdateIn> for TaskStatusUpdateEvent {
    fn from(u: StatusUpdateIn) -> Self {
        let ends = u.status.state.is_terminal() || u.status.state.is_interrupted();
        Self {
            task_id: u.task_id,
            context_id: u.context_id,
            r#final: u.r#final.unwrap_or(ends),
            status: u.status,
            metadata: u.metadata,
        }
    }
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a stream event: an object holding exactly one of task, statusUpdate, \
                 artifactUpdate (or a v0.3 event with kind task, status-update, artifact-update)"
)]
enum StreamEventIn {
    Wrapped(Wrapped),
    V03(V03Event),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", try_from = "WrappedFields")]
enum Wrapped {
    Task(Task),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrappedFields {
    task: Option<Task>,
    #[serde(alias = "status_update")]
    status_update: Option<TaskStatusUpdateEvent>,
    #[serde(alias = "artifact_update")]
    artifact_update: Option<TaskArtifactUpdateEvent>,
}

impl TryFrom<WrappedFields> for Wrapped {
    type Error = &'static str;

    fn try_from(w: WrappedFields) -> Result<Self, Self::Error> {
        match (w.task, w.status_update, w.artifact_update) {
            (Some(t), None, None) => Ok(Wrapped::Task(t)),
            (None, Some(u), None) => Ok(Wrapped::StatusUpdate(u)),
            (None, None, Some(u)) => Ok(Wrapped::ArtifactUpdate(u)),
            _ => Err("a stream event holds exactly one of task, statusUpdate, artifactUpdate"),
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "kind")]
enum V03Event {
    #[serde(rename = "task")]
    Task(Task),
    #[serde(rename = "status-update")]
    StatusUpdate(TaskStatusUpdateEvent),
    #[serde(rename = "artifact-update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl From<StreamEventIn> for StreamEvent {
    fn from(e: StreamEventIn) -> Self {
        match e {
            StreamEventIn::Wrapped(Wrapped::Task(t)) | StreamEventIn::V03(V03Event::Task(t)) => {
                StreamEvent::Task(t)
            }
            StreamEventIn::Wrapped(Wrapped::StatusUpdate(u))
            | StreamEventIn::V03(V03Event::StatusUpdate(u)) => StreamEvent::StatusUpdate(u),
            StreamEventIn::Wrapped(Wrapped::ArtifactUpdate(u))
            | StreamEventIn::V03(V03Event::ArtifactUpdate(u)) => StreamEvent::ArtifactUpdate(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::write::{a2a_v1, a2a_v03};

    #[test]
    fn a_stream_response_is_an_event_or_a_message_alone_read_and_written() {
        let reply: StreamResponse = serde_json::from_value(json!({"message": {
            "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}))
        .expect("a message");
        let StreamResponse::Message { message } = &reply else {
            panic!("read as an event: {reply:?}");
        };
        assert_eq!(message.text(), "hi");
        assert_eq!(
            a2a_v1::to_value(&reply)["message"]["parts"][0]["text"],
            "hi"
        );
        assert_eq!(a2a_v03::to_value(&reply)["kind"], "message");
        let event: StreamResponse = serde_json::from_value(json!({"statusUpdate": {
            "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}))
        .expect("an event");
        assert!(matches!(
            event,
            StreamResponse::Event(StreamEvent::StatusUpdate(_))
        ));
        assert!(a2a_v1::to_value(&event).get("statusUpdate").is_some());
    }
}
