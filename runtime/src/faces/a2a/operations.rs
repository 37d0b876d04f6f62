//! The A2A operations, whichever binding asked (JSON-RPC, HTTP+JSON): the spec's task rules
//! around the turn service, answered as A2A v1 JSON or an [`A2aError`] the binding writes in
//! its own form.
//!
//! - A new task's id is the server's; a `taskId` it does not know is `TaskNotFoundError`; a
//!   message to a finished task is `UnsupportedOperationError`; a repeated `messageId` is never
//!   replayed (that is the contract binding's rule, for the proxy).
//! - Versioning (§3.6): `A2A-Version` (header, or query parameter) must be `1.0`, patch
//!   numbers aside; an empty one means 0.3, which is not served yet (`VersionNotSupportedError`).

use axum::http::{HeaderMap, Uri};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{A2aError, A2aErrorKind, SendMessageRequest, Task, TaskState};
use serde::Deserialize;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::ContractState;
use crate::agent_loop::Bearer;
use crate::telemetry::TraceHeaders;
use crate::turns::{CancelError, Memory, TaskHandle, TurnError, TurnRequest};

/// The protocol version the standard bindings speak.
pub(super) const VERSION: &str = "1.0";
/// The header (and query parameter) that names it.
pub(super) const VERSION_PARAM: &str = "A2A-Version";

/// `GetTask`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GetTaskParams {
    pub(super) id: String,
    #[serde(default)]
    pub(super) history_length: Option<i32>,
}

/// The request's `A2A-Version` must be ours; none at all means 0.3 (§3.6).
pub(super) fn check_version(headers: &HeaderMap, uri: &Uri) -> Result<(), A2aError> {
    let from_query = uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(VERSION_PARAM))
            .map(|(_, v)| v.to_owned())
    });
    let asked = headers
        .get(VERSION_PARAM)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(from_query)
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "0.3".to_owned());
    // Major.Minor only: a patch number does not change the protocol.
    let major_minor: Vec<&str> = asked.trim().split('.').take(2).collect();
    if major_minor.join(".") == VERSION {
        return Ok(());
    }
    Err(A2aError::new(
        A2aErrorKind::VersionNotSupported,
        format!(
            "A2A version '{asked}' is not supported by this handler. Expected version '{VERSION}'."
        ),
    ))
}

/// The Task in A2A v1 JSON, its history cut to `history_length` (0: none).
pub(super) fn task_json(mut task: Task, history_length: Option<i32>) -> serde_json::Value {
    if let (Some(history), Some(n)) = (task.history.as_mut(), history_length) {
        let n = usize::try_from(n).unwrap_or(0);
        history.drain(..history.len().saturating_sub(n));
    }
    if task.history.as_ref().is_some_and(Vec::is_empty) {
        task.history = None;
    }
    a2a_v1::to_value(&task)
}

/// What `SendMessage` and `SendStreamingMessage` read from their request.
struct Send {
    turn: TurnRequest,
    history_length: Option<i32>,
    return_immediately: bool,
}

/// The turn a send asks for, under the spec's task rules: a new task gets an id from the
/// server; a `taskId` must name a task that may take more messages.
async fn prepare(
    state: &ContractState,
    headers: &HeaderMap,
    request: SendMessageRequest,
) -> Result<Send, A2aError> {
    let turns = state.core().turns();
    let history_length = request
        .configuration
        .as_ref()
        .and_then(|c| c.history_length)
        .and_then(|n| i32::try_from(n).ok());
    let return_immediately = request
        .configuration
        .as_ref()
        .and_then(|c| c.return_immediately)
        .unwrap_or(false);
    let mut message = request.message;
    match message.task_id.clone().filter(|id| !id.is_empty()) {
        // A message for a task continues it, if it may be continued.
        Some(task_id) => match turns.task_state(&task_id).await {
            None => {
                return Err(A2aError::new(
                    A2aErrorKind::TaskNotFound,
                    format!("Task {task_id} not found"),
                ));
            }
            Some(state) if state.is_terminal() => {
                return Err(A2aError::new(
                    A2aErrorKind::UnsupportedOperation,
                    format!(
                        "Task {task_id} is {state}, and a finished task takes no more messages"
                    ),
                ));
            }
            Some(_) => {}
        },
        // The server names a new task.
        None => message.task_id = Some(uuid::Uuid::new_v4().to_string()),
    }
    let mut turn = TurnRequest::new(state.agent(), message, Memory::Task);
    turn.bearer = Bearer::from_headers(headers);
    turn.trace = TraceHeaders::from_headers(headers);
    turn.replay = false;
    // The task's own messages: enough for any historyLength the caller asks.
    turn.history_length = Some(u32::try_from(history_length.unwrap_or(100).max(0)).unwrap_or(0));
    Ok(Send {
        turn,
        history_length,
        return_immediately,
    })
}

/// Starts a streamed send: the handle whose events the binding writes, and the token that
/// keeps the response in flight until its stream closes.
pub(super) async fn start_stream(
    state: &ContractState,
    headers: &HeaderMap,
    request: SendMessageRequest,
) -> Result<(TaskHandle, TaskTrackerToken), A2aError> {
    let Send { mut turn, .. } = prepare(state, headers, request).await?;
    turn.stream = true;
    let turns = state.core().turns();
    let handle = turns.start(turn).await.map_err(|e| refusal(&e))?;
    Ok((handle, turns.hold()))
}

pub(super) async fn send_message(
    state: &ContractState,
    headers: &HeaderMap,
    request: SendMessageRequest,
) -> Result<serde_json::Value, A2aError> {
    let turns = state.core().turns();
    let Send {
        turn,
        history_length,
        return_immediately,
    } = prepare(state, headers, request).await?;
    let handle = turns.start(turn).await.map_err(|e| refusal(&e))?;
    if return_immediately {
        // The turn goes on; its task is working (GetTask, CancelTask reach it by id).
        let mut status = daedalus_contract::TaskStatus::new(TaskState::Working);
        status.timestamp =
            Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let working = Task {
            id: handle.task_id().to_owned(),
            context_id: Some(handle.context_id().to_owned()),
            status,
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        return Ok(serde_json::json!({ "task": task_json(working, history_length) }));
    }
    let task = handle.finish().await.map_err(|e| refusal(&e))?;
    Ok(serde_json::json!({ "task": task_json(task, history_length) }))
}

pub(super) async fn get_task(
    state: &ContractState,
    params: GetTaskParams,
) -> Result<serde_json::Value, A2aError> {
    match state.core().turns().task_now(&params.id).await {
        Some(task) => Ok(task_json(task, params.history_length)),
        None => Err(A2aError::new(
            A2aErrorKind::TaskNotFound,
            format!("Task {} not found", params.id),
        )),
    }
}

pub(super) async fn cancel_task(
    state: &ContractState,
    task_id: &str,
) -> Result<serde_json::Value, A2aError> {
    match state.core().turns().cancel(task_id).await {
        Ok(Some(task)) => Ok(task_json(task, Some(0))),
        Ok(None) | Err(CancelError::NotFound(_)) => Err(A2aError::new(
            A2aErrorKind::TaskNotFound,
            format!("Task {task_id} not found"),
        )),
        Err(e @ CancelError::NotCancelable { .. }) => Err(A2aError::new(
            A2aErrorKind::TaskNotCancelable,
            e.to_string(),
        )),
    }
}

/// A turn the service would not run, as an A2A error.
fn refusal(error: &TurnError) -> A2aError {
    let kind = match error {
        TurnError::InvalidMessage { .. } | TurnError::ContextMismatch { .. } => {
            A2aErrorKind::InvalidParams
        }
        TurnError::NotReady
        | TurnError::ShuttingDown
        | TurnError::Busy
        | TurnError::CanceledByShutdown
        | TurnError::UnknownAgent(_)
        | TurnError::WorkerStopped(_) => A2aErrorKind::Internal,
    };
    A2aError::new(kind, error.to_string())
}
