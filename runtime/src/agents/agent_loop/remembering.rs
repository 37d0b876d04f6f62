//! A conversation for agents that keep none themselves (the `passthrough` models): each turn's
//! user text and answer are written to the session store under the turn's context, together
//! when the turn ends (one store call, committed with the turn's end where the turn waits for
//! it: [`crate::stores::turn_writes`]; a failed turn's text is kept as `error`), so tasks
//! with the same `contextId` continue one conversation across restarts (contract level 3,
//! session resume) and `history` shows it, as for an LLM agent. A text longer than
//! [`KEPT_TEXT`] is kept cut there, saying how much was left out: an echo model's conversation
//! is for reading back, and must not grow the store by every large body it echoes.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use daedalus_contract::{Message, Part};
use tokio_util::sync::CancellationToken;

use super::transcript::Transcript;
use super::{Agent, AgentOutcome, AgentRequest};
use crate::stores::conversations::{self, ConversationStore};

/// Bytes of one message's text a conversation keeps.
pub(super) const KEPT_TEXT: usize = 64 * 1024;

/// `text`, cut at [`KEPT_TEXT`] (on a character boundary) with a note of what was left out.
fn kept(mut text: String) -> String {
    if text.len() <= KEPT_TEXT {
        return text;
    }
    let mut end = KEPT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let left_out = text.len() - end;
    text.truncate(end);
    let _ = write!(text, " … ({left_out} bytes more not kept)");
    text
}

/// `inner`, its turns recorded in `sessions`.
#[derive(Debug)]
pub struct Remembering<A> {
    inner: A,
    sessions: Option<Arc<dyn ConversationStore>>,
}

impl<A> Remembering<A> {
    pub fn new(inner: A, sessions: Option<Arc<dyn ConversationStore>>) -> Self {
        Self { inner, sessions }
    }
}

/// The text a turn's outcome leaves in the conversation.
fn answer_text(outcome: &AgentOutcome) -> Option<String> {
    let texts = |parts: &[Part]| -> String {
        parts
            .iter()
            .filter_map(Part::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    };
    match outcome {
        AgentOutcome::Completed { artifacts } => Some(
            artifacts
                .iter()
                .map(|a| texts(&a.parts))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        AgentOutcome::Replied { parts } => Some(texts(parts)),
        AgentOutcome::InputRequired { question } => Some(texts(question)),
        AgentOutcome::AuthRequired { challenge } => Some(texts(challenge)),
        AgentOutcome::Rejected { .. } | AgentOutcome::Failed { .. } | AgentOutcome::Canceled => {
            None
        }
    }
}

#[async_trait]
impl<A: Agent> Agent for Remembering<A> {
    fn may_reply(&self, message: &Message) -> bool {
        self.inner.may_reply(message)
    }

    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        if !request.persist || self.sessions.is_none() {
            return self.inner.run(request, cancel).await;
        }
        // The turn's rows are written as it ends, in one store call: the user's message is
        // shown only with its answer anyway.
        let mut transcript = Transcript::new(self.sessions.clone(), &request.context_id);
        transcript.user_at_settle(kept(request.message.text()), &request.message.message_id);
        let writes = request.writes.clone();
        let outcome = self.inner.run(request, cancel).await;
        let answer = answer_text(&outcome);
        let answered = answer.is_some();
        if let Some(text) = answer {
            transcript.answer(kept(text));
        }
        // With the turn's end where it waits for it (one commit for both); boxed: the store
        // call's future would otherwise be room in every held turn's.
        Box::pin(transcript.settle_with(answered, &writes)).await;
        outcome
    }

    async fn conversation(&self, context_id: &str) -> Option<Vec<Message>> {
        let rows = Transcript::new(self.sessions.clone(), context_id)
            .rows(conversations::MAX_ROWS_READ)
            .await?;
        Some(conversations::as_messages(context_id, &rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_kept_cut_and_says_how_much_was_left_out() {
        assert_eq!(kept("short".to_owned()), "short");
        let long = "é".repeat(KEPT_TEXT);
        let cut = kept(long.clone());
        assert!(cut.len() < KEPT_TEXT + 64, "{}", cut.len());
        assert!(cut.ends_with(&format!("({} bytes more not kept)", long.len() - KEPT_TEXT)));
    }
}
