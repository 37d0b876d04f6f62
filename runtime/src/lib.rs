//! The Daedalus agent runtime.
//!
//! [`run`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.
//!
//! Who owns what:
//!
//! - [`faces`]: the wires. [`faces::contract`] (`POST /` and discovery) and [`faces::mcp`]
//!   (the MCP server per agent Daedalus talks to) translate requests into turn requests and
//!   answers back; neither imports the other.
//! - [`turns`]: the turn service every face calls: admission, per-conversation serialization,
//!   task memory and replay, timeouts and cancellation, events and the metrics of a turn.
//! - [`core`]: the runtime-wide state the faces share (fleet, turn service, metrics,
//!   preflight, lifecycle).
//! - [`agent_loop`]: one agent's turn: the LLM tool loop ([`agent_loop::LlmAgent`]), the
//!   passthrough model, sub-agents and the toolbox; [`fleet`] builds every agent of the
//!   deployment.
//! - [`mcp_client`]: the client of downstream MCP servers the agent loop calls tools on.
//! - [`mcp_sessions`]: the MCP sessions every agent's MCP face holds, runtime-wide, bounded in
//!   count and bytes, with their handshake and idle timeouts.
//! - [`llm`]: the OpenAI and Anthropic providers; [`sampling`]: typed sampling parameters and
//!   what each provider takes; [`sessions`]: the conversation stores; [`config`]: the typed,
//!   validated configuration.
//! - [`startup`]: the named steps [`run`] takes, and shutdown; [`reload`]: a new deployment
//!   swapped in whole on SIGHUP, or refused.

pub mod agent_loop;
pub mod config;
pub mod core;
pub mod faces;
pub mod fleet;
pub mod lifecycle;
pub mod llm;
pub mod mcp_client;
pub mod mcp_sessions;
pub mod memory;
pub mod metrics;
pub mod reload;
pub mod sampling;
pub mod serve;
pub mod sessions;
pub mod startup;
pub mod telemetry;
pub mod turns;

use std::future::Future;

use tokio::net::TcpListener;

use crate::config::Config;
use crate::core::Core;

pub use startup::PREFLIGHT_TTL;

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the agent card or manifest built from the configuration is invalid")]
    Discovery(#[source] daedalus_contract::SchemaErrors),
    #[error("cannot open the session store")]
    Sessions(#[source] sessions::StoreError),
    #[error("cannot set up the LLM provider")]
    Provider(#[source] llm::LlmError),
    #[error("cannot read the listener's address")]
    Listener(#[source] std::io::Error),
    #[error(transparent)]
    Bind(startup::BindError),
    #[error("an agent could not start")]
    Dependency(#[source] faces::mcp::endpoints::DependencyNotReady),
}

/// Serves the configured agents on `listener` until `shutdown` resolves, then drains.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    run_reloading(listener, config, shutdown, reload::Reloader::never()).await
}

/// [`run`], applying the configuration `reloader` reads on each of its requests (SIGHUP) while
/// it serves; one that cannot be applied is logged and the running deployment kept.
pub async fn run_reloading(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
    reloads: reload::Reloader,
) -> Result<(), RunError> {
    let sessions = startup::open_sessions(&config).await?;
    let fleet = startup::build_fleet(&config, sessions.as_ref())?;
    let core = startup::build_core(&config, fleet, sessions);
    run_core(listener, config, core, shutdown, reloads).await
}

/// [`run_reloading`] over a prepared core (the seam tests swap the fleet at).
pub async fn run_core(
    listener: TcpListener,
    config: Config,
    core: Core,
    shutdown: impl Future<Output = ()> + Send,
    mut reloads: reload::Reloader,
) -> Result<(), RunError> {
    let bound = listener.local_addr().map_err(RunError::Listener)?;
    let contract = startup::contract_state(&config, core.clone(), bound)?;
    let mcp = startup::plan_mcp(&config, &core, bound);
    let mut servers = startup::serve_main_port(listener, &config, contract.clone(), &mcp);
    startup::serve_own_ports(&mut servers, &config, &mcp).await?;
    startup::serve_registry_port(&mut servers, &config).await?;
    startup::go_live(&core);
    tracing::info!(addr = %bound, agent = %config.agent.name, "runtime ready");

    let grace = config.termination_grace_period;
    let mut live = reload::Live::new(config, contract, mcp);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(next) = reloads.next(live.serving()) => live.reload(next, &mut servers).await,
        }
    }
    servers.stop(grace).await;
    tracing::info!("runtime stopped");
    Ok(())
}
