//! What an MCP call's HTTP request says about its caller: the MCP session, the bearer token,
//! and so the conversation the call continues.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::Face;
use crate::agent_loop::Bearer;
use crate::config::deployment::InstanceScope;
use crate::identity::Caller;
use crate::telemetry::TraceHeaders;
use crate::turns::{ConversationKey, Memory};

/// The caller's HTTP request, as rmcp hands it to handlers.
fn parts(context: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    context.extensions.get::<http::request::Parts>()
}

/// The MCP session of the call, if the client has one.
fn session_id(context: &RequestContext<RoleServer>) -> Option<&str> {
    parts(context)?
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
}

/// The caller's bearer token, for downstream servers that opted into forwarding.
pub(super) fn bearer(context: &RequestContext<RoleServer>) -> Bearer {
    parts(context).map_or_else(Bearer::default, |p| Bearer::from_headers(&p.headers))
}

/// Who is calling, as the endpoint's authentication decided (every request passes it).
pub(super) fn who(context: &RequestContext<RoleServer>) -> Caller {
    parts(context)
        .and_then(|p| p.extensions.get::<Caller>().cloned())
        .unwrap_or_default()
}

/// The caller's W3C trace headers.
pub(super) fn trace(context: &RequestContext<RoleServer>) -> TraceHeaders {
    parts(context).map_or_else(TraceHeaders::default, |p| {
        TraceHeaders::from_headers(&p.headers)
    })
}

/// The conversation a call continues, by the agent's `instance_scope`: `None` for the
/// `request` scope (nothing is kept), and for `connection` when the client has no session.
pub(super) fn conversation(
    face: &Face,
    context: &RequestContext<RoleServer>,
) -> Option<ConversationKey> {
    let key = match face.scope() {
        InstanceScope::Shared => Some(ConversationKey::mcp_shared(face.name())),
        InstanceScope::Connection => {
            session_id(context).map(|session| ConversationKey::mcp_session(face.name(), session))
        }
        InstanceScope::Request => None,
    };
    // An authenticated caller's conversations are its own, even on a shared agent.
    key.map(|key| key.owned_by(who(context).conversation_space()))
}

/// What the turn service keeps for a call of `face`.
pub(super) fn memory(face: &Face, context: &RequestContext<RoleServer>) -> Memory {
    conversation(face, context).map_or(Memory::None, Memory::Conversation)
}
