//! Trace context, shared by the binaries: each continues its caller's W3C trace
//! (`traceparent`, `tracestate`) and hands it on.
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
//!
//! Export: when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set,
//! spans go to it over OTLP through a batch processor (its queue is bounded and its thread is
//! its own, so a collector that is down never slows a turn; what is queued is flushed at
//! shutdown). The standard variables apply: `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
//! default, or `grpc`), `..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`,
//! `OTEL_BSP_*`. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn export off. With
//! no endpoint nothing is exported, and nothing is paid for it but the span ids.

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

impl TraceHeaders {
    /// The current span's trace context when it has one, else `fallback` (the caller's):
    /// what a face hands the turn it starts, so the turn's span is a child of the face's
    /// span for the request, and still of the caller's when no span is exported.
    pub fn current_or(fallback: Self) -> Self {
        let headers = current_headers();
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        match text("traceparent") {
            Some(traceparent) => Self {
                traceparent: Some(traceparent),
                tracestate: text("tracestate"),
            },
            None => fallback,
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

/// How long the last export may take at shutdown.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The runtime's tracer provider; [`Telemetry::shutdown`] flushes what it holds.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    /// Set while exports fail (the failure was logged already).
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Telemetry {
    /// Flushes and stops the provider (at the end of `main`), within a few seconds.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(FLUSH_TIMEOUT) {
            if self.failing.load(std::sync::atomic::Ordering::Acquire) {
                tracing::debug!(error = %e, "the last spans could not be exported");
            } else {
                tracing::warn!(error = %e, "the tracer provider did not shut down cleanly");
            }
        }
    }
}

/// Why trace export could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the OTLP trace exporter")]
pub struct TelemetryError(#[source] opentelemetry_otlp::ExporterBuildError);

/// Whether spans are exported, by the standard variables (`env` reads one).
pub fn exports(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |key: &str| env(key).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The layer the global subscriber gets.
pub type TraceLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The OpenTelemetry layer for the global subscriber, over the spans of `crate_name` (its
/// target, `daedalus_runtime`), and the provider behind it; exporting over OTLP when the
/// environment asks for it. `service_name` is the default `service.name`. Call it inside a
/// Tokio runtime (the gRPC exporter needs one).
pub fn init(
    service_name: &'static str,
    crate_name: &'static str,
) -> Result<(Telemetry, TraceLayer), TelemetryError> {
    let env = |key: &str| std::env::var(key).ok();
    let named = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    let mut resource = opentelemetry_sdk::Resource::builder();
    if !named {
        resource = resource.with_service_name(service_name.to_owned());
    }
    let mut provider = SdkTracerProvider::builder().with_resource(resource.build());
    let failing = std::sync::Arc::default();
    if exports(&env) {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .build()
            .map_err(TelemetryError)?;
        provider = provider.with_batch_exporter(WarnOnce {
            inner: exporter,
            failing: std::sync::Arc::clone(&failing),
        });
    }
    let provider = provider.build();
    let tracer = provider.tracer(service_name);
    // Spans only (log lines stay log lines, not span events), and none of the per-span extras
    // (source location, thread, busy/idle time): each costs bytes and time on every turn.
    let ours = Targets::new().with_target(crate_name, tracing::Level::INFO);
    let spans_only = tracing_subscriber::filter::filter_fn(move |meta| {
        meta.is_span() && ours.would_enable(meta.target(), meta.level())
    });
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_level(false)
        .with_target(false)
        .with_filter(spans_only)
        .boxed();
    Ok((Telemetry { provider, failing }, layer))
}

/// A span exporter that logs its first failure once, not every batch: a collector that is down
/// costs one warning (and one line when it is back), never a line per span.
#[derive(Debug)]
struct WarnOnce<E> {
    inner: E,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for WarnOnce<E>
{
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        use std::sync::atomic::Ordering;
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Err(e) if !self.failing.swap(true, Ordering::AcqRel) => {
                let error = crate::redact::redact_text(&e.to_string());
                tracing::warn!(
                    spans,
                    %error,
                    "cannot export traces over OTLP; spans are dropped until the collector answers (logged once)"
                );
            }
            Ok(()) if self.failing.swap(false, Ordering::AcqRel) => {
                tracing::info!("exporting traces over OTLP again");
            }
            _ => {}
        }
        result
    }

    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
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

/// The host and port of `url` (the port its scheme implies when it names none), for a span's
/// `server.address` and `server.port`; never its userinfo, path or query.
pub fn address_of(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })?;
    Some((host.to_owned(), port))
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

#[cfg(test)]
mod tests {
    use super::{address_of, exports};

    #[test]
    fn a_urls_address_is_its_host_and_port_never_its_userinfo_or_query() {
        assert_eq!(
            address_of("http://user:secret@agent.example:8080/a2a?key=k"),
            Some(("agent.example".to_owned(), 8080))
        );
        assert_eq!(
            address_of("https://agent.example/"),
            Some(("agent.example".to_owned(), 443))
        );
        assert_eq!(address_of("http://[::1]:9/"), Some(("::1".to_owned(), 9)));
        assert_eq!(address_of("not a url"), None);
    }

    #[test]
    fn export_follows_the_standard_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(!exports(&env(&[])));
        assert!(exports(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://c:4318"
        )])));
        assert!(exports(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c/v1/traces"
        )])));
        assert!(!exports(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!exports(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ])));
        assert!(!exports(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])));
    }
}
