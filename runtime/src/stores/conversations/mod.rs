//! Conversations that outlive a task and a restart: message rows per context behind the
//! [`ConversationStore`] seam (SQLite by default), with mcpctl's row model — role, content, tool
//! calls, the tool-call id a result answers, `pending`/`complete`/`error`, and a monotonic
//! turn index — and the rules that rebuild a model-ready history from them. Configured by
//! `SESSION_STORE` (the flag keeps its name).
//!
//! A conversation that outgrows its model is compacted ([`ConversationStore::compact`]): its oldest
//! rows go, and a `summary` row (when the agent summarizes) takes the place of the last of
//! them, so what remains stays in turn order.

mod history;
pub mod message;
mod nats_kv;
mod sqlite;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use history::{Conversation, StoredTurn, as_messages, rebuild};
pub use nats_kv::NatsKvStore;
pub use sqlite::SqliteStore;

/// The most rows a turn or a history read takes from a conversation: far more than any
/// context window holds (each row costs the model a few tokens at least).
pub const MAX_ROWS_READ: usize = 10_000;

use message::ToolCall;

/// Who wrote a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowRole {
    User,
    Assistant,
    Tool,
    /// What compaction left of the rows before it: a summary of them.
    Summary,
}

impl RowRole {
    /// The role as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            RowRole::User => "user",
            RowRole::Assistant => "assistant",
            RowRole::Tool => "tool",
            RowRole::Summary => "summary",
        }
    }
}

/// Where a row is in its life: written while a turn runs (`pending`), settled (`complete`), or
/// part of a turn that failed or was interrupted (`error`, skipped when history is rebuilt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    Pending,
    Complete,
    Error,
}

/// A row to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRow {
    pub role: RowRole,
    pub content: String,
    /// For a user row: the `messageId` the client sent it with (shown again in `history`).
    pub message_id: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// For a tool row: the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool row: whether it reports an error.
    pub is_error: bool,
    pub status: RowStatus,
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: i64,
    /// Monotonic per context, from 0.
    pub turn: i64,
    pub role: RowRole,
    pub content: String,
    pub message_id: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub is_error: bool,
    pub status: RowStatus,
}

impl NewRow {
    /// A row of `role` saying `content`, with no tool traffic and no message id.
    pub fn new(role: RowRole, content: impl Into<String>, status: RowStatus) -> Self {
        Self {
            role,
            content: content.into(),
            message_id: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            status,
        }
    }
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store at `location` failed; `source` is the SQLite or NATS error underneath.
    #[error("session store {location}: {source}")]
    Backend {
        location: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where conversations are kept.
#[async_trait]
pub trait ConversationStore: Send + Sync + std::fmt::Debug + 'static {
    /// Appends rows to `context` in order, each with the next turn index; returns their ids.
    async fn append(&self, context: &str, rows: Vec<NewRow>) -> Result<Vec<i64>, StoreError>;
    /// Sets the status of rows of `context`, by the ids `append` returned.
    async fn set_status(
        &self,
        context: &str,
        ids: &[i64],
        status: RowStatus,
    ) -> Result<(), StoreError>;
    /// Ends a turn in one write where the store can: appends `rows` as they are (their own
    /// status) and sets `status` on the rows of `ids`. Returns the new rows' ids.
    async fn finish(
        &self,
        context: &str,
        ids: &[i64],
        rows: Vec<NewRow>,
        status: RowStatus,
    ) -> Result<Vec<i64>, StoreError> {
        let appended = self.append(context, rows).await?;
        self.set_status(context, ids, status).await?;
        Ok(appended)
    }
    /// [`ConversationStore::append`], committed with the turn's next awaited write (its next
    /// checkpoint, its end) where the store can: a store on the task store's writer queues it
    /// and answers the rows' ids at once, and their write once committed; any other makes it
    /// now (and answers no id when it fails).
    async fn append_later(
        &self,
        context: &str,
        rows: Vec<NewRow>,
    ) -> (
        Vec<i64>,
        crate::stores::turn_writes::Pending<Result<(), StoreError>>,
    ) {
        appended_now(self.append(context, rows).await)
    }
    /// [`ConversationStore::finish`], committed with the turn's end where the store can: a
    /// store on the task store's writer queues it to join the end's commit and answers at once
    /// (what it answers is there once committed); any other makes it now.
    async fn finish_later(
        &self,
        context: &str,
        ids: &[i64],
        rows: Vec<NewRow>,
        status: RowStatus,
    ) -> crate::stores::turn_writes::Pending<Result<Vec<i64>, StoreError>> {
        let finished = self.finish(context, ids, rows, status).await;
        Box::pin(async move { finished })
    }
    /// The last `last` rows of `context` (all of them with `usize::MAX`), by turn.
    async fn rows(&self, context: &str, last: usize) -> Result<Vec<Row>, StoreError>;
    /// Compaction: removes every row of `context` up to and including turn `through`, and,
    /// with a `summary`, writes it as a complete [`RowRole::Summary`] row at turn `through`
    /// (so it sorts before every row that stays). Returns how many rows were removed, the one
    /// the summary took the place of included.
    async fn compact(
        &self,
        context: &str,
        through: i64,
        summary: Option<String>,
    ) -> Result<u64, StoreError>;
    /// After a crash: `pending` rows no running turn can still own become `error`. Looks only
    /// at pending rows; a row it cannot read is skipped with a warning. Returns how many.
    async fn recover(&self) -> Result<u64, StoreError>;
}

/// [`ConversationStore::append_later`] of an append made already (`appended`): its ids (none
/// when it failed), and its outcome, ready.
pub(crate) fn appended_now(
    appended: Result<Vec<i64>, StoreError>,
) -> (
    Vec<i64>,
    crate::stores::turn_writes::Pending<Result<(), StoreError>>,
) {
    match appended {
        Ok(ids) => (ids, Box::pin(async { Ok(()) })),
        Err(e) => (Vec::new(), Box::pin(async move { Err(e) })),
    }
}
