//! `send_message` (and the alias named after the agent): run the agent loop on a message and
//! answer with its text; a failure is `isError: true` with a reason a person can act on.
//!
//! Arguments: `message` (required), `images` (`[{data, mime_type}]`, base64), and sampling
//! parameters — top-level keys (`temperature`, `top_p`, ...) or a `request_params` object; the
//! top-level keys win. The conversation is chosen by the agent's `instance_scope`; calls in one
//! conversation take turns, so their rows never interleave.

use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use daedalus_schemas::{Message, Metadata, Part, PartContent, Role};
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Face;
use super::handler::{bearer, session_id};
use super::progress::Reporter;
use crate::agent::{AgentOutcome, AgentRequest, EventSink};
use crate::config::deployment::InstanceScope;
use crate::lifecycle::Phase;
use crate::llm::sampling;
use crate::metrics::{AgentLabel, AgentOutcome as OutcomeLabel};

#[derive(Debug, Deserialize)]
struct SendArgs {
    message: String,
    #[serde(default)]
    images: Vec<ImageArg>,
    #[serde(default)]
    request_params: Option<Map<String, Value>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct ImageArg {
    data: String,
    mime_type: String,
}

/// The conversation a call continues: `None` for the `request` scope (nothing is kept), and
/// for `connection` when the client has no session.
pub(super) fn context_of(face: &Face, context: &RequestContext<RoleServer>) -> Option<String> {
    use crate::conversations::MCP_PREFIX;
    match face.scope() {
        InstanceScope::Shared => Some(format!("{MCP_PREFIX}{}", face.name())),
        InstanceScope::Connection => {
            session_id(context).map(|session| format!("{MCP_PREFIX}{}/{session}", face.name()))
        }
        InstanceScope::Request => None,
    }
}

fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Runs the call and records it in `pallas_send_message_*`.
pub(super) async fn send_message(
    face: &Face,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let started = Instant::now();
    let result = run(face, arguments, context).await;
    let metrics = face.state.metrics();
    let outcome = if result.is_error == Some(true) {
        "error"
    } else {
        "ok"
    };
    metrics
        .send_message
        .get_or_create(&OutcomeLabel {
            agent: face.name().to_owned(),
            outcome,
        })
        .inc();
    metrics
        .send_message_duration
        .get_or_create(&AgentLabel {
            agent: face.name().to_owned(),
        })
        .observe(started.elapsed().as_secs_f64());
    result
}

/// The user message for `args`, or why it cannot be made.
fn user_message(args: &SendArgs) -> Result<Message, String> {
    if args.message.trim().is_empty() && args.images.is_empty() {
        return Err("`message` is empty; send the text for the agent".to_owned());
    }
    let mut parts = vec![Part::text(args.message.clone())];
    for (i, image) in args.images.iter().enumerate() {
        if !image.mime_type.starts_with("image/") {
            return Err(format!(
                "images[{i}].mime_type is {:?}; only image/* types are accepted",
                image.mime_type
            ));
        }
        if base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .is_err()
        {
            return Err(format!("images[{i}].data is not base64"));
        }
        let mut part = Part::from_content(PartContent::Raw(image.data.clone()));
        part.media_type = Some(image.mime_type.clone());
        parts.push(part);
    }
    Ok(Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::User,
        parts,
    ))
}

/// The call's sampling parameters: `request_params`, then the top-level keys over them.
fn sampling(args: &SendArgs) -> Map<String, Value> {
    let mut params = args.request_params.clone().unwrap_or_default();
    for key in sampling::KEYS {
        if let Some(v) = args.rest.get(key) {
            params.insert(key.to_owned(), v.clone());
        }
    }
    params
}

async fn run(
    face: &Face,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    if face.state.lifecycle().phase() != Phase::Ready {
        return failure("the runtime is shutting down and takes no new work; try again shortly");
    }
    let args: SendArgs = match serde_json::from_value(Value::Object(arguments)) {
        Ok(a) => a,
        Err(e) => {
            return failure(format!(
                "invalid arguments: {e}; send {{\"message\": \"...\"}}"
            ));
        }
    };
    let message = match user_message(&args) {
        Ok(m) => m,
        Err(why) => return failure(why),
    };
    let conversation = context_of(face, context);
    let task_id = uuid::Uuid::new_v4().to_string();
    let context_id = conversation.clone().unwrap_or_else(|| task_id.clone());
    let mut request = AgentRequest::new(&task_id, &context_id, message);
    request.persist = conversation.is_some();
    request.bearer = bearer(context);
    let params = sampling(&args);
    if let Err((key, why)) = sampling::check_all(&params) {
        return failure(format!("invalid arguments: {key} {why}"));
    }
    if !params.is_empty() {
        let mut metadata = Metadata::new();
        metadata.insert("request_params".to_owned(), Value::Object(params));
        request.metadata = Some(metadata);
    }
    let metrics = Arc::clone(face.state.metrics());
    let observe = EventSink::new(move |e| metrics.observe(&e));
    // Progress only for a caller that asked for it with a token.
    let reporter = context
        .meta
        .get_progress_token()
        .map(|token| Reporter::start(context.peer.clone(), token));
    request.events = match &reporter {
        Some(reporter) => reporter.sink(observe),
        None => observe,
    };
    // One turn at a time per conversation.
    let lock = conversation
        .as_deref()
        .map(|c| face.state.conversations().get(c));
    let _turn = match &lock {
        Some(lock) => Some(lock.lock().await),
        None => None,
    };
    let Some(_permit) = face.state.turn_permit() else {
        return failure(
            "the runtime is running as many tasks as it may (MAX_CONCURRENT_TASKS); try again shortly",
        );
    };
    let _inflight = face.state.inflight().token();
    match crate::http::send::run_agent(&face.state, &face.agent, request).await {
        Ok(AgentOutcome::Completed { artifacts }) => {
            let text: Vec<&str> = artifacts
                .iter()
                .flat_map(|a| &a.parts)
                .filter_map(Part::as_text)
                .collect();
            CallToolResult::success(vec![ContentBlock::text(text.join("\n"))])
        }
        Ok(AgentOutcome::InputRequired { question }) => {
            let text: Vec<&str> = question.iter().filter_map(Part::as_text).collect();
            CallToolResult::success(vec![ContentBlock::text(text.join("\n"))])
        }
        Ok(AgentOutcome::Failed { reason }) => failure(reason),
        Ok(AgentOutcome::Canceled) => failure("the call was canceled"),
        Err(e) => failure(e.to_string()),
    }
}
