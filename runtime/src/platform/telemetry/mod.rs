//! Trace context and export: the contract crate's [`daedalus_contract::telemetry`], which the
//! proxy shares; and the spans the runtime opens, named and attributed as the OpenTelemetry
//! conventions for GenAI, A2A and MCP say (`open-telemetry/semantic-conventions-genai`, status
//! Development; the model files the tests hold the spans to are vendored in
//! `test-kit/conventions/`).
//!
//! - [`a2a`]: a SERVER span `{a2a.method.name}` per request on every A2A binding (JSON-RPC,
//!   HTTP+JSON, gRPC, the contract's `POST /`), and a CLIENT span per call to an A2A agent used
//!   as a tool;
//! - [`mcp`]: a SERVER span `{mcp.method.name} {target}` per request on the MCP face, and the
//!   MCP attributes of a downstream tool call on its `execute_tool` span;
//! - the turn service's `invoke_agent <agent>` (INTERNAL: the agent runs in this process), the
//!   agent loop's `chat <model>` per model call and `execute_tool <tool>` per tool call, and an
//!   `invoke_agent <agent>` CLIENT span around a call to another agent.

pub mod a2a;
pub mod mcp;

pub use daedalus_contract::telemetry::*;

/// Marks `span` failed: `error.type` (a low-cardinality name: a JSON-RPC code, a status
/// code, `tool_error`) and the span's status.
pub fn record_error(span: &tracing::Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
}

/// Records `server.address` and `server.port` of `url` on `span`.
pub fn record_server(span: &tracing::Span, url: &str) {
    if let Some((host, port)) = address_of(url) {
        span.record("server.address", host.as_str());
        // An integer, as the conventions type it (a `u16` field would be exported as text).
        span.record("server.port", i64::from(port));
    }
}
