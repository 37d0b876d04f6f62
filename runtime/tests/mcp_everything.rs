//! The agent loop against the MCP project's own reference server,
//! `@modelcontextprotocol/server-everything` (Node.js, Streamable HTTP), installed by
//! `.ci/setup`: its tools are listed with their schemas and a call's result reaches the model.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::config::Launch;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-everything";

/// server-everything on a free port, killed on drop.
struct Everything {
    child: Child,
    url: String,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's entry point: `MCP_SERVER_EVERYTHING`, else where `.ci/setup` installs it.
fn entry_point() -> PathBuf {
    std::env::var_os("MCP_SERVER_EVERYTHING").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
                "../.tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        },
        PathBuf::from,
    )
}

fn everything() -> Everything {
    let entry = entry_point();
    assert!(
        entry.is_file(),
        "{} is missing: run .ci/setup",
        entry.display()
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let server = Everything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

async fn runtime(yaml: &str) -> (String, CancellationToken, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("agents.yaml"), yaml).expect("written");
    let args = [
        "daedalus-runtime",
        "--port",
        "0",
        "--sessions-db",
        ":memory:",
    ]
    .map(std::ffi::OsString::from);
    let config = match Launch::from_sources(args, &|_| None, dir.path()) {
        Ok(Launch::Run(c)) => c,
        other => panic!("config: {other:?}"),
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    tokio::spawn(async move { daedalus_runtime::run(listener, config, shutdown).await });
    (url, stop, dir)
}

#[tokio::test]
async fn the_loop_uses_server_everythings_tools() {
    let server = everything();
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("everything__get-sum".into(), json!({"a": 2, "b": 3})),
            ("everything__echo".into(), json!({"message": "hello there"})),
        ]),
        Reply::Text("2 + 3 = 5".into()),
    ]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    everything: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Use the tools., servers: [everything] }}\n",
        fake.openai_base_url, server.url
    );
    let (url, _stop, _dir) = runtime(&yaml).await;
    let body = json!({"message": {"messageId": "m-1", "role": "user",
                                  "parts": [{"text": "what is 2 + 3?"}]}});
    let task: Value = reqwest::Client::new()
        .post(format!("{url}/"))
        .json(&body)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "2 + 3 = 5");

    let log = fake.requests();
    let tools = log[0].body["tools"].as_array().expect("tools offered");
    let sum = tools
        .iter()
        .find(|t| t["function"]["name"] == "everything__get-sum")
        .expect("get-sum is offered");
    assert_eq!(
        sum["function"]["parameters"]["properties"]["a"]["type"], "number",
        "with its JSON schema: {sum}"
    );
    let results: Vec<&Value> = log[1].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains('5')),
        "{results:?}"
    );
    assert!(
        results[1]["content"]
            .as_str()
            .is_some_and(|c| c.contains("hello there")),
        "{results:?}"
    );
}
