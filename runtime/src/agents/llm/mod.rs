//! Everything that talks to models: one [`LlmProvider`] trait, the OpenAI-compatible chat
//! completions client ([`openai`]), the retry policy shared by the clients ([`retry`]), and the
//! server-sent-events reader they stream with ([`sse`]).
//!
//! The types here are the runtime's own, provider-neutral view of a chat turn; each client
//! translates them to and from its wire format.

pub mod anthropic;
mod endpoint;
pub mod openai;
pub mod preflight;
pub mod retry;
pub mod sse;

pub use crate::stores::conversations::message::{ChatMessage, Content, ToolCall};
use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An HTTP client builder for talking to providers (TLS by rustls).
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
}

/// One LLM turn to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// Sampling settings, already filtered to what the provider supports; each client
    /// spells them on its wire.
    pub sampling: crate::config::sampling::Sampling,
    /// Stream the answer (text deltas are reported as they arrive).
    pub stream: bool,
    /// The caller's bearer: the credential of this call for a provider that opted into
    /// forwarding (`forward_inbound_auth`), ignored by any other. Never printed.
    pub caller: crate::platform::bearer::Bearer,
    /// Provider-specific keys the caller added (`extra`), merged into the request body; a key
    /// the runtime sets itself is refused, never overwritten.
    pub extra: serde_json::Map<String, Value>,
}

impl ChatRequest {
    /// A request of one user `text` to `model`: no system prompt, tools, sampling, extra keys
    /// or caller, not streamed.
    pub fn saying(model: &str, text: &str) -> Self {
        ChatRequest {
            model: model.to_owned(),
            system: None,
            messages: vec![ChatMessage::User {
                content: vec![Content::Text {
                    text: text.to_owned(),
                }],
            }],
            tools: Vec::new(),
            sampling: crate::config::sampling::Sampling::default(),
            stream: false,
            caller: crate::platform::bearer::Bearer::default(),
            extra: serde_json::Map::new(),
        }
    }
}

/// Merges `extra` into the provider request `body`; a key `body` already has is refused.
pub(crate) fn merge_extra(
    provider: &'static str,
    body: &mut Value,
    extra: &serde_json::Map<String, Value>,
) -> Result<(), LlmError> {
    let Some(object) = body.as_object_mut() else {
        return Ok(());
    };
    if let Some(taken) = extra.keys().find(|k| object.contains_key(k.as_str())) {
        return Err(LlmError::Decode {
            provider,
            message: format!("extra.{taken} would overwrite a key the runtime sets; it is refused"),
        });
    }
    object.extend(extra.clone());
    Ok(())
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object.
    pub input_schema: Value,
}

/// Tokens a turn used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Of the output, the tokens spent reasoning (OpenAI `reasoning_tokens`; Anthropic
    /// thinking, estimated from its text, since the API counts it in `output_tokens` only).
    pub reasoning_tokens: u64,
}

impl From<&Usage> for crate::platform::metrics::Tokens {
    fn from(usage: &Usage) -> Self {
        Self {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cache_read: usage.cache_read_tokens,
            cache_write: usage.cache_write_tokens,
            reasoning: usage.reasoning_tokens,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Other,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub stop_reason: StopReason,
}

/// Something that happened during a turn, reported as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmEvent {
    /// A piece of streamed text.
    TextDelta(String),
    /// A request failed and will be retried after `delay`.
    Retrying {
        attempt: u32,
        delay: std::time::Duration,
        reason: String,
    },
}

/// Why a turn failed. Messages name the provider and never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{provider}: {status} {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("{provider}: cannot reach {url}: {message}")]
    Transport {
        provider: &'static str,
        url: String,
        message: String,
    },
    #[error("{provider}: no answer within {timeout:?}")]
    Timeout {
        provider: &'static str,
        timeout: std::time::Duration,
    },
    #[error("{provider}: unexpected answer: {message}")]
    Decode {
        provider: &'static str,
        message: String,
    },
    #[error("{provider}: gave up after {attempts} attempts: {last}")]
    Exhausted {
        provider: &'static str,
        attempts: u32,
        last: Box<LlmError>,
    },
}

impl LlmError {
    /// Whether a retry may succeed: throttling, server errors, timeouts and transport failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            LlmError::Transport { .. } | LlmError::Timeout { .. } => true,
            LlmError::Decode { .. } | LlmError::Exhausted { .. } => false,
        }
    }
}

/// A model provider.
#[async_trait]
pub trait LlmProvider: Send + Sync + fmt::Debug + 'static {
    /// The provider's name in messages and metrics (`openai`, `anthropic`).
    fn name(&self) -> &'static str;

    /// The tokens a call's `usage` counts against a budget: input and output, cached input
    /// included (in full, however the provider prices it). Anthropic reports cached input
    /// beside `input_tokens`; OpenAI counts it in them.
    fn billed_tokens(&self, usage: &Usage) -> u64 {
        usage.input_tokens.saturating_add(usage.output_tokens)
    }

    /// Runs one turn, reporting [`LlmEvent`]s through `events`.
    async fn chat(
        &self,
        request: &ChatRequest,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, LlmError>;
}
