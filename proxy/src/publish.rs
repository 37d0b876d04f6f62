//! `daedalus-proxy publish`: put a task on NATS and wait for its result.
//!
//! It makes sure the streams exist, subscribes to the task's result subject *before*
//! publishing (so the result cannot slip by), publishes with `Nats-Msg-Id` = `token(messageId)`,
//! and waits for the result whose `Nats-Msg-Id` is `result:<agent>:<task-token>:<token(messageId)>`. While waiting it also
//! asks the result stream directly (direct get of the subject's last message), which covers a
//! result published while the subscription was reconnecting.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use async_nats::HeaderMap;
use daedalus_contract::write::contract;
use daedalus_contract::{
    Message, Part, Role, SendMessageRequest, StreamEvent, Task, TaskState, read,
};
use futures::StreamExt;
use tokio::time::Instant;

use crate::config::PublishConfig;
use crate::nats::{self, NatsError};
use crate::wire::subjects;
use crate::wire::trace::{TraceContext, TraceParent};

/// Why publishing or waiting failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read the message text from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("no message text: pass it as an argument, on stdin, or with --json-file")]
    NoText,
    #[error("{path} is not a SendMessageRequest: {reason}")]
    BadRequest { path: String, reason: String },
    #[error("publishing to {subject} failed: {reason}")]
    Publish { subject: String, reason: String },
    #[error("no result for task {task_id} within {waited:?}")]
    Timeout { task_id: String, waited: Duration },
    #[error("cannot subscribe to {subject}: {reason}")]
    Subscribe { subject: String, reason: String },
}

/// What `publish` did.
#[derive(Debug)]
pub enum Published {
    /// Published; not waiting (`--no-wait`).
    Sent {
        task_id: String,
        message_id: String,
        duplicate: bool,
    },
    /// The result arrived.
    Result(Box<Task>),
}

impl Published {
    /// The exit code: 0 completed (or sent), 2 input-required, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Published::Sent { .. } => 0,
            Published::Result(task) => match task.status.state {
                TaskState::Completed => 0,
                TaskState::InputRequired | TaskState::AuthRequired => 2,
                _ => 1,
            },
        }
    }
}

/// Builds the request from the configuration (text, stdin or a JSON file).
pub fn build_request(
    config: &PublishConfig,
    stdin: impl FnOnce() -> std::io::Result<String>,
) -> Result<SendMessageRequest, PublishError> {
    let mut request = if let Some(path) = &config.json_file {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| PublishError::ReadFile {
            path: shown.clone(),
            source,
        })?;
        read::from_slice::<SendMessageRequest>(&bytes).map_err(|e| PublishError::BadRequest {
            path: shown,
            reason: e.to_string(),
        })?
    } else {
        let text = match &config.text {
            Some(t) => t.clone(),
            None => stdin().map_err(PublishError::Stdin)?,
        };
        let text = text.trim_end_matches(['\n', '\r']).to_owned();
        if text.is_empty() {
            return Err(PublishError::NoText);
        }
        SendMessageRequest::new(Message::new(
            uuid::Uuid::new_v4().to_string(),
            Role::User,
            vec![Part::text(text)],
        ))
    };
    if let Some(t) = &config.task_id {
        request.message.task_id = Some(t.clone());
    }
    if let Some(c) = &config.context_id {
        request.message.context_id = Some(c.clone());
    }
    Ok(request)
}

/// The trace the task is sent in: `--traceparent` as given (the proxy's span becomes a child
/// of the caller's), or a new trace whose root is this publish (not exported itself).
pub fn trace(config: &PublishConfig) -> TraceContext {
    match config.traceparent.as_deref().and_then(TraceParent::parse) {
        Some(span) => TraceContext::new(span, None, None),
        None => TraceContext::child_of(None, None),
    }
}

/// Publishes `request` for `config.agent` in `trace` (its `traceparent` rides on the task's
/// headers) and (unless `--no-wait`) waits for its result. With `--follow`, each event the
/// proxy relays from a streaming runtime (`agent.events.<agent>.<task-token>`) is handed to
/// `on_event` as it arrives.
pub async fn publish(
    config: &PublishConfig,
    request: &SendMessageRequest,
    trace: &TraceContext,
    progress: impl Fn(),
    mut on_event: impl FnMut(&StreamEvent),
) -> Result<Published, PublishError> {
    let deadline = Instant::now() + config.timeout;
    let client = nats::connect(
        &config.nats,
        "daedalus-proxy-publish",
        Instant::now() + config.timeout.min(Duration::from_secs(30)),
    )
    .await?;
    let js = async_nats::jetstream::new(client.clone());
    nats::ensure_streams(&js, &config.streams).await?;

    let message_id = request.message.message_id.clone();
    let task_id = request.message.effective_task_id().to_owned();
    let result_subject = subjects::result(&config.agent, &task_id);
    let expected_id = subjects::result_msg_id(&config.agent, &task_id, &message_id);
    let mut results = if config.wait {
        Some(
            client
                .subscribe(result_subject.clone())
                .await
                .map_err(|e| PublishError::Subscribe {
                    subject: result_subject.clone(),
                    reason: e.to_string(),
                })?,
        )
    } else {
        None
    };
    let events_subject = subjects::events(&config.agent, &task_id);
    let mut events = if config.follow {
        Some(
            client
                .subscribe(events_subject.clone())
                .await
                .map_err(|e| PublishError::Subscribe {
                    subject: events_subject.clone(),
                    reason: e.to_string(),
                })?,
        )
    } else {
        None
    };

    let subject = subjects::tasks(&config.agent);
    let mut headers = HeaderMap::new();
    headers.insert(
        subjects::MSG_ID_HEADER,
        subjects::token(&message_id).as_ref(),
    );
    headers.insert("traceparent", trace.traceparent());
    let payload = contract::to_vec(request);
    let ack = async {
        js.publish_with_headers(subject.clone(), headers, payload.into())
            .await?
            .await
    };
    let ack = ack.await.map_err(|e| PublishError::Publish {
        subject: subject.clone(),
        reason: e.to_string(),
    })?;
    tracing::debug!(
        task_id,
        message_id,
        duplicate = ack.duplicate,
        "task published"
    );

    let Some(results) = results.as_mut() else {
        client.flush().await.ok();
        return Ok(Published::Sent {
            task_id,
            message_id,
            duplicate: ack.duplicate,
        });
    };
    let stream = js.get_stream(&config.streams.results).await.ok();
    let mut poll = tokio::time::interval(Duration::from_secs(2));
    poll.tick().await;
    let next_event = async |events: &mut Option<async_nats::Subscriber>| match events {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    };
    loop {
        tokio::select! {
            Some(message) = next_event(&mut events) => {
                if let Ok(event) = read::from_slice::<StreamEvent>(&message.payload) {
                    on_event(&event);
                }
            }
            received = results.next() => {
                if let Some(task) = received.and_then(|m| matching_task(m.headers.as_ref(), &m.payload, &expected_id)) {
                    return Ok(Published::Result(Box::new(task)));
                }
            }
            _ = poll.tick() => {
                progress();
                if let Some(stream) = &stream
                    && let Ok(m) = stream.direct_get_last_for_subject(result_subject.clone()).await
                    && let Some(task) = matching_task(Some(&m.headers), &m.payload, &expected_id)
                {
                    return Ok(Published::Result(Box::new(task)));
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(PublishError::Timeout { task_id, waited: config.timeout });
            }
        }
    }
}

/// The Task of a result message, if it answers the message we sent.
fn matching_task(headers: Option<&HeaderMap>, payload: &[u8], expected: &str) -> Option<Task> {
    if has_msg_id(headers, expected) {
        read::from_slice::<Task>(payload).ok()
    } else {
        None
    }
}

fn has_msg_id(headers: Option<&HeaderMap>, expected: &str) -> bool {
    headers
        .and_then(|h| h.get(subjects::MSG_ID_HEADER))
        .is_some_and(|v| v.as_str() == expected)
}

/// Reads all of stdin (the message text when none is given as an argument).
pub fn read_stdin() -> std::io::Result<String> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    Ok(text)
}

/// Whether stderr is a terminal (the spinner is shown only then).
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Prints a followed stream (`--follow`): the answer's text as it arrives, each step of the
/// turn on a line of its own (dim on a terminal).
#[derive(Debug, Default)]
pub struct Follower {
    /// Step lines are dimmed (stderr is a terminal).
    dim: bool,
    /// Answer text has been printed (the result then prints only its state).
    printed_text: bool,
    /// The answer's line is open (a step line starts a new one first).
    mid_line: bool,
}

impl Follower {
    pub fn new(dim: bool) -> Self {
        Self {
            dim,
            ..Self::default()
        }
    }

    /// Shows one event: answer text on `out`, steps on `steps`.
    pub fn show(
        &mut self,
        event: &StreamEvent,
        out: &mut impl std::io::Write,
        steps: &mut impl std::io::Write,
    ) {
        match event {
            StreamEvent::ArtifactUpdate(update) => {
                let text: String = update
                    .artifact
                    .parts
                    .iter()
                    .filter_map(Part::as_text)
                    .collect();
                if text.is_empty() {
                    return;
                }
                if !update.append && self.mid_line {
                    // The answer starts over (a new step, or a retry): on a new line.
                    let _ = writeln!(out);
                }
                let _ = write!(out, "{text}");
                let _ = out.flush();
                self.printed_text = true;
                self.mid_line = !text.ends_with('\n');
            }
            StreamEvent::StatusUpdate(update) if !update.r#final => {
                let Some(step) = update.status.message.as_ref().map(Message::text) else {
                    return;
                };
                if self.mid_line {
                    let _ = writeln!(out);
                    let _ = out.flush();
                    self.mid_line = false;
                }
                let _ = if self.dim {
                    writeln!(steps, "\x1b[2m{step}\x1b[0m")
                } else {
                    writeln!(steps, "{step}")
                };
            }
            StreamEvent::StatusUpdate(_) | StreamEvent::Task(_) => {}
        }
    }

    /// Whether any answer text was printed.
    pub fn printed_text(&self) -> bool {
        self.printed_text
    }

    /// Whether the answer's last line is still open.
    pub fn mid_line(&self) -> bool {
        self.mid_line
    }
}

/// The Task for people: id, state, and the text of its message and artifacts.
pub fn describe(task: &Task) -> String {
    use std::fmt::Write as _;
    let mut out = format!("task {}  {}", task.id, task.status.state);
    if let Some(c) = &task.context_id {
        let _ = write!(out, "  (context {c})");
    }
    out.push('\n');
    if let Some(m) = &task.status.message {
        let _ = writeln!(out, "{}", m.text());
    }
    for part in task.artifacts.iter().flat_map(|a| &a.parts) {
        match part.as_text() {
            Some(text) => {
                let _ = writeln!(out, "{text}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "[{} part]",
                    part.media_type.as_deref().unwrap_or("non-text")
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Artifact, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent};

    use super::*;

    fn chunk(text: &str, append: bool) -> StreamEvent {
        StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact::text("a", text),
            append,
            last_chunk: false,
            metadata: None,
        })
    }

    fn step(text: &str) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: Some(Message::new("m", Role::Agent, vec![Part::text(text)])),
                timestamp: None,
            },
            r#final: false,
            metadata: None,
        })
    }

    #[test]
    fn a_followed_stream_prints_text_as_it_comes_and_steps_on_lines_of_their_own() {
        let (mut out, mut steps) = (Vec::new(), Vec::new());
        let mut follower = Follower::new(true);
        for event in [
            chunk("Let me", false),
            chunk(" look.", true),
            step("f/search: started"),
            chunk("It is", false),
            chunk(" 4.", true),
        ] {
            follower.show(&event, &mut out, &mut steps);
        }
        assert_eq!(String::from_utf8(out).unwrap(), "Let me look.\nIt is 4.");
        assert_eq!(
            String::from_utf8(steps).unwrap(),
            "\x1b[2mf/search: started\x1b[0m\n"
        );
        assert!(follower.printed_text() && follower.mid_line());
    }
}
