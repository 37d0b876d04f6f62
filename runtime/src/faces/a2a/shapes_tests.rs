//! Every shape an agent can answer with, on every binding, without a socket (the `tck` model
//! plays them): a Message reply, a rejected task, file (bytes and URL) and data artifacts, an
//! artifact streamed in chunks. Each answer validates against its binding's schema.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, header};
use daedalus_contract::{Schema, TaskRebuilder};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::tests::state_with;
use super::{A2aFace, router};
use crate::agents::agent_loop::Tck;

fn tck() -> A2aFace {
    state_with(Arc::new(Tck), |_| {})
}

/// POSTs `body` to `path` (with `A2A-Version: 1.0` when `versioned`) and reads the JSON answer
/// (or the SSE text).
async fn post(state: &A2aFace, path: &str, body: &Value, versioned: bool) -> Value {
    let mut request = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if versioned {
        request = request.header("A2A-Version", "1.0");
    }
    let response = router(state.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

fn message(message_id: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "TCK test"}]})
}

fn jsonrpc(method: &str, message_id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"message": message(message_id)}})
}

fn valid(schema: Schema, value: &Value) {
    if let Err(e) = schema.validate(value) {
        panic!("not a valid {schema:?}: {e}\n{value}");
    }
}

#[tokio::test]
async fn a_message_reply_is_a_message_on_a2a_and_a_completed_task_on_the_contract() {
    let state = tck();
    let expected = json!([{"text": "Direct message response"}]);
    // JSON-RPC v1.0: `result.message`.
    let answer = post(
        &state,
        "/",
        &jsonrpc("SendMessage", "tck-message-response-1"),
        true,
    )
    .await;
    valid(Schema::A2aV1SendMessageResponse, &answer["result"]);
    let reply = &answer["result"]["message"];
    valid(Schema::A2aV1Message, reply);
    assert_eq!(reply["role"], "ROLE_AGENT");
    assert_eq!(reply["parts"], expected);
    assert!(answer["result"].get("task").is_none(), "{answer}");
    // HTTP+JSON: `{"message": ...}`.
    let answer = post(
        &state,
        "/a2a/rest/message:send",
        &json!({"message": message("tck-message-response-2")}),
        true,
    )
    .await;
    valid(Schema::A2aV1SendMessageResponse, &answer);
    assert_eq!(answer["message"]["parts"], expected);
    // JSON-RPC v0.3: the message itself, `kind: "message"`.
    let v03 = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "tck-message-response-3", "role": "user",
        "parts": [{"kind": "text", "text": "TCK test"}]}}});
    let answer = post(&state, "/", &v03, false).await;
    valid(Schema::A2aV03SendMessageSuccessResponse, &answer);
    assert_eq!(answer["result"]["kind"], "message", "{answer}");
    assert_eq!(
        answer["result"]["parts"][0]["text"],
        "Direct message response"
    );
    // The contract binding answers a Task: completed, with the reply as its output.
    let task = post(
        &state,
        "/",
        &json!({"message": {"messageId": "tck-message-response-4", "role": "user",
            "parts": [{"text": "TCK test"}]}}),
        false,
    )
    .await;
    valid(Schema::Task, &task);
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"], expected);
    assert_eq!(task["status"]["message"]["parts"], expected);
}

#[tokio::test]
async fn a_rejected_task_is_rejected_with_its_reason_on_every_binding() {
    let state = tck();
    let answer = post(
        &state,
        "/",
        &jsonrpc("SendMessage", "tck-reject-task-1"),
        true,
    )
    .await;
    let task = &answer["result"]["task"];
    valid(Schema::A2aV1Task, task);
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "rejected");
    let contract = post(
        &state,
        "/",
        &json!({"message": {"messageId": "tck-reject-task-2", "role": "user",
            "parts": [{"text": "x"}]}}),
        false,
    )
    .await;
    valid(Schema::Task, &contract);
    assert_eq!(contract["status"]["state"], "rejected");
    assert_eq!(
        contract["status"]["message"]["parts"][0]["text"],
        "rejected"
    );
}

#[tokio::test]
async fn file_and_data_artifacts_keep_their_media_type_and_file_name() {
    let state = tck();
    let part = |answer: &Value| answer["result"]["task"]["artifacts"][0]["parts"][0].clone();
    let raw = post(
        &state,
        "/",
        &jsonrpc("SendMessage", "tck-artifact-file-1"),
        true,
    )
    .await;
    valid(Schema::A2aV1Task, &raw["result"]["task"]);
    assert_eq!(
        part(&raw),
        json!({"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"})
    );
    let url = post(
        &state,
        "/",
        &jsonrpc("SendMessage", "tck-artifact-file-url-1"),
        true,
    )
    .await;
    assert_eq!(
        part(&url),
        json!({"url": "https://example.com/output.txt", "mediaType": "text/plain",
            "filename": "output.txt"})
    );
    let data = post(
        &state,
        "/",
        &jsonrpc("SendMessage", "tck-artifact-data-1"),
        true,
    )
    .await;
    assert_eq!(part(&data), json!({"data": {"key": "value", "count": 42}}));
    // v0.3 spells a file part `{"kind": "file", "file": {...}}`.
    let v03 = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "tck-artifact-file-2", "role": "user",
        "parts": [{"kind": "text", "text": "x"}]}}});
    let answer = post(&state, "/", &v03, false).await;
    valid(Schema::A2aV03SendMessageSuccessResponse, &answer);
    assert_eq!(
        answer["result"]["artifacts"][0]["parts"][0],
        json!({"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain",
            "name": "output.txt"}})
    );
}

#[tokio::test]
async fn a_chunked_artifact_streams_as_chunks_and_rebuilds_to_the_task() {
    let state = tck();
    let sse = post(
        &state,
        "/",
        &jsonrpc("SendStreamingMessage", "tck-stream-artifact-chunked-1"),
        true,
    )
    .await;
    let Value::String(sse) = sse else {
        panic!("not a stream: {sse}");
    };
    let events: Vec<Value> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).unwrap()["result"].clone())
        .collect();
    let mut rebuilt = TaskRebuilder::new();
    let mut chunks = Vec::new();
    for event in &events {
        valid(Schema::A2aV1StreamResponse, event);
        let read: daedalus_contract::StreamEvent =
            daedalus_contract::read::from_value(event.clone()).unwrap();
        rebuilt.apply(&read).unwrap();
        if let Some(update) = event.get("artifactUpdate") {
            chunks.push((
                update["artifact"]["parts"][0]["text"].clone(),
                update["append"].as_bool().unwrap_or(false),
                update["lastChunk"].as_bool().unwrap_or(false),
            ));
        }
    }
    assert_eq!(
        chunks,
        [
            (json!("chunk-1 "), false, false),
            (json!("chunk-2"), true, true)
        ]
    );
    let task = rebuilt.into_task().unwrap();
    assert_eq!(task.status.state, daedalus_contract::TaskState::Completed);
    assert_eq!(
        task.artifacts[0].parts,
        [daedalus_contract::Part::text("chunk-1 chunk-2")]
    );
}
