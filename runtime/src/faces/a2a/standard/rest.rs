//! The A2A HTTP+JSON binding (spec §11) under `/a2a/rest` (and `/a2a/rest/{tenant}`):
//! `POST /message:send`, `POST /message:stream` and `POST|GET /tasks/{id}:subscribe` (SSE of v1
//! stream responses), `GET /tasks/{id}` (`?historyLength=`), `GET /tasks` (`ListTasks`, its
//! parameters in the query), `POST /tasks/{id}:cancel`, `GET /extendedAgentCard` and the push
//! configs under `/tasks/{id}/pushNotificationConfigs`. Bodies are strict A2A v1 JSON, answered
//! in the media type the client used: `application/a2a+json` (A2A v1.0.1) when the request's
//! `Content-Type` or `Accept` names it, else `application/json` (v1.0.0); errors are a
//! `google.rpc.Status` with the HTTP status of the spec's table. The operations are
//! [`crate::faces::a2a::operations`]'s, as for JSON-RPC.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    A2aError, A2aErrorKind, GetTaskRequest, ListPushConfigsRequest, ListTasksRequest,
    PushConfigRequest, SendMessageRequest, TaskPushNotificationConfig,
};
use serde::Deserialize;

use crate::faces::a2a::{A2aFace, body, operations, sse};
use crate::platform::identity::Caller;
use crate::platform::telemetry::a2a::A2aMethod;

/// Where the binding is mounted.
pub(in crate::faces::a2a) const REST_PATH: &str = "/a2a/rest";
/// The binding's media type since A2A v1.0.1.
const A2A_MEDIA_TYPE: &str = "application/a2a+json";
/// The binding's media type in A2A v1.0.0.
const JSON_MEDIA_TYPE: &str = "application/json";

/// The binding's routes, with and without a tenant.
pub(in crate::faces::a2a) fn routes() -> Router<A2aFace> {
    let operations = || {
        Router::new()
            .route("/message:send", post(message_send))
            .route("/message:stream", post(message_stream))
            .route("/tasks", get(tasks_list))
            .route("/tasks/{task}", get(task_get).post(task_action))
            .route(
                "/tasks/{task}/pushNotificationConfigs",
                get(push_configs_list).post(push_config_create),
            )
            .route(
                "/tasks/{task}/pushNotificationConfigs/{config}",
                get(push_config_get).delete(push_config_delete),
            )
            .route("/extendedAgentCard", get(extended_card))
    };
    Router::new()
        .nest(REST_PATH, operations())
        .nest(&format!("{REST_PATH}/{{tenant}}"), operations())
}

/// The tenant an HTTP+JSON path names: `/a2a/rest/{tenant}/...` (the segment after the
/// binding's root, unless it is an operation of the tenantless form).
pub(in crate::faces::a2a) fn path_tenant(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(REST_PATH)?.strip_prefix('/')?;
    let (first, more) = rest.split_once('/')?;
    if more.is_empty()
        || first.starts_with("message:")
        || first == "tasks"
        || first == "extendedAgentCard"
    {
        return None;
    }
    Some(first)
}

/// The operation a request asks for, by its HTTP method and path (for its span): the routes
/// above, with or without a tenant.
pub(in crate::faces::a2a) fn operation(method: &Method, path: &str) -> Option<A2aMethod> {
    let mut rest = path.strip_prefix(REST_PATH)?;
    if let Some(tenant) = path_tenant(path) {
        rest = rest.strip_prefix('/')?.strip_prefix(tenant)?;
    }
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let (get, post, delete) = (
        method == Method::GET,
        method == Method::POST,
        method == Method::DELETE,
    );
    Some(match segments.as_slice() {
        ["message:send"] if post => A2aMethod::SendMessage,
        ["message:stream"] if post => A2aMethod::SendStreamingMessage,
        ["tasks"] if get => A2aMethod::ListTasks,
        ["extendedAgentCard"] if get => A2aMethod::GetExtendedAgentCard,
        ["tasks", task] => match task_and_action(task).1 {
            None if get => A2aMethod::GetTask,
            Some("cancel") if post => A2aMethod::CancelTask,
            Some("subscribe") if get || post => A2aMethod::SubscribeToTask,
            _ => return None,
        },
        ["tasks", _, "pushNotificationConfigs"] if get => {
            A2aMethod::ListTaskPushNotificationConfigs
        }
        ["tasks", _, "pushNotificationConfigs"] if post => {
            A2aMethod::CreateTaskPushNotificationConfig
        }
        ["tasks", _, "pushNotificationConfigs", _] if get => {
            A2aMethod::GetTaskPushNotificationConfig
        }
        ["tasks", _, "pushNotificationConfigs", _] if delete => {
            A2aMethod::DeleteTaskPushNotificationConfig
        }
        _ => return None,
    })
}

/// The media type to answer a request in: `application/a2a+json` when its `Content-Type` or
/// `Accept` names it, else `application/json`.
pub(in crate::faces::a2a) fn media_type(headers: &HeaderMap) -> &'static str {
    let names_a2a = |name| {
        headers.get_all(name).iter().any(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',').any(|t| {
                    let essence = t.split(';').next().unwrap_or_default().trim();
                    essence.eq_ignore_ascii_case(A2A_MEDIA_TYPE)
                })
            })
        })
    };
    if names_a2a(header::CONTENT_TYPE) || names_a2a(header::ACCEPT) {
        A2A_MEDIA_TYPE
    } else {
        JSON_MEDIA_TYPE
    }
}

/// How one request is answered: in its media type.
#[derive(Debug, Clone, Copy)]
struct Reply(&'static str);

/// What is left to say when not even an error's status body can be written.
const UNWRITABLE_STATUS: &str =
    r#"{"error":{"code":500,"status":"INTERNAL","message":"the answer cannot be written"}}"#;

impl Reply {
    fn to(headers: &HeaderMap) -> Self {
        Self(media_type(headers))
    }

    /// A body in the request's media type; one that cannot be written is a 500 saying so.
    fn ok(self, value: &impl serde::Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => ([(header::CONTENT_TYPE, self.0)], body).into_response(),
            Err(e) => self.failed(&crate::faces::a2a::error::unwritable(&e)),
        }
    }

    /// An error as a `google.rpc.Status`, with its HTTP status.
    fn failed(self, error: &A2aError) -> Response {
        let status = StatusCode::from_u16(error.kind.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            status,
            [(header::CONTENT_TYPE, self.0)],
            serde_json::to_vec(&error.to_status_body())
                .unwrap_or_else(|_| UNWRITABLE_STATUS.as_bytes().to_vec()),
        )
            .into_response();
        crate::faces::a2a::error::write_wait(error, &mut response);
        response
    }

    /// The version check of every operation: the refusal to answer, if the version is not
    /// ours.
    fn version_refusal(self, headers: &HeaderMap, uri: &Uri) -> Option<Response> {
        operations::check_version(headers, uri)
            .err()
            .map(|e| self.failed(&e))
    }
}

/// What every operation of the binding checks first, in one place: the request's
/// `A2A-Version` is ours, and who sent it (as the face's authentication put it there: a
/// request that never passed it is refused, nothing is served to nobody). With them, the
/// media type to answer in; otherwise the refusal, in the binding's shape.
struct Checked {
    reply: Reply,
    caller: Caller,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Checked {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Response> {
        let reply = Reply::to(&parts.headers);
        if let Some(refused) = reply.version_refusal(&parts.headers, &parts.uri) {
            return Err(refused);
        }
        let caller = parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            reply.failed(&A2aError::new(
                A2aErrorKind::Internal,
                "the request was not authenticated",
            ))
        })?;
        Ok(Self { reply, caller })
    }
}

/// The request's `SendMessageRequest`, under the A2A face's body rules (content type,
/// size, read time), or the error to answer.
async fn send_request(
    state: &A2aFace,
    reply: Reply,
    req: Request,
) -> Result<(HeaderMap, Uri, SendMessageRequest), Response> {
    let (headers, uri) = (req.headers().clone(), req.uri().clone());
    let bytes: Bytes = body::checked_body(req, state).await.map_err(|e| {
        let kind = if e.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            A2aErrorKind::ContentTypeNotSupported
        } else {
            A2aErrorKind::InvalidRequest
        };
        let mut response = reply.failed(&A2aError::new(kind, e.to_string()));
        *response.status_mut() = e.status();
        response
    })?;
    let request = daedalus_contract::read::from_slice(&bytes).map_err(|e| {
        reply.failed(&A2aError::new(
            A2aErrorKind::InvalidParams,
            format!("not a SendMessageRequest: {e}"),
        ))
    })?;
    Ok((headers, uri, request))
}

async fn message_send(
    State(state): State<A2aFace>,
    Checked { reply, caller }: Checked,
    req: Request,
) -> Response {
    let (headers, _, request) = match send_request(&state, reply, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match operations::send_message(&state, &headers, &caller, request).await {
        Ok(answer) => reply.ok(&a2a_v1::of(&answer)),
        Err(e) => reply.failed(&e),
    }
}

async fn message_stream(
    State(state): State<A2aFace>,
    Checked { reply, caller }: Checked,
    req: Request,
) -> Response {
    let (headers, _, request) = match send_request(&state, reply, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    match operations::start_stream(&state, &headers, &caller, request).await {
        Ok((handle, inflight)) => sse::respond_with(handle, inflight, event_data),
        Err(e) => reply.failed(&e),
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
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    Query(query): Query<TaskQuery>,
    Checked { reply, caller }: Checked,
) -> Response {
    let segment = task_segment(&params);
    let (task, action) = task_and_action(&segment);
    match action {
        None => {}
        Some("subscribe") => return subscribe(&state, reply, &caller, task).await,
        Some(action) => {
            return reply.failed(&A2aError::new(
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
        Ok(task) => reply.ok(&a2a_v1::of(&task)),
        Err(e) => reply.failed(&e),
    }
}

async fn task_action(
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    Checked { reply, caller }: Checked,
) -> Response {
    let segment = task_segment(&params);
    match task_and_action(&segment) {
        (task, Some("cancel")) => match operations::cancel_task(&state, &caller, task).await {
            Ok(task) => reply.ok(&a2a_v1::of(&task)),
            Err(e) => reply.failed(&e),
        },
        (task, Some("subscribe")) => subscribe(&state, reply, &caller, task).await,
        (_, action) => reply.failed(&A2aError::new(
            A2aErrorKind::MethodNotFound,
            format!(
                "POST /tasks/{{id}}{} is not an operation",
                action.map_or(String::new(), |a| format!(":{a}"))
            ),
        )),
    }
}

/// One SSE `data`: the v1 stream response; one that cannot be written is the internal error's
/// status body in its place.
fn event_data(event: &daedalus_contract::StreamResponse) -> String {
    serde_json::to_string(&a2a_v1::of(event)).unwrap_or_else(|e| {
        let error = crate::faces::a2a::error::unwritable(&e);
        serde_json::to_string(&error.to_status_body())
            .unwrap_or_else(|_| UNWRITABLE_STATUS.to_owned())
    })
}

/// `SubscribeToTask` (`POST`, or `GET`, `/tasks/{id}:subscribe`): SSE of v1 stream responses.
async fn subscribe(state: &A2aFace, reply: Reply, caller: &Caller, task_id: &str) -> Response {
    match operations::subscribe(state, caller, task_id).await {
        Ok((task, subscription, inflight)) => {
            sse::respond_to_subscription(task, subscription, inflight, event_data)
        }
        Err(e) => reply.failed(&e),
    }
}

async fn tasks_list(
    State(state): State<A2aFace>,
    query: Result<Query<ListTasksRequest>, axum::extract::rejection::QueryRejection>,
    Checked { reply, caller }: Checked,
) -> Response {
    let Ok(Query(params)) = query else {
        return reply.failed(&A2aError::new(
            A2aErrorKind::InvalidParams,
            "Invalid parameters: the query is not a ListTasksRequest",
        ));
    };
    match operations::list_tasks(&state, &caller, params).await {
        Ok(page) => reply.ok(&a2a_v1::of(&page)),
        Err(e) => reply.failed(&e),
    }
}

async fn extended_card(State(state): State<A2aFace>, Checked { reply, .. }: Checked) -> Response {
    match operations::extended_card(&state) {
        Ok(card) => reply.ok(&a2a_v1::of(&*card)),
        Err(e) => reply.failed(&e),
    }
}

/// `POST /tasks/{id}/pushNotificationConfigs`: the body is the config (its `taskId` is the
/// path's).
async fn push_config_create(
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    Checked { reply, caller }: Checked,
    req: Request,
) -> Response {
    let bytes: Bytes = match body::checked_body(req, &state).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let mut response =
                reply.failed(&A2aError::new(A2aErrorKind::InvalidRequest, e.to_string()));
            *response.status_mut() = e.status();
            return response;
        }
    };
    let config: TaskPushNotificationConfig = match daedalus_contract::read::from_slice(&bytes) {
        Ok(config) => config,
        Err(e) => {
            return reply.failed(&A2aError::new(
                A2aErrorKind::InvalidParams,
                format!("not a TaskPushNotificationConfig: {e}"),
            ));
        }
    };
    let task_id = path_param(&params, "task");
    match operations::create_push_config(&state, &caller, &task_id, config).await {
        Ok(kept) => reply.ok(&kept),
        Err(e) => reply.failed(&e),
    }
}

/// `GET /tasks/{id}/pushNotificationConfigs` (`pageSize`, `pageToken` in the query).
async fn push_configs_list(
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    query: Result<Query<ListPushConfigsRequest>, axum::extract::rejection::QueryRejection>,
    Checked { reply, caller }: Checked,
) -> Response {
    let Ok(Query(mut request)) = query else {
        return reply.failed(&A2aError::new(
            A2aErrorKind::InvalidParams,
            "Invalid parameters: the query is not a ListTaskPushNotificationConfigsRequest",
        ));
    };
    request.task_id = path_param(&params, "task");
    match operations::list_push_configs(&state, &caller, &request).await {
        Ok(page) => reply.ok(&page),
        Err(e) => reply.failed(&e),
    }
}

/// `GET /tasks/{id}/pushNotificationConfigs/{configId}`.
async fn push_config_get(
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    Checked { reply, caller }: Checked,
) -> Response {
    match operations::get_push_config(&state, &caller, &push_config_request(&params)).await {
        Ok(config) => reply.ok(&config),
        Err(e) => reply.failed(&e),
    }
}

/// `DELETE /tasks/{id}/pushNotificationConfigs/{configId}`: `{}`, also when there was none.
async fn push_config_delete(
    State(state): State<A2aFace>,
    Path(params): Path<Vec<(String, String)>>,
    Checked { reply, caller }: Checked,
) -> Response {
    match operations::delete_push_config(&state, &caller, &push_config_request(&params)).await {
        Ok(()) => reply.ok(&serde_json::json!({})),
        Err(e) => reply.failed(&e),
    }
}

fn push_config_request(params: &[(String, String)]) -> PushConfigRequest {
    PushConfigRequest {
        tenant: None,
        task_id: path_param(params, "task"),
        id: path_param(params, "config"),
    }
}

/// The `{task}` path segment (the tenant, when there is one, is the other).
fn task_segment(params: &[(String, String)]) -> String {
    path_param(params, "task")
}

/// The path segment `name`.
fn path_param(params: &[(String, String)], name: &str) -> String {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod unwritable_tests {
    use axum::http::StatusCode;
    use http_body_util::BodyExt;

    use super::Reply;

    struct Unwritable;

    impl serde::Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no JSON form"))
        }
    }

    #[tokio::test]
    async fn an_answer_that_cannot_be_written_is_a_500_saying_so() {
        let response = Reply("application/json").ok(&Unwritable);
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(status["error"]["status"], "INTERNAL", "{status}");
        let message = status["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("no JSON form"), "{message}");
    }
}
