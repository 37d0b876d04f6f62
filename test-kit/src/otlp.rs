//! An OTLP trace receiver on one port, for both protocols: OTLP/HTTP (`POST /v1/traces`, a
//! protobuf body) and OTLP/gRPC (the `TraceService/Export` call over HTTP/2, answered with a
//! gRPC frame and `grpc-status` trailers). What arrives is decoded and kept.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;

/// One span as received, ids in hex.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// The `service.name` of the resource that sent it.
    pub service: String,
    pub name: String,
    pub kind: SpanKind,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// Whether its status is `ERROR`.
    pub failed: bool,
    /// Scalar attributes as text, by key (an array is left out).
    pub attributes: Vec<(String, String)>,
    /// Every attribute with its type.
    pub values: Vec<(String, Value)>,
}

/// A span's kind, as OTLP sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Unspecified,
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
}

impl SpanKind {
    fn of(code: i32) -> Self {
        match code {
            1 => Self::Internal,
            2 => Self::Server,
            3 => Self::Client,
            4 => Self::Producer,
            5 => Self::Consumer,
            _ => Self::Unspecified,
        }
    }

    /// Its name in the conventions' model files (`server`, `client`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Internal => "internal",
            Self::Server => "server",
            Self::Client => "client",
            Self::Producer => "producer",
            Self::Consumer => "consumer",
        }
    }
}

/// An attribute's value, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
    /// An array; `None` for an element that is not a string.
    StrArray(Vec<Option<String>>),
    Other,
}

fn typed(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Value {
    match value.and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => Value::Str(s.clone()),
        Some(AnyValue::IntValue(i)) => Value::Int(*i),
        Some(AnyValue::BoolValue(b)) => Value::Bool(*b),
        Some(AnyValue::DoubleValue(d)) => Value::Double(*d),
        Some(AnyValue::ArrayValue(array)) => Value::StrArray(
            array
                .values
                .iter()
                .map(|v| match v.value.as_ref() {
                    Some(AnyValue::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
        ),
        _ => Value::Other,
    }
}

impl ReceivedSpan {
    /// The string attribute `key`, if the span has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A receiver listening on a free port; point `OTEL_EXPORTER_OTLP_ENDPOINT` at [`Self::url`].
#[derive(Debug)]
pub struct OtlpReceiver {
    url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Option<String> {
    match value?.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

fn decode(body: &Bytes) -> Vec<ReceivedSpan> {
    let request = ExportTraceServiceRequest::decode(body.clone()).expect("an OTLP protobuf body");
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            let failed = span.status.as_ref().is_some_and(|s| s.code == 2);
            out.push(ReceivedSpan {
                service: service.clone(),
                name: span.name,
                kind: SpanKind::of(span.kind),
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                failed,
                values: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), typed(kv.value.as_ref())))
                    .collect(),
                attributes: span
                    .attributes
                    .iter()
                    .filter_map(|kv| Some((kv.key.clone(), text(kv.value.as_ref())?)))
                    .collect(),
            });
        }
    }
    out
}

/// The gRPC method an OTLP/gRPC exporter calls.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// A gRPC message frame's header: a compression flag byte, then the length (big endian).
const GRPC_FRAME_HEADER: usize = 5;

/// The message of one uncompressed gRPC frame.
fn grpc_message(body: &Bytes) -> Bytes {
    assert!(body.len() >= GRPC_FRAME_HEADER, "a gRPC frame");
    assert_eq!(body[0], 0, "an uncompressed gRPC message");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.slice(GRPC_FRAME_HEADER..GRPC_FRAME_HEADER + len)
}

/// An OK gRPC answer: one empty `ExportTraceServiceResponse`, then `grpc-status: 0`.
fn grpc_ok() -> axum::response::Response {
    use http_body_util::StreamBody;
    use hyper::body::Frame;
    let mut trailers = axum::http::HeaderMap::new();
    trailers.insert("grpc-status", axum::http::HeaderValue::from_static("0"));
    let frames = futures::stream::iter([
        Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]))),
        Ok(Frame::trailers(trailers)),
    ]);
    axum::response::Response::builder()
        .header("content-type", "application/grpc")
        .body(axum::body::Body::new(StreamBody::new(frames)))
        .expect("a gRPC response")
}

impl OtlpReceiver {
    pub async fn start() -> Self {
        let spans: Arc<Mutex<Vec<ReceivedSpan>>> = Arc::default();
        let http = Arc::clone(&spans);
        let grpc = Arc::clone(&spans);
        let app = axum::Router::new()
            .route(
                "/v1/traces",
                axum::routing::post(move |body: Bytes| {
                    let store = Arc::clone(&http);
                    async move {
                        let decoded = decode(&body);
                        store.lock().expect("lock").extend(decoded);
                        axum::http::StatusCode::OK
                    }
                }),
            )
            .route(
                GRPC_EXPORT,
                axum::routing::post(move |body: Bytes| {
                    let store = Arc::clone(&grpc);
                    async move {
                        let decoded = decode(&grpc_message(&body));
                        store.lock().expect("lock").extend(decoded);
                        grpc_ok()
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, spans }
    }

    /// `http://127.0.0.1:<port>` (an HTTP exporter appends `/v1/traces`; a gRPC one calls
    /// `TraceService/Export` there).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("lock").clone()
    }
}
