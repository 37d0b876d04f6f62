//! The runtime-wide core every face shares: the deployment's agents, the turn service that
//! runs them, the metrics, the LLM provider checks, and where the runtime is in its life.
//! Per-face state (the contract face's discovery documents, an MCP face's agent definition)
//! lives with its face and holds a [`Core`].

use std::sync::Arc;

use crate::fleet::Fleet;
use crate::lifecycle::Lifecycle;
use crate::llm::preflight::Preflight;
use crate::metrics::Metrics;
use crate::turns::{TurnLimits, TurnService};

/// What every face shares. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Core(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    fleet: Arc<Fleet>,
    turns: TurnService,
    metrics: Arc<Metrics>,
    preflight: Arc<Preflight>,
    lifecycle: Arc<Lifecycle>,
}

impl Core {
    /// The core over `fleet`, starting (not yet ready).
    pub fn new(fleet: Fleet, preflight: Arc<Preflight>, limits: TurnLimits) -> Self {
        let fleet = Arc::new(fleet);
        let metrics = Arc::new(Metrics::new());
        let lifecycle = Arc::new(Lifecycle::default());
        let turns = TurnService::new(
            Arc::clone(&fleet),
            Arc::clone(&metrics),
            Arc::clone(&lifecycle),
            limits,
        );
        Self(Arc::new(Shared {
            fleet,
            turns,
            metrics,
            preflight,
            lifecycle,
        }))
    }

    /// Every agent of the deployment, with its downstream servers.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.0.fleet
    }

    /// The one way a turn runs.
    pub fn turns(&self) -> &TurnService {
        &self.0.turns
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// The LLM provider checks behind `/healthz` and `get_health`.
    pub fn preflight(&self) -> &Arc<Preflight> {
        &self.0.preflight
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.0.lifecycle
    }
}
