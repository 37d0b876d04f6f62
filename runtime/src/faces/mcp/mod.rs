//! The MCP face for Daedalus: one Streamable HTTP MCP server (rmcp) per agent, at
//! `/agents/<name>/mcp` on the main port and at `/mcp` on the agent's own `port`.
//!
//! Each offers the tools `send_message` and an alias named after the agent (both
//! `{message, images?, sampling...}`), `get_health`, and — unless the agent's `instance_scope` is
//! `request` — the prompt `<agent>_history`. `instance_scope` decides which conversation a call
//! continues: `shared` (one for everybody), `connection` (one per MCP session, or on
//! 2026-07-28 the one a call names), `request` (none).
//!
//! Both kinds of MCP revision are served on the same endpoints, chosen per request as rmcp
//! reads it: 2026-07-28 (and `server/discover`) statelessly, each request on its own, so any
//! replica answers any call ([`stateless`], [`tasks`]); 2025-11-25 and older with
//! `initialize` and a session, bounded by the runtime's session book ([`session_manager`]).

pub mod auth;
mod caller;
pub mod endpoints;
mod handler;
pub mod progress;
pub mod registry;
pub mod routes;
mod send;
pub mod session_manager;
mod stateless;
mod tasks;
mod traced;
pub mod wiring;

use std::sync::Arc;

use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::config::deployment::{AgentDef, Deployment, InstanceScope};
use crate::services::health::AgentHealth;
use crate::services::state::Core;
use crate::services::state::Fleet;
use session_manager::BoundedSessions;

pub use handler::{AgentServer, GET_HEALTH, SEND_MESSAGE};
pub use routes::{Routes, main_port_routes, own_port_routes};

/// The newest MCP revision served; every older one rmcp knows is served too.
pub const NEWEST_REVISION: rmcp::model::ProtocolVersion =
    rmcp::model::ProtocolVersion::V_2026_07_28;

/// The MCP revisions every endpoint serves.
pub fn revisions() -> &'static [rmcp::model::ProtocolVersion] {
    rmcp::model::ProtocolVersion::known_up_to(&NEWEST_REVISION)
}

/// [`revisions`] as the registry lists them, newest first.
pub fn served_revisions() -> Vec<String> {
    revisions()
        .iter()
        .rev()
        .map(|v| v.as_str().to_owned())
        .collect()
}

/// The MCP endpoint path on an agent's own port.
pub const OWN_PORT_PATH: &str = "/mcp";

/// The MCP endpoint path of `agent` on the main port.
pub fn main_port_path(agent: &str) -> String {
    format!("/agents/{agent}/mcp")
}

/// One agent's MCP face: what its handlers share across sessions.
#[derive(Debug)]
pub struct Face {
    pub def: AgentDef,
    /// The agent's health check, which `get_health` presents.
    pub health: AgentHealth,
    /// The runtime's core: turns run through its turn service.
    pub core: Core,
}

impl Face {
    /// The face of `def`, when `fleet` has an agent of that name.
    pub fn new(def: &AgentDef, deployment: &Deployment, fleet: &Fleet, core: Core) -> Option<Self> {
        fleet.agents.get(&def.name)?;
        Some(Self {
            def: def.clone(),
            health: AgentHealth::new(def, deployment, core.clone()),
            core,
        })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn scope(&self) -> InstanceScope {
        self.def.instance_scope
    }

    /// Whether `other` shows MCP clients the same server (definition and downstream servers):
    /// a reload then keeps this face's endpoint and sessions.
    pub fn serves_as(&self, other: &Face) -> bool {
        self.def == other.def && self.health == other.health
    }
}

/// Settings every agent's MCP service shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceSettings {
    /// Accepted `Host` values (`host` from agents.yaml, loopback, and `MCP_ALLOWED_HOSTS`);
    /// empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Largest request body (images travel base64 in it).
    pub max_body_bytes: usize,
    /// The main port's base URL (`PUBLIC_URL`, or the deployment's host and port): endpoints
    /// are named by it in their protected resource metadata.
    pub public_base: String,
    /// The deployment's `host`, which names agents' own ports.
    pub host: String,
}

/// The Streamable HTTP service of `face`, its sessions entered in the runtime's session book
/// and ended by `sessions`.
pub fn service(
    face: &Arc<Face>,
    settings: &ServiceSettings,
    sessions: tokio_util::sync::CancellationToken,
    changes: routes::ChangeFeed,
) -> StreamableHttpService<AgentServer, BoundedSessions> {
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts.clone_from(&settings.allowed_hosts);
    config.max_request_body_bytes = settings.max_body_bytes;
    config.cancellation_token = sessions;
    let manager = BoundedSessions::new(face.name(), Arc::clone(face.core.mcp_session_book()));
    let face = Arc::clone(face);
    StreamableHttpService::new(
        move || Ok(AgentServer::new(Arc::clone(&face), changes.clone())),
        Arc::new(manager),
        config,
    )
}

/// rmcp answers a session's `DELETE` with 202; both major versions of the Python SDK (and so
/// Daedalus) log every status but 200 as a failed termination. The session is gone either way.
pub(crate) async fn delete_answers_200(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::OK;
    }
    response
}

/// The faces of every agent of `deployment` that `fleet` runs.
pub fn faces(deployment: &Deployment, fleet: &Fleet, core: &Core) -> Vec<Arc<Face>> {
    deployment
        .agents
        .iter()
        .filter(|def| deployment.serves(&def.name))
        .filter_map(|def| Face::new(def, deployment, fleet, core.clone()).map(Arc::new))
        .collect()
}
