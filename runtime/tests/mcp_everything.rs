//! The agent loop against the MCP project's own reference server,
//! `@modelcontextprotocol/server-everything` (Node.js, Streamable HTTP), installed by
//! `.ci/setup`: its tools are listed with their schemas and a call's result reaches the model.

mod support;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daedalus_fake_llm::{FakeLlm, Reply};
use serde_json::{Value, json};
use support::runtime::Runtime;

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
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
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
