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

use super::checkpoint;
use super::events::LoopEvent;
use super::tools::{CallContext, ToolSource};
use super::transcript::Transcript;
use super::{Agent, AgentOutcome, AgentRequest};
use crate::agents::llm::{ChatMessage, ChatResponse, LlmEvent, LlmProvider};
use crate::config::deployment::CompactionPolicy;
use crate::config::sampling::{DropWarnings, SamplingParams, Target};
use crate::stores::conversations::ConversationStore;

mod conversation;
mod spending;
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

/// One round of tool calls: its step, the turn's request, the calls' context, the turn's
/// cancel.
struct ToolRound<'a> {
    step: u32,
    request: &'a AgentRequest,
    context: &'a CallContext,
    cancel: &'a CancellationToken,
}

fn fail(reason: String) -> AgentOutcome {
    AgentOutcome::Failed { reason }
}

/// Why a turn cannot start as asked: what the caller sent that this agent cannot take. The
/// turn fails with it as its reason, before any model call.
#[derive(Debug, thiserror::Error)]
pub(super) enum CannotStart {
    #[error(
        "the model {model} is text-only and cannot read the attached {media} image; use a vision model (model_capabilities.vision: true)"
    )]
    TextOnlyModel { model: String, media: String },
    #[error("attachments of type {kind:?} are not supported")]
    Attachment { kind: String },
    #[error("personality {name:?} is not one of {agent}'s ({known})")]
    UnknownPersonality {
        name: String,
        agent: String,
        /// The agent's personalities, or "it has none".
        known: String,
    },
    #[error(
        "tools_allowlist names {missing:?}, which matches no tool of this agent (it has: {offered})"
    )]
    UnknownTool {
        missing: String,
        /// Up to 20 tools it offers, or "none".
        offered: String,
    },
}

/// A turn that cannot start fails with why.
impl From<CannotStart> for AgentOutcome {
    fn from(why: CannotStart) -> Self {
        fail(why.to_string())
    }
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
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        crate::platform::telemetry::record_ids(&span);
        span.record("gen_ai.response.model", self.model.as_str());
        span
    }

    async fn work(
        &self,
        request: &AgentRequest,
        cancel: &CancellationToken,
        transcript: &mut Transcript,
    ) -> AgentOutcome {
        let (mut progress, context) = match self.start(request, cancel, transcript).await {
            Ok(started) => started,
            Err(ended) => return ended,
        };
        let on_llm = self.model_events(request);
        for step in progress.step + 1..=self.max_iterations {
            if cancel.is_cancelled() {
                return AgentOutcome::Canceled;
            }
            let response = match self
                .ask_model(step, request, &mut progress, &on_llm, cancel)
                .await
            {
                Ok(response) => response,
                Err(ended) => return ended,
            };
            if response.tool_calls.is_empty() {
                return match response.text {
                    Some(text) => {
                        transcript.answer(text.clone());
                        self.answer(text, &progress.chat.sampling, progress.files)
                    }
                    None => fail(format!(
                        "the model {} answered without any text",
                        self.model
                    )),
                };
            }
            if let Some(ended) = Self::ended_by_a_builtin(&response.tool_calls, transcript).await {
                return ended;
            }
            let round = ToolRound {
                step,
                request,
                context: &context,
                cancel,
            };
            if let Err(ended) = self
                .call_tools(round, response, &mut progress, transcript)
                .await
            {
                return ended;
            }
        }
        fail(format!(
            "stopped after {} LLM turns without a final answer (max_iterations is {})",
            self.max_iterations, self.max_iterations
        ))
    }

    /// What the loop starts from: the turn's chat (fresh, or a resumed turn's at its last
    /// checkpoint, with the calls it left in flight settled) and the context of its tool
    /// calls; or how the turn ended before any model call.
    async fn start(
        &self,
        request: &AgentRequest,
        cancel: &CancellationToken,
        transcript: &mut Transcript,
    ) -> Result<(Progress, CallContext), AgentOutcome> {
        let setup = self.setup(request).map_err(AgentOutcome::from)?;
        let (tools, allowed) = self
            .offered_tools(request)
            .await
            .map_err(AgentOutcome::from)?;
        let resume = request.resume.as_ref().filter(|c| c.resumable());
        let mut progress = match resume {
            Some(checkpoint) => self.resumed(request, &setup, tools, checkpoint, transcript),
            None => Progress::from_start(
                self.fresh_chat(request, &setup, tools, transcript, cancel)
                    .await
                    .map_err(AgentOutcome::from)?,
            ),
        };
        let context = CallContext {
            bearer: request.bearer.clone(),
            cancel: cancel.clone(),
            events: request.events.clone(),
            depth: request.depth,
            allowed,
            note: None,
            started: None,
            budget: request.budget.clone(),
        };
        if let Some(checkpoint) = resume.filter(|c| !c.pending.is_empty()) {
            let results = self.settle_pending(checkpoint, &context).await;
            progress
                .hand_back(&checkpoint.pending, results, transcript)
                .await;
            progress.save(&request.checkpoints, transcript).await;
        }
        Ok((progress, context))
    }

    /// What the model's client tells as it goes (text as it streams, a retry), as loop events.
    fn model_events<'a>(
        &'a self,
        request: &'a AgentRequest,
    ) -> impl Fn(LlmEvent) + Send + Sync + 'a {
        let (events, depth) = (&request.events, request.depth);
        move |e: LlmEvent| match e {
            LlmEvent::TextDelta(text) => events.emit(LoopEvent::TextDelta {
                agent: self.name.clone(),
                depth,
                text,
            }),
            LlmEvent::Retrying {
                attempt,
                delay,
                reason,
            } => {
                tracing::info!(agent = %self.name, attempt, ?delay, %reason, "retrying the model");
                events.emit(LoopEvent::LlmRetrying {
                    agent: self.name.clone(),
                    depth,
                    attempt,
                });
            }
        }
    }

    /// Step `step`'s model call: its tokens reserved against the budgets first and settled
    /// after, in its own span, counted in the turn's usage; or how the turn ended instead (a
    /// budget spent, a cancel, a failed call).
    async fn ask_model(
        &self,
        step: u32,
        request: &AgentRequest,
        progress: &mut Progress,
        on_llm: &(dyn Fn(LlmEvent) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, AgentOutcome> {
        let depth = request.depth;
        request.events.emit(LoopEvent::LlmTurnStarted {
            agent: self.name.clone(),
            depth,
            step,
        });
        let reservation = self
            .reserve_tokens(&request.budget, &progress.chat, cancel)
            .await?;
        let span = self.chat_span();
        let answer = tokio::select! {
            answer = tracing::Instrument::instrument(self.provider.chat(&progress.chat, on_llm), span.clone()) => answer,
            () = cancel.cancelled() => return Err(AgentOutcome::Canceled),
        };
        let response = answer.map_err(|e| {
            span.record("error.type", tracing::field::display(&e));
            fail(format!("the model call failed: {e}"))
        })?;
        record_response(&span, &response);
        reservation
            .settle(
                self.provider.billed_tokens(&response.usage),
                response.usage.output_tokens,
            )
            .await;
        progress.step = step;
        checkpoint::add_usage(&mut progress.usage, &response.usage);
        request.events.emit(LoopEvent::LlmTurnFinished {
            agent: self.name.clone(),
            depth,
            step,
            model: self.model.clone(),
            usage: response.usage,
            tool_calls: response.tool_calls.len(),
        });
        Ok(response)
    }

    /// The tool calls of a model's answer, run at once (each under its timeout), their
    /// results handed back to the chat; the calls are checkpointed in flight and the results
    /// once in. `Err` when the turn was canceled meanwhile.
    async fn call_tools(
        &self,
        round: ToolRound<'_>,
        response: ChatResponse,
        progress: &mut Progress,
        transcript: &mut Transcript,
    ) -> Result<(), AgentOutcome> {
        let ToolRound {
            step,
            request,
            context,
            cancel,
        } = round;
        let calls = response.tool_calls.clone();
        transcript
            .assistant(response.text.clone(), calls.clone())
            .await;
        progress.chat.messages.push(ChatMessage::Assistant {
            text: response.text,
            tool_calls: response.tool_calls,
        });
        let in_flight = progress
            .save_in_flight(&request.checkpoints, &calls, transcript)
            .await;
        let results = tokio::select! {
            results = futures::future::join_all(calls.iter().map(|c| async {
                let context = context.for_call(&c.id, in_flight.as_ref(), None);
                self.call_tool(c, step, &context).await
            })) => results,
            // Dropping the calls abandons them; rmcp tells each MCP server
            // (`notifications/cancelled`), and a sub-agent's token is a child of `cancel`.
            () = cancel.cancelled() => return Err(AgentOutcome::Canceled),
        };
        if let Some(in_flight) = &in_flight {
            in_flight.close().await;
        }
        progress.hand_back(&calls, results, transcript).await;
        progress.save(&request.checkpoints, transcript).await;
        Ok(())
    }
}

impl LlmAgent {
    /// The results of the calls in flight when the turn was interrupted (`checkpoint`'s
    /// `pending`): a call that noted the remote task it started follows that task to its end;
    /// a call whose tool may be made again (it only reads, or is idempotent, or its server is
    /// marked so) is made again; any other is not, since it may have taken effect, and the
    /// model reads that it was interrupted.
    async fn settle_pending(
        &self,
        checkpoint: &super::Checkpoint,
        context: &CallContext,
    ) -> Vec<super::ToolResult> {
        let step = checkpoint.step;
        futures::future::join_all(checkpoint.pending.iter().map(|call| async move {
            if let Some(started) = checkpoint.started.get(&call.id) {
                let context = context.for_call(&call.id, None, Some(started));
                self.call_tool(call, step, &context).await
            } else if self.tools.repeatable(&call.name) {
                self.call_tool(call, step, context).await
            } else {
                checkpoint::interrupted(call)
            }
        }))
        .await
    }

    /// The outcome of a step whose calls include a built-in that ends the turn:
    /// `decline_request` (rejected) or `request_user_input` (input-required).
    async fn ended_by_a_builtin(
        calls: &[crate::agents::llm::ToolCall],
        transcript: &mut Transcript,
    ) -> Option<AgentOutcome> {
        let argument = |call: &crate::agents::llm::ToolCall, key: &str| {
            call.arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (said, outcome) = if let Some(decline) = calls.iter().find(|c| c.name == DECLINE_TOOL) {
            let reason = argument(decline, "reason")
                .unwrap_or_else(|| "The agent declined the request.".to_owned());
            (reason.clone(), AgentOutcome::Rejected { reason })
        } else {
            let ask = calls.iter().find(|c| c.name == ASK_USER_TOOL)?;
            let question =
                argument(ask, "question").unwrap_or_else(|| "More input is needed.".to_owned());
            (
                question.clone(),
                AgentOutcome::InputRequired {
                    question: vec![Part::text(question)],
                },
            )
        };
        transcript.assistant(Some(said), Vec::new()).await;
        Some(outcome)
    }

    /// Where a turn resumed from `checkpoint` stands: its conversation and system prompt, the
    /// request's tools and sampling, the rows it wrote (settled with the rest).
    fn resumed(
        &self,
        request: &AgentRequest,
        setup: &turn_setup::TurnSetup,
        tools: Vec<crate::agents::llm::ToolSpec>,
        checkpoint: &super::Checkpoint,
        transcript: &mut Transcript,
    ) -> Progress {
        let nothing_new = ChatMessage::User {
            content: Vec::new(),
        };
        let mut chat = self.first_request(
            request,
            setup,
            crate::stores::conversations::Conversation::default(),
            nothing_new,
            tools,
        );
        chat.system.clone_from(&checkpoint.system);
        chat.messages.clone_from(&checkpoint.messages);
        transcript.resume_rows(&checkpoint.conversation_rows);
        Progress {
            chat,
            step: checkpoint.step,
            files: checkpoint.files.clone(),
            usage: checkpoint.usage,
        }
    }

    /// The model's final `text` as the turn's answer: a data part when the request asked for
    /// JSON (`response_format`), else text; then the tools' `files`; as a Message when the
    /// agent replies so, else as the task's artifacts.
    fn answer(
        &self,
        text: String,
        sampling: &crate::config::sampling::Sampling,
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

/// Where a turn's tool loop stands: the next model call, the last step whose answer came, the
/// tools' files so far and the tokens used.
struct Progress {
    chat: crate::agents::llm::ChatRequest,
    step: u32,
    /// Files the tools returned, one artifact per call, for the answer.
    files: Vec<Artifact>,
    usage: crate::agents::llm::Usage,
}

impl Progress {
    /// A turn that starts from the beginning, with its first model call.
    fn from_start(chat: crate::agents::llm::ChatRequest) -> Self {
        Self {
            chat,
            step: 0,
            files: Vec::new(),
            usage: crate::agents::llm::Usage::default(),
        }
    }

    /// Hands the checkpoint of where the loop stands (no call pending) to `checkpoints`;
    /// built only when checkpoints are taken (the conversation is copied).
    async fn save(&self, checkpoints: &super::Checkpoints, transcript: &Transcript) {
        if checkpoints.on() {
            checkpoints
                .save(&self.checkpoint(Vec::new(), transcript))
                .await;
        }
    }

    /// Hands the checkpoint of a step whose `calls` are about to be made to `checkpoints`,
    /// and keeps it, for the calls to note the remote tasks they start (when checkpoints
    /// are taken).
    async fn save_in_flight(
        &self,
        checkpoints: &super::Checkpoints,
        calls: &[crate::agents::llm::ToolCall],
        transcript: &Transcript,
    ) -> Option<std::sync::Arc<checkpoint::InFlight>> {
        if !checkpoints.on() {
            return None;
        }
        let checkpoint = self.checkpoint(calls.to_vec(), transcript);
        checkpoints.save(&checkpoint).await;
        Some(checkpoint::InFlight::new(checkpoints.clone(), checkpoint))
    }

    fn checkpoint(
        &self,
        pending: Vec<crate::agents::llm::ToolCall>,
        transcript: &Transcript,
    ) -> super::Checkpoint {
        super::Checkpoint {
            version: checkpoint::CHECKPOINT_VERSION,
            step: self.step,
            system: self.chat.system.clone(),
            messages: self.chat.messages.clone(),
            pending,
            started: std::collections::BTreeMap::new(),
            files: self.files.clone(),
            usage: self.usage,
            conversation_rows: transcript.written().to_vec(),
        }
    }

    /// The results of a step's tool calls: kept in the transcript, given to the model, and
    /// their files kept for the answer.
    async fn hand_back(
        &mut self,
        calls: &[crate::agents::llm::ToolCall],
        results: Vec<super::ToolResult>,
        transcript: &mut Transcript,
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
                self.files.push(file_artifact(&call.name, result.files));
            }
            self.chat.messages.push(ChatMessage::Tool {
                call_id: call.id.clone(),
                content: result.content,
                is_error: result.is_error,
            });
        }
    }
}

/// Whether the request asked the model for JSON (`response_format` of type `json_object` or
/// `json_schema`).
fn asks_for_json(sampling: &crate::config::sampling::Sampling) -> bool {
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
    /// An agent with `reply_as: message` replies when it completes.
    fn may_reply(&self, _message: &daedalus_contract::Message) -> bool {
        self.answering.reply_as_message
    }

    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        let store = self.sessions.clone().filter(|_| request.persist);
        let mut transcript = Transcript::new(store, &request.context_id).holding(&request.writes);
        let outcome = self.work(&request, &cancel, &mut transcript).await;
        let settled = matches!(
            outcome,
            AgentOutcome::Completed { .. }
                | AgentOutcome::Replied { .. }
                | AgentOutcome::InputRequired { .. }
        );
        // With the turn's end where it waits for it: one commit for both.
        Box::pin(transcript.settle_with(settled, &request.writes)).await;
        request.events.emit(LoopEvent::Final {
            agent: self.name.clone(),
            depth: request.depth,
            state: outcome.state_name(),
        });
        outcome
    }

    async fn conversation(&self, context_id: &str) -> Option<Vec<Message>> {
        let rows = Transcript::new(self.sessions.clone(), context_id)
            .rows(crate::stores::conversations::MAX_ROWS_READ)
            .await?;
        Some(crate::stores::conversations::as_messages(context_id, &rows))
    }
}

/// Records what the model answered on its call's span.
fn record_response(span: &tracing::Span, response: &crate::agents::llm::ChatResponse) {
    // Integers, as the conventions type them (a `u64` field would be exported as text).
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let usage = &response.usage;
    span.record("gen_ai.usage.input_tokens", count(usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", count(usage.output_tokens));
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        count(usage.cache_read_tokens),
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        count(usage.cache_write_tokens),
    );
    // A string array, as the conventions type it (a field would be one string).
    let reason = match response.stop_reason {
        crate::agents::llm::StopReason::EndTurn | crate::agents::llm::StopReason::StopSequence => {
            "stop"
        }
        crate::agents::llm::StopReason::ToolUse => "tool_calls",
        crate::agents::llm::StopReason::MaxTokens => "length",
        crate::agents::llm::StopReason::Other => "other",
    };
    tracing_opentelemetry::OpenTelemetrySpanExt::set_attribute(
        span,
        "gen_ai.response.finish_reasons",
        opentelemetry::Value::Array(opentelemetry::Array::String(vec![reason.into()])),
    );
}
