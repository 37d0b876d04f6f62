//! The MCP face on 2026-07-28, with the official Python SDK (`mcp` 2.x in `.venv`) pinned to
//! that revision and in `auto` mode (which finds it by `server/discover`): tools, a conversation
//! continued by id with progress and history, the agent's question answered through the SDK's
//! elicitation callback (the multi-round trip), a task polled to completion, a task that asks
//! and is answered by `tasks/update`, and a task canceled mid-turn (the downstream tool's call
//! is abandoned), all without a session. The Python side
//! is `tests/py/modern_client.py`. Legacy clients on the same endpoint are `mcp_python.rs`.

mod support;

use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::python::{Heard, PythonClient};
use support::runtime::Runtime;

const KEY: &str = "sk-modern";

/// Runs `modern_client.py` in `mode` against a runtime whose agent `harper` has one downstream
/// server and a sub-agent; answers the client's summary, the fixture, and the model's log.
async fn modern_session(mode: &str) -> (Value, McpFixture, FakeLlm) {
    let python = support::python::python();
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-modern"]).await;
    fake.script(support::two_tools_and_a_sub_agent().into_iter().chain([
        Reply::Text("again, answered".into()),
        Reply::ToolCalls(vec![(
            "request_user_input".into(),
            json!({"question": "Which city?"}),
        )]),
        Reply::Text("booked Lisbon".into()),
        Reply::ToolCalls(vec![("fx__slow".into(), json!({"ms": 200}))]),
        Reply::Text("took my time".into()),
        Reply::ToolCalls(vec![(
            "request_user_input".into(),
            json!({"question": "Which date?"}),
        )]),
        Reply::Text("booked for Friday".into()),
        Reply::ToolCalls(vec![("fx__hang".into(), json!({}))]),
    ]));
    let rt = Runtime::start(&format!(
        "name: modern\nhost: 127.0.0.1\nnamespace: org.example.modern\n\
         default_model: openai.gpt-modern\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  harper: {{ instruction: Work., servers: [fx, helper], instance_scope: connection }}\n  \
         helper: {{ instruction: Help. }}\n",
        fake.openai_base_url,
        fx.url()
    ))
    .await;
    let url = rt.mcp("harper");
    let mut client = PythonClient::start(&python, "modern_client.py", &[mode, &url, "harper"]);
    let result = tokio::time::timeout(Duration::from_mins(2), async {
        loop {
            match client.next().await {
                Heard::Asks(word) if word == "HANGING" => {
                    let inside = || {
                        let fx = &fx;
                        async move { fx.calls().iter().any(|c| c.tool == "hang") }
                    };
                    daedalus_test_kit::wait_until(
                        "the task's turn to call hang",
                        Duration::from_secs(20),
                        inside,
                    )
                    .await;
                }
                Heard::Asks(word) => panic!("the client asked for {word}"),
                Heard::Result(result) => return result,
            }
            client.ok().await;
        }
    })
    .await
    .expect("the Python client finished in time");
    client.finish().await;
    (result, fx, fake)
}

/// What every mode must show.
async fn check_modern_session(mode: &str) {
    let (result, fx, fake) = modern_session(mode).await;
    assert_eq!(result["version"], "2026-07-28", "{result}");
    assert_eq!(result["answer"], "5, 7 and checked");
    assert_eq!(result["again"], "again, answered");
    assert_eq!(result["history"], 4);
    assert_eq!(result["after_input"], "booked Lisbon");
    assert_eq!(result["task_answer"], "took my time");
    assert_eq!(result["updated_task"], "booked for Friday");
    // The answer continued the same turn: the model's next request holds the question's
    // tool call and the user's answer.
    let log = fake.requests();
    let after_answer = log
        .iter()
        .find(|r| r.body.to_string().contains("Lisbon"))
        .expect("the answer reached the model");
    assert!(
        after_answer.body.to_string().contains("Which city?"),
        "the question is in the same conversation: {}",
        after_answer.body
    );
    // The canceled task's downstream call was abandoned, and the model was not asked again.
    let stopped = || {
        let fx = &fx;
        async move { fx.abandoned_calls() == 1 }
    };
    daedalus_test_kit::wait_until("the hang call to stop", Duration::from_secs(10), stopped).await;
    assert_eq!(fake.requests().len(), 11, "no model call after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pinned_to_2026_07_28_does_what_a_session_does_and_more() {
    check_modern_session("2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_in_auto_mode_finds_2026_07_28_by_discovery() {
    check_modern_session("auto").await;
}
