//! The configuration files as written: `agents.yaml` (Pallas topology keys, agent definitions,
//! and optionally the fast-agent keys), `fastagent.config.yaml` and `fastagent.secrets.yaml`.
//! Unknown keys are ignored so that existing fast-agent files load unchanged.

use std::collections::BTreeMap;

use daedalus_contract::AgentSkill;
use serde::Deserialize;

/// The merged document of all configuration files.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct DeploymentFile {
    pub(super) name: Option<String>,
    pub(super) version: Option<String>,
    pub(super) host: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) registry_port: Option<u16>,
    pub(super) default_model: Option<String>,
    pub(super) model_capabilities: Option<CapabilitiesFile>,
    pub(super) openai: Option<ProviderFile>,
    pub(super) anthropic: Option<ProviderFile>,
    pub(super) mcp: Option<McpFile>,
    pub(super) logger: Option<LoggerFile>,
    /// Inbound authentication (the `AUTH_*` variables win key by key).
    pub(super) auth: Option<crate::platform::identity::plan::AuthSettings>,
    /// What each principal, tenant and agent may spend (unknown keys refused).
    pub(super) budgets: Option<super::budgets::BudgetPlan>,
    /// Per model (`<provider>.<model>`): its price (unknown keys refused).
    pub(super) models: BTreeMap<String, ModelFile>,
    pub(super) agents: BTreeMap<String, AgentFile>,
}

/// One model's entry in `models:`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct ModelFile {
    pub(super) price: Option<super::budgets::PriceFile>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub(super) struct CapabilitiesFile {
    pub(super) vision: Option<bool>,
    pub(super) context_window: Option<u32>,
    pub(super) max_output_tokens: Option<u32>,
    /// Whether the model reasons before it answers (takes `effort`).
    pub(super) reasoning: Option<bool>,
}

/// An `openai:` or `anthropic:` block.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ProviderFile {
    pub(super) api_key: Option<String>,
    pub(super) base_url: Option<String>,
    /// Extra headers sent with every request (fast-agent calls them `default_headers`).
    #[serde(alias = "default_headers")]
    pub(super) headers: BTreeMap<String, String>,
    /// Request timeout in seconds.
    pub(super) timeout: Option<f64>,
    /// Use the caller's bearer as this provider's credential, per call.
    pub(super) forward_inbound_auth: bool,
    /// `openai` (OpenAI's own API and its rules) or `compatible`; `openai:` blocks only.
    pub(super) dialect: Option<super::OpenAiDialect>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct McpFile {
    pub(super) servers: BTreeMap<String, McpServerFile>,
    /// The trust every `type: a2a` server's card is verified against, unless it has its own.
    pub(super) trust: Option<TrustFile>,
}

/// `trust:`: how an A2A agent's card must be signed, and by which keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct TrustFile {
    pub(super) policy: Option<String>,
    pub(super) jwks_file: Option<std::path::PathBuf>,
    pub(super) jwks_url: Option<String>,
    /// Pinned public keys, as JWKs.
    pub(super) keys: Vec<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct McpServerFile {
    /// `mcp` (the default) or `a2a`.
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) url: Option<String>,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) forward_inbound_auth: bool,
    /// The runtime's credential for this server (`oauth2_client_credentials` or
    /// `token_exchange`).
    pub(super) auth: Option<DownstreamAuthFile>,
    /// fast-agent's per-server call timeout, in seconds.
    pub(super) read_timeout_seconds: Option<f64>,
    /// Every tool of this server may be called again when a call's fate is unknown (a turn
    /// resumed after its runtime stopped mid-call).
    pub(super) idempotent: bool,
    /// For `type: a2a`: how its card must be signed (else `mcp.trust`).
    pub(super) trust: Option<TrustFile>,
}

/// An `mcp.servers.<name>.auth` block.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct DownstreamAuthFile {
    /// `oauth2_client_credentials` or `token_exchange`.
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) token_url: Option<String>,
    pub(super) client_id: Option<String>,
    /// The secret itself (`${VAR}` takes it from the environment), or:
    pub(super) client_secret: Option<String>,
    /// a file holding it.
    pub(super) client_secret_file: Option<std::path::PathBuf>,
    pub(super) scope: Option<String>,
    pub(super) audience: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LoggerFile {
    pub(super) level: Option<String>,
}

/// One `agents.<name>` entry: Pallas topology keys plus the agent's definition.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct AgentFile {
    /// Pallas: a Python module holding the agent; not loadable here.
    pub(super) module: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) title: Option<String>,
    pub(super) description: Option<String>,
    /// Registry icon URL (absolute or relative).
    pub(super) icon: Option<String>,
    pub(super) depends_on: Vec<String>,
    pub(super) instruction: Option<String>,
    pub(super) model: Option<String>,
    pub(super) servers: Vec<String>,
    pub(super) request_params: serde_json::Map<String, serde_json::Value>,
    pub(super) max_iterations: Option<u32>,
    pub(super) skills: Option<Vec<AgentSkill>>,
    pub(super) instance_scope: Option<super::InstanceScope>,
    pub(super) compaction: Option<CompactionFile>,
    /// Named prompt overlays a call picks with `personality`.
    pub(super) personalities: BTreeMap<String, PersonalityFile>,
    pub(super) default_personality: Option<String>,
    /// `task` (the default) or `message`.
    pub(super) reply_as: Option<super::ReplyAs>,
    pub(super) card_signing: Option<super::CardSigningDef>,
    pub(super) may_decline: Option<bool>,
}

/// An agent's `compaction:` block.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct PersonalityFile {
    /// Added after the agent's instruction.
    pub(super) instruction: Option<String>,
    pub(super) description: Option<String>,
    /// Sampling over the agent's own (a call's still wins).
    pub(super) request_params: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct CompactionFile {
    pub(super) strategy: Option<daedalus_contract::CompactionStrategy>,
    pub(super) threshold: Option<f64>,
}
