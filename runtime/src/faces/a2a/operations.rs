//! The A2A operations, whichever standard binding asked (JSON-RPC v1.0 and v0.3, HTTP+JSON,
//! gRPC; [`super::standard`]): the spec's task rules
//! around the turn service, answered as A2A v1 JSON or an [`A2aError`] the binding writes in
//! its own form.
//!
//! - A new task's id is the server's; a `taskId` it does not know is `TaskNotFoundError`; a
//!   message to a finished task is `UnsupportedOperationError`; a repeated `messageId` is never
//!   replayed (that is the contract binding's rule, for the proxy).
//! - Versioning (§3.6): `A2A-Version` (header, or query parameter) must be `1.0`, patch
//!   numbers aside; an empty one means 0.3, refused here with `VersionNotSupportedError`. A
//!   v0.3 client is served by its own method names on JSON-RPC ([`super::standard::v03`]),
//!   which reads its requests into these operations' types.

use std::sync::Arc;

use axum::http::{HeaderMap, Uri};
use daedalus_contract::{
    A2aError, A2aErrorKind, GetTaskRequest, ListPushConfigsRequest, ListPushConfigsResponse,
    ListTasksRequest, ListTasksResponse, PushConfigRequest, SendMessageRequest,
    SendMessageResponse, Task, TaskPushNotificationConfig, TaskState,
};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::A2aFace;
use crate::platform::bearer::Bearer;
use crate::platform::identity::Caller;
use crate::platform::telemetry::TraceHeaders;
use crate::platform::telemetry::a2a as span;
use crate::services::push::PushError;
use crate::services::turns::{
    CancelError, FollowError, Following, Origin, SendError, TaskHandle, TurnError, TurnErrorKind,
    TurnRequest,
};
use crate::services::turns::{ListError, ListQuery, SubscribeRefusal};

/// The protocol version the standard bindings speak.
pub(super) const VERSION: &str = "1.0";
/// The header (and query parameter) that names it.
pub(super) const VERSION_PARAM: &str = "A2A-Version";

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

/// The span of the request being answered (the binding's SERVER span, [`super::traced`]).
fn current() -> tracing::Span {
    tracing::Span::current()
}

/// A push service's refusal, as A2A says it.
fn push_refusal(error: &PushError) -> A2aError {
    let kind = match error {
        PushError::NotSupported => A2aErrorKind::PushNotificationNotSupported,
        PushError::TaskNotFound(_) | PushError::ConfigNotFound { .. } => A2aErrorKind::TaskNotFound,
        PushError::Invalid(_) => A2aErrorKind::InvalidParams,
        PushError::Unavailable(_) => A2aErrorKind::Internal,
    };
    A2aError::new(kind, error.to_string())
}

/// `CreateTaskPushNotificationConfig`: the config as kept (its id named if it had none).
pub(super) async fn create_push_config(
    state: &A2aFace,
    caller: &Caller,
    task_id: &str,
    config: TaskPushNotificationConfig,
) -> Result<TaskPushNotificationConfig, A2aError> {
    if task_id.is_empty() {
        return Err(invalid_params("taskId is required"));
    }
    span::record_tenant(&current(), config.tenant.as_deref());
    span::record_ids(&current(), Some(task_id), None);
    state
        .core()
        .push()
        .create(caller, task_id, config)
        .await
        .map_err(|e| push_refusal(&e))
}

/// `GetTaskPushNotificationConfig`.
pub(super) async fn get_push_config(
    state: &A2aFace,
    caller: &Caller,
    request: &PushConfigRequest,
) -> Result<TaskPushNotificationConfig, A2aError> {
    span::record_tenant(&current(), request.tenant.as_deref());
    span::record_ids(&current(), Some(&request.task_id), None);
    state
        .core()
        .push()
        .get(caller, &request.task_id, &request.id)
        .await
        .map_err(|e| push_refusal(&e))
}

/// `ListTaskPushNotificationConfigs`.
pub(super) async fn list_push_configs(
    state: &A2aFace,
    caller: &Caller,
    request: &ListPushConfigsRequest,
) -> Result<ListPushConfigsResponse, A2aError> {
    span::record_tenant(&current(), request.tenant.as_deref());
    span::record_ids(&current(), Some(&request.task_id), None);
    state
        .core()
        .push()
        .list(caller, request)
        .await
        .map_err(|e| push_refusal(&e))
}

/// `DeleteTaskPushNotificationConfig`: done also when there was no such config.
pub(super) async fn delete_push_config(
    state: &A2aFace,
    caller: &Caller,
    request: &PushConfigRequest,
) -> Result<(), A2aError> {
    span::record_tenant(&current(), request.tenant.as_deref());
    span::record_ids(&current(), Some(&request.task_id), None);
    state
        .core()
        .push()
        .delete(caller, &request.task_id, &request.id)
        .await
        .map_err(|e| push_refusal(&e))
}

/// What `SendMessage` and `SendStreamingMessage` read from their request.
struct Send {
    turn: TurnRequest,
    webhook: Option<TaskPushNotificationConfig>,
    return_immediately: bool,
}

impl Send {
    /// Starts the turn under the standard bindings' task rules (the turn service's
    /// [`send_standard`](crate::services::turns::TurnService::send_standard)), answering its
    /// handle.
    async fn start(self, state: &A2aFace) -> Result<TaskHandle, A2aError> {
        let core = state.core();
        let handle = core
            .turns()
            .send_standard(core.push(), self.turn, self.webhook)
            .await
            .map_err(|e| match e {
                SendError::Turn(e) => refusal(&e),
                SendError::Push(e) => push_refusal(&e),
            })?;
        Ok(handle)
    }
}

/// The send `request` asks for, read off the wire: its message, its configuration, what its
/// metadata asks of the turn, and who asks.
fn prepare(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: &Caller,
    request: SendMessageRequest,
) -> Result<Send, A2aError> {
    let configuration = request.configuration.unwrap_or_default();
    let metadata = request.metadata.as_ref();
    let invalid = |e: crate::config::sampling::SamplingError| invalid_params(&e.to_string());
    let sampling = super::controls::sampling(metadata).map_err(invalid)?;
    let controls = super::controls::controls(metadata).map_err(invalid)?;
    span::record_message(&current(), &request.message);
    let origin = Origin {
        caller: caller.clone(),
        bearer: Bearer::of(caller, headers),
        // The request's span, so the turn's is its child.
        trace: TraceHeaders::current_or(TraceHeaders::from_headers(headers)),
    };
    let mut turn = TurnRequest::standard(state.agent(), request.message, origin)
        .asking(Ok(sampling), controls);
    turn.history_length = configuration.history_length;
    Ok(Send {
        turn,
        webhook: configuration.task_push_notification_config,
        return_immediately: configuration.return_immediately.unwrap_or(false),
    })
}

/// Starts a streamed send: the handle whose events the binding writes, and the token that
/// keeps the response in flight until its stream closes.
pub(super) async fn start_stream(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: &Caller,
    request: SendMessageRequest,
) -> Result<(TaskHandle, TaskTrackerToken), A2aError> {
    streams_served(state)?;
    let mut send = prepare(state, headers, caller, request)?;
    send.turn.stream = true;
    let handle = send.start(state).await?;
    span::record_ids(
        &current(),
        Some(handle.task_id()),
        Some(handle.context_id()),
    );
    Ok((handle, state.core().turns().hold()))
}

/// `SendMessage`: the task the message started or continued, finished unless the caller asked
/// to return at once; or the agent's message, when it answered with one.
pub(super) async fn send_message(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: &Caller,
    request: SendMessageRequest,
) -> Result<SendMessageResponse, A2aError> {
    let mut send = prepare(state, headers, caller, request)?;
    let returns_at_once = send.return_immediately;
    send.turn = if returns_at_once {
        send.turn.answered_as_it_begins()
    } else {
        send.turn.answered_when_it_ends()
    };
    let handle = send.start(state).await?;
    span::record_ids(
        &current(),
        Some(handle.task_id()),
        Some(handle.context_id()),
    );
    if returns_at_once {
        // The turn goes on; the answer is its task as it began (GetTask, SubscribeToTask and
        // CancelTask reach it by id).
        let task = handle.began().ok_or_else(|| {
            A2aError::new(A2aErrorKind::Internal, "the turn began no task".to_owned())
        })?;
        span::record_state(&current(), task.status.state);
        return Ok(SendMessageResponse::Task(task));
    }
    // The answer shows the history the request asked for (the turn service shapes it).
    let answer = handle.answer().await.map_err(|e| refusal(&e))?;
    if let SendMessageResponse::Task(task) = &answer {
        span::record_state(&current(), task.status.state);
    }
    Ok(answer)
}

pub(super) async fn get_task(
    state: &A2aFace,
    caller: &Caller,
    params: &GetTaskRequest,
) -> Result<Task, A2aError> {
    span::record_tenant(&current(), params.tenant.as_deref());
    span::record_ids(&current(), Some(&params.id), None);
    let history_length = non_negative(params.history_length, "historyLength")?;
    match state
        .core()
        .turns()
        .get_task(&params.id, caller, history_length)
        .await
    {
        Some(task) => {
            span::record_ids(&current(), None, task.context_id.as_deref());
            span::record_state(&current(), task.status.state);
            Ok(task)
        }
        None => Err(not_found(&params.id)),
    }
}

/// The store's query for `request`, or why its parameters are wrong.
fn list_query(request: ListTasksRequest, caller: &Caller) -> Result<ListQuery, A2aError> {
    let state = match request.status.as_deref().map(str::trim) {
        None | Some("" | "TASK_STATE_UNSPECIFIED") => None,
        Some(named) => Some(
            TaskState::parse_lenient(named)
                .ok_or_else(|| invalid_params(&format!("status {named:?} is not a task state")))?,
        ),
    };
    let status_after = match request.status_timestamp_after.as_deref() {
        None | Some("") => None,
        Some(at) => Some(
            chrono::DateTime::parse_from_rfc3339(at)
                .map_err(|_| {
                    invalid_params(&format!(
                        "statusTimestampAfter {at:?} is not an ISO 8601 timestamp"
                    ))
                })?
                .with_timezone(&chrono::Utc),
        ),
    };
    Ok(ListQuery {
        context_id: request.context_id.filter(|c| !c.is_empty()),
        state,
        status_after,
        page_size: non_negative(request.page_size, "pageSize")?,
        page_token: request.page_token,
        history_length: non_negative(request.history_length, "historyLength")?,
        include_artifacts: request.include_artifacts.unwrap_or(false),
        caller: caller.clone(),
    })
}

pub(super) async fn list_tasks(
    state: &A2aFace,
    caller: &Caller,
    request: ListTasksRequest,
) -> Result<ListTasksResponse, A2aError> {
    span::record_tenant(&current(), request.tenant.as_deref());
    let query = list_query(request, caller)?;
    let page = state
        .core()
        .turns()
        .list_tasks(&query)
        .await
        .map_err(|e: ListError| invalid_params(&e.to_string()))?;
    Ok(ListTasksResponse {
        tasks: page.tasks,
        next_page_token: page.next_page_token,
        page_size: i32::try_from(page.page_size).unwrap_or(i32::MAX),
        total_size: i32::try_from(page.total_size).unwrap_or(i32::MAX),
    })
}

/// `SubscribeToTask`: the task as it stands, every later event, and the token that keeps the
/// response in flight until its stream closes.
pub(super) async fn subscribe(
    state: &A2aFace,
    caller: &Caller,
    task_id: &str,
) -> Result<(Task, Following, TaskTrackerToken), A2aError> {
    streams_served(state)?;
    let turns = state.core().turns();
    span::record_ids(&current(), Some(task_id), None);
    match turns.follow_task(task_id, caller).await {
        Ok((task, following)) => {
            // Its state is the stream's to record, as it ends.
            span::record_ids(&current(), None, task.context_id.as_deref());
            Ok((task, following, turns.hold()))
        }
        Err(FollowError::Busy(limit)) => Err(refusal(&TurnError::Busy(limit))),
        Err(FollowError::Refused(SubscribeRefusal::Unknown)) => Err(not_found(task_id)),
        Err(FollowError::Refused(SubscribeRefusal::Terminal(state))) => Err(A2aError::new(
            A2aErrorKind::UnsupportedOperation,
            format!("Task {task_id} is {state}: a finished task has no updates to subscribe to"),
        )),
    }
}

/// Refuses a stream when the card says streams are not served (`A2A_STREAMING=off`).
fn streams_served(state: &A2aFace) -> Result<(), A2aError> {
    if state.card().capabilities.streaming == Some(true) {
        return Ok(());
    }
    Err(A2aError::new(
        A2aErrorKind::UnsupportedOperation,
        "This agent does not stream (its card says capabilities.streaming: false)",
    ))
}

/// `GetExtendedAgentCard`: the card (this server shows every caller the same one), served
/// when the card says there is one: only behind authentication (A2A §13.3), which the binding
/// has checked by now.
pub(super) fn extended_card(
    state: &A2aFace,
) -> Result<Arc<daedalus_contract::AgentCard>, A2aError> {
    let card = state.card();
    if card.capabilities.extended_agent_card == Some(true) {
        return Ok(card);
    }
    Err(A2aError::new(
        A2aErrorKind::UnsupportedOperation,
        "This agent has no extended card (its card says capabilities.extendedAgentCard: false; \
         one is served only behind authentication)",
    ))
}

/// The extended card in its v0.3 form, signed as itself.
pub(super) fn extended_v03_card(state: &A2aFace) -> Result<Arc<serde_json::Value>, A2aError> {
    extended_card(state)?;
    Ok(Arc::clone(&state.cards().v03))
}

/// A count the wire carries signed (`historyLength`, `pageSize`), or why it is wrong.
fn non_negative(n: Option<i32>, field: &str) -> Result<Option<u32>, A2aError> {
    n.map(|n| {
        u32::try_from(n).map_err(|_| invalid_params(&format!("{field} must not be negative")))
    })
    .transpose()
}

fn not_found(task_id: &str) -> A2aError {
    A2aError::new(
        A2aErrorKind::TaskNotFound,
        format!("Task {task_id} not found"),
    )
}

fn invalid_params(why: &str) -> A2aError {
    A2aError::new(
        A2aErrorKind::InvalidParams,
        format!("Invalid parameters: {why}"),
    )
}

pub(super) async fn cancel_task(
    state: &A2aFace,
    caller: &Caller,
    task_id: &str,
) -> Result<Task, A2aError> {
    span::record_ids(&current(), Some(task_id), None);
    match state.core().turns().cancel(task_id, caller).await {
        Ok(task) => {
            span::record_ids(&current(), None, task.context_id.as_deref());
            span::record_state(&current(), task.status.state);
            Ok(task)
        }
        Err(CancelError::NotFound(_)) => Err(not_found(task_id)),
        Err(e @ CancelError::NotCancelable { .. }) => Err(A2aError::new(
            A2aErrorKind::TaskNotCancelable,
            e.to_string(),
        )),
        Err(e @ CancelError::Unsettled { .. }) => {
            Err(A2aError::new(A2aErrorKind::Internal, e.to_string()))
        }
    }
}

/// A budget's refusal as an A2A error: `BUDGET_EXCEEDED`, its metadata naming the caller's
/// scope and the limit (never another's figures), and when to come back.
pub(super) fn over_budget(refusal: &crate::services::turns::BudgetRefusal) -> A2aError {
    let error = A2aError::new(A2aErrorKind::BudgetExceeded, refusal.to_string())
        .with_metadata("scope", refusal.scope.as_str())
        .with_metadata("limit", refusal.limit.key())
        .with_rate_limits(refusal.rate_limits.clone());
    match refusal.retry_after {
        Some(after) => error.retry_after(after.as_secs()),
        None => error,
    }
}

/// A turn the service would not run, as an A2A error.
fn refusal(error: &TurnError) -> A2aError {
    let kind = match error.kind() {
        TurnErrorKind::InvalidMessage | TurnErrorKind::TooLarge => A2aErrorKind::InvalidParams,
        TurnErrorKind::Busy(_) | TurnErrorKind::HandedOff(_) => A2aErrorKind::Unavailable,
        TurnErrorKind::NotReady
        | TurnErrorKind::ShuttingDown
        | TurnErrorKind::CanceledByShutdown
        | TurnErrorKind::Internal
        | TurnErrorKind::StoreUnavailable => A2aErrorKind::Internal,
        // Another message of the task came first (on this replica or another).
        TurnErrorKind::TaskConflict => A2aErrorKind::UnsupportedOperation,
        TurnErrorKind::NotFound => A2aErrorKind::TaskNotFound,
        TurnErrorKind::OverBudget(refusal) => return over_budget(refusal),
    };
    A2aError::new(kind, error.to_string())
}
