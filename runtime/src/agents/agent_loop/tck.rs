//! The `tck` model: the scripted scenarios of the official A2A conformance kit (a2a-tck), so
//! the kit can be run against the runtime with only the model scripted.
//!
//! The kit names a scenario by the prefix of the message's `messageId`, as its Python system
//! under test (`sut/a2a-python/sut_agent.py` in the kit) does:
//!
//! | `messageId` prefix             | the turn                                                    |
//! |--------------------------------|-------------------------------------------------------------|
//! | `tck-complete-task`            | completed: "Hello from TCK"                                 |
//! | `tck-artifact-text`            | completed: a text artifact "Generated text content"        |
//! | `tck-artifact-file-url`        | completed: a file part by URL (`https://example.com/output.txt`, `output.txt`, `text/plain`) |
//! | `tck-artifact-file`            | completed: a file part of raw bytes (`tck`, `output.txt`, `text/plain`) |
//! | `tck-artifact-data`            | completed: a data part `{"key": "value", "count": 42}`     |
//! | `tck-message-response`         | a Message, not a Task: "Direct message response"            |
//! | `tck-input-required`           | input-required                                              |
//! | `tck-reject-task`              | rejected: "rejected"                                        |
//! | `tck-stream-artifact-chunked`  | streams one text artifact in two chunks (`append`, `lastChunk`) |
//! | `tck-stream-artifact-text`, `-file` | streams a text (or file) artifact, then completes     |
//! | `tck-stream-ordering-001`, `tck-stream-001`, `-003` | streams a text artifact, then completes |
//! | `tck-stream-002`               | completes at once                                           |
//! | `test-resubscribe-message-id`  | works for 4 s (a cancel stops it), then completes           |
//!
//! ACTS, the kit's successor, names a behaviour by the text of the first user message instead
//! (`tck-` and the longest run of `[a-z0-9-]` after it); a task's later turns play the
//! behaviour its first message named. A `messageId` prefix above wins over the text:
//!
//! | text prefix             | the turn                                                         |
//! |-------------------------|------------------------------------------------------------------|
//! | `tck-complete-task`     | completed: "tck-complete-task ok"                                |
//! | `tck-message-response`  | a Message: "tck message response"                                |
//! | `tck-task-failure`      | failed: "tck-task-failure ok"                                    |
//! | `tck-reject-task`       | rejected                                                         |
//! | `tck-input-required`    | input-required                                                   |
//! | `tck-auth-required`     | auth-required: "tck-auth-required ok"                            |
//! | `tck-multi-turn`        | input-required, until a turn's text starts with `done`: completed |
//! | `tck-cancel`            | works until canceled (at most [`HOLD`]), then completes          |
//! | `tck-long-running`      | works for [`LONG_RUNNING`] (a cancel stops it), then completes with an artifact |
//! | `tck-stream-basic`      | streams an artifact, then completes                              |
//! | `tck-stream-chunked`    | streams one artifact in three chunks, then completes             |
//! | `tck-artifact-text`, `-data`, `-file`, `-file-url` | completed with that artifact, as above |
//! | another `tck-…`         | failed: the behaviour is not implemented (never a quiet success) |
//!
//! Anything else completes with `Unhandled messageId prefix: <id>`. Where the kit's agent
//! completes a task with no output, this one says "completed": the contract wants an artifact
//! on every completed task.

use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Artifact, Part, PartContent};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentOutcome, AgentRequest, LoopEvent};

/// The conformance kit's scripted model.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tck;

/// How long `test-resubscribe-message-id` works before it completes.
const RESUBSCRIBE_WORK: Duration = Duration::from_secs(4);
/// How long `tck-long-running` works: long enough for a client polling every second, or
/// subscribing at once, to see it working.
const LONG_RUNNING: Duration = Duration::from_secs(2);
/// The longest `tck-cancel` waits for its cancel.
const HOLD: Duration = Duration::from_mins(1);
/// The word a `tck-multi-turn` task ends on.
const MULTI_TURN_DONE: &str = "done";

/// What a scenario does.
enum Scenario {
    /// Completes with these parts as one artifact.
    Complete(Vec<Part>),
    /// Streams these chunks of one artifact (the last closes it), then completes with it.
    Stream(Vec<Part>),
    Reply(&'static str),
    InputRequired,
    AuthRequired,
    Fail(String),
    Reject,
    /// Works for a while (a cancel stops it), then completes.
    Work(Duration),
}

/// The file part the kit expects: `output.txt`, `text/plain`.
fn file(content: PartContent) -> Part {
    let mut part = Part::from_content(content);
    part.media_type = Some("text/plain".to_owned());
    part.filename = Some("output.txt".to_owned());
    part
}

/// The bytes `tck`, base64-encoded as a part carries them.
const TCK_BYTES: &str = "dGNr";

/// The scenarios' prefixes; where one starts another (`tck-artifact-file-url` and
/// `tck-artifact-file`), the longer comes first.
const PREFIXES: [&str; 16] = [
    "tck-stream-artifact-chunked",
    "test-resubscribe-message-id",
    "tck-stream-artifact-text",
    "tck-stream-artifact-file",
    "tck-stream-ordering-001",
    "tck-artifact-file-url",
    "tck-message-response",
    "tck-input-required",
    "tck-complete-task",
    "tck-artifact-text",
    "tck-artifact-file",
    "tck-artifact-data",
    "tck-reject-task",
    "tck-stream-001",
    "tck-stream-002",
    "tck-stream-003",
];

/// The ACTS behaviour `text` names: `tck-` and the longest run of `[a-z0-9-]` after it.
fn behaviour_in(text: &str) -> Option<&str> {
    let text = text.trim_start();
    let named = text.strip_prefix("tck-")?;
    let end = named
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(named.len());
    let name = text[..4 + end].trim_end_matches('-');
    (name.len() > 4).then_some(name)
}

/// The text of `message`'s first text part.
fn first_text(message: &daedalus_contract::Message) -> Option<&str> {
    message.parts.iter().find_map(Part::as_text)
}

/// The behaviour of a turn: the one its message names, else the one its task's first user
/// message named.
fn behaviour(request: &AgentRequest) -> Option<&str> {
    first_text(&request.message)
        .and_then(behaviour_in)
        .or_else(|| {
            request
                .history
                .iter()
                .find(|m| m.role == daedalus_contract::Role::User)
                .and_then(first_text)
                .and_then(behaviour_in)
        })
}

/// What ACTS `behaviour` does in `request`'s turn.
fn acts_scenario(behaviour: &str, request: &AgentRequest) -> Scenario {
    let text = |t: &str| vec![Part::text(t)];
    match behaviour {
        "tck-complete-task" => Scenario::Complete(text("tck-complete-task ok")),
        "tck-message-response" => Scenario::Reply("tck message response"),
        "tck-task-failure" => Scenario::Fail("tck-task-failure ok".to_owned()),
        "tck-reject-task" => Scenario::Reject,
        "tck-input-required" => Scenario::InputRequired,
        "tck-auth-required" => Scenario::AuthRequired,
        "tck-multi-turn" => {
            let said = first_text(&request.message)
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            if said.starts_with(MULTI_TURN_DONE) {
                Scenario::Complete(text("multi-turn complete"))
            } else {
                Scenario::InputRequired
            }
        }
        "tck-cancel" => Scenario::Work(HOLD),
        "tck-long-running" => Scenario::Work(LONG_RUNNING),
        "tck-stream-basic" => Scenario::Stream(text("streamed content")),
        "tck-stream-chunked" => Scenario::Stream(vec![
            Part::text("chunk one "),
            Part::text("chunk two "),
            Part::text("chunk three"),
        ]),
        "tck-artifact-text"
        | "tck-artifact-data"
        | "tck-artifact-file"
        | "tck-artifact-file-url" => kit_scenario(behaviour, behaviour),
        other => Scenario::Fail(format!("the ACTS behaviour {other} is not implemented")),
    }
}

fn scenario(request: &AgentRequest) -> Scenario {
    let message_id = &request.message.message_id;
    if !PREFIXES.iter().any(|p| message_id.starts_with(*p))
        && let Some(behaviour) = behaviour(request)
    {
        return acts_scenario(behaviour, request);
    }
    kit_scenario(message_id, message_id)
}

/// The kit's scenario for the `messageId` (or behaviour) `named`.
fn kit_scenario(named: &str, message_id: &str) -> Scenario {
    let text = |t: &str| vec![Part::text(t)];
    let prefix = PREFIXES
        .iter()
        .find(|p| named.starts_with(*p))
        .copied()
        .unwrap_or_default();
    match prefix {
        "tck-stream-artifact-chunked" => {
            Scenario::Stream(vec![Part::text("chunk-1 "), Part::text("chunk-2")])
        }
        "test-resubscribe-message-id" => Scenario::Work(RESUBSCRIBE_WORK),
        "tck-stream-artifact-text" => Scenario::Stream(text("Streamed text content")),
        "tck-stream-artifact-file" => {
            Scenario::Stream(vec![file(PartContent::Raw(TCK_BYTES.to_owned()))])
        }
        "tck-stream-ordering-001" => Scenario::Stream(text("Ordered output")),
        "tck-artifact-file-url" => Scenario::Complete(vec![file(PartContent::Url(
            "https://example.com/output.txt".to_owned(),
        ))]),
        "tck-message-response" => Scenario::Reply("Direct message response"),
        "tck-input-required" => Scenario::InputRequired,
        "tck-complete-task" => Scenario::Complete(text("Hello from TCK")),
        "tck-artifact-text" => Scenario::Complete(text("Generated text content")),
        "tck-artifact-file" => {
            Scenario::Complete(vec![file(PartContent::Raw(TCK_BYTES.to_owned()))])
        }
        "tck-artifact-data" => Scenario::Complete(vec![Part::from_content(PartContent::Data(
            serde_json::json!({"key": "value", "count": 42}),
        ))]),
        "tck-reject-task" => Scenario::Reject,
        "tck-stream-001" => Scenario::Stream(text("Stream hello from TCK")),
        "tck-stream-002" => Scenario::Complete(text("completed")),
        "tck-stream-003" => Scenario::Stream(text("Stream task lifecycle")),
        _ => Scenario::Complete(text(&format!("Unhandled messageId prefix: {message_id}"))),
    }
}

fn artifact(parts: Vec<Part>) -> Artifact {
    Artifact::fresh(parts).named("response")
}

#[async_trait]
impl Agent for Tck {
    /// The reply scenarios, as the message names them (a continuation whose behaviour only its
    /// task's first message named is streamed as its Task).
    fn may_reply(&self, message: &daedalus_contract::Message) -> bool {
        let named = &message.message_id;
        if PREFIXES.iter().any(|p| named.starts_with(*p)) {
            return named.starts_with("tck-message-response");
        }
        first_text(message).and_then(behaviour_in) == Some("tck-message-response")
    }

    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        match scenario(&request) {
            Scenario::Complete(parts) => AgentOutcome::Completed {
                artifacts: vec![artifact(parts)],
            },
            Scenario::Stream(chunks) => {
                let mut whole = artifact(Vec::new());
                let last = chunks.len().saturating_sub(1);
                for (i, part) in chunks.into_iter().enumerate() {
                    let mut chunk = whole.clone();
                    chunk.parts = vec![part];
                    whole.append_chunk(&chunk);
                    request.events.emit(LoopEvent::ArtifactChunk {
                        agent: "tck".to_owned(),
                        depth: request.depth,
                        artifact: chunk,
                        append: i > 0,
                        last_chunk: i == last,
                    });
                }
                AgentOutcome::Completed {
                    artifacts: vec![whole],
                }
            }
            Scenario::Reply(text) => AgentOutcome::Replied {
                parts: vec![Part::text(text)],
            },
            Scenario::InputRequired => AgentOutcome::InputRequired {
                question: vec![Part::text("More input is needed.")],
            },
            Scenario::AuthRequired => AgentOutcome::AuthRequired {
                challenge: vec![Part::text("tck-auth-required ok")],
            },
            Scenario::Fail(reason) => AgentOutcome::Failed { reason },
            Scenario::Reject => AgentOutcome::Rejected {
                reason: "rejected".to_owned(),
            },
            Scenario::Work(duration) => {
                tokio::select! {
                    () = tokio::time::sleep(duration) => AgentOutcome::Completed {
                        artifacts: vec![artifact(vec![Part::text("completed")])],
                    },
                    () = cancel.cancelled() => AgentOutcome::Canceled,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Message, Role};

    use super::*;

    async fn run(message_id: &str) -> AgentOutcome {
        let message = Message::new(message_id, Role::User, vec![Part::text("TCK test")]);
        Tck.run(
            AgentRequest::new("t", "c", message),
            CancellationToken::new(),
        )
        .await
    }

    fn parts(outcome: &AgentOutcome) -> &[Part] {
        match outcome {
            AgentOutcome::Completed { artifacts } => &artifacts[0].parts,
            other => panic!("not completed: {other:?}"),
        }
    }

    #[tokio::test]
    async fn each_prefix_plays_its_scenario() {
        assert_eq!(
            parts(&run("tck-artifact-text-1f").await),
            [Part::text("Generated text content")]
        );
        let url = run("tck-artifact-file-url-2").await;
        assert!(
            matches!(&parts(&url)[0].content, PartContent::Url(u) if u == "https://example.com/output.txt")
        );
        assert_eq!(parts(&url)[0].filename.as_deref(), Some("output.txt"));
        let raw = run("tck-artifact-file-3").await;
        assert!(matches!(&parts(&raw)[0].content, PartContent::Raw(b) if b == "dGNr"));
        assert_eq!(parts(&raw)[0].media_type.as_deref(), Some("text/plain"));
        let data = run("tck-artifact-data-4").await;
        assert!(
            matches!(&parts(&data)[0].content, PartContent::Data(v) if v["count"] == 42 && v["key"] == "value")
        );
        assert_eq!(
            run("tck-message-response-5").await,
            AgentOutcome::Replied {
                parts: vec![Part::text("Direct message response")]
            }
        );
        assert!(matches!(
            run("tck-input-required-6").await,
            AgentOutcome::InputRequired { .. }
        ));
        assert_eq!(
            run("tck-reject-task-7").await,
            AgentOutcome::Rejected {
                reason: "rejected".into()
            }
        );
        assert_eq!(
            parts(&run("something-else").await),
            [Part::text("Unhandled messageId prefix: something-else")]
        );
    }

    #[tokio::test]
    async fn a_chunked_artifact_streams_in_chunks_and_completes_whole() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        let message = Message::new(
            "tck-stream-artifact-chunked-1",
            Role::User,
            vec![Part::text("x")],
        );
        let mut request = AgentRequest::new("t", "c", message);
        request.events = super::super::EventSink::new(move |e| {
            if let LoopEvent::ArtifactChunk {
                artifact,
                append,
                last_chunk,
                ..
            } = e
            {
                sink.lock().unwrap().push((
                    artifact.parts[0].as_text().unwrap_or_default().to_owned(),
                    append,
                    last_chunk,
                    artifact.artifact_id,
                ));
            }
        });
        let outcome = Tck.run(request, CancellationToken::new()).await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen.iter()
                .map(|(t, a, l, _)| (t.as_str(), *a, *l))
                .collect::<Vec<_>>(),
            [("chunk-1 ", false, false), ("chunk-2", true, true)]
        );
        let AgentOutcome::Completed { artifacts } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(artifacts[0].artifact_id, seen[0].3);
        assert_eq!(artifacts[0].parts, [Part::text("chunk-1 chunk-2")]);
    }

    #[test]
    fn an_acts_behaviour_is_the_longest_name_at_the_start_of_the_text() {
        assert_eq!(
            behaviour_in("tck-complete-task hello"),
            Some("tck-complete-task")
        );
        assert_eq!(
            behaviour_in("  tck-artifact-file-url document"),
            Some("tck-artifact-file-url")
        );
        assert_eq!(behaviour_in("tck-cancel- now"), Some("tck-cancel"));
        assert_eq!(behaviour_in("tck-"), None);
        assert_eq!(behaviour_in("hello tck-cancel"), None);
    }

    async fn say(text: &str, history: Vec<Message>) -> AgentOutcome {
        let message = Message::new(
            uuid::Uuid::new_v4().to_string(),
            Role::User,
            vec![Part::text(text)],
        );
        let mut request = AgentRequest::new("t", "c", message);
        request.history = history;
        Tck.run(request, CancellationToken::new()).await
    }

    #[tokio::test]
    async fn each_acts_behaviour_plays_its_turn() {
        assert_eq!(
            say("tck-message-response hi", Vec::new()).await,
            AgentOutcome::Replied {
                parts: vec![Part::text("tck message response")]
            }
        );
        assert!(matches!(
            say("tck-task-failure x", Vec::new()).await,
            AgentOutcome::Failed { .. }
        ));
        assert!(matches!(
            say("tck-auth-required x", Vec::new()).await,
            AgentOutcome::AuthRequired { .. }
        ));
        assert!(matches!(
            say("tck-reject-task x", Vec::new()).await,
            AgentOutcome::Rejected { .. }
        ));
        assert_eq!(
            parts(&say("tck-complete-task x", Vec::new()).await),
            [Part::text("tck-complete-task ok")]
        );
        assert!(matches!(
            &parts(&say("tck-artifact-data x", Vec::new()).await)[0].content,
            PartContent::Data(_)
        ));
        let unknown = say("tck-no-such-behaviour", Vec::new()).await;
        assert!(
            matches!(&unknown, AgentOutcome::Failed { reason } if reason.contains("tck-no-such-behaviour")),
            "{unknown:?}"
        );
        assert_eq!(
            parts(&say("x", Vec::new()).await).len(),
            1,
            "plain text is not a behaviour: the kit's fallback"
        );
    }

    #[tokio::test]
    async fn a_multi_turn_task_asks_until_a_turn_says_done() {
        assert!(matches!(
            say("tck-multi-turn start", Vec::new()).await,
            AgentOutcome::InputRequired { .. }
        ));
        let first = Message::new("m-1", Role::User, vec![Part::text("tck-multi-turn start")]);
        let asked = Message::from_agent(vec![Part::text("More input is needed.")]);
        let history = vec![first, asked];
        assert!(matches!(
            say("here is more input", history.clone()).await,
            AgentOutcome::InputRequired { .. }
        ));
        assert_eq!(
            parts(&say("done", history).await),
            [Part::text("multi-turn complete")]
        );
    }

    #[tokio::test]
    async fn the_kits_message_id_prefix_wins_over_the_text() {
        let message = Message::new(
            "tck-reject-task-9",
            Role::User,
            vec![Part::text("tck-complete-task")],
        );
        let outcome = Tck
            .run(
                AgentRequest::new("t", "c", message),
                CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(outcome, AgentOutcome::Rejected { .. }),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn a_held_task_ends_when_canceled() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let message = Message::new("m", Role::User, vec![Part::text("tck-cancel hold")]);
        assert_eq!(
            Tck.run(AgentRequest::new("t", "c", message), cancel).await,
            AgentOutcome::Canceled
        );
    }

    #[tokio::test]
    async fn resubscribe_work_stops_when_canceled() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let message = Message::new("test-resubscribe-message-id-1", Role::User, vec![]);
        let outcome = Tck.run(AgentRequest::new("t", "c", message), cancel).await;
        assert_eq!(outcome, AgentOutcome::Canceled);
    }
}
