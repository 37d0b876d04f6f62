//! `send_message` (and the alias named after the agent): one turn through the turn service,
//! answered with its text; a failure is `isError: true` with a reason a person can act on.
//!
//! Arguments: `message` (required), `images` (`[{data, mime_type}]`, base64), and sampling
//! parameters — top-level keys (`temperature`, `top_p`, ...) or a `request_params` object; the
//! top-level keys win, and `null` clears the agent's default. On the legacy revisions the
//! conversation is chosen by the agent's `instance_scope` ([`super::caller`]); a 2026-07-28
//! call goes through [`super::stateless`], which also reads `conversation_id`.

use std::time::Instant;

use base64::Engine as _;
use daedalus_contract::{Message, Part, PartContent, Role, Task, TaskState};
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Face;
use super::caller;
use super::progress::{self, Reporter};
use crate::config::sampling::{SamplingError, SamplingParams};
use crate::platform::metrics::{AgentLabel, AgentOutcome as OutcomeLabel};
use crate::platform::unknown_keys::warn_unknown_keys;
use crate::services::turns::TurnControls;
use crate::services::turns::{Memory, TurnError, TurnErrorKind, TurnRequest};

#[derive(Debug, Deserialize)]
struct SendArgs {
    message: String,
    /// The conversation a 2026-07-28 call continues (`instance_scope: connection`); a
    /// legacy call's is its session's.
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    images: Vec<ImageArg>,
    #[serde(default)]
    request_params: Option<Map<String, Value>>,
    /// The top-level sampling keys (and whatever else the caller sent).
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
struct ImageArg {
    data: String,
    mime_type: String,
}

pub(super) fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Records an answered `send_message` in `pallas_send_message_*`.
pub(super) fn record(face: &Face, response: &CallToolResponse, started: Instant) {
    let metrics = face.core.metrics();
    let outcome = match &response {
        CallToolResponse::Complete(result) if result.is_error == Some(true) => "error",
        _ => "ok",
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
}

/// Why a `send_message` call's arguments make no user message.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum BadMessage {
    #[error("`message` is empty; send the text for the agent")]
    Empty,
    #[error("images[{index}].mime_type is {mime_type:?}; only image/* types are accepted")]
    NotAnImage { index: usize, mime_type: String },
    #[error("images[{0}].data is not base64")]
    NotBase64(usize),
}

/// The user message for `args`, or why it cannot be made.
fn user_message(args: &SendArgs) -> Result<Message, BadMessage> {
    if args.message.trim().is_empty() && args.images.is_empty() {
        return Err(BadMessage::Empty);
    }
    let mut parts = vec![Part::text(args.message.clone())];
    for (index, image) in args.images.iter().enumerate() {
        if !image.mime_type.starts_with("image/") {
            return Err(BadMessage::NotAnImage {
                index,
                mime_type: image.mime_type.clone(),
            });
        }
        if base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .is_err()
        {
            return Err(BadMessage::NotBase64(index));
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
/// Top-level keys that are not sampling keys are not this function's business.
fn sampling(args: &SendArgs) -> Result<SamplingParams, SamplingError> {
    if args.request_params.is_none() && args.rest.is_empty() {
        return Ok(SamplingParams::default());
    }
    let nested = match &args.request_params {
        Some(params) => SamplingParams::from_map(params).map_err(|e| e.under("request_params"))?,
        None => SamplingParams::default(),
    };
    let mut top = args.rest.clone();
    top.retain(|key, _| SamplingParams::KEYS.contains(&key.as_str()));
    Ok(SamplingParams::from_map(&top)?.over(&nested))
}

/// A part of an answer that is not text, as MCP content: JSON data as text, bytes as an
/// embedded resource (an image as an image), a URL as a resource link.
fn content_of(part: &Part) -> Option<ContentBlock> {
    let media_type = part.media_type.clone();
    let name = part.filename.clone().unwrap_or_else(|| "file".to_owned());
    match &part.content {
        PartContent::Text(_) => None,
        PartContent::Data(data) => Some(ContentBlock::text(data.to_string())),
        PartContent::Raw(bytes) => Some(match media_type.as_deref() {
            Some(image) if image.starts_with("image/") => {
                ContentBlock::image(bytes.clone(), image.to_owned())
            }
            _ => ContentBlock::Resource(rmcp::model::EmbeddedResource::new(
                rmcp::model::ResourceContents::BlobResourceContents {
                    uri: format!("file:///{name}"),
                    mime_type: media_type,
                    blob: bytes.clone(),
                    meta: None,
                },
            )),
        }),
        PartContent::Url(url) => {
            let mut link = rmcp::model::Resource::new(url.clone(), name);
            link.mime_type = media_type;
            Some(ContentBlock::resource_link(link))
        }
    }
}

/// The tool result for a turn's task.
pub(super) fn answer(task: &Task) -> CallToolResult {
    let status_text = || {
        task.status
            .message
            .as_ref()
            .map(Message::text)
            .unwrap_or_default()
    };
    match task.status.state {
        TaskState::Completed => {
            let parts = || task.artifacts.iter().flat_map(|a| &a.parts);
            let text: Vec<&str> = parts().filter_map(Part::as_text).collect();
            // The text first, as Daedalus reads it; then files and data, if any.
            let mut content = vec![ContentBlock::text(text.join("\n"))];
            content.extend(parts().filter_map(content_of));
            CallToolResult::success(content)
        }
        TaskState::InputRequired => {
            CallToolResult::success(vec![ContentBlock::text(status_text())])
        }
        TaskState::Canceled => failure("the call was canceled"),
        _ => failure(status_text()),
    }
}

/// Why the turn did not run, for the caller.
pub(super) fn refusal(error: &TurnError) -> CallToolResult {
    match error.kind() {
        TurnErrorKind::NotReady => failure(
            "the runtime is still starting (its MCP servers are not all up); try again shortly",
        ),
        TurnErrorKind::ShuttingDown => {
            failure("the runtime is shutting down and takes no new work; try again shortly")
        }
        TurnErrorKind::Busy(limit) => failure(format!(
            "the runtime is running as many tasks as it may ({limit}); try again shortly"
        )),
        TurnErrorKind::HandedOff(task_id) => failure(format!(
            "the runtime serving this call is stopping; task {task_id} goes on from its last step on another replica: poll it with tasks/get (taskId {task_id}), or send the next message once it has ended"
        )),
        _ => failure(error.to_string()),
    }
}

/// Runs `turn`, reporting each of its steps as a progress notification when the caller sent a
/// `progressToken`.
pub(super) async fn run_turn(
    face: &Face,
    turn: TurnRequest,
    context: &RequestContext<RoleServer>,
) -> Result<Task, TurnError> {
    let Some(token) = context.meta.get_progress_token() else {
        return face.core.turns().run(turn).await;
    };
    let reporter = Reporter::start(context.peer.clone(), token);
    let outcome = with_progress(face, turn, &reporter).await;
    reporter.flush().await;
    outcome
}

async fn with_progress(
    face: &Face,
    turn: TurnRequest,
    reporter: &Reporter,
) -> Result<Task, TurnError> {
    let mut handle = face.core.turns().start(turn).await?;
    if let Some(mut events) = handle.take_events() {
        while let Some(event) = events.recv().await {
            if let Some(text) = progress::message(&event) {
                reporter.note(text);
            }
        }
    }
    handle.finish().await
}

/// What a `send_message` call asks for, read from its arguments.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) message: Message,
    pub(super) conversation_id: Option<String>,
    sampling: SamplingParams,
    controls: TurnControls,
}

impl Prepared {
    /// The call's arguments, read; or the tool result saying what is wrong with them.
    pub(super) fn read(face: &Face, arguments: Map<String, Value>) -> Result<Self, CallToolResult> {
        let args: SendArgs = serde_json::from_value(Value::Object(arguments)).map_err(|e| {
            failure(format!(
                "invalid arguments: {e}; send {{\"message\": \"...\"}}"
            ))
        })?;
        let message = user_message(&args).map_err(|e| failure(e.to_string()))?;
        let sampling = sampling(&args).map_err(|e| failure(format!("invalid arguments: {e}")))?;
        let controls = TurnControls::deserialize(Value::Object(args.rest.clone()))
            .map_err(|e| failure(format!("invalid arguments: {e}")))?;
        warn_unknown_keys(
            &format!("{}/send_message", face.name()),
            args.rest.keys(),
            |k| SamplingParams::KEYS.contains(&k) || TurnControls::KEYS.contains(&k),
        );
        Ok(Self {
            message,
            conversation_id: args.conversation_id,
            sampling,
            controls,
        })
    }

    /// `message` alone, with the agent's own sampling and controls (an answer to the agent's
    /// question, sent with no arguments of its own).
    pub(super) fn answer(message: Message) -> Self {
        Self {
            message,
            conversation_id: None,
            sampling: SamplingParams::default(),
            controls: TurnControls::default(),
        }
    }

    /// The turn of `face` this call asks for, remembering as `memory`.
    pub(super) fn turn(
        self,
        face: &Face,
        memory: Memory,
        context: &RequestContext<RoleServer>,
    ) -> TurnRequest {
        TurnRequest::mcp(face.name(), self.message, memory, caller::origin(context))
            .asking(Ok(self.sampling), self.controls)
    }
}

/// A legacy call: the conversation by `instance_scope` and session, the answer when the turn
/// ends (a question as text).
pub(super) async fn legacy(
    face: &Face,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let prepared = match Prepared::read(face, arguments) {
        Ok(prepared) => prepared,
        Err(refused) => return refused,
    };
    let turn = prepared.turn(face, caller::memory(face, context), context);
    match run_turn(face, turn, context).await {
        Ok(task) => answer(&task),
        Err(e) => refusal(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_text(result: &CallToolResult) -> String {
        result.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .expect("a text block")
    }

    #[test]
    fn a_message_needs_text_or_images_each_an_image_in_base64() {
        let args = |value: Value| -> SendArgs { serde_json::from_value(value).expect("args") };
        let empty = args(serde_json::json!({"message": "  "}));
        assert_eq!(user_message(&empty).unwrap_err(), BadMessage::Empty);
        let pdf = args(serde_json::json!({"message": "look",
            "images": [{"data": "aGk=", "mime_type": "image/png"},
                       {"data": "aGk=", "mime_type": "application/pdf"}]}));
        assert_eq!(
            user_message(&pdf).unwrap_err(),
            BadMessage::NotAnImage {
                index: 1,
                mime_type: "application/pdf".to_owned()
            }
        );
        let garbled = args(serde_json::json!({"message": "",
            "images": [{"data": "not base64!", "mime_type": "image/png"}]}));
        assert_eq!(
            user_message(&garbled).unwrap_err(),
            BadMessage::NotBase64(0)
        );
        let fine = args(serde_json::json!({"message": "",
            "images": [{"data": "aGk=", "mime_type": "image/png"}]}));
        let message = user_message(&fine).expect("an image alone is a message");
        assert_eq!(message.parts.len(), 2);
        assert_eq!(message.parts[1].media_type.as_deref(), Some("image/png"));
    }

    #[test]
    fn a_turn_refused_while_starting_does_not_say_the_runtime_is_stopping() {
        let starting = refusal(&TurnError::NotReady);
        let stopping = refusal(&TurnError::ShuttingDown);
        assert_eq!(starting.is_error, Some(true));
        assert!(first_text(&starting).contains("still starting"));
        assert!(first_text(&stopping).contains("shutting down"));
    }

    #[test]
    fn a_turn_handed_off_at_shutdown_names_the_task_to_poll() {
        let handed_off = refusal(&TurnError::HandedOff("task-7".into()));
        assert_eq!(handed_off.is_error, Some(true));
        let text = first_text(&handed_off);
        assert!(
            text.contains("task task-7") && text.contains("tasks/get"),
            "{text}"
        );
    }

    #[test]
    fn a_spent_budget_names_its_limit_and_when_to_retry() {
        let refused = refusal(&TurnError::OverBudget(
            crate::services::turns::BudgetRefusal {
                scope: crate::services::turns::ScopeKind::Principal,
                name: "ci-bot".to_owned(),
                limit: crate::services::turns::LimitKind::TurnsPerMinute,
                value: 10,
                retry_after: Some(std::time::Duration::from_secs(31)),
                rate_limits: Vec::new(),
            },
        ));
        assert_eq!(refused.is_error, Some(true));
        let text = first_text(&refused);
        assert!(
            text.contains("turns_per_minute") && text.contains("retry in 31 s"),
            "{text}"
        );
    }

    #[test]
    fn files_and_data_follow_the_text_as_mcp_content() {
        let mut file = Part::from_content(PartContent::Raw("dGNr".into()));
        file.media_type = Some("text/plain".into());
        file.filename = Some("out.txt".into());
        let mut link = Part::from_content(PartContent::Url("https://example.com/a.csv".into()));
        link.filename = Some("a.csv".into());
        let data = Part::from_content(PartContent::Data(serde_json::json!({"n": 1})));
        let task = Task {
            id: "t".into(),
            context_id: None,
            status: daedalus_contract::TaskStatus::new(TaskState::Completed),
            artifacts: vec![daedalus_contract::Artifact::new(
                "a",
                vec![Part::text("here"), file, link, data],
            )],
            history: None,
            metadata: None,
        };
        let result = answer(&task);
        assert_eq!(first_text(&result), "here");
        let json = serde_json::to_value(&result.content).unwrap();
        assert_eq!(json[1]["type"], "resource");
        assert_eq!(json[1]["resource"]["blob"], "dGNr");
        assert_eq!(json[1]["resource"]["uri"], "file:///out.txt");
        assert_eq!(json[2]["type"], "resource_link");
        assert_eq!(json[2]["uri"], "https://example.com/a.csv");
        assert_eq!(json[3]["text"], "{\"n\":1}");
        // A text-only answer stays one text block, as Daedalus reads it.
        let mut plain = task.clone();
        plain.artifacts[0].parts.truncate(1);
        assert_eq!(answer(&plain).content.len(), 1);
    }
}
