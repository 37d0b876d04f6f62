//! The Daedalus agent runtime.
//!
//! [`run`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.

pub mod agent;
pub mod agents;
pub mod config;
pub mod conversations;
pub mod face;
pub mod http;
pub mod lifecycle;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod serve;
pub mod sessions;
pub mod tasks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::agents::Fleet;
use crate::config::{Config, SessionsDb};
use crate::http::{AppState, Discovery};
use crate::llm::preflight::Preflight;

/// How long canceled tasks get to answer after the grace period, before the server stops.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the agent card or manifest built from the configuration is invalid")]
    Discovery(#[source] daedalus_schemas::SchemaErrors),
    #[error("cannot open the session store")]
    Sessions(#[source] sessions::StoreError),
    #[error("cannot set up the LLM provider")]
    Provider(#[source] llm::LlmError),
    #[error("cannot read the listener's address")]
    Listener(#[source] std::io::Error),
    #[error("{key}: cannot listen on port {port}")]
    Bind {
        key: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("an agent could not start")]
    Dependency(#[source] face::endpoints::DependencyNotReady),
}

/// How long a provider preflight result is trusted before `/healthz` probes again.
pub const PREFLIGHT_TTL: Duration = Duration::from_mins(5);

/// Every agent of the deployment, over the configured session store.
pub async fn fleet_for(config: &Config) -> Result<Fleet, RunError> {
    let sessions = open_sessions(config).await?;
    agents::build(&config.deployment, sessions.as_ref()).map_err(RunError::Provider)
}

/// Opens the session store and marks rows a crash left `pending` as `error`.
async fn open_sessions(
    config: &Config,
) -> Result<Option<Arc<dyn sessions::SessionStore>>, RunError> {
    let store: Arc<dyn sessions::SessionStore> = match &config.sessions_db {
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

/// Builds the shared state for `config` with `fleet` (the seam tests swap), for a server
/// bound at `bound`.
pub fn app_state(config: &Config, bound: SocketAddr, fleet: Fleet) -> Result<AppState, RunError> {
    let discovery = Discovery::new(config, bound).map_err(RunError::Discovery)?;
    let preflight = Arc::new(Preflight::new(&config.deployment, PREFLIGHT_TTL));
    Ok(AppState::new(
        &config.agent.name,
        fleet,
        discovery,
        preflight,
        config.limits,
        config.max_tasks,
    ))
}

/// Serves the configured agents on `listener` until `shutdown` resolves, then drains.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    let bound = listener.local_addr().map_err(RunError::Listener)?;
    let state = app_state(&config, bound, fleet_for(&config).await?)?;
    run_with_state(listener, &config, state, shutdown).await
}

/// [`run`] with prepared state.
///
/// Startup: the main port serves the contract face, every agent's MCP endpoint at
/// `/agents/<name>/mcp`, the registry and `/metrics`; then agents with their own `port` start
/// in `depends_on` order, each once the agents it depends on answer on their MCP endpoints
/// (within a minute); then the registry port; then the runtime reports ready.
pub async fn run_with_state(
    listener: TcpListener,
    config: &Config,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    let bound = listener.local_addr().map_err(RunError::Listener)?;
    let stop_serving = CancellationToken::new();
    let settings = face::ServiceSettings {
        allowed_hosts: allowed_hosts(config),
        max_body_bytes: usize::try_from(config.limits.max_body_bytes).unwrap_or(usize::MAX),
        stop: CancellationToken::new(),
    };
    let faces = face::faces(&config.deployment, &state);
    let addresses = face::registry::Addresses {
        main_base: config.public_url.clone().map_or_else(
            || format!("http://{}:{}", config.deployment.host, bound.port()),
            |u| u.trim_end_matches('/').to_owned(),
        ),
        host: config.deployment.host.clone(),
    };
    let served: Vec<&config::deployment::AgentDef> = faces.iter().map(|f| &f.def).collect();
    let updated_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let registry = Arc::new(face::registry::document(
        &config.deployment,
        &served,
        &addresses,
        &updated_at,
    ));
    for def in &served {
        state
            .metrics()
            .agent_info
            .get_or_create(&metrics::AgentInfo {
                agent: def.name.clone(),
                port: def.port.unwrap_or(bound.port()).to_string(),
            })
            .set(1);
    }
    let companions = || {
        face::endpoints::registry_routes(Arc::clone(&registry))
            .merge(face::endpoints::metrics_routes(Arc::clone(state.metrics())))
    };
    let main = http::router(state.clone())
        .merge(face::main_port_routes(&faces, &settings))
        .merge(companions());
    let mut servers = vec![tokio::spawn(serve::serve(
        listener,
        main,
        serve::ConnectionLimits::from(&config.limits),
        stop_serving.clone(),
    ))];

    // Agents on their own ports, dependencies first.
    let probe = reqwest::Client::new();
    let local = |def: &config::deployment::AgentDef| match def.port {
        Some(port) => format!("http://127.0.0.1:{port}{}", face::OWN_PORT_PATH),
        None => format!(
            "http://127.0.0.1:{}{}",
            bound.port(),
            face::main_port_path(&def.name)
        ),
    };
    for face in in_dependency_order(&faces, &config.deployment.start_order) {
        for dependency in &face.def.depends_on {
            let Some(dep) = config.deployment.agent(dependency) else {
                continue;
            };
            face::endpoints::wait_ready(
                &probe,
                face.name(),
                dependency,
                &local(dep),
                face::endpoints::DEPENDENCY_WAIT,
            )
            .await
            .map_err(RunError::Dependency)?;
        }
        if let Some(port) = face.def.port {
            let own = face::own_port_routes(face, &settings)
                .merge(face::endpoints::metrics_routes(Arc::clone(state.metrics())));
            let listener = bind(
                config.listen.ip(),
                port,
                &format!("agents.{}.port", face.name()),
            )
            .await?;
            servers.push(tokio::spawn(serve::serve(
                listener,
                own,
                serve::ConnectionLimits::from(&config.limits),
                stop_serving.clone(),
            )));
            tracing::info!(agent = face.name(), port, "agent MCP endpoint ready");
        }
    }
    if let Some(port) = config.deployment.registry_port {
        let listener = bind(config.listen.ip(), port, "registry_port").await?;
        servers.push(tokio::spawn(serve::serve(
            listener,
            companions(),
            serve::ConnectionLimits::from(&config.limits),
            stop_serving.clone(),
        )));
    }

    state.lifecycle().set_ready();
    // Provider preflight and downstream MCP servers: checked in the background, never
    // blocking startup; logs and /healthz show the result.
    if !state.preflight().is_empty() {
        let preflight = Arc::clone(state.preflight());
        let metrics = Arc::clone(state.metrics());
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
    let fleet = Arc::clone(state.fleet());
    tokio::spawn(async move { fleet.warm_up().await });
    tracing::info!(
        addr = %bound,
        agent = %config.agent.name,
        agents = faces.len(),
        "runtime ready"
    );

    shutdown.await;
    drain(&state, config.termination_grace_period).await;
    settings.stop.cancel();
    stop_serving.cancel();
    for server in servers {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "a server task failed");
        }
    }
    tracing::info!("runtime stopped");
    Ok(())
}

/// Binds an agent's or the registry's port; `key` names the setting in errors.
async fn bind(ip: std::net::IpAddr, port: u16, key: &str) -> Result<TcpListener, RunError> {
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

/// `faces` in the deployment's start order: every agent after the agents it depends on.
fn in_dependency_order<'a>(
    faces: &'a [Arc<face::Face>],
    start_order: &[String],
) -> Vec<&'a Arc<face::Face>> {
    start_order
        .iter()
        .filter_map(|name| faces.iter().find(|f| f.name() == name))
        .collect()
}

/// Refuses new tasks, gives in-flight ones `grace` to finish, then cancels the rest.
async fn drain(state: &AppState, grace: Duration) {
    state.lifecycle().set_draining();
    let inflight = state.inflight();
    inflight.close();
    tracing::info!(in_flight = inflight.len(), grace = ?grace, "draining");
    if tokio::time::timeout(grace, inflight.wait()).await.is_ok() {
        return;
    }
    tracing::warn!(
        in_flight = inflight.len(),
        "grace period over; canceling remaining tasks"
    );
    state.cancel_token().cancel();
    if tokio::time::timeout(CANCEL_SETTLE, inflight.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            in_flight = inflight.len(),
            "tasks did not stop after cancellation"
        );
    }
}
