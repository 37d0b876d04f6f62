//! The Anthropic Messages client: system blocks, `tool_use`/`tool_result` blocks translated both
//! ways (consecutive tool results become one user turn, as the API requires), images,
//! streaming, prompt-cache breakpoints (`cache_control`) on the tools, the system prompt and the
//! newest message, usage with cache read/write tokens, and the same retry rules as OpenAI.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::endpoint::{Answer, Endpoint, Step};
use super::retry::RetryPolicy;
use super::{
    ChatMessage, ChatRequest, ChatResponse, Content, LlmError, LlmEvent, LlmProvider, StopReason,
    ToolCall, Usage,
};
use crate::config::deployment::ProviderSettings;
use crate::config::sampling::{Effort, Sampling, ToolChoice};

/// `gen_ai.provider.name`.
pub const PROVIDER: &str = "anthropic";
/// Where requests go when no `base_url` is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version this client speaks.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; used when the caller sets none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A Messages API client.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    endpoint: Endpoint,
    retry: RetryPolicy,
}

fn decode(message: String) -> LlmError {
    LlmError::Decode {
        provider: PROVIDER,
        message,
    }
}

impl AnthropicClient {
    pub fn new(settings: &ProviderSettings, retry: RetryPolicy) -> Result<Self, LlmError> {
        let base = settings
            .base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut credentials: Vec<(&'static str, String)> =
            vec![("anthropic-version", API_VERSION.to_owned())];
        credentials.extend(
            settings
                .api_key
                .iter()
                .map(|key| ("x-api-key", key.clone())),
        );
        let url = format!("{}/v1/messages", base.trim_end_matches("/v1"));
        let endpoint = Endpoint::new(PROVIDER, url, settings, &credentials, ("x-api-key", ""))?;
        Ok(Self { endpoint, retry })
    }
}

#[async_trait]
impl LlmProvider for AnthropicClient {
    fn billed_tokens(&self, usage: &crate::agents::llm::Usage) -> u64 {
        usage
            .input_tokens
            .saturating_add(usage.cache_read_tokens)
            .saturating_add(usage.cache_write_tokens)
            .saturating_add(usage.output_tokens)
    }

    fn name(&self) -> &'static str {
        PROVIDER
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        self.endpoint
            .chat::<StreamAssembler>(&self.retry, to_wire(request), request, events)
            .await
    }
}

// ---- request ---------------------------------------------------------------------------

fn content_block(c: &Content) -> Value {
    match c {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { media_type, data } => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        Content::ImageUrl { url } => {
            json!({"type": "image", "source": {"type": "url", "url": url}})
        }
    }
}

/// Puts a prompt-cache breakpoint on `block`: everything up to it (tools, then system, then
/// messages) is cached for the next request that starts the same way. Three are set (of the
/// four the API allows): after the tools, after the system prompt, and after the newest
/// message, so the tools and instruction are read from the cache on every call and the
/// conversation so far on the next turn.
fn mark_cached(block: &mut Value) {
    if let Some(object) = block.as_object_mut() {
        object.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The request body. Our tool messages become `tool_result` blocks in a user turn, and turns of
/// the same role are merged, so the conversation alternates as the API requires.
pub fn to_wire(request: &ChatRequest) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks): (&'static str, Vec<Value>) = match message {
            ChatMessage::User { content } => ("user", content.iter().map(content_block).collect()),
            ChatMessage::Assistant { text, tool_calls } => {
                let mut blocks: Vec<Value> = text
                    .iter()
                    .filter(|t| !t.is_empty())
                    .map(|t| json!({"type": "text", "text": t}))
                    .collect();
                blocks.extend(tool_calls.iter().map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})));
                ("assistant", blocks)
            }
            ChatMessage::Tool {
                call_id,
                content,
                is_error,
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
                ],
            ),
        };
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    // Prompt caching: the conversation so far is read from the cache on the next request.
    if let Some((_, last)) = turns.last_mut()
        && let Some(block) = last.last_mut()
    {
        mark_cached(block);
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(system) = &request.system {
        let mut block = json!({"type": "text", "text": system});
        mark_cached(&mut block);
        body.insert("system".into(), Value::Array(vec![block]));
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})).collect();
        if let Some(last) = tools.last_mut() {
            mark_cached(last);
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Ok(Value::Object(sampling)) = serde_json::to_value(SamplingWire::of(&request.sampling)) {
        body.extend(sampling);
    }
    if request.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    Value::Object(body)
}

/// The sampling keys of a Messages request (the API has no seed, penalties or response
/// format; the support matrix drops them before this).
#[derive(Serialize)]
struct SamplingWire<'a> {
    /// Required by the API.
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceWire<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfigWire>,
}

/// `tool_choice`, by `type`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ToolChoiceWire<'a> {
    Auto,
    None,
    Any,
    Tool { name: &'a str },
}

#[derive(Serialize)]
struct OutputConfigWire {
    effort: Effort,
}

impl<'a> SamplingWire<'a> {
    fn of(s: &'a Sampling) -> Self {
        SamplingWire {
            max_tokens: s.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            temperature: s.temperature,
            top_p: s.top_p,
            top_k: s.top_k,
            stop_sequences: &s.stop,
            tool_choice: s.tool_choice.as_ref().map(|choice| match choice {
                ToolChoice::Auto => ToolChoiceWire::Auto,
                ToolChoice::None => ToolChoiceWire::None,
                ToolChoice::Required => ToolChoiceWire::Any,
                ToolChoice::Tool(name) => ToolChoiceWire::Tool { name },
            }),
            output_config: s.effort.map(|effort| OutputConfigWire { effort }),
        }
    }
}

// ---- response --------------------------------------------------------------------------

#[derive(Deserialize)]
struct MessageWire {
    content: Vec<BlockWire>,
    stop_reason: Option<String>,
    #[serde(default)]
    usage: UsageWire,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockWire {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Extended thinking (when the request asks for it).
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    #[serde(other)]
    Other,
}

/// Tokens of thinking text, estimated (4 characters a token): the API counts thinking in
/// `output_tokens` only.
fn thinking_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

#[derive(Deserialize, Default, Clone, Copy)]
struct UsageWire {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl UsageWire {
    fn apply(self, usage: &mut Usage) {
        if let Some(v) = self.input_tokens {
            usage.input_tokens = v;
        }
        if let Some(v) = self.output_tokens {
            usage.output_tokens = v;
        }
        if let Some(v) = self.cache_creation_input_tokens {
            usage.cache_write_tokens = v;
        }
        if let Some(v) = self.cache_read_input_tokens {
            usage.cache_read_tokens = v;
        }
    }
}

fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") | None => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some(_) => StopReason::Other,
    }
}

fn from_message(wire: MessageWire) -> ChatResponse {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thought = 0;
    for block in wire.content {
        match block {
            BlockWire::Text { text: t } => text.push_str(&t),
            BlockWire::Thinking { thinking } => thought += thinking.chars().count(),
            BlockWire::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input,
            }),
            BlockWire::Other => {}
        }
    }
    let mut usage = Usage::default();
    wire.usage.apply(&mut usage);
    usage.reasoning_tokens = thinking_tokens(thought);
    ChatResponse {
        text: Some(text).filter(|t| !t.is_empty()),
        tool_calls,
        usage,
        stop_reason: stop_reason(wire.stop_reason.as_deref()),
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEventWire {
    MessageStart {
        message: StartWire,
    },
    ContentBlockStart {
        index: usize,
        content_block: BlockWire,
    },
    ContentBlockDelta {
        index: usize,
        delta: DeltaWire,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaWire,
        #[serde(default)]
        usage: UsageWire,
    },
    MessageStop {},
    Ping {},
    Error {
        error: ErrorDetailWire,
    },
}

#[derive(Deserialize)]
struct StartWire {
    #[serde(default)]
    usage: UsageWire,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum DeltaWire {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaWire {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorDetailWire {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

/// A content block being streamed.
enum Building {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

/// Reassembles a streamed message.
#[derive(Default)]
struct StreamAssembler {
    text: String,
    blocks: std::collections::BTreeMap<usize, Building>,
    usage: Usage,
    stop: Option<String>,
    /// Characters of thinking streamed.
    thought: usize,
}

impl Answer for StreamAssembler {
    fn whole(body: &[u8]) -> Result<ChatResponse, LlmError> {
        let wire: MessageWire =
            serde_json::from_slice(body).map_err(|e| decode(format!("message: {e}")))?;
        Ok(from_message(wire))
    }

    fn add(&mut self, data: &str) -> Result<Step, LlmError> {
        let event: StreamEventWire =
            serde_json::from_str(data).map_err(|e| decode(format!("stream event: {e}")))?;
        self.add_event(event)
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        let mut tool_calls = Vec::new();
        for building in self.blocks.into_values() {
            if let Building::Tool { id, name, json } = building {
                let arguments = if json.trim().is_empty() {
                    Value::Object(serde_json::Map::new())
                } else {
                    serde_json::from_str(&json)
                        .map_err(|e| decode(format!("tool input of {name}: {e}")))?
                };
                tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
        }
        Ok(ChatResponse {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls,
            usage: Usage {
                reasoning_tokens: thinking_tokens(self.thought),
                ..self.usage
            },
            stop_reason: stop_reason(self.stop.as_deref()),
        })
    }
}

impl StreamAssembler {
    fn add_event(&mut self, event: StreamEventWire) -> Result<Step, LlmError> {
        match event {
            StreamEventWire::MessageStart { message } => message.usage.apply(&mut self.usage),
            StreamEventWire::ContentBlockStart {
                index,
                content_block,
            } => {
                let building = match content_block {
                    BlockWire::ToolUse { id, name, .. } => Building::Tool {
                        id,
                        name,
                        json: String::new(),
                    },
                    BlockWire::Text { text } => {
                        self.text.push_str(&text);
                        Building::Text
                    }
                    BlockWire::Thinking { thinking } => {
                        self.thought += thinking.chars().count();
                        Building::Text
                    }
                    BlockWire::Other => Building::Text,
                };
                self.blocks.insert(index, building);
            }
            StreamEventWire::ContentBlockDelta { index, delta } => {
                match (self.blocks.get_mut(&index), delta) {
                    (Some(Building::Text), DeltaWire::TextDelta { text }) => {
                        self.text.push_str(&text);
                        return Ok(Step::Delta(text));
                    }
                    (
                        Some(Building::Tool { json, .. }),
                        DeltaWire::InputJsonDelta { partial_json },
                    ) => json.push_str(&partial_json),
                    (Some(_), DeltaWire::ThinkingDelta { thinking }) => {
                        self.thought += thinking.chars().count();
                    }
                    (None, _) => {
                        return Err(decode(format!("a delta for unknown content block {index}")));
                    }
                    _ => {}
                }
            }
            StreamEventWire::MessageDelta { delta, usage } => {
                self.stop = delta.stop_reason;
                usage.apply(&mut self.usage);
            }
            StreamEventWire::MessageStop {} => return Ok(Step::Stop),
            StreamEventWire::Error { error } => {
                let status = if error.kind == "overloaded_error" {
                    529
                } else {
                    500
                };
                return Err(LlmError::Http {
                    provider: PROVIDER,
                    status,
                    message: format!("{}: {}", error.kind, error.message),
                });
            }
            StreamEventWire::ContentBlockStop {} | StreamEventWire::Ping {} => {}
        }
        Ok(Step::Continue)
    }
}

#[cfg(test)]
mod tests;
