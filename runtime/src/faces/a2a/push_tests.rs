//! Push notifications on the A2A bindings, without a socket for the runtime (the webhook is a
//! real server on loopback): the four config operations on JSON-RPC and HTTP+JSON, a config
//! set up inline in `SendMessage` hearing every state of its task, and the card saying so.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Request, header};
use axum::routing::post;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::tests::state_with;
use super::{A2aFace, router};
use crate::agents::agent_loop::Tck;
use crate::config::push::AllowList;

type Got = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

/// A webhook server on 127.0.0.1 that takes everything: what it got, and its URL.
async fn webhook() -> (Got, String) {
    async fn take(State(got): State<Got>, headers: HeaderMap, body: String) {
        got.lock()
            .unwrap()
            .push((headers, serde_json::from_str(&body).unwrap_or(Value::Null)));
    }
    let got = Got::default();
    let app = axum::Router::new()
        .route("/hook", post(take))
        .with_state(Arc::clone(&got));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (got, url)
}

fn tck_with_push() -> A2aFace {
    state_with(Arc::new(Tck), |c| {
        c.push.allow = AllowList::parse(&["127.0.0.1".to_owned()]).unwrap();
    })
}

async fn call(state: &A2aFace, method: &str, path: &str, body: Option<Value>) -> Value {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .header("A2A-Version", "1.0")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(status.is_success(), "{method} {path}: {status} {value}");
    value
}

async fn rpc(state: &A2aFace, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let answer = call(state, "POST", "/", Some(body)).await;
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    answer["result"].clone()
}

fn message(id: &str, task_id: Option<&str>) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": "x"}]});
    if let Some(task_id) = task_id {
        m["taskId"] = json!(task_id);
    }
    m
}

#[tokio::test]
async fn the_card_says_push_notifications_are_served() {
    let card = call(
        &tck_with_push(),
        "GET",
        "/.well-known/agent-card.json",
        None,
    )
    .await;
    assert_eq!(card["capabilities"]["pushNotifications"], true);
}

#[tokio::test]
async fn a_webhook_set_up_with_the_message_hears_every_state_of_its_task_with_its_credentials() {
    let state = tck_with_push();
    let (got, url) = webhook().await;
    let config = json!({"url": url, "token": "tok",
        "authentication": {"scheme": "Bearer", "credentials": "s3cret"}});
    let first = rpc(
        &state,
        "SendMessage",
        json!({"message": message("tck-input-required-1", None),
            "configuration": {"taskPushNotificationConfig": config}}),
    )
    .await;
    let task_id = first["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        first["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    rpc(
        &state,
        "SendMessage",
        json!({"message": message("tck-complete-task-1", Some(&task_id))}),
    )
    .await;
    for _ in 0..200 {
        if got.lock().unwrap().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let got = got.lock().unwrap().clone();
    let states: Vec<&str> = got
        .iter()
        .map(|(_, b)| b["task"]["status"]["state"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        states,
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    assert!(
        got.iter()
            .all(|(h, b)| h["authorization"] == "Bearer s3cret"
                && h["x-a2a-notification-token"] == "tok"
                && b["task"]["id"] == task_id.as_str())
    );
    // The inline config is the task's, like any other.
    let listed = rpc(
        &state,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task_id}),
    )
    .await;
    assert_eq!(listed["configs"][0]["url"], url.as_str());
}

#[tokio::test]
async fn configs_are_created_got_listed_and_deleted_on_both_bindings() {
    let state = tck_with_push();
    let done = rpc(
        &state,
        "SendMessage",
        json!({"message": message("tck-complete-task-2", None)}),
    )
    .await;
    let task_id = done["task"]["id"].as_str().unwrap().to_owned();
    // JSON-RPC, with the kit's snake_case task_id.
    let created = rpc(
        &state,
        "CreateTaskPushNotificationConfig",
        json!({"task_id": task_id, "id": "rpc-1", "url": "https://hooks.example.com/a"}),
    )
    .await;
    assert_eq!(
        created,
        json!({"id": "rpc-1", "taskId": task_id, "url": "https://hooks.example.com/a"})
    );
    let got = rpc(
        &state,
        "GetTaskPushNotificationConfig",
        json!({"taskId": task_id, "id": "rpc-1"}),
    )
    .await;
    assert_eq!(got, created);
    // HTTP+JSON: the task id is the path's.
    let base = format!("/a2a/rest/tasks/{task_id}/pushNotificationConfigs");
    let rest = call(
        &state,
        "POST",
        &base,
        Some(json!({"id": "rest-1", "url": "https://hooks.example.com/b"})),
    )
    .await;
    assert_eq!(rest["taskId"], task_id.as_str());
    let listed = call(&state, "GET", &base, None).await;
    let ids: Vec<&str> = listed["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["rpc-1", "rest-1"]);
    assert_eq!(
        call(&state, "DELETE", &format!("{base}/rest-1"), None).await,
        json!({})
    );
    assert_eq!(
        call(&state, "DELETE", &format!("{base}/rest-1"), None).await,
        json!({})
    );
    let deleted = rpc(
        &state,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": task_id, "id": "rpc-1"}),
    )
    .await;
    assert_eq!(deleted, json!({}));
    // Gone: a config that does not exist is TaskNotFoundError (-32001).
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTaskPushNotificationConfig",
        "params": {"taskId": task_id, "id": "rpc-1"}});
    let answer = call(&state, "POST", "/", Some(body)).await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    // A private webhook is refused as invalid params, naming why.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": task_id, "url": "http://169.254.169.254/latest"}});
    let answer = call(&state, "POST", "/", Some(body)).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("link-local"),
        "{answer}"
    );
}
