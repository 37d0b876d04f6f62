//! A turn's run: replay of an answered message, the task and context rules, the agent under
//! the request timeout and the shutdown token, the metrics of the turn, and its stream.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use daedalus_contract::{Compaction, Task};

use super::conversations::ConversationKey;
use super::request::TurnRequest;
use super::running::RunningTurn;
use super::service::{Started, TurnService};
use super::stream::{self, EventSender, Translator};
use super::{CANCEL_SETTLE, TurnError, task};
use crate::agent_loop::{Agent, AgentOutcome, AgentRequest, EventSink, LoopEvent};
use crate::metrics::StateLabel;

impl TurnService {
    /// An A2A task's turn: replay, continuation, the context rules, then the agent, with every
    /// event in the task's log and the task as it stands kept in the store.
    pub(super) async fn run_task(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
        started: Started,
    ) -> Result<Task, TurnError> {
        let task_id = request.message.effective_task_id().to_owned();
        let cell = match self.0.tasks.find(&task_id).await {
            Some(cell) => cell,
            None => self.0.tasks.cell(&task_id),
        };
        let mut record = cell.lock_turn().await;
        let standing = cell.task();
        if let Some(task) = &standing
            && request.replay
            && record.answered.as_deref() == Some(request.message.message_id.as_str())
        {
            tracing::info!(
                task_id,
                "message already answered; replaying the stored task"
            );
            let mut task = task.clone();
            let history = task.history.take().unwrap_or_default();
            let context_id = task.context_id.clone().unwrap_or_default();
            stream::replay(&task, &started.name(&task_id, &context_id));
            return Ok(self
                .with_history(agent, task, &history, request.history_length)
                .await);
        }
        if record.context_id.is_none() {
            record.context_id = standing.as_ref().and_then(|t| t.context_id.clone());
        }
        let context_id = task::resolve_context(&record, &request.message, &task_id)?;
        let mut message = request.message.clone();
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        // The task's own messages so far; a task waiting for input is continued with them.
        let waiting = standing
            .as_ref()
            .is_some_and(|t| t.status.state.is_interrupted());
        let mut history = standing.and_then(|t| t.history).unwrap_or_default();
        let key = ConversationKey::a2a(&context_id);
        let mut agent_request = AgentRequest::new(&task_id, key.as_str(), message.clone());
        if waiting {
            agent_request.history.clone_from(&history);
        }
        history.push(message);
        cell.begin(task::working(&task_id, &context_id, history.clone()));
        self.0.tasks.persist(&task_id).await;
        // Named only now: whoever learns the id finds the task, on any replica.
        let out = started.name(&task_id, &context_id).with_log(
            &task_id,
            Arc::clone(&cell),
            self.0.tasks.relay().cloned(),
        );
        let lock = self.0.conversations.get(key.as_str());
        let _turn = lock.lock().await;
        let history_length = request.history_length;
        let answered_id = request.message.message_id.clone();
        let ran = self
            .execute(agent, request, agent_request, &task_id, &context_id, out)
            .await;
        let task = match ran {
            Ok(task) => task,
            Err(refused) => {
                // The log holds the refusal's end; the task stands as it left it.
                if let Some(ended) = cell.task() {
                    cell.finish(ended);
                }
                self.0.tasks.persist(&task_id).await;
                self.0.tasks.tell_end(&task_id);
                return Err(refused);
            }
        };
        record.context_id = Some(context_id);
        record.answered = Some(answered_id);
        history.extend(task.status.message.clone());
        let mut kept = task.clone();
        kept.history = Some(history.clone());
        cell.finish(kept);
        self.0.tasks.touch(&task_id);
        self.0.tasks.persist(&task_id).await;
        self.0.tasks.tell_end(&task_id);
        Ok(self
            .with_history(agent, task, &history, history_length)
            .await)
    }

    /// A turn without task memory: in `conversation` (already locked), or alone.
    pub(super) async fn run_once(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
        conversation: Option<&str>,
        started: Started,
    ) -> Result<Task, TurnError> {
        let task_id = uuid::Uuid::new_v4().to_string();
        let context = conversation.unwrap_or(&task_id);
        let out = started.name(&task_id, context);
        let mut agent_request = AgentRequest::new(&task_id, context, request.message.clone());
        agent_request.persist = conversation.is_some();
        self.execute(agent, request, agent_request, &task_id, context, out)
            .await
    }

    /// Runs the agent on `agent_request` with the face's credentials, sampling and stream
    /// flag, translates its events to `out` while anyone listens, and records the turn's
    /// metrics. The Task returned agrees with the stream.
    async fn execute(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
        mut agent_request: AgentRequest,
        task_id: &str,
        context_id: &str,
        out: EventSender,
    ) -> Result<Task, TurnError> {
        agent_request.bearer = request.bearer;
        agent_request.stream = request.stream;
        agent_request.controls = request.controls.clone();
        if request.controls.messages.is_some() {
            // A history override: the stored conversation is neither read nor written.
            agent_request.persist = false;
        }
        let translator = out
            .is_listening()
            .then(|| Arc::new(Mutex::new(Some(Translator::open(task_id, context_id, out)))));
        let metrics = Arc::clone(&self.0.metrics);
        let live = translator.clone();
        let compacted: Arc<Mutex<Option<Compaction>>> = Arc::default();
        let report = Arc::clone(&compacted);
        agent_request.events = EventSink::new(move |event| {
            metrics.observe(&event);
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
        });
        tracing::info!(task_id, context_id, "task started");
        let started = Instant::now();
        let running = self.0.running.register(task_id, context_id, &self.0.cancel);
        let outcome = match request.sampling {
            Ok(sampling) => {
                agent_request.sampling = sampling;
                self.run_agent(agent, agent_request, &running).await
            }
            Err(e) => Ok(AgentOutcome::Failed {
                reason: e.to_string(),
            }),
        };
        // Events that come after the end (a straggling sub-task) find no translator.
        let translator =
            translator.and_then(|t| t.lock().unwrap_or_else(PoisonError::into_inner).take());
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(refused) => {
                if let Some(translator) = translator {
                    translator.abort(&refused);
                }
                return Err(refused);
            }
        };
        let mut task = task::finish(task_id, context_id, outcome);
        if let Some(report) = *compacted.lock().unwrap_or_else(PoisonError::into_inner) {
            report.insert_into(&mut task.metadata);
        }
        if let Some(translator) = translator {
            translator.close(&mut task);
        }
        tracing::info!(task_id, state = %task.status.state, "task finished");
        self.0
            .metrics
            .tasks
            .get_or_create(&StateLabel {
                state: task.status.state.to_string(),
            })
            .inc();
        self.0
            .metrics
            .task_duration
            .observe(started.elapsed().as_secs_f64());
        Ok(task)
    }

    /// Runs `agent` under the request timeout, the shutdown token and a cancel by its task id;
    /// `Err` when shutdown canceled it (the caller should retry elsewhere).
    pub(super) async fn run_agent(
        &self,
        agent: &Arc<dyn Agent>,
        request: AgentRequest,
        turn: &RunningTurn,
    ) -> Result<AgentOutcome, TurnError> {
        let cancel = turn.token().clone();
        let run = agent.run(request, cancel.clone());
        tokio::pin!(run);
        let timed_out = tokio::select! {
            outcome = &mut run => return settle(outcome, false, turn.cancel_requested()),
            () = tokio::time::sleep(self.0.limits.request_timeout) => true,
        };
        cancel.cancel();
        let outcome = tokio::time::timeout(CANCEL_SETTLE, run)
            .await
            .unwrap_or(AgentOutcome::Canceled);
        settle(outcome, timed_out, turn.cancel_requested())
    }

    /// Adds the last `history_length` messages, when asked for: from the context's stored
    /// conversation when the agent keeps one (so it spans tasks and restarts), else `own`, the
    /// task's own messages.
    async fn with_history(
        &self,
        agent: &Arc<dyn Agent>,
        mut task: Task,
        own: &[daedalus_contract::Message],
        history_length: Option<u32>,
    ) -> Task {
        let Some(n) = history_length else {
            return task;
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let stored = match &task.context_id {
            Some(context) => {
                let key = ConversationKey::a2a(context);
                agent.conversation(key.as_str()).await.map(|mut messages| {
                    // Stored under the conversation key; shown under the client's context id.
                    for m in &mut messages {
                        if let Some(turn) = m.message_id.strip_prefix(key.as_str()) {
                            m.message_id = format!("{context}{turn}");
                        }
                        m.context_id = Some(context.clone());
                    }
                    messages
                })
            }
            None => None,
        };
        let mut history = stored.unwrap_or_else(|| own.to_vec());
        history.drain(..history.len().saturating_sub(n));
        task.history = Some(history);
        task
    }
}

/// How a turn's run ends: a timeout fails it, a cancel on request cancels it, and a cancel by
/// shutdown refuses it (the task was not done; it goes to another replica).
fn settle(
    outcome: AgentOutcome,
    timed_out: bool,
    cancel_requested: bool,
) -> Result<AgentOutcome, TurnError> {
    match outcome {
        AgentOutcome::Canceled if cancel_requested => Ok(AgentOutcome::Canceled),
        AgentOutcome::Canceled if timed_out => Ok(AgentOutcome::Failed {
            reason: "the task ran longer than the runtime's REQUEST_TIMEOUT and was canceled"
                .to_owned(),
        }),
        AgentOutcome::Canceled => Err(TurnError::CanceledByShutdown),
        other => Ok(other),
    }
}
