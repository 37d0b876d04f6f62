//! Rebuilding the model's view of a conversation from stored rows: `error` and `pending` rows
//! are skipped, and an assistant turn's tool calls are kept only with a complete result for
//! each — a model never sees a tool call without its result, nor a result without its call.
//! [`Conversation`] also keeps where each turn starts, which compaction cuts at.

use std::collections::HashSet;

use daedalus_contract::{Message, Part, Role};

use super::message::{ChatMessage, Content, ToolCall};
use super::{Row, RowRole, RowStatus};

/// The settled user and agent text of `rows` as A2A messages of `context`, for
/// `Task.history`: tool traffic, summaries and unsettled turns are left out. A user message
/// keeps the `messageId` it was sent with; other ids are stable (`<context>/<turn>`), so asking
/// twice gives the same history.
pub fn as_messages(context: &str, rows: &[Row]) -> Vec<Message> {
    rows.iter()
        .filter(|r| r.status == RowStatus::Complete && !r.content.is_empty())
        .filter_map(|r| {
            let role = match r.role {
                RowRole::User => Role::User,
                RowRole::Assistant => Role::Agent,
                RowRole::Tool | RowRole::Summary => return None,
            };
            let id = r
                .message_id
                .clone()
                .unwrap_or_else(|| format!("{context}/{}", r.turn));
            let mut m = Message::new(id, role, vec![Part::text(&r.content)]);
            m.context_id = Some(context.to_owned());
            Some(m)
        })
        .collect()
}

/// A stored conversation as the model sees it, turn by turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// What the last compaction left of the turns before these.
    pub summary: Option<String>,
    /// Each from a user row to the row before the next, oldest first.
    pub turns: Vec<StoredTurn>,
    /// The turn index of the last row read.
    pub last_row: Option<i64>,
}

/// One turn of a [`Conversation`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    /// The turn index of its first row: compacting this turn and all before it removes the
    /// rows up to the next turn's first row.
    pub first_row: i64,
    pub messages: Vec<ChatMessage>,
}

impl Conversation {
    /// `rows` (in turn order) split at each user row; the newest summary is kept apart.
    pub fn from_rows(rows: &[Row]) -> Self {
        let summary = rows
            .iter()
            .rev()
            .find(|r| r.role == RowRole::Summary && r.status == RowStatus::Complete)
            .map(|r| r.content.clone());
        let mut starts: Vec<usize> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.role == RowRole::User)
            .map(|(i, _)| i)
            .collect();
        // Rows before the first user row (a summary, or what a cut read began with).
        if starts.first() != Some(&0) && !rows.is_empty() {
            starts.insert(0, 0);
        }
        let turns = starts
            .iter()
            .enumerate()
            .map(|(n, &start)| {
                let end = starts.get(n + 1).copied().unwrap_or(rows.len());
                StoredTurn {
                    first_row: rows[start].turn,
                    messages: rebuild(&rows[start..end]),
                }
            })
            .filter(|t| !t.messages.is_empty() || t.first_row == rows[0].turn)
            .collect();
        Self {
            summary,
            turns,
            last_row: rows.last().map(|r| r.turn),
        }
    }

    /// The turns' messages, oldest first (the summary is not among them).
    pub fn messages(&self) -> impl Iterator<Item = &ChatMessage> {
        self.turns.iter().flat_map(|t| &t.messages)
    }
}

/// The conversation of `rows` as chat messages (summaries are not among them).
pub fn rebuild(rows: &[Row]) -> Vec<ChatMessage> {
    let settled: Vec<&Row> = rows
        .iter()
        .filter(|r| r.status == RowStatus::Complete)
        .collect();
    let answered: HashSet<&str> = settled
        .iter()
        .filter(|r| r.role == RowRole::Tool)
        .filter_map(|r| r.tool_call_id.as_deref())
        .collect();
    let mut offered: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(settled.len());
    for row in settled {
        match row.role {
            RowRole::Summary => {}
            RowRole::User => out.push(ChatMessage::User {
                content: vec![Content::Text {
                    text: row.content.clone(),
                }],
            }),
            RowRole::Assistant => {
                let calls: Vec<ToolCall> = row
                    .tool_calls
                    .iter()
                    .filter(|c| answered.contains(c.id.as_str()))
                    .cloned()
                    .collect();
                offered.extend(calls.iter().map(|c| c.id.clone()));
                let text = Some(row.content.clone()).filter(|t| !t.is_empty());
                if text.is_some() || !calls.is_empty() {
                    out.push(ChatMessage::Assistant {
                        text,
                        tool_calls: calls,
                    });
                }
            }
            RowRole::Tool => {
                if let Some(id) = row.tool_call_id.as_ref().filter(|id| offered.contains(*id)) {
                    out.push(ChatMessage::Tool {
                        call_id: id.clone(),
                        content: row.content.clone(),
                        is_error: row.is_error,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(turn: i64, role: RowRole, content: &str, status: RowStatus) -> Row {
        Row {
            id: turn,
            turn,
            role,
            content: content.into(),
            message_id: None,
            tool_calls: vec![],
            tool_call_id: None,
            is_error: false,
            status,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "s__t".into(),
            arguments: json!({}),
        }
    }

    #[test]
    fn error_and_pending_rows_are_skipped_and_no_call_is_left_unanswered() {
        let mut assistant = row(1, RowRole::Assistant, "", RowStatus::Complete);
        assistant.tool_calls = vec![call("a"), call("b")];
        let mut result_a = row(2, RowRole::Tool, "ok", RowStatus::Complete);
        result_a.tool_call_id = Some("a".into());
        let mut result_b = row(3, RowRole::Tool, "boom", RowStatus::Error);
        result_b.tool_call_id = Some("b".into());
        let mut orphan = row(4, RowRole::Tool, "stray", RowStatus::Complete);
        orphan.tool_call_id = Some("zzz".into());
        let rows = vec![
            row(0, RowRole::User, "hi", RowStatus::Complete),
            assistant,
            result_a,
            result_b,
            orphan,
            row(5, RowRole::Assistant, "done", RowStatus::Complete),
            row(6, RowRole::User, "crashed turn", RowStatus::Error),
            row(7, RowRole::Assistant, "half", RowStatus::Pending),
        ];
        let messages = rebuild(&rows);
        assert_eq!(messages.len(), 4, "{messages:?}");
        match &messages[1] {
            ChatMessage::Assistant { tool_calls, .. } => {
                assert_eq!(tool_calls, &vec![call("a")], "b has no complete result");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&messages[2], ChatMessage::Tool { call_id, .. } if call_id == "a"));
        assert!(
            matches!(&messages[3], ChatMessage::Assistant { text: Some(t), .. } if t == "done")
        );
    }

    #[test]
    fn an_assistant_turn_left_with_nothing_is_dropped() {
        let mut assistant = row(1, RowRole::Assistant, "", RowStatus::Complete);
        assistant.tool_calls = vec![call("lost")];
        let messages = rebuild(&[row(0, RowRole::User, "q", RowStatus::Complete), assistant]);
        assert_eq!(messages.len(), 1);
    }

    #[test]
    fn a_conversation_splits_at_user_rows_and_keeps_the_summary_apart() {
        let mut assistant = row(4, RowRole::Assistant, "", RowStatus::Complete);
        assistant.tool_calls = vec![call("a")];
        let mut result = row(5, RowRole::Tool, "ok", RowStatus::Complete);
        result.tool_call_id = Some("a".into());
        let rows = vec![
            row(2, RowRole::Summary, "they met", RowStatus::Complete),
            row(3, RowRole::User, "q1", RowStatus::Complete),
            assistant,
            result,
            row(6, RowRole::Assistant, "a1", RowStatus::Complete),
            row(7, RowRole::User, "failed turn", RowStatus::Error),
            row(8, RowRole::User, "q2", RowStatus::Complete),
            row(9, RowRole::Assistant, "a2", RowStatus::Complete),
        ];
        let conversation = Conversation::from_rows(&rows);
        assert_eq!(conversation.summary.as_deref(), Some("they met"));
        let starts: Vec<i64> = conversation.turns.iter().map(|t| t.first_row).collect();
        // The summary's own group (no messages) stays, so a cut before q1 removes it too.
        assert_eq!(starts, [2, 3, 8]);
        assert_eq!(
            conversation.turns[1].messages.len(),
            4,
            "the tool pair stays in its turn"
        );
        assert_eq!(conversation.messages().count(), 6);
        assert_eq!(conversation.last_row, Some(9));
        let history = as_messages("ctx", &rows);
        assert_eq!(history.len(), 4, "no summary, no tool rows, no failed turn");
    }

    #[test]
    fn a_user_message_keeps_the_id_it_was_sent_with() {
        let mut sent = row(0, RowRole::User, "hi", RowStatus::Complete);
        sent.message_id = Some("client-1".into());
        let history = as_messages(
            "ctx",
            &[
                sent,
                row(1, RowRole::Assistant, "hello", RowStatus::Complete),
            ],
        );
        assert_eq!(history[0].message_id, "client-1");
        assert_eq!(history[1].message_id, "ctx/1");
    }
}
