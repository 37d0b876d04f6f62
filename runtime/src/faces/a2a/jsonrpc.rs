//! The A2A JSON-RPC binding (spec §9) on `POST /`: a body with `"jsonrpc"` is a JSON-RPC
//! request; its method's params are read into the contract crate's types, run through the
//! turn service, and answered as JSON-RPC responses in strict A2A v1 JSON.
//!
//! Served so far: `SendMessage` (blocking, or `returnImmediately`), `GetTask` and
//! `CancelTask`, with the spec's task rules — the server makes the id of a new task, a
//! `taskId` it does not know is `TaskNotFoundError`, a message to a finished task is refused
//! with `UnsupportedOperationError`, and a repeated `messageId` is never replayed. The
//! push-notification methods answer `PushNotificationNotSupportedError`. Versioning (§3.6):
//! `A2A-Version` (header, or query parameter) must be `1.0`; an empty one means 0.3, which this
//! binding does not serve yet (`VersionNotSupportedError`).

use axum::Json;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    A2aError, A2aErrorKind, JsonRpcId, JsonRpcRequest, JsonRpcResponse, SendMessageRequest, Task,
    TaskState,
};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::ContractState;
use crate::agent_loop::Bearer;
use crate::telemetry::TraceHeaders;
use crate::turns::{CancelError, Memory, TurnError, TurnRequest};

/// The protocol version this binding speaks.
const VERSION: &str = "1.0";
/// The header (and query parameter) that names it.
const VERSION_PARAM: &str = "A2A-Version";

/// `GetTask`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetTaskParams {
    id: String,
    #[serde(default)]
    history_length: Option<i32>,
}

/// `CancelTask`'s params.
#[derive(Debug, Deserialize)]
struct CancelTaskParams {
    id: String,
}

/// Answers one JSON-RPC request.
pub(super) async fn answer(
    state: &ContractState,
    headers: &HeaderMap,
    uri: &Uri,
    request: JsonRpcRequest,
) -> Response {
    let id = request.id.clone().unwrap_or(JsonRpcId::Null);
    match dispatch(state, headers, uri, request).await {
        Ok(result) => Json(JsonRpcResponse::result(id, result)).into_response(),
        Err(error) => Json(JsonRpcResponse::<()>::error(id, error.to_jsonrpc())).into_response(),
    }
}

/// A body that is JSON-RPC but not a request (the envelope is wrong).
pub(super) fn invalid_request(why: &str) -> Response {
    let error = A2aError::new(
        A2aErrorKind::InvalidRequest,
        format!("Request payload validation error: {why}"),
    );
    Json(JsonRpcResponse::<()>::error(
        JsonRpcId::Null,
        error.to_jsonrpc(),
    ))
    .into_response()
}

async fn dispatch(
    state: &ContractState,
    headers: &HeaderMap,
    uri: &Uri,
    request: JsonRpcRequest,
) -> Result<serde_json::Value, A2aError> {
    if request.jsonrpc != "2.0" {
        return Err(A2aError::new(
            A2aErrorKind::InvalidRequest,
            format!("jsonrpc must be \"2.0\", not {:?}", request.jsonrpc),
        ));
    }
    check_version(headers, uri)?;
    let params = request.params.as_deref();
    match request.method.as_str() {
        "SendMessage" => send_message(state, headers, read(params)?).await,
        "GetTask" => get_task(state, read(params)?).await,
        "CancelTask" => cancel_task(state, read(params)?).await,
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(A2aError::new(
            A2aErrorKind::PushNotificationNotSupported,
            "push notifications are not supported (the card says pushNotifications: false)",
        )),
        "SendStreamingMessage" | "SubscribeToTask" | "ListTasks" | "GetExtendedAgentCard" => {
            Err(A2aError::new(
                A2aErrorKind::UnsupportedOperation,
                format!("{} is not served on this binding yet", request.method),
            ))
        }
        other => Err(A2aError::new(
            A2aErrorKind::MethodNotFound,
            format!("Method not found: {other}"),
        )),
    }
}

/// The request's `A2A-Version` must be ours; none at all means 0.3 (§3.6).
fn check_version(headers: &HeaderMap, uri: &Uri) -> Result<(), A2aError> {
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

/// A method's params, read into its type.
fn read<T: serde::de::DeserializeOwned>(params: Option<&RawValue>) -> Result<T, A2aError> {
    let raw = params.map_or("{}", RawValue::get);
    daedalus_contract::read::from_slice(raw.as_bytes()).map_err(|e| {
        A2aError::new(
            A2aErrorKind::InvalidParams,
            format!("Invalid parameters: {e}"),
        )
    })
}

/// The Task in A2A v1 JSON, its history cut to `history_length` (0: none).
fn task_json(mut task: Task, history_length: Option<i32>) -> serde_json::Value {
    if let (Some(history), Some(n)) = (task.history.as_mut(), history_length) {
        let n = usize::try_from(n).unwrap_or(0);
        history.drain(..history.len().saturating_sub(n));
    }
    if task.history.as_ref().is_some_and(Vec::is_empty) {
        task.history = None;
    }
    a2a_v1::to_value(&task)
}

async fn send_message(
    state: &ContractState,
    headers: &HeaderMap,
    request: SendMessageRequest,
) -> Result<serde_json::Value, A2aError> {
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

async fn get_task(
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

async fn cancel_task(
    state: &ContractState,
    params: CancelTaskParams,
) -> Result<serde_json::Value, A2aError> {
    match state.core().turns().cancel(&params.id).await {
        Ok(Some(task)) => Ok(task_json(task, Some(0))),
        Ok(None) | Err(CancelError::NotFound(_)) => Err(A2aError::new(
            A2aErrorKind::TaskNotFound,
            format!("Task {} not found", params.id),
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
