//! Spans leave the runtime over OTLP (http/protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` is set:
//! an in-test receiver decodes what the real binary sends. The batch delay is set far beyond
//! the test, so the spans arriving at all proves the flush at shutdown.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::json;
use support::process::runtime;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A span as received: its name, ids (hex) and the service that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// An OTLP/HTTP receiver: `POST /v1/traces` with a protobuf body.
async fn receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
    let store = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let store = Arc::clone(&store);
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut store = store.lock().expect("lock");
                for resource_spans in request.resource_spans {
                    let service = resource_spans
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref())
                        .and_then(|v| match &v.value {
                            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => Some(s.clone()),
                            _ => None,
                        })
                        .unwrap_or_default();
                    for scope in resource_spans.scope_spans {
                        for span in scope.spans {
                            store.push(Received {
                                service: service.clone(),
                                name: span.name,
                                trace_id: hex(&span.trace_id),
                                span_id: hex(&span.span_id),
                                parent_span_id: hex(&span.parent_span_id),
                            });
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, spans)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_s_span_is_exported_in_the_callers_trace_and_flushed_at_shutdown() {
    let (endpoint, spans) = receiver().await;
    let mut rt = runtime()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "otlp-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .start();
    let response = reqwest::Client::new()
        .post(rt.url("/"))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(
            &json!({"message": {"messageId": "m-otlp", "role": "user", "parts": [{"text": "hi"}]}}),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    assert!(
        spans.lock().expect("lock").is_empty(),
        "nothing before the flush"
    );
    rt.signal("TERM");
    assert_eq!(rt.wait_exit(Duration::from_secs(10)).code(), Some(0));

    let received = spans.lock().expect("lock").clone();
    let turn = received
        .iter()
        .find(|s| s.name == "invoke_agent proc-test")
        .unwrap_or_else(|| panic!("the turn's span was exported: {received:?}"));
    assert_eq!(turn.trace_id, TRACE);
    assert_eq!(
        turn.parent_span_id, CALLER_SPAN,
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
        .filter(|l| l["level"] == "WARN" && l["target"] == "daedalus_runtime::telemetry")
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
