//! Rebuilding the model's view of a conversation from stored rows: `error` and `pending` rows
//! are skipped, and an assistant turn's tool calls are kept only with a complete result for
//! each — a model never sees a tool call without its result, nor a result without its call.

use std::collections::HashSet;

use daedalus_contract::{Message, Part, Role};

use super::{Row, RowRole, RowStatus};
use crate::llm::{ChatMessage, Content, ToolCall};

/// The settled user and agent text of `rows` as A2A messages of `context`, for
/// `Task.history`: tool traffic and unsettled turns are left out, and each message id is
/// stable (`<context>/<turn>`), so asking twice gives the same history.
pub fn as_messages(context: &str, rows: &[Row]) -> Vec<Message> {
    rows.iter()
        .filter(|r| r.status == RowStatus::Complete && !r.content.is_empty())
        .filter_map(|r| {
            let role = match r.role {
                RowRole::User => Role::User,
                RowRole::Assistant => Role::Agent,
                RowRole::Tool => return None,
            };
            let mut m = Message::new(
                format!("{context}/{}", r.turn),
                role,
                vec![Part::text(&r.content)],
            );
            m.context_id = Some(context.to_owned());
            Some(m)
        })
        .collect()
}

/// The conversation of `rows` as chat messages.
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
}
