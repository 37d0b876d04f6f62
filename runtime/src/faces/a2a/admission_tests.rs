//! Turn limits as every binding answers them: with the turn memory full, a new turn is
//! refused at once with `Retry-After`, naming the limit, in each binding's shape (503 on the
//! contract binding and HTTP+JSON; on JSON-RPC an HTTP 200 with the JSON-RPC error, as every
//! JSON-RPC error); room comes back when the turn holding it ends.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::tests::state_with;
use super::{A2aFace, router};
use crate::agents::agent_loop::Passthrough;
use crate::services::turns::admission::HELD_TURN_BYTES;

/// Answers `request`'s status, `Retry-After` and JSON body.
async fn answer(state: &A2aFace, request: Request<Body>) -> (StatusCode, Option<String>, Value) {
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let retry = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        retry,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

fn jsonrpc(id: &str, text: &str) -> Request<Body> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": message(id, text)}});
    Request::post("/")
        .header("A2A-Version", "1.0")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn rest(id: &str, text: &str) -> Request<Body> {
    Request::post("/a2a/rest/message:send")
        .header("A2A-Version", "1.0")
        .header(header::CONTENT_TYPE, "application/a2a+json")
        .body(Body::from(
            json!({"message": message(id, text)}).to_string(),
        ))
        .unwrap()
}

fn contract(id: &str, text: &str) -> Request<Body> {
    let body = json!({"message": {"messageId": id, "role": "user", "parts": [{"text": text}]}});
    Request::post("/")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Answers `request`'s body, checking it was refused with 503 and `Retry-After: 1`.
async fn refused_at_once(state: &A2aFace, request: Request<Body>) -> Value {
    let (status, retry, body) = answer(state, request).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("1")),
        "{body}"
    );
    body
}

/// Answers JSON-RPC `request`'s body, checking it was refused at once: HTTP 200, as every
/// JSON-RPC error (the official clients read no other), with `Retry-After: 1`.
async fn refused_at_once_over_jsonrpc(state: &A2aFace, request: Request<Body>) -> Value {
    let (status, retry, body) = answer(state, request).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::OK, Some("1")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("retry in 1 s")),
        "the message says when to retry: {body}"
    );
    assert_eq!(body["error"]["data"][0]["domain"], "runtime.daedalus.dev");
    body
}

/// Checks that the refusal's message names the limit it hit.
fn names_turn_memory(body: &Value) {
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("TURN_MEMORY"), "{body}");
}

/// Checks that `n` refusals by `TURN_MEMORY` were counted.
fn counted_turn_memory_refusals(state: &A2aFace, n: usize) {
    let metrics = state.core().metrics().render();
    let line = format!("daedalus_runtime_turns_refused_total{{limit=\"TURN_MEMORY\"}} {n}");
    assert!(metrics.contains(&line), "{metrics}");
}

/// Waits until no turn of the smallest size fits any more.
async fn until_full(state: &A2aFace) {
    for _ in 0..2_000 {
        if state.core().turns().free_permits() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the slow turn never took the room");
}

#[tokio::test]
async fn with_the_turn_memory_full_every_binding_answers_503_at_once_and_room_comes_back() {
    // Room for one held turn with a short message, not two.
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.turn_memory_bytes = u64::try_from(HELD_TURN_BYTES + 2048).unwrap();
    });
    let slow = {
        let state = state.clone();
        // The contract binding names the task after the message: `m-slow`.
        tokio::spawn(async move { answer(&state, contract("m-slow", "***SLEEP 30s late")).await })
    };
    until_full(&state).await;

    let body = refused_at_once_over_jsonrpc(&state, jsonrpc("m-2", "x")).await;
    assert_eq!(body["error"]["code"], -31503, "{body}");
    assert_eq!(body["error"]["data"][0]["reason"], "UNAVAILABLE");
    names_turn_memory(&body);

    let body = refused_at_once(&state, rest("m-3", "x")).await;
    assert_eq!(body["error"]["status"], "UNAVAILABLE", "{body}");

    let body = refused_at_once(&state, contract("m-4", "x")).await;
    names_turn_memory(&body);

    counted_turn_memory_refusals(&state, 3);

    // The slow turn ends (canceled): its room comes back, and the same request is served.
    let cancel =
        json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": "m-slow"}});
    let (status, _, body) = answer(
        &state,
        Request::post("/")
            .header("A2A-Version", "1.0")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(cancel.to_string()))
            .unwrap(),
    )
    .await;
    assert_eq!(
        body["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{status} {body}"
    );
    let (status, _, body) = slow.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    for i in 0..3 {
        let (status, _, body) = answer(&state, jsonrpc(&format!("m-after-{i}"), "x")).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "one turn at a time fits, each after the last: {body}"
        );
    }
}

#[tokio::test]
async fn a_message_larger_than_a_whole_budget_is_refused_as_too_large_not_asked_to_retry() {
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.turn_memory_bytes = u64::try_from(3 * HELD_TURN_BYTES).unwrap();
    });
    let big = "x".repeat(4 * HELD_TURN_BYTES);
    let (status, retry, body) = answer(&state, jsonrpc("m-big", &big)).await;
    assert_eq!((status, retry), (StatusCode::OK, None), "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than TURN_MEMORY"),
        "{body}"
    );
    let (status, _, body) = answer(&state, jsonrpc("m-small", "small")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn subscribe(task_id: &str) -> Request<Body> {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask",
        "params": {"id": task_id}});
    Request::post("/")
        .header("A2A-Version", "1.0")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn a_subscription_holds_room_in_the_turn_memory_and_one_past_it_is_refused_at_once() {
    use crate::services::turns::admission::HELD_STREAM_BYTES;
    // Room for one held turn and one subscription to it, not two.
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.turn_memory_bytes =
            u64::try_from(HELD_TURN_BYTES + 2048 + HELD_STREAM_BYTES).unwrap();
    });
    let slow = {
        let state = state.clone();
        tokio::spawn(async move { answer(&state, contract("m-slow", "***SLEEP 30s late")).await })
    };
    let mut first = None;
    for _ in 0..2_000 {
        let response = router(state.clone())
            .oneshot(subscribe("m-slow"))
            .await
            .unwrap();
        if response.status() == StatusCode::OK
            && response.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        {
            first = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first = first.expect("the slow turn's task can be subscribed to");

    let body = refused_at_once_over_jsonrpc(&state, subscribe("m-slow")).await;
    assert_eq!(body["error"]["code"], -31503, "{body}");
    names_turn_memory(&body);
    counted_turn_memory_refusals(&state, 1);

    // The first subscriber goes away: its room comes back.
    drop(first);
    let response = router(state.clone())
        .oneshot(subscribe("m-slow"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    slow.abort();
}
