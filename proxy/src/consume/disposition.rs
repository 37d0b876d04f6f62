//! What to do with a task once the runtime has answered (or not): publish its result, give it
//! up as poison, or retry it later. Pure functions, tested as tables.
//!
//! A Task the runtime wrote exactly in the contract dialect is read only for what decides
//! ([`TaskOutline`]) and published byte for byte; any other spelling is read by the lenient
//! reader and written again in the contract dialect.

use std::time::Duration;

use bytes::Bytes;
use daedalus_contract::outline::TaskOutline;
use daedalus_contract::write::contract;
use daedalus_contract::{ErrorBody, Message, Part, Task, TaskState, TaskStatus, read};

use crate::forward::forwarder::{ForwardError, Reply};
use crate::wire::ids::Ids;

/// The fate of a task after one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    /// The runtime answered with a Task: publish it, then ack.
    Result(Answer),
    /// The task can never succeed: publish a failed Task saying why, then term.
    Poison(String),
    /// The attempt failed for a reason that may pass: nak with a delay, or give up after the
    /// last delivery.
    Transient(String),
    /// The runtime answered 503 (not ready, or draining): like [`Disposition::Transient`],
    /// and pulling pauses until its `/health` answers 200 again.
    Unavailable(String),
    /// The runtime refused the task for a spent budget (429 with `Retry-After`): the task
    /// waits that long in the stream, without spending a delivery, up to `BUDGET_WAIT`.
    OverBudget {
        retry_after: Duration,
        reason: String,
    },
}

/// A result ready to publish: its state and its body in the contract dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub state: TaskState,
    pub body: Bytes,
}

impl Answer {
    /// `task`, written in the contract dialect.
    pub fn of(task: &Task) -> Self {
        Self {
            state: task.status.state,
            body: Bytes::from(contract::to_vec(task)),
        }
    }

    /// A failed Task for the task `ids` names, whose `status.message` says `reason`.
    pub fn failed(ids: &Ids, reason: &str) -> Self {
        Self::of(&failed_task(
            &ids.task_id,
            ids.context_id.as_deref(),
            reason,
        ))
    }
}

/// Classifies the runtime's answer to task `task_id`.
pub fn classify(task_id: &str, reply: Result<Reply, ForwardError>) -> Disposition {
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => return Disposition::Transient(e.to_string()),
    };
    match reply.status {
        200 => read_result(task_id, reply.body),
        503 => Disposition::Unavailable(format!(
            "runtime answered 503: {}",
            error_message(&reply.body)
        )),
        // The runtime refuses the proxy's credential: a deployment fault to be fixed, not a
        // fault of the task, which waits for it.
        401 | 403 => Disposition::Transient(format!(
            "the runtime refused the proxy's credential ({}): {}",
            reply.status,
            error_message(&reply.body)
        )),
        429 if let Some(retry_after) = reply.retry_after => Disposition::OverBudget {
            retry_after,
            reason: error_message(&reply.body),
        },
        408 | 429 | 500..=599 => Disposition::Transient(format!(
            "runtime answered {}: {}",
            reply.status,
            error_message(&reply.body)
        )),
        status => Disposition::Poison(format!(
            "runtime refused the task ({status}): {}",
            error_message(&reply.body)
        )),
    }
}

/// A 200's body: passed on unchanged if it is already exactly in the contract dialect, else
/// read in any dialect and written again.
fn read_result(task_id: &str, body: Bytes) -> Disposition {
    if let Some(outline) = TaskOutline::read(&body) {
        return match check_task(task_id, &outline) {
            Ok(()) => Disposition::Result(Answer {
                state: outline.state,
                body,
            }),
            Err(reason) => Disposition::Poison(reason),
        };
    }
    match read::from_slice::<Task>(&body) {
        Err(e) => Disposition::Poison(format!(
            "the runtime answered 200 without a valid Task: {e}"
        )),
        Ok(task) => {
            let has_output =
                !task.artifacts.is_empty() && task.artifacts.iter().all(|a| !a.parts.is_empty());
            let explained = task
                .status
                .message
                .as_ref()
                .is_some_and(|m| !m.parts.is_empty());
            let outline = TaskOutline {
                id: task.id.as_str().into(),
                state: task.status.state,
                has_output,
                explained,
            };
            match check_task(task_id, &outline) {
                Ok(()) => Disposition::Result(Answer::of(&task)),
                Err(reason) => Disposition::Poison(reason),
            }
        }
    }
}

/// A Task from the runtime is published only if it keeps the contract's rules; else why not.
fn check_task(task_id: &str, task: &TaskOutline<'_>) -> Result<(), String> {
    if task.id != task_id {
        return Err(format!(
            "the runtime answered with task id {:?} for task {task_id:?}",
            task.id
        ));
    }
    let state = task.state;
    if !(state.is_terminal() || state.is_interrupted()) {
        return Err(format!("the runtime answered with a task still {state}"));
    }
    if state == TaskState::Completed && !task.has_output {
        return Err("the runtime answered completed without an artifact".to_owned());
    }
    if state == TaskState::Failed && !task.explained {
        return Err("the runtime answered failed without status.message".to_owned());
    }
    Ok(())
}

/// The `error.message` of a contract error body, else the start of the body.
fn error_message(body: &[u8]) -> String {
    if let Ok(error) = serde_json::from_slice::<ErrorBody>(body) {
        return error.error.message;
    }
    let text = String::from_utf8_lossy(body);
    let mut preview: String = text.chars().take(200).collect();
    if preview.is_empty() {
        preview.push_str("(empty body)");
    }
    preview
}

/// The delay before retry number `attempt` (1-based): `base`·2^(attempt-1), capped at `max`.
pub fn retry_delay(attempt: u32, base: Duration, max: Duration) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    base.checked_mul(factor).map_or(max, |d| d.min(max))
}

/// A failed Task for `task_id` whose `status.message` says `reason`.
pub fn failed_task(task_id: &str, context_id: Option<&str>, reason: &str) -> Task {
    let message = Message::from_agent(vec![Part::text(reason)]).in_task(task_id, context_id);
    Task {
        id: task_id.to_owned(),
        context_id: context_id.map(str::to_owned),
        status: TaskStatus::now_with(TaskState::Failed, message),
        artifacts: Vec::new(),
        history: None,
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[expect(
        clippy::unnecessary_wraps,
        reason = "cases hold what the forwarder returns"
    )]
    fn reply(status: u16, body: &str) -> Result<Reply, ForwardError> {
        Ok(Reply {
            status,
            body: Bytes::from(body.to_owned()),
            retry_after: None,
        })
    }

    const DONE: &str = r#"{"id":"t","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"text":"x"}]}]}"#;

    #[test]
    fn classification_table() {
        let err = r#"{"error":{"code":400,"message":"message.parts[0]: bad"}}"#;
        let cases: Vec<(&str, Result<Reply, ForwardError>, &str)> = vec![
            ("completed task", reply(200, DONE), "result"),
            (
                "input-required",
                reply(
                    200,
                    r#"{"id":"t","status":{"state":"input-required","message":{"messageId":"q","role":"agent","parts":[{"text":"?"}]}}}"#,
                ),
                "result",
            ),
            (
                "v1 spellings are read",
                reply(
                    200,
                    r#"{"id":"t","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"no"}]}}}"#,
                ),
                "result",
            ),
            (
                "wrong id",
                reply(200, &DONE.replace("\"t\"", "\"other\"")),
                "poison",
            ),
            (
                "still working",
                reply(200, r#"{"id":"t","status":{"state":"working"}}"#),
                "poison",
            ),
            (
                "completed without artifact",
                reply(200, r#"{"id":"t","status":{"state":"completed"}}"#),
                "poison",
            ),
            ("200 not a task", reply(200, "hello"), "poison"),
            ("400", reply(400, err), "poison"),
            ("413", reply(413, err), "poison"),
            ("415", reply(415, err), "poison"),
            ("404", reply(404, ""), "poison"),
            ("401", reply(401, ""), "transient"),
            ("403", reply(403, ""), "transient"),
            ("408", reply(408, ""), "transient"),
            ("429", reply(429, ""), "transient"),
            (
                "429 with Retry-After",
                Ok(Reply {
                    status: 429,
                    body: Bytes::from(err),
                    retry_after: Some(Duration::from_secs(12)),
                }),
                "over budget",
            ),
            ("500", reply(500, "boom"), "transient"),
            ("503", reply(503, err), "unavailable"),
            (
                "connection refused",
                Err(ForwardError::Unreached("refused".into())),
                "transient",
            ),
            (
                "timeout",
                Err(ForwardError::Timeout(Duration::from_secs(1))),
                "transient",
            ),
        ];
        for (name, input, expected) in cases {
            let got = match classify("t", input) {
                Disposition::Result(_) => "result",
                Disposition::Poison(_) => "poison",
                Disposition::Transient(_) => "transient",
                Disposition::Unavailable(_) => "unavailable",
                Disposition::OverBudget { .. } => "over budget",
            };
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn refusals_carry_the_runtime_s_message() {
        let err = r#"{"error":{"code":400,"message":"message.parts[0]: bad"}}"#;
        match classify("t", reply(400, err)) {
            Disposition::Poison(reason) => {
                assert!(reason.contains("(400): message.parts[0]: bad"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retry_delays_double_and_cap() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(10);
        let delays: Vec<u64> = (1..=6)
            .map(|a| retry_delay(a, base, max).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(retry_delay(200, base, max), max);
    }

    #[test]
    fn contract_bodies_pass_unchanged_and_others_are_rewritten() {
        // Whitespace and key order are the runtime's own: kept as they came.
        let contract = "{ \"status\": {\"state\": \"completed\"}, \"id\": \"t\",\n  \"artifacts\": [{\"parts\": [{\"text\": \"x\"}], \"artifactId\": \"a\"}] }";
        match classify("t", reply(200, contract)) {
            Disposition::Result(answer) => {
                assert_eq!(answer.body, contract.as_bytes());
                assert_eq!(answer.state, TaskState::Completed);
            }
            other => panic!("{other:?}"),
        }
        let v1 = r#"{"id":"t","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"q","role":"ROLE_AGENT","parts":[{"text":"no"}]}},"kind":"task"}"#;
        match classify("t", reply(200, v1)) {
            Disposition::Result(answer) => {
                assert_eq!(answer.state, TaskState::Failed);
                assert_eq!(
                    answer.body,
                    r#"{"id":"t","status":{"state":"failed","message":{"messageId":"q","role":"agent","parts":[{"text":"no"}]}}}"#.as_bytes()
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failed_without_a_message_is_refused() {
        let bare = reply(200, r#"{"id":"t","status":{"state":"failed"}}"#);
        assert!(
            matches!(classify("t", bare), Disposition::Poison(r) if r.contains("status.message"))
        );
    }

    #[test]
    fn failed_tasks_keep_the_contract() {
        let task = failed_task("t", Some("c"), "gave up after 5 deliveries: boom");
        let json = daedalus_contract::write::contract::to_value(&task);
        daedalus_contract::Schema::Task.validate(&json).unwrap();
        assert_eq!(
            task.status.message.unwrap().text(),
            "gave up after 5 deliveries: boom"
        );
    }
}
