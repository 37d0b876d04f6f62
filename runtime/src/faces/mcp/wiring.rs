//! The MCP face's wiring: every agent's MCP endpoint and the registry that lists them, planned
//! from the configuration at startup; on reload, the new routing table is prepared whole
//! ([`McpPlan::prepare`]) before [`McpPlan::apply`] installs it. A change to this face touches
//! this folder only.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::routes::{self, Changes};
use super::{Routes, ServiceSettings, registry};
use crate::config::Config;
use crate::config::deployment::AgentDef;
use crate::platform::metrics;
use crate::services::state::Core;
use crate::services::state::Fleet;

/// The MCP side of the runtime: the routing table every MCP port reads, and the main port's
/// address (agents without their own port are listed under it).
#[derive(Debug)]
pub struct McpPlan {
    routes: Arc<Routes>,
    bound: SocketAddr,
}

impl McpPlan {
    /// The MCP faces of every agent, and the registry that lists them, for a main port at
    /// `bound`.
    pub fn build(config: &Config, core: &Core, bound: SocketAddr) -> Self {
        let plan = Self {
            routes: Arc::new(Routes::new(CancellationToken::new())),
            bound,
        };
        let table = plan.prepare(config, &core.fleet(), core);
        plan.apply(table, std::time::Duration::ZERO, core);
        plan
    }

    /// The routing table for `config`'s deployment, run by `fleet`, not serving yet.
    pub fn prepare(&self, config: &Config, fleet: &Fleet, core: &Core) -> routes::Table {
        let addresses = registry::Addresses {
            main_base: config.public_url.clone().map_or_else(
                || format!("http://{}:{}", config.deployment.host, self.bound.port()),
                |u| u.trim_end_matches('/').to_owned(),
            ),
            host: config.deployment.host.clone(),
        };
        let settings = ServiceSettings {
            allowed_hosts: allowed_hosts(config),
            max_body_bytes: usize::try_from(config.limits.max_body_bytes).unwrap_or(usize::MAX),
            public_base: addresses.main_base.clone(),
            host: addresses.host.clone(),
        };
        let faces = super::faces(&config.deployment, fleet, core);
        let served: Vec<&AgentDef> = faces.iter().map(|f| &f.def).collect();
        let updated_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let document = registry::document(&config.deployment, &served, &addresses, &updated_at);
        self.routes.plan(faces, document, settings)
    }

    /// Serves `table` from the next request on; sessions of agents it changes or removes get
    /// `drain` to finish. Answers which agents changed.
    pub fn apply(&self, table: routes::Table, drain: std::time::Duration, core: &Core) -> Changes {
        let changes = self.routes.install(table, drain);
        record_agents(core, &self.routes.table(), self.bound);
        changes
    }

    pub fn routes(&self) -> &Arc<Routes> {
        &self.routes
    }

    pub fn bound(&self) -> SocketAddr {
        self.bound
    }
}

/// `daedalus_runtime_agent_info`: one series per agent served, with the port it answers on.
fn record_agents(core: &Core, table: &routes::Table, main: SocketAddr) {
    let info = &core.metrics().agent_info;
    info.clear();
    for name in table.names() {
        let port = table
            .agent(name)
            .and_then(|e| e.face().def.port)
            .unwrap_or(main.port());
        info.get_or_create(&metrics::AgentInfo {
            agent: name.to_owned(),
            port: port.to_string(),
        })
        .set(1);
    }
}

/// The `Host` values MCP endpoints accept: loopback, the deployment's `host`, PUBLIC_URL's
/// host, and MCP_ALLOWED_HOSTS (`*` turns the check off).
fn allowed_hosts(config: &Config) -> Vec<String> {
    if config.mcp_allowed_hosts.iter().any(|h| h == "*") {
        return Vec::new();
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    hosts.push(config.deployment.host.clone());
    if let Some(host) = config
        .public_url
        .as_deref()
        .and_then(|u| u.parse::<::http::Uri>().ok())
        .and_then(|u| u.host().map(str::to_owned))
    {
        hosts.push(host);
    }
    hosts.extend(config.mcp_allowed_hosts.iter().cloned());
    hosts.sort();
    hosts.dedup();
    hosts
}
