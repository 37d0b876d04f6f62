//! What a face asks the turn service for.

use daedalus_contract::Message;

use super::ConversationKey;
use crate::agents::agent_loop::{Bearer, TurnControls};
use crate::config::sampling::{SamplingError, SamplingParams};
use crate::platform::identity::Caller;
use crate::platform::telemetry::TraceHeaders;

/// What a turn remembers, before and after.
#[derive(Debug, Clone)]
pub enum Memory {
    /// An A2A task: its id is `message.taskId`, else `message.messageId`; its context the
    /// message's `contextId`, else the task's, else a new one. A message for a task left in
    /// `input-required` continues it; a message already answered gets the stored answer.
    Task,
    /// A conversation a face keeps by key (the MCP face's `shared` and `connection` scopes):
    /// the turn continues it, and nothing is remembered about the turn itself.
    Conversation(ConversationKey),
    /// Nothing before or after (the MCP face's `request` scope).
    None,
}

/// One turn, as a face asks for it.
#[derive(Debug)]
pub struct TurnRequest {
    /// The agent of the deployment that runs the turn.
    pub agent: String,
    /// The new user message.
    pub message: Message,
    pub memory: Memory,
    /// Sampling parameters over the agent's defaults; a face that could not read the caller's
    /// passes why, and the turn fails with it.
    pub sampling: Result<SamplingParams, SamplingError>,
    /// The caller's bearer token, for downstream servers that opted into forwarding.
    pub bearer: Bearer,
    /// Whether the model streams its answer (a face that shows text as it arrives, SSE, sets
    /// it; the turn's events are there for a face that takes them either way).
    pub stream: bool,
    /// How many messages of history the answer carries (`configuration.historyLength`).
    pub history_length: Option<u32>,
    /// The caller's trace: the turn's span continues it.
    pub trace: TraceHeaders,
    /// For an A2A task: a message already answered gets the stored answer (the contract
    /// binding's rule, for a proxy's redelivery). The standard bindings turn it off.
    pub replay: bool,
    /// What the caller changed for this turn (personality, tools, instruction).
    pub controls: TurnControls,
    /// Who asks: a new task or conversation is theirs, and only theirs to continue.
    pub caller: Caller,
    /// For an A2A task: the conversation it continues, when a face keeps it by a key of its
    /// own rather than by the task's context (the MCP face's `shared` scope on 2026-07-28,
    /// where a call is a task but the conversation is everybody's).
    pub conversation: Option<ConversationKey>,
    /// For an A2A task left running by a runtime that stopped: the record it goes on from,
    /// instead of starting the turn over (durable turns, [`super::record`]).
    pub resume: Option<super::record::Resume>,
}

impl TurnRequest {
    /// A turn of `agent` on `message`, with no sampling overrides, credentials or listener.
    pub fn new(agent: impl Into<String>, message: Message, memory: Memory) -> Self {
        Self {
            agent: agent.into(),
            message,
            memory,
            sampling: Ok(SamplingParams::default()),
            bearer: Bearer::default(),
            stream: false,
            history_length: None,
            trace: TraceHeaders::default(),
            replay: true,
            controls: TurnControls::default(),
            caller: Caller::Anyone,
            conversation: None,
            resume: None,
        }
    }
}
