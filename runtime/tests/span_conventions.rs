//! The spans the runtime exports keep to the OpenTelemetry conventions for A2A and MCP (the
//! model files vendored in `test-kit/conventions/`): every A2A binding answers under a SERVER
//! span `{a2a.method.name}` in the caller's trace, with the request's message, task, state,
//! tenant and error; the MCP face answers under `{mcp.method.name} {target}`, with the session
//! only where there is one; the turn is `invoke_agent <agent>`, INTERNAL, a child of the
//! request's span. A real runtime binary exports over OTLP to an in-test receiver.

mod support;

use std::time::Duration;

use daedalus_test_kit::{Conventions, ModernClient, OtlpReceiver, ReceivedSpan, SpanKind};
use serde_json::{Value, json};
use support::process::{Runtime, runtime};

const TRACE: &str = "7bf92f3577b34da6a3ce929d0e0e4731";
const CALLER_SPAN: &str = "01f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE}-{CALLER_SPAN}-01")
}

/// A runtime exporting every span to `receiver`, flushed at its exit.
fn exporting(receiver: &OtlpReceiver) -> Runtime {
    runtime()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .start()
}

/// Stops `rt` and answers every span it exported.
fn spans_at_exit(mut rt: Runtime, receiver: &OtlpReceiver) -> Vec<ReceivedSpan> {
    rt.signal("TERM");
    assert_eq!(rt.wait_exit(Duration::from_secs(10)).code(), Some(0));
    receiver.spans()
}

fn message(id: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}]})
}

/// A JSON-RPC request of `method` in the caller's trace; its answer.
async fn json_rpc(rt: &Runtime, method: &str, params: Value, version: Option<&str>) -> Value {
    let mut request = reqwest::Client::new()
        .post(rt.url("/"))
        .header("traceparent", traceparent());
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("sent");
    let text = response.text().await.expect("a body");
    serde_json::from_str(&text).unwrap_or_else(|_| json!({ "stream": text }))
}

/// The one span of `spans` whose attribute `key` is `value` and whose name is `name`.
fn the<'a>(spans: &'a [ReceivedSpan], name: &str, key: &str, value: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == name && s.attribute(key) == Some(value))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {name:?} span with {key}={value}: {spans:#?}"
    );
    found[0]
}

/// The turn span under `request`.
fn turn_under<'a>(spans: &'a [ReceivedSpan], request: &ReceivedSpan) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|s| s.name == "invoke_agent proc-test" && s.parent_span_id == request.span_id)
        .unwrap_or_else(|| panic!("no turn under {}: {spans:#?}", request.name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_a2a_binding_answers_under_a_server_span_of_the_conventions() {
    let receiver = OtlpReceiver::start().await;
    let rt = exporting(&receiver);
    let http = reqwest::Client::new();

    // JSON-RPC v1, blocking and streamed; an unknown task; v0.3.
    let sent = json_rpc(
        &rt,
        "SendMessage",
        json!({"message": message("m-jsonrpc")}),
        Some("1.0"),
    )
    .await;
    let task_id = sent["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    json_rpc(
        &rt,
        "SendStreamingMessage",
        json!({"message": message("m-stream")}),
        Some("1.0"),
    )
    .await;
    let missing = json_rpc(&rt, "GetTask", json!({"id": "no-such-task"}), Some("1.0")).await;
    let code = missing["error"]["code"].as_i64().expect("an error");
    json_rpc(&rt, "message/send", json!({"message": {"messageId": "m-v03", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "hi"}]}}), None).await;
    json_rpc(&rt, "GetTask", json!({"id": task_id}), Some("1.0")).await;

    // HTTP+JSON, in a tenant; an unknown task.
    let rest = http
        .post(rt.url("/a2a/rest/acme/message:send"))
        .header("traceparent", traceparent())
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("m-rest")}))
        .send()
        .await
        .expect("sent");
    assert_eq!(rest.status(), 200);
    let absent = http
        .get(rt.url("/a2a/rest/tasks/no-such-rest-task"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .expect("sent");
    assert_eq!(absent.status(), 404);

    // gRPC.
    let mut grpc = support::grpc::connect(&rt.url("")).await;
    let mut call = support::grpc::call(support::grpc::send("m-grpc", "hi"));
    call.metadata_mut()
        .insert("traceparent", traceparent().parse().expect("ascii"));
    grpc.send_message(call).await.expect("answered");

    // The contract's `POST /`.
    let contract = http
        .post(rt.url("/"))
        .header("traceparent", traceparent())
        .json(&json!({"message": {"messageId": "m-contract", "role": "user", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .expect("sent");
    assert_eq!(contract.status(), 200);

    let spans = spans_at_exit(rt, &receiver);
    Conventions::load().assert_kept_by(&spans);

    for (message_id, version) in [
        ("m-jsonrpc", Some("1.0")),
        ("m-rest", Some("1.0")),
        ("m-grpc", Some("1.0")),
        ("m-v03", Some("0.3")),
        ("m-contract", None),
    ] {
        let request = the(&spans, "SendMessage", "a2a.message.id", message_id);
        assert_eq!(request.kind, SpanKind::Server, "{message_id}");
        assert_eq!(
            request.trace_id, TRACE,
            "{message_id}: in the caller's trace"
        );
        assert_eq!(request.parent_span_id, CALLER_SPAN, "{message_id}");
        assert_eq!(
            request.attribute("a2a.protocol.version"),
            version,
            "{message_id}"
        );
        assert_eq!(
            request.attribute("a2a.task.state"),
            Some("TASK_STATE_COMPLETED"),
            "{message_id}"
        );
        assert_eq!(
            request.attribute("gen_ai.agent.name"),
            Some("proc-test"),
            "{message_id}: the card's name"
        );
        let task = request.attribute("a2a.task.id").expect("the task");
        let turn = turn_under(&spans, request);
        assert_eq!(
            turn.kind,
            SpanKind::Internal,
            "the agent runs in this process"
        );
        assert_eq!(
            turn.attribute("gen_ai.operation.name"),
            Some("invoke_agent")
        );
        assert_eq!(
            turn.attribute("gen_ai.conversation.id"),
            request.attribute("gen_ai.conversation.id"),
            "{message_id}: one context, named on both"
        );
        assert!(!task.is_empty());
    }
    let first = the(&spans, "SendMessage", "a2a.message.id", "m-jsonrpc");
    assert_eq!(first.attribute("a2a.task.id"), Some(task_id.as_str()));
    assert_eq!(
        the(&spans, "SendMessage", "a2a.message.id", "m-rest").attribute("a2a.tenant"),
        Some("acme")
    );

    let stream = the(&spans, "SendStreamingMessage", "a2a.message.id", "m-stream");
    assert_eq!(
        stream.attribute("a2a.task.state"),
        Some("TASK_STATE_COMPLETED"),
        "the stream's last state"
    );
    turn_under(&spans, stream);

    let unknown = the(&spans, "GetTask", "a2a.task.id", "no-such-task");
    assert_eq!(
        unknown.attribute("error.type"),
        Some(code.to_string().as_str()),
        "the JSON-RPC code"
    );
    assert!(unknown.failed);
    let found = the(&spans, "GetTask", "a2a.task.id", &task_id);
    assert_eq!(
        found.attribute("a2a.task.state"),
        Some("TASK_STATE_COMPLETED")
    );
    assert!(!found.failed && found.attribute("error.type").is_none());
    let rest_missing = the(&spans, "GetTask", "a2a.task.id", "no-such-rest-task");
    assert_eq!(
        rest_missing.attribute("error.type"),
        Some("404"),
        "the HTTP+JSON refusal, by its status"
    );
    assert_eq!(rest_missing.parent_span_id, "", "no caller's trace: a root");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_face_answers_under_server_spans_of_the_conventions() {
    let receiver = OtlpReceiver::start().await;
    let rt = exporting(&receiver);
    let url = rt.url("/agents/proc-test/mcp");
    let http = reqwest::Client::new();

    // MCP 2026-07-28: no session; the trace in `_meta`.
    let client = ModernClient::named("spans").in_trace(traceparent());
    let answer = daedalus_test_kit::modern_mcp_request(
        &http,
        &url,
        &client,
        "tools/call",
        json!({"name": "send_message", "arguments": {"message": "hi"}}),
    )
    .await;
    assert!(answer["result"].is_object(), "{answer}");
    let unknown_tool = daedalus_test_kit::modern_mcp_request(
        &http,
        &url,
        &client,
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    )
    .await;
    assert!(unknown_tool["error"].is_object(), "{unknown_tool}");

    // A legacy session: `initialize`, then `tools/list` in it.
    let opened = daedalus_test_kit::open_mcp_session(&http, &url, true).await;
    let session = opened.session.expect("a session");
    let listed = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .header("traceparent", traceparent())
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}))
        .send()
        .await
        .expect("sent");
    assert_eq!(listed.status(), 200);
    listed.text().await.expect("the list");

    let spans = spans_at_exit(rt, &receiver);
    Conventions::load().assert_kept_by(&spans);

    let calls: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == "tools/call send_message")
        .collect();
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call = calls[0];
    assert_eq!(call.kind, SpanKind::Server);
    assert_eq!(
        call.parent_span_id, CALLER_SPAN,
        "the trace in `_meta` continued"
    );
    assert_eq!(call.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(
        call.attribute("gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(call.attribute("mcp.protocol.version"), Some("2026-07-28"));
    assert_eq!(call.attribute("jsonrpc.request.id"), Some("1"));
    assert_eq!(
        call.attribute("mcp.session.id"),
        None,
        "2026-07-28 has no session"
    );
    let turn = turn_under(&spans, call);
    assert_eq!(turn.kind, SpanKind::Internal);

    let refused = spans
        .iter()
        .find(|s| s.name == "tools/call no_such_tool")
        .expect("the unknown tool's span");
    assert_eq!(
        refused.attribute("rpc.response.status_code"),
        Some("-32602")
    );
    assert_eq!(
        refused.attribute("error.type"),
        None,
        "the caller's mistake is not the server's error"
    );

    let list = spans
        .iter()
        .find(|s| s.name == "tools/list" && s.attribute("jsonrpc.request.id") == Some("7"))
        .expect("the session's tools/list");
    assert_eq!(list.attribute("mcp.session.id"), Some(session.as_str()));
    assert_eq!(list.attribute("mcp.protocol.version"), Some("2025-06-18"));
    assert_eq!(list.parent_span_id, CALLER_SPAN);
    assert!(
        spans
            .iter()
            .any(|s| s.name == "initialize" && s.kind == SpanKind::Server)
    );
}
