//! Spans leave the runtime over OTLP (http/protobuf, or gRPC) when `OTEL_EXPORTER_OTLP_ENDPOINT` is set:
//! an in-test receiver decodes what the real binary sends. The batch delay is set far beyond
//! the test, so the spans arriving at all proves the flush at shutdown.

mod support;

use std::time::Duration;

use daedalus_test_kit::{OtlpReceiver, ReceivedSpan};
use serde_json::json;
use support::process::{Runtime, runtime};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// POSTs a task with the caller's `traceparent`; the answer's status.
async fn post_in_the_callers_trace(rt: &Runtime, message_id: &str) -> u16 {
    reqwest::Client::new()
        .post(rt.url("/"))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"message": {"messageId": message_id, "role": "user", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .expect("sent")
        .status()
        .as_u16()
}

/// The exported span of the runtime's turn.
fn turn_span(receiver: &OtlpReceiver) -> ReceivedSpan {
    let exported = receiver.spans();
    exported
        .into_iter()
        .find(|s| s.name == "invoke_agent proc-test")
        .unwrap_or_else(|| panic!("the turn's span was exported: {:?}", receiver.spans()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_s_span_is_exported_in_the_callers_trace_and_flushed_at_shutdown() {
    let receiver = OtlpReceiver::start().await;
    let mut rt = runtime()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_SERVICE_NAME", "otlp-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .start();
    assert_eq!(post_in_the_callers_trace(&rt, "m-otlp").await, 200);
    assert!(receiver.spans().is_empty(), "nothing before the flush");
    rt.signal("TERM");
    assert_eq!(rt.wait_exit(Duration::from_secs(10)).code(), Some(0));

    let turn = turn_span(&receiver);
    assert_eq!(turn.trace_id, TRACE);
    // The turn runs in the request's span (the A2A conventions' SERVER span of the send),
    // which is a child of the caller's.
    let request = receiver
        .spans()
        .into_iter()
        .find(|s| s.span_id == turn.parent_span_id)
        .expect("the turn's parent was exported");
    assert_eq!(request.name, "SendMessage");
    assert_eq!(
        request.parent_span_id, CALLER_SPAN,
        "a child of the caller's span"
    );
    assert_ne!(turn.span_id, CALLER_SPAN);
    assert_eq!(turn.service, "otlp-test");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_one_warning_and_no_task() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let mut rt = runtime()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &closed)
        .env("OTEL_BSP_SCHEDULE_DELAY", "20")
        .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
        .start();
    let client = reqwest::Client::new();
    for i in 0..20 {
        let response = client
            .post(rt.url("/"))
            .json(&json!({"message": {"messageId": format!("m-{i}"), "role": "user", "parts": [{"text": "hi"}]}}))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200, "task {i} was answered");
    }
    rt.signal("TERM");
    assert_eq!(rt.wait_exit(Duration::from_secs(20)).code(), Some(0));
    let logs = rt.drain_logs();
    let warnings: Vec<_> = logs
        .iter()
        .filter(|l| l["level"] == "WARN" && l["target"] == "daedalus_contract::telemetry")
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning for many failed batches: {warnings:?}"
    );
    assert!(
        !warnings[0].to_string().contains(&closed),
        "the endpoint stays out of the log line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_over_grpc_when_the_protocol_says_so() {
    let receiver = OtlpReceiver::start().await;
    let mut rt = runtime()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_SERVICE_NAME", "otlp-grpc-test")
        .start();
    assert_eq!(post_in_the_callers_trace(&rt, "m-grpc").await, 200);
    rt.signal("TERM");
    assert_eq!(rt.wait_exit(Duration::from_secs(10)).code(), Some(0));

    let turn = turn_span(&receiver);
    assert_eq!(turn.trace_id, TRACE);
    assert_eq!(turn.service, "otlp-grpc-test");
    let logs = rt.drain_logs();
    assert!(
        !logs.iter().any(|l| l["level"] == "WARN"),
        "the gRPC export succeeded without a warning: {logs:?}"
    );
}
