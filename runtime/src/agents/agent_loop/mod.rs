//! The agent seam: what the HTTP faces call to run one turn of a task.
//!
//! An [`Agent`] gets the new user message and the task's earlier messages, and ends the turn
//! as an [`AgentOutcome`]: completed with output, answered with a message, input-required with
//! a question, rejected or failed with a reason. The HTTP layer turns that into a contract
//! `Task`. The built-in [`Passthrough`] model echoes, [`Tck`] plays the A2A conformance kit's
//! scenarios; the LLM agent loop implements the same trait.

pub mod checkpoint;
mod compaction;
pub mod events;
mod llm;
mod passthrough;
mod remembering;
mod subagents;
mod tck;
pub mod tools;
mod transcript;
mod window;

use async_trait::async_trait;
use daedalus_contract::{Artifact, Message, Part};
use tokio_util::sync::CancellationToken;

use crate::config::sampling::SamplingParams;

pub use checkpoint::{Checkpoint, Checkpointer, Checkpoints};
pub use compaction::{SUMMARY_HEADING, SUMMARY_PROMPT};
pub use events::{EventSink, LoopEvent};
pub use llm::{ASK_USER_TOOL, Answering, DECLINE_TOOL, LlmAgent};
pub use passthrough::{Passthrough, ToolPassthrough};
pub use remembering::Remembering;
pub use subagents::{SUBAGENT_TOOL, SubAgents};
pub use tck::Tck;
pub use tools::{Bearer, CallContext, NoTools, ToolResult, ToolSource, Toolbox};

/// One turn of a task, as the agent sees it. Each layer of agent (the conversation kept, the
/// loop) holds it in its future while the turn runs: what only some turns carry (sampling,
/// controls, a checkpoint resumed from) is boxed, and the request stays a few hundred bytes.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    /// The task id (the contract's rule: `message.taskId`, else `message.messageId`).
    pub task_id: String,
    /// The conversation the task belongs to.
    pub context_id: String,
    /// The new user message, with `taskId` and `contextId` filled in.
    pub message: Message,
    /// Earlier messages of this task (user and agent), oldest first.
    pub history: Vec<Message>,
    /// Sampling parameters of this turn, over the agent's defaults.
    pub sampling: Box<SamplingParams>,
    /// The caller's bearer token, for servers that opted into forwarding.
    pub bearer: Bearer,
    /// Where the loop reports what it does.
    pub events: EventSink,
    /// Sub-agent depth (0 for the served agent).
    pub depth: u32,
    /// Whether the model streams its answer (someone shows it as it arrives).
    pub stream: bool,
    /// Whether the turn reads and writes the context's stored conversation (false for
    /// sub-agent calls and the MCP face's `request` scope: nothing is remembered).
    pub persist: bool,
    /// What the caller changed for this turn (personality, tools, instruction).
    pub controls: Box<TurnControls>,
    /// Where the loop's checkpoints go: each completed step, before the next one starts.
    pub checkpoints: Checkpoints,
    /// The checkpoint to go on from, instead of starting the turn over (its steps are not
    /// asked of the model again).
    pub resume: Option<Box<Checkpoint>>,
    /// The budgets the turn's model calls are held to (`budgets:`); sub-agents share it.
    pub budget: crate::agents::budgets::TurnBudget,
    /// Where the turn's writes that its end commits wait ([`TurnWrites::now`]: none do).
    pub writes: crate::stores::turn_writes::TurnWrites,
}

/// What a caller may change for one turn, with mcpctl's names on the wire (MCP `send_message`
/// arguments, A2A `SendMessageRequest.metadata`): a personality of the agent, the tools
/// offered (`tools_allowlist`), the instruction (`systemOverride` replaces it,
/// `systemAppend` follows it), the conversation (`messages`) and provider keys (`extra`). Sampling travels in [`AgentRequest::sampling`]. The MCP tool's
/// input schema is derived from this struct.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(default)]
pub struct TurnControls {
    /// A personality of the agent (`agents.<name>.personalities.<p>`) for this call.
    pub personality: Option<String>,
    /// Only these `<server>__<tool>` tools are offered to the model this turn; a call to any
    /// other is refused.
    pub tools_allowlist: Option<Vec<String>>,
    /// Replaces the agent's instruction for this turn.
    #[serde(rename = "systemOverride")]
    pub system_override: Option<String>,
    /// Added after the agent's instruction (and the personality's) for this turn.
    #[serde(rename = "systemAppend")]
    pub system_append: Option<String>,
    /// The whole conversation before the new message, instead of the stored one: the stored
    /// conversation is neither read nor written for this turn.
    pub messages: Option<Vec<HistoryMessage>>,
    /// Provider-specific keys added to the provider request (vLLM's `repetition_penalty`,
    /// Anthropic's `metadata.user_id`); a key the runtime sets itself is refused.
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One message of a `messages` history override.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
pub struct HistoryMessage {
    pub role: HistoryRole,
    pub content: String,
}

/// Who wrote a [`HistoryMessage`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HistoryRole {
    User,
    Assistant,
}

impl TurnControls {
    /// The wire names of the controls.
    pub const KEYS: [&'static str; 6] = [
        "personality",
        "tools_allowlist",
        "systemOverride",
        "systemAppend",
        "messages",
        "extra",
    ];

    /// The JSON Schema of each control, for a tool's input schema.
    pub fn property_schemas() -> serde_json::Map<String, serde_json::Value> {
        crate::platform::tool_schema::properties_of::<TurnControls>()
    }
}

impl AgentRequest {
    /// A request for `message` in a new task with no history, no caller credentials and no
    /// event listener.
    pub fn new(task_id: &str, context_id: &str, message: Message) -> Self {
        Self {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            message,
            history: Vec::new(),
            sampling: Box::default(),
            bearer: Bearer::default(),
            events: EventSink::default(),
            depth: 0,
            stream: false,
            persist: true,
            controls: Box::default(),
            checkpoints: Checkpoints::default(),
            resume: None,
            budget: crate::agents::budgets::TurnBudget::unlimited(),
            writes: crate::stores::turn_writes::TurnWrites::now(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentOutcome {
    /// The agent finished; its output. An empty list is reported as a failure.
    Completed { artifacts: Vec<Artifact> },
    /// The agent answered with a message rather than a task's output (A2A lets a server
    /// answer a simple request so): the A2A bindings answer the message; the task, which
    /// others may follow by id, completes with it as its status message and its output.
    Replied { parts: Vec<Part> },
    /// The agent needs the user to answer `question` before it can go on.
    InputRequired { question: Vec<Part> },
    /// The agent needs the user to authenticate (to it, or to a service it calls) before it
    /// can go on; `challenge` says how. The task waits, as for input (A2A `AUTH_REQUIRED`).
    AuthRequired { challenge: Vec<Part> },
    /// The agent refused the request (it will not do it, not that it could not); `reason`
    /// says why.
    Rejected { reason: String },
    /// The agent could not do the work; `reason` says why, for a person to act on.
    Failed { reason: String },
    /// The turn stopped because `cancel` fired (shutdown); nothing was finished.
    Canceled,
}

impl AgentOutcome {
    /// The state a task ends in, in the contract's spelling (for events and logs).
    pub fn state_name(&self) -> &'static str {
        match self {
            AgentOutcome::Completed { .. } | AgentOutcome::Replied { .. } => "completed",
            AgentOutcome::InputRequired { .. } => "input-required",
            AgentOutcome::AuthRequired { .. } => "auth-required",
            AgentOutcome::Rejected { .. } => "rejected",
            AgentOutcome::Failed { .. } => "failed",
            AgentOutcome::Canceled => "canceled",
        }
    }
}

/// Something that can run a turn of a task.
#[async_trait]
pub trait Agent: Send + Sync + std::fmt::Debug + 'static {
    /// Runs one turn. Implementations watch `cancel` and return [`AgentOutcome::Canceled`] at
    /// the next safe point once it fires.
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome;

    /// Whether a turn begun by `message` may end in [`AgentOutcome::Replied`]. A streamed A2A
    /// answer to such a turn waits for its end, since a reply is streamed as a single Message
    /// (A2A §3.1.2); one that cannot reply streams as it goes. A turn that replies although
    /// this said it would not is streamed as its Task.
    fn may_reply(&self, _message: &Message) -> bool {
        false
    }

    /// The settled conversation of `context_id` as user and agent messages, oldest first, when
    /// the agent keeps one in a session store; `None` otherwise.
    async fn conversation(&self, _context_id: &str) -> Option<Vec<Message>> {
        None
    }
}
