//! The agent loop's events: what happened during a turn, as it happened. SSE, MCP progress and
//! metrics are built from these.

use std::fmt;
use std::sync::Arc;

use crate::agents::llm::Usage;

/// One thing that happened in an agent's turn. `depth` is 0 for the served agent and grows by
/// one per sub-agent level.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopEvent {
    /// Step `step` (1-based) asks the model.
    LlmTurnStarted {
        agent: String,
        depth: u32,
        step: u32,
    },
    /// The model answered.
    LlmTurnFinished {
        agent: String,
        depth: u32,
        step: u32,
        /// The model that answered.
        model: String,
        usage: Usage,
        tool_calls: usize,
    },
    /// The model's request failed and is sent again: text it streamed in this step is void,
    /// and the retry streams the step's text from its start.
    LlmRetrying {
        agent: String,
        depth: u32,
        attempt: u32,
    },
    /// A piece of streamed text.
    TextDelta {
        agent: String,
        depth: u32,
        text: String,
    },
    /// An artifact the agent streams itself, whole or a chunk at a time: with `append` its
    /// parts add to the artifact of the same id, and `last_chunk` closes it. The turn's
    /// outcome holds each such artifact whole.
    ArtifactChunk {
        agent: String,
        depth: u32,
        artifact: daedalus_contract::Artifact,
        append: bool,
        last_chunk: bool,
    },
    /// A tool call began.
    ToolStarted {
        agent: String,
        depth: u32,
        step: u32,
        server: String,
        tool: String,
        call_id: String,
    },
    /// A tool call returned a result.
    ToolFinished {
        agent: String,
        depth: u32,
        step: u32,
        server: String,
        tool: String,
        call_id: String,
        elapsed_ms: u64,
    },
    /// A tool call failed (error result, timeout, transport); the model sees why.
    ToolFailed {
        agent: String,
        depth: u32,
        step: u32,
        server: String,
        tool: String,
        call_id: String,
        reason: String,
        elapsed_ms: u64,
    },
    /// The conversation outgrew the model's budget and was compacted before the model was
    /// asked; `summary_usage` is what the summary request cost, if one was made.
    Compacted {
        agent: String,
        depth: u32,
        model: String,
        report: daedalus_contract::Compaction,
        summary_usage: Option<Usage>,
    },
    /// The turn ended.
    Final {
        agent: String,
        depth: u32,
        state: &'static str,
    },
}

/// Where events go. Cheap to clone; a sink that is not listening drops events.
#[derive(Clone, Default)]
pub struct EventSink(Option<Arc<dyn Fn(LoopEvent) + Send + Sync>>);

impl LoopEvent {
    /// Counts this event in the LLM and tool families of `metrics` (most events count nowhere).
    pub fn count_in(&self, metrics: &crate::platform::metrics::Metrics) {
        match self {
            LoopEvent::LlmTurnFinished {
                agent,
                model,
                usage,
                ..
            } => metrics.llm_turn(agent, model, &usage.into()),
            LoopEvent::Compacted {
                agent,
                model,
                report,
                summary_usage,
                ..
            } => metrics.compaction(
                agent,
                model,
                report.strategy.as_str(),
                summary_usage.as_ref().map(Into::into).as_ref(),
            ),
            LoopEvent::ToolFinished {
                agent,
                server,
                elapsed_ms,
                ..
            } => metrics.tool_call(agent, server, "ok", *elapsed_ms),
            LoopEvent::ToolFailed {
                agent,
                server,
                elapsed_ms,
                ..
            } => metrics.tool_call(agent, server, "error", *elapsed_ms),
            LoopEvent::LlmTurnStarted { .. }
            | LoopEvent::TextDelta { .. }
            | LoopEvent::ArtifactChunk { .. }
            | LoopEvent::LlmRetrying { .. }
            | LoopEvent::ToolStarted { .. }
            | LoopEvent::Final { .. } => {}
        }
    }
}

impl EventSink {
    /// A sink that calls `f` for every event.
    pub fn new(f: impl Fn(LoopEvent) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    /// Reports an event (never fails: a listener's trouble must not disturb the loop).
    pub fn emit(&self, event: LoopEvent) {
        if let Some(f) = &self.0 {
            f(event);
        }
    }
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "EventSink(listening)"
        } else {
            "EventSink(none)"
        })
    }
}
