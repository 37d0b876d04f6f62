//! The A2A JSON-RPC binding (spec §9) on `POST /`: a body with `"jsonrpc"` is a JSON-RPC
//! request; its method's params are read into the contract crate's types, run through the
//! turn service, and answered as JSON-RPC responses in strict A2A v1 JSON.
//!
//! Served: `SendMessage` (blocking, or `returnImmediately`), `SendStreamingMessage` and
//! `SubscribeToTask` (SSE, each `data` a full JSON-RPC response: the Task first, status updates
//! without `final`, and the stream simply ends), `GetTask`, `ListTasks`, `CancelTask` and
//! `GetExtendedAgentCard` and the four push-notification config methods, with the rules of
//! [`crate::faces::a2a::operations`].

use axum::Json;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    A2aError, A2aErrorKind, JsonRpcId, JsonRpcRequest, JsonRpcResponse, TaskIdRequest,
    TaskPushNotificationConfig,
};

use super::method::{Answer, read, result_of, sse_data};
use super::v03;
use crate::faces::a2a::{A2aFace, operations, sse, traced};
use crate::platform::identity::Caller;
use crate::platform::telemetry::a2a::A2aMethod;
use crate::platform::telemetry::record_error;
use tracing::Instrument as _;

/// Answers one JSON-RPC request.
pub(in crate::faces::a2a) async fn answer(
    state: &A2aFace,
    headers: &HeaderMap,
    uri: &Uri,
    caller: &Caller,
    request: JsonRpcRequest,
) -> Response {
    let id = request.id.clone().unwrap_or(JsonRpcId::Null);
    // A method the conventions do not name (one we do not serve) gets no A2A span.
    let span = A2aMethod::named(&request.method).map(|method| {
        let version = if v03::is_v03(&request.method) {
            v03::VERSION
        } else {
            operations::VERSION
        };
        traced::server_span(state, method, Some(version), headers)
    });
    let answered = dispatch(state, headers, uri, caller, request, &id);
    let answered = match &span {
        Some(span) => answered.instrument(span.clone()).await,
        None => answered.await,
    };
    if let (Some(span), Err(error)) = (&span, &answered) {
        record_error(span, &error.to_jsonrpc().code.to_string());
    }
    match answered {
        Ok(Answer::Result(result)) => Json(JsonRpcResponse::result(id, result)).into_response(),
        Ok(Answer::Stream(response)) => response,
        Err(error) => {
            let body = Json(JsonRpcResponse::<()>::error(id, error.to_jsonrpc()));
            // Every JSON-RPC error is an HTTP 200, a refusal at a limit or a budget too (the
            // official clients drop the body of any other status, and with it which limit
            // refused, when to retry and which task goes on: `docs/design.md` §6). The wait is
            // in the error's message and its `Retry-After`, for any client and balancer.
            let mut response = body.into_response();
            crate::faces::a2a::error::write_wait(&error, &mut response);
            response
        }
    }
}

/// A body that is JSON-RPC but not a request (the envelope is wrong).
pub(in crate::faces::a2a) fn invalid_request(why: &str) -> Response {
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

/// A JSON-RPC request whose body is not JSON.
pub(in crate::faces::a2a) fn parse_error(why: &str) -> Response {
    let error = A2aError::new(A2aErrorKind::ParseError, format!("Parse error: {why}"));
    Json(JsonRpcResponse::<()>::error(
        JsonRpcId::Null,
        error.to_jsonrpc(),
    ))
    .into_response()
}

/// A JSON-RPC request sent as `found` instead of `application/json`.
pub(in crate::faces::a2a) fn wrong_media_type(id: JsonRpcId, found: &str) -> Response {
    let error = A2aError::new(
        A2aErrorKind::ContentTypeNotSupported,
        format!("Content type {found:?} is not supported: send application/json"),
    );
    Json(JsonRpcResponse::<()>::error(id, error.to_jsonrpc())).into_response()
}

async fn dispatch(
    state: &A2aFace,
    headers: &HeaderMap,
    uri: &Uri,
    caller: &Caller,
    request: JsonRpcRequest,
    id: &JsonRpcId,
) -> Result<Answer, A2aError> {
    if request.jsonrpc != "2.0" {
        return Err(A2aError::new(
            A2aErrorKind::InvalidRequest,
            format!("jsonrpc must be \"2.0\", not {:?}", request.jsonrpc),
        ));
    }
    if v03::is_v03(&request.method) {
        return v03::dispatch(state, headers, caller, &request, id).await;
    }
    operations::check_version(headers, uri)?;
    let params = request.params.as_deref();
    match request.method.as_str() {
        "SendStreamingMessage" => {
            let (handle, inflight) =
                operations::start_stream(state, headers, caller, read(params)?).await?;
            let id = id.clone();
            Ok(Answer::Stream(sse::respond_with(
                handle,
                inflight,
                move |event| v1_response(&id, event),
            )))
        }
        "SubscribeToTask" => {
            let params: TaskIdRequest = read(params)?;
            let (task, subscription, inflight) =
                operations::subscribe(state, caller, &params.id).await?;
            let id = id.clone();
            Ok(Answer::Stream(sse::respond_to_subscription(
                task,
                subscription,
                inflight,
                move |event| v1_response(&id, event),
            )))
        }
        method @ ("CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig") => {
            push_config_method(state, caller, method, params).await
        }
        method => task_method(state, headers, caller, method, params).await,
    }
}

/// A method answered with one result: a send, a task's reads and cancel, the extended card.
async fn task_method(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: &Caller,
    method: &str,
    params: Option<&serde_json::value::RawValue>,
) -> Result<Answer, A2aError> {
    match method {
        "SendMessage" => operations::send_message(state, headers, caller, read(params)?)
            .await
            .and_then(|answer| result_of(&a2a_v1::of(&answer))),
        "GetTask" => operations::get_task(state, caller, &read(params)?)
            .await
            .and_then(|answer| result_of(&a2a_v1::of(&answer))),
        "ListTasks" => operations::list_tasks(state, caller, read(params)?)
            .await
            .and_then(|answer| result_of(&a2a_v1::of(&answer))),
        "CancelTask" => {
            let params: TaskIdRequest = read(params)?;
            operations::cancel_task(state, caller, &params.id)
                .await
                .and_then(|answer| result_of(&a2a_v1::of(&answer)))
        }
        "GetExtendedAgentCard" => result_of(&a2a_v1::of(&*operations::extended_card(state)?)),
        other => Err(A2aError::new(
            A2aErrorKind::MethodNotFound,
            format!("Method not found: {other}"),
        )),
    }
}

/// One of the four push-config methods.
async fn push_config_method(
    state: &A2aFace,
    caller: &Caller,
    method: &str,
    params: Option<&serde_json::value::RawValue>,
) -> Result<Answer, A2aError> {
    match method {
        "CreateTaskPushNotificationConfig" => {
            let config: TaskPushNotificationConfig = read(params)?;
            let task_id = config.task_id.clone();
            operations::create_push_config(state, caller, &task_id, config)
                .await
                .and_then(|kept| result_of(&kept))
        }
        "GetTaskPushNotificationConfig" => {
            operations::get_push_config(state, caller, &read(params)?)
                .await
                .and_then(|config| result_of(&config))
        }
        "ListTaskPushNotificationConfigs" => {
            operations::list_push_configs(state, caller, &read(params)?)
                .await
                .and_then(|page| result_of(&page))
        }
        _ => operations::delete_push_config(state, caller, &read(params)?)
            .await
            .and_then(|()| result_of(&serde_json::Map::new())),
    }
}

/// One SSE `data`: a JSON-RPC response whose result is the v1 stream response.
fn v1_response(id: &JsonRpcId, event: &daedalus_contract::StreamResponse) -> String {
    sse_data(&JsonRpcResponse::result(id.clone(), a2a_v1::of(event)), id)
}
