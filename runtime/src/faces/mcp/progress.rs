//! MCP progress notifications from a turn's stream events, for a call that sent
//! `_meta.progressToken`: one strictly increasing counter per call, `total` left out, one
//! notification per step of the turn, in the words the turn service gives each step (the
//! patterns Daedalus renders: `"{server}/{tool}: started|completed|failed"` and
//! `"{agent} step N (llm|tool)"`, sub-agents alike).
//!
//! Events go through an unbounded channel to one task that sends them in order, so the loop
//! never waits on the client, and a notification that cannot be sent is dropped without
//! disturbing anything. Before the call answers, [`Reporter::flush`] waits (briefly) until
//! every notification queued so far has been handed to the transport, so no progress arrives
//! after its call's result.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

/// How long an answer waits for its progress notifications to be sent: a client that stops
/// reading delays its own answer by this much at most.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// What the sender task is asked to do, in order.
#[derive(Debug)]
enum Item {
    /// Send this message as the next notification.
    Note(String),
    /// Everything before this has been sent: say so.
    Flushed(oneshot::Sender<()>),
}

use daedalus_contract::{Message, StreamEvent, TaskState};

/// The progress message of a stream event: what a step of the turn says (the turn service
/// words it; see [`crate::services::turns::stream::step_text`]).
pub fn message(event: &StreamEvent) -> Option<String> {
    match event {
        StreamEvent::StatusUpdate(update)
            if !update.r#final && update.status.state == TaskState::Working =>
        {
            update.status.message.as_ref().map(Message::text)
        }
        _ => None,
    }
}

/// Sends progress for one call.
#[derive(Debug)]
pub struct Reporter {
    tx: mpsc::UnboundedSender<Item>,
}

impl Reporter {
    /// Starts the sender task for `token` on `peer`.
    pub fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Item>();
        tokio::spawn(async move {
            let mut progress = 0.0_f64;
            while let Some(item) = rx.recv().await {
                let text = match item {
                    Item::Note(text) => text,
                    Item::Flushed(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let note =
                    ProgressNotificationParam::new(token.clone(), progress).with_message(text);
                progress += 1.0;
                if let Err(e) = peer.notify_progress(note).await {
                    tracing::debug!(error = %e, "a progress notification could not be sent");
                }
            }
        });
        Self { tx }
    }

    /// Waits until every notification queued before this call has been sent, or
    /// [`FLUSH_WAIT`] has passed.
    pub async fn flush(&self) {
        let (done, sent) = oneshot::channel();
        if self.tx.send(Item::Flushed(done)).is_ok()
            && tokio::time::timeout(FLUSH_WAIT, sent).await.is_err()
        {
            tracing::debug!("progress notifications still unsent when the call answered");
        }
    }

    /// Queues `text` as the next notification.
    pub fn note(&self, text: String) {
        let _ = self.tx.send(Item::Note(text));
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Part, Role, TaskStatus, TaskStatusUpdateEvent};

    use super::*;

    fn update(state: TaskState, text: Option<&str>, last: bool) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: text.map(|t| Message::new("m", Role::Agent, vec![Part::text(t)])),
                timestamp: None,
            },
            r#final: last,
            metadata: None,
        })
    }

    #[test]
    fn only_the_steps_of_a_working_turn_are_progress() {
        let step = update(TaskState::Working, Some("argos/search_web: started"), false);
        assert_eq!(message(&step).as_deref(), Some("argos/search_web: started"));
        assert_eq!(message(&update(TaskState::Working, None, false)), None);
        let end = update(TaskState::Failed, Some("the model call failed"), true);
        assert_eq!(message(&end), None);
    }
}
