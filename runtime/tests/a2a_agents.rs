//! Other A2A agents as tools (`type: a2a` server entries): our runtime calls the official A2A
//! SDK's echo agent and a second instance of itself, both answers come back through the loop
//! under the caller's trace, input-required comes back as a question, and a cancel of the outer
//! task reaches both agents.
//!
//! The test binary installs the runtime's OpenTelemetry layer as `main` does, once for all its
//! tests, so the outer turn has a trace to pass on.

mod support;

use std::sync::Once;
use std::time::Duration;

use daedalus_contract::service::{self, LogFormat, LogTarget};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::{EchoAgent, wait_until};
use serde_json::{Value, json};
use support::process::runtime;
use support::runtime::Runtime;

const KEY: &str = "sk-a2a";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn install_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let (telemetry, layer) =
            daedalus_runtime::platform::telemetry::init("a2a-agents-test", "daedalus_runtime")
                .expect("no exporter to set up");
        // The provider lives as long as the test binary.
        std::mem::forget(telemetry);
        service::init_logging("warn", LogFormat::Json, &[], LogTarget::Stderr, vec![layer]);
    });
}

/// The outer agent's deployment: the echo agent and `inner` as A2A servers.
fn yaml(fake: &FakeLlm, echo: &EchoAgent, inner: &str) -> String {
    format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    echo: {{ type: a2a, url: \"{}\" }}\n    inner: {{ type: a2a, url: \"{inner}\" }}\n\
         agents:\n  outer: {{ instruction: Ask both., servers: [echo, inner] }}\n",
        fake.openai_base_url,
        echo.url(),
    )
}

/// The tool the inner runtime's first skill becomes.
async fn inner_tool(inner: &str) -> String {
    let card: Value = reqwest::get(format!("{inner}/.well-known/agent-card.json"))
        .await
        .expect("the call succeeds")
        .json()
        .await
        .expect("the call succeeds");
    match card["skills"][0]["id"].as_str() {
        Some(skill) => format!("inner__{skill}"),
        None => "inner__send_message".to_owned(),
    }
}

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("the call succeeds")
        .json()
        .await
        .expect("the call succeeds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_calls_an_sdk_agent_and_another_runtime_under_one_trace() {
    install_tracing();
    let echo = EchoAgent::start();
    let inner = runtime().env("AGENT_NAME", "inner").start();
    let inner_url = inner.url("");
    let inner_tool = inner_tool(&inner_url).await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("echo__echo".into(), json!({"message": "ping"})),
            (inner_tool.clone(), json!({"message": "pong"})),
        ]),
        Reply::ToolCalls(vec![(
            "echo__echo".into(),
            json!({"message": "ASK which one?"}),
        )]),
        Reply::Text("both answered".into()),
    ]);
    let outer = Runtime::start(&yaml(&fake, &echo, &inner_url)).await;
    let answer = reqwest::Client::new()
        .post(format!("{}/", outer.url))
        .header("traceparent", format!("00-{TRACE}-00f067aa0ba902b7-01"))
        .json(&json!({"message": {"messageId": "a2a-1", "role": "user",
            "parts": [{"text": "ask them"}]}}))
        .send()
        .await
        .expect("the call succeeds")
        .json::<Value>()
        .await
        .expect("the call succeeds");
    assert_eq!(answer["status"]["state"], "completed", "{answer}");

    let log = fake.requests();
    let offered = log[0].body["tools"].to_string();
    assert!(
        offered.contains("echo__echo") && offered.contains(&inner_tool),
        "{offered}"
    );
    let results = log[1].body["messages"].to_string();
    assert!(
        results.contains("echo: ping"),
        "the SDK agent's answer: {results}"
    );
    assert!(
        results.contains("pong"),
        "the inner runtime's answer: {results}"
    );
    let asked = log[2].body["messages"].to_string();
    assert!(
        asked.contains("needs more input: which one?") && asked.contains("task_id"),
        "input-required comes back as a question: {asked}"
    );

    let traced = echo.traceparents();
    assert!(
        !traced.is_empty()
            && traced
                .iter()
                .all(|t| t.as_deref().is_some_and(|t| t.contains(TRACE))),
        "the SDK agent saw the caller's trace: {traced:?}"
    );
    let inner_logs = inner.drain_logs();
    assert!(
        inner_logs
            .iter()
            .any(|l| l["message"] == "task started" && l.to_string().contains(TRACE)),
        "the inner runtime's turn is in the caller's trace: {inner_logs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_of_the_outer_task_reaches_both_agents() {
    install_tracing();
    let echo = EchoAgent::start();
    let inner = runtime().env("AGENT_NAME", "inner").start();
    let inner_url = inner.url("");
    let inner_tool = inner_tool(&inner_url).await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("echo__echo".into(), json!({"message": "SLEEP 120 slow"})),
            (inner_tool, json!({"message": "***SLEEP 120s slow"})),
        ]),
        Reply::Text("never".into()),
    ]);
    let outer = Runtime::start(&yaml(&fake, &echo, &inner_url)).await;
    let outer_url = format!("{}/", outer.url);
    let started = rpc(
        &outer_url,
        "SendMessage",
        json!({
            "message": {"messageId": "c-1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
            "configuration": {"returnImmediately": true},
        }),
    )
    .await;
    let id = started["result"]["task"]["id"].clone();
    // Both calls are in flight: the echo agent got its POST, the inner runtime runs a task.
    let inner_rpc = format!("{inner_url}/");
    wait_until("both calls in flight", Duration::from_secs(30), || {
        let (echo, inner_rpc) = (&echo, inner_rpc.clone());
        async move {
            let working = rpc(
                &inner_rpc,
                "ListTasks",
                json!({"status": "TASK_STATE_WORKING"}),
            )
            .await;
            !echo.traceparents().is_empty() && working["result"]["totalSize"] == 1
        }
    })
    .await;
    let canceled = rpc(&outer_url, "CancelTask", json!({"id": id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    wait_until(
        "the SDK agent told to cancel",
        Duration::from_secs(30),
        || {
            let told = !echo.canceled().is_empty();
            async move { told }
        },
    )
    .await;
    wait_until("the inner task canceled", Duration::from_secs(30), || {
        let inner_rpc = inner_rpc.clone();
        async move {
            let canceled = rpc(
                &inner_rpc,
                "ListTasks",
                json!({"status": "TASK_STATE_CANCELED"}),
            )
            .await;
            canceled["result"]["totalSize"] == 1
        }
    })
    .await;
    assert_eq!(
        fake.requests().len(),
        1,
        "the model heard nothing after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_answers_with_a_streamed_message_is_heard() {
    let echo = EchoAgent::start();
    // The inner runtime replies with a Message, which a stream carries alone (A2A §3.1.2).
    let inner = runtime()
        .env("AGENT_NAME", "inner")
        .env("DEFAULT_MODEL", "tck")
        .start();
    let inner_url = inner.url("");
    let inner_tool = inner_tool(&inner_url).await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![(
            inner_tool,
            json!({"message": "tck-message-response hello"}),
        )]),
        Reply::Text("heard".into()),
    ]);
    let outer = Runtime::start(&yaml(&fake, &echo, &inner_url)).await;
    let answer = support::post_text(&outer.url, None, "m-reply", "ask inner").await;
    assert_eq!(answer["status"]["state"], "completed", "{answer}");
    let results = fake.requests()[1].body["messages"].to_string();
    assert!(
        results.contains("tck message response") && !results.contains("not A2A"),
        "the inner runtime's reply reaches the loop: {results}"
    );
}
