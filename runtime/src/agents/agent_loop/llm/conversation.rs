//! The conversation a turn starts from: the caller's `messages` override, the stored
//! conversation, or the task's own earlier messages; the model's view of a message; and
//! compaction when the conversation outgrows the window.

use daedalus_contract::{Message, PartContent, Role};
use tokio_util::sync::CancellationToken;

use super::LlmAgent;
use crate::agents::agent_loop::compaction::{self, Budget, Summarizer};
use crate::agents::agent_loop::events::LoopEvent;
use crate::agents::agent_loop::transcript::Transcript;
use crate::agents::agent_loop::{AgentRequest, HistoryMessage, HistoryRole};
use crate::agents::llm::{ChatMessage, Content};
use crate::stores::conversations::{Conversation, StoredTurn};

/// The conversation a `messages` override gives.
fn overridden_conversation(messages: &[HistoryMessage]) -> Conversation {
    let mut conversation = Conversation::default();
    for message in messages {
        let chat = match message.role {
            HistoryRole::User => ChatMessage::User {
                content: vec![Content::Text {
                    text: message.content.clone(),
                }],
            },
            HistoryRole::Assistant => ChatMessage::Assistant {
                text: Some(message.content.clone()),
                tool_calls: Vec::new(),
            },
        };
        append(&mut conversation, chat);
    }
    conversation
}

/// Adds `message` to `conversation`: a user message opens a turn (one that is not stored:
/// `first_row` -1), anything else continues the last one.
fn append(conversation: &mut Conversation, message: ChatMessage) {
    match conversation.turns.last_mut() {
        Some(turn) if !matches!(message, ChatMessage::User { .. }) => turn.messages.push(message),
        _ => conversation.turns.push(StoredTurn {
            first_row: -1,
            messages: vec![message],
        }),
    }
}

impl LlmAgent {
    /// How many stored rows a turn reads: every row costs the model a few tokens at least, so
    /// a quarter of the context window in rows is more than the window can hold.
    pub(super) fn history_rows(&self) -> usize {
        (usize::try_from(self.context_window).unwrap_or(usize::MAX) / 4)
            .clamp(64, crate::stores::conversations::MAX_ROWS_READ)
    }

    /// The model's view of a contract message; `Err` says why it cannot have one.
    pub(super) fn content(&self, message: &Message) -> Result<Vec<Content>, super::CannotStart> {
        let mut out = Vec::with_capacity(message.parts.len());
        for part in &message.parts {
            let media = part.media_type.as_deref().unwrap_or("");
            let is_image = media.starts_with("image/");
            match &part.content {
                PartContent::Text(t) => out.push(Content::Text { text: t.clone() }),
                PartContent::Data(v) => out.push(Content::Text {
                    text: v.to_string(),
                }),
                PartContent::Raw(_) | PartContent::Url(_) if is_image && !self.vision => {
                    return Err(super::CannotStart::TextOnlyModel {
                        model: self.model.clone(),
                        media: media.to_owned(),
                    });
                }
                PartContent::Raw(data) if is_image => {
                    out.push(Content::Image {
                        media_type: media.to_owned(),
                        data: data.clone(),
                    });
                }
                PartContent::Url(url) if is_image => {
                    out.push(Content::ImageUrl { url: url.clone() });
                }
                PartContent::Raw(_) => {
                    let kind = if media.is_empty() { "unknown" } else { media };
                    return Err(super::CannotStart::Attachment {
                        kind: kind.to_owned(),
                    });
                }
                PartContent::Url(url) => out.push(Content::Text {
                    text: format!("(attached: {url})"),
                }),
            }
        }
        Ok(out)
    }

    /// The task's own earlier messages as a conversation, for a turn with no session store.
    pub(super) fn task_conversation(
        &self,
        history: &[Message],
    ) -> Result<Conversation, super::CannotStart> {
        let mut conversation = Conversation::default();
        for earlier in history {
            let message = match earlier.role {
                Role::User => ChatMessage::User {
                    content: self.content(earlier)?,
                },
                Role::Agent => ChatMessage::Assistant {
                    text: Some(earlier.text()),
                    tool_calls: Vec::new(),
                },
            };
            append(&mut conversation, message);
        }
        Ok(conversation)
    }

    /// The conversation before the new message: the caller's `messages` override, else the
    /// stored conversation, else the task's own earlier messages.
    pub(super) async fn earlier(
        &self,
        request: &AgentRequest,
        transcript: &Transcript,
    ) -> Result<Conversation, super::CannotStart> {
        if let Some(messages) = &request.controls.messages {
            return Ok(overridden_conversation(messages));
        }
        match transcript.earlier(self.history_rows()).await {
            Some(stored) => Ok(stored),
            None => self.task_conversation(&request.history),
        }
    }

    /// The first model call of a turn that starts from the beginning: the conversation before
    /// the new message (compacted when it outgrows the window) and the message, which the
    /// transcript records.
    pub(super) async fn fresh_chat(
        &self,
        request: &AgentRequest,
        setup: &super::turn_setup::TurnSetup,
        tools: Vec<crate::agents::llm::ToolSpec>,
        transcript: &mut Transcript,
        cancel: &CancellationToken,
    ) -> Result<crate::agents::llm::ChatRequest, super::CannotStart> {
        let new = crate::agents::llm::ChatMessage::User {
            content: self.content(&request.message)?,
        };
        let mut conversation = self.earlier(request, transcript).await?;
        let budget = Budget {
            fixed: Self::fixed_tokens(&setup.instruction, &tools),
            new: crate::agents::agent_loop::window::message_tokens(&new),
            room: u64::from(self.context_window).saturating_sub(u64::from(self.max_output_tokens)),
        };
        self.fit_conversation(request, &mut conversation, budget, transcript, cancel)
            .await;
        let chat = self.first_request(request, setup, conversation, new, tools);
        transcript
            .user(request.message.text(), &request.message.message_id)
            .await;
        Ok(chat)
    }

    /// Compacts `conversation` when it outgrows the budget, stores the result, and reports it.
    pub(super) async fn fit_conversation(
        &self,
        request: &AgentRequest,
        conversation: &mut Conversation,
        budget: Budget,
        transcript: &Transcript,
        cancel: &CancellationToken,
    ) {
        let Some(cut) = compaction::plan(conversation, budget, &self.compaction) else {
            return;
        };
        // The rows up to the first turn that stays (all of them when none stays).
        let through = conversation
            .turns
            .get(cut.take)
            .map(|t| t.first_row - 1)
            .or(conversation.last_row);
        let summarizer = Summarizer {
            agent: &self.name,
            provider: self.provider.as_ref(),
            model: &self.model,
            max_output_tokens: self.max_output_tokens,
            caller: &request.bearer,
        };
        let done = summarizer
            .compact(&self.compaction, conversation, cut, budget, cancel)
            .await;
        if let Some(through) = through {
            transcript
                .compact(through, conversation.summary.clone())
                .await;
        }
        tracing::info!(
            agent = %self.name,
            context = %request.context_id,
            strategy = done.report.strategy.as_str(),
            messages_before = done.report.messages_before,
            messages_after = done.report.messages_after,
            tokens_before = done.report.tokens_before,
            tokens_after = done.report.tokens_after,
            "compacted the conversation"
        );
        request.events.emit(LoopEvent::Compacted {
            agent: self.name.clone(),
            depth: request.depth,
            model: self.model.clone(),
            report: done.report,
            summary_usage: done.usage,
        });
    }
}
