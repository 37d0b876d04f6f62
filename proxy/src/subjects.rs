//! Subject and stream names of the NATS wire protocol (DESIGN §5).
//!
//! | what | subject |
//! |---|---|
//! | tasks | `agent.tasks.<agent>` (stream `AGENT_TASKS`, work-queue) |
//! | results | `agent.results.<agent>.<task-token>` (stream `AGENT_RESULTS`) |
//! | live events | `agent.events.<agent>.<task-token>` (core NATS) |
//! | dead letters | `agent.deadletter.<agent>` (stream `AGENT_DEADLETTER`) |
//!
//! `<task-token>` is the task id when it is a safe subject token, else `b64-` + unpadded
//! base64url of the id.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Header carrying the publisher's own reply address (the NATS reply subject is JetStream's).
pub const REPLY_TO_HEADER: &str = "reply-to";
/// Headers of a result message.
pub const TASK_ID_HEADER: &str = "Task-Id";
pub const TASK_STATE_HEADER: &str = "Task-State";
/// Why a body was dead-lettered.
pub const DEADLETTER_REASON_HEADER: &str = "Deadletter-Reason";

/// Subjects of the task stream.
pub const TASKS_WILDCARD: &str = "agent.tasks.>";
/// Subjects of the result stream.
pub const RESULTS_WILDCARD: &str = "agent.results.>";
/// Subjects of the dead-letter stream.
pub const DEADLETTER_WILDCARD: &str = "agent.deadletter.>";

/// Whether `s` is usable as a subject token of the given maximum length.
pub fn is_token(s: &str, max_len: usize) -> bool {
    !s.is_empty()
        && s.len() <= max_len
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An agent name is a token of at most 64 characters.
pub fn is_agent_name(s: &str) -> bool {
    daedalus_schemas::container::validate_agent_name(s).is_ok()
}

/// The subject token for a task id.
pub fn task_token(task_id: &str) -> String {
    if is_token(task_id, 128) && !task_id.starts_with("b64-") {
        task_id.to_owned()
    } else {
        format!("b64-{}", URL_SAFE_NO_PAD.encode(task_id.as_bytes()))
    }
}

pub fn tasks(agent: &str) -> String {
    format!("agent.tasks.{agent}")
}

pub fn result(agent: &str, task_id: &str) -> String {
    format!("agent.results.{agent}.{}", task_token(task_id))
}

pub fn events(agent: &str, task_id: &str) -> String {
    format!("agent.events.{agent}.{}", task_token(task_id))
}

pub fn deadletter(agent: &str) -> String {
    format!("agent.deadletter.{agent}")
}

/// The durable consumer of an agent's tasks.
pub fn consumer(agent: &str) -> String {
    format!("agent-{agent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ids_are_their_own_token() {
        assert_eq!(task_token("task-001_A"), "task-001_A");
        assert_eq!(result("coder", "t1"), "agent.results.coder.t1");
    }

    #[test]
    fn other_ids_are_base64url() {
        assert_eq!(task_token("a.b"), "b64-YS5i");
        assert_eq!(
            task_token("x y/z"),
            format!("b64-{}", URL_SAFE_NO_PAD.encode("x y/z"))
        );
        assert!(task_token(&"a".repeat(129)).starts_with("b64-"));
        // An id that looks encoded is encoded again, so tokens never collide.
        assert_eq!(
            task_token("b64-YS5i"),
            format!("b64-{}", URL_SAFE_NO_PAD.encode("b64-YS5i"))
        );
        for id in ["a.b", "*", ">", "ü", ""] {
            assert!(is_token(&task_token(id), 255), "{id}");
        }
    }

    #[test]
    fn agent_names() {
        assert!(is_agent_name("coder-1_x"));
        assert!(!is_agent_name("a.b"));
        assert!(!is_agent_name(&"a".repeat(65)));
    }
}
