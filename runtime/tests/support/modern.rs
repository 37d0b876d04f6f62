//! The MCP 2026-07-28 session of `tests/py/modern_client.py` (the official Python SDK), shared
//! by the tests that run it against one runtime (`mcp_modern.rs`) and against two replicas
//! behind a round-robin balancer (`mcp_replicas.rs`): what the model is scripted to say, the
//! deployment, the driver, and what every run must show.

use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};

use super::python::{Heard, PythonClient};

/// The fake model's key.
pub const KEY: &str = "sk-modern";
/// The fake model's name.
pub const MODEL: &str = "gpt-modern";
/// The agent the client talks to.
pub const AGENT: &str = "harper";

/// The model's side of the whole session, in the order the client's calls ask for it.
pub fn script() -> Vec<Reply> {
    super::two_tools_and_a_sub_agent()
        .into_iter()
        .chain([
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
        ])
        .collect()
}

/// The deployment: `harper` (a conversation per client) with the fixture `fx` and the
/// sub-agent `helper`, on the fake model.
pub fn deployment(fake: &FakeLlm, fx: &McpFixture) -> String {
    format!(
        "name: modern\nhost: 127.0.0.1\nnamespace: org.example.modern\n\
         default_model: openai.{MODEL}\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  {AGENT}: {{ instruction: Work., servers: [fx, helper], instance_scope: connection }}\n  \
         helper: {{ instruction: Help. }}\n",
        fake.openai_base_url,
        fx.url()
    )
}

/// Runs the client in `mode` against `url` (the agent's MCP endpoint); answers its summary.
pub async fn drive(mode: &str, url: &str, fx: &McpFixture) -> Value {
    let python = super::python::python();
    let mut client = PythonClient::start(&python, "modern_client.py", &[mode, url, AGENT]);
    let result = tokio::time::timeout(Duration::from_mins(2), async {
        loop {
            match client.next().await {
                Heard::Asks(word) if word == "HANGING" => {
                    let inside = || async move { fx.calls().iter().any(|c| c.tool == "hang") };
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
    result
}

/// What every run must show: the answers, the question and its answer in one conversation,
/// and the canceled task's downstream call abandoned with no model call after it.
pub async fn check(result: &Value, fx: &McpFixture, fake: &FakeLlm) {
    assert_eq!(result["version"], "2026-07-28", "{result}");
    assert_eq!(result["answer"], "5, 7 and checked");
    assert_eq!(result["again"], "again, answered");
    assert_eq!(result["history"], 4);
    assert_eq!(result["after_input"], "booked Lisbon");
    assert_eq!(result["task_answer"], "took my time");
    assert_eq!(result["updated_task"], "booked for Friday");
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
    let stopped = || async move { fx.abandoned_calls() == 1 };
    daedalus_test_kit::wait_until("the hang call to stop", Duration::from_secs(10), stopped).await;
    assert_eq!(
        fake.requests().len(),
        script().len(),
        "no model call after the cancel"
    );
}
