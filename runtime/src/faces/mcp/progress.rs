//! MCP progress notifications from the agent loop's events, for a call that sent
//! `_meta.progressToken`: one strictly increasing counter per call, `total` left out, and the
//! message patterns Daedalus renders — `"{server}/{tool}: started|completed|failed"` and
//! `"{agent} step N (llm|tool)"`, sub-agents alike.
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

use crate::agent_loop::{EventSink, LoopEvent};

/// The progress message for `event`, if it has one.
pub fn message(event: &LoopEvent) -> Option<String> {
    match event {
        LoopEvent::LlmTurnStarted { agent, step, .. } => Some(format!("{agent} step {step} (llm)")),
        LoopEvent::LlmTurnFinished {
            agent,
            step,
            tool_calls,
            ..
        } if *tool_calls > 0 => Some(format!("{agent} step {step} (tool)")),
        LoopEvent::ToolStarted { server, tool, .. } => Some(format!("{server}/{tool}: started")),
        LoopEvent::ToolFinished { server, tool, .. } => Some(format!("{server}/{tool}: completed")),
        LoopEvent::ToolFailed { server, tool, .. } => Some(format!("{server}/{tool}: failed")),
        LoopEvent::LlmTurnFinished { .. }
        | LoopEvent::TextDelta { .. }
        | LoopEvent::Final { .. } => None,
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

    /// A sink passing each event's message on, then to `next`.
    pub fn sink(&self, next: EventSink) -> EventSink {
        let tx = self.tx.clone();
        EventSink::new(move |event| {
            if let Some(text) = message(&event) {
                let _ = tx.send(Item::Note(text));
            }
            next.emit(event);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;

    #[test]
    fn events_read_as_daedalus_expects() {
        let cases = [
            (
                LoopEvent::LlmTurnStarted {
                    agent: "harper".into(),
                    depth: 0,
                    step: 2,
                },
                Some("harper step 2 (llm)"),
            ),
            (
                LoopEvent::LlmTurnFinished {
                    agent: "harper".into(),
                    depth: 0,
                    step: 3,
                    model: "m".into(),
                    usage: Usage::default(),
                    tool_calls: 2,
                },
                Some("harper step 3 (tool)"),
            ),
            (
                LoopEvent::LlmTurnFinished {
                    agent: "harper".into(),
                    depth: 0,
                    step: 4,
                    model: "m".into(),
                    usage: Usage::default(),
                    tool_calls: 0,
                },
                None,
            ),
            (
                LoopEvent::ToolStarted {
                    agent: "harper".into(),
                    depth: 0,
                    step: 1,
                    server: "argos".into(),
                    tool: "search_web".into(),
                    call_id: "c".into(),
                },
                Some("argos/search_web: started"),
            ),
            (
                LoopEvent::ToolFailed {
                    agent: "harper".into(),
                    depth: 1,
                    step: 1,
                    server: "argos".into(),
                    tool: "search_web".into(),
                    call_id: "c".into(),
                    reason: "down".into(),
                    elapsed_ms: 3,
                },
                Some("argos/search_web: failed"),
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(message(&event).as_deref(), expected, "{event:?}");
        }
    }
}
