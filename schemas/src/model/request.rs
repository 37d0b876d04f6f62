//! `SendMessageRequest`: the body of `POST /` and of a task message on NATS.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::{Message, Metadata};
use crate::write::{Dialect, DialectSerialize, InDialect};

/// A message for the agent, with optional configuration and metadata.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SendMessageRequest {
    pub message: Message,
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// How the client wants the send handled.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_output_modes: Option<Vec<String>>,
    /// How many earlier messages to return in `Task.history` (unset: no limit, 0: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_immediately: Option<bool>,
    /// A webhook for the task's updates, set up with the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<super::TaskPushNotificationConfig>,
}

impl SendMessageRequest {
    /// A request carrying `message` and nothing else.
    pub fn new(message: Message) -> Self {
        Self {
            message,
            configuration: None,
            metadata: None,
        }
    }

    /// `configuration.historyLength`, if the client set one.
    pub fn history_length(&self) -> Option<u32> {
        self.configuration.as_ref().and_then(|c| c.history_length)
    }
}

impl DialectSerialize for SendMessageRequest {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("SendMessageRequest", 3)?;
        st.serialize_field("message", &InDialect(&self.message, dialect))?;
        if let Some(c) = &self.configuration {
            st.serialize_field("configuration", c)?;
        }
        if let Some(m) = &self.metadata {
            st.serialize_field("metadata", m)?;
        }
        st.end()
    }
}

impl Serialize for SendMessageRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

impl<'de> Deserialize<'de> for SendMessageConfiguration {
    /// Only from an object (serde would fill a struct from an array of as many elements),
    /// each field read where it stands, so an error names its path.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = ConfigurationIn;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a SendMessageConfiguration object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                ConfigurationIn::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Object).map(Self::from)
    }
}

/// Every spelling of the configuration the reader accepts: v1 (`historyLength` as a number
/// or, in ProtoJSON, a string), snake_case, and v0.3's `blocking`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigurationIn {
    #[serde(default, alias = "accepted_output_modes")]
    accepted_output_modes: Option<Vec<String>>,
    #[serde(default, alias = "history_length", deserialize_with = "history_length")]
    history_length: Option<u32>,
    #[serde(default, alias = "return_immediately")]
    return_immediately: Option<bool>,
    #[serde(default)]
    blocking: Option<bool>,
    /// v1 (`taskPushNotificationConfig`), v0.3 (`pushNotificationConfig`).
    #[serde(
        default,
        alias = "task_push_notification_config",
        alias = "pushNotificationConfig",
        alias = "push_notification_config"
    )]
    task_push_notification_config: Option<super::TaskPushNotificationConfig>,
}

impl From<ConfigurationIn> for SendMessageConfiguration {
    fn from(c: ConfigurationIn) -> Self {
        Self {
            accepted_output_modes: c.accepted_output_modes,
            history_length: c.history_length,
            return_immediately: c.return_immediately.or(c.blocking.map(|b| !b)),
            task_push_notification_config: c.task_push_notification_config,
        }
    }
}

fn history_length<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrString {
        Num(i64),
        Str(String),
    }
    let parsed = match Option::<NumOrString>::deserialize(d)? {
        None => return Ok(None),
        Some(NumOrString::Num(n)) => n,
        Some(NumOrString::Str(s)) => s.trim().parse::<i64>().map_err(|_| {
            serde::de::Error::custom(format!("historyLength: {s:?} is not an integer"))
        })?,
    };
    u32::try_from(parsed)
        .map(Some)
        .map_err(|_| serde::de::Error::custom(format!("historyLength must be >= 0, got {parsed}")))
}
