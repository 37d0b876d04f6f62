//! A turn's run: replay of an answered message, the task and context rules, the agent under
//! the request timeout and the shutdown token, the metrics of the turn, and its stream.
//!
//! An A2A task's turn writes the task only through its [`TaskTurn`]: begun (stored `working`)
//! before anyone learns its id, ended (stored) before anyone hears the end.

use std::sync::Arc;
use std::time::Instant;

use daedalus_contract::{StreamEvent, Task};

use super::conversation_locks::ConversationKey;
use super::handle::Finished;
use super::history::{self, Unset};
use super::opening::{Asked, Listening, Opening};
use super::record::{RECORD_VERSION, StoredCheckpoints, TurnRecord};
use super::request::{Heard, HistoryOf, TurnRequest};
use super::service::{Started, TurnService};
use super::stream::{self, EventSender};
use super::{CANCEL_SETTLE, TurnError, task};
use crate::agents::agent_loop::{Agent, AgentOutcome, AgentRequest, Checkpoints};
use crate::platform::metrics::StateLabel;
use crate::stores::tasks::{TaskTurn, TurnStop};
use crate::stores::turn_writes::TurnWrites;

/// Whether `task` (task `task_id` as it stands) takes a turn now: one turn of a task at a
/// time, on every replica; the standard bindings (`replay` off) take no message for a finished
/// task; a resumed turn goes on with the task its runtime left running, and only that.
fn takes_a_turn(task: &Task, task_id: &str, replay: bool, resuming: bool) -> Result<(), TurnError> {
    let state = task.status.state;
    if crate::stores::tasks::backend::running(state) != resuming {
        return Err(if resuming {
            TurnError::TaskFinished {
                task_id: task_id.to_owned(),
                state,
            }
        } else {
            TurnError::TaskBusy(task_id.to_owned())
        });
    }
    if !replay && state.is_terminal() {
        return Err(TurnError::TaskFinished {
            task_id: task_id.to_owned(),
            state,
        });
    }
    Ok(())
}

/// Begins `turn` in the store as `working` (committed with its end when nobody hears of it
/// before), then names it to its starter (with the task as it began, for a caller that hears
/// it then): only now may anyone learn its id, and whoever does finds the task on any replica.
async fn begin(
    turn: &mut TaskTurn,
    request: &TurnRequest,
    working: Task,
    stop: &TurnStop,
    started: Started,
) -> Result<EventSender, TurnError> {
    if request.heard == Heard::WhenItEnds {
        turn.begins_with_its_end();
    }
    let began = (request.heard == Heard::AsItBegan)
        .then(|| history::shape(working.clone(), request.history_length, Unset::All));
    let task_id = working.id.clone();
    let context_id = working.context_id.clone().unwrap_or_default();
    let log = turn.begin(working, stop.clone()).await?;
    Ok(started
        .name_with(&task_id, &context_id, began)
        .with_log(log))
}

/// The record a resumed turn goes on from (`None` for a turn that is not a resume). It
/// resumes only over the task as the replica that left it left it: a peer that began the task
/// since has the turn, and this resume is refused.
fn resumed_record(
    turn: &TaskTurn,
    resume: Option<super::record::Resume>,
    task_id: &str,
) -> Result<Option<TurnRecord>, TurnError> {
    let Some(resume) = resume else {
        return Ok(None);
    };
    if turn.owner().as_deref() != Some(resume.left_by.as_str()) {
        return Err(TurnError::TaskMoved(task_id.to_owned()));
    }
    Ok(Some(resume.record))
}

/// A task's turn opened: answered already (a replay, a turn resumed too often), or begun.
enum Opened {
    Answered(Box<Finished>),
    Begun(Box<Begun>),
}

/// A task's turn begun: what its agent's run and its end need.
struct Begun {
    turn: TaskTurn,
    task_id: String,
    context_id: String,
    /// The task's history with this turn's message.
    history: Vec<daedalus_contract::Message>,
    key: ConversationKey,
    agent_request: Box<AgentRequest>,
    stop: TurnStop,
    out: EventSender,
    checkpoints: Option<Arc<StoredCheckpoints>>,
}

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

    /// Opens an A2A task's turn: the task as it stands, replay, continuation, the context
    /// rules, the turn's record, and its begin; a replayed message or a turn resumed too often
    /// is answered here.
    async fn open_task(
        &self,
        agent: &Arc<dyn Agent>,
        request: &mut TurnRequest,
        started: Started,
    ) -> Result<Opened, TurnError> {
        let task_id = request.message.effective_task_id().to_owned();
        let mut turn = if request.names_a_new_task {
            self.0.tasks.open_new_turn(&task_id).await
        } else {
            self.0.tasks.open_turn(&task_id).await
        };
        let standing = turn.task();
        let resuming = resumed_record(&turn, request.resume.take(), &task_id)?;
        if standing.is_some() && !request.caller.may_see(turn.principal().as_ref()) {
            return Err(TurnError::TaskNotFound(task_id));
        }
        if let Some(task) = &standing
            && request.replay
            && turn.answered().as_deref() == Some(request.message.message_id.as_str())
        {
            return Ok(Opened::Answered(Box::new(
                self.replay(agent, task, request, started).await,
            )));
        }
        if let Some(task) = &standing {
            takes_a_turn(task, &task_id, request.replay, resuming.is_some())?;
        }
        let context_id = self
            .context_of(standing.as_ref(), request, &task_id)
            .await?;
        turn.claim(request.caller.principal());
        let Opening {
            message,
            history,
            key,
            mut agent_request,
        } = Opening::of(standing, request, &task_id, &context_id, resuming.as_ref());
        agent_request.budget = started.budget.clone();
        let stop = TurnStop::new(self.0.cancel.child_token());
        let mut working = task::working(&task_id, &context_id, history.clone());
        if let Some(record) = &resuming {
            working.status.message = Some(task::resumed_note(record, &task_id, &context_id));
        }
        let past_resumes = self.past_resumes(resuming.as_ref());
        // The turn's record comes with its begin (and goes with its end).
        let record = past_resumes
            .is_none()
            .then(|| self.turn_record(request, key.as_str(), &message, resuming.as_ref()))
            .flatten();
        if let Some(record) = &record {
            turn.keeps_record(record.to_json());
        }
        let out = Box::pin(begin(&mut turn, request, working, &stop, started)).await?;
        if let Some(resumes) = past_resumes {
            let task = task::working(&task_id, &context_id, history);
            return Ok(Opened::Answered(Box::new(
                self.fail_past_resumes(turn, &out, task, resumes).await,
            )));
        }
        let checkpoints =
            record.map(|record| Arc::new(StoredCheckpoints::new(&self.0.tasks, &task_id, record)));
        self.keep_durable(&mut agent_request, checkpoints.as_ref(), resuming);
        Ok(Opened::Begun(Box::new(Begun {
            turn,
            task_id,
            context_id,
            history,
            key,
            agent_request,
            stop,
            out,
            checkpoints,
        })))
    }

    /// What the agent's request of a durable turn carries: where its checkpoints go, the
    /// checkpoint a resumed turn goes on from, and whether what the agent writes (the
    /// conversation) commits with the turn's end (one commit for both, where the two stores
    /// share a writer).
    fn keep_durable(
        &self,
        agent_request: &mut AgentRequest,
        checkpoints: Option<&Arc<StoredCheckpoints>>,
        resuming: Option<TurnRecord>,
    ) {
        if let Some(checkpoints) = checkpoints {
            agent_request.checkpoints = Checkpoints::new(Arc::clone(checkpoints) as _);
        }
        agent_request.resume = resuming.and_then(|r| r.checkpoint).map(Box::new);
        if self
            .0
            .conversations_commit_with_tasks
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            agent_request.writes = TurnWrites::with_the_end();
        }
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

    /// The stored answer to a message the task answered already (a redelivery): the task as
    /// it stands, its stream replayed, nothing run again.
    async fn replay(
        &self,
        agent: &Arc<dyn Agent>,
        task: &Task,
        request: &TurnRequest,
        started: Started,
    ) -> Finished {
        tracing::info!(
            task_id = task.id,
            "message already answered; replaying the stored task"
        );
        let mut task = task.clone();
        let history = task.history.take().unwrap_or_default();
        let context_id = task.context_id.clone().unwrap_or_default();
        let began = (request.heard == Heard::AsItBegan).then(|| {
            let mut stored = task.clone();
            stored.history = Some(history.clone());
            history::shape(stored, request.history_length, Unset::All)
        });
        stream::replay(&task, &started.name_with(&task.id, &context_id, began));
        Finished::task(
            Box::pin(self.with_history(
                agent,
                task,
                &history,
                request.history_length,
                &request.caller,
            ))
            .await,
        )
    }

    /// The context the turn runs in: the task's, the message's, or a new one. A context the
    /// client named for a new task may be someone else's (then it is not found); one the
    /// server just made is not.
    async fn context_of(
        &self,
        standing: Option<&Task>,
        request: &TurnRequest,
        task_id: &str,
    ) -> Result<String, TurnError> {
        let known_context = standing.and_then(|t| t.context_id.as_deref());
        let context_id = task::resolve_context(known_context, &request.message, task_id)?;
        let named = request.message.context_id.as_deref() == Some(context_id.as_str());
        if standing.is_none()
            && named
            && !self
                .0
                .tasks
                .context_open_to(&context_id, &request.caller)
                .await
        {
            return Err(TurnError::ContextNotFound(context_id));
        }
        Ok(context_id)
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

    /// How often a resumed turn was resumed before, when that is `TURN_MAX_RESUMES` or more
    /// (a turn handed off at shutdown was not cut short, and does not count).
    fn past_resumes(&self, resuming: Option<&TurnRecord>) -> Option<u32> {
        resuming
            .filter(|r| !r.handed_off)
            .map(|r| r.resumes)
            .filter(|resumes| *resumes >= self.0.limits.max_resumes)
    }

    /// Fails a task whose turn was resumed `resumes` times already and whose runtime stopped
    /// again (`TURN_MAX_RESUMES`): a poison turn is not resumed forever.
    async fn fail_past_resumes(
        &self,
        turn: TaskTurn,
        out: &EventSender,
        task: Task,
        resumes: u32,
    ) -> Finished {
        let why = if resumes == 0 {
            "the runtime restarted while this task's turn ran, and TURN_MAX_RESUMES is 0: the turn is not resumed".to_owned()
        } else {
            format!(
                "the turn was resumed {resumes} times (TURN_MAX_RESUMES), and the runtime running it stopped each time; it is not resumed again"
            )
        };
        self.0.tasks.keep_turn(&task.id, None).await;
        let failed = crate::stores::tasks::backend::failed_now(&task, &why);
        let closing = vec![crate::stores::tasks::turn::final_update(&failed)];
        let ended = Box::pin(turn.end(failed, closing)).await;
        out.deliver(ended.events);
        Finished::task(ended.task)
    }

    /// The record of a turn (a new one, or `resuming`'s with one more resume), when the task
    /// store keeps turns beyond the process.
    fn turn_record(
        &self,
        request: &TurnRequest,
        conversation: &str,
        message: &daedalus_contract::Message,
        resuming: Option<&TurnRecord>,
    ) -> Option<TurnRecord> {
        if !self.0.tasks.keeps_turns() {
            return None;
        }
        let record = match resuming {
            Some(record) => TurnRecord {
                resumes: record.resumes + u32::from(!record.handed_off),
                handed_off: false,
                ..record.clone()
            },
            None => TurnRecord {
                version: RECORD_VERSION,
                agent: request.agent.clone(),
                principal: request.caller.principal().cloned(),
                message: message.clone(),
                conversation: conversation.to_owned(),
                sampling: request.sampling.clone().unwrap_or_default(),
                controls: request.controls.clone(),
                stream: request.stream,
                resumes: 0,
                handed_off: false,
                checkpoint: None,
                traceparent: crate::platform::telemetry::TraceHeaders::from_headers(
                    &crate::platform::telemetry::current_headers(),
                )
                .traceparent,
            },
        };
        Some(record)
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
    async fn with_history(
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
