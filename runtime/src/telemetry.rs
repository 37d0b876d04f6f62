//! Trace context: the runtime continues its caller's W3C trace (`traceparent`, `tracestate`)
//! and hands it on.
//!
//! Spans are `tracing` spans; the OpenTelemetry layer ([`init`]) gives each one a trace and a
//! span id. A face passes the caller's headers ([`TraceHeaders`]) with its turn request; the turn
//! service opens the turn's span under them ([`continue_trace`]); the agent loop opens a child
//! span per LLM call and per tool call; and every outgoing request carries the current span as
//! its `traceparent` ([`inject_current`]). Each span the runtime opens records its `trace_id`
//! and `span_id` as fields, so JSON log lines written inside it carry them.
//!
//! Without [`init`] (a library user's own subscriber, most tests) spans have no ids and nothing
//! is propagated.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;

/// The W3C trace headers of an incoming request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceHeaders {
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl TraceHeaders {
    /// The trace headers among `headers` (names are case-insensitive there).
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Self {
            traceparent: text("traceparent"),
            tracestate: text("tracestate"),
        }
    }
}

impl Extractor for TraceHeaders {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent.as_deref(),
            "tracestate" => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        let mut keys = Vec::new();
        if self.traceparent.is_some() {
            keys.push("traceparent");
        }
        if self.tracestate.is_some() {
            keys.push("tracestate");
        }
        keys
    }
}

/// The runtime's tracer provider; [`Telemetry::shutdown`] flushes what it holds.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Flushes and stops the provider (at the end of `main`).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "the tracer provider did not shut down cleanly");
        }
    }
}

/// The OpenTelemetry layer for the global subscriber, over the runtime's own spans, and the
/// provider behind it.
pub fn init(
    service_name: &str,
) -> (
    Telemetry,
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>,
) {
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service_name.to_owned())
        .build();
    let provider = SdkTracerProvider::builder().with_resource(resource).build();
    let tracer = provider.tracer("daedalus-runtime");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target("daedalus_runtime", tracing::Level::INFO))
        .boxed();
    (Telemetry { provider }, layer)
}

/// Makes `span` a child of the trace in `headers` (or the root of a new trace when there is
/// none, or it is malformed), and records its ids.
pub fn continue_trace(span: &tracing::Span, headers: &TraceHeaders) {
    let parent = TraceContextPropagator::new().extract(headers);
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
    record_ids(span);
}

/// Records `span`'s `trace_id` and `span_id` fields (declared `Empty` when it was opened).
pub fn record_ids(span: &tracing::Span) {
    let context = span.context();
    let ids = context.span().span_context().clone();
    if ids.is_valid() {
        span.record("trace_id", tracing::field::display(ids.trace_id()));
        span.record("span_id", tracing::field::display(ids.span_id()));
    }
}

/// Adds the current span's `traceparent` (and `tracestate`) to `headers`.
pub fn inject_current(headers: &mut http::HeaderMap) {
    let context = tracing::Span::current().context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    }
}

/// The current span's trace headers, for a request built elsewhere.
pub fn current_headers() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    inject_current(&mut headers);
    headers
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}
