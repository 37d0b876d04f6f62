//! What an MCP call's request says about its caller: the protocol revision, the MCP session
//! (legacy revisions only), the bearer token, the trace, and so the conversation the call
//! continues.

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

use super::Face;
use crate::platform::bearer::Bearer;
use crate::platform::identity::Caller;
use crate::platform::telemetry::TraceHeaders;
use crate::services::turns::{ConversationKey, Memory, Origin};

/// The caller's HTTP request, as rmcp hands it to handlers.
fn parts(context: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    context.extensions.get::<http::request::Parts>()
}

/// The MCP session of the call, if the client has one.
pub(super) fn session_id(context: &RequestContext<RoleServer>) -> Option<&str> {
    parts(context)?
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
}

/// The caller's bearer token, for downstream servers that opted into forwarding.
pub(super) fn bearer(context: &RequestContext<RoleServer>) -> Bearer {
    parts(context).map_or_else(Bearer::default, |p| Bearer::of(&who(context), &p.headers))
}

/// Who is calling, as the endpoint's authentication decided (every request passes it).
pub(super) fn who(context: &RequestContext<RoleServer>) -> Caller {
    parts(context)
        .and_then(|p| p.extensions.get::<Caller>().cloned())
        .unwrap_or_default()
}

/// Whether the call speaks MCP 2026-07-28 or newer: stateless, every request carrying its
/// revision and capabilities in `_meta`, no session.
pub(super) fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The caller's W3C trace: the HTTP headers, else the request's `_meta` (`traceparent`,
/// `tracestate`, as MCP 2026-07-28 carries them).
pub(super) fn trace(context: &RequestContext<RoleServer>) -> TraceHeaders {
    let headers = parts(context).map_or_else(TraceHeaders::default, |p| {
        TraceHeaders::from_headers(&p.headers)
    });
    if headers.traceparent.is_some() {
        return headers;
    }
    let text = |key: &str| {
        context
            .meta
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    match text("traceparent") {
        Some(traceparent) => TraceHeaders {
            traceparent: Some(traceparent),
            tracestate: text("tracestate"),
        },
        None => headers,
    }
}

/// The conversation a call continues (the turn service's rule: by the agent's
/// `instance_scope`, the session, and who is calling).
pub(super) fn conversation(
    face: &Face,
    context: &RequestContext<RoleServer>,
) -> Option<ConversationKey> {
    ConversationKey::of_mcp_call(
        face.name(),
        face.scope(),
        session_id(context),
        &who(context),
    )
}

/// Who asks, and from where: the caller, its bearer token, its trace.
pub(super) fn origin(context: &RequestContext<RoleServer>) -> Origin {
    Origin {
        caller: who(context),
        bearer: bearer(context),
        // The face's span for the request ([`super::traced`]), so the turn is its child.
        trace: crate::platform::telemetry::TraceHeaders::current_or(trace(context)),
    }
}

/// What the turn service keeps for a call of `face`.
pub(super) fn memory(face: &Face, context: &RequestContext<RoleServer>) -> Memory {
    conversation(face, context).map_or(Memory::None, Memory::Conversation)
}
