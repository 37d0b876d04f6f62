//! Reloading the deployment (SIGHUP). The new configuration is built whole before anything is
//! swapped: its agents and their provider clients, the A2A face's card, the MCP routing
//! table and registry, and the listeners of ports it adds. A file that does not validate, a
//! provider that cannot be set up or a port that cannot be bound refuses the reload, with a
//! log line naming the key, and the running deployment keeps serving.
//!
//! Once built, it is swapped in at once. Turns already running finish on the agents they
//! began with; agents whose MCP face is unchanged keep their sessions; removed agents'
//! endpoints answer 404 from the next request on, and their ports close.
//!
//! Settings from flags and the environment (ports, limits, the session store) cannot change in
//! a running process, so only the deployment and what derives from it are reloaded;
//! `logger.level` takes effect at the next start.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;

use super::startup::PREFLIGHT_TTL;
use super::startup::{self, BindError, Servers};
use crate::agents::fleet;
use crate::agents::llm::LlmError;
use crate::agents::llm::preflight::Preflight;
use crate::config::{Config, ConfigError};
use crate::faces::a2a::{self, A2aFace};
use crate::faces::mcp::routes::Changes;
use crate::faces::mcp::wiring::McpPlan;

/// Why a reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file (or what the environment makes of it) does not validate.
    #[error(transparent)]
    Config(ConfigError),
    #[error("cannot set up the LLM provider of the new deployment")]
    Provider(#[source] LlmError),
    #[error("the agent card or manifest of the new deployment is invalid")]
    Discovery(#[source] daedalus_contract::SchemaErrors),
    #[error(transparent)]
    Bind(BindError),
    #[error("cannot set up the new authentication")]
    Identity(#[source] crate::platform::identity::IdentityError),
}

/// What a reload did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reloaded {
    /// The configuration read is the one running.
    Unchanged,
    /// The new deployment serves; these agents changed.
    Applied(Changes),
}

/// The deployment being served, and what a reload replaces in it.
#[derive(Debug)]
pub struct Live {
    config: Config,
    a2a: A2aFace,
    mcp: McpPlan,
}

impl Live {
    pub fn new(config: Config, a2a: A2aFace, mcp: McpPlan) -> Self {
        Self { config, a2a, mcp }
    }

    /// Applies `next` (the configuration as read again), or logs why not.
    pub async fn reload(&mut self, next: Result<Config, ConfigError>, servers: &mut Servers) {
        match self.try_reload(next, servers).await {
            Ok(Reloaded::Unchanged) => {
                tracing::info!("reload: the configuration is unchanged");
            }
            Ok(Reloaded::Applied(changes)) => {
                tracing::info!(
                    added = ?changes.added,
                    changed = ?changes.changed,
                    removed = ?changes.removed,
                    "reload: the new deployment is serving"
                );
            }
            Err(e) => {
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                tracing::error!(
                    error = %e,
                    cause,
                    "reload refused; the running deployment keeps serving"
                );
            }
        }
    }

    /// [`Live::reload`], with its outcome returned.
    pub async fn try_reload(
        &mut self,
        next: Result<Config, ConfigError>,
        servers: &mut Servers,
    ) -> Result<Reloaded, ReloadError> {
        let next = next.map_err(ReloadError::Config)?;
        let core = self.a2a.core().clone();
        // The API key file is read again even when the configuration is unchanged.
        let identity = core
            .identity()
            .prepare(&next.auth)
            .await
            .map_err(ReloadError::Identity)?;
        // A changed key file is a new signing key, whatever else changed.
        core.card_keys().apply(next.card_signing.as_ref());
        if next == self.config {
            core.identity().apply(identity);
            return Ok(Reloaded::Unchanged);
        }
        let fleet =
            fleet::build(&next.deployment, core.conversations()).map_err(ReloadError::Provider)?;
        let a2a = a2a::wiring::prepare(&next, self.mcp.bound()).map_err(ReloadError::Discovery)?;
        let table = self.mcp.prepare(&next, &fleet, &core);

        let wanted: BTreeSet<u16> = table
            .own_ports()
            .chain(next.deployment.registry_port)
            .collect();
        let open: BTreeSet<u16> = servers.side_ports().collect();
        let mut opened = Vec::new();
        for &port in wanted.difference(&open) {
            let key = side_port_key(&next, port);
            let listener = startup::bind(next.listen.ip(), port, &key)
                .await
                .map_err(ReloadError::Bind)?;
            opened.push((listener, port));
        }

        // Everything is built: swap.
        core.identity().apply(identity);
        core.redeploy(fleet, Preflight::new(&next.deployment, PREFLIGHT_TTL));
        core.turns().set_budgets(next.deployment.budgets.clone());
        self.a2a.apply(a2a);
        let changes = self.mcp.apply(table, next.limits.request_timeout, &core);
        for (listener, port) in opened {
            servers.open_side_port(listener, port);
        }
        for &port in open.difference(&wanted) {
            servers.close_side_port(port);
        }
        warn_about_restart_only_settings(&self.config, &next);
        startup::check_in_background(&core);
        self.config = next;
        Ok(Reloaded::Applied(changes))
    }

    /// The agent the A2A face serves now.
    pub fn serving(&self) -> String {
        self.a2a.agent()
    }
}

/// The setting that asks for side port `port` in `config`.
fn side_port_key(config: &Config, port: u16) -> String {
    config
        .deployment
        .agents
        .iter()
        .find(|a| a.port == Some(port))
        .map_or_else(
            || startup::REGISTRY_PORT_KEY.to_owned(),
            |a| startup::own_port_key(&a.name),
        )
}

/// How the configuration is read again, given the agent the A2A face serves now.
type Load = dyn Fn(&str) -> Result<Config, ConfigError> + Send + Sync;

/// Where reloads come from: requests (SIGHUP), and how the configuration is read again.
pub struct Reloader {
    requests: futures::stream::BoxStream<'static, ()>,
    load: Arc<Load>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

impl Reloader {
    /// Reads the configuration with `load` on each of `requests`.
    pub fn new(
        requests: impl futures::Stream<Item = ()> + Send + 'static,
        load: impl Fn(&str) -> Result<Config, ConfigError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            requests: requests.boxed(),
            load: Arc::new(load),
        }
    }

    /// No reloads, ever.
    pub fn never() -> Self {
        Self::new(futures::stream::pending(), |_| {
            Err(ConfigError::invalid(
                "reload",
                "this runtime does not reload",
            ))
        })
    }

    /// Reloads on every SIGHUP. The handler is installed at once, so from then on SIGHUP no
    /// longer ends the process (its default). `tokio::signal` serves here rather than
    /// `signal-hook-tokio`: tokio already handles TERM and INT for the shutdown, and one
    /// signal driver is enough.
    pub fn on_hangup(
        load: impl Fn(&str) -> Result<Config, ConfigError> + Send + Sync + 'static,
    ) -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => Some(hangups),
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGHUP; the deployment will not reload");
                None
            }
        };
        let requests = futures::stream::unfold(hangups, |hangups| async move {
            let mut hangups = hangups?;
            hangups.recv().await?;
            tracing::info!("SIGHUP: reading the configuration again");
            Some(((), Some(hangups)))
        });
        Self::new(requests, load)
    }

    /// Waits for the next request, then reads the configuration (off the async threads);
    /// `None` once no more requests can come.
    pub async fn next(&mut self, serving: String) -> Option<Result<Config, ConfigError>> {
        self.requests.next().await?;
        let load = Arc::clone(&self.load);
        let read = tokio::task::spawn_blocking(move || load(&serving))
            .await
            .unwrap_or_else(|e| Err(ConfigError::invalid("reload", e.to_string())));
        Some(read)
    }
}

fn warn_about_restart_only_settings(old: &Config, new: &Config) {
    if old.log_level != new.log_level {
        tracing::warn!(
            running = %old.log_level,
            read = %new.log_level,
            "reload: logger.level takes effect at the next start"
        );
    }
}
