//! A task's turn opened: the task as it stands, a replayed message, the one-turn-at-a-time
//! and context rules, the turn's durable record, and its begin, stored `working` before anyone
//! learns the task's id. What opens here runs in [`super::execute`].

use std::sync::Arc;

use daedalus_contract::Task;

use super::conversation_locks::ConversationKey;
use super::handle::Finished;
use super::history::{self, Unset};
use super::opening::Opening;
use super::record::{RECORD_VERSION, StoredCheckpoints, TurnRecord};
use super::request::{Heard, TurnRequest};
use super::service::{Started, TurnService};
use super::stream::{self, EventSender};
use super::{TurnError, task};
use crate::agents::agent_loop::{Agent, AgentRequest, Checkpoints};
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
pub(super) enum Opened {
    Answered(Box<Finished>),
    Begun(Box<Begun>),
}

/// A task's turn begun: what its agent's run and its end need.
pub(super) struct Begun {
    pub(super) turn: TaskTurn,
    pub(super) task_id: String,
    pub(super) context_id: String,
    /// The task's history with this turn's message.
    pub(super) history: Vec<daedalus_contract::Message>,
    pub(super) key: ConversationKey,
    pub(super) agent_request: Box<AgentRequest>,
    pub(super) stop: TurnStop,
    pub(super) out: EventSender,
    pub(super) checkpoints: Option<Arc<StoredCheckpoints>>,
}

impl TurnService {
    /// Opens an A2A task's turn: the task as it stands, replay, continuation, the context
    /// rules, the turn's record, and its begin; a replayed message or a turn resumed too often
    /// is answered here.
    pub(super) async fn open_task(
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
}
