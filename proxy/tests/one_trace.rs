//! One trace from publisher to model and tools: `daedalus-proxy publish --traceparent` → NATS →
//! the proxy binary → the runtime binary → the strict fake LLM (which asks for two tools) → the
//! rmcp fixture server, and a second runtime binary called as an A2A agent → the fake LLM → the
//! result. Every binary exports to one in-test OTLP receiver; their spans, and the traceparent
//! the fixture received, form one tree, and each span keeps to the OpenTelemetry conventions
//! for GenAI, A2A and MCP (vendored in `test-kit/conventions/`).

mod support;

use std::process::Stdio;
use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{
    Conventions, OtlpReceiver, ReceivedSpan, SpanKind, runtime_binary, wait_until,
};
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

/// The agent called as a tool: a runtime of its own, its agent a passthrough, exporting to
/// `receiver`. Answers it, its URL, and the tool its card's first skill becomes.
async fn start_helper(receiver: &OtlpReceiver) -> Helper {
    let helper_port = daedalus_test_kit::free_port();
    let helper_dir = tempfile::tempdir().expect("a temp dir");
    let mut helper = Command::new(runtime_binary());
    helper
        .current_dir(helper_dir.path())
        .env_clear()
        .env("A2A_PORT", helper_port.to_string())
        .env("A2A_HOST", "127.0.0.1")
        .env("AGENT_NAME", "helper")
        .env("SESSIONS_DB", ":memory:")
        .env("OTEL_SERVICE_NAME", "daedalus-helper");
    otel(&mut helper, receiver);
    let helper = spawn_until(helper, "runtime ready").await;
    let helper_url = format!("http://127.0.0.1:{helper_port}");
    let card: serde_json::Value = reqwest::get(format!("{helper_url}/.well-known/agent-card.json"))
        .await
        .expect("the helper's card")
        .json()
        .await
        .expect("JSON");
    let helper_tool = card["skills"][0]["id"].as_str().map_or_else(
        || "helper__send_message".to_owned(),
        |s| format!("helper__{s}"),
    );

    Helper {
        child: helper,
        url: helper_url,
        tool: helper_tool,
        _dir: helper_dir,
    }
}

/// The agent called as a tool, running.
struct Helper {
    child: Child,
    url: String,
    /// The tool its card's first skill becomes.
    tool: String,
    _dir: tempfile::TempDir,
}

/// The proxy's call and the runtime's answer are the A2A client and server spans of one send,
/// under the proxy's task span; the turn runs in the request. Answers the turn's span.
fn the_send_is_one_a2a_call<'a>(
    spans: &'a [ReceivedSpan],
    task: &ReceivedSpan,
) -> &'a ReceivedSpan {
    // The runtime streams, so the proxy relays its events: a streamed send.
    let call = spans
        .iter()
        .find(|s| s.service == "daedalus-proxy" && s.name == "SendStreamingMessage")
        .unwrap_or_else(|| panic!("the proxy's call: {spans:#?}"));
    let served = spans
        .iter()
        .find(|s| s.service == "daedalus-runtime" && s.kind == SpanKind::Server)
        .unwrap_or_else(|| panic!("the runtime's server span: {spans:#?}"));
    assert_eq!(served.name, call.name, "one A2A method on both sides");
    assert_eq!(call.parent_span_id, task.span_id);
    assert_eq!(
        (call.kind, served.kind),
        (SpanKind::Client, SpanKind::Server)
    );
    assert_eq!(call.attribute("a2a.task.id"), Some("t-e2e"));
    assert_eq!(served.attribute("a2a.task.id"), Some("t-e2e"));
    assert_eq!(
        served.attribute("a2a.message.id"),
        call.attribute("a2a.message.id")
    );
    assert_eq!(
        served.parent_span_id, call.span_id,
        "the runtime continues the proxy's call"
    );
    assert_eq!(
        served.attribute("a2a.task.state"),
        Some("TASK_STATE_COMPLETED")
    );
    let turn = one(spans, "invoke_agent e2e");
    assert_eq!(
        turn.parent_span_id, served.span_id,
        "the turn runs in the request"
    );
    assert_eq!(turn.kind, SpanKind::Internal);
    assert_eq!(turn.attribute("gen_ai.provider.name"), Some("openai"));
    assert_eq!(turn.attribute("gen_ai.request.model"), Some("gpt-e2e"));
    turn
}

/// The agent called as a tool, in `turn`: execute_tool → invoke_agent helper (CLIENT) → the
/// A2A request (CLIENT) → the helper's server span → its turn.
fn the_agent_tool_runs_in_one_tree(spans: &[ReceivedSpan], turn: &ReceivedSpan, helper_tool: &str) {
    let asked = spans
        .iter()
        .find(|s| {
            s.name
                == format!(
                    "execute_tool {}",
                    helper_tool.trim_start_matches("helper__")
                )
        })
        .unwrap_or_else(|| panic!("the helper's tool call: {spans:#?}"));
    assert_eq!(asked.parent_span_id, turn.span_id);
    let invoke = spans
        .iter()
        .find(|s| s.name.starts_with("invoke_agent ") && s.kind == SpanKind::Client)
        .unwrap_or_else(|| panic!("the remote agent's invoke_agent: {spans:#?}"));
    assert_eq!(invoke.parent_span_id, asked.span_id);
    let remote_call = spans
        .iter()
        .find(|s| {
            s.service == "daedalus-runtime"
                && s.kind == SpanKind::Client
                && s.attribute("a2a.method.name").is_some()
        })
        .unwrap_or_else(|| panic!("the A2A client span: {spans:#?}"));
    assert_eq!(remote_call.parent_span_id, invoke.span_id);
    assert_eq!(
        remote_call.attribute("a2a.task.state"),
        Some("TASK_STATE_COMPLETED")
    );
    let helper_served = spans
        .iter()
        .find(|s| s.service == "daedalus-helper" && s.kind == SpanKind::Server)
        .unwrap_or_else(|| panic!("the helper's server span: {spans:#?}"));
    assert_eq!(
        helper_served.name, remote_call.name,
        "one A2A method on both sides"
    );
    assert_eq!(helper_served.parent_span_id, remote_call.span_id);
    assert_eq!(
        helper_served.attribute("a2a.task.id"),
        remote_call.attribute("a2a.task.id")
    );
    assert!(
        spans.iter().any(|s| s.service == "daedalus-helper"
            && s.name == "invoke_agent helper"
            && s.parent_span_id == helper_served.span_id),
        "the helper's turn runs in its request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_the_publisher_to_the_model_and_its_tools() {
    let nats = NatsServer::start();
    let receiver = OtlpReceiver::start().await;
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-e2e"]).await;

    let mut helper = start_helper(&receiver).await;
    let (helper_url, helper_tool) = (helper.url.clone(), helper.tool.clone());

    fake.script([
        Reply::ToolCalls(vec![
            ("fx__add".into(), json!({"a": 2, "b": 3})),
            (helper_tool.clone(), json!({"message": "ping"})),
        ]),
        Reply::Text("five".into()),
    ]);

    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(
        dir.path().join("agents.yaml"),
        format!(
            "default_model: openai.gpt-e2e\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
             mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n    helper: {{ type: a2a, url: \"{helper_url}\" }}\n\
             agents:\n  e2e: {{ instruction: Add., servers: [fx, helper] }}\n",
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
    stop(&mut helper.child).await;
    wait_until("every service's spans", WAIT, || async {
        let spans = receiver.spans();
        ["daedalus-proxy", "daedalus-runtime", "daedalus-helper"]
            .iter()
            .all(|service| spans.iter().any(|s| s.service == *service))
    })
    .await;

    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s.trace_id == TRACE),
        "one trace: {spans:#?}"
    );
    Conventions::load().assert_kept_by(&spans);
    let task = one(&spans, "process agent.tasks.e2e");
    let turn = the_send_is_one_a2a_call(&spans, task);
    let publish = one(&spans, "publish agent.results.e2e.t-e2e");
    let tool = one(&spans, "execute_tool add");
    let chats: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "chat gpt-e2e").collect();
    assert_eq!(chats.len(), 2, "two model calls");
    assert_eq!(
        task.parent_span_id, CALLER_SPAN,
        "the publisher's span is the root"
    );
    assert_eq!(publish.parent_span_id, task.span_id);
    assert_eq!(tool.parent_span_id, turn.span_id);
    // The MCP tool call: the MCP client's attributes on its execute_tool span.
    assert_eq!(tool.attribute("mcp.method.name"), Some("tools/call"));
    assert!(tool.attribute("mcp.protocol.version").is_some(), "{tool:?}");
    assert!(tool.attribute("jsonrpc.request.id").is_some(), "{tool:?}");
    assert_eq!(tool.attribute("server.address"), Some("127.0.0.1"));
    the_agent_tool_runs_in_one_tree(&spans, turn, &helper_tool);
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
