//! Subject, header and stream names of the NATS wire protocol (docs/design.md §5).
//!
//! | what | subject |
//! |---|---|
//! | tasks | `agent.tasks.<agent>` (stream `AGENT_TASKS`, work-queue) |
//! | results | `agent.results.<agent>.<task-token>` (stream `AGENT_RESULTS`) |
//! | live events | `agent.events.<agent>.<task-token>` (core NATS) |
//! | dead letters | `agent.deadletter.<agent>` (stream `AGENT_DEADLETTER`) |
//!
//! `<task-token>` is [`token`] of the task id: bounded to 128 characters and made of
//! `[A-Za-z0-9_-]`, whatever the publisher sent. Header values made from ids are tokens too.

use std::fmt;

pub use daedalus_contract::token::{is_token, token};

/// Header carrying the publisher's own reply address (the NATS reply subject is JetStream's).
pub const REPLY_TO_HEADER: &str = "reply-to";
/// Headers of a result message.
pub const TASK_ID_HEADER: &str = "Task-Id";
pub const TASK_STATE_HEADER: &str = "Task-State";
/// Why a body was dead-lettered.
pub const DEADLETTER_REASON_HEADER: &str = "Deadletter-Reason";
/// JetStream's dedupe header.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// Subjects of the task stream.
pub const TASKS_WILDCARD: &str = "agent.tasks.>";
/// Subjects of the result stream.
pub const RESULTS_WILDCARD: &str = "agent.results.>";
/// Subjects of the dead-letter stream.
pub const DEADLETTER_WILDCARD: &str = "agent.deadletter.>";

/// The longest `reply-to` subject honoured.
pub const REPLY_TO_MAX_LEN: usize = 256;
/// The reply prefixes honoured when none are configured.
pub const REPLY_TO_PREFIXES_DEFAULT: &str = "_INBOX.";

/// An agent name is a token of at most 64 characters.
pub fn is_agent_name(s: &str) -> bool {
    daedalus_contract::container::validate_agent_name(s).is_ok()
}

pub fn tasks(agent: &str) -> String {
    format!("agent.tasks.{agent}")
}

pub fn result(agent: &str, task_id: &str) -> String {
    ["agent.results.", agent, ".", &token(task_id)].concat()
}

pub fn events(agent: &str, task_id: &str) -> String {
    format!("agent.events.{agent}.{}", token(task_id))
}

pub fn deadletter(agent: &str) -> String {
    format!("agent.deadletter.{agent}")
}

/// The dedupe id of a result: scoped to the agent and the task, so two agents or two tasks
/// whose publishers reuse a messageId never dedupe each other's results.
pub fn result_msg_id(agent: &str, task_id: &str, message_id: &str) -> String {
    [
        "result:",
        agent,
        ":",
        &token(task_id),
        ":",
        &token(message_id),
    ]
    .concat()
}

/// The durable consumer of an agent's tasks.
pub fn consumer(agent: &str) -> String {
    format!("agent-{agent}")
}

/// The server's advisory when it stops delivering a message of `consumer`.
pub fn max_deliveries_advisory(stream: &str, consumer: &str) -> String {
    format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}")
}

/// Why a `reply-to` subject is not honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyToRefused {
    #[error("longer than {REPLY_TO_MAX_LEN} characters")]
    TooLong,
    #[error("not a publishable subject (empty tokens, spaces or control characters)")]
    Malformed,
    #[error("has a wildcard")]
    Wildcard,
    #[error("names the agent protocol's own or a system subject")]
    Reserved,
    #[error("not under an allowed reply prefix")]
    NotAllowed,
}

/// A `reply-to` value the proxy will publish to: under one of `prefixes`, at most
/// [`REPLY_TO_MAX_LEN`] characters, no wildcard, never `agent.` or a `$` subject.
pub fn check_reply_to(subject: &str, prefixes: &[String]) -> Result<(), ReplyToRefused> {
    if subject.len() > REPLY_TO_MAX_LEN {
        return Err(ReplyToRefused::TooLong);
    }
    check_subject_shape(subject)?;
    if subject.starts_with("agent.") || subject.starts_with('$') {
        return Err(ReplyToRefused::Reserved);
    }
    if !prefixes.iter().any(|p| subject.starts_with(p.as_str())) {
        return Err(ReplyToRefused::NotAllowed);
    }
    Ok(())
}

/// A subject of non-empty dot-separated tokens of visible ASCII, without wildcards.
fn check_subject_shape(subject: &str) -> Result<(), ReplyToRefused> {
    if subject.is_empty() || subject.split('.').any(str::is_empty) {
        return Err(ReplyToRefused::Malformed);
    }
    if !subject.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ReplyToRefused::Malformed);
    }
    if subject.contains(['*', '>']) {
        return Err(ReplyToRefused::Wildcard);
    }
    Ok(())
}

/// A reply prefix fit for configuration: a subject start (`_INBOX.`, `replies.app.`) that
/// cannot reach the protocol's own subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadReplyPrefix(pub &'static str);

impl fmt::Display for BadReplyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Checks one configured reply prefix.
pub fn check_reply_prefix(prefix: &str) -> Result<(), BadReplyPrefix> {
    let body = prefix.strip_suffix('.').unwrap_or(prefix);
    if body.is_empty() || check_subject_shape(body).is_err() {
        return Err(BadReplyPrefix(
            "not a subject prefix (dot-separated tokens, no wildcards)",
        ));
    }
    if "agent.".starts_with(prefix) || prefix.starts_with("agent.") || prefix.starts_with('$') {
        return Err(BadReplyPrefix(
            "would reach agent.* or $ subjects, which a reply-to must never name",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbox() -> Vec<String> {
        vec![REPLY_TO_PREFIXES_DEFAULT.to_owned()]
    }

    #[test]
    fn subjects_use_tokens() {
        assert_eq!(result("coder", "t1"), "agent.results.coder.t1");
        assert_eq!(result("coder", "a.b"), "agent.results.coder.b64-YS5i");
        let long = result("coder", &"x".repeat(5_000));
        assert!(long.len() < 80, "{long}");
    }

    #[test]
    fn result_ids_are_scoped_to_agent_and_task() {
        assert_eq!(result_msg_id("a", "t", "m"), "result:a:t:m");
        assert_ne!(result_msg_id("a", "t", "m"), result_msg_id("b", "t", "m"));
        assert_ne!(result_msg_id("a", "t1", "m"), result_msg_id("a", "t2", "m"));
        let hostile = result_msg_id("a", "t\r\n", &"m\n".repeat(3_000));
        assert!(hostile.bytes().all(|b| b.is_ascii_graphic()), "{hostile}");
        assert!(hostile.len() <= 8 + 64 + 2 * 128, "{}", hostile.len());
    }

    #[test]
    fn reply_to_rules() {
        let ok = ["_INBOX.abc", "_INBOX.a.b.c"];
        for s in ok {
            assert_eq!(check_reply_to(s, &inbox()), Ok(()), "{s}");
        }
        let refused = [
            ("agent.results.victim.stolen", ReplyToRefused::NotAllowed),
            ("agent.tasks.me", ReplyToRefused::Reserved),
            ("$JS.API.STREAM.INFO.AGENT_TASKS", ReplyToRefused::Reserved),
            (">", ReplyToRefused::Wildcard),
            ("_INBOX.>", ReplyToRefused::Wildcard),
            ("_INBOX.*.x", ReplyToRefused::Wildcard),
            ("_INBOX..x", ReplyToRefused::Malformed),
            ("_INBOX.a b", ReplyToRefused::Malformed),
            ("_INBOX.a\r\nPUB x 1", ReplyToRefused::Malformed),
            ("", ReplyToRefused::Malformed),
            ("other.subject", ReplyToRefused::NotAllowed),
        ];
        for (s, why) in refused {
            let got = check_reply_to(s, &inbox());
            // Reserved subjects outside the prefixes may be refused as either.
            assert!(
                got == Err(why) || (why == ReplyToRefused::NotAllowed && got.is_err()),
                "{s}: {got:?}"
            );
        }
        let long = format!("_INBOX.{}", "a".repeat(5_000));
        assert_eq!(
            check_reply_to(&long, &inbox()),
            Err(ReplyToRefused::TooLong)
        );
        // Even a careless prefix list never lets agent.* or $ through.
        let careless = vec![String::new()];
        assert_eq!(
            check_reply_to("agent.tasks.x", &careless),
            Err(ReplyToRefused::Reserved)
        );
    }

    #[test]
    fn reply_prefix_rules() {
        for ok in ["_INBOX.", "replies.app.", "replies"] {
            assert!(check_reply_prefix(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "agent.",
            "agent",
            "age",
            "agent.results.",
            "$JS.",
            "a.*.",
            ">",
            "a b.",
        ] {
            assert!(check_reply_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn agent_names() {
        assert!(is_agent_name("coder-1_x"));
        assert!(!is_agent_name("a.b"));
        assert!(!is_agent_name(&"a".repeat(65)));
    }
}
