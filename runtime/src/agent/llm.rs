//! An agent backed by an LLM provider: the system prompt, the task's earlier messages and the
//! new user turn go to the model, whose text becomes the task's artifact. (Tools, sub-agents
//! and sessions come with the agent loop.)

use std::sync::Arc;

use async_trait::async_trait;
use daedalus_schemas::{Artifact, Message, Part, PartContent, Role};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentOutcome, AgentRequest};
use crate::llm::sampling::{self, DropWarnings, Target};
use crate::llm::{ChatMessage, ChatRequest, Content, LlmEvent, LlmProvider};

/// An agent whose answers come from a model.
#[derive(Debug)]
pub struct LlmAgent {
    pub name: String,
    pub provider: Arc<dyn LlmProvider>,
    pub model: String,
    pub instruction: String,
    /// The agent's `request_params`.
    pub defaults: Map<String, Value>,
    pub target: Target,
    /// `model_capabilities.vision`.
    pub vision: bool,
    /// `model_capabilities.max_output_tokens`, the default `max_tokens`.
    pub max_output_tokens: u32,
    pub stream: bool,
    pub warnings: Arc<DropWarnings>,
}

/// Why a message cannot go to the model.
fn refuse(reason: String) -> AgentOutcome {
    AgentOutcome::Failed { reason }
}

impl LlmAgent {
    /// The model's view of a contract message; `Err` says why it cannot have one.
    fn content(&self, message: &Message) -> Result<Vec<Content>, String> {
        let mut out = Vec::with_capacity(message.parts.len());
        for part in &message.parts {
            let media = part.media_type.as_deref().unwrap_or("");
            let is_image = media.starts_with("image/");
            match &part.content {
                PartContent::Text(t) => out.push(Content::Text { text: t.clone() }),
                PartContent::Data(v) => out.push(Content::Text {
                    text: v.to_string(),
                }),
                PartContent::Raw(_) | PartContent::Url(_) if is_image && !self.vision => {
                    return Err(format!(
                        "the model {} is text-only and cannot read the attached {media} image; \
                         use a vision model (model_capabilities.vision: true)",
                        self.model
                    ));
                }
                PartContent::Raw(data) if is_image => {
                    out.push(Content::Image {
                        media_type: media.to_owned(),
                        data: data.clone(),
                    });
                }
                PartContent::Url(url) if is_image => {
                    out.push(Content::ImageUrl { url: url.clone() });
                }
                PartContent::Raw(_) => {
                    return Err(format!(
                        "attachments of type {:?} are not supported",
                        if media.is_empty() { "unknown" } else { media }
                    ));
                }
                PartContent::Url(url) => out.push(Content::Text {
                    text: format!("(attached: {url})"),
                }),
            }
        }
        Ok(out)
    }

    fn request(&self, request: &AgentRequest) -> Result<ChatRequest, String> {
        let mut messages = Vec::with_capacity(request.history.len() + 1);
        for earlier in request
            .history
            .iter()
            .chain(std::iter::once(&request.message))
        {
            messages.push(match earlier.role {
                Role::User => ChatMessage::User {
                    content: self.content(earlier)?,
                },
                Role::Agent => ChatMessage::Assistant {
                    text: Some(earlier.text()),
                    tool_calls: Vec::new(),
                },
            });
        }
        let call = request
            .metadata
            .as_ref()
            .and_then(|m| m.get("request_params"))
            .and_then(Value::as_object);
        let merged = sampling::merge(&self.defaults, call);
        let (mut params, dropped) = sampling::for_target(&merged, &self.target);
        self.warnings
            .warn(&self.name, self.provider.name(), &dropped);
        if matches!(self.target, Target::Anthropic { .. }) {
            params
                .entry("max_tokens")
                .or_insert_with(|| Value::from(self.max_output_tokens));
        }
        Ok(ChatRequest {
            model: self.model.clone(),
            system: Some(self.instruction.clone()).filter(|s| !s.is_empty()),
            messages,
            tools: Vec::new(),
            params,
            stream: self.stream,
        })
    }
}

#[async_trait]
impl Agent for LlmAgent {
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        let chat = match self.request(&request) {
            Ok(chat) => chat,
            Err(reason) => return refuse(reason),
        };
        let events = |e: LlmEvent| {
            if let LlmEvent::Retrying {
                attempt,
                delay,
                reason,
            } = e
            {
                tracing::info!(agent = %self.name, attempt, ?delay, %reason, "retrying the model");
            }
        };
        let answer = tokio::select! {
            answer = self.provider.chat(&chat, &events) => answer,
            () = cancel.cancelled() => return AgentOutcome::Canceled,
        };
        match answer {
            Err(e) => refuse(format!("the model call failed: {e}")),
            Ok(response) => {
                tracing::info!(
                    agent = %self.name,
                    input_tokens = response.usage.input_tokens,
                    output_tokens = response.usage.output_tokens,
                    "LLM turn finished"
                );
                match response.text {
                    Some(text) => AgentOutcome::Completed {
                        artifacts: vec![Artifact {
                            artifact_id: uuid::Uuid::new_v4().to_string(),
                            name: Some("response".to_owned()),
                            description: None,
                            parts: vec![Part::text(text)],
                            extensions: None,
                            metadata: None,
                        }],
                    },
                    None => refuse(format!(
                        "the model {} answered without any text",
                        self.model
                    )),
                }
            }
        }
    }
}
