//! What a face asks the turn service for.

use daedalus_contract::Message;

use super::ConversationKey;
use crate::agents::agent_loop::{Bearer, TurnControls};
use crate::config::deployment::InstanceScope;
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

/// Which history a turn's answer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HistoryOf {
    /// The task's own messages, as the store holds them.
    Task,
    /// The context's stored conversation (the runtime contract's `POST /`).
    Conversation,
}

/// Who asks for a turn, and from where: what every face reads off its wire before it asks.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// Who asks: a new task or conversation is theirs, and only theirs to continue.
    pub caller: Caller,
    /// The caller's bearer token, for downstream servers that opted into forwarding.
    pub bearer: Bearer,
    /// The caller's trace: the turn's span continues it.
    pub trace: TraceHeaders,
}

/// When a turn's caller hears of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Heard {
    /// As it runs: its ids, events or state may leave the runtime before it ends (a stream, a
    /// send that returns at once, the MCP face's progress).
    AsItRuns,
    /// When it ends (a blocking send): nothing of it leaves the runtime before, so its begin
    /// may be committed with its end.
    WhenItEnds,
    /// As it began, and nothing after (a send that returns at once): the service hands the
    /// task as its turn began it back with the handle, so the face reads nothing again.
    AsItBegan,
}

/// One turn, as a face asks for it: made by the constructor of the face's binding
/// ([`TurnRequest::contract`], [`TurnRequest::standard`], [`TurnRequest::mcp`]), which sets
/// the rules that binding keeps, then told what the caller asked for.
#[derive(Debug)]
pub struct TurnRequest {
    /// The agent of the deployment that runs the turn.
    pub(super) agent: String,
    /// The new user message.
    pub message: Message,
    pub(super) memory: Memory,
    /// Sampling parameters over the agent's defaults; a face that could not read the caller's
    /// passes why, and the turn fails with it.
    pub(super) sampling: Result<SamplingParams, SamplingError>,
    /// The caller's bearer token, for downstream servers that opted into forwarding.
    pub(super) bearer: Bearer,
    /// Whether the model streams its answer (a face that shows text as it arrives, SSE, sets
    /// it; the turn's events are there for a face that takes them either way).
    pub stream: bool,
    /// How many messages of history the answer carries (`configuration.historyLength`).
    pub history_length: Option<u32>,
    /// Which history the answer shows: the task's own messages (the standard bindings, A2A
    /// §3.2.4; unset: all), or its context's stored conversation (the contract binding's;
    /// unset: none).
    pub(super) history: HistoryOf,
    /// The caller's trace: the turn's span continues it.
    pub(super) trace: TraceHeaders,
    /// For an A2A task: a message already answered gets the stored answer (the contract
    /// binding's rule, for a proxy's redelivery). The standard bindings turn it off.
    pub(super) replay: bool,
    /// What the caller changed for this turn (personality, tools, instruction).
    pub(super) controls: TurnControls,
    /// Who asks: a new task or conversation is theirs, and only theirs to continue.
    pub(super) caller: Caller,
    /// For an A2A task: the conversation it continues, when a face keeps it by a key of its
    /// own rather than by the task's context (the MCP face's `shared` scope on 2026-07-28,
    /// where a call is a task but the conversation is everybody's).
    pub(super) conversation: Option<ConversationKey>,
    /// For an A2A task left running by a runtime that stopped: the record it goes on from,
    /// instead of starting the turn over (durable turns, [`super::record`]).
    pub(super) resume: Option<super::record::Resume>,
    /// When the caller hears of the turn.
    pub(super) heard: Heard,
    /// The task is one the runtime just named (a standard send's new task): no task of its
    /// id can be stored yet.
    pub(super) names_a_new_task: bool,
}

impl TurnRequest {
    /// A turn of `agent` on `message`, with no sampling overrides, credentials or listener.
    pub(super) fn new(agent: impl Into<String>, message: Message, memory: Memory) -> Self {
        Self {
            agent: agent.into(),
            message,
            memory,
            sampling: Ok(SamplingParams::default()),
            bearer: Bearer::default(),
            stream: false,
            history_length: None,
            history: HistoryOf::Conversation,
            trace: TraceHeaders::default(),
            replay: true,
            controls: TurnControls::default(),
            caller: Caller::Anyone,
            conversation: None,
            resume: None,
            heard: Heard::AsItRuns,
            names_a_new_task: false,
        }
    }

    fn from(agent: impl Into<String>, message: Message, memory: Memory, origin: Origin) -> Self {
        let mut turn = Self::new(agent, message, memory);
        turn.caller = origin.caller;
        turn.bearer = origin.bearer;
        turn.trace = origin.trace;
        turn
    }

    /// The contract binding's turn (`POST /`, what the proxy sends): an A2A task named by the
    /// message (its `taskId`, else its `messageId`), and a message already answered gets the
    /// stored answer, so a redelivery runs nothing twice.
    pub fn contract(agent: impl Into<String>, message: Message, origin: Origin) -> Self {
        Self::from(agent, message, Memory::Task, origin)
    }

    /// A standard A2A binding's turn (JSON-RPC, HTTP+JSON, gRPC): an A2A task the server
    /// names (see [`super::standard`]), and a repeated `messageId` is a new message, never a
    /// replay.
    pub fn standard(agent: impl Into<String>, message: Message, origin: Origin) -> Self {
        let mut turn = Self::from(agent, message, Memory::Task, origin);
        turn.replay = false;
        turn.history = HistoryOf::Task;
        turn
    }

    /// An MCP call's turn, remembering as `memory`: a conversation by the agent's scope
    /// ([`ConversationKey::of_mcp_call`]), nothing, or an A2A task (MCP 2026-07-28's tasks,
    /// which are never replayed).
    pub fn mcp(agent: impl Into<String>, message: Message, memory: Memory, origin: Origin) -> Self {
        let mut turn = Self::from(agent, message, memory, origin);
        turn.replay = false;
        turn
    }

    /// What the caller asked of the turn beyond its message: sampling over the agent's
    /// defaults (or why it could not be read: the turn then fails with it), and its controls.
    #[must_use]
    pub fn asking(
        mut self,
        sampling: Result<SamplingParams, SamplingError>,
        controls: TurnControls,
    ) -> Self {
        self.sampling = sampling;
        self.controls = controls;
        self
    }

    /// The caller waits for the turn's answer and hears nothing of it before (a blocking
    /// send: no stream, no return at once): the turn may commit its begin with its end.
    #[must_use]
    pub fn answered_when_it_ends(mut self) -> Self {
        self.heard = Heard::WhenItEnds;
        self
    }

    /// The caller hears the task as its turn began it, and nothing after (a send that returns
    /// at once): [`super::TaskHandle::began`] holds it, its history shaped as asked.
    #[must_use]
    pub fn answered_as_it_begins(mut self) -> Self {
        self.heard = Heard::AsItBegan;
        self
    }

    /// A task turn that continues `conversation` rather than its context's (an MCP `shared`
    /// agent's calls on 2026-07-28: each a task, the conversation everybody's).
    #[must_use]
    pub fn in_conversation(mut self, conversation: Option<ConversationKey>) -> Self {
        self.conversation = conversation;
        self
    }

    /// A task turn of a call with no session (MCP 2026-07-28) under its agent's
    /// `instance_scope`: a `shared` agent's every turn continues everybody's conversation
    /// (`shared`, the call's key of it), whatever task it is; a `connection` agent's new task
    /// continues the conversation the call names (`named`, an A2A context id: the same owner
    /// rules), else a new one, and a continued task its own; a `request` agent's carries
    /// nothing over from another task.
    #[must_use]
    pub fn scoped(
        mut self,
        scope: InstanceScope,
        starts_task: bool,
        named: Option<String>,
        shared: Option<ConversationKey>,
    ) -> Self {
        match scope {
            InstanceScope::Shared => self.in_conversation(shared),
            InstanceScope::Connection if starts_task => {
                self.message.context_id = named;
                self
            }
            InstanceScope::Connection | InstanceScope::Request => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Part, Role};

    use super::*;

    fn turn(context_id: Option<&str>) -> TurnRequest {
        let mut message = Message::new("m-1".to_owned(), Role::User, vec![Part::text("hi")]);
        message.context_id = context_id.map(str::to_owned);
        TurnRequest::mcp("agent", message, Memory::Task, Origin::default())
    }

    #[test]
    fn an_instance_scope_decides_which_conversation_a_sessionless_call_continues() {
        let shared = || Some(ConversationKey::mcp_shared("agent"));
        // shared: everybody's, on every turn.
        for starts in [true, false] {
            let scoped = turn(None).scoped(InstanceScope::Shared, starts, None, shared());
            assert_eq!(scoped.conversation, shared());
        }
        // connection: the one the call names, for a new task only.
        let named = Some("ctx-7".to_owned());
        let first = turn(None).scoped(InstanceScope::Connection, true, named.clone(), shared());
        assert_eq!(first.message.context_id, named);
        assert_eq!(first.conversation, None);
        let later =
            turn(Some("ctx-task")).scoped(InstanceScope::Connection, false, named, shared());
        assert_eq!(later.message.context_id.as_deref(), Some("ctx-task"));
        // request: nothing carried over.
        let alone = turn(None).scoped(InstanceScope::Request, true, Some("x".into()), shared());
        assert_eq!(alone.message.context_id, None);
        assert_eq!(alone.conversation, None);
    }
}
