//! One trace from publisher to model and tools: `daedalus-proxy publish --traceparent` → NATS →
//! the proxy binary → the runtime binary → the strict fake LLM (which asks for a tool) → the rmcp
//! fixture server → the fake LLM → the result. Both binaries export to one in-test OTLP
//! receiver; their spans, and the traceparent the fixture received, form one tree.

mod support;

use std::process::Stdio;
use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{OtlpReceiver, ReceivedSpan, runtime_binary, wait_until};
use serde_json::json;
use support::NatsServer;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const KEY: &str = "sk-one-trace";
const TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";
const CALLER_SPAN: &str = "10f067aa0ba902b7";
const WAIT: Duration = Duration::from_secs(30);

fn otel(command: &mut Command, receiver: &OtlpReceiver) {
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env("LOG_LEVEL", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
}

/// Spawns `command` and waits for a stdout line containing `ready`; then keeps reading.
async fn spawn_until(mut command: Command, ready: &str) -> Child {
    let mut child = command.spawn().expect("starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let found = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(ready) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "never logged {ready:?}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

async fn stop(child: &mut Child) {
    let pid = child.id().expect("running").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("exits")
        .expect("waited");
    assert!(exit.success(), "{exit}");
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name:?} span in {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_the_publisher_to_the_model_and_its_tools() {
    let nats = NatsServer::start();
    let receiver = OtlpReceiver::start().await;
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-e2e"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fx__add".into(), json!({"a": 2, "b": 3}))]),
        Reply::Text("five".into()),
    ]);

    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(
        dir.path().join("agents.yaml"),
        format!(
            "default_model: openai.gpt-e2e\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
             mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\nagents:\n  e2e: {{ instruction: Add., servers: [fx] }}\n",
            fake.openai_base_url,
            fx.url()
        ),
    )
    .expect("agents.yaml");
    let port = daedalus_test_kit::free_port();
    let mut runtime = Command::new(runtime_binary());
    runtime
        .current_dir(dir.path())
        .env_clear()
        .env("A2A_PORT", port.to_string())
        .env("A2A_HOST", "127.0.0.1")
        .env("AGENT_NAME", "e2e")
        .env("SESSIONS_DB", ":memory:");
    otel(&mut runtime, &receiver);
    let mut runtime = spawn_until(runtime, "runtime ready").await;

    let mut proxy = Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"));
    proxy
        .env_clear()
        .env("AGENT_NAME", "e2e")
        .env("NATS_URL", nats.url())
        .env("RUNTIME_URL", format!("http://127.0.0.1:{port}"))
        .env("PROXY_PORT", "0")
        .env("PROXY_HOST", "127.0.0.1")
        .env("HEALTH_INTERVAL", "100ms")
        .env("PULL_EXPIRES", "1s");
    otel(&mut proxy, &receiver);
    let mut proxy = spawn_until(proxy, "consuming tasks").await;

    let published = Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("NATS_URL", nats.url())
        .args([
            "publish",
            "--agent",
            "e2e",
            "--task-id",
            "t-e2e",
            "--traceparent",
        ])
        .arg(format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .arg("add 2 and 3")
        .output()
        .await
        .expect("publish runs");
    let out = String::from_utf8_lossy(&published.stdout);
    assert_eq!(published.status.code(), Some(0), "{out}");
    assert!(out.contains("five"), "{out}");

    stop(&mut proxy).await;
    stop(&mut runtime).await;
    wait_until("both services' spans", WAIT, || async {
        let spans = receiver.spans();
        ["daedalus-proxy", "daedalus-runtime"]
            .iter()
            .all(|service| spans.iter().any(|s| s.service == *service))
    })
    .await;

    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s.trace_id == TRACE),
        "one trace: {spans:#?}"
    );
    let task = one(&spans, "process agent.tasks.e2e");
    let call = one(&spans, "POST /");
    let publish = one(&spans, "publish agent.results.e2e.t-e2e");
    let turn = one(&spans, "invoke_agent e2e");
    let tool = one(&spans, "execute_tool add");
    let chats: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "chat gpt-e2e").collect();
    assert_eq!(chats.len(), 2, "two model calls");
    assert_eq!(
        task.parent_span_id, CALLER_SPAN,
        "the publisher's span is the root"
    );
    assert_eq!(call.parent_span_id, task.span_id);
    assert_eq!(publish.parent_span_id, task.span_id);
    assert_eq!(
        turn.parent_span_id, call.span_id,
        "the runtime continues the proxy's call"
    );
    assert_eq!(tool.parent_span_id, turn.span_id);
    for chat in &chats {
        assert_eq!(chat.parent_span_id, turn.span_id);
        assert_eq!(chat.attribute("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attribute("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attribute("gen_ai.request.model"), Some("gpt-e2e"));
        assert!(
            chat.attribute("gen_ai.usage.input_tokens").is_some(),
            "{chat:?}"
        );
    }
    assert_eq!(tool.attribute("gen_ai.tool.name"), Some("add"));
    assert_eq!(tool.attribute("outcome"), Some("ok"));
    // The MCP server saw the tool call's span.
    let calls = fx.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].traceparent.as_deref(),
        Some(format!("00-{TRACE}-{}-01", tool.span_id).as_str())
    );
}
