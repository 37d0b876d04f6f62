//! The MCP conventions (`model/mcp`): a SERVER span per request the MCP face answers, named
//! `{mcp.method.name} {target}` (the tool or the prompt, when the request names one), and the
//! MCP attributes of a call to a downstream server's tool, which go on the call's
//! `execute_tool` span: the conventions ask an MCP client already inside a GenAI tool span to
//! add to it, not to open a second one.
//!
//! `mcp.session.id` is set only where there is a session (a revision before 2026-07-28, whose
//! `Mcp-Session-Id` names it); `jsonrpc.request.id` is the request's id as sent.

use tracing::field::Empty;

/// `tools/call`: the method whose spans are also GenAI `execute_tool` operations.
pub const TOOLS_CALL: &str = "tools/call";
/// `prompts/get`: the method whose target is a prompt.
pub const PROMPTS_GET: &str = "prompts/get";

/// What an MCP request says before it is answered.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpRequest<'a> {
    pub method: &'a str,
    /// The tool (`tools/call`) or the prompt (`prompts/get`) the request names.
    pub target: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
    pub session_id: Option<&'a str>,
}

/// The SERVER span of one request the MCP face answers; the caller's trace is continued by
/// the face ([`super::continue_trace`]).
pub fn server_span(request: &McpRequest<'_>) -> tracing::Span {
    let name = match request.target {
        Some(target) => format!("{} {target}", request.method),
        None => request.method.to_owned(),
    };
    let span = tracing::info_span!(
        "mcp",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = request.method,
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        jsonrpc.request.id = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        network.transport = "tcp",
        network.protocol.name = "http",
        trace_id = Empty,
        span_id = Empty,
    );
    match (request.method, request.target) {
        (TOOLS_CALL, Some(tool)) => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", tool);
        }
        (PROMPTS_GET, Some(prompt)) => {
            span.record("gen_ai.prompt.name", prompt);
        }
        _ => {}
    }
    if let Some(version) = request.protocol_version {
        span.record("mcp.protocol.version", version);
    }
    record_sent(&span, request.request_id, request.session_id);
    span
}

/// A downstream tool call, on its `execute_tool` span (which names the tool already): the
/// method and the revision its connection speaks.
pub fn record_tool_call(span: &tracing::Span, protocol_version: Option<&str>) {
    span.record("mcp.method.name", TOOLS_CALL);
    if let Some(version) = protocol_version {
        span.record("mcp.protocol.version", version);
    }
}

/// The JSON-RPC id a request went with, and its session (where there is one).
pub fn record_sent(span: &tracing::Span, request_id: Option<&str>, session_id: Option<&str>) {
    if let Some(id) = request_id {
        span.record("jsonrpc.request.id", id);
    }
    if let Some(session) = session_id.filter(|s| !s.is_empty()) {
        span.record("mcp.session.id", session);
    }
}

/// A JSON-RPC error answer: its code is both `rpc.response.status_code` and, when the code is
/// an error of the server's (the conventions count the caller's own mistakes, `-32700`,
/// `-32600`, `-32601`, `-32602` and `-32002`, as answers), `error.type`.
pub fn record_rpc_error(span: &tracing::Span, code: i32, on_server: bool) {
    let code_text = code.to_string();
    span.record("rpc.response.status_code", code_text.as_str());
    let callers_mistake = matches!(code, -32700 | -32600 | -32601 | -32602 | -32002);
    if !on_server || !callers_mistake {
        super::record_error(span, &code_text);
    }
}

/// A `CallToolResult` with `isError`: `error.type` is `tool_error`.
pub fn record_tool_error(span: &tracing::Span) {
    super::record_error(span, "tool_error");
}
