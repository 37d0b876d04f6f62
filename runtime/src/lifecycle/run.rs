//! [`run`]: serve the configured agents until a shutdown future resolves, applying each reload
//! in between, then drain. Every step is one of [`super::startup`]'s.

use std::future::Future;

use tokio::net::TcpListener;

use super::reload;
use super::startup::{self, RunError};
use crate::config::Config;
use crate::services::state::Core;

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
    let stores = startup::open_stores(&config).await?;
    let fleet = startup::build_fleet(&config, stores.conversations.as_ref())?;
    let core = startup::build_core(&config, fleet, stores.conversations.clone());
    run_core(listener, config, core, stores, shutdown, reloads).await
}

/// [`run_reloading`] over a prepared core and its opened stores (the seam tests swap the
/// fleet at).
pub async fn run_core(
    listener: TcpListener,
    config: Config,
    core: Core,
    stores: startup::Stores,
    shutdown: impl Future<Output = ()> + Send,
    mut reloads: reload::Reloader,
) -> Result<(), RunError> {
    let bound = listener.local_addr().map_err(RunError::Listener)?;
    core.turns().commit_conversations_with_tasks(stores.shared);
    if let Some(file) = &stores.conversations_file {
        core.metrics().watch_store("sessions", file.stats());
    }
    startup::authenticate_callers(&config, &core).await?;
    Box::pin(startup::attach_tasks(
        &config,
        &core,
        stores.file.as_ref(),
        bound,
    ))
    .await?;
    let a2a = startup::a2a_face(&config, core.clone(), bound)?;
    let mcp = startup::plan_mcp(&config, &core, bound);
    let mut servers = startup::serve_main_port(listener, &config, a2a.clone(), &mcp);
    startup::serve_own_ports(&mut servers, &config, &mcp).await?;
    startup::serve_registry_port(&mut servers, &config).await?;
    startup::go_live(&core);
    tracing::info!(addr = %bound, agent = %config.agent.name, "runtime ready");

    let grace = config.termination_grace_period;
    let mut live = reload::Live::new(config, a2a, mcp);
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
