//! Daedalus' view of the MCP face with the official Python `mcp` SDK, both 2.x (legacy mode)
//! and 1.x, installed by `.ci/setup` into `.venv` and `.venv-mcp1`: registry discovery, the
//! tools of every agent, progress for a loop that calls two tools and a sub-agent (arrival order
//! increasing, patterns, none without a token), the history prompt, and `get_health` following
//! a downstream server that goes down and comes back. The Python side is
//! `tests/py/daedalus_client.py`; this file runs the servers and stops and restarts the
//! downstream server when the client asks.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::python::{Heard, PythonClient};
use support::runtime::Runtime;

const KEY: &str = "sk-python";

/// The Python interpreter of `venv` (`.venv` holds mcp 2.x, `.venv-mcp1` mcp 1.x), or the
/// one `env` names.
fn python(env: &str, venv: &str) -> PathBuf {
    std::env::var_os(env).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../{venv}/bin/python")),
        PathBuf::from,
    )
}

async fn daedalus_session(python: PathBuf) -> Value {
    let mut fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-py"]).await;
    fake.script(
        support::two_tools_and_a_sub_agent()
            .into_iter()
            .chain([Reply::Text("again, answered".into())]),
    );
    let rt = Runtime::start(&format!(
        "name: py\nhost: 127.0.0.1\nnamespace: org.example.py\n\
         default_model: openai.gpt-py\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  harper: {{ instruction: Work., servers: [fx, helper], instance_scope: connection }}\n  \
         helper: {{ instruction: Help. }}\n",
        fake.openai_base_url,
        fx.url()
    ))
    .await;
    let base = rt.url.clone();

    let mut client = PythonClient::start(&python, "daedalus_client.py", &[&base, "harper"]);
    let result = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            match client.next().await {
                Heard::Asks(word) if word == "STOP" => fx.stop().await,
                Heard::Asks(word) if word == "START" => fx.restart().await,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daedalus_with_the_python_sdk_2_in_legacy_mode() {
    let result = daedalus_session(python("MCP2_PYTHON", ".venv")).await;
    assert_eq!(result["sdk"], 2, "{result}");
    assert_eq!(result["agents"], json!(["harper", "helper"]));
    assert_eq!(result["answer"], "5, 7 and checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daedalus_with_the_python_sdk_1() {
    let result = daedalus_session(python("MCP1_PYTHON", ".venv-mcp1")).await;
    assert_eq!(result["sdk"], 1, "{result}");
    assert_eq!(result["agents"], json!(["harper", "helper"]));
    assert_eq!(result["answer"], "5, 7 and checked");
}
