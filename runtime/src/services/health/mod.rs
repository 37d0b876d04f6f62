//! Agent health: can this agent work? A runtime service any face may present (the MCP face's
//! `get_health` does). Never asks the model.
//!
//! Every downstream server of the agent (MCP servers and other A2A agents; sub-agents run
//! in-process and are not probed) is probed concurrently ([`probe`]), while the agent's provider
//! preflight is read (cached, re-probed on its TTL). The report is `ok` when everything passed,
//! `degraded` naming each problem otherwise, `error` when the runtime takes no work (shutting
//! down). Each check also sets `daedalus_runtime_downstream_up`,
//! `daedalus_runtime_llm_provider_up` and `daedalus_runtime_agent_health_status`.

pub mod probe;
pub mod runtime;

use std::collections::BTreeMap;

pub use probe::{HealthReport, HealthStatus, PROBE_TIMEOUT, Probe};
pub use runtime::{RuntimeHealth, runtime_health};

use crate::agents::agent_loop::Bearer;
use crate::config::deployment::{AgentDef, Deployment, McpServer, ModelRef, ServerRef};
use crate::platform::metrics::{AgentLabel, DownstreamLabel, ProviderLabel};
use crate::services::state::Core;
use crate::services::turns::Phase;

/// One agent's health check: what it relies on.
#[derive(Debug, Clone)]
pub struct AgentHealth {
    agent: String,
    /// The downstream servers, by name.
    downstream: BTreeMap<String, McpServer>,
    /// The provider its model runs on (`None` for passthrough).
    provider: Option<&'static str>,
    core: Core,
    client: reqwest::Client,
}

impl PartialEq for AgentHealth {
    /// Two checks are the same when they check the same things.
    fn eq(&self, other: &Self) -> bool {
        self.agent == other.agent
            && self.downstream == other.downstream
            && self.provider == other.provider
    }
}

impl AgentHealth {
    /// The check of `def` in `deployment`.
    pub fn new(def: &AgentDef, deployment: &Deployment, core: Core) -> Self {
        let downstream = def
            .servers
            .iter()
            .filter_map(|s| match s {
                ServerRef::Mcp(name) => deployment
                    .mcp_servers
                    .get(name)
                    .map(|server| (name.clone(), server.clone())),
                ServerRef::Agent(_) => None,
            })
            .collect();
        let provider = match def.model {
            ModelRef::Passthrough | ModelRef::Tck => None,
            ModelRef::OpenAi(_) => Some("openai"),
            ModelRef::Anthropic(_) => Some("anthropic"),
        };
        let client = reqwest::Client::builder()
            .connect_timeout(PROBE_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            agent: def.name.clone(),
            downstream,
            provider,
            core,
            client,
        }
    }

    /// Checks the agent now, probing with `bearer` where a server opted into forwarding.
    pub async fn check(&self, bearer: &Bearer) -> HealthReport {
        let probes = futures::future::join_all(
            self.downstream
                .iter()
                .map(|(name, server)| probe::probe(&self.client, name, server, bearer)),
        );
        // The provider's preflight is cached; when it is due again, it is re-probed while the
        // downstream servers are, not after them.
        let provider = async {
            let provider = self.provider?;
            let checks = self.core.preflight().current().await;
            checks
                .into_iter()
                .find(|c| c.provider == provider)
                .map(|c| (c.ok, format!("{provider}: {}", c.message)))
        };
        let (probes, provider) = tokio::join!(probes, provider);
        let accepting = self.core.readiness().phase() == Phase::Ready;
        let report = probe::report(&probes, provider.clone(), accepting);
        self.record(&probes, provider.as_ref(), &report);
        report
    }

    fn record(&self, probes: &[Probe], provider: Option<&(bool, String)>, report: &HealthReport) {
        let metrics = self.core.metrics();
        if let (Some((ok, _)), Some(name)) = (provider, self.provider) {
            metrics
                .llm_provider_up
                .get_or_create(&ProviderLabel {
                    provider: name.to_owned(),
                })
                .set(i64::from(*ok));
        }
        for p in probes {
            metrics
                .downstream_up
                .get_or_create(&DownstreamLabel {
                    agent: self.agent.clone(),
                    server: p.server.clone(),
                })
                .set(i64::from(p.problem.is_none()));
        }
        metrics
            .agent_health_status
            .get_or_create(&AgentLabel {
                agent: self.agent.clone(),
            })
            .set(report.status.gauge());
    }
}
