//! An agent backed by an LLM: the tool loop. System prompt + history + the new user turn go to
//! the model; its tool calls run concurrently (each under a timeout); their results go back;
//! repeat until the model answers in text or `max_iterations` is reached. The model may also
//! end a turn by calling the built-in `request_user_input` tool, which makes the task
//! `input-required`. Cancellation is honoured between steps and while waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use daedalus_contract::{Artifact, Message, Part, PartContent, Role};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::compaction::{self, Budget, SUMMARY_HEADING, Summarizer};
use super::events::LoopEvent;
use super::tools::{CallContext, ToolResult, ToolSource, split_name};
use super::transcript::Transcript;
use super::{Agent, AgentOutcome, AgentRequest};
use crate::config::deployment::CompactionPolicy;
use crate::llm::{ChatMessage, ChatRequest, Content, LlmEvent, LlmProvider, ToolCall, ToolSpec};
use crate::sampling::{self, DropWarnings, Sampling, SamplingParams, Target};
use crate::sessions::SessionStore;
use crate::sessions::{Conversation, StoredTurn};

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

/// What a turn runs with once the caller's controls are applied: the instruction and the
/// sampling (the call's, over the personality's, over the agent's).
struct TurnSetup {
    instruction: String,
    sampling: SamplingParams,
}

fn fail(reason: String) -> AgentOutcome {
    AgentOutcome::Failed { reason }
}

/// The conversation a `messages` override gives.
fn overridden_conversation(messages: &[super::HistoryMessage]) -> Conversation {
    let mut conversation = Conversation::default();
    for message in messages {
        let chat = match message.role {
            super::HistoryRole::User => ChatMessage::User {
                content: vec![Content::Text {
                    text: message.content.clone(),
                }],
            },
            super::HistoryRole::Assistant => ChatMessage::Assistant {
                text: Some(message.content.clone()),
                tool_calls: Vec::new(),
            },
        };
        match conversation.turns.last_mut() {
            Some(turn) if message.role == super::HistoryRole::Assistant => turn.messages.push(chat),
            _ => conversation.turns.push(StoredTurn {
                first_row: -1,
                messages: vec![chat],
            }),
        }
    }
    conversation
}

/// Keeps only the tools `allow` names, each of which must be offered; answers the set.
fn allowed_tools(
    tools: &mut Vec<ToolSpec>,
    allow: &[String],
) -> Result<std::collections::BTreeSet<String>, String> {
    let offered: std::collections::BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    if let Some(missing) = allow.iter().find(|name| !offered.contains(name.as_str())) {
        let mut names: Vec<&str> = offered.into_iter().collect();
        names.truncate(20);
        return Err(format!(
            "tools_allowlist names {missing:?}, which matches no tool of this agent (it has: {})",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ));
    }
    let allowed: std::collections::BTreeSet<String> = allow.iter().cloned().collect();
    tools.retain(|t| allowed.contains(&t.name));
    Ok(allowed)
}

fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER_TOOL.to_owned(),
        description: "Ask the user a question and wait for the answer. Use only when you cannot go on without it.".to_owned(),
        input_schema: json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
    }
}

impl LlmAgent {
    /// How many stored rows a turn reads: every row costs the model a few tokens at least, so
    /// a quarter of the context window in rows is more than the window can hold.
    fn history_rows(&self) -> usize {
        (usize::try_from(self.context_window).unwrap_or(usize::MAX) / 4)
            .clamp(64, crate::sessions::MAX_ROWS_READ)
    }

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
                    let kind = if media.is_empty() { "unknown" } else { media };
                    return Err(format!("attachments of type {kind:?} are not supported"));
                }
                PartContent::Url(url) => out.push(Content::Text {
                    text: format!("(attached: {url})"),
                }),
            }
        }
        Ok(out)
    }

    /// The task's own earlier messages as a conversation, for a turn with no session store.
    fn task_conversation(&self, history: &[Message]) -> Result<Conversation, String> {
        let mut conversation = Conversation::default();
        for earlier in history {
            let message = match earlier.role {
                Role::User => ChatMessage::User {
                    content: self.content(earlier)?,
                },
                Role::Agent => ChatMessage::Assistant {
                    text: Some(earlier.text()),
                    tool_calls: Vec::new(),
                },
            };
            match conversation.turns.last_mut() {
                Some(turn) if earlier.role == Role::Agent => turn.messages.push(message),
                _ => conversation.turns.push(StoredTurn {
                    first_row: -1,
                    messages: vec![message],
                }),
            }
        }
        Ok(conversation)
    }

    /// The sampling of a request: what the provider takes of `sampling`, with the model's
    /// output budget capping `max_tokens` (and standing in where the provider requires one).
    fn sampling(&self, sampling: &SamplingParams) -> Sampling {
        let (mut resolved, dropped) = sampling::for_target(sampling, &self.target);
        self.warnings
            .warn(&self.name, self.provider.name(), &dropped);
        let budget = u64::from(self.max_output_tokens);
        resolved.max_tokens = match resolved.max_tokens {
            Some(asked) => Some(asked.min(budget)),
            None if matches!(self.target, Target::Anthropic { .. }) => Some(budget),
            None => None,
        };
        resolved
    }

    /// The instruction and sampling of `request`'s turn: its personality (or the agent's
    /// default one), `systemOverride` and `systemAppend`; `Err` names what the call got wrong.
    fn setup(&self, request: &AgentRequest) -> Result<TurnSetup, String> {
        let controls = &request.controls;
        let named = controls
            .personality
            .as_deref()
            .or(self.default_personality.as_deref());
        let personality = match named {
            None => None,
            Some(name) => Some(self.personalities.get(name).ok_or_else(|| {
                let known: Vec<&str> = self.personalities.keys().map(String::as_str).collect();
                format!(
                    "personality {name:?} is not one of {}'s ({})",
                    self.name,
                    if known.is_empty() {
                        "it has none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )
            })?),
        };
        let mut instruction = controls
            .system_override
            .clone()
            .unwrap_or_else(|| self.instruction.clone());
        for more in [
            personality.map(|p| p.instruction.as_str()),
            controls.system_append.as_deref(),
        ]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        {
            if !instruction.is_empty() {
                instruction.push_str("\n\n");
            }
            instruction.push_str(more);
        }
        let defaults = match personality {
            Some(p) => p.request_params.over(&self.defaults),
            None => self.defaults.clone(),
        };
        Ok(TurnSetup {
            instruction,
            sampling: request.sampling.over(&defaults),
        })
    }

    /// What the turn's request costs before the conversation: the system prompt and the tools.
    fn fixed_tokens(instruction: &str, tools: &[ToolSpec]) -> u64 {
        super::window::text_tokens(instruction)
            + tools
                .iter()
                .map(|t| {
                    super::window::text_tokens(&t.description)
                        + super::window::text_tokens(&t.input_schema.to_string())
                })
                .sum::<u64>()
    }

    /// The first request of the turn: the instruction (and the summary compaction left), the
    /// conversation, the new message.
    fn first_request(
        &self,
        request: &AgentRequest,
        setup: &TurnSetup,
        conversation: Conversation,
        new: ChatMessage,
        tools: Vec<ToolSpec>,
    ) -> ChatRequest {
        let instruction = &setup.instruction;
        let fixed = Self::fixed_tokens(instruction, &tools)
            + compaction::summary_tokens(conversation.summary.as_deref());
        let system = match &conversation.summary {
            Some(summary) if instruction.is_empty() => {
                Some(format!("{SUMMARY_HEADING}\n{summary}"))
            }
            Some(summary) => Some(format!("{instruction}\n\n{SUMMARY_HEADING}\n{summary}")),
            None => Some(instruction.clone()).filter(|s| !s.is_empty()),
        };
        let mut messages: Vec<ChatMessage> = conversation
            .turns
            .into_iter()
            .flat_map(|t| t.messages)
            .collect();
        messages.push(new);
        // Compaction made the conversation fit; this is the last resort when it could not.
        let room = u64::from(self.context_window).saturating_sub(u64::from(self.max_output_tokens));
        let dropped = super::window::fit(&mut messages, fixed, room);
        if dropped > 0 {
            tracing::warn!(
                agent = %self.name,
                context = %request.context_id,
                dropped,
                context_window = self.context_window,
                "the conversation is longer than the context window; its oldest turns were left out"
            );
        }
        ChatRequest {
            model: self.model.clone(),
            system,
            messages,
            tools,
            sampling: self.sampling(&setup.sampling),
            stream: request.stream,
            caller: request.bearer.clone(),
            extra: request.controls.extra.clone().unwrap_or_default(),
        }
    }

    /// Compacts `conversation` when it outgrows the budget, stores the result, and reports it.
    async fn fit_conversation(
        &self,
        request: &AgentRequest,
        conversation: &mut Conversation,
        budget: Budget,
        transcript: &Transcript,
        cancel: &CancellationToken,
    ) {
        let Some(cut) = compaction::plan(conversation, budget, &self.compaction) else {
            return;
        };
        // The rows up to the first turn that stays (all of them when none stays).
        let through = conversation
            .turns
            .get(cut.take)
            .map(|t| t.first_row - 1)
            .or(conversation.last_row);
        let summarizer = Summarizer {
            agent: &self.name,
            provider: self.provider.as_ref(),
            model: &self.model,
            max_output_tokens: self.max_output_tokens,
            caller: &request.bearer,
        };
        let done = summarizer
            .compact(&self.compaction, conversation, cut, budget, cancel)
            .await;
        if let Some(through) = through {
            transcript
                .compact(through, conversation.summary.clone())
                .await;
        }
        tracing::info!(
            agent = %self.name,
            context = %request.context_id,
            strategy = done.report.strategy.as_str(),
            messages_before = done.report.messages_before,
            messages_after = done.report.messages_after,
            tokens_before = done.report.tokens_before,
            tokens_after = done.report.tokens_after,
            "compacted the conversation"
        );
        request.events.emit(LoopEvent::Compacted {
            agent: self.name.clone(),
            depth: request.depth,
            model: self.model.clone(),
            report: done.report,
            summary_usage: done.usage,
        });
    }

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

    /// Runs one tool call under the timeout, reporting it.
    async fn call_tool(&self, call: &ToolCall, step: u32, context: &CallContext) -> ToolResult {
        if let Some(allowed) = &context.allowed
            && !allowed.contains(&call.name)
        {
            return ToolResult {
                content: format!(
                    "{} is not allowed in this turn (tools_allowlist); use one of the tools offered",
                    call.name
                ),
                is_error: true,
            };
        }
        let (server, tool) = split_name(&call.name);
        let server = if self.tools.serves(server) {
            server
        } else {
            super::tools::UNKNOWN_SERVER
        };
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {tool}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            gen_ai.tool.call.id = %call.id,
            mcp.server = server,
            outcome = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        crate::telemetry::record_ids(&span);
        let result = tracing::Instrument::instrument(
            self.run_tool(call, (server, tool), step, context),
            span.clone(),
        )
        .await;
        span.record("outcome", if result.is_error { "error" } else { "ok" });
        result
    }

    /// Runs `call` of `tool` on `server` (as [`Self::call_tool`] resolved them), reporting it.
    async fn run_tool(
        &self,
        call: &ToolCall,
        (server, tool): (&str, &str),
        step: u32,
        context: &CallContext,
    ) -> ToolResult {
        let (server, tool) = (server.to_owned(), tool.to_owned());
        let depth = context.depth;
        context.events.emit(LoopEvent::ToolStarted {
            agent: self.name.clone(),
            depth,
            step,
            server: server.clone(),
            tool: tool.clone(),
            call_id: call.id.clone(),
        });
        let started = Instant::now();
        let result = match tokio::time::timeout(
            self.tool_timeout,
            self.tools.call(&call.name, &call.arguments, context),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => ToolResult {
                content: format!(
                    "the tool {} did not answer within {:?} and was abandoned",
                    call.name, self.tool_timeout
                ),
                is_error: true,
            },
        };
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let event = if result.is_error {
            LoopEvent::ToolFailed {
                agent: self.name.clone(),
                depth,
                step,
                server,
                tool,
                call_id: call.id.clone(),
                reason: result.content.clone(),
                elapsed_ms,
            }
        } else {
            LoopEvent::ToolFinished {
                agent: self.name.clone(),
                depth,
                step,
                server,
                tool,
                call_id: call.id.clone(),
                elapsed_ms,
            }
        };
        context.events.emit(event);
        result
    }

    /// The tools this turn offers the model (its allowlist's, when it has one, and
    /// `ask_user`), and the set a call must be in.
    async fn offered_tools(
        &self,
        request: &AgentRequest,
    ) -> Result<
        (
            Vec<ToolSpec>,
            Option<Arc<std::collections::BTreeSet<String>>>,
        ),
        String,
    > {
        let mut tools = self.tools.tools(&request.bearer).await;
        let allowed = match &request.controls.tools_allowlist {
            None => None,
            Some(allow) => Some(Arc::new(allowed_tools(&mut tools, allow)?)),
        };
        tools.push(ask_user_spec());
        Ok((tools, allowed))
    }

    /// The conversation before the new message: the caller's `messages` override, else the
    /// stored conversation, else the task's own earlier messages.
    async fn earlier(
        &self,
        request: &AgentRequest,
        transcript: &Transcript,
    ) -> Result<Conversation, String> {
        if let Some(messages) = &request.controls.messages {
            return Ok(overridden_conversation(messages));
        }
        match transcript.earlier(self.history_rows()).await {
            Some(stored) => Ok(stored),
            None => self.task_conversation(&request.history),
        }
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
            AgentOutcome::Completed { .. } | AgentOutcome::InputRequired { .. }
        );
        transcript.settle(settled).await;
        let state = match &outcome {
            AgentOutcome::Completed { .. } => "completed",
            AgentOutcome::InputRequired { .. } => "input-required",
            AgentOutcome::Failed { .. } => "failed",
            AgentOutcome::Canceled => "canceled",
        };
        request.events.emit(LoopEvent::Final {
            agent: self.name.clone(),
            depth: request.depth,
            state,
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
