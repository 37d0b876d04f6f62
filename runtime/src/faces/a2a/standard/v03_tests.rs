//! A2A v0.3 clients on `POST /`, without a socket: every answer validates against the v0.3
//! JSON Schema (`kind` on every object and part, lowercase states, `final`).

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::faces::a2a::tests::passthrough;
use crate::faces::a2a::{A2aFace, router};
use daedalus_contract::Schema;

/// Calls v0.3 `method` with no `A2A-Version` header; answers the body as text.
async fn call(state: &A2aFace, method: &str, params: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
    let response = router(state.clone())
        .oneshot(
            Request::post("/")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A v0.3 call whose answer is one JSON-RPC response with a Task: the Task.
async fn task_call(state: &A2aFace, method: &str, params: Value) -> Value {
    let answer: Value = serde_json::from_str(&call(state, method, params).await).unwrap();
    if let Err(e) = Schema::A2aV03SendMessageSuccessResponse.validate(&answer) {
        panic!("not a v0.3 success response: {e}\n{answer}");
    }
    assert_eq!(answer["result"]["kind"], "task", "{answer}");
    answer["result"].clone()
}

/// A v0.3 call answered by SSE: each event, validated.
async fn stream_call(state: &A2aFace, method: &str, params: Value) -> Vec<Value> {
    call(state, method, params)
        .await
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|data| {
            let response: Value = serde_json::from_str(data.trim()).unwrap();
            if let Err(e) = Schema::A2aV03StreamingResponse.validate(&response) {
                panic!("not a v0.3 stream response: {e}\n{response}");
            }
            assert_eq!(response["id"], 3);
            response["result"].clone()
        })
        .collect()
}

fn send(message_id: &str, text: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": message_id, "role": "user",
        "parts": [{"kind": "text", "text": text}]}})
}

#[tokio::test]
async fn message_send_answers_the_task_in_v03_json() {
    let state = passthrough();
    let task = task_call(&state, "message/send", send("v3-1", "hello")).await;
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "hello"})
    );
    assert_eq!(task["history"][0]["kind"], "message");
    assert_eq!(task["history"][0]["role"], "user");
    let got = task_call(&state, "tasks/get", json!({"id": task["id"]})).await;
    assert_eq!(got["id"], task["id"]);
    let missing: Value =
        serde_json::from_str(&call(&state, "tasks/get", json!({"id": "nobody"})).await).unwrap();
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
}

#[tokio::test]
async fn blocking_false_returns_at_once_and_input_required_continues_or_cancels() {
    let state = passthrough();
    let mut slow = send("v3-2", "***SLEEP 60s late");
    slow["configuration"] = json!({"blocking": false});
    let working = task_call(&state, "message/send", slow).await;
    assert_eq!(working["status"]["state"], "working");
    let canceled = task_call(&state, "tasks/cancel", json!({"id": working["id"]})).await;
    assert_eq!(canceled["status"]["state"], "canceled");

    let asked = task_call(&state, "message/send", send("v3-3", "***INPUT which?")).await;
    assert_eq!(asked["status"]["state"], "input-required");
    assert_eq!(asked["status"]["message"]["kind"], "message");
    let mut answer = send("v3-4", "that one");
    answer["message"]["taskId"] = asked["id"].clone();
    let done = task_call(&state, "message/send", answer).await;
    assert_eq!(done["id"], asked["id"]);
    assert_eq!(done["status"]["state"], "completed");
}

#[tokio::test]
async fn message_stream_is_bare_v03_events_that_end_with_final() {
    let events = stream_call(&passthrough(), "message/stream", send("v3-5", "stream me")).await;
    assert_eq!(events[0]["kind"], "task", "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e["kind"] != "status-update" || e["final"] == false),
        "only the last is final: {events:?}"
    );
    let text: String = events
        .iter()
        .filter(|e| e["kind"] == "artifact-update")
        .filter_map(|e| e["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "stream me");
}

#[tokio::test(start_paused = true)]
async fn tasks_resubscribe_follows_a_running_task_to_its_end() {
    let state = passthrough();
    let mut slow = send("v3-6", "***SLEEP 200ms at last");
    slow["configuration"] = json!({"blocking": false});
    let working = task_call(&state, "message/send", slow).await;
    let events = stream_call(&state, "tasks/resubscribe", json!({"id": working["id"]})).await;
    assert_eq!(events[0]["kind"], "task");
    assert_eq!(events[0]["status"]["state"], "working");
    let last = events.last().unwrap();
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
}
