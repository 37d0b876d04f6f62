//! An agent backed by an LLM: the tool loop. System prompt + history + the new user turn go to
//! the model; its tool calls run concurrently (each under a timeout); their results go back;
//! repeat until the model answers in text or `max_iterations` is reached. The model may also
//! end a turn by calling the built-in `request_user_input` tool, which makes the task
//! `input-required`. Cancellation is honoured between steps and while waiting.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Artifact, Message, Part};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::compaction::Budget;
use super::events::LoopEvent;
use super::tools::{CallContext, ToolSource};
use super::transcript::Transcript;
use super::{Agent, AgentOutcome, AgentRequest};
use crate::config::deployment::CompactionPolicy;
use crate::llm::{ChatMessage, LlmEvent, LlmProvider};
use crate::sampling::{DropWarnings, SamplingParams, Target};
use crate::sessions::SessionStore;

mod conversation;
mod tool_calls;
mod turn_setup;

/// The built-in tool that turns a task `input-required`.
pub const ASK_USER_TOOL: &str = "request_user_input";

/// An agent whose answers come from a model, working through tools.
#[derive(Debug)]
pub struct LlmAgent {
    pub name: String,
    pub provider: Arc<dyn LlmProvider>,
    pub model: String,
    pub instruction: String,
    /// The agent's `request_params`.
    pub defaults: SamplingParams,
    pub target: Target,
    /// `model_capabilities.vision`.
    pub vision: bool,
    /// `model_capabilities.max_output_tokens`: caps `max_tokens`, and is Anthropic's default.
    pub max_output_tokens: u32,
    /// `model_capabilities.context_window`: the conversation is compacted to stay inside it.
    pub context_window: u32,
    /// How the conversation is compacted when it outgrows the window.
    pub compaction: CompactionPolicy,
    pub warnings: Arc<DropWarnings>,
    /// The agent's tools (downstream MCP servers and sub-agents).
    pub tools: Arc<dyn ToolSource>,
    /// LLM turns allowed in one task.
    pub max_iterations: u32,
    /// Longest a tool call may take.
    pub tool_timeout: Duration,
    /// Where conversations persist (per context); without one, the task's history is used.
    pub sessions: Option<Arc<dyn SessionStore>>,
    /// Prompt overlays a call picks with `personality`.
    pub personalities: std::collections::BTreeMap<String, crate::config::deployment::Personality>,
    /// The personality of a call that names none.
    pub default_personality: Option<String>,
}

fn fail(reason: String) -> AgentOutcome {
    AgentOutcome::Failed { reason }
}

impl LlmAgent {
    /// The span of one model call, with the OpenTelemetry GenAI attributes known before it.
    fn chat_span(&self) -> tracing::Span {
        let span = tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {}", self.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.provider.name(),
            gen_ai.request.model = %self.model,
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        crate::telemetry::record_ids(&span);
        span.record("gen_ai.response.model", self.model.as_str());
        span
    }

    async fn work(
        &self,
        request: &AgentRequest,
        cancel: &CancellationToken,
        transcript: &mut Transcript,
    ) -> AgentOutcome {
        let setup = match self.setup(request) {
            Ok(setup) => setup,
            Err(reason) => return fail(reason),
        };
        let (tools, allowed) = match self.offered_tools(request).await {
            Ok(offered) => offered,
            Err(reason) => return fail(reason),
        };
        let new = match self.content(&request.message) {
            Ok(content) => ChatMessage::User { content },
            Err(reason) => return fail(reason),
        };
        let mut conversation = match self.earlier(request, transcript).await {
            Ok(conversation) => conversation,
            Err(reason) => return fail(reason),
        };
        let budget = Budget {
            fixed: Self::fixed_tokens(&setup.instruction, &tools),
            new: super::window::message_tokens(&new),
            room: u64::from(self.context_window).saturating_sub(u64::from(self.max_output_tokens)),
        };
        self.fit_conversation(request, &mut conversation, budget, transcript, cancel)
            .await;
        let mut chat = self.first_request(request, &setup, conversation, new, tools);
        transcript
            .user(request.message.text(), &request.message.message_id)
            .await;
        let context = CallContext {
            bearer: request.bearer.clone(),
            cancel: cancel.clone(),
            events: request.events.clone(),
            depth: request.depth,
            allowed,
        };
        let events = &request.events;
        let (agent, depth) = (self.name.clone(), request.depth);
        let on_llm = |e: LlmEvent| match e {
            LlmEvent::TextDelta(text) => events.emit(LoopEvent::TextDelta {
                agent: agent.clone(),
                depth,
                text,
            }),
            LlmEvent::Retrying {
                attempt,
                delay,
                reason,
            } => {
                tracing::info!(agent = %agent, attempt, ?delay, %reason, "retrying the model");
                events.emit(LoopEvent::LlmRetrying {
                    agent: agent.clone(),
                    depth,
                    attempt,
                });
            }
        };
        for step in 1..=self.max_iterations {
            if cancel.is_cancelled() {
                return AgentOutcome::Canceled;
            }
            events.emit(LoopEvent::LlmTurnStarted {
                agent: self.name.clone(),
                depth,
                step,
            });
            let span = self.chat_span();
            let answer = tokio::select! {
                answer = tracing::Instrument::instrument(self.provider.chat(&chat, &on_llm), span.clone()) => answer,
                () = cancel.cancelled() => return AgentOutcome::Canceled,
            };
            let response = match answer {
                Ok(r) => r,
                Err(e) => {
                    span.record("error.type", tracing::field::display(&e));
                    return fail(format!("the model call failed: {e}"));
                }
            };
            record_response(&span, &response);
            events.emit(LoopEvent::LlmTurnFinished {
                agent: self.name.clone(),
                depth,
                step,
                model: self.model.clone(),
                usage: response.usage,
                tool_calls: response.tool_calls.len(),
            });
            if response.tool_calls.is_empty() {
                return match response.text {
                    Some(text) => {
                        transcript.assistant(Some(text.clone()), Vec::new()).await;
                        completed(text)
                    }
                    None => fail(format!(
                        "the model {} answered without any text",
                        self.model
                    )),
                };
            }
            if let Some(ask) = response.tool_calls.iter().find(|c| c.name == ASK_USER_TOOL) {
                let question = ask
                    .arguments
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or("More input is needed.");
                transcript
                    .assistant(Some(question.to_owned()), Vec::new())
                    .await;
                return AgentOutcome::InputRequired {
                    question: vec![Part::text(question)],
                };
            }
            let calls = response.tool_calls.clone();
            transcript
                .assistant(response.text.clone(), calls.clone())
                .await;
            chat.messages.push(ChatMessage::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
            });
            let results = tokio::select! {
                results = futures::future::join_all(
                    calls.iter().map(|c| self.call_tool(c, step, &context)),
                ) => results,
                // Dropping the calls abandons them; rmcp tells each MCP server
                // (`notifications/cancelled`), and a sub-agent's token is a child of `cancel`.
                () = cancel.cancelled() => return AgentOutcome::Canceled,
            };
            transcript
                .tool_results(
                    calls
                        .iter()
                        .zip(&results)
                        .map(|(c, r)| (c.id.clone(), r.content.clone(), r.is_error))
                        .collect(),
                )
                .await;
            for (call, result) in calls.iter().zip(results) {
                chat.messages.push(ChatMessage::Tool {
                    call_id: call.id.clone(),
                    content: result.content,
                    is_error: result.is_error,
                });
            }
        }
        fail(format!(
            "stopped after {} LLM turns without a final answer (max_iterations is {})",
            self.max_iterations, self.max_iterations
        ))
    }
}

fn completed(text: String) -> AgentOutcome {
    AgentOutcome::Completed {
        artifacts: vec![Artifact {
            artifact_id: uuid::Uuid::new_v4().to_string(),
            name: Some("response".to_owned()),
            description: None,
            parts: vec![Part::text(text)],
            extensions: None,
            metadata: None,
        }],
    }
}

#[async_trait]
impl Agent for LlmAgent {
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        let store = self.sessions.clone().filter(|_| request.persist);
        let mut transcript = Transcript::new(store, &request.context_id);
        let outcome = self.work(&request, &cancel, &mut transcript).await;
        let settled = matches!(
            outcome,
            AgentOutcome::Completed { .. }
                | AgentOutcome::Replied { .. }
                | AgentOutcome::InputRequired { .. }
        );
        transcript.settle(settled).await;
        request.events.emit(LoopEvent::Final {
            agent: self.name.clone(),
            depth: request.depth,
            state: outcome.state_name(),
        });
        outcome
    }

    async fn conversation(&self, context_id: &str) -> Option<Vec<Message>> {
        let rows = Transcript::new(self.sessions.clone(), context_id)
            .rows(crate::sessions::MAX_ROWS_READ)
            .await?;
        Some(crate::sessions::as_messages(context_id, &rows))
    }
}

/// Records what the model answered on its call's span.
fn record_response(span: &tracing::Span, response: &crate::llm::ChatResponse) {
    span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        response.usage.cache_read_tokens,
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        response.usage.cache_write_tokens,
    );
    span.record(
        "gen_ai.response.finish_reasons",
        tracing::field::debug(response.stop_reason),
    );
}
