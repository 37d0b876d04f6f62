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

/// The `data:` lines of an SSE answer, as JSON.
fn sse_items(sse: &Value) -> Vec<Value> {
    let Value::String(sse) = sse else {
        panic!("not a stream: {sse}");
    };
    sse.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_streamed_message_reply_is_that_message_alone_on_a2a_and_a_task_stream_on_the_contract() {
    let state = tck();
    // JSON-RPC v1.0: one `result.message`, then the stream closes (A2A §3.1.2).
    let items = sse_items(
        &post(
            &state,
            "/",
            &jsonrpc("SendStreamingMessage", "tck-message-response-s1"),
            true,
        )
        .await,
    );
    assert_eq!(items.len(), 1, "{items:?}");
    valid(Schema::A2aV1StreamResponse, &items[0]["result"]);
    assert_eq!(
        items[0]["result"]["message"]["parts"][0]["text"],
        "Direct message response"
    );
    // The same by the ACTS behaviour's text.
    let acts = json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-acts", "role": "ROLE_USER",
            "parts": [{"text": "tck-message-response streaming"}]}}});
    let items = sse_items(&post(&state, "/", &acts, true).await);
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0]["result"]["message"].is_object(), "{items:?}");
    // HTTP+JSON: one `{"message": ...}`.
    let items = sse_items(
        &post(
            &state,
            "/a2a/rest/message:stream",
            &json!({"message": message("tck-message-response-s2")}),
            true,
        )
        .await,
    );
    assert_eq!(items.len(), 1, "{items:?}");
    valid(Schema::A2aV1StreamResponse, &items[0]);
    assert!(items[0]["message"].is_object(), "{items:?}");
    // JSON-RPC v0.3: the message itself, `kind: "message"`.
    let v03 = json!({"jsonrpc": "2.0", "id": 7, "method": "message/stream", "params": {"message": {
        "kind": "message", "messageId": "tck-message-response-s3", "role": "user",
        "parts": [{"kind": "text", "text": "TCK test"}]}}});
    let items = sse_items(&post(&state, "/", &v03, false).await);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["result"]["kind"], "message", "{items:?}");
    // The contract's stream is the task's: `task` first, the final status update last.
    let contract = Request::post("/")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::from(
            json!({"message": {"messageId": "tck-message-response-s4", "role": "user",
                "parts": [{"text": "TCK test"}]}})
            .to_string(),
        ))
        .unwrap();
    let response = router(state.clone()).oneshot(contract).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let items = sse_items(&Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    assert!(items[0].get("task").is_some(), "{items:?}");
    let last = items.last().unwrap();
    assert_eq!(last["statusUpdate"]["final"], true, "{items:?}");
    assert_eq!(last["statusUpdate"]["status"]["state"], "completed");
}

/// An agent that says it may reply with a message, then ends in a Task with a chunk streamed
/// on the way.
#[derive(Debug)]
struct MayReplyButWorks;

#[async_trait::async_trait]
impl crate::agents::agent_loop::Agent for MayReplyButWorks {
    fn may_reply(&self, _: &daedalus_contract::Message) -> bool {
        true
    }

    async fn run(
        &self,
        request: crate::agents::agent_loop::AgentRequest,
        _: tokio_util::sync::CancellationToken,
    ) -> crate::agents::agent_loop::AgentOutcome {
        let whole =
            daedalus_contract::Artifact::fresh(vec![daedalus_contract::Part::text("worked")])
                .named("response");
        request
            .events
            .emit(crate::agents::agent_loop::LoopEvent::ArtifactChunk {
                agent: "held".to_owned(),
                depth: request.depth,
                artifact: whole.clone(),
                append: false,
                last_chunk: true,
            });
        crate::agents::agent_loop::AgentOutcome::Completed {
            artifacts: vec![whole],
        }
    }
}

#[tokio::test]
async fn a_turn_that_may_reply_but_ends_in_a_task_streams_every_event_once_it_ended() {
    let state = state_with(Arc::new(MayReplyButWorks), |_| {});
    let items = sse_items(
        &post(
            &state,
            "/",
            &jsonrpc("SendStreamingMessage", "m-held"),
            true,
        )
        .await,
    );
    let results: Vec<&Value> = items.iter().map(|i| &i["result"]).collect();
    assert!(
        results[0].get("task").is_some(),
        "the Task first: {results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"] == "worked"),
        "the chunk kept while the turn ran: {results:?}"
    );
    let last = results.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{results:?}"
    );
    for result in results {
        valid(Schema::A2aV1StreamResponse, result);
    }
}
