//! `Role` and `TaskState`: the two enums whose spelling differs between dialects.
//!
//! Reading accepts every spelling in use: the contract's (`"input-required"`), A2A v1's
//! (`"TASK_STATE_INPUT_REQUIRED"`), A2A v0.3's (same as the contract, plus `"cancelled"`) and
//! the proto enum numbers. Writing uses [`crate::Dialect`].

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::write::Dialect;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Agent,
}

/// The lifecycle state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    Rejected,
    InputRequired,
    AuthRequired,
}

impl Role {
    /// The spelling of this role in `dialect`.
    pub fn as_str(self, dialect: Dialect) -> &'static str {
        match (dialect, self) {
            (Dialect::Contract | Dialect::A2aV03, Role::User) => "user",
            (Dialect::Contract | Dialect::A2aV03, Role::Agent) => "agent",
            (Dialect::A2aV1, Role::User) => "ROLE_USER",
            (Dialect::A2aV1, Role::Agent) => "ROLE_AGENT",
        }
    }

    /// Reads any known spelling: `user`, `ROLE_USER`, `USER` (case-insensitive).
    pub fn parse_lenient(s: &str) -> Option<Self> {
        let lower = s.to_ascii_lowercase();
        match lower.strip_prefix("role_").unwrap_or(&lower) {
            "user" => Some(Role::User),
            "agent" => Some(Role::Agent),
            _ => None,
        }
    }

    fn from_proto_number(n: i64) -> Option<Self> {
        match n {
            1 => Some(Role::User),
            2 => Some(Role::Agent),
            _ => None,
        }
    }
}

impl TaskState {
    /// Every state, in proto order.
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The spelling of this state in `dialect`.
    pub fn as_str(self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Contract | Dialect::A2aV03 => match self {
                TaskState::Submitted => "submitted",
                TaskState::Working => "working",
                TaskState::Completed => "completed",
                TaskState::Failed => "failed",
                TaskState::Canceled => "canceled",
                TaskState::Rejected => "rejected",
                TaskState::InputRequired => "input-required",
                TaskState::AuthRequired => "auth-required",
            },
            Dialect::A2aV1 => match self {
                TaskState::Submitted => "TASK_STATE_SUBMITTED",
                TaskState::Working => "TASK_STATE_WORKING",
                TaskState::Completed => "TASK_STATE_COMPLETED",
                TaskState::Failed => "TASK_STATE_FAILED",
                TaskState::Canceled => "TASK_STATE_CANCELED",
                TaskState::Rejected => "TASK_STATE_REJECTED",
                TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
                TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            },
        }
    }

    /// Reads any known spelling: `input-required`, `TASK_STATE_INPUT_REQUIRED`,
    /// `input_required`, `INPUT-REQUIRED`, and v0.3's `cancelled`.
    pub fn parse_lenient(s: &str) -> Option<Self> {
        let norm = s.to_ascii_lowercase().replace('_', "-");
        match norm.strip_prefix("task-state-").unwrap_or(&norm) {
            "submitted" => Some(TaskState::Submitted),
            "working" => Some(TaskState::Working),
            "completed" => Some(TaskState::Completed),
            "failed" => Some(TaskState::Failed),
            "canceled" | "cancelled" => Some(TaskState::Canceled),
            "rejected" => Some(TaskState::Rejected),
            "input-required" => Some(TaskState::InputRequired),
            "auth-required" => Some(TaskState::AuthRequired),
            _ => None,
        }
    }

    fn from_proto_number(n: i64) -> Option<Self> {
        match n {
            1 => Some(TaskState::Submitted),
            2 => Some(TaskState::Working),
            3 => Some(TaskState::Completed),
            4 => Some(TaskState::Failed),
            5 => Some(TaskState::Canceled),
            6 => Some(TaskState::InputRequired),
            7 => Some(TaskState::Rejected),
            8 => Some(TaskState::AuthRequired),
            _ => None,
        }
    }

    /// Completed, failed, canceled or rejected: nothing more will happen to the task.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input-required or auth-required: the task waits for the client.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str(Dialect::Contract))
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str(Dialect::Contract))
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str(Dialect::Contract))
    }
}

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str(Dialect::Contract))
    }
}

/// A visitor for proto enums that accepts a spelling or a proto number.
struct LenientEnum<T> {
    expecting: &'static str,
    from_str: fn(&str) -> Option<T>,
    from_number: fn(i64) -> Option<T>,
}

impl<T> Visitor<'_> for LenientEnum<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.from_str)(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        (self.from_number)(v).ok_or_else(|| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        let n = i64::try_from(v).unwrap_or(i64::MAX);
        (self.from_number)(n).ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientEnum {
            expecting: "a role: \"user\" or \"agent\" (also ROLE_USER, ROLE_AGENT)",
            from_str: Role::parse_lenient,
            from_number: Role::from_proto_number,
        })
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientEnum {
            expecting: "a task state such as \"completed\", \"failed\" or \"input-required\" \
                        (also TASK_STATE_COMPLETED, ...)",
            from_str: TaskState::parse_lenient,
            from_number: TaskState::from_proto_number,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_from_both_dialects() {
        for state in TaskState::ALL {
            for dialect in [Dialect::Contract, Dialect::A2aV1, Dialect::A2aV03] {
                assert_eq!(TaskState::parse_lenient(state.as_str(dialect)), Some(state));
            }
        }
    }

    #[test]
    fn unknown_spellings_are_refused() {
        assert_eq!(TaskState::parse_lenient("unknown"), None);
        assert_eq!(TaskState::parse_lenient("TASK_STATE_UNSPECIFIED"), None);
        assert_eq!(Role::parse_lenient("ROLE_UNSPECIFIED"), None);
        assert!(serde_json::from_str::<Role>("0").is_err());
    }

    #[test]
    fn proto_numbers_read() {
        assert_eq!(
            serde_json::from_str::<TaskState>("6").ok(),
            Some(TaskState::InputRequired)
        );
        assert_eq!(serde_json::from_str::<Role>("2").ok(), Some(Role::Agent));
    }
}
