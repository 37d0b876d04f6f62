//! The OpenAI-compatible chat completions client (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM —
//! anything at a `base_url` that speaks `POST /chat/completions`): text and image messages,
//! tools and `tool_choice`, streaming with tool-call deltas reassembled, usage, extra headers,
//! timeouts, and retries that honour `Retry-After`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

use super::endpoint::{Answer, Endpoint, Step};
use super::retry::RetryPolicy;
use super::{
    ChatMessage, ChatRequest, ChatResponse, Content, LlmError, LlmEvent, LlmProvider, StopReason,
    ToolCall, Usage,
};
use crate::config::deployment::{OpenAiDialect, ProviderSettings};
use crate::config::sampling::{Effort, Sampling, ToolChoice};

/// `gen_ai.provider.name`.
pub const PROVIDER: &str = "openai";
/// Where requests go when no `base_url` is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A chat completions client.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    endpoint: Endpoint,
    retry: RetryPolicy,
    dialect: OpenAiDialect,
}

impl OpenAiClient {
    /// A client for `settings` (key, base URL, extra headers, timeout in seconds).
    pub fn new(settings: &ProviderSettings, retry: RetryPolicy) -> Result<Self, LlmError> {
        let base = settings
            .base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let credentials: Vec<(&'static str, String)> = settings
            .api_key
            .iter()
            .map(|key| ("authorization", format!("Bearer {key}")))
            .collect();
        let url = format!("{base}/chat/completions");
        let endpoint = Endpoint::new(
            PROVIDER,
            url,
            settings,
            &credentials,
            ("authorization", "Bearer "),
        )?;
        let dialect = settings.openai_dialect();
        Ok(Self {
            endpoint,
            retry,
            dialect,
        })
    }
}

#[async_trait]
impl LlmProvider for OpenAiClient {
    fn name(&self) -> &'static str {
        PROVIDER
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        let body = to_wire(request, self.dialect);
        self.endpoint
            .chat::<StreamAssembler>(&self.retry, body, request, events)
            .await
    }
}

fn decode(message: String) -> LlmError {
    LlmError::Decode {
        provider: PROVIDER,
        message,
    }
}

// ---- request ---------------------------------------------------------------------------

#[derive(Serialize)]
struct MessageWire {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCallWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct ToolCallWire {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    function: FunctionWire,
}

#[derive(Serialize, Deserialize)]
struct FunctionWire {
    name: String,
    arguments: String,
}

/// The request body: messages and tools in OpenAI's shapes, sampling parameters at the top
/// (the output budget as `dialect` spells it).
pub fn to_wire(request: &ChatRequest, dialect: OpenAiDialect) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(MessageWire {
            role: "system",
            content: Some(Value::String(system.clone())),
            tool_calls: Vec::new(),
            tool_call_id: None,
        });
    }
    for message in &request.messages {
        messages.push(match message {
            ChatMessage::User { content } => MessageWire {
                role: "user",
                content: Some(user_content(content)),
                tool_calls: Vec::new(),
                tool_call_id: None,
            },
            ChatMessage::Assistant { text, tool_calls } => MessageWire {
                role: "assistant",
                content: text.clone().map(Value::String),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| ToolCallWire {
                        id: c.id.clone(),
                        kind: "function".to_owned(),
                        function: FunctionWire {
                            name: c.name.clone(),
                            arguments: c.arguments.to_string(),
                        },
                    })
                    .collect(),
                tool_call_id: None,
            },
            ChatMessage::Tool {
                call_id, content, ..
            } => MessageWire {
                role: "tool",
                content: Some(Value::String(content.clone())),
                tool_calls: Vec::new(),
                tool_call_id: Some(call_id.clone()),
            },
        });
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert(
        "messages".into(),
        serde_json::to_value(messages).expect("messages serialize"),
    );
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| serde_json::json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let sampling = SamplingWire::of(&request.sampling, dialect);
    if let Ok(Value::Object(sampling)) = serde_json::to_value(sampling) {
        body.extend(sampling);
    }
    if request.stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    Value::Object(body)
}

/// The sampling keys of a chat completions request.
#[derive(Serialize)]
struct SamplingWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    /// Not OpenAI's own API (the support matrix drops it there); vLLM, llama.cpp and others.
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u64>,
    /// A compatible server's output budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    /// OpenAI's own API's (its reasoning models refuse `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a serde_json::Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceWire<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
}

/// `tool_choice`: a mode, or `{"type": "function", "function": {"name"}}`.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolChoiceWire<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: FunctionNameWire<'a>,
    },
}

#[derive(Serialize)]
struct FunctionNameWire<'a> {
    name: &'a str,
}

impl<'a> SamplingWire<'a> {
    fn of(s: &'a Sampling, dialect: OpenAiDialect) -> Self {
        let (max_tokens, max_completion_tokens) = match dialect {
            OpenAiDialect::Openai => (None, s.max_tokens),
            OpenAiDialect::Compatible => (s.max_tokens, None),
        };
        SamplingWire {
            temperature: s.temperature,
            top_p: s.top_p,
            top_k: s.top_k,
            max_tokens,
            max_completion_tokens,
            stop: &s.stop,
            seed: s.seed,
            presence_penalty: s.presence_penalty,
            frequency_penalty: s.frequency_penalty,
            response_format: s.response_format.as_ref(),
            tool_choice: s.tool_choice.as_ref().map(|choice| match choice {
                ToolChoice::Auto => ToolChoiceWire::Mode("auto"),
                ToolChoice::None => ToolChoiceWire::Mode("none"),
                ToolChoice::Required => ToolChoiceWire::Mode("required"),
                ToolChoice::Tool(name) => ToolChoiceWire::Function {
                    kind: "function",
                    function: FunctionNameWire { name },
                },
            }),
            reasoning_effort: s.effort.map(reasoning_effort),
        }
    }
}

/// OpenAI's `reasoning_effort` for `effort` (its scale ends at `high`).
fn reasoning_effort(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High | Effort::Xhigh | Effort::Max => "high",
    }
}

/// Plain text stays a string; anything with images becomes content parts.
fn user_content(content: &[Content]) -> Value {
    if let [Content::Text { text }] = content {
        return Value::String(text.clone());
    }
    let parts: Vec<Value> = content
        .iter()
        .map(|c| match c {
            Content::Text { text } => serde_json::json!({"type": "text", "text": text}),
            Content::Image { media_type, data } => {
                serde_json::json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}})
            }
            Content::ImageUrl { url } => serde_json::json!({"type": "image_url", "image_url": {"url": url}}),
        })
        .collect();
    Value::Array(parts)
}

// ---- response --------------------------------------------------------------------------

#[derive(Deserialize)]
struct CompletionWire {
    choices: Vec<ChoiceWire>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct ChoiceWire {
    message: AnswerWire,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AnswerWire {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallWire>,
}

#[derive(Deserialize, Default)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetailsWire>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetailsWire>,
}

#[derive(Deserialize, Default)]
struct CompletionDetailsWire {
    #[serde(default)]
    reasoning_tokens: u64,
}

#[derive(Deserialize, Default)]
struct PromptDetailsWire {
    #[serde(default)]
    cached_tokens: u64,
}

impl From<UsageWire> for Usage {
    fn from(u: UsageWire) -> Self {
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cache_read_tokens: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            cache_write_tokens: 0,
            reasoning_tokens: u
                .completion_tokens_details
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

fn stop_reason(finish: Option<&str>) -> StopReason {
    match finish {
        Some("stop") | None => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some(_) => StopReason::Other,
    }
}

fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

fn from_completion(wire: CompletionWire) -> Result<ChatResponse, LlmError> {
    let choice = wire
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| decode("the completion has no choices".into()))?;
    let tool_calls = choice
        .message
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: arguments(&c.function.arguments),
        })
        .collect();
    Ok(ChatResponse {
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls,
        usage: wire.usage.map(Usage::from).unwrap_or_default(),
        stop_reason: stop_reason(choice.finish_reason.as_deref()),
    })
}

#[derive(Deserialize)]
struct ChunkWire {
    #[serde(default)]
    choices: Vec<ChunkChoiceWire>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct ChunkChoiceWire {
    #[serde(default)]
    delta: DeltaWire,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct DeltaWire {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolDeltaWire>,
}

#[derive(Deserialize)]
struct ToolDeltaWire {
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDeltaWire>,
}

#[derive(Deserialize)]
struct FunctionDeltaWire {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Reassembles a streamed completion: text deltas in order, tool calls by index.
#[derive(Default)]
struct StreamAssembler {
    text: String,
    calls: BTreeMap<usize, (String, String, String)>,
    finish: Option<String>,
    usage: Usage,
}

impl Answer for StreamAssembler {
    fn whole(body: &[u8]) -> Result<ChatResponse, LlmError> {
        let wire: CompletionWire =
            serde_json::from_slice(body).map_err(|e| decode(format!("completion: {e}")))?;
        from_completion(wire)
    }

    fn add(&mut self, data: &str) -> Result<Step, LlmError> {
        if data == "[DONE]" {
            return Ok(Step::Stop);
        }
        let chunk: ChunkWire =
            serde_json::from_str(data).map_err(|e| decode(format!("stream chunk: {e}")))?;
        Ok(self.add_chunk(chunk).map_or(Step::Continue, Step::Delta))
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, (id, name, args)) in self.calls {
            if id.is_empty() || name.is_empty() {
                return Err(decode(format!(
                    "streamed tool call {index} has no id or name"
                )));
            }
            tool_calls.push(ToolCall {
                id,
                name,
                arguments: arguments(&args),
            });
        }
        Ok(ChatResponse {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls,
            usage: self.usage,
            stop_reason: stop_reason(self.finish.as_deref()),
        })
    }
}

impl StreamAssembler {
    /// Adds a chunk; returns its text delta, if any.
    fn add_chunk(&mut self, chunk: ChunkWire) -> Option<String> {
        if let Some(usage) = chunk.usage {
            self.usage = usage.into();
        }
        let mut delta_text = None;
        for choice in chunk.choices {
            if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&text);
                delta_text = Some(text);
            }
            for call in choice.delta.tool_calls {
                let entry = self.calls.entry(call.index).or_default();
                if let Some(id) = call.id {
                    entry.0 = id;
                }
                if let Some(f) = call.function {
                    if let Some(name) = f.name {
                        entry.1.push_str(&name);
                    }
                    if let Some(args) = f.arguments {
                        entry.2.push_str(&args);
                    }
                }
            }
            if choice.finish_reason.is_some() {
                self.finish = choice.finish_reason;
            }
        }
        delta_text
    }
}

#[cfg(test)]
mod tests;
