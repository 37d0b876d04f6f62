//! `Message`: one turn of communication, from the user or the agent.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{Metadata, Part, Role};
use crate::write::{Dialect, DialectSerialize, InDialectSeq};

/// One unit of communication between client and agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    pub role: Role,
    /// v0.3's REST binding called this `content`.
    #[serde(alias = "content")]
    pub parts: Vec<Part>,
    #[serde(default, alias = "task_id")]
    pub task_id: Option<String>,
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, alias = "reference_task_ids")]
    pub reference_task_ids: Option<Vec<String>>,
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

impl Message {
    /// A message from `role` with the given parts and nothing else set.
    pub fn new(message_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        Self {
            message_id: message_id.into(),
            role,
            parts,
            task_id: None,
            context_id: None,
            reference_task_ids: None,
            extensions: None,
            metadata: None,
        }
    }

    /// The agent's message of `parts`, under a new id.
    pub fn from_agent(parts: Vec<Part>) -> Self {
        Self::new(uuid::Uuid::new_v4().to_string(), Role::Agent, parts)
    }

    /// This message, as one of task `task_id` in context `context_id`.
    #[must_use]
    pub fn in_task(mut self, task_id: &str, context_id: Option<&str>) -> Self {
        self.task_id = Some(task_id.to_owned());
        self.context_id = context_id.map(str::to_owned);
        self
    }

    /// The contract's task-id rule: `taskId` if present (and not empty), else `messageId`.
    pub fn effective_task_id(&self) -> &str {
        match self.task_id.as_deref() {
            Some(id) if !id.is_empty() => id,
            _ => &self.message_id,
        }
    }

    /// The text of every text part, joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self.parts.iter().filter_map(Part::as_text).collect();
        texts.join("\n")
    }
}

impl DialectSerialize for Message {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Message", 9)?;
        if dialect == Dialect::A2aV03 {
            st.serialize_field("kind", "message")?;
        }
        st.serialize_field("messageId", &self.message_id)?;
        st.serialize_field("role", self.role.as_str(dialect))?;
        st.serialize_field("parts", &InDialectSeq(&self.parts, dialect))?;
        if let Some(v) = &self.task_id {
            st.serialize_field("taskId", v)?;
        }
        if let Some(v) = &self.context_id {
            st.serialize_field("contextId", v)?;
        }
        if let Some(v) = &self.reference_task_ids {
            st.serialize_field("referenceTaskIds", v)?;
        }
        if let Some(v) = &self.extensions {
            st.serialize_field("extensions", v)?;
        }
        if let Some(v) = &self.metadata {
            st.serialize_field("metadata", v)?;
        }
        st.end()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}
