//! What every worker shares: the configuration, the NATS connection, the runtime seam, its
//! availability, the metrics, and the two shutdown tokens.

use std::sync::Arc;

use async_nats::jetstream::Context;
use tokio_util::sync::CancellationToken;

use crate::config::ProxyConfig;
use crate::consume::keeper::ConsumerState;
use crate::forward::availability::RuntimeAvailability;
use crate::forward::forwarder::Forwarder;
use crate::metrics::Metrics;

/// What every worker shares.
#[derive(Debug)]
pub struct Shared {
    pub config: ProxyConfig,
    pub client: async_nats::Client,
    pub js: Context,
    pub forwarder: Arc<dyn Forwarder>,
    /// The runtime streams (its card says so): each task's events are relayed, as they
    /// arrive, to `agent.events.<agent>.<task-token>`.
    pub runtime_streams: bool,
    pub metrics: Arc<Metrics>,
    /// Whether the runtime can take tasks now.
    pub runtime: Arc<RuntimeAvailability>,
    /// Whether the agent's consumer is in place (workers ask for a check when in doubt).
    pub consumer_state: Arc<ConsumerState>,
    /// Fired at the first shutdown signal: no new pulls.
    pub stop_pulling: CancellationToken,
    /// Fired when the grace period is over: hand in-flight tasks back.
    pub abandon: CancellationToken,
    /// Each task and step gets an exported span (`config.export_spans`).
    pub traced: bool,
    /// The runtime's host and port, for the spans of calls to it (`server.address`,
    /// `server.port`).
    pub runtime_address: Option<(String, u16)>,
}
