//! The runtime continues its caller's W3C trace: a turn asked for over `POST /` or MCP with a
//! `traceparent` runs in that trace, and every model call it makes carries a `traceparent` of
//! the same trace with a span of the runtime's own; without one, the runtime starts a trace.
//!
//! The test binary installs the runtime's OpenTelemetry layer as `main` does, once for all
//! its tests.

mod support;

use std::sync::Once;

use daedalus_contract::service::{self, LogFormat, LogTarget};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{ModernClient, modern_mcp_request};
use serde_json::{Value, json};
use support::mcp_client::{call, connect_with_headers};
use support::runtime::Runtime;

const KEY: &str = "sk-trace";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn caller_traceparent() -> String {
    format!("00-{TRACE}-{CALLER_SPAN}-01")
}

fn install_tracing() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let (telemetry, layer) =
            daedalus_runtime::platform::telemetry::init("trace-context-test", "daedalus_runtime")
                .expect("no exporter to set up");
        // The provider lives as long as the test binary.
        std::mem::forget(telemetry);
        service::init_logging("warn", LogFormat::Json, &[], LogTarget::Stderr, vec![layer]);
    });
}

/// `(trace id, span id)` of a `traceparent`.
fn ids(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00", "{traceparent}");
    (parts[1].to_owned(), parts[2].to_owned())
}

async fn post(url: &str, traceparent: Option<&str>, id: &str) -> Value {
    let mut request = reqwest::Client::new().post(format!("{url}/")).json(&json!({
        "message": {"messageId": id, "role": "user", "parts": [{"text": "go"}]}
    }));
    if let Some(tp) = traceparent {
        request = request.header("traceparent", tp);
    }
    let response = request.send().await.expect("sent");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

async fn runtime(fake: &FakeLlm, servers: &str, agent: &str) -> Runtime {
    let yaml =
        support::runtime::on_fake_openai(&fake.openai_base_url, KEY, "gpt-trace", servers, agent);
    Runtime::start(&yaml).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_model_call_of_a_post_turn_carries_the_callers_trace() {
    install_tracing();
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fx__add".into(), json!({"a": 2, "b": 3}))]),
        Reply::Text("five".into()),
    ]);
    let rt = runtime(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  a: { instruction: Add., servers: [fx] }\n",
    )
    .await;
    let task = post(&rt.url, Some(&caller_traceparent()), "m-1").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");

    let log = fake.requests();
    assert_eq!(log.len(), 2);
    let mut spans = Vec::new();
    for request in &log {
        let tp = request
            .traceparent
            .as_deref()
            .expect("a traceparent on every model call");
        let (trace, span) = ids(tp);
        assert_eq!(trace, TRACE, "the caller's trace");
        assert_ne!(span, CALLER_SPAN, "a span of the runtime's own");
        spans.push(span);
    }
    assert_ne!(spans[0], spans[1], "one span per model call");

    // The tool call went to the MCP server in the same trace, as a header and in `_meta`.
    let calls = fx.calls();
    assert_eq!(calls.len(), 1);
    let header = calls[0]
        .traceparent
        .as_deref()
        .expect("a traceparent header");
    assert_eq!(calls[0].meta_traceparent.as_deref(), Some(header));
    let (trace, tool_span) = ids(header);
    assert_eq!(trace, TRACE);
    assert!(
        !spans.contains(&tool_span) && tool_span != CALLER_SPAN,
        "the tool call's own span"
    );
}

/// A gRPC call's `traceparent` metadata is the trace of its turn, as the header is on HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_continues_the_callers_trace() {
    install_tracing();
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    fake.script([Reply::Text("traced".into())]);
    let rt = runtime(&fake, "    {}", "  a: { instruction: Talk. }\n").await;
    let mut client = support::grpc::connect(&rt.url).await;
    let mut request = support::grpc::call(support::grpc::send("g-1", "go"));
    let traceparent = caller_traceparent().parse().expect("ASCII");
    request.metadata_mut().insert("traceparent", traceparent);
    client.send_message(request).await.expect("sent");
    let log = fake.requests();
    assert_eq!(log.len(), 1);
    let (trace, span) = ids(log[0].traceparent.as_deref().expect("a traceparent"));
    assert_eq!(trace, TRACE, "the caller's trace");
    assert_ne!(span, CALLER_SPAN, "a span of the runtime's own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_traceparent_the_turn_starts_a_trace_of_its_own() {
    install_tracing();
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    fake.script([Reply::Text("one".into()), Reply::Text("two".into())]);
    let rt = runtime(&fake, "{}", "  a: { instruction: Hi. }\n").await;
    post(&rt.url, None, "m-1").await;
    post(&rt.url, Some("00-not-a-trace-01"), "m-2").await;
    let log = fake.requests();
    let traces: Vec<String> = log
        .iter()
        .map(|r| ids(r.traceparent.as_deref().expect("a traceparent")).0)
        .collect();
    assert_eq!(traces.len(), 2);
    assert_ne!(traces[0], traces[1], "each turn is its own trace");
    for trace in &traces {
        assert_eq!(trace.len(), 32);
        assert_ne!(trace, TRACE);
        assert_ne!(trace, &"0".repeat(32));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_send_message_continues_the_callers_trace() {
    install_tracing();
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    fake.script([Reply::Text("hello".into())]);
    let rt = runtime(&fake, "{}", "  a: { instruction: Hi. }\n").await;
    let client =
        connect_with_headers(&rt.mcp("a"), &[("traceparent", &caller_traceparent())]).await;
    let result = call(&client, "send_message", json!({"message": "hi"})).await;
    assert_eq!(result.is_error, Some(false));
    let log = fake.requests();
    let (trace, span) = ids(log[0].traceparent.as_deref().expect("a traceparent"));
    assert_eq!(trace, TRACE);
    assert_ne!(span, CALLER_SPAN);
}

/// On MCP 2026-07-28 the trace rides in the request's `_meta`: the turn joins it as it joins
/// the header, and the hop to a downstream MCP server carries it on (in `_meta` and as the
/// header), with spans of the runtime's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_call_continues_the_trace_in_its_meta_across_the_hop() {
    install_tracing();
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fx__add".into(), json!({"a": 1, "b": 2}))]),
        Reply::Text("3".into()),
    ]);
    let servers = format!("    fx: {{ url: \"{}\" }}\n", fx.url());
    let rt = runtime(
        &fake,
        &servers,
        "  a: { instruction: Add., servers: [fx] }\n",
    )
    .await;
    let client = ModernClient::named("tracer").in_trace(caller_traceparent());
    let answer = modern_mcp_request(
        &reqwest::Client::new(),
        &rt.mcp("a"),
        &client,
        "tools/call",
        json!({"name": "send_message", "arguments": {"message": "add"}}),
    )
    .await;
    assert_eq!(answer["result"]["content"][0]["text"], "3", "{answer}");
    let log = fake.requests();
    for request in &log {
        let (trace, span) = ids(request.traceparent.as_deref().expect("a traceparent"));
        assert_eq!(trace, TRACE);
        assert_ne!(span, CALLER_SPAN);
    }
    let calls = fx.calls();
    let hop = calls[0]
        .meta_traceparent
        .as_deref()
        .expect("_meta.traceparent");
    assert_eq!(
        ids(hop).0,
        TRACE,
        "the downstream call is in the caller's trace"
    );
    assert_eq!(calls[0].traceparent.as_deref(), Some(hop));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_health_probes_carry_the_callers_trace() {
    install_tracing();
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-trace"]).await;
    let rt = runtime(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  a: { instruction: Hi., servers: [fx] }\n",
    )
    .await;
    let client =
        connect_with_headers(&rt.mcp("a"), &[("traceparent", &caller_traceparent())]).await;
    let before = fx.traceparents("initialize").len();
    let report = call(&client, "get_health", json!({})).await;
    assert_eq!(report.is_error, Some(false));
    // The probe is an `initialize` of its own; the warm-up's came before it, without a trace.
    let probes = fx.traceparents("initialize");
    let traced: Vec<String> = probes[before..]
        .iter()
        .flatten()
        .map(|tp| ids(tp).0)
        .collect();
    assert_eq!(traced, [TRACE], "{probes:?}");
}
