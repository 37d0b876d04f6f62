//! What a conversation is made of: its messages, as the agent loop and every model provider
//! speak them, and as the stores keep them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    User {
        content: Vec<Content>,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// A piece of user content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    /// Base64 image bytes.
    Image {
        media_type: String,
        data: String,
    },
    /// An image by URL.
    ImageUrl {
        url: String,
    },
}

/// A call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}
