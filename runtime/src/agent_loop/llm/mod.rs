//! An agent backed by an LLM: the tool loop. System prompt + history + the new user turn go to
//! the model; its tool calls run concurrently (each under a timeout); their results go back;
//! repeat until the model answers in text or `max_iterations` is reached. The model may also
//! end a turn by calling the built-in `request_user_input` tool, which makes the task
//! `input-required`. Cancellation is honoured between steps and while waiting.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Artifact, Message, Part, PartContent};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::compaction::Budget;
use super::events::LoopEvent;
use super::tools::{CallContext, ToolSource};
use super::transcript::Transcript;
use super::{Agent, AgentOutcome, AgentRequest};
use crate::config::deployment::CompactionPolicy;
use crate::conversation_store::ConversationStore;
use crate::llm::{ChatMessage, LlmEvent, LlmProvider};
use crate::sampling::{DropWarnings, SamplingParams, Target};

mod conversation;
mod tool_calls;
mod turn_setup;

/// The built-in tool that turns a task `input-required`.
pub const ASK_USER_TOOL: &str = "request_user_input";
/// The built-in tool (offered with `may_decline: true`) that ends a task `rejected`.
pub const DECLINE_TOOL: &str = "decline_request";

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
    pub sessions: Option<Arc<dyn ConversationStore>>,
    /// Prompt overlays a call picks with `personality`.
    pub personalities: std::collections::BTreeMap<String, crate::config::deployment::Personality>,
    /// The personality of a call that names none.
    pub default_personality: Option<String>,
    /// How the agent answers: a Message or a Task; whether it may decline.
    pub answering: Answering,
}

/// How an agent answers beyond its text (`agents.<name>.reply_as`, `may_decline`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Answering {
    /// A turn that completes is answered with a Message instead of a Task (A2A lets a
    /// server answer a simple request so); one that asks or fails is still a Task.
    pub reply_as_message: bool,
    /// The model is offered `decline_request`: calling it ends the task rejected.
    pub may_decline: bool,
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
        // Files the tools returned, one artifact per call, for the answer.
        let mut files: Vec<Artifact> = Vec::new();
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
                        transcript.answer(text.clone());
                        self.answer(text, &chat.sampling, files)
                    }
                    None => fail(format!(
                        "the model {} answered without any text",
                        self.model
                    )),
                };
            }
            if let Some(decline) = response.tool_calls.iter().find(|c| c.name == DECLINE_TOOL) {
                let reason = decline
                    .arguments
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("The agent declined the request.");
                transcript
                    .assistant(Some(reason.to_owned()), Vec::new())
                    .await;
                return AgentOutcome::Rejected {
                    reason: reason.to_owned(),
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
            hand_back(&calls, results, transcript, &mut chat.messages, &mut files).await;
        }
        fail(format!(
            "stopped after {} LLM turns without a final answer (max_iterations is {})",
            self.max_iterations, self.max_iterations
        ))
    }
}

impl LlmAgent {
    /// The model's final `text` as the turn's answer: a data part when the request asked for
    /// JSON (`response_format`), else text; then the tools' `files`; as a Message when the
    /// agent replies so, else as the task's artifacts.
    fn answer(
        &self,
        text: String,
        sampling: &crate::sampling::Sampling,
        files: Vec<Artifact>,
    ) -> AgentOutcome {
        let part = if asks_for_json(sampling) {
            match serde_json::from_str::<Value>(&text) {
                Ok(data) => {
                    let mut part = Part::from_content(PartContent::Data(data));
                    part.media_type = Some("application/json".to_owned());
                    part
                }
                Err(e) => {
                    return fail(format!(
                        "the model {} was asked for JSON (response_format) and answered something else ({e})",
                        self.model
                    ));
                }
            }
        } else {
            Part::text(text)
        };
        if self.answering.reply_as_message {
            let mut parts = vec![part];
            parts.extend(files.into_iter().flat_map(|a| a.parts));
            return AgentOutcome::Replied { parts };
        }
        let mut artifacts = vec![Artifact::fresh(vec![part]).named("response")];
        artifacts.extend(files);
        AgentOutcome::Completed { artifacts }
    }
}

/// The results of a step's tool calls: kept in the transcript, given to the model, and their
/// files kept for the answer.
async fn hand_back(
    calls: &[crate::llm::ToolCall],
    results: Vec<super::ToolResult>,
    transcript: &mut Transcript,
    messages: &mut Vec<ChatMessage>,
    files: &mut Vec<Artifact>,
) {
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
        if !result.files.is_empty() {
            files.push(file_artifact(&call.name, result.files));
        }
        messages.push(ChatMessage::Tool {
            call_id: call.id.clone(),
            content: result.content,
            is_error: result.is_error,
        });
    }
}

/// Whether the request asked the model for JSON (`response_format` of type `json_object` or
/// `json_schema`).
fn asks_for_json(sampling: &crate::sampling::Sampling) -> bool {
    sampling
        .response_format
        .as_ref()
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t == "json_object" || t == "json_schema")
}

/// The files of one tool call, as an artifact named after the tool.
fn file_artifact(tool: &str, parts: Vec<Part>) -> Artifact {
    Artifact::fresh(parts)
        .named(tool)
        .described(format!("files {tool} returned"))
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
            .rows(crate::conversation_store::MAX_ROWS_READ)
            .await?;
        Some(crate::conversation_store::as_messages(context_id, &rows))
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
