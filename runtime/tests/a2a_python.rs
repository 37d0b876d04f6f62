//! The official A2A Python SDK (a2a-sdk 1.3.0, installed by `.ci/setup` into `.venv-a2a`) as a
//! client of the runtime, over both standard bindings: it resolves the card, sends (blocking and
//! streamed), gets, cancels a running task, and gets the typed error for an unknown task.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use support::runtime::Runtime;

/// The interpreter of `.venv-a2a`, or the one `A2A_PYTHON` names.
fn python() -> PathBuf {
    std::env::var_os("A2A_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-a2a/bin/python"),
        PathBuf::from,
    )
}

/// Runs the interop script against `url` on `binding`; its steps by name.
async fn interop(url: &str, binding: &str) -> std::collections::HashMap<String, Value> {
    let python = python();
    assert!(
        python.is_file(),
        "{} is missing: run .ci/setup",
        python.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/a2a_interop.py");
    let run = tokio::process::Command::new(&python)
        .arg(script)
        .arg(url)
        .arg(binding)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_mins(2), run)
        .await
        .expect("the SDK client finished")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{binding}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let step: Value = serde_json::from_str(line).expect("a JSON line");
            (step["step"].as_str().unwrap_or_default().to_owned(), step)
        })
        .collect()
}

async fn the_sdk_client_works_over(binding: &str) {
    let rt = Runtime::passthrough("interop").await;
    let steps = interop(&rt.url, binding).await;
    assert_eq!(steps["send"]["state"], "TASK_STATE_COMPLETED", "{steps:?}");
    assert_eq!(steps["send"]["text"], "hello");
    assert_eq!(steps["get"]["id"], steps["send"]["id"]);
    assert_eq!(steps["get"]["state"], "TASK_STATE_COMPLETED");
    let kinds: Vec<&str> = steps["stream"]["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kinds.first(), Some(&"task"), "the Task first: {kinds:?}");
    assert!(kinds.contains(&"artifact"), "{kinds:?}");
    assert_eq!(steps["stream"]["text"], "streamed words");
    assert_eq!(steps["stream"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(steps["started"]["state"], "TASK_STATE_WORKING");
    assert_eq!(steps["cancel"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(steps["unknown"]["error"], "TaskNotFoundError", "{steps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_works_over_json_rpc() {
    the_sdk_client_works_over("JSONRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_works_over_http_json() {
    the_sdk_client_works_over("HTTP+JSON").await;
}
