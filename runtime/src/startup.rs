//! Startup, as named steps, and shutdown. [`crate::run`] calls them in order:
//!
//! 1. [`open_sessions`]: the session store, with rows a crash left `pending` marked `error`;
//! 2. [`build_core`]: the fleet of agents over it, the turn service, metrics and preflight;
//! 3. [`serve_main_port`]: the contract face, every agent's MCP endpoint, the registry and
//!    `/metrics` on the bound listener;
//! 4. [`serve_own_ports`]: agents with their own `port`, in the validated start order, each
//!    once the agents it depends on answer;
//! 5. [`serve_registry_port`];
//! 6. [`go_live`]: ready, then the provider preflight and downstream warm-up in the background;
//! 7. after the shutdown signal, [`Servers::stop`]: the turn service drains under the grace
//!    period, then the servers close.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::RunError;
use crate::config::deployment::AgentDef;
use crate::config::{Config, SessionsDb};
use crate::core::Core;
use crate::faces::contract::{self, ContractState, Discovery};
use crate::faces::mcp::{self, Face, ServiceSettings, endpoints, registry};
use crate::fleet::{self, Fleet};
use crate::llm::preflight::Preflight;
use crate::metrics;
use crate::serve::{self, ConnectionLimits};
use crate::sessions::{self, SessionStore};
use crate::turns::TurnLimits;

/// How long a provider preflight result is trusted before `/healthz` probes again.
pub const PREFLIGHT_TTL: std::time::Duration = std::time::Duration::from_mins(5);

/// Opens the configured session store and marks rows a crash left `pending` as `error`.
pub async fn open_sessions(config: &Config) -> Result<Option<Arc<dyn SessionStore>>, RunError> {
    let store: Arc<dyn SessionStore> = match &config.sessions_db {
        None => return Ok(None),
        Some(SessionsDb::Sqlite(path)) => Arc::new(
            sessions::SqliteStore::open_with_ttl(path, config.session_ttl)
                .map_err(RunError::Sessions)?,
        ),
        Some(SessionsDb::NatsKv { url, bucket }) => {
            // A pending row younger than the longest a turn may run can belong to another
            // replica's running turn.
            let stale_after = config.limits.request_timeout + config.termination_grace_period;
            Arc::new(
                sessions::NatsKvStore::open_with_ttl(url, bucket, stale_after, config.session_ttl)
                    .await
                    .map_err(RunError::Sessions)?,
            )
        }
    };
    let recovered = store.recover().await.map_err(RunError::Sessions)?;
    if recovered > 0 {
        tracing::warn!(
            rows = recovered,
            "a previous run stopped mid-turn; its pending rows are now marked error"
        );
    }
    Ok(Some(store))
}

/// Every agent of the deployment, over `sessions`.
pub fn build_fleet(
    config: &Config,
    sessions: Option<&Arc<dyn SessionStore>>,
) -> Result<Fleet, RunError> {
    fleet::build(&config.deployment, sessions).map_err(RunError::Provider)
}

/// The runtime-wide core over `fleet` (the seam tests and benchmarks swap the fleet at).
pub fn build_core(config: &Config, fleet: Fleet) -> Core {
    let preflight = Arc::new(Preflight::new(&config.deployment, PREFLIGHT_TTL));
    let limits = TurnLimits {
        request_timeout: config.limits.request_timeout,
        max_concurrent: config.limits.max_concurrent_tasks,
        max_tasks: config.max_tasks,
        task_memory_bytes: usize::try_from(config.limits.task_memory_bytes).unwrap_or(usize::MAX),
    };
    Core::new(fleet, preflight, limits)
}

/// The contract face's state for a server bound at `bound`.
pub fn contract_state(
    config: &Config,
    core: Core,
    bound: SocketAddr,
) -> Result<ContractState, RunError> {
    let discovery = Discovery::new(config, bound).map_err(RunError::Discovery)?;
    Ok(ContractState::new(
        core,
        &config.agent.name,
        discovery,
        config.limits,
    ))
}

/// The running servers, and the token that closes them.
#[derive(Debug)]
pub struct Servers {
    core: Core,
    mcp_sessions: CancellationToken,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    connection_limits: ConnectionLimits,
}

impl Servers {
    fn spawn(&mut self, listener: TcpListener, router: axum::Router) {
        self.tasks.push(tokio::spawn(serve::serve(
            listener,
            router,
            self.connection_limits,
            self.stop.clone(),
        )));
    }

    /// Drains the turn service under `grace`, then ends MCP sessions and closes every port.
    pub async fn stop(self, grace: std::time::Duration) {
        self.core.turns().drain(grace).await;
        self.mcp_sessions.cancel();
        self.stop.cancel();
        for server in self.tasks {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "a server task failed");
            }
        }
    }
}

/// What the MCP side of startup needs: each agent's face, the shared service settings, and
/// the registry document.
#[derive(Debug)]
pub struct McpPlan {
    faces: Vec<Arc<Face>>,
    settings: ServiceSettings,
    registry: Arc<daedalus_contract::model::registry::ServerList>,
}

/// The MCP faces of every agent, and the registry that lists them, for a main port at `bound`.
pub fn plan_mcp(config: &Config, core: &Core, bound: SocketAddr) -> McpPlan {
    let settings = ServiceSettings {
        allowed_hosts: allowed_hosts(config),
        max_body_bytes: usize::try_from(config.limits.max_body_bytes).unwrap_or(usize::MAX),
        stop: CancellationToken::new(),
    };
    let faces = mcp::faces(&config.deployment, core);
    let addresses = registry::Addresses {
        main_base: config.public_url.clone().map_or_else(
            || format!("http://{}:{}", config.deployment.host, bound.port()),
            |u| u.trim_end_matches('/').to_owned(),
        ),
        host: config.deployment.host.clone(),
    };
    let served: Vec<&AgentDef> = faces.iter().map(|f| &f.def).collect();
    let updated_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let registry = Arc::new(registry::document(
        &config.deployment,
        &served,
        &addresses,
        &updated_at,
    ));
    for def in &served {
        core.metrics()
            .agent_info
            .get_or_create(&metrics::AgentInfo {
                agent: def.name.clone(),
                port: def.port.unwrap_or(bound.port()).to_string(),
            })
            .set(1);
    }
    McpPlan {
        faces,
        settings,
        registry,
    }
}

impl McpPlan {
    /// The registry and `/metrics`, served on every port the runtime opens.
    fn companions(&self, core: &Core) -> axum::Router {
        endpoints::registry_routes(Arc::clone(&self.registry))
            .merge(endpoints::metrics_routes(Arc::clone(core.metrics())))
    }
}

/// Serves the contract face, every agent's MCP endpoint and the companions on `listener`.
pub fn serve_main_port(
    listener: TcpListener,
    config: &Config,
    contract: ContractState,
    plan: &McpPlan,
) -> Servers {
    let core = contract.core().clone();
    let main = contract::router(contract)
        .merge(mcp::main_port_routes(&plan.faces, &plan.settings))
        .merge(plan.companions(&core));
    let mut servers = Servers {
        core,
        mcp_sessions: plan.settings.stop.clone(),
        stop: CancellationToken::new(),
        tasks: Vec::new(),
        connection_limits: ConnectionLimits::from(&config.limits),
    };
    servers.spawn(listener, main);
    servers
}

/// Starts the agents that have their own `port`, in the validated start order: each once the
/// agents it depends on answer on their MCP endpoints (within [`endpoints::DEPENDENCY_WAIT`]).
pub async fn serve_own_ports(
    servers: &mut Servers,
    config: &Config,
    plan: &McpPlan,
    main_port: u16,
) -> Result<(), RunError> {
    let probe = reqwest::Client::new();
    let local = |def: &AgentDef| match def.port {
        Some(port) => format!("http://127.0.0.1:{port}{}", mcp::OWN_PORT_PATH),
        None => format!(
            "http://127.0.0.1:{main_port}{}",
            mcp::main_port_path(&def.name)
        ),
    };
    let in_order = config
        .deployment
        .start_order
        .iter()
        .filter_map(|name| plan.faces.iter().find(|f| f.name() == name));
    for face in in_order {
        for dependency in &face.def.depends_on {
            let Some(dep) = config.deployment.agent(dependency) else {
                continue;
            };
            endpoints::wait_ready(
                &probe,
                face.name(),
                dependency,
                &local(dep),
                endpoints::DEPENDENCY_WAIT,
            )
            .await
            .map_err(RunError::Dependency)?;
        }
        if let Some(port) = face.def.port {
            let key = format!("agents.{}.port", face.name());
            let listener = bind(config.listen.ip(), port, &key).await?;
            let own = mcp::own_port_routes(face, &plan.settings).merge(endpoints::metrics_routes(
                Arc::clone(servers.core.metrics()),
            ));
            servers.spawn(listener, own);
            tracing::info!(agent = face.name(), port, "agent MCP endpoint ready");
        }
    }
    Ok(())
}

/// The registry and `/metrics` on `registry_port`, when one is configured.
pub async fn serve_registry_port(
    servers: &mut Servers,
    config: &Config,
    plan: &McpPlan,
) -> Result<(), RunError> {
    if let Some(port) = config.deployment.registry_port {
        let listener = bind(config.listen.ip(), port, "registry_port").await?;
        let companions = plan.companions(&servers.core);
        servers.spawn(listener, companions);
    }
    Ok(())
}

/// Marks the runtime ready, then checks the LLM providers and connects the downstream MCP
/// servers in the background: never blocking startup; logs and `/healthz` show the result.
pub fn go_live(core: &Core) {
    core.lifecycle().set_ready();
    if !core.preflight().is_empty() {
        let preflight = Arc::clone(core.preflight());
        let metrics = Arc::clone(core.metrics());
        tokio::spawn(async move {
            for check in preflight.current().await {
                metrics
                    .llm_provider_up
                    .get_or_create(&metrics::ProviderLabel {
                        provider: check.provider.to_owned(),
                    })
                    .set(i64::from(check.ok));
            }
        });
    }
    let fleet = Arc::clone(core.fleet());
    tokio::spawn(async move { fleet.warm_up().await });
}

/// Binds an agent's or the registry's port; `key` names the setting in errors.
async fn bind(ip: IpAddr, port: u16, key: &str) -> Result<TcpListener, RunError> {
    TcpListener::bind(SocketAddr::new(ip, port))
        .await
        .map_err(|source| RunError::Bind {
            key: key.to_owned(),
            port,
            source,
        })
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
