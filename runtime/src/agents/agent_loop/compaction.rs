//! Compaction: a conversation that outgrows its model is made to fit before the turn asks the
//! model anything, and the turn reports it (`metadata.compaction`).
//!
//! - **When:** the estimated request (system prompt, tool definitions, the summary so far, the
//!   earlier turns and the new message) passes `threshold` of the budget, `context_window`
//!   minus `max_output_tokens`.
//! - **What:** the oldest whole turns (a turn runs from a user message to the next, so a tool
//!   call never loses its result). `truncate` takes the fewest that bring the request under the
//!   threshold, as the drop-oldest window always did; `summarize` takes turns until the rest
//!   fills at most half the threshold, so that the model call a summary costs buys room for
//!   several turns. The new message always stays.
//! - **How:** `summarize` asks the model for a summary of those turns (and of the summary
//!   before them) and stores it in their place; `truncate` drops them. A summary that cannot
//!   be had (the model fails, or answers nothing) falls back to `truncate`, and the report says
//!   so. The summary reaches the model at the end of the system prompt.

use std::fmt::Write as _;

use daedalus_contract::{Compaction, CompactionStrategy};
use tokio_util::sync::CancellationToken;

use super::window::{message_tokens, text_tokens};
use crate::agents::llm::{
    ChatMessage, ChatRequest, Content, LlmError, LlmEvent, LlmProvider, Usage,
};
use crate::config::deployment::CompactionPolicy;
use crate::config::sampling::Sampling;
use crate::stores::conversations::Conversation;

/// The system prompt of a summary request.
pub const SUMMARY_PROMPT: &str = "You compact a conversation between a user and an \
assistant so that the assistant can continue it within a smaller context. Write a concise \
summary of the conversation you are given: what the user wants, the facts, names, numbers and \
decisions in it, the tool results that still matter, and the questions still open. Write notes \
for the assistant, in the conversation's language. Do not answer the user.";

/// The heading the summary gets in the system prompt.
pub const SUMMARY_HEADING: &str = "Summary of the earlier conversation:";

/// The most characters of one message a summary request shows.
const RENDERED_MESSAGE_CHARS: usize = 8_000;
/// The most characters of one tool result a summary request shows.
const RENDERED_RESULT_CHARS: usize = 2_000;

/// What the turn is about to send, in tokens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// The system prompt and tool definitions.
    pub(crate) fixed: u64,
    /// The new message.
    pub(crate) new: u64,
    /// `context_window` minus `max_output_tokens`.
    pub(crate) room: u64,
}

/// The oldest turns to compact, and the conversation's size before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    /// How many of the conversation's oldest turns go (the summary before them goes too).
    pub(crate) take: usize,
    pub(crate) messages_before: u64,
    pub(crate) tokens_before: u64,
    /// The turns that stay, with the new message and the fixed part.
    pub(crate) messages_kept: u64,
    pub(crate) tokens_kept: u64,
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The tokens `summary` costs in the system prompt.
pub(crate) fn summary_tokens(summary: Option<&str>) -> u64 {
    summary.map_or(0, |s| text_tokens(SUMMARY_HEADING) + text_tokens(s) + 2)
}

/// Which turns go, if the conversation passes the policy's threshold; `None` when it fits, or
/// when nothing older than the new message is left to take.
pub(crate) fn plan(
    conversation: &Conversation,
    budget: Budget,
    policy: &CompactionPolicy,
) -> Option<Cut> {
    let turn_tokens: Vec<u64> = conversation
        .turns
        .iter()
        .map(|t| t.messages.iter().map(message_tokens).sum())
        .collect();
    let summary = summary_tokens(conversation.summary.as_deref());
    let tokens_before = budget.fixed + budget.new + summary + turn_tokens.iter().sum::<u64>();
    let summary_messages = u64::from(conversation.summary.is_some());
    let messages_before = summary_messages + count(conversation.messages().count()) + 1;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a fraction in (0, 1] of a token count"
    )]
    let trigger = (budget.room as f64 * policy.threshold) as u64;
    if tokens_before <= trigger || conversation.turns.is_empty() {
        return None;
    }
    let target = match policy.strategy {
        CompactionStrategy::Summarize => trigger / 2,
        CompactionStrategy::Truncate => trigger,
    };
    let mut kept = tokens_before - summary;
    let mut take = 0;
    while kept > target && take < turn_tokens.len() {
        kept -= turn_tokens[take];
        take += 1;
    }
    let messages_taken: usize = conversation.turns[..take]
        .iter()
        .map(|t| t.messages.len())
        .sum();
    Some(Cut {
        take,
        messages_before,
        tokens_before,
        messages_kept: messages_before - summary_messages - count(messages_taken),
        tokens_kept: kept,
    })
}

/// The turns a summary request shows the model: the summary so far, then each message as a
/// line, long ones cut; the oldest lines go first when it all is more than `max_chars`.
pub(crate) fn render(summary: Option<&str>, messages: &[&ChatMessage], max_chars: usize) -> String {
    fn cut(text: &str, max: usize) -> String {
        match text.char_indices().nth(max) {
            Some((end, _)) => format!("{} […]", &text[..end]),
            None => text.to_owned(),
        }
    }
    let mut lines: Vec<String> = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            ChatMessage::User { content } => {
                let text: Vec<String> = content
                    .iter()
                    .map(|c| match c {
                        Content::Text { text } => cut(text, RENDERED_MESSAGE_CHARS),
                        Content::Image { .. } | Content::ImageUrl { .. } => "[an image]".to_owned(),
                    })
                    .collect();
                lines.push(format!("User: {}", text.join(" ")));
            }
            ChatMessage::Assistant { text, tool_calls } => {
                if let Some(text) = text {
                    lines.push(format!("Assistant: {}", cut(text, RENDERED_MESSAGE_CHARS)));
                }
                for call in tool_calls {
                    let arguments = cut(&call.arguments.to_string(), RENDERED_RESULT_CHARS);
                    lines.push(format!("Assistant called {} with {arguments}", call.name));
                }
            }
            ChatMessage::Tool {
                content, is_error, ..
            } => {
                let kind = if *is_error {
                    "Tool error"
                } else {
                    "Tool result"
                };
                lines.push(format!("{kind}: {}", cut(content, RENDERED_RESULT_CHARS)));
            }
        }
    }
    let head = summary.map(|s| format!("Summary so far:\n{}\n\nThen:\n", cut(s, max_chars / 2)));
    let head_len = head.as_ref().map_or(0, String::len);
    let mut total: usize = head_len + lines.iter().map(|l| l.len() + 1).sum::<usize>();
    let mut skipped = 0;
    while total > max_chars && skipped < lines.len() {
        total -= lines[skipped].len() + 1;
        skipped += 1;
    }
    let mut out = head.unwrap_or_default();
    if skipped > 0 {
        let _ = writeln!(out, "[{skipped} earlier messages left out]");
    }
    for line in &lines[skipped..] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// What a compaction did, for the turn to report.
#[derive(Debug, Clone)]
pub(crate) struct Compacted {
    pub(crate) report: Compaction,
    /// What the summary request cost, if one was made.
    pub(crate) usage: Option<Usage>,
}

/// The model that writes summaries: the agent's own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summarizer<'a> {
    pub(crate) agent: &'a str,
    pub(crate) provider: &'a dyn LlmProvider,
    pub(crate) model: &'a str,
    pub(crate) max_output_tokens: u32,
    /// The caller the summary is written for (a provider that forwards bearers gets theirs).
    pub(crate) caller: &'a crate::platform::bearer::Bearer,
}

impl Summarizer<'_> {
    /// Compacts `conversation` by `cut` under `policy`: asks for a summary when the policy
    /// says so, and takes the turns out. The caller stores the result.
    pub(crate) async fn compact(
        &self,
        policy: &CompactionPolicy,
        conversation: &mut Conversation,
        cut: Cut,
        budget: Budget,
        cancel: &CancellationToken,
    ) -> Compacted {
        let mut usage = None;
        let summary = match policy.strategy {
            CompactionStrategy::Summarize => {
                match self.summarize(conversation, cut, budget, cancel).await {
                    Ok((summary, used)) => {
                        usage = Some(used);
                        Some(summary)
                    }
                    Err(why) => {
                        tracing::warn!(agent = %self.agent, %why, "cannot summarize the conversation; its oldest turns are dropped instead");
                        None
                    }
                }
            }
            CompactionStrategy::Truncate => None,
        };
        let strategy = if summary.is_some() {
            CompactionStrategy::Summarize
        } else {
            CompactionStrategy::Truncate
        };
        conversation.turns.drain(..cut.take);
        let added = summary_tokens(summary.as_deref());
        conversation.summary = summary;
        let report = Compaction {
            strategy,
            messages_before: cut.messages_before,
            messages_after: cut.messages_kept + u64::from(conversation.summary.is_some()),
            tokens_before: cut.tokens_before,
            tokens_after: cut.tokens_kept + added,
        };
        Compacted { report, usage }
    }

    /// The model's summary of the summary so far and the turns `cut` takes.
    async fn summarize(
        &self,
        conversation: &Conversation,
        cut: Cut,
        budget: Budget,
        cancel: &CancellationToken,
    ) -> Result<(String, Usage), SummaryError> {
        let summary_tokens = (budget.room / 8)
            .min(u64::from(self.max_output_tokens))
            .max(16);
        let taken: Vec<&ChatMessage> = conversation.turns[..cut.take]
            .iter()
            .flat_map(|t| &t.messages)
            .collect();
        // What the request may show: the budget less the prompt and the summary's own room.
        let shown_tokens = budget
            .room
            .saturating_sub(summary_tokens + text_tokens(SUMMARY_PROMPT));
        let max_chars = usize::try_from(shown_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        let text = render(conversation.summary.as_deref(), &taken, max_chars);
        let request = ChatRequest {
            model: self.model.to_owned(),
            system: Some(SUMMARY_PROMPT.to_owned()),
            messages: vec![ChatMessage::User {
                content: vec![Content::Text { text }],
            }],
            tools: Vec::new(),
            sampling: Sampling {
                max_tokens: Some(summary_tokens),
                ..Sampling::default()
            },
            stream: false,
            caller: self.caller.clone(),
            extra: serde_json::Map::new(),
        };
        let ignore = |_: LlmEvent| {};
        let answer = tokio::select! {
            answer = self.provider.chat(&request, &ignore) => answer,
            () = cancel.cancelled() => return Err(SummaryError::Canceled),
        };
        let response = answer.map_err(SummaryError::Failed)?;
        match response.text.filter(|t| !t.trim().is_empty()) {
            Some(summary) => Ok((summary, response.usage)),
            None => Err(SummaryError::NoText),
        }
    }
}

/// Why no summary was made (the oldest turns are then dropped instead).
#[derive(Debug, thiserror::Error)]
enum SummaryError {
    #[error("the turn was canceled")]
    Canceled,
    #[error("the summary request failed: {0}")]
    Failed(#[source] LlmError),
    #[error("the model answered the summary request with no text")]
    NoText,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agents::llm::ToolCall;
    use crate::stores::conversations::StoredTurn;

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User {
            content: vec![Content::Text { text: text.into() }],
        }
    }

    fn turn(first_row: i64, size: usize) -> StoredTurn {
        StoredTurn {
            first_row,
            messages: vec![
                user(&"q".repeat(size)),
                ChatMessage::Assistant {
                    text: None,
                    tool_calls: vec![ToolCall {
                        id: format!("c{first_row}"),
                        name: "s__t".into(),
                        arguments: json!({}),
                    }],
                },
                ChatMessage::Tool {
                    call_id: format!("c{first_row}"),
                    content: "r".repeat(size),
                    is_error: false,
                },
                ChatMessage::Assistant {
                    text: Some("a".repeat(size)),
                    tool_calls: Vec::new(),
                },
            ],
        }
    }

    fn conversation(turns: usize, size: usize) -> Conversation {
        Conversation {
            summary: None,
            turns: (0..turns)
                .map(|i| turn(i64::try_from(i * 4).unwrap(), size))
                .collect(),
            last_row: Some(i64::try_from(turns * 4).unwrap() - 1),
        }
    }

    fn policy(threshold: f64) -> CompactionPolicy {
        CompactionPolicy {
            strategy: CompactionStrategy::Truncate,
            threshold,
        }
    }

    fn summarizing(threshold: f64) -> CompactionPolicy {
        CompactionPolicy {
            strategy: CompactionStrategy::Summarize,
            threshold,
        }
    }

    #[test]
    fn a_conversation_under_the_threshold_is_left_alone() {
        let small = conversation(3, 40);
        let budget = Budget {
            fixed: 100,
            new: 10,
            room: 10_000,
        };
        assert_eq!(plan(&small, budget, &policy(0.8)), None);
    }

    #[test]
    fn a_summary_takes_whole_turns_until_the_rest_fills_half_the_threshold() {
        // Each turn: 3 × (400/4 + 4) + 4 + tool call ≈ 330 tokens.
        let long = conversation(10, 400);
        let per_turn: u64 = long.turns[0].messages.iter().map(message_tokens).sum();
        let budget = Budget {
            fixed: 200,
            new: 20,
            room: 4_000,
        };
        let cut = plan(&long, budget, &summarizing(0.8)).expect("10 turns pass 3200 tokens");
        assert_eq!(cut.messages_before, 41);
        assert_eq!(cut.tokens_before, 220 + 10 * per_turn);
        assert!(cut.tokens_kept <= 1_600, "{cut:?}");
        // One turn fewer would not have been enough.
        assert!(cut.tokens_kept + per_turn > 1_600, "{cut:?}");
        assert_eq!(cut.messages_kept, 41 - 4 * count(cut.take));
    }

    #[test]
    fn truncation_drops_the_fewest_turns_that_bring_it_under_the_threshold() {
        let long = conversation(10, 400);
        let per_turn: u64 = long.turns[0].messages.iter().map(message_tokens).sum();
        let budget = Budget {
            fixed: 200,
            new: 20,
            room: 4_000,
        };
        let cut = plan(&long, budget, &policy(0.8)).expect("over");
        assert!(cut.tokens_kept <= 3_200, "{cut:?}");
        assert!(cut.tokens_kept + per_turn > 3_200, "{cut:?}");
    }

    #[test]
    fn a_huge_new_message_takes_every_earlier_turn_and_nothing_more() {
        let short = conversation(2, 40);
        let budget = Budget {
            fixed: 0,
            new: 1_000_000,
            room: 1_000,
        };
        let cut = plan(&short, budget, &policy(1.0)).expect("over");
        assert_eq!(cut.take, 2);
        assert_eq!(cut.messages_kept, 1, "the new message stays");
        let empty = Conversation::default();
        assert_eq!(plan(&empty, budget, &policy(1.0)), None, "nothing to take");
    }

    #[test]
    fn a_summary_request_shows_the_old_summary_and_the_newest_lines_when_cut() {
        let turns = conversation(3, 10);
        let messages: Vec<&ChatMessage> = turns.messages().collect();
        let all = render(Some("they met"), &messages, usize::MAX);
        assert!(all.starts_with("Summary so far:\nthey met"), "{all}");
        assert!(all.contains("User: qqqqqqqqqq"));
        assert!(all.contains("Assistant called s__t with {}"));
        assert!(all.contains("Tool result: rrrrrrrrrr"));
        let cut = render(None, &messages, 60);
        assert!(cut.starts_with('['), "{cut}");
        assert!(cut.contains("earlier messages left out"));
        assert!(cut.ends_with("Assistant: aaaaaaaaaa\n"), "{cut}");
    }
}
