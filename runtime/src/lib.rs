//! The Daedalus agent runtime.
//!
//! [`run`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.

pub mod agent;
pub mod agents;
pub mod config;
pub mod http;
pub mod lifecycle;
pub mod llm;
pub mod mcp;
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
        Some(SessionsDb::Sqlite(path)) => {
            Arc::new(sessions::SqliteStore::open(path).map_err(RunError::Sessions)?)
        }
        Some(SessionsDb::NatsKv { url, bucket }) => {
            // A pending row younger than the longest a turn may run can belong to another
            // replica's running turn.
            let stale_after = config.limits.request_timeout + config.termination_grace_period;
            Arc::new(
                sessions::NatsKvStore::open(url, bucket, stale_after)
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

/// Serves the configured agent on `listener` until `shutdown` resolves, then drains.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    let bound = listener.local_addr().map_err(RunError::Listener)?;
    let state = app_state(&config, bound, fleet_for(&config).await?)?;
    run_with_state(listener, &config, state, shutdown).await;
    Ok(())
}

/// [`run`] with prepared state.
pub async fn run_with_state(
    listener: TcpListener,
    config: &Config,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
) {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let stop_serving = CancellationToken::new();
    let server = tokio::spawn(serve::serve(
        listener,
        http::router(state.clone()),
        config.limits.header_read_timeout,
        stop_serving.clone(),
    ));
    state.lifecycle().set_ready();
    // Provider preflight and downstream MCP servers: checked in the background, never
    // blocking startup; logs and /healthz show the result.
    if !state.preflight().is_empty() {
        let preflight = Arc::clone(state.preflight());
        tokio::spawn(async move { preflight.current().await });
    }
    let fleet = Arc::clone(state.fleet());
    tokio::spawn(async move { fleet.warm_up().await });
    tracing::info!(
        addr = %addr,
        agent = %config.agent.name,
        "runtime ready"
    );

    shutdown.await;
    drain(&state, config.termination_grace_period).await;
    stop_serving.cancel();
    if let Err(e) = server.await {
        tracing::error!(error = %e, "the server task failed");
    }
    tracing::info!("runtime stopped");
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
