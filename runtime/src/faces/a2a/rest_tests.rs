//! The HTTP+JSON binding under `/a2a/rest`, without a socket: A2A v1 bodies in
//! `application/a2a+json`, errors as `google.rpc.Status` with the spec's HTTP codes.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::tests::passthrough;
use super::{ContractState, router};
use daedalus_contract::Schema;

/// Sends `method path` with `body` as A2A 1.0 (or with no version when `versioned` is false);
/// answers the status, the content type and the body.
async fn call(
    state: &ContractState,
    method: &str,
    path: &str,
    body: Option<Value>,
    versioned: bool,
) -> (StatusCode, String, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/a2a+json");
    if versioned {
        request = request.header("A2A-Version", "1.0");
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let response = router(state.clone())
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = if kind.starts_with("text/event-stream") {
        Value::String(String::from_utf8(bytes.to_vec()).unwrap())
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    (status, kind, value)
}

fn send(text: &str) -> Value {
    json!({"message": {"messageId": "m-r", "role": "ROLE_USER", "parts": [{"text": text}]}})
}

fn valid_task(task: &Value) {
    if let Err(e) = Schema::A2aV1Task.validate(task) {
        panic!("not an A2A v1.0 Task: {e}\n{task}");
    }
}

fn status_error(body: &Value) -> (u64, &str, &str) {
    (
        body["error"]["code"].as_u64().unwrap_or(0),
        body["error"]["status"].as_str().unwrap_or_default(),
        body["error"]["details"][0]["reason"]
            .as_str()
            .unwrap_or_default(),
    )
}

#[tokio::test]
async fn send_get_and_cancel_with_a2a_json_bodies_and_status_errors() {
    let state = passthrough();
    let (status, kind, body) = call(
        &state,
        "POST",
        "/a2a/rest/message:send",
        Some(send("hi")),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(kind, "application/a2a+json");
    valid_task(&body["task"]);
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let id = body["task"]["id"].as_str().unwrap().to_owned();

    let (status, _, got) = call(&state, "GET", &format!("/a2a/rest/tasks/{id}"), None, true).await;
    assert_eq!(status, StatusCode::OK);
    valid_task(&got);
    assert_eq!(got["id"], id.as_str());

    let (status, _, missing) = call(&state, "GET", "/a2a/rest/tasks/nobody", None, true).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(status_error(&missing), (404, "NOT_FOUND", "TASK_NOT_FOUND"));

    let (status, _, refused) = call(
        &state,
        "POST",
        &format!("/a2a/rest/tasks/{id}:cancel"),
        None,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        status_error(&refused),
        (400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE")
    );
}

#[tokio::test]
async fn the_tenant_form_and_the_version_rules() {
    let state = passthrough();
    let (status, _, body) = call(
        &state,
        "POST",
        "/a2a/rest/acme/message:send",
        Some(send("hi")),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    valid_task(&body["task"]);

    let (status, _, old) = call(
        &state,
        "POST",
        "/a2a/rest/message:send",
        Some(send("hi")),
        false,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(status_error(&old).2, "VERSION_NOT_SUPPORTED");
    let (status, _, by_query) = call(
        &state,
        "POST",
        "/a2a/rest/message:send?A2A-Version=1.0",
        Some(send("hi")),
        false,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{by_query}");
}

#[tokio::test]
async fn a_streamed_send_is_v1_stream_responses_that_end_with_the_task() {
    let (status, kind, body) = call(
        &passthrough(),
        "POST",
        "/a2a/rest/message:stream",
        Some(send("streamed")),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let events: Vec<Value> = body
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    for event in &events {
        if let Err(e) = Schema::A2aV1StreamResponse.validate(event) {
            panic!("not an A2A v1.0 StreamResponse: {e}\n{event}");
        }
    }
    assert!(events[0].get("task").is_some());
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn a_body_in_another_media_type_is_refused() {
    let response = router(passthrough())
        .oneshot(
            Request::post("/a2a/rest/message:send")
                .header(header::CONTENT_TYPE, "text/plain")
                .header("A2A-Version", "1.0")
                .body(Body::from(send("hi").to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn tasks_are_listed_from_the_query_and_paged() {
    let state = passthrough();
    for text in ["one", "two", "three"] {
        let mut body = send(text);
        body["message"]["contextId"] = json!("rest-ctx");
        let (status, _, _) = call(&state, "POST", "/a2a/rest/message:send", Some(body), true).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, kind, page) = call(
        &state,
        "GET",
        "/a2a/rest/acme/tasks?contextId=rest-ctx&pageSize=2&status=TASK_STATE_COMPLETED&includeArtifacts=true&historyLength=1",
        None,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(kind, "application/a2a+json");
    if let Err(e) = Schema::A2aV1ListTasksResponse.validate(&page) {
        panic!("not a ListTasksResponse: {e}\n{page}");
    }
    assert_eq!(page["totalSize"], 3);
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["artifacts"][0]["parts"][0]["text"], "three");
    assert_eq!(tasks[0]["history"].as_array().map(Vec::len), Some(1));
    let token = page["nextPageToken"].as_str().unwrap();
    let (_, _, rest) = call(
        &state,
        "GET",
        &format!("/a2a/rest/tasks?contextId=rest-ctx&pageSize=2&pageToken={token}"),
        None,
        true,
    )
    .await;
    assert_eq!(rest["tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(rest["nextPageToken"], "");

    let (status, _, bad) = call(&state, "GET", "/a2a/rest/tasks?pageSize=500", None, true).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(status_error(&bad).2, "INVALID_PARAMS");
}

#[tokio::test(start_paused = true)]
async fn subscribe_streams_a_running_task_by_post_or_get_and_refuses_a_finished_one() {
    let state = passthrough();
    for method in ["POST", "GET"] {
        let mut body = send("***SLEEP 200ms hello there");
        body["configuration"] = json!({"returnImmediately": true});
        let (_, _, started) =
            call(&state, "POST", "/a2a/rest/message:send", Some(body), true).await;
        let id = started["task"]["id"].as_str().unwrap().to_owned();
        let path = format!("/a2a/rest/tasks/{id}:subscribe");
        let (status, kind, Value::String(sse)) = call(&state, method, &path, None, true).await
        else {
            panic!("{method} {path} is not SSE");
        };
        assert_eq!(status, StatusCode::OK);
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        let events: Vec<Value> = sse
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).unwrap())
            .collect();
        for event in &events {
            if let Err(e) = Schema::A2aV1StreamResponse.validate(event) {
                panic!("not a StreamResponse: {e}\n{event}");
            }
        }
        assert_eq!(events[0]["task"]["id"], id.as_str());
        assert_eq!(
            events.last().unwrap()["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let (status, _, refused) = call(&state, method, &path, None, true).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert_eq!(status_error(&refused).2, "UNSUPPORTED_OPERATION");
    }
}

#[tokio::test]
async fn the_extended_card_is_served() {
    let (status, kind, card) = call(
        &passthrough(),
        "GET",
        "/a2a/rest/extendedAgentCard",
        None,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "application/a2a+json");
    if let Err(e) = Schema::A2aV1AgentCard.validate(&card) {
        panic!("not an AgentCard: {e}\n{card}");
    }
}
