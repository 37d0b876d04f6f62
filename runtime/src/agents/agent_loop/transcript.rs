//! What one turn writes to the session store: rows appended as `pending` while the loop runs,
//! then all marked `complete` (or `error` if the turn failed or was interrupted), so a crash
//! mid-loop leaves nothing half-true in the conversation. The turn's answer is written with
//! that last change, in one store call. Where the turn's writes wait for its next awaited
//! write ([`TurnWrites::with_the_end`]: the default store), each append joins the commit of the
//! step's checkpoint, or of the turn's end, instead of making one of its own.

use std::sync::Arc;

use crate::agents::llm::ToolCall;
use crate::stores::conversations::{
    self, Conversation, ConversationStore, NewRow, RowRole, RowStatus,
};
use crate::stores::turn_writes::TurnWrites;

/// The rows of one turn in one conversation.
#[derive(Debug)]
pub(crate) struct Transcript {
    store: Option<Arc<dyn ConversationStore>>,
    /// Where writes wait for the turn's next awaited write, when they do.
    writes: TurnWrites,
    context: String,
    written: Vec<i64>,
    /// Rows written when the turn settles (its answer, say), with the status it ends with.
    staged: Vec<NewRow>,
}

impl Transcript {
    pub(crate) fn new(store: Option<Arc<dyn ConversationStore>>, context: &str) -> Self {
        Self {
            store,
            writes: TurnWrites::now(),
            context: context.to_owned(),
            written: Vec::new(),
            staged: Vec::new(),
        }
    }

    /// Its appends wait in `writes` for the turn's next awaited write, when it holds them.
    pub(crate) fn holding(mut self, writes: &TurnWrites) -> Self {
        self.writes = writes.clone();
        self
    }

    /// The conversation so far (its last `last` rows at most), if there is a store. A read
    /// that was cut short starts at its first user row, so no turn is seen from its middle.
    pub(crate) async fn earlier(&self, last: usize) -> Option<Conversation> {
        let store = self.store.as_ref()?;
        match store.rows(&self.context, last).await {
            Ok(rows) => {
                let start = if rows.len() >= last {
                    rows.iter()
                        .position(|r| r.role == RowRole::User)
                        .unwrap_or(rows.len())
                } else {
                    0
                };
                Some(Conversation::from_rows(&rows[start..]))
            }
            Err(e) => {
                tracing::error!(error = %e, context = %self.context, "cannot read the conversation; going on without it");
                Some(Conversation::default())
            }
        }
    }

    /// The last `last` stored rows of the conversation, if there is a store and it answers.
    pub(crate) async fn rows(&self, last: usize) -> Option<Vec<conversations::Row>> {
        let store = self.store.as_ref()?;
        match store.rows(&self.context, last).await {
            Ok(rows) => Some(rows),
            Err(e) => {
                tracing::error!(error = %e, context = %self.context, "cannot read the conversation");
                None
            }
        }
    }

    async fn write(&mut self, rows: Vec<NewRow>) {
        let Some(store) = &self.store else { return };
        if self.writes.wait_for_the_end() {
            let (ids, appended) = store.append_later(&self.context, rows).await;
            self.written.extend(ids);
            let context = self.context.clone();
            self.writes
                .hold(Box::pin(async move {
                    if let Err(e) = appended.await {
                        tracing::error!(error = %e, context = %context, "cannot record the conversation");
                    }
                }))
                .await;
            return;
        }
        match store.append(&self.context, rows).await {
            Ok(ids) => self.written.extend(ids),
            Err(e) => {
                tracing::error!(error = %e, context = %self.context, "cannot record the conversation");
            }
        }
    }

    fn row(role: RowRole, content: String) -> NewRow {
        NewRow::new(role, content, RowStatus::Pending)
    }

    fn user_row(text: String, message_id: &str) -> NewRow {
        let mut row = Self::row(RowRole::User, text);
        row.message_id = Some(message_id.to_owned());
        row
    }

    /// The rows this turn wrote so far (a checkpoint keeps them).
    pub(crate) fn written(&self) -> &[i64] {
        &self.written
    }

    /// Goes on with the rows a checkpoint says this turn wrote before it was interrupted: they
    /// are settled with the rest.
    pub(crate) fn resume_rows(&mut self, rows: &[i64]) {
        self.written.extend_from_slice(rows);
    }

    /// The user's message `text`, sent as `message_id`.
    pub(crate) async fn user(&mut self, text: String, message_id: &str) {
        let row = Self::user_row(text, message_id);
        self.write(vec![row]).await;
    }

    /// The user's message, written only when the turn settles: for a turn with nothing to
    /// record in between (a pending row is never shown, so writing it first would only cost
    /// a store call).
    pub(crate) fn user_at_settle(&mut self, text: String, message_id: &str) {
        self.staged.push(Self::user_row(text, message_id));
    }

    /// Compaction: the rows through turn `through` give way to `summary` (or just go).
    /// Returns whether the store did it.
    pub(crate) async fn compact(&self, through: i64, summary: Option<String>) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        match store.compact(&self.context, through, summary).await {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(error = %e, context = %self.context, "cannot compact the conversation; it stays as it was");
                false
            }
        }
    }

    pub(crate) async fn assistant(&mut self, text: Option<String>, tool_calls: Vec<ToolCall>) {
        let mut row = Self::row(RowRole::Assistant, text.unwrap_or_default());
        row.tool_calls = tool_calls;
        self.write(vec![row]).await;
    }

    /// The turn's answer: written when it settles, with the status the turn ends with.
    pub(crate) fn answer(&mut self, text: String) {
        self.staged.push(Self::row(RowRole::Assistant, text));
    }

    pub(crate) async fn tool_results(&mut self, results: Vec<(String, String, bool)>) {
        let rows = results
            .into_iter()
            .map(|(call_id, content, is_error)| {
                let mut row = Self::row(RowRole::Tool, content);
                row.tool_call_id = Some(call_id);
                row.is_error = is_error;
                row
            })
            .collect();
        self.write(rows).await;
    }

    /// Writes the answer, if any, and marks this turn's rows `complete` (`ok`) or `error`:
    /// with the turn's end, where `writes` waits for it ([`TurnWrites`]), else now.
    pub(crate) async fn settle_with(self, ok: bool, writes: &TurnWrites) {
        if !writes.wait_for_the_end() {
            return self.settle(ok).await;
        }
        let Some(store) = &self.store else { return };
        let (status, staged) = Self::closing(self.staged, ok);
        if self.written.is_empty() && staged.is_empty() {
            return;
        }
        let finished = store
            .finish_later(&self.context, &self.written, staged, status)
            .await;
        let context = self.context;
        writes
            .hold(Box::pin(async move {
                if let Err(e) = finished.await {
                    tracing::error!(error = %e, context = %context, "cannot settle the conversation's rows");
                }
            }))
            .await;
    }

    /// The status a turn's rows end with, and its staged rows with it.
    fn closing(staged: Vec<NewRow>, ok: bool) -> (RowStatus, Vec<NewRow>) {
        let status = if ok {
            RowStatus::Complete
        } else {
            RowStatus::Error
        };
        let staged = staged
            .into_iter()
            .map(|row| NewRow { status, ..row })
            .collect();
        (status, staged)
    }

    /// Writes the answer, if any, and marks this turn's rows `complete` (`ok`) or `error`.
    pub(crate) async fn settle(self, ok: bool) {
        let Some(store) = &self.store else { return };
        let (status, staged) = Self::closing(self.staged, ok);
        if self.written.is_empty() && staged.is_empty() {
            return;
        }
        if let Err(e) = store
            .finish(&self.context, &self.written, staged, status)
            .await
        {
            tracing::error!(error = %e, context = %self.context, "cannot settle the conversation's rows");
        }
    }
}
