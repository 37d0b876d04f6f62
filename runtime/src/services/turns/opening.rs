//! What a task's turn is made of before its agent runs and while it does: its opening (the
//! message named for the task, the task's messages, the conversation it continues, the
//! agent's request), what the caller asked of the answer, and who listens to its events.

use std::sync::{Arc, Mutex, PoisonError};

use daedalus_contract::{Compaction, Task};

use super::conversation_locks::ConversationKey;
use super::record::TurnRecord;
use super::request::TurnRequest;
use super::stream::{EventSender, Translator};
use crate::agents::agent_loop::{AgentRequest, EventSink, LoopEvent};

/// What a turn of a task opens with: its message (named for the task and context), the
/// task's messages with it, the conversation it continues, and the agent's request.
pub(super) struct Opening {
    pub(super) message: daedalus_contract::Message,
    pub(super) history: Vec<daedalus_contract::Message>,
    pub(super) key: ConversationKey,
    pub(super) agent_request: Box<AgentRequest>,
}

impl Opening {
    /// The opening of a turn of `task_id` in `context_id`, over the task as it stands (none for
    /// a new one). A task waiting for input is continued with its messages so far; a resumed
    /// turn's message is in the task's history already, and its agent gets what came before.
    pub(super) fn of(
        standing: Option<Task>,
        request: &TurnRequest,
        task_id: &str,
        context_id: &str,
        resuming: Option<&TurnRecord>,
    ) -> Self {
        let mut message = request.message.clone();
        message.task_id = Some(task_id.to_owned());
        message.context_id = Some(context_id.to_owned());
        let waiting = standing
            .as_ref()
            .is_some_and(|t| t.status.state.is_interrupted());
        let mut history = standing.and_then(|t| t.history).unwrap_or_default();
        let key = match resuming {
            Some(record) => ConversationKey::resumed(record.conversation.clone()),
            None => request
                .conversation
                .clone()
                .unwrap_or_else(|| ConversationKey::a2a_for(context_id, &request.caller)),
        };
        let mut agent_request = Box::new(AgentRequest::new(task_id, key.as_str(), message.clone()));
        if resuming.is_some() {
            let before = history.len().saturating_sub(1);
            agent_request.history = history[..before].to_vec();
        } else {
            if waiting {
                agent_request.history.clone_from(&history);
            }
            // Exactly one more: a held turn keeps this history.
            history.reserve_exact(1);
            history.push(message.clone());
        }
        Self {
            message,
            history,
            key,
            agent_request,
        }
    }
}

/// Who hears a turn's events as they come: the translator to the task's stream (while
/// anyone listens to it), and the context compaction's report for the task's metadata.
pub(super) struct Listening {
    translator: Option<Arc<Mutex<Option<Translator>>>>,
    compacted: Arc<Mutex<Option<Compaction>>>,
}

impl Listening {
    pub(super) fn to(out: &EventSender, task_id: &str, context_id: &str) -> Self {
        let translator = out.is_listening().then(|| {
            Arc::new(Mutex::new(Some(Translator::open(
                task_id,
                context_id,
                out.clone(),
            ))))
        });
        Self {
            translator,
            compacted: Arc::default(),
        }
    }

    /// The agent's event sink: each event counted, a compaction's report kept, and the
    /// event translated to the stream while anyone listens.
    pub(super) fn sink(&self, metrics: Arc<crate::platform::metrics::Metrics>) -> EventSink {
        let live = self.translator.clone();
        let report = Arc::clone(&self.compacted);
        EventSink::new(move |event| {
            event.count_in(&metrics);
            if let LoopEvent::Compacted {
                depth: 0,
                report: r,
                ..
            } = &event
            {
                *report.lock().unwrap_or_else(PoisonError::into_inner) = Some(*r);
            }
            if let Some(live) = &live
                && let Some(translator) = live
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_mut()
                    .filter(|t| t.is_listening())
            {
                translator.on_event(&event);
            }
        })
    }

    /// The translator, taken: events after this find none.
    pub(super) fn close(&self) -> Option<Translator> {
        self.translator
            .as_ref()
            .and_then(|t| t.lock().unwrap_or_else(PoisonError::into_inner).take())
    }

    /// The compaction's report, if the turn compacted its context.
    pub(super) fn compacted(&self) -> Option<Compaction> {
        *self
            .compacted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the caller asked of the answer, kept while the request goes to the agent.
pub(super) struct Asked {
    pub(super) message_id: String,
    pub(super) history_length: Option<u32>,
    pub(super) history: super::request::HistoryOf,
    pub(super) caller: crate::platform::identity::Caller,
}

impl Asked {
    pub(super) fn by(request: &TurnRequest) -> Self {
        Self {
            message_id: request.message.message_id.clone(),
            history_length: request.history_length,
            history: request.history,
            caller: request.caller.clone(),
        }
    }
}
