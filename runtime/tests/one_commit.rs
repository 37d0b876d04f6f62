//! What a turn writes on the default store (one SQLite file, one writer), counted on a real
//! process through `daedalus_runtime_store_commits_total`:
//! - a blocking turn (JSON-RPC `SendMessage`, the contract's `POST /`) is one commit: its begin,
//!   its conversation and its end together;
//! - a streamed turn commits its begin before its first event reaches the caller;
//! - `kill -9` under load: every turn answered before the kill is found after the restart,
//!   with its answer and its conversation.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use daedalus_runtime::stores::conversations::{ConversationStore, SqliteStore};
use daedalus_test_kit::a2a_client::state_of;
use daedalus_test_kit::{A2aClient, SseEvents};
use serde_json::{Value, json};
use support::process::{Runtime, runtime};

/// The runtime on its defaults (tasks and conversations in `WORK_DIR`'s SQLite file).
fn on_the_defaults(work_dir: &std::path::Path) -> Runtime {
    runtime()
        .env_remove("SESSIONS_DB")
        .env("WORK_DIR", work_dir.to_str().expect("utf-8"))
        .start()
}

/// The commits the default store's writer made so far.
async fn commits(rt: &Runtime) -> u64 {
    rt.metric("daedalus_runtime_store_commits_total{store=\"tasks\"}")
        .await
}

/// A contract `POST /` of a new task in context `context` saying `text`: the answered task.
async fn post(rt: &Runtime, id: &str, context: &str, text: &str) -> Value {
    reqwest::Client::new()
        .post(rt.url("/"))
        .json(
            &json!({"message": {"messageId": id, "contextId": context, "role": "user",
            "parts": [{"text": text}]}}),
        )
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_turn_on_the_defaults_is_one_commit() {
    let dir = tempfile::tempdir().expect("a work dir");
    let rt = on_the_defaults(dir.path());
    let client = A2aClient::new(rt.url("/"));
    // The first turn of a fresh file makes its tables' first pages; count from the second.
    client.run_task("warm up").await;
    let before = commits(&rt).await;
    for n in 0..20 {
        let task = client.run_task(&format!("json-rpc {n}")).await;
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    }
    assert_eq!(
        commits(&rt).await - before,
        20,
        "one commit for each JSON-RPC turn"
    );
    let before = commits(&rt).await;
    for n in 0..20 {
        let task = post(&rt, &format!("contract-{n}"), &format!("ctx-{n}"), "hello").await;
        assert_eq!(task["status"]["state"], "completed", "{task}");
    }
    assert_eq!(
        commits(&rt).await - before,
        20,
        "one commit for each contract turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_turns_begin_is_committed_before_its_first_event() {
    let dir = tempfile::tempdir().expect("a work dir");
    let rt = on_the_defaults(dir.path());
    let client = A2aClient::new(rt.url("/"));
    client.run_task("warm up").await;
    let before = commits(&rt).await;
    let response = reqwest::Client::new()
        .post(rt.url("/"))
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": {"messageId": "streamed-1", "role": "ROLE_USER",
                "parts": [{"text": "***SLEEP 2s words"}]}}}),
        )
        .send()
        .await
        .expect("a stream");
    let mut events = SseEvents::of(response);
    let first = events.next_json().await.expect("a first event");
    assert!(first["result"]["task"].is_object(), "{first}");
    assert_eq!(
        commits(&rt).await - before,
        1,
        "the begin was committed before the first event left (the turn still sleeps)"
    );
    let rest = events.rest().await;
    assert!(!rest.is_empty());
    assert_eq!(commits(&rt).await - before, 2, "then the end");
}

/// `kill -9` while turns are in flight: every turn answered before it is found after the
/// restart, completed with its answer, and its conversation holds its question and answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_answered_before_a_kill_is_found_after_the_restart() {
    let dir = tempfile::tempdir().expect("a work dir");
    let mut rt = on_the_defaults(dir.path());
    let answered = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let url = rt.url("/");
    let lanes: Vec<_> =
        (0..8)
            .map(|lane| {
                let (answered, stop, url) = (Arc::clone(&answered), Arc::clone(&stop), url.clone());
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let id = format!("kill-{lane}-{n}");
                        let text = format!("answer of {id}");
                        let sent = http
                        .post(&url)
                        .json(&json!({"message": {"messageId": id, "contextId": format!("ctx-{id}"),
                            "role": "user", "parts": [{"text": text}]}}))
                        .send()
                        .await;
                        let Ok(response) = sent else { return };
                        let Ok(task) = response.json::<Value>().await else {
                            return;
                        };
                        answered
                            .lock()
                            .expect("lock")
                            .insert(id, task["artifacts"][0]["parts"][0]["text"].clone());
                    }
                })
            })
            .collect();
    while answered.lock().expect("lock").len() < 300 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rt.child.kill().expect("SIGKILL");
    rt.child.wait().expect("reaped");
    stop.store(true, Ordering::SeqCst);
    for lane in lanes {
        let _ = lane.await;
    }
    let answered = answered.lock().expect("lock").clone();
    let rt = on_the_defaults(dir.path());
    let client = A2aClient::new(rt.url("/"));
    let file = dir.path().join("daedalus-tasks.sqlite");
    let conversations = SqliteStore::open(file.to_str().expect("utf-8")).expect("the file");
    for (id, answer) in &answered {
        let task = client
            .get(id)
            .await
            .unwrap_or_else(|| panic!("{id} is found"));
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
        assert_eq!(&task["artifacts"][0]["parts"][0]["text"], answer, "{task}");
        let rows = conversations
            .rows(&format!("ctx-{id}"), usize::MAX)
            .await
            .expect("rows");
        assert_eq!(rows.len(), 2, "{id}: its question and its answer");
    }
}
