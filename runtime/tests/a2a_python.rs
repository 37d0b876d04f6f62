//! The official A2A Python SDK (a2a-sdk 1.3.0, installed by `.ci/setup` into `.venv-a2a`) as a
//! client of the runtime, over the three standard bindings (JSON-RPC, HTTP+JSON, gRPC) and as a
//! v0.3 client: it resolves the
//! card, sends (blocking and streamed), gets, cancels a running task, gets the typed error for
//! an unknown task, continues an input-required task, joins a running task's stream, pages
//! through a context's tasks and reads the extended card.

mod support;

use serde_json::Value;
use support::runtime::Runtime;

/// Runs the interop script against `url` on `binding`; its steps by name.
async fn interop(url: &str, binding: &str) -> std::collections::HashMap<String, Value> {
    run_script("a2a_interop.py", url, binding).await
}

/// Runs `tests/py/<script>` against `url` on `binding`; its steps by name.
async fn run_script(
    script: &str,
    url: &str,
    binding: &str,
) -> std::collections::HashMap<String, Value> {
    support::python::a2a_steps(script, &[url, binding]).await
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
    assert_eq!(steps["input"]["asked"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(steps["input"]["id_kept"], true, "{steps:?}");
    assert_eq!(steps["input"]["state"], "TASK_STATE_COMPLETED");
    let joined: Vec<&str> = steps["subscribe"]["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(joined.first(), Some(&"task"), "the Task first: {joined:?}");
    assert_eq!(steps["subscribe"]["text"], "joined late", "no chunk lost");
    assert_eq!(steps["subscribe"]["state"], "TASK_STATE_COMPLETED");
    if binding == "JSONRPC-0.3" {
        assert_eq!(steps["card"]["v03_interfaces"], 1);
        return;
    }
    assert_eq!(steps["list"]["total"], 5, "{steps:?}");
    assert_eq!(steps["list"]["pages"], 3);
    assert_eq!(steps["list"]["newest_first"], true);
    assert_eq!(steps["extended"]["name"], "interop");
    assert_eq!(
        steps["extended"]["bindings"],
        serde_json::json!(["DAEDALUS-RUNTIME-CONTRACT", "GRPC", "HTTP+JSON", "JSONRPC"]),
        "{steps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_works_over_json_rpc() {
    the_sdk_client_works_over("JSONRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_works_over_http_json() {
    the_sdk_client_works_over("HTTP+JSON").await;
}

/// The SDK's gRPC transport (`a2a-sdk[grpc]`), dialing the card's `GRPC` interface: the same
/// steps, the same answers, the typed `TaskNotFoundError` read from the status's `ErrorInfo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_works_over_grpc() {
    the_sdk_client_works_over("GRPC").await;
}

/// The SDK's v0.3 compat transport, chosen from the card's v0.3 interface: `message/send`,
/// `kind` discriminators, lowercase states and `final` on the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_speaking_v03_works_over_json_rpc() {
    the_sdk_client_works_over("JSONRPC-0.3").await;
}

/// The SDK client reads every shape an agent answers with (the `tck` model plays them): a
/// Message reply, file parts by bytes and by URL with their names and media types, a data part,
/// a rejected task.
async fn the_sdk_client_reads_every_answer_shape_over(binding: &str) {
    let rt = Runtime::start("default_model: tck\nagents:\n  shapes: {}\n").await;
    let steps = run_script("a2a_shapes.py", &rt.url, binding).await;
    assert_eq!(
        steps["reply"]["kinds"],
        serde_json::json!(["message"]),
        "{steps:?}"
    );
    assert_eq!(steps["reply"]["role"], "ROLE_AGENT");
    assert_eq!(
        steps["reply"]["parts"],
        serde_json::json!([{"text": "Direct message response"}])
    );
    assert_eq!(steps["file"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        steps["file"]["part"],
        serde_json::json!({"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"})
    );
    assert_eq!(
        steps["url"]["part"],
        serde_json::json!({"url": "https://example.com/output.txt", "mediaType": "text/plain",
            "filename": "output.txt"})
    );
    assert_eq!(
        steps["data"]["part"],
        serde_json::json!({"data": {"key": "value", "count": 42.0}})
    );
    assert_eq!(steps["rejected"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(steps["rejected"]["why"], "rejected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_reads_every_answer_shape_over_json_rpc() {
    the_sdk_client_reads_every_answer_shape_over("JSONRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_reads_every_answer_shape_over_http_json() {
    the_sdk_client_reads_every_answer_shape_over("HTTP+JSON").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_reads_every_answer_shape_over_grpc() {
    the_sdk_client_reads_every_answer_shape_over("GRPC").await;
}
