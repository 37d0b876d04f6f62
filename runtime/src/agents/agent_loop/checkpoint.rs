//! A turn's checkpoints (durable turns, first step): after each step of the tool loop that
//! completes — the model's answer received whole, then its tool calls' results received — what
//! the loop needs to go on from there is handed to a [`Checkpointer`], which stores it, before
//! the next step starts. A turn given a checkpoint ([`AgentRequest::resume`]) goes on from it
//! instead of starting over: no step it holds is asked of the model again.
//!
//! A checkpoint taken between a model answer and its tool results names the calls still
//! `pending`. Resumed, such a call is not made again, since it may have taken effect: the model
//! reads that it was interrupted, and the loop goes on. A call that starts a task of another
//! A2A agent notes that task's id in the step's checkpoint as soon as the agent names it
//! ([`StartedNote`]), and a resumed turn asks that agent for the task instead of sending the
//! message again.
//!
//! [`AgentRequest::resume`]: super::AgentRequest::resume

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use daedalus_contract::Artifact;
use serde::{Deserialize, Serialize};

use super::ToolResult;
use crate::agents::llm::{ChatMessage, ToolCall, Usage};

/// The version of a checkpoint's stored form; a checkpoint of another version is not resumed.
pub const CHECKPOINT_VERSION: u32 = 1;

/// What the tool loop needs to go on after a completed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub version: u32,
    /// The last step (model call) whose answer was received whole.
    pub step: u32,
    /// The system prompt the turn's model calls carry (the instruction, and a summary of the
    /// conversation's compacted past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation as the next model call gets it.
    pub messages: Vec<ChatMessage>,
    /// Tool calls of step `step` whose results were not received yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<ToolCall>,
    /// The remote tasks pending calls started (another A2A agent's), by call id: a resumed
    /// turn follows such a task instead of making its call again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub started: BTreeMap<String, String>,
    /// Files the tool calls returned so far, for the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Artifact>,
    /// Tokens the turn's model calls used so far.
    #[serde(default)]
    pub usage: Usage,
    /// The rows the turn wrote to the conversation store so far, settled when it ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversation_rows: Vec<i64>,
}

impl Checkpoint {
    /// Whether this checkpoint can be resumed by this runtime.
    pub fn resumable(&self) -> bool {
        self.version == CHECKPOINT_VERSION && !self.messages.is_empty()
    }
}

/// Where a turn's checkpoints go: stored durably before [`Checkpointer::save`] returns (a
/// checkpoint that cannot be stored is logged by the checkpointer; the turn goes on, and a
/// resume would start from the one before).
#[async_trait]
pub trait Checkpointer: Send + Sync + fmt::Debug {
    async fn save(&self, checkpoint: &Checkpoint);
}

/// A turn's checkpointer, if it has one.
#[derive(Clone, Default)]
pub struct Checkpoints(Option<Arc<dyn Checkpointer>>);

impl Checkpoints {
    pub fn new(checkpointer: Arc<dyn Checkpointer>) -> Self {
        Self(Some(checkpointer))
    }

    /// Hands `checkpoint` to the checkpointer (nothing without one).
    pub async fn save(&self, checkpoint: &Checkpoint) {
        if let Some(checkpointer) = &self.0 {
            checkpointer.save(checkpoint).await;
        }
    }

    /// Whether checkpoints are taken.
    pub fn on(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Checkpoints(on)"
        } else {
            "Checkpoints(off)"
        })
    }
}

/// The longest remote task id a call notes: an id is the remote agent's to choose, and a
/// longer one is not kept (a resume then treats the call as interrupted).
pub const MAX_STARTED_ID: usize = 1024;

/// The checkpoint of a step whose tool calls are in flight, kept while they are, so a call can
/// note the remote task it started ([`StartedNote`]); closed once the step's results are in,
/// after which a late note is not stored (it would bring the step's calls back as pending).
#[derive(Debug)]
pub struct InFlight {
    checkpoints: Checkpoints,
    /// `None` once closed.
    checkpoint: tokio::sync::Mutex<Option<Checkpoint>>,
}

impl InFlight {
    pub fn new(checkpoints: Checkpoints, checkpoint: Checkpoint) -> Arc<Self> {
        Arc::new(Self {
            checkpoints,
            checkpoint: tokio::sync::Mutex::new(Some(checkpoint)),
        })
    }

    /// Where the call `call_id` notes the remote task it starts.
    pub fn note_for(self: &Arc<Self>, call_id: &str) -> StartedNote {
        StartedNote {
            in_flight: Arc::clone(self),
            call_id: call_id.to_owned(),
        }
    }

    /// The step's results are in: no note is stored after this returns (one being stored
    /// finishes first).
    pub async fn close(&self) {
        self.checkpoint.lock().await.take();
    }
}

/// Where one tool call notes the remote task it started, stored in its step's checkpoint
/// before [`StartedNote::started`] returns.
#[derive(Clone)]
pub struct StartedNote {
    in_flight: Arc<InFlight>,
    call_id: String,
}

impl StartedNote {
    /// Notes that the call started the remote task `task_id` (nothing when the id is longer
    /// than [`MAX_STARTED_ID`], already noted, or the step is over).
    pub async fn started(&self, task_id: &str) {
        if task_id.is_empty() || task_id.len() > MAX_STARTED_ID {
            return;
        }
        let mut guard = self.in_flight.checkpoint.lock().await;
        let Some(checkpoint) = guard.as_mut() else {
            return;
        };
        if checkpoint.started.get(&self.call_id).map(String::as_str) == Some(task_id) {
            return;
        }
        checkpoint
            .started
            .insert(self.call_id.clone(), task_id.to_owned());
        self.in_flight.checkpoints.save(checkpoint).await;
    }
}

impl fmt::Debug for StartedNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StartedNote")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// What the model reads for a tool call that was in flight when the turn was interrupted and
/// is not made again.
pub fn interrupted(call: &ToolCall) -> ToolResult {
    ToolResult::error(format!(
        "The call to {} was interrupted: the runtime running this turn stopped while it was in flight. It may or may not have taken effect, and it was not made again.",
        call.name
    ))
}

/// `usage` with `more` added.
pub fn add_usage(usage: &mut Usage, more: &Usage) {
    usage.input_tokens += more.input_tokens;
    usage.output_tokens += more.output_tokens;
    usage.cache_read_tokens += more.cache_read_tokens;
    usage.cache_write_tokens += more.cache_write_tokens;
    usage.reasoning_tokens += more.reasoning_tokens;
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn a_checkpoint() -> Checkpoint {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            step: 2,
            system: Some("Use the tools.".to_owned()),
            messages: vec![ChatMessage::User {
                content: vec![crate::agents::llm::Content::Text {
                    text: "add 2 and 3".to_owned(),
                }],
            }],
            pending: vec![ToolCall {
                id: "c1".to_owned(),
                name: "fixture__add".to_owned(),
                arguments: serde_json::json!({"a": 2}),
            }],
            started: BTreeMap::new(),
            files: Vec::new(),
            usage: Usage {
                input_tokens: 10,
                ..Usage::default()
            },
            conversation_rows: vec![4, 5],
        }
    }

    #[test]
    fn a_checkpoint_round_trips_and_another_version_is_not_resumed() {
        let checkpoint = Checkpoint {
            started: BTreeMap::from([("c1".to_owned(), "remote-7".to_owned())]),
            ..a_checkpoint()
        };
        let stored = serde_json::to_string(&checkpoint).unwrap();
        let read: Checkpoint = serde_json::from_str(&stored).unwrap();
        assert_eq!(read, checkpoint);
        assert!(read.resumable());
        let newer = Checkpoint {
            version: CHECKPOINT_VERSION + 1,
            ..read
        };
        assert!(!newer.resumable());
    }

    /// Keeps what it is handed.
    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<Checkpoint>>);

    #[async_trait]
    impl Checkpointer for Kept {
        async fn save(&self, checkpoint: &Checkpoint) {
            self.0.lock().unwrap().push(checkpoint.clone());
        }
    }

    #[tokio::test]
    async fn a_started_task_is_stored_in_its_steps_checkpoint_until_the_step_is_over() {
        let kept = Arc::new(Kept::default());
        let in_flight = InFlight::new(Checkpoints::new(kept.clone()), a_checkpoint());
        let note = in_flight.note_for("c1");
        note.started("remote-1").await;
        note.started("remote-1").await;
        note.started(&"x".repeat(MAX_STARTED_ID + 1)).await;
        in_flight.close().await;
        note.started("remote-2").await;
        let saved = kept.0.lock().unwrap();
        assert_eq!(
            saved.len(),
            1,
            "stored once: not again for the same id, nor for one too long, nor after the step"
        );
        assert_eq!(
            saved[0].started,
            BTreeMap::from([("c1".to_owned(), "remote-1".to_owned())])
        );
        assert_eq!(
            saved[0].pending,
            a_checkpoint().pending,
            "the step's calls stay pending"
        );
    }
}
