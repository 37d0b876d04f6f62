//! One call to another A2A agent: the request, its answer read as a stream (or one response),
//! the Task it ends in as a tool result, and the remote task canceled when the call is
//! abandoned (the turn canceled, or the call past its timeout). The remote task's id is noted
//! in the turn's checkpoint as soon as it is named, and a resumed turn follows that task
//! ([`follow`]) instead of sending the message again.
//!
//! A call runs under two CLIENT spans ([`call_spans`]): `invoke_agent <agent>` (the GenAI
//! view: an agent invoked over a remote service) and inside it the A2A request's own
//! `{a2a.method.name}`, whose context the requests carry as their `traceparent`.

use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument as _;

use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    AgentCard, JsonRpcError, Message, Part, PartContent, Role, SendMessageRequest, StreamEvent,
    StreamResponse, Task, TaskRebuilder, TaskState,
};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

use crate::agents::agent_loop::{CallContext, ToolResult};
use crate::agents::llm::sse::SseParser;
use crate::config::deployment::McpServer;
use crate::platform::telemetry::a2a::{self as a2a_span, A2aMethod, Side};
use crate::platform::telemetry::{record_error, record_server};

/// How long the `CancelTask` of an abandoned call may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a followed task's state is asked for when its agent does not stream.
const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// Where a call goes.
pub(super) struct Target<'a> {
    pub(super) server: &'a str,
    pub(super) def: &'a McpServer,
    pub(super) card: &'a AgentCard,
    pub(super) http: &'a reqwest::Client,
    /// The runtime's token for the agent (its own, or the caller's exchanged), if it has one.
    pub(super) token: Option<String>,
}

/// A JSON-RPC response, as far as a call reads it.
#[derive(Debug, Deserialize)]
struct Reply<T> {
    #[serde(default = "Option::default")]
    result: Option<T>,
    #[serde(default)]
    error: Option<JsonRpcError>,
}

/// `SendMessage`'s result.
#[derive(Debug, Deserialize)]
struct Sent {
    #[serde(default)]
    task: Option<Task>,
    #[serde(default)]
    message: Option<Message>,
}

/// Why a call (or a follow) of another agent got no task: the text the model reads as the
/// tool's failure. Never names a URL (a server is named by its entry).
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("{server} is unreachable: {why}")]
    Unreachable { server: String, why: String },
    #[error("{server}'s answer broke: {why}")]
    AnswerBroke { server: String, why: String },
    #[error("{server}'s stream broke: {why}")]
    StreamBroke { server: String, why: String },
    #[error("{server} answered {status} with no JSON-RPC response: {why}")]
    NotJsonRpc {
        server: String,
        status: reqwest::StatusCode,
        why: String,
    },
    #[error("{server} sent an event that is not A2A: {why}")]
    NotA2a { server: String, why: String },
    #[error("{server} answered error {code}: {message}")]
    Refused {
        server: String,
        code: i32,
        message: String,
    },
    #[error(
        "{server} cannot say how the task this call started stands (the call was interrupted, and it may or may not have done the work): error {code}: {message}"
    )]
    Unsettled {
        server: String,
        code: i32,
        message: String,
    },
    #[error("{server} answered GetTask with neither a task nor an error")]
    NoTask { server: String },
    #[error("{server} answered neither a task nor a message")]
    NoAnswer { server: String },
    #[error("{server}'s stream is not one task's: {why}")]
    NotOneTask { server: String, why: String },
    #[error("{server}'s stream ended before it named a task")]
    Unnamed { server: String },
    #[error("the GetTask of {server} cannot be sent again")]
    NotRepeatable { server: String },
    #[error("the call to {server} stopped: {why}")]
    Stopped { server: String, why: String },
    #[error("the call to {server} was canceled")]
    Canceled { server: String },
}

/// The words of a transport error, without its URL.
fn words(e: reqwest::Error) -> String {
    e.without_url().to_string()
}

/// The remote task a call started, canceled if the call is dropped before it ends (the turn
/// canceled, or the call past its timeout). The exchange runs on a task of its own, so a call
/// dropped before the remote task's id arrived waits for it (up to [`CANCEL_TIMEOUT`]) and
/// cancels it then.
struct Abandon {
    /// The remote task's id, once the answer named it.
    task_id: watch::Receiver<Option<String>>,
    /// The exchange, stopped once the cancel is sent.
    exchange: tokio::task::AbortHandle,
    /// `None` once the call ended on its own.
    cancel: Option<(reqwest::RequestBuilder, String)>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some((request, server)) = self.cancel.take() else {
            return;
        };
        let mut task_id = self.task_id.clone();
        let exchange = self.exchange.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            exchange.abort();
            return;
        };
        runtime.spawn(async move {
            let named = tokio::time::timeout(CANCEL_TIMEOUT, task_id.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|id| id.clone());
            exchange.abort();
            let Some(task_id) = named else {
                tracing::warn!(server, "an abandoned call's task was never named; nothing to cancel");
                return;
            };
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask",
                "params": {"id": task_id}});
            match request.json(&body).timeout(CANCEL_TIMEOUT).send().await {
                Ok(_) => tracing::info!(server, task_id, "canceled the A2A task the call started"),
                Err(e) => tracing::warn!(server, task_id, error = %e.without_url(), "could not cancel the A2A task the call started"),
            }
        });
    }
}

/// The card's A2A v1 JSON-RPC interface.
fn jsonrpc_url(card: &AgentCard) -> Option<&str> {
    card.supported_interfaces
        .iter()
        .find(|i| i.protocol_binding == "JSONRPC" && i.protocol_version.starts_with("1."))
        .map(|i| i.url.as_str())
}

/// A POST to `url` with the entry's headers, the caller's trace, and the runtime's token for
/// the agent, or, when opted in, the caller's bearer.
fn post(target: &Target<'_>, url: &str, context: &CallContext) -> reqwest::RequestBuilder {
    let mut request = target
        .http
        .post(url)
        .header("A2A-Version", "1.0")
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    for (name, value) in &target.def.headers {
        request = request.header(name, value);
    }
    for (name, value) in &crate::platform::telemetry::current_headers() {
        request = request.header(name, value);
    }
    if let Some(token) = &target.token {
        request = request.bearer_auth(token);
    } else if target.def.forward_inbound_auth
        && let Some(token) = context.bearer.expose()
    {
        request = request.bearer_auth(token);
    }
    request
}

/// The spans of a `method` call to the agent `target` names at `url`: `invoke_agent <agent>`
/// and, its child, the A2A request's; the call runs in the second.
fn call_spans(target: &Target<'_>, url: &str, method: A2aMethod) -> (tracing::Span, tracing::Span) {
    use tracing::field::Empty;
    let card = target.card;
    let invoke = tracing::info_span!(
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", card.name),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = card.name.as_str(),
        gen_ai.agent.description = Empty,
        gen_ai.agent.version = Empty,
        server.address = Empty,
        server.port = Empty,
        error.type = Empty,
        trace_id = Empty,
        span_id = Empty,
    );
    if !card.description.is_empty() {
        invoke.record("gen_ai.agent.description", card.description.as_str());
    }
    if !card.version.is_empty() {
        invoke.record("gen_ai.agent.version", card.version.as_str());
    }
    record_server(&invoke, url);
    crate::platform::telemetry::record_ids(&invoke);
    let call = invoke.in_scope(|| a2a_span::span(Side::Client, method, Some("1.0"), Some(card)));
    record_server(&call, url);
    crate::platform::telemetry::record_ids(&call);
    (invoke, call)
}

/// The spans of a call to `target`: by `streaming` when its card streams, else by `plain`;
/// `None` when the card offers no interface to call.
fn spans_for(
    target: &Target<'_>,
    streaming: A2aMethod,
    plain: A2aMethod,
) -> Option<(tracing::Span, tracing::Span)> {
    let url = jsonrpc_url(target.card)?;
    let method = if target.card.capabilities.streaming == Some(true) {
        streaming
    } else {
        plain
    };
    Some(call_spans(target, url, method))
}

/// Runs `call` (a send's or a follow's) under `spans`, marking both failed when it fails.
async fn traced(
    (invoke, call): (tracing::Span, tracing::Span),
    run: impl Future<Output = ToolResult>,
) -> ToolResult {
    let result = run.instrument(call.clone()).await;
    if result.is_error {
        record_error(&call, "call_failed");
        record_error(&invoke, "call_failed");
    }
    result
}

/// Sends `text` (continuing `task_id`, for `skill`) and answers with what the task ended in.
pub(super) async fn send(
    target: &Target<'_>,
    text: String,
    task_id: Option<String>,
    skill: Option<String>,
    context: &CallContext,
) -> ToolResult {
    let sent = send_in_span(target, text, task_id, skill, context);
    match spans_for(
        target,
        A2aMethod::SendStreamingMessage,
        A2aMethod::SendMessage,
    ) {
        Some(spans) => traced(spans, sent).await,
        // No interface to call: the send says so, with no request to trace.
        None => sent.await,
    }
}

/// [`send`], in its spans.
async fn send_in_span(
    target: &Target<'_>,
    text: String,
    task_id: Option<String>,
    skill: Option<String>,
    context: &CallContext,
) -> ToolResult {
    let server = target.server;
    let Some(url) = jsonrpc_url(target.card) else {
        return failure(format!("{server} offers no A2A 1.0 JSON-RPC interface"));
    };
    let mut message = Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::User,
        vec![Part::text(text)],
    );
    message.task_id = task_id.clone();
    a2a_span::record_message(&tracing::Span::current(), &message);
    a2a_span::record_ids(&tracing::Span::current(), task_id.as_deref(), None);
    if let Some(skill) = skill {
        let mut metadata = daedalus_contract::Metadata::new();
        metadata.insert("skill".to_owned(), skill.into());
        message.metadata = Some(metadata);
    }
    let streaming = target.card.capabilities.streaming == Some(true);
    let method = if streaming {
        "SendStreamingMessage"
    } else {
        "SendMessage"
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method,
        "params": a2a_v1::to_value(&SendMessageRequest::new(message))});
    let (named, task_id_rx) = watch::channel(task_id);
    let mut request = post(target, url, context).json(&body);
    if streaming {
        request = request.header(reqwest::header::ACCEPT, "text/event-stream");
    }
    let owner = server.to_owned();
    let exchange = async move {
        let response = request.send().await.map_err(|e| CallError::Unreachable {
            server: owner.clone(),
            why: words(e),
        })?;
        read_answer(&owner, response, &named).await
    };
    converse(target, url, context, task_id_rx, exchange).await
}

/// Follows the remote task `task_id`, which a call started before its turn was interrupted, to
/// its end: its state asked (`GetTask`), then, while it runs, its events (`SubscribeToTask`,
/// when the card streams) or its state again each [`FOLLOW_POLL`]; the call's timeout and the
/// turn's cancel bound it as they bound a call.
pub(super) async fn follow(
    target: &Target<'_>,
    task_id: String,
    context: &CallContext,
) -> ToolResult {
    let followed = follow_in_span(target, task_id, context);
    match spans_for(target, A2aMethod::SubscribeToTask, A2aMethod::GetTask) {
        Some(spans) => traced(spans, followed).await,
        None => followed.await,
    }
}

/// [`follow`], in its spans.
async fn follow_in_span(target: &Target<'_>, task_id: String, context: &CallContext) -> ToolResult {
    let server = target.server;
    let Some(url) = jsonrpc_url(target.card) else {
        return failure(format!("{server} offers no A2A 1.0 JSON-RPC interface"));
    };
    a2a_span::record_ids(&tracing::Span::current(), Some(&task_id), None);
    tracing::info!(
        server,
        task_id,
        "following the A2A task a call started before its turn was interrupted"
    );
    let params = json!({"id": task_id});
    let get = post(target, url, context)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": params}));
    let mut subscribe = (target.card.capabilities.streaming == Some(true)).then(|| {
        post(target, url, context)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": params}),
            )
    });
    let (named, task_id_rx) = watch::channel(Some(task_id));
    let owner = server.to_owned();
    let exchange = async move {
        loop {
            let request = get.try_clone().ok_or_else(|| CallError::NotRepeatable {
                server: owner.clone(),
            })?;
            let task = read_task(&owner, request).await?;
            if ended(&task) {
                return Ok(task);
            }
            if let Some(request) = subscribe.take() {
                let answer = match request.send().await {
                    Ok(response) => read_answer(&owner, response, &named).await,
                    Err(e) => Err(CallError::Unreachable {
                        server: owner.clone(),
                        why: words(e),
                    }),
                };
                match answer {
                    Ok(task) if ended(&task) => return Ok(task),
                    Ok(_) => {}
                    Err(why) => tracing::info!(
                        server = owner,
                        why = %why,
                        "following the task by asking for it each second"
                    ),
                }
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    };
    converse(target, url, context, task_id_rx, exchange).await
}

/// Whether `task` has ended, or waits for its caller: what a call answers with.
fn ended(task: &Task) -> bool {
    task.status.state.is_terminal() || task.status.state.is_interrupted()
}

/// Runs `exchange` (a call's, or a follow's) on a task of its own, noting the remote task's
/// id as soon as `task_id` names it (when the turn takes checkpoints), and canceling that task
/// if the call is dropped or its turn canceled before it ends.
async fn converse(
    target: &Target<'_>,
    url: &str,
    context: &CallContext,
    task_id: watch::Receiver<Option<String>>,
    exchange: impl Future<Output = Result<Task, CallError>> + Send + 'static,
) -> ToolResult {
    let server = target.server;
    let mut exchange = tokio::spawn(exchange.in_current_span());
    let mut abandon = Abandon {
        task_id: task_id.clone(),
        exchange: exchange.abort_handle(),
        cancel: Some((post(target, url, context), server.to_owned())),
    };
    // The task continued or followed is on the span already; a new one is recorded as named.
    let task_known = task_id.borrow().is_some();
    let mut named = task_id;
    let outcome = loop {
        tokio::select! {
            joined = &mut exchange => break joined.unwrap_or_else(|e| Err(CallError::Stopped { server: server.to_owned(), why: e.to_string() })),
            () = context.cancel.cancelled() => break Err(CallError::Canceled { server: server.to_owned() }),
            Ok(()) = named.changed(), if context.note.is_some() => {
                let id = named.borrow_and_update().clone();
                if let (Some(note), Some(id)) = (&context.note, id) {
                    note.started(&id).await;
                    tracing::info!(server, task_id = id, "noted the A2A task the call started, for a resume to follow");
                }
            }
        }
    };
    match outcome {
        Ok(task) => {
            let span = tracing::Span::current();
            let new_task = (!task_known).then_some(task.id.as_str());
            a2a_span::record_ids(&span, new_task, task.context_id.as_deref());
            a2a_span::record_state(&span, task.status.state);
            if ended(&task) {
                // Ended on its own: nothing to cancel.
                abandon.cancel = None;
            }
            result_of(server, &task)
        }
        Err(why) => failure(why.to_string()),
    }
}

/// Reads an answer to a send or a subscribe: a stream of events, or one response.
async fn read_answer(
    server: &str,
    response: reqwest::Response,
    named: &watch::Sender<Option<String>>,
) -> Result<Task, CallError> {
    let is_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_stream {
        read_stream(server, response, named).await
    } else {
        read_one(server, response).await
    }
}

/// Sends a `GetTask` and reads the task it answers.
async fn read_task(server: &str, request: reqwest::RequestBuilder) -> Result<Task, CallError> {
    let response = request.send().await.map_err(|e| CallError::Unreachable {
        server: server.to_owned(),
        why: words(e),
    })?;
    let reply: Reply<Task> = read_reply(server, response).await?;
    if let Some(error) = reply.error {
        return Err(CallError::Unsettled {
            server: server.to_owned(),
            code: error.code,
            message: error.message,
        });
    }
    reply.result.ok_or_else(|| CallError::NoTask {
        server: server.to_owned(),
    })
}

/// Reads a streamed answer: the task it rebuilds, its id noted as soon as it is known.
async fn read_stream(
    server: &str,
    response: reqwest::Response,
    named: &watch::Sender<Option<String>>,
) -> Result<Task, CallError> {
    let mut body = response.bytes_stream();
    let mut parser = SseParser::default();
    let mut rebuilder = TaskRebuilder::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| CallError::StreamBroke {
            server: server.to_owned(),
            why: words(e),
        })?;
        for event in parser.feed(&chunk) {
            let reply: Reply<StreamResponse> =
                daedalus_contract::read::from_slice(event.data.as_bytes()).map_err(|e| {
                    CallError::NotA2a {
                        server: server.to_owned(),
                        why: e.to_string(),
                    }
                })?;
            if let Some(error) = reply.error {
                return Err(CallError::Refused {
                    server: server.to_owned(),
                    code: error.code,
                    message: error.message,
                });
            }
            let event = match reply.result {
                Some(StreamResponse::Event(event)) => event,
                Some(StreamResponse::Message { message }) => return Ok(answered_by(message)),
                None => continue,
            };
            if let StreamEvent::Task(task) = &event {
                named.send_replace(Some(task.id.clone()));
            }
            rebuilder.apply(&event).map_err(|e| CallError::NotOneTask {
                server: server.to_owned(),
                why: e.to_string(),
            })?;
        }
    }
    rebuilder.into_task().ok_or_else(|| CallError::Unnamed {
        server: server.to_owned(),
    })
}

/// Reads a whole answer as a JSON-RPC response.
async fn read_reply<T: serde::de::DeserializeOwned>(
    server: &str,
    response: reqwest::Response,
) -> Result<Reply<T>, CallError> {
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| CallError::AnswerBroke {
        server: server.to_owned(),
        why: words(e),
    })?;
    daedalus_contract::read::from_slice(&bytes).map_err(|e| CallError::NotJsonRpc {
        server: server.to_owned(),
        status,
        why: e.to_string(),
    })
}

/// Reads a blocking answer: the task, or a message (taken as a completed task's answer).
async fn read_one(server: &str, response: reqwest::Response) -> Result<Task, CallError> {
    let reply: Reply<Sent> = read_reply(server, response).await?;
    if let Some(error) = reply.error {
        return Err(CallError::Refused {
            server: server.to_owned(),
            code: error.code,
            message: error.message,
        });
    }
    match reply.result {
        Some(Sent {
            task: Some(task), ..
        }) => Ok(task),
        Some(Sent {
            message: Some(message),
            ..
        }) => Ok(answered_by(message)),
        _ => Err(CallError::NoAnswer {
            server: server.to_owned(),
        }),
    }
}

/// An agent's answer with a message, taken as a completed task's.
fn answered_by(message: Message) -> Task {
    Task {
        id: String::new(),
        context_id: message.context_id.clone(),
        status: daedalus_contract::TaskStatus::new(TaskState::Completed),
        artifacts: vec![daedalus_contract::Artifact::new(
            message.message_id.clone(),
            message.parts,
        )],
        history: None,
        metadata: None,
    }
}

/// The text of `parts`: text as is, data as JSON, files by their URL or name.
fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| match &p.content {
            PartContent::Text(t) => t.clone(),
            PartContent::Data(v) => v.to_string(),
            PartContent::Url(u) => u.clone(),
            PartContent::Raw(_) => format!("[file {}]", p.filename.as_deref().unwrap_or("")),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the model reads of the task a call ended in.
fn result_of(server: &str, task: &Task) -> ToolResult {
    let said = task
        .status
        .message
        .as_ref()
        .map(|m| text_of(&m.parts))
        .unwrap_or_default();
    match task.status.state {
        TaskState::Completed => ToolResult {
            content: task
                .artifacts
                .iter()
                .map(|a| text_of(&a.parts))
                .collect::<Vec<_>>()
                .join("\n"),
            is_error: false,
            // The remote agent's files reach this agent's caller.
            files: task
                .artifacts
                .iter()
                .flat_map(|a| &a.parts)
                .filter(|p| matches!(p.content, PartContent::Raw(_) | PartContent::Url(_)))
                .cloned()
                .collect(),
        },
        TaskState::InputRequired | TaskState::AuthRequired => ToolResult::text(format!(
            "{server} needs more input: {said}\n(to answer, call this tool again with \
                 task_id \"{}\" and the answer as message)",
            task.id
        )),
        state => failure(format!(
            "{server}'s task ended {state}{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        )),
    }
}

fn failure(content: String) -> ToolResult {
    ToolResult {
        content,
        is_error: true,
        files: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_reads_to_the_model_as_what_went_wrong_naming_the_server() {
        let refused = CallError::Refused {
            server: "inner".into(),
            code: -32001,
            message: "Task t not found".into(),
        };
        assert_eq!(
            refused.to_string(),
            "inner answered error -32001: Task t not found"
        );
        let unsettled = CallError::Unsettled {
            server: "inner".into(),
            code: -32603,
            message: "boom".into(),
        }
        .to_string();
        assert!(
            unsettled.contains("may or may not have done the work"),
            "{unsettled}"
        );
        assert_eq!(
            CallError::Canceled {
                server: "echo".into()
            }
            .to_string(),
            "the call to echo was canceled"
        );
    }
}
