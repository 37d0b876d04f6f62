//! A turn's run and end: the agent under the request timeout and the shutdown token, the
//! task stored with its answer (or as its stream ended), the metrics of the turn, and its
//! stream. A task's turn is opened first, in [`super::begin`].
//!
//! An A2A task's turn writes the task only through its [`TaskTurn`]: begun (stored `working`)
//! before anyone learns its id, ended (stored) before anyone hears the end.

use std::sync::Arc;
use std::time::Instant;

use daedalus_contract::{StreamEvent, Task};

use super::begin::{Begun, Opened};
use super::conversation_locks::ConversationKey;
use super::handle::Finished;
use super::history::{self, Unset};
use super::opening::{Asked, Listening};
use super::record::StoredCheckpoints;
use super::request::{HistoryOf, TurnRequest};
use super::service::{Started, TurnService};
use super::stream::EventSender;
use super::{CANCEL_SETTLE, TurnError, task};
use crate::agents::agent_loop::{Agent, AgentOutcome, AgentRequest};
use crate::platform::metrics::StateLabel;
use crate::stores::tasks::{TaskTurn, TurnStop};

/// How a turn's agent run came out: the Task and the events that close its stream, or why it
/// was refused and the event that ends its stream.
pub(super) enum Ran {
    Finished {
        task: Task,
        closing: Vec<StreamEvent>,
        /// The agent answered with a message (the Task's status message).
        replied: bool,
    },
    Refused {
        error: TurnError,
        end: Option<StreamEvent>,
    },
}

impl TurnService {
    /// An A2A task's turn: replay, continuation, the context rules, then the agent, with every
    /// event in the task's log and the task as it stands kept in the store.
    pub(super) async fn run_task(
        &self,
        agent: &Arc<dyn Agent>,
        mut request: Box<TurnRequest>,
        started: Started,
    ) -> Result<Finished, TurnError> {
        // The opening boxed, and the end: a held turn waits in its agent's run, and its future
        // keeps only what that run and the end need, not the opening's locals (the task as it
        // stood, the record resumed from) nor the end's.
        let begun = match Box::pin(self.open_task(agent, &mut request, started)).await? {
            Opened::Answered(finished) => return Ok(*finished),
            Opened::Begun(begun) => begun,
        };
        let Begun {
            turn,
            task_id,
            context_id,
            history,
            key,
            agent_request,
            stop,
            out,
            checkpoints,
        } = *begun;
        let writes = agent_request.writes.clone();
        let lock = self.0.conversations.get(key.as_str());
        let _turn = lock.lock().await;
        let asked = Asked::by(&request);
        let ran = self
            .execute(
                agent,
                request,
                agent_request,
                &task_id,
                &context_id,
                &out,
                &stop,
            )
            .await;
        let Some(turn) = Self::after_run(turn, &ran, checkpoints.as_deref(), &task_id).await else {
            writes.committed().await;
            return Err(TurnError::HandedOff(task_id));
        };
        let ended = Box::pin(self.end_turn(agent, turn, &out, ran, history, asked)).await;
        // Queued before the end's write, so committed with it (or before): here at once.
        writes.committed().await;
        ended
    }

    /// Ends a turn its agent ran: the task stored with its messages and the message answered
    /// (a redelivery of it replays), its end told, and the answer as the caller asked for it;
    /// or, refused, the task as its stream ended.
    async fn end_turn(
        &self,
        agent: &Arc<dyn Agent>,
        mut turn: TaskTurn,
        out: &EventSender,
        ran: Ran,
        mut history: Vec<daedalus_contract::Message>,
        asked: Asked,
    ) -> Result<Finished, TurnError> {
        match ran {
            Ran::Finished {
                task,
                closing,
                replied,
            } => {
                history.extend(task.status.message.clone());
                if task.status.state == daedalus_contract::TaskState::Failed {
                    // Inside the turn's span, `invoke_agent <agent>`.
                    crate::platform::telemetry::record_error(
                        &tracing::Span::current(),
                        "task_failed",
                    );
                }
                let mut kept = task;
                kept.history = Some(history.clone());
                turn.answers(&asked.message_id);
                let ended = Box::pin(turn.end(kept, closing)).await;
                out.deliver(ended.events);
                let mut answer = ended.task;
                answer.history = None;
                let task = match asked.history {
                    HistoryOf::Task => {
                        history::shaped(answer, Some(history), asked.history_length, Unset::All)
                    }
                    HistoryOf::Conversation => {
                        Box::pin(self.with_history(
                            agent,
                            answer,
                            &history,
                            asked.history_length,
                            &asked.caller,
                        ))
                        .await
                    }
                };
                // A reply stands only if this turn's end is the task's.
                let replied = replied && ended.won;
                Ok(Finished { task, replied })
            }
            Ran::Refused { error, end } => Box::pin(self.end_refused(turn, out, error, end))
                .await
                .map(Finished::task),
        }
    }

    /// What becomes of a turn with a record once its agent ran: when shutdown's grace ran out
    /// on it, the turn is handed off, not ended (`None`): the task stays running in the store
    /// with its record, for a peer to resume as soon as this replica's lease goes (at exit),
    /// or this replica after a restart. Otherwise the turn is handed back to be ended (its
    /// end drops the record).
    async fn after_run(
        turn: TaskTurn,
        ran: &Ran,
        checkpoints: Option<&StoredCheckpoints>,
        task_id: &str,
    ) -> Option<TaskTurn> {
        let Some(checkpoints) = checkpoints else {
            return Some(turn);
        };
        if let Ran::Refused {
            error: TurnError::CanceledByShutdown,
            ..
        } = ran
        {
            checkpoints.hand_off().await;
            tracing::info!(
                task_id,
                "the grace ran out: the turn is handed off from its last checkpoint"
            );
            turn.hand_off();
            return None;
        }
        Some(turn)
    }

    /// Ends a task whose turn was refused before it finished (shutdown): it stands as its
    /// stream ended, and the refusal is answered, unless another end of the task won (then
    /// that end is the answer).
    async fn end_refused(
        &self,
        turn: TaskTurn,
        out: &EventSender,
        error: TurnError,
        end: Option<StreamEvent>,
    ) -> Result<Task, TurnError> {
        let Some(standing) = turn.task() else {
            return Err(error);
        };
        let closing: Vec<StreamEvent> = end.into_iter().collect();
        let ended_as = closing.iter().fold(standing, |task, event| {
            crate::stores::tasks::apply_event(task, event)
        });
        let ended = turn.end(ended_as, closing).await;
        out.deliver(ended.events);
        if ended.won {
            Err(error)
        } else {
            Ok(ended.task)
        }
    }

    /// A turn without task memory: in `conversation` (already locked), or alone.
    pub(super) async fn run_once(
        &self,
        agent: &Arc<dyn Agent>,
        request: Box<TurnRequest>,
        conversation: Option<&str>,
        started: Started,
    ) -> Result<Finished, TurnError> {
        let task_id = uuid::Uuid::new_v4().to_string();
        let context = conversation.unwrap_or(&task_id);
        let budget = started.budget.clone();
        let out = started.name(&task_id, context);
        let mut agent_request = Box::new(AgentRequest::new(
            &task_id,
            context,
            request.message.clone(),
        ));
        agent_request.budget = budget;
        agent_request.persist = conversation.is_some();
        let stop = TurnStop::new(self.0.cancel.child_token());
        match self
            .execute(
                agent,
                request,
                agent_request,
                &task_id,
                context,
                &out,
                &stop,
            )
            .await
        {
            Ran::Finished {
                task,
                closing,
                replied,
            } => {
                out.deliver(closing);
                Ok(Finished { task, replied })
            }
            Ran::Refused { error, end } => {
                out.deliver(end.into_iter().collect());
                Err(error)
            }
        }
    }

    /// Runs the agent on `agent_request` with the face's credentials, sampling and stream
    /// flag, stopped by `stop`, translates its events to `out` while anyone listens, and
    /// records the turn's metrics. The Task returned agrees with the stream, whose closing
    /// events it comes with (not yet sent: a task's end is told once stored).
    #[expect(
        clippy::too_many_arguments,
        reason = "one turn's parts, each from a different owner"
    )]
    async fn execute(
        &self,
        agent: &Arc<dyn Agent>,
        request: Box<TurnRequest>,
        mut agent_request: Box<AgentRequest>,
        task_id: &str,
        context_id: &str,
        out: &EventSender,
        stop: &TurnStop,
    ) -> Ran {
        agent_request.bearer = request.bearer;
        agent_request.stream = request.stream;
        *agent_request.controls = request.controls.clone();
        if request.controls.messages.is_some() {
            // A history override: the stored conversation is neither read nor written.
            agent_request.persist = false;
        }
        let listening = Listening::to(out, task_id, context_id);
        agent_request.events = listening.sink(Arc::clone(&self.0.metrics));
        tracing::info!(task_id, context_id, "task started");
        let started = Instant::now();
        let outcome = match request.sampling {
            Ok(sampling) => {
                *agent_request.sampling = sampling;
                self.run_agent(agent, *agent_request, stop).await
            }
            Err(e) => Ok(AgentOutcome::Failed {
                reason: e.to_string(),
            }),
        };
        // Events that come after the end (a straggling sub-task) find no translator.
        let translator = listening.close();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                let end = translator.map(|translator| translator.abort(&error));
                return Ran::Refused { error, end };
            }
        };
        let replied = matches!(outcome, AgentOutcome::Replied { .. });
        let mut task = task::finish(task_id, context_id, outcome);
        let replied = replied && task.status.state == daedalus_contract::TaskState::Completed;
        if let Some(report) = listening.compacted() {
            report.insert_into(&mut task.metadata);
        }
        let closing = translator
            .map(|translator| translator.close(&mut task))
            .unwrap_or_default();
        tracing::info!(task_id, state = %task.status.state, "task finished");
        self.count_finished(&task, started);
        Ran::Finished {
            task,
            closing,
            replied,
        }
    }

    /// A finished task in the metrics: its end state, and how long its turn took.
    fn count_finished(&self, task: &Task, started: Instant) {
        let metrics = &self.0.metrics;
        metrics
            .tasks
            .get_or_create(&StateLabel {
                state: task.status.state.to_string(),
            })
            .inc();
        metrics
            .task_duration
            .observe(started.elapsed().as_secs_f64());
    }

    /// Runs `agent` under the request timeout, the shutdown token and a cancel by its task id;
    /// `Err` when shutdown canceled it (the caller should retry elsewhere).
    pub(super) async fn run_agent(
        &self,
        agent: &Arc<dyn Agent>,
        request: AgentRequest,
        stop: &TurnStop,
    ) -> Result<AgentOutcome, TurnError> {
        let cancel = stop.token().clone();
        let run = agent.run(request, cancel.clone());
        tokio::pin!(run);
        let timed_out = tokio::select! {
            outcome = &mut run => return settle(outcome, false, stop.requested()),
            () = tokio::time::sleep(self.0.limits.request_timeout) => true,
        };
        cancel.cancel();
        let outcome = tokio::time::timeout(CANCEL_SETTLE, run)
            .await
            .unwrap_or(AgentOutcome::Canceled);
        settle(outcome, timed_out, stop.requested())
    }

    /// Adds the last `history_length` messages, when asked for: from the context's stored
    /// conversation when the agent keeps one (so it spans tasks and restarts), else `own`, the
    /// task's own messages.
    pub(super) async fn with_history(
        &self,
        agent: &Arc<dyn Agent>,
        mut task: Task,
        own: &[daedalus_contract::Message],
        history_length: Option<u32>,
        caller: &crate::platform::identity::Caller,
    ) -> Task {
        let Some(n) = history_length else {
            return task;
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let stored = match &task.context_id {
            Some(context) => {
                let key = ConversationKey::a2a_for(context, caller);
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
