//! The HTTP+JSON binding under `/a2a/rest`, without a socket: A2A v1 bodies in
//! `application/a2a+json`, errors as `google.rpc.Status` with the spec's HTTP codes.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::faces::a2a::tests::passthrough;
use crate::faces::a2a::{A2aFace, router};
use daedalus_contract::Schema;

/// Sends `method path` with `body` as A2A 1.0 (or with no version when `versioned` is false);
/// answers the status, the content type and the body.
async fn call(
    state: &A2aFace,
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
    assert_eq!(
        kind, "application/a2a+json",
        "answered in the media type it was asked in"
    );
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
async fn without_authentication_the_extended_card_is_an_unsupported_operation() {
    let (status, kind, refused) = call(
        &passthrough(),
        "GET",
        "/a2a/rest/extendedAgentCard",
        None,
        true,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(kind, "application/a2a+json");
    assert_eq!(status_error(&refused).2, "UNSUPPORTED_OPERATION");
}

/// `path` called with `content_type` and `accept`: the status and the answer's media type.
async fn media_type_of(
    state: &A2aFace,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("A2A-Version", "1.0");
    if let Some(ct) = content_type {
        request = request.header(header::CONTENT_TYPE, ct);
    }
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    let body = if method == "POST" {
        Body::from(send("hi").to_string())
    } else {
        Body::empty()
    };
    let response = router(state.clone())
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let kind = response.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    (response.status(), kind)
}

#[tokio::test]
async fn answers_in_the_media_type_the_client_used() {
    let state = passthrough();
    let send = "/a2a/rest/message:send";
    let json = "application/json";
    let a2a = "application/a2a+json";
    // v1.0.0 clients send and expect application/json; v1.0.1 ones application/a2a+json.
    assert_eq!(
        media_type_of(&state, "POST", send, Some(json), None).await,
        (StatusCode::OK, json.to_owned())
    );
    assert_eq!(
        media_type_of(&state, "POST", send, Some(a2a), None).await,
        (StatusCode::OK, a2a.to_owned())
    );
    assert_eq!(
        media_type_of(
            &state,
            "POST",
            send,
            Some(json),
            Some("application/a2a+json, */*")
        )
        .await,
        (StatusCode::OK, a2a.to_owned())
    );
    // Errors too: an unknown task, asked plainly, is a 404 in application/json.
    let missing = "/a2a/rest/tasks/nobody";
    assert_eq!(
        media_type_of(&state, "GET", missing, None, None).await,
        (StatusCode::NOT_FOUND, json.to_owned())
    );
    assert_eq!(
        media_type_of(&state, "GET", missing, None, Some(a2a)).await,
        (StatusCode::NOT_FOUND, a2a.to_owned())
    );
}

#[tokio::test]
async fn push_config_routes_answer_push_not_supported_while_push_is_off() {
    let state = crate::faces::a2a::tests::state_with(
        std::sync::Arc::new(crate::agents::agent_loop::Passthrough),
        |c| {
            c.push.enabled = false;
        },
    );
    for (method, path) in [
        ("POST", "/a2a/rest/tasks/t-1/pushNotificationConfigs"),
        ("GET", "/a2a/rest/tasks/t-1/pushNotificationConfigs"),
        ("GET", "/a2a/rest/tasks/t-1/pushNotificationConfigs/c-1"),
        ("DELETE", "/a2a/rest/tasks/t-1/pushNotificationConfigs/c-1"),
        ("GET", "/a2a/rest/acme/tasks/t-1/pushNotificationConfigs"),
    ] {
        let body = (method == "POST").then(|| json!({"url": "http://127.0.0.1:9/hook"}));
        let (status, _, error) = call(&state, method, path, body, true).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {error}");
        assert_eq!(
            status_error(&error).2,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "{method} {path}: {error}"
        );
    }
}
