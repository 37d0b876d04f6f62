//! `Task`, its `TaskStatus` and its `Artifact`s: what `POST /` returns.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{Message, Metadata, Part, TaskState};
use crate::write::{Dialect, DialectSerialize, InDialect, InDialectSeq};

/// The state of a task, and the message that goes with it (the question of an
/// `input-required` task, the reason of a `failed` one).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default)]
    pub message: Option<Message>,
    /// RFC 3339 time the status was recorded.
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(alias = "content")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// The unit of work: what `POST /` returns, and what the proxy publishes as a result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    #[serde(default)]
    pub history: Option<Vec<Message>>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

impl TaskStatus {
    /// A status with no message and no timestamp.
    pub fn new(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: None,
        }
    }

    /// `state`, timestamped now, with no message.
    pub fn now(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: Some(Self::timestamp_now()),
        }
    }

    /// `state`, timestamped now, with `message` (the question of an `input-required` task, the
    /// reason of a `failed` one).
    pub fn now_with(state: TaskState, message: Message) -> Self {
        Self {
            message: Some(message),
            ..Self::now(state)
        }
    }

    /// The time now as a status timestamp: RFC 3339 in UTC, to the microsecond.
    pub fn timestamp_now() -> String {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    }
}

impl Artifact {
    /// An artifact of `parts` with nothing else set.
    pub fn new(artifact_id: impl Into<String>, parts: Vec<Part>) -> Self {
        Self {
            artifact_id: artifact_id.into(),
            name: None,
            description: None,
            parts,
            extensions: None,
            metadata: None,
        }
    }

    /// An artifact of one text part.
    pub fn text(artifact_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(artifact_id, vec![Part::text(text)])
    }

    /// An artifact of `parts` under a new id.
    pub fn fresh(parts: Vec<Part>) -> Self {
        Self::new(uuid::Uuid::new_v4().to_string(), parts)
    }

    /// This artifact, named `name`.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// This artifact, described as `description`.
    #[must_use]
    pub fn described(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

impl DialectSerialize for TaskStatus {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TaskStatus", 3)?;
        st.serialize_field("state", self.state.as_str(dialect))?;
        if let Some(m) = &self.message {
            st.serialize_field("message", &InDialect(m, dialect))?;
        }
        if let Some(t) = &self.timestamp {
            st.serialize_field("timestamp", t)?;
        }
        st.end()
    }
}

impl DialectSerialize for Task {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Task", 7)?;
        if dialect == Dialect::A2aV03 {
            st.serialize_field("kind", "task")?;
        }
        st.serialize_field("id", &self.id)?;
        if let Some(c) = &self.context_id {
            st.serialize_field("contextId", c)?;
        }
        st.serialize_field("status", &InDialect(&self.status, dialect))?;
        if !self.artifacts.is_empty() {
            st.serialize_field("artifacts", &InDialectSeq(&self.artifacts, dialect))?;
        }
        if let Some(h) = &self.history {
            st.serialize_field("history", &InDialectSeq(h, dialect))?;
        }
        if let Some(m) = &self.metadata {
            st.serialize_field("metadata", m)?;
        }
        st.end()
    }
}

impl DialectSerialize for Artifact {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Artifact", 6)?;
        st.serialize_field("artifactId", &self.artifact_id)?;
        if let Some(v) = &self.name {
            st.serialize_field("name", v)?;
        }
        if let Some(v) = &self.description {
            st.serialize_field("description", v)?;
        }
        st.serialize_field("parts", &InDialectSeq(&self.parts, dialect))?;
        if let Some(v) = &self.extensions {
            st.serialize_field("extensions", v)?;
        }
        if let Some(v) = &self.metadata {
            st.serialize_field("metadata", v)?;
        }
        st.end()
    }
}

impl Serialize for Artifact {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

impl Serialize for TaskStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

impl Serialize for Task {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn an_artifact_built_by_its_constructors_is_the_literal() {
        let built = Artifact::text("a-1", "hello")
            .named("response")
            .described("what was said");
        let literal = Artifact {
            artifact_id: "a-1".to_owned(),
            name: Some("response".to_owned()),
            description: Some("what was said".to_owned()),
            parts: vec![Part::text("hello")],
            extensions: None,
            metadata: None,
        };
        assert_eq!(built, literal);
        assert_eq!(
            serde_json::to_value(Artifact::new("b", Vec::new())).unwrap(),
            serde_json::json!({"artifactId": "b", "parts": []}),
        );
    }

    #[test]
    fn fresh_artifacts_and_agent_messages_get_ids_of_their_own() {
        let (one, two) = (Artifact::fresh(Vec::new()), Artifact::fresh(Vec::new()));
        assert_ne!(one.artifact_id, two.artifact_id);
        assert!(!one.artifact_id.is_empty());
        let message = Message::from_agent(vec![Part::text("why")]).in_task("t", Some("c"));
        assert_eq!(message.role, Role::Agent);
        assert_eq!(message.task_id.as_deref(), Some("t"));
        assert_eq!(message.context_id.as_deref(), Some("c"));
        assert_ne!(
            message.message_id,
            Message::from_agent(Vec::new()).message_id
        );
    }

    #[test]
    fn a_status_now_is_timestamped_in_utc_to_the_microsecond() {
        let before = chrono::Utc::now();
        let status = TaskStatus::now_with(
            TaskState::Failed,
            Message::from_agent(vec![Part::text("no")]),
        );
        let stamp = status.timestamp.as_deref().expect("a timestamp");
        let at = chrono::DateTime::parse_from_rfc3339(stamp).expect("RFC 3339");
        assert!(stamp.ends_with('Z'), "{stamp}");
        assert_eq!(stamp.split('.').nth(1).map(str::len), Some(7), "{stamp}");
        assert!(at >= before - chrono::Duration::milliseconds(1), "{stamp}");
        assert_eq!(status.state, TaskState::Failed);
        assert_eq!(status.message.map(|m| m.text()).as_deref(), Some("no"));
        assert_eq!(TaskStatus::now(TaskState::Working).message, None);
    }
}
