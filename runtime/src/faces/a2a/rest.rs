//! The A2A HTTP+JSON binding (spec §11) under `/a2a/rest` (and `/a2a/rest/{tenant}`):
//! `POST /message:send`, `POST /message:stream` and `POST|GET /tasks/{id}:subscribe` (SSE of v1
//! stream responses), `GET /tasks/{id}` (`?historyLength=`), `GET /tasks` (`ListTasks`, its
//! parameters in the query), `POST /tasks/{id}:cancel` and `GET /extendedAgentCard`. Bodies are strict A2A v1
//! JSON as `application/a2a+json`; errors are a `google.rpc.Status` with the HTTP status of
//! the spec's table. The operations are [`super::operations`]'s, as for JSON-RPC.

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    A2aError, A2aErrorKind, GetTaskRequest, ListTasksRequest, SendMessageRequest,
    SendMessageResponse,
};
use serde::Deserialize;

use super::operations;
use super::{ContractState, json, sse};
use crate::identity::Caller;

/// Where the binding is mounted.
pub(super) const REST_PATH: &str = "/a2a/rest";
/// The binding's media type.
const MEDIA_TYPE: &str = "application/a2a+json";

/// The binding's routes, with and without a tenant.
pub(super) fn routes() -> Router<ContractState> {
    let operations = || {
        Router::new()
            .route("/message:send", post(message_send))
            .route("/message:stream", post(message_stream))
            .route("/tasks", get(tasks_list))
            .route("/tasks/{task}", get(task_get).post(task_action))
            .route("/extendedAgentCard", get(extended_card))
    };
    Router::new()
        .nest(REST_PATH, operations())
        .nest(&format!("{REST_PATH}/{{tenant}}"), operations())
}

/// A body in the binding's media type.
fn ok(value: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, MEDIA_TYPE)],
        serde_json::to_vec(value).unwrap_or_default(),
    )
        .into_response()
}

/// An error as a `google.rpc.Status`, with its HTTP status.
fn failed(error: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(error.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, MEDIA_TYPE)],
        serde_json::to_vec(&error.to_status_body()).unwrap_or_default(),
    )
        .into_response()
}

/// The version check of every operation: the refusal to answer, if the version is not ours.
fn version_refusal(headers: &HeaderMap, uri: &Uri) -> Option<Response> {
    operations::check_version(headers, uri)
        .err()
        .map(|e| failed(&e))
}

/// The request's `SendMessageRequest`, under the contract face's body rules (content type,
/// size, read time), or the error to answer.
async fn send_request(
    state: &ContractState,
    req: Request,
) -> Result<(HeaderMap, Uri, SendMessageRequest), Response> {
    let (headers, uri) = (req.headers().clone(), req.uri().clone());
    if let Some(refused) = version_refusal(&headers, &uri) {
        return Err(refused);
    }
    let bytes: Bytes = json::checked_body(req, state).await.map_err(|e| {
        let kind = if e.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            A2aErrorKind::ContentTypeNotSupported
        } else {
            A2aErrorKind::InvalidRequest
        };
        let mut response = failed(&A2aError::new(kind, e.to_string()));
        *response.status_mut() = e.status();
        response
    })?;
    let request = daedalus_contract::read::from_slice(&bytes).map_err(|e| {
        failed(&A2aError::new(
            A2aErrorKind::InvalidParams,
            format!("not a SendMessageRequest: {e}"),
        ))
    })?;
    Ok((headers, uri, request))
}

async fn message_send(State(state): State<ContractState>, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(caller) => caller,
        Err(refused) => return *refused,
    };
    let (headers, _, request) = match send_request(&state, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match operations::send_message(&state, &headers, &caller, request).await {
        Ok(task) => ok(&a2a_v1::to_value(&SendMessageResponse::Task(task))),
        Err(e) => failed(&e),
    }
}

async fn message_stream(State(state): State<ContractState>, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(caller) => caller,
        Err(refused) => return *refused,
    };
    let (headers, _, request) = match send_request(&state, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match operations::start_stream(&state, &headers, &caller, request).await {
        Ok((handle, inflight)) => sse::respond_with(handle, inflight, |event| {
            a2a_v1::to_value(event).to_string()
        }),
        Err(e) => failed(&e),
    }
}

/// `GET /tasks/{id}`'s query.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskQuery {
    #[serde(default)]
    history_length: Option<i32>,
}

/// The task id of a `{task}` segment, and the custom method after its colon, if any.
fn task_and_action(segment: &str) -> (&str, Option<&str>) {
    match segment.rsplit_once(':') {
        Some((task, action)) => (task, Some(action)),
        None => (segment, None),
    }
}

async fn task_get(
    State(state): State<ContractState>,
    Extension(caller): Extension<Caller>,
    Path(params): Path<Vec<(String, String)>>,
    Query(query): Query<TaskQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = version_refusal(&headers, &uri) {
        return refused;
    }
    let segment = task_segment(&params);
    let (task, action) = task_and_action(&segment);
    match action {
        None => {}
        Some("subscribe") => return subscribe(&state, &caller, task).await,
        Some(action) => {
            return failed(&A2aError::new(
                A2aErrorKind::MethodNotFound,
                format!("GET /tasks/{{id}}:{action} is not an operation"),
            ));
        }
    }
    let params = GetTaskRequest {
        tenant: None,
        id: task.to_owned(),
        history_length: query.history_length,
    };
    match operations::get_task(&state, &caller, &params).await {
        Ok(task) => ok(&a2a_v1::to_value(&task)),
        Err(e) => failed(&e),
    }
}

async fn task_action(
    State(state): State<ContractState>,
    Extension(caller): Extension<Caller>,
    Path(params): Path<Vec<(String, String)>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = version_refusal(&headers, &uri) {
        return refused;
    }
    let segment = task_segment(&params);
    match task_and_action(&segment) {
        (task, Some("cancel")) => match operations::cancel_task(&state, &caller, task).await {
            Ok(task) => ok(&a2a_v1::to_value(&task)),
            Err(e) => failed(&e),
        },
        (task, Some("subscribe")) => subscribe(&state, &caller, task).await,
        (_, action) => failed(&A2aError::new(
            A2aErrorKind::MethodNotFound,
            format!(
                "POST /tasks/{{id}}{} is not an operation",
                action.map_or(String::new(), |a| format!(":{a}"))
            ),
        )),
    }
}

/// `SubscribeToTask` (`POST`, or `GET`, `/tasks/{id}:subscribe`): SSE of v1 stream responses.
async fn subscribe(state: &ContractState, caller: &Caller, task_id: &str) -> Response {
    match operations::subscribe(state, caller, task_id).await {
        Ok((task, subscription, inflight)) => {
            sse::respond_to_subscription(task, subscription, inflight, |event| {
                a2a_v1::to_value(event).to_string()
            })
        }
        Err(e) => failed(&e),
    }
}

async fn tasks_list(
    State(state): State<ContractState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ListTasksRequest>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = version_refusal(&headers, &uri) {
        return refused;
    }
    let Ok(Query(params)) = query else {
        return failed(&A2aError::new(
            A2aErrorKind::InvalidParams,
            "Invalid parameters: the query is not a ListTasksRequest",
        ));
    };
    match operations::list_tasks(&state, &caller, params).await {
        Ok(page) => ok(&a2a_v1::to_value(&page)),
        Err(e) => failed(&e),
    }
}

async fn extended_card(
    State(state): State<ContractState>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = version_refusal(&headers, &uri) {
        return refused;
    }
    ok(&a2a_v1::to_value(&operations::extended_card(&state)))
}

/// Who sent `req`, as the face's authentication put it there (a request that never passed
/// it is refused: nothing is served to nobody).
fn caller_of(req: &Request) -> Result<Caller, Box<Response>> {
    req.extensions().get::<Caller>().cloned().ok_or_else(|| {
        Box::new(failed(&A2aError::new(
            A2aErrorKind::Internal,
            "the request was not authenticated",
        )))
    })
}

/// The `{task}` path segment (the tenant, when there is one, is the other).
fn task_segment(params: &[(String, String)]) -> String {
    params
        .iter()
        .find(|(name, _)| name == "task")
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}
