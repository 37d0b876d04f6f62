//! Every request the MCP face answers runs under a SERVER span of the MCP conventions
//! ([`crate::platform::telemetry::mcp`]): `{mcp.method.name} {target}` (`tools/call
//! send_message`, `prompts/get <agent>_history`, `tools/list`), in the caller's trace (its
//! `traceparent` header, or the request's `_meta`), with the session (legacy revisions), the
//! protocol version and the JSON-RPC id. An error answer sets `rpc.response.status_code`; a
//! tool result with `isError` sets `error.type` `tool_error`. The turn a `send_message`
//! starts is a child of the span ([`super::caller::origin`]).

use rmcp::model::{CallToolResponse, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tracing::Instrument as _;

use super::caller;
use crate::platform::telemetry::mcp::{self, McpRequest};

/// The span of the `method` request of `context`, naming `target` (its tool or prompt).
pub(super) fn span(
    context: &RequestContext<RoleServer>,
    method: &str,
    target: Option<&str>,
) -> tracing::Span {
    let request_id = context.id.to_string();
    let protocol = context.protocol_version();
    let span = mcp::server_span(&McpRequest {
        method,
        target,
        request_id: Some(&request_id),
        protocol_version: protocol.as_ref().map(ProtocolVersion::as_str),
        session_id: caller::session_id(context),
    });
    crate::platform::telemetry::continue_trace(&span, &caller::trace(context));
    span
}

/// Answers under `span`, which records an error answer's code. (The answer is boxed by the
/// caller: a handler's future is kilobytes.)
pub(super) async fn run<T>(
    span: tracing::Span,
    answer: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let answer = answer.instrument(span.clone()).await;
    if let Err(error) = &answer {
        mcp::record_rpc_error(&span, error.code.0, true);
    }
    answer
}

/// A tool's answer, on the current span (the request's): `tool_error` when it says it failed.
pub(super) fn tool_answered(response: &CallToolResponse) {
    if let CallToolResponse::Complete(result) = response
        && result.is_error == Some(true)
    {
        mcp::record_tool_error(&tracing::Span::current());
    }
}
