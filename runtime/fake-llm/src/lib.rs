//! A scripted LLM server for tests. It speaks the OpenAI chat completions wire format
//! (`POST /v1/chat/completions`, `GET /v1/models`) and the Anthropic Messages wire format
//! (`POST /v1/messages`, `GET /v1/models/{id}`), streaming and not, and validates every
//! request the way the real API does — roles and order, every tool result answering an earlier
//! tool call, tool schemas that are JSON Schema objects, required fields, known parameters,
//! the API key — answering anything else with the API's own error shape. Replies come from a
//! script: text, tool calls, errors with `Retry-After`, delays.

mod anthropic;
mod openai;
mod prompt_cache;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::Value;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A final text answer.
    Text(String),
    /// One or more tool calls: `(name, arguments)`.
    ToolCalls(Vec<(String, Value)>),
    /// An error status, with a `Retry-After` header value if given.
    Error {
        status: u16,
        retry_after: Option<String>,
    },
    /// The inner reply, after a delay.
    Delayed(Duration, Box<Reply>),
    /// A text answer that stops after `before` until the test opens `gate`, then sends
    /// `after`. Streamed (on either face), `before` goes out as chunks first, so a test can
    /// tell what arrived before the model finished; not streamed, the whole answer waits.
    Paused {
        before: String,
        after: String,
        gate: Gate,
    },
    /// A text answer streamed a chunk (two words) at a time, `every` apart, as a slow model
    /// writes; not streamed (or on the Anthropic face), the whole text after as long.
    Trickled { text: String, every: Duration },
}

/// A gate a scripted reply waits at until the test opens it.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<(tokio::sync::Notify, std::sync::atomic::AtomicBool)>);

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets every reply waiting at this gate go on (and any that reaches it later).
    pub fn open(&self) {
        self.0.1.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.0.notify_waiters();
    }

    /// Waits until the gate is open.
    pub async fn passed(&self) {
        loop {
            let notified = self.0.0.notified();
            if self.0.1.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Replies decided by the conversation itself, for concurrent conversations whose requests
/// interleave: a call of each of `tools` whose arguments are `arguments`, or else
/// `{"n": <the number in the first user message>}`, until the turn has had `rounds` of tool
/// results (at least one), then `text` (where `{n}` becomes the conversation's number).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoReply {
    pub tools: Vec<String>,
    pub text: String,
    /// The tool calls' arguments (`{"n": <n>}` when `None`).
    pub arguments: Option<Value>,
    /// How many rounds of tool calls a turn makes before the answer (`0` counts as one).
    pub rounds: usize,
}

/// What the fake saw: the request body and whether it was accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub path: String,
    pub body: Value,
    /// The validation error, if the request was refused.
    pub refused: Option<String>,
    /// The W3C `traceparent` header the request carried.
    pub traceparent: Option<String>,
    /// The credential it carried: the `Authorization: Bearer` token (OpenAI) or `x-api-key`
    /// (Anthropic).
    pub credential: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    /// The Anthropic face's prompt cache.
    prompt_cache: prompt_cache::PromptCache,
    script: Mutex<VecDeque<Reply>>,
    auto: Mutex<Option<AutoReply>>,
    log: Mutex<Vec<Logged>>,
    api_key: String,
    /// Further keys accepted (`FakeLlm::accept_key`).
    more_keys: Mutex<std::collections::HashSet<String>>,
    models: Vec<String>,
}

/// A running fake LLM server.
#[derive(Debug, Clone)]
pub struct FakeLlm {
    /// Base URL for an OpenAI-compatible client (`http://127.0.0.1:<port>/v1`).
    pub openai_base_url: String,
    /// Base URL for an Anthropic client (`http://127.0.0.1:<port>`).
    pub anthropic_base_url: String,
    state: Arc<State>,
}

impl FakeLlm {
    /// Starts a fake that accepts `api_key` and serves `models`.
    pub async fn start(api_key: &str, models: &[&str]) -> FakeLlm {
        let state = Arc::new(State {
            api_key: api_key.to_owned(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            ..State::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai::chat))
            .route("/v1/models", get(openai::models))
            .route("/v1/messages", post(anthropic::messages))
            .route("/v1/models/{id}", get(anthropic::model))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("has an address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeLlm {
            openai_base_url: format!("http://{addr}/v1"),
            anthropic_base_url: format!("http://{addr}"),
            state,
        }
    }

    /// Queues replies, answered in order (one per accepted request).
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().expect("lock").extend(replies);
    }

    /// Answers every request from now on by [`AutoReply`] (the script is ignored).
    /// Accepts `key` too, as a second credential (a caller's token passed through).
    pub fn accept_key(&self, key: &str) {
        self.state
            .more_keys
            .lock()
            .expect("lock")
            .insert(key.to_owned());
    }

    pub fn auto(&self, auto: AutoReply) {
        *self.state.auto.lock().expect("lock") = Some(auto);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Logged> {
        self.state.log.lock().expect("lock").clone()
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        self.state.script.lock().expect("lock").len()
    }
}

/// The credential `headers` carry: the `Authorization: Bearer` token, else `x-api-key`.
fn credential_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

impl State {
    /// Whether `headers` carry a key this fake accepts.
    fn accepts(&self, headers: &axum::http::HeaderMap) -> bool {
        credential_of(headers).is_some_and(|key| {
            key == self.api_key || self.more_keys.lock().expect("lock").contains(key)
        })
    }

    /// The reply to `body` (an OpenAI or Anthropic request).
    fn next_reply(&self, body: &Value) -> Option<Reply> {
        if let Some(auto) = self.auto.lock().expect("lock").clone() {
            return Some(auto_reply(&auto, body));
        }
        self.script.lock().expect("lock").pop_front()
    }

    fn record(
        &self,
        path: &str,
        headers: &axum::http::HeaderMap,
        body: &Value,
        refused: Option<String>,
    ) {
        let traceparent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let credential = credential_of(headers).map(str::to_owned);
        self.log.lock().expect("lock").push(Logged {
            path: path.to_owned(),
            body: body.clone(),
            refused,
            traceparent,
            credential,
        });
    }
}

/// Rough token count for usage: words.
fn tokens(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn auto_reply(auto: &AutoReply, body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let is_tool_result = |m: &Value| {
        m["role"] == "tool"
            || m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    };
    let is_tool_call = |m: &Value| {
        m["role"] == "assistant"
            && (m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                || m["content"]
                    .as_array()
                    .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_use")))
    };
    // The rounds of tool calls since the user last spoke.
    let this_turn = messages
        .iter()
        .rposition(|m| m["role"] == "user" && !is_tool_result(m))
        .map_or(&messages[..], |at| &messages[at..]);
    let rounds = this_turn.iter().filter(|m| is_tool_call(m)).count();
    let answered_tool = messages.last().is_some_and(is_tool_result) && rounds >= auto.rounds.max(1);
    // The conversation's number: the first number in its first user message.
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or(Value::Null);
    let text = match &first_user["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    let n: i64 = text
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if answered_tool || auto.tools.is_empty() {
        return Reply::Text(auto.text.replace("{n}", &n.to_string()));
    }
    Reply::ToolCalls(
        auto.tools
            .iter()
            .map(|t| {
                let arguments = auto
                    .arguments
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({"n": n}));
                (t.clone(), arguments)
            })
            .collect(),
    )
}

/// An SSE response whose `head` goes out at once and whose `tail` waits for `gate`.
pub(crate) fn held_at(head: String, gate: Gate, tail: String) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::convert::Infallible>>(2);
    tokio::spawn(async move {
        if tx.send(Ok(head)).await.is_ok() {
            gate.passed().await;
            let _ = tx.send(Ok(tail)).await;
        }
    });
    let body = axum::body::Body::from_stream(ReceiverStream(rx));
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}

/// How long a trickled answer takes: one chunk (two words) every `every`.
pub(crate) fn trickle_time(text: &str, every: Duration) -> Duration {
    let chunks = text.split_inclusive(' ').count().div_ceil(2);
    every * u32::try_from(chunks).unwrap_or(u32::MAX)
}

/// An SSE response whose `frames` go out `every` apart.
pub(crate) fn trickled(frames: Vec<String>, every: Duration) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::convert::Infallible>>(2);
    tokio::spawn(async move {
        for (i, frame) in frames.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(every).await;
            }
            if tx.send(Ok(frame)).await.is_err() {
                return;
            }
        }
    });
    let body = axum::body::Body::from_stream(ReceiverStream(rx));
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}

/// A channel receiver as a body stream.
struct ReceiverStream<T>(tokio::sync::mpsc::Receiver<T>);

impl<T> futures::Stream for ReceiverStream<T> {
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}
