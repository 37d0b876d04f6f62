//! The task store with the real binary: `TASKS_DB` as a SQLite file keeps tasks across a
//! restart, and a task the crash cut is reported failed, never left working; on one replica in
//! memory, a cancel racing a turn's end gets one answer, the one the task keeps.

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

/// The `data` of each SSE event of `response`, as JSON, until the stream ends.
async fn sse_results(response: reqwest::Response) -> Vec<Value> {
    use futures::StreamExt;
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.expect("the stream reads")));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| {
            let response: Value = serde_json::from_str(d.trim()).expect("JSON data");
            response["result"].clone()
        })
        .collect()
}

/// Subscribes to `task_id` through `url`; the stream's results, once it ends.
async fn subscribe(client: &reqwest::Client, url: &str, task_id: &Value) -> Vec<Value> {
    let response = client
        .post(url)
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask",
            "params": {"id": task_id}}),
        )
        .send()
        .await
        .expect("subscribed");
    tokio::time::timeout(Duration::from_mins(1), sse_results(response))
        .await
        .expect("the stream ends")
}

fn last_state(results: &[Value]) -> String {
    let last = results.last().expect("at least one event");
    last["statusUpdate"]["status"]["state"]
        .as_str()
        .or(last["task"]["status"]["state"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_nats_kv_store_share_tasks_their_events_and_cancels() {
    let nats = daedalus_test_kit::NatsServer::start();
    let tasks_db = format!("{}/shared-tasks", nats.url());
    let start = |replica: &str| {
        runtime()
            .env("TASKS_DB", &tasks_db)
            .env("REPLICA_ID", replica)
            .start()
    };
    let client = reqwest::Client::new();
    let mut a = start("replica-a");
    let b = start("replica-b");
    let (a_url, b_url) = (a.url("/"), b.url("/"));

    // A task started on A is read, and followed to its end, through B.
    let started = rpc(
        &client,
        &a_url,
        "SendMessage",
        send("r-1", "***SLEEP 1500ms across replicas", true),
    )
    .await;
    let id = started["result"]["task"]["id"].clone();
    let read = rpc(&client, &b_url, "GetTask", json!({"id": id})).await;
    assert_eq!(state_of(&read["result"]), "TASK_STATE_WORKING", "{read}");
    let heard = subscribe(&client, &b_url, &id).await;
    assert_eq!(heard[0]["task"]["id"], id, "the Task first: {heard:?}");
    assert_eq!(last_state(&heard), "TASK_STATE_COMPLETED", "{heard:?}");
    let text: String = heard
        .iter()
        .filter_map(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "across replicas", "no chunk lost: {heard:?}");
    let done = rpc(&client, &b_url, "GetTask", json!({"id": id})).await;
    assert_eq!(state_of(&done["result"]), "TASK_STATE_COMPLETED", "{done}");

    // A cancel sent to B reaches the turn running on A.
    let slow = rpc(
        &client,
        &a_url,
        "SendMessage",
        send("r-2", "***SLEEP 600s never", true),
    )
    .await;
    let slow_id = slow["result"]["task"]["id"].clone();
    let canceled = rpc(&client, &b_url, "CancelTask", json!({"id": slow_id})).await;
    assert_eq!(
        state_of(&canceled["result"]),
        "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let on_a = rpc(&client, &a_url, "GetTask", json!({"id": slow_id})).await;
    assert_eq!(state_of(&on_a["result"]), "TASK_STATE_CANCELED", "{on_a}");

    // A crashes mid-task: B's subscriber learns the task failed, and so does A once restarted.
    let cut = rpc(
        &client,
        &a_url,
        "SendMessage",
        send("r-3", "***SLEEP 600s never", true),
    )
    .await;
    let cut_id = cut["result"]["task"]["id"].clone();
    let listening = {
        let (client, b_url, cut_id) = (client.clone(), b_url.clone(), cut_id.clone());
        tokio::spawn(async move { subscribe(&client, &b_url, &cut_id).await })
    };
    // The subscriber has the Task before the crash: wait until B has asked A for it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.child.kill().expect("killed");
    a.wait_exit(Duration::from_secs(10));
    let heard = listening.await.expect("joined");
    assert_eq!(last_state(&heard), "TASK_STATE_FAILED", "{heard:?}");
    let a = start("replica-a");
    let after = rpc(&client, &a.url("/"), "GetTask", json!({"id": cut_id})).await;
    assert_eq!(state_of(&after["result"]), "TASK_STATE_FAILED", "{after}");
    let from_b = rpc(&client, &b_url, "GetTask", json!({"id": cut_id})).await;
    assert_eq!(state_of(&from_b["result"]), "TASK_STATE_FAILED", "{from_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_replica_a_cancel_racing_the_end_is_canceled_only_when_it_won() {
    use daedalus_test_kit::a2a_client::state_of as state;
    use daedalus_test_kit::{A2aClient, Canceled};
    use futures::StreamExt;

    let replica = runtime().start();
    let client = A2aClient::new(replica.url("/"));
    let raced: Vec<(String, Canceled)> = futures::stream::iter(0..200_u64)
        .map(|i| {
            let client = client.clone();
            async move {
                let started = tokio::time::Instant::now();
                let id = client.start_task(&format!("***SLEEP 40ms raced {i}")).await;
                // From 20 ms before the turn's end to 20 ms after it.
                tokio::time::sleep_until(started + Duration::from_millis(20 + i * 40 / 200)).await;
                (id.clone(), client.cancel(&id).await)
            }
        })
        .buffer_unordered(10)
        .collect()
        .await;
    let (mut canceled, mut completed) = (0, 0);
    for (id, answer) in raced {
        let kept = client.state_of(&id).await;
        match answer {
            Canceled::Task(task) => {
                canceled += 1;
                assert_eq!(state(&task), "TASK_STATE_CANCELED", "{task}");
                assert_eq!(kept, "TASK_STATE_CANCELED");
            }
            Canceled::Refused { reason, message } => {
                completed += 1;
                assert_eq!(reason, "TASK_NOT_CANCELABLE", "{message}");
                assert_eq!(kept, "TASK_STATE_COMPLETED");
            }
        }
    }
    println!("200 cancels raced on one replica: {canceled} canceled, {completed} completed first");
    assert!(canceled > 0 && completed > 0, "the drill raced both ways");
}
