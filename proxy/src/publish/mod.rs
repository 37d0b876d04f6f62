//! `daedalus-proxy publish`: put a task on NATS and wait for its result.
//!
//! It makes sure the streams exist, subscribes to the task's result subject *before*
//! publishing (so the result cannot slip by), publishes with `Nats-Msg-Id` = `token(messageId)`,
//! and waits for the result whose `Nats-Msg-Id` is `result:<agent>:<task-token>:<token(messageId)>`. While waiting it also
//! asks the result stream directly (direct get of the subject's last message), which covers a
//! result published while the subscription was reconnecting.

use std::io::Read;
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

mod terminal;

pub use terminal::{Follower, describe, run, stderr_is_tty};

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
    #[error("publishing to {subject} failed: {source}")]
    Publish {
        subject: String,
        source: async_nats::jetstream::context::PublishError,
    },
    #[error("no result for task {task_id} within {waited:?}")]
    Timeout { task_id: String, waited: Duration },
    #[error("cannot subscribe to {subject}: {source}")]
    Subscribe {
        subject: String,
        source: async_nats::SubscribeError,
    },
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
    on_event: impl FnMut(&StreamEvent),
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
    let results = subscribe_if(config.wait, &client, &result_subject).await?;
    let events_subject = subjects::events(&config.agent, &task_id);
    let events = subscribe_if(config.follow, &client, &events_subject).await?;

    let ack = send(&js, &config.agent, request, trace).await?;
    tracing::debug!(
        task_id,
        message_id,
        duplicate = ack.duplicate,
        "task published"
    );

    let Some(results) = results else {
        client.flush().await.ok();
        return Ok(Published::Sent {
            task_id,
            message_id,
            duplicate: ack.duplicate,
        });
    };
    let stream = js.get_stream(&config.streams.results).await.ok();
    let waiting = Waiting {
        result_subject,
        expected_id,
        deadline,
    };
    wait_for_result(waiting, results, events, stream, progress, on_event)
        .await
        .ok_or(PublishError::Timeout {
            task_id,
            waited: config.timeout,
        })
}

/// A subscription to `subject` when `wanted`.
async fn subscribe_if(
    wanted: bool,
    client: &async_nats::Client,
    subject: &str,
) -> Result<Option<async_nats::Subscriber>, PublishError> {
    if !wanted {
        return Ok(None);
    }
    client
        .subscribe(subject.to_owned())
        .await
        .map(Some)
        .map_err(|source| PublishError::Subscribe {
            subject: subject.to_owned(),
            source,
        })
}

/// Publishes `request` onto `agent`'s tasks subject, its message id the deduplication id, and
/// waits for the stream's ack.
async fn send(
    js: &async_nats::jetstream::Context,
    agent: &str,
    request: &SendMessageRequest,
    trace: &TraceContext,
) -> Result<async_nats::jetstream::publish::PublishAck, PublishError> {
    let subject = subjects::tasks(agent);
    let mut headers = HeaderMap::new();
    headers.insert(
        subjects::MSG_ID_HEADER,
        subjects::token(&request.message.message_id).as_ref(),
    );
    headers.insert("traceparent", trace.traceparent());
    let payload = contract::to_vec(request);
    let ack = async {
        js.publish_with_headers(subject.clone(), headers, payload.into())
            .await?
            .await
    };
    ack.await
        .map_err(|source| PublishError::Publish { subject, source })
}

/// Which result a publish waits for, and until when.
struct Waiting {
    result_subject: String,
    expected_id: String,
    deadline: Instant,
}

/// The task's result: from the results subscription, or (every 2 s, for a result stored
/// before the subscription saw it) the results stream's last message for the task; its
/// events, if followed, go to `on_event` meanwhile. `None` at the deadline.
async fn wait_for_result(
    waiting: Waiting,
    mut results: async_nats::Subscriber,
    mut events: Option<async_nats::Subscriber>,
    stream: Option<async_nats::jetstream::stream::Stream>,
    progress: impl Fn(),
    mut on_event: impl FnMut(&StreamEvent),
) -> Option<Published> {
    let Waiting {
        result_subject,
        expected_id,
        deadline,
    } = waiting;
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
                    return Some(Published::Result(Box::new(task)));
                }
            }
            _ = poll.tick() => {
                progress();
                if let Some(stream) = &stream
                    && let Ok(m) = stream.direct_get_last_for_subject(result_subject.clone()).await
                    && let Some(task) = matching_task(Some(&m.headers), &m.payload, &expected_id)
                {
                    return Some(Published::Result(Box::new(task)));
                }
            }
            () = tokio::time::sleep_until(deadline) => return None,
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
