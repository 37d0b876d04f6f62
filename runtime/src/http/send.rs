//! `POST /`: run one turn of a task and answer with the `Task`.
//!
//! - The task id is `message.taskId`, else `message.messageId`; the context is the message's
//!   `contextId`, else the task's, else a new one.
//! - A message for a task left in `input-required` continues it: the agent sees the task's
//!   earlier messages. A message for a finished task starts a follow-up turn of it.
//! - A message already answered (same `messageId`, e.g. redelivered by the proxy) gets the
//!   stored answer; the agent does not run twice.
//! - The turn runs in its own task: if the client goes away, the work still finishes and its
//!   answer is kept for the redelivery.
//! - `completed` always carries an artifact and `failed` a `status.message`.
//! - `history` is returned only when `configuration.historyLength` asks for it, so a result
//!   never grows by the size of its own input. It is the context's stored conversation when the
//!   agent keeps sessions (spanning tasks and restarts), else this task's messages.

use axum::Json;
use axum::extract::State;
use chrono::{SecondsFormat, Utc};
use daedalus_schemas::{Message, Part, Role, SendMessageRequest, Task, TaskState, TaskStatus};

use super::AppState;
use super::error::ApiError;
use super::json::ContractJson;
use axum::http::HeaderMap;

use std::sync::Arc;

use crate::agent::{Agent, AgentOutcome, AgentRequest, Bearer, EventSink};
use crate::metrics::StateLabel;
use crate::tasks::TaskRecord;

/// How long a turn canceled by the request timeout gets to reach a safe point.
const CANCEL_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) async fn send_message(
    State(state): State<AppState>,
    headers: HeaderMap,
    ContractJson(request): ContractJson<SendMessageRequest>,
) -> Result<Json<Task>, ApiError> {
    check_message(&request.message)?;
    let permit = state.turn_permit().ok_or(ApiError::Busy)?;
    let bearer = Bearer::from_headers(&headers);
    let worker = state.clone();
    let turn = state.inflight().spawn(async move {
        let _permit = permit;
        run_turn(&worker, request, bearer).await
    });
    match turn.await {
        Ok(result) => result.map(Json),
        Err(join) => Err(ApiError::Internal(format!(
            "the task's worker stopped: {join}"
        ))),
    }
}

fn check_message(message: &Message) -> Result<(), ApiError> {
    if message.message_id.is_empty() {
        return Err(ApiError::BadRequest(
            "message.messageId must not be empty".into(),
        ));
    }
    if message.parts.is_empty() {
        return Err(ApiError::BadRequest(
            "message.parts must hold at least one part".into(),
        ));
    }
    if message.role != Role::User {
        return Err(ApiError::BadRequest("message.role must be \"user\"".into()));
    }
    Ok(())
}

async fn run_turn(
    state: &AppState,
    request: SendMessageRequest,
    bearer: Bearer,
) -> Result<Task, ApiError> {
    let task_id = request.message.effective_task_id().to_owned();
    let slot = state.tasks().slot(&task_id);
    let mut record = slot.lock().await;

    if let Some((answered, task)) = &record.last
        && *answered == request.message.message_id
    {
        tracing::info!(
            task_id,
            "message already answered; replaying the stored task"
        );
        return Ok(with_history(state, task.clone(), &record, request.history_length()).await);
    }
    let context_id = resolve_context(&record, &request.message, &task_id)?;

    let mut message = request.message.clone();
    message.task_id = Some(task_id.clone());
    message.context_id = Some(context_id.clone());
    // The conversation this turn writes to: one turn at a time in it, whichever face asks.
    let conversation = crate::conversations::a2a_conversation(&context_id).into_owned();
    let lock = state.conversations().get(&conversation);
    let _turn = lock.lock().await;
    let mut agent_request = AgentRequest::new(&task_id, &conversation, message.clone());
    agent_request.history.clone_from(&record.history);
    agent_request.metadata.clone_from(&request.metadata);
    agent_request.bearer = bearer;
    let metrics = Arc::clone(state.metrics());
    agent_request.events = EventSink::new(move |e| metrics.observe(&e));
    tracing::info!(task_id, context_id, "task started");
    let started = std::time::Instant::now();
    let outcome = run_agent(state, state.agent(), agent_request).await?;
    let task = finish(&task_id, &context_id, outcome);
    tracing::info!(task_id, state = %task.status.state, "task finished");
    let metrics = state.metrics();
    metrics
        .tasks
        .get_or_create(&StateLabel {
            state: task.status.state.to_string(),
        })
        .inc();
    metrics
        .task_duration
        .observe(started.elapsed().as_secs_f64());

    record.context_id = Some(context_id);
    record.history.push(message);
    record.history.extend(task.status.message.clone());
    record.last = Some((request.message.message_id.clone(), task.clone()));
    let answer = with_history(state, task, &record, request.history_length()).await;
    record.trim();
    state.tasks().account(&task_id, record.approx_bytes());
    Ok(answer)
}

fn resolve_context(
    record: &TaskRecord,
    message: &Message,
    task_id: &str,
) -> Result<String, ApiError> {
    match (&record.context_id, &message.context_id) {
        (Some(known), Some(given)) if known != given => Err(ApiError::BadRequest(format!(
            "task {task_id} belongs to context {known}, not {given}"
        ))),
        (Some(known), _) => Ok(known.clone()),
        (None, Some(given)) if !given.is_empty() => Ok(given.clone()),
        (None, _) => Ok(uuid::Uuid::new_v4().to_string()),
    }
}

/// Runs the agent under the request timeout and the shutdown token.
/// Runs `agent` under the request timeout and the shutdown token; `Err` when shutdown canceled
/// it (the caller should retry elsewhere).
pub(crate) async fn run_agent(
    state: &AppState,
    agent: &Arc<dyn Agent>,
    request: AgentRequest,
) -> Result<AgentOutcome, ApiError> {
    let cancel = state.cancel_token().child_token();
    let timeout = state.limits().request_timeout;
    let run = agent.run(request, cancel.clone());
    tokio::pin!(run);
    let timed_out = tokio::select! {
        outcome = &mut run => return settle(outcome, false),
        () = tokio::time::sleep(timeout) => true,
    };
    cancel.cancel();
    let outcome = tokio::time::timeout(CANCEL_SETTLE, run)
        .await
        .unwrap_or(AgentOutcome::Canceled);
    settle(outcome, timed_out)
}

fn settle(outcome: AgentOutcome, timed_out: bool) -> Result<AgentOutcome, ApiError> {
    match outcome {
        AgentOutcome::Canceled if timed_out => Ok(AgentOutcome::Failed {
            reason: "the task ran longer than the runtime's REQUEST_TIMEOUT and was canceled"
                .to_owned(),
        }),
        AgentOutcome::Canceled => Err(ApiError::CanceledByShutdown),
        other => Ok(other),
    }
}

/// The contract Task for an outcome: completed ⇒ artifacts, failed ⇒ `status.message`.
fn finish(task_id: &str, context_id: &str, outcome: AgentOutcome) -> Task {
    let agent_message = |parts: Vec<Part>| {
        let mut m = Message::new(uuid::Uuid::new_v4().to_string(), Role::Agent, parts);
        m.task_id = Some(task_id.to_owned());
        m.context_id = Some(context_id.to_owned());
        m
    };
    let (state, message, artifacts) = match outcome {
        AgentOutcome::Completed { artifacts } if artifacts.iter().any(|a| !a.parts.is_empty()) => {
            let artifacts = artifacts
                .into_iter()
                .filter(|a| !a.parts.is_empty())
                .collect();
            (TaskState::Completed, None, artifacts)
        }
        AgentOutcome::Completed { .. } => {
            let why = "the agent finished without producing any output";
            (
                TaskState::Failed,
                Some(agent_message(vec![Part::text(why)])),
                Vec::new(),
            )
        }
        AgentOutcome::InputRequired { mut question } => {
            if question.is_empty() {
                question.push(Part::text("More input is needed."));
            }
            (
                TaskState::InputRequired,
                Some(agent_message(question)),
                Vec::new(),
            )
        }
        AgentOutcome::Failed { reason } => (
            TaskState::Failed,
            Some(agent_message(vec![Part::text(reason)])),
            Vec::new(),
        ),
        AgentOutcome::Canceled => {
            let why = "the task was canceled";
            (
                TaskState::Canceled,
                Some(agent_message(vec![Part::text(why)])),
                Vec::new(),
            )
        }
    };
    Task {
        id: task_id.to_owned(),
        context_id: Some(context_id.to_owned()),
        status: TaskStatus {
            state,
            message,
            timestamp: Some(Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)),
        },
        artifacts,
        history: None,
        metadata: None,
    }
}

/// Adds the last `history_length` messages, when asked for: from the context's stored
/// conversation when the agent keeps one (so it spans tasks and restarts), else the messages
/// of this task the runtime remembers.
async fn with_history(
    state: &AppState,
    mut task: Task,
    record: &TaskRecord,
    history_length: Option<u32>,
) -> Task {
    let Some(n) = history_length else {
        return task;
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let stored = match &task.context_id {
        Some(context) => {
            let key = crate::conversations::a2a_conversation(context);
            state.agent().conversation(&key).await.map(|mut messages| {
                // Stored under the conversation key; shown under the client's context id.
                for m in &mut messages {
                    if let Some(turn) = m.message_id.strip_prefix(key.as_ref()) {
                        m.message_id = format!("{context}{turn}");
                    }
                    m.context_id = Some(context.clone());
                }
                messages
            })
        }
        None => None,
    };
    let mut history = stored.unwrap_or_else(|| record.history.clone());
    history.drain(..history.len().saturating_sub(n));
    task.history = Some(history);
    task
}
