//! Daedalus' view of the MCP face with the official Python `mcp` SDK, both 2.x (legacy mode)
//! and 1.x, installed by `.ci/setup` into `.venv` and `.venv-mcp1`: registry discovery, the
//! tools of every agent, progress for a loop that calls two tools and a sub-agent (arrival order
//! increasing, patterns, none without a token), the history prompt, and `get_health` following
//! a downstream server that goes down and comes back. The Python side is
//! `tests/py/daedalus_client.py`; this file runs the servers and stops and restarts the
//! downstream server when the client asks.

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::runtime::Runtime;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
    assert!(
        python.is_file(),
        "{} is missing: run .ci/setup",
        python.display()
    );
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

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/daedalus_client.py");
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&base)
        .arg("harper")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let result = tokio::time::timeout(Duration::from_secs(90), async {
        while let Some(line) = lines.next_line().await.expect("reads") {
            match line.as_str() {
                "STOP" => fx.stop().await,
                "START" => fx.restart().await,
                other if other.starts_with("RESULT ") => {
                    return serde_json::from_str::<Value>(&other["RESULT ".len()..]).expect("JSON");
                }
                other if other.starts_with("FAILED ") => panic!("the Python client: {other}"),
                // Anything else the client prints is left for the test's output on failure.
                _ => continue,
            }
            stdin.write_all(b"ok\n").await.expect("answers");
            stdin.flush().await.expect("flushes");
        }
        panic!("the Python client ended without a result");
    })
    .await
    .expect("the Python client finished in time");
    let status = child.wait().await.expect("exits");
    assert!(status.success(), "{status}");
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
