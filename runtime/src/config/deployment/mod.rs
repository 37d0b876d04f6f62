//! The deployment: which agents the runtime serves, on which models, with which downstream MCP
//! servers — from `agents.yaml` (path in `AGENTS_CONFIG` or `PALLAS_AGENTS_CONFIG`, else
//! `./agents.yaml`), with the fast-agent keys read from the same file or, for a Pallas
//! deployment, from `fastagent.config.yaml` + `fastagent.secrets.yaml` beside it.
//!
//! `${VAR}` (and `${VAR:-default}`) expand from the environment; a `.env` beside the file is
//! loaded without overriding the environment. Everything is validated before anything binds,
//! and every error names the file and the key path. With no file at all, one agent named
//! `AGENT_NAME` runs on `DEFAULT_MODEL` (default `passthrough`).

pub mod budgets;
mod expand;
mod file;
mod models;
mod servers;
mod trust;
mod validate;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use daedalus_contract::AgentSkill;
use serde::{Deserialize, Serialize, Serializer};

use self::file::DeploymentFile;
pub use self::models::{
    ModelCapabilities, ModelRef, OpenAiDialect, Origin, ProviderOrigins, ProviderSettings,
    parse_model,
};

/// Default cap of LLM turns in one task.
pub const DEFAULT_MAX_ITERATIONS: u32 = 12;

/// A validated deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deployment {
    /// The files it came from; empty for the zero-config default.
    pub sources: Vec<PathBuf>,
    pub name: String,
    pub version: String,
    pub host: String,
    pub namespace: Option<String>,
    pub registry_port: Option<u16>,
    pub default_model: ModelRef,
    pub model_capabilities: ModelCapabilities,
    pub openai: Option<ProviderSettings>,
    pub anthropic: Option<ProviderSettings>,
    pub mcp_servers: BTreeMap<String, McpServer>,
    pub log_level: Option<String>,
    pub agents: Vec<AgentDef>,
    /// The agents' names, each after every agent it depends on or uses as a sub-agent: the
    /// order agents are built and their own ports started in. Computed once, by validation.
    pub start_order: Vec<String>,
    /// `${VAR}`s that were not set (expanded to ""), with the key that used them.
    pub unset_variables: Vec<String>,
    /// `--agent`: the one agent this process serves (its sub-agents are built, not served);
    /// `None` serves every agent.
    pub serve_only: Option<String>,
    /// The file's `auth:` block, as written (validated with the `AUTH_*` flags over it, and
    /// shown as the plan: `Config::auth`).
    #[serde(skip)]
    pub auth: crate::platform::identity::plan::AuthSettings,
    /// The `budgets:` block; `None`: nothing is limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budgets: Option<budgets::BudgetPlan>,
}

/// Why no agent of the deployment is the one to serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentChoiceError {
    #[error("no agent {name:?} is configured (agents: {agents})")]
    Unknown { name: String, agents: String },
    #[error("several agents could serve the A2A face ({agents}); set AGENT_NAME to one of them")]
    Several { agents: String },
}

impl AgentChoiceError {
    /// No agent `name` in `deployment`, which names its own.
    pub fn unknown(name: &str, deployment: &Deployment) -> Self {
        Self::Unknown {
            name: name.to_owned(),
            agents: deployment.agent_names(),
        }
    }
}

/// The registry's port when agents have ports of their own and the file names none (Pallas).
pub const DEFAULT_REGISTRY_PORT: u16 = 24200;

impl Deployment {
    /// The agents' names, as a list for a person (`a, b, c`).
    pub fn agent_names(&self) -> String {
        self.agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The deployment as `pallas --agent <name>` runs it: only `name` is served, and only it
    /// and the sub-agents it calls (in-process, so they must be built) are kept. Agents it
    /// `depends_on` run elsewhere.
    pub fn only(mut self, name: &str) -> Result<Self, AgentChoiceError> {
        if self.agent(name).is_none() {
            return Err(AgentChoiceError::unknown(name, &self));
        }
        let mut kept = std::collections::BTreeSet::from([name.to_owned()]);
        let mut todo = vec![name.to_owned()];
        while let Some(next) = todo.pop() {
            let Some(def) = self.agent(&next) else {
                continue;
            };
            for server in &def.servers {
                if let ServerRef::Agent(sub) = server
                    && kept.insert(sub.clone())
                {
                    todo.push(sub.clone());
                }
            }
        }
        self.agents.retain(|a| kept.contains(&a.name));
        self.start_order.retain(|a| kept.contains(a));
        self.serve_only = Some(name.to_owned());
        Ok(self)
    }

    /// Whether this process serves `agent` (on MCP and, when asked, the A2A face).
    pub fn serves(&self, agent: &str) -> bool {
        self.serve_only.as_deref().is_none_or(|only| only == agent)
    }
}

/// What a server entry is (`mcp.servers.<name>.type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// An MCP server (Streamable HTTP) at `url`.
    #[default]
    Mcp,
    /// Another A2A agent, its card at `url` (or at `url/.well-known/agent-card.json`): each of
    /// its skills is a tool.
    A2a,
}

/// A downstream server: an MCP server, or another A2A agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServer {
    #[serde(rename = "type")]
    pub kind: ServerKind,
    /// Shown with userinfo and query string masked.
    #[serde(serialize_with = "masked_url")]
    pub url: String,
    #[serde(serialize_with = "mask_values")]
    pub headers: BTreeMap<String, String>,
    /// Forward the inbound request's bearer token to this server (explicit opt-in; the MCP
    /// spec forbids token passthrough by default).
    pub forward_inbound_auth: bool,
    /// The runtime's own credential for this server, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<DownstreamAuth>,
    /// How long one tool call may take (`read_timeout_seconds`); the agent's 60 s otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<std::time::Duration>,
    /// Every tool of this server may be called again when a call's fate is unknown
    /// (`idempotent: true`; a tool's own `readOnlyHint` or `idempotentHint` says so for it).
    pub idempotent: bool,
    /// For an A2A agent: how its card must be signed, and by which keys (`trust:`, else
    /// `mcp.trust`; off by default).
    #[serde(skip_serializing_if = "CardTrust::is_off")]
    pub trust: CardTrust,
}

/// How an A2A agent's card must be signed (A2A §8.4), and the keys trusted to sign it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CardTrust {
    pub policy: TrustPolicy,
    /// A JWKS file (read again at each verification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<std::path::PathBuf>,
    /// A JWKS URL (fetched, kept for the card's lifetime, fetched again for an unknown `kid`);
    /// a signature's `jku` is followed only when it is this URL.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "masked_optional_url"
    )]
    pub jwks_url: Option<String>,
    /// Pinned public keys (JWKs, each with its `kid`), as JSON.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

impl CardTrust {
    pub fn is_off(&self) -> bool {
        self.policy == TrustPolicy::Off
    }
}

/// What a card's signatures must be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustPolicy {
    /// A card that is not signed by a trusted key is not used: its agent offers no tools.
    Required,
    /// A signed card must verify; an unsigned one is used.
    IfSigned,
    /// Signatures are not looked at.
    #[default]
    Off,
}

#[expect(clippy::ref_option, reason = "serde's serialize_with passes &Option")]
fn masked_optional_url<S: serde::Serializer>(
    url: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    url.as_deref().map(crate::config::redact_url).serialize(s)
}

/// The credential the runtime presents to a downstream server (`mcp.servers.<name>.auth`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DownstreamAuth {
    /// The runtime's own token, from an OAuth2 client-credentials grant: the server sees the
    /// runtime.
    Oauth2ClientCredentials(daedalus_contract::credentials::OAuthClient),
    /// The caller's token exchanged (RFC 8693) for one whose audience is the server: the
    /// server sees the end user.
    TokenExchange(daedalus_contract::credentials::OAuthClient),
}

/// How an agent keeps a conversation inside its model's budget (`agents.<name>.compaction`):
/// once the conversation passes `threshold` of the budget (`context_window` minus
/// `max_output_tokens`), its oldest whole turns are summarized or dropped until it fills half
/// of that.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompactionPolicy {
    pub strategy: daedalus_contract::CompactionStrategy,
    /// A fraction of the budget, in (0, 1].
    pub threshold: f64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            strategy: daedalus_contract::CompactionStrategy::Truncate,
            threshold: 0.8,
        }
    }
}

/// Which conversation an MCP call continues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceScope {
    /// One conversation for everybody.
    #[default]
    Shared,
    /// One conversation per MCP session.
    Connection,
    /// No memory between calls.
    Request,
}

/// What an agent may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "lowercase")]
pub enum ServerRef {
    /// A downstream MCP server from `mcp.servers`.
    Mcp(String),
    /// Another agent of this deployment, called in-process.
    Agent(String),
}

/// One agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentDef {
    pub name: String,
    pub title: String,
    pub description: String,
    /// Registry icon URL.
    pub icon: Option<String>,
    pub port: Option<u16>,
    pub depends_on: Vec<String>,
    pub instruction: String,
    pub model: ModelRef,
    pub servers: Vec<ServerRef>,
    /// Sampling parameters as configured (`null` clears a default); resolved per provider later.
    pub request_params: crate::config::sampling::SamplingParams,
    pub max_iterations: u32,
    pub skills: Vec<AgentSkill>,
    pub instance_scope: InstanceScope,
    pub compaction: CompactionPolicy,
    /// Named prompt overlays (`personalities.<p>`), by name.
    pub personalities: BTreeMap<String, Personality>,
    /// The personality of a call that names none.
    pub default_personality: Option<String>,
    /// What a completed turn answers with (`reply_as`): a Task (the default) or a Message.
    pub reply_as: ReplyAs,
    /// Whether the model may decline a request (`may_decline`): the task then ends rejected.
    pub may_decline: bool,
    /// The key that signs this agent's card when it is the one served (`card_signing`; the
    /// `CARD_SIGNING_*` settings win over it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card_signing: Option<CardSigningDef>,
}

/// `agents.<name>.card_signing`: where the agent's card signing key is, and how signatures
/// name it (the key is read, and proven, when the configuration is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardSigningDef {
    pub key_file: std::path::PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jku: Option<String>,
}

/// What an agent's completed turn answers with on the A2A bindings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplyAs {
    /// A Task holding the answer as its artifact.
    #[default]
    Task,
    /// A Message holding the answer (the task it began completes with it).
    Message,
}

/// A prompt overlay a call picks with `personality`: text added after the agent's instruction,
/// and sampling over the agent's (a call's own sampling still wins).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Personality {
    pub instruction: String,
    pub description: String,
    pub request_params: crate::config::sampling::SamplingParams,
}

/// Why the deployment cannot be used. Every variant names the file and the key path.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not valid YAML: {message}")]
    Yaml { file: String, message: String },
    #[error("{file}: {path}: {message}")]
    Shape {
        file: String,
        path: String,
        message: String,
    },
    #[error(
        "{file}: {path}: unknown model provider in {model:?}; use passthrough, openai.<model> or anthropic.<model>"
    )]
    UnknownProvider {
        file: String,
        path: String,
        model: String,
    },
    #[error("{file}: agents.{agent}.servers: {server:?} is neither in mcp.servers nor an agent")]
    UnknownServer {
        file: String,
        agent: String,
        server: String,
    },
    #[error("{file}: agents.{agent}.depends_on: {dependency:?} is not an agent")]
    UnknownDependency {
        file: String,
        agent: String,
        dependency: String,
    },
    #[error("{file}: agents: depends_on forms a cycle: {}", .cycle.join(" -> "))]
    DependencyCycle { file: String, cycle: Vec<String> },
    #[error("{file}: {second}: port {port} is already used by {first}")]
    DuplicatePort {
        file: String,
        port: u16,
        first: String,
        second: String,
    },
    #[error("{file}: agents.{agent}: {message}")]
    BadAgentName {
        file: String,
        agent: String,
        message: String,
    },
    #[error(
        "{file}: agents.{agent}.module: {module:?} names a Python module, which this runtime cannot load; define the agent inline instead: instruction, model, servers (and request_params, max_iterations) under agents.{agent}"
    )]
    ModuleWithoutDefinition {
        file: String,
        agent: String,
        module: String,
    },
    #[error("{file}: mcp.servers.{server}.url: required")]
    ServerWithoutUrl { file: String, server: String },
    #[error("{file}: agents: no agents defined")]
    NoAgents { file: String },
}

/// Where configuration is looked up: the environment and the working directory.
#[derive(Clone)]
pub struct Sources<'a> {
    /// Environment lookup (the process environment in production).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Directory in which `agents.yaml` is looked for when no variable names a file.
    pub cwd: PathBuf,
    /// `AGENT_NAME` and `DEFAULT_MODEL` for the zero-config default.
    pub agent_name: String,
    pub default_model: String,
}

impl std::fmt::Debug for Sources<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("cwd", &self.cwd)
            .field("agent_name", &self.agent_name)
            .finish_non_exhaustive()
    }
}

impl Deployment {
    /// Finds, reads and validates the configuration.
    pub fn load(sources: &Sources<'_>) -> Result<Deployment, DeploymentError> {
        let explicit =
            (sources.env)("AGENTS_CONFIG").or_else(|| (sources.env)("PALLAS_AGENTS_CONFIG"));
        let agents_file = match explicit {
            Some(path) => Some(resolve(&sources.cwd, &path)),
            None => Some(sources.cwd.join("agents.yaml")).filter(|p| p.is_file()),
        };
        match agents_file {
            None => Self::zero_config(sources),
            Some(path) => Self::from_files(&path, sources.env, &sources.default_model),
        }
    }

    /// One agent named `AGENT_NAME` on `DEFAULT_MODEL`.
    fn zero_config(sources: &Sources<'_>) -> Result<Deployment, DeploymentError> {
        let file = "(environment)".to_owned();
        let model = parse_model(&sources.default_model).ok_or_else(|| {
            DeploymentError::UnknownProvider {
                file: file.clone(),
                path: "DEFAULT_MODEL".into(),
                model: sources.default_model.clone(),
            }
        })?;
        let mut doc = DeploymentFile::default();
        doc.agents
            .insert(sources.agent_name.clone(), file::AgentFile::default());
        let mut deployment = validate::build(&file, doc, &model)?;
        deployment.sources.clear();
        deployment.provider_environment(sources.env);
        Ok(deployment)
    }

    /// Reads `agents` (+ the fast-agent files beside it and `.env`), expands and validates.
    fn from_files(
        agents: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        fallback_model: &str,
    ) -> Result<Deployment, DeploymentError> {
        let dir = agents.parent().map(Path::to_path_buf).unwrap_or_default();
        let dotenv = load_dotenv(&dir.join(".env"))?;
        let lookup = |k: &str| env(k).or_else(|| dotenv.get(k).cloned());

        let mut texts = Vec::new();
        let mut sources = Vec::new();
        for (path, required) in [
            (dir.join("fastagent.config.yaml"), false),
            (dir.join("fastagent.secrets.yaml"), false),
            (agents.to_path_buf(), true),
        ] {
            if !required && !path.is_file() {
                continue;
            }
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|source| DeploymentError::Read {
                file: shown.clone(),
                source,
            })?;
            texts.push((shown, text));
            sources.push(path);
        }
        let mut deployment = Self::from_texts(
            &agents.display().to_string(),
            &texts,
            &lookup,
            fallback_model,
        )?;
        deployment.sources = sources;
        Ok(deployment)
    }

    /// Parses, expands, merges (later documents over earlier ones) and validates YAML
    /// documents, each `(shown name, text)`; errors name `file`'s keys. A pure function: the
    /// environment comes through `lookup`.
    pub fn from_texts(
        file: &str,
        texts: &[(String, String)],
        lookup: &dyn Fn(&str) -> Option<String>,
        fallback_model: &str,
    ) -> Result<Deployment, DeploymentError> {
        let mut merged = serde_json::Value::Object(serde_json::Map::new());
        let mut unset = Vec::new();
        for (shown, text) in texts {
            let mut value: serde_json::Value = if text.trim().is_empty() {
                serde_json::Value::Object(serde_json::Map::new())
            } else {
                serde_saphyr::from_str(text).map_err(|e| DeploymentError::Yaml {
                    file: shown.clone(),
                    message: e.to_string(),
                })?
            };
            expand::expand(&mut value, lookup, "", &mut |key, var| {
                unset.push(format!("{shown}: {key}: ${{{var}}}"));
            });
            deep_merge(&mut merged, value);
        }
        let file = file.to_owned();
        let doc: DeploymentFile = daedalus_contract::read::from_value(merged).map_err(|e| {
            let (path, message) = match e {
                daedalus_contract::ReadError::Shape { path, message } => (path, message),
                other @ daedalus_contract::ReadError::Syntax { .. } => {
                    (".".to_owned(), other.to_string())
                }
            };
            DeploymentError::Shape {
                file: file.clone(),
                path,
                message,
            }
        })?;
        let default_model = doc
            .default_model
            .clone()
            .unwrap_or_else(|| fallback_model.to_owned());
        let model =
            parse_model(&default_model).ok_or_else(|| DeploymentError::UnknownProvider {
                file: file.clone(),
                path: "default_model".into(),
                model: default_model.clone(),
            })?;
        let mut deployment = validate::build(&file, doc, &model)?;
        deployment.unset_variables = unset;
        deployment.provider_environment(lookup);
        Ok(deployment)
    }

    /// The agent named `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }
}

fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { cwd.join(p) }
}

/// `.env` entries, if the file exists.
fn load_dotenv(path: &Path) -> Result<HashMap<String, String>, DeploymentError> {
    if !path.is_file() {
        return Ok(HashMap::new());
    }
    let shown = path.display().to_string();
    let iter = dotenvy::from_path_iter(path).map_err(|e| DeploymentError::Yaml {
        file: shown.clone(),
        message: e.to_string(),
    })?;
    iter.map(|item| {
        item.map_err(|e| DeploymentError::Yaml {
            file: shown.clone(),
            message: e.to_string(),
        })
    })
    .collect()
}

/// Merges `overlay` into `base`: objects key by key, anything else replaced.
fn deep_merge(base: &mut serde_json::Value, overlay: serde_json::Value) {
    match (base, overlay) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => deep_merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn masked_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::config::redact_url(url))
}

#[expect(clippy::ref_option, reason = "serde's serialize_with passes &Option")]
fn masked_url_option<S: Serializer>(url: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match url {
        Some(url) => s.serialize_str(&crate::config::redact_url(url)),
        None => s.serialize_none(),
    }
}

#[expect(clippy::ref_option, reason = "serde's serialize_with passes &Option")]
fn mask_option<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(secret) if !secret.is_empty() => s.serialize_str("***"),
        Some(_) => s.serialize_str(""),
        None => s.serialize_none(),
    }
}

/// Header values may hold credentials (`Authorization: Bearer ...`): all are masked.
fn mask_values<S: Serializer>(v: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(v.keys().map(|k| (k, "***")))
}

#[cfg(test)]
mod tests;
