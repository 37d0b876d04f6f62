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
