//! The task store beyond memory, with the real binary: `TASKS_DB` as a SQLite file keeps tasks
//! across a restart, and a task the crash cut is reported failed, never left working.

use std::time::Duration;

use serde_json::{Value, json};
use support::process::runtime;

mod support;

/// Calls JSON-RPC `method` on `url` as A2A 1.0; answers the response.
async fn rpc(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    client
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("request sent")
        .json()
        .await
        .expect("a JSON-RPC response")
}

fn send(message_id: &str, text: &str, return_immediately: bool) -> Value {
    json!({
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": return_immediately},
    })
}

fn state_of(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_sqlite_task_store_keeps_tasks_across_a_crash_and_fails_the_one_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.sqlite");
    let start = || {
        runtime()
            .env("TASKS_DB", db.to_str().unwrap())
            .env("REPLICA_ID", "replica-a")
            .start()
    };
    let client = reqwest::Client::new();
    let mut first = start();
    let done = rpc(
        &client,
        &first.url("/"),
        "SendMessage",
        send("k-1", "kept", false),
    )
    .await;
    let done_id = done["result"]["task"]["id"].clone();
    assert_eq!(state_of(&done["result"]["task"]), "TASK_STATE_COMPLETED");
    let running = rpc(
        &client,
        &first.url("/"),
        "SendMessage",
        send("k-2", "***SLEEP 600s never", true),
    )
    .await;
    let running_id = running["result"]["task"]["id"].clone();
    assert_eq!(state_of(&running["result"]["task"]), "TASK_STATE_WORKING");
    first.child.kill().expect("killed");
    first.wait_exit(Duration::from_secs(10));

    let second = start();
    let kept = rpc(&client, &second.url("/"), "GetTask", json!({"id": done_id})).await;
    assert_eq!(state_of(&kept["result"]), "TASK_STATE_COMPLETED", "{kept}");
    assert_eq!(kept["result"]["artifacts"][0]["parts"][0]["text"], "kept");
    let cut = rpc(
        &client,
        &second.url("/"),
        "GetTask",
        json!({"id": running_id}),
    )
    .await;
    assert_eq!(state_of(&cut["result"]), "TASK_STATE_FAILED", "{cut}");
    let why = cut["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("restarted"), "{why}");
    let subscribe = rpc(
        &client,
        &second.url("/"),
        "SubscribeToTask",
        json!({"id": running_id}),
    )
    .await;
    assert_eq!(
        subscribe["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION",
        "a subscriber learns it is over: {subscribe}"
    );
    let listed = rpc(&client, &second.url("/"), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 2, "{listed}");
}
