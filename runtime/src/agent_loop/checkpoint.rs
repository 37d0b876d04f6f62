//! A turn's checkpoints (durable turns, first step): after each step of the tool loop that
//! completes — the model's answer received whole, then its tool calls' results received — what
//! the loop needs to go on from there is handed to a [`Checkpointer`], which stores it, before
//! the next step starts. A turn given a checkpoint ([`AgentRequest::resume`]) goes on from it
//! instead of starting over: no step it holds is asked of the model again.
//!
//! A checkpoint taken between a model answer and its tool results names the calls still
//! `pending`. Resumed, such a call is not made again, since it may have taken effect: the model
//! reads that it was interrupted, and the loop goes on.
//!
//! [`AgentRequest::resume`]: super::AgentRequest::resume

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use daedalus_contract::Artifact;
use serde::{Deserialize, Serialize};

use super::ToolResult;
use crate::llm::{ChatMessage, ToolCall, Usage};

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

/// What the model reads for a tool call that was in flight when the turn was interrupted and
/// is not made again.
pub fn interrupted(call: &ToolCall) -> ToolResult {
    ToolResult {
        content: format!(
            "The call to {} was interrupted: the runtime running this turn stopped while it was in flight. It may or may not have taken effect, and it was not made again.",
            call.name
        ),
        is_error: true,
        files: Vec::new(),
    }
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
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_another_version_is_not_resumed() {
        let checkpoint = Checkpoint {
            version: CHECKPOINT_VERSION,
            step: 2,
            system: Some("Use the tools.".to_owned()),
            messages: vec![ChatMessage::User {
                content: vec![crate::llm::Content::Text {
                    text: "add 2 and 3".to_owned(),
                }],
            }],
            pending: vec![ToolCall {
                id: "c1".to_owned(),
                name: "fixture__add".to_owned(),
                arguments: serde_json::json!({"a": 2}),
            }],
            files: Vec::new(),
            usage: Usage {
                input_tokens: 10,
                ..Usage::default()
            },
            conversation_rows: vec![4, 5],
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
}
