//! Estimating tokens, and the last resort that keeps a request inside the model's context
//! window (`model_capabilities.context_window`, minus the output budget) when compaction could
//! not: the oldest whole turns go first — a turn starts at a user message, so a tool call never
//! loses its result — and the newest turn always stays.
//!
//! Tokens are estimated, not counted (about four characters a token, a flat charge per image),
//! which is what a provider-neutral runtime can know; the estimate errs on the side of dropping.

use crate::agents::llm::{ChatMessage, Content};

/// Estimated tokens per image part.
const IMAGE_TOKENS: u64 = 1_600;
/// Estimated overhead per message (role, separators).
const MESSAGE_TOKENS: u64 = 4;

fn chars(text: &str) -> u64 {
    u64::try_from(text.chars().count()).unwrap_or(u64::MAX)
}

/// An estimate of the tokens `text` takes.
pub(crate) fn text_tokens(text: &str) -> u64 {
    chars(text).div_ceil(4)
}

/// An estimate of the tokens `message` takes.
pub(crate) fn message_tokens(message: &ChatMessage) -> u64 {
    MESSAGE_TOKENS
        + match message {
            ChatMessage::User { content } => content
                .iter()
                .map(|c| match c {
                    Content::Text { text } => text_tokens(text),
                    Content::Image { .. } | Content::ImageUrl { .. } => IMAGE_TOKENS,
                })
                .sum(),
            ChatMessage::Assistant { text, tool_calls } => {
                text.as_deref().map_or(0, text_tokens)
                    + tool_calls
                        .iter()
                        .map(|c| text_tokens(&c.name) + text_tokens(&c.arguments.to_string()))
                        .sum::<u64>()
            }
            ChatMessage::Tool { content, .. } => text_tokens(content),
        }
}

/// Drops the oldest turns of `messages` until they and `fixed` (system prompt and tool
/// definitions, already estimated) fit `budget` tokens; returns how many messages were dropped.
pub(crate) fn fit(messages: &mut Vec<ChatMessage>, fixed: u64, budget: u64) -> usize {
    let mut total: u64 = fixed + messages.iter().map(message_tokens).sum::<u64>();
    let mut cut = 0;
    while total > budget {
        // The start of the next turn after `cut`; none left means only the newest turn remains.
        let Some(next) = messages[cut + 1..]
            .iter()
            .position(|m| matches!(m, ChatMessage::User { .. }))
            .map(|i| cut + 1 + i)
        else {
            break;
        };
        total -= messages[cut..next].iter().map(message_tokens).sum::<u64>();
        cut = next;
    }
    messages.drain(..cut);
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agents::llm::ToolCall;

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User {
            content: vec![Content::Text { text: text.into() }],
        }
    }

    fn turn(n: usize) -> Vec<ChatMessage> {
        vec![
            user(&"question ".repeat(100)),
            ChatMessage::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: format!("c{n}"),
                    name: "s__t".into(),
                    arguments: json!({}),
                }],
            },
            ChatMessage::Tool {
                call_id: format!("c{n}"),
                content: "result ".repeat(100),
                is_error: false,
            },
            ChatMessage::Assistant {
                text: Some("answer ".repeat(50)),
                tool_calls: Vec::new(),
            },
        ]
    }

    #[test]
    fn the_oldest_whole_turns_go_and_the_newest_stays() {
        let mut messages: Vec<ChatMessage> = (0..5).flat_map(turn).collect();
        messages.push(user("now"));
        let all = messages.len();
        let per_turn: u64 = turn(0).iter().map(message_tokens).sum();
        // Room for the new question and two earlier turns.
        let dropped = fit(&mut messages, 100, 100 + 2 * per_turn + 10);
        assert_eq!(dropped, 12, "three whole turns");
        assert_eq!(messages.len(), all - 12);
        assert!(matches!(messages[0], ChatMessage::User { .. }));
        // Every tool result still follows its call.
        assert!(matches!(&messages[2], ChatMessage::Tool { call_id, .. } if call_id == "c3"));
    }

    #[test]
    fn what_fits_is_left_alone_and_the_newest_turn_is_never_dropped() {
        let mut small: Vec<ChatMessage> = turn(0);
        assert_eq!(fit(&mut small, 0, 1_000_000), 0);
        let mut huge = vec![user(&"x".repeat(100_000))];
        assert_eq!(fit(&mut huge, 0, 10), 0, "nothing older to drop");
        assert_eq!(huge.len(), 1);
    }
}
