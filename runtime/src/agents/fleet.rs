//! Building the deployment's agents: one shared client per LLM provider, and each agent with
//! its model, sampling defaults and tools — its sub-agents built first (the configuration has
//! already refused cycles), each offered to it in-process.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::agents::a2a_tools::A2aAgents;
use crate::agents::agent_loop::{
    Agent, Answering, LlmAgent, Passthrough, Remembering, SubAgents, Tck, ToolPassthrough,
    ToolSource, Toolbox,
};
use crate::agents::llm::anthropic::AnthropicClient;
use crate::agents::llm::openai::OpenAiClient;
use crate::agents::llm::retry::RetryPolicy;
use crate::agents::llm::{LlmError, LlmProvider};
use crate::agents::mcp_client::McpServers;
use crate::config::deployment::{
    AgentDef, Deployment, ModelRef, OpenAiDialect, ProviderSettings, ReplyAs, ServerKind, ServerRef,
};
use crate::config::sampling::{DropWarnings, Target};
use crate::stores::conversations::ConversationStore;

/// Longest a tool call may take before the model is told it timed out.
pub const TOOL_TIMEOUT: Duration = Duration::from_mins(1);

/// Every agent of a deployment, by name.
pub type Agents = BTreeMap<String, Arc<dyn Agent>>;

/// The deployment's agents and, per agent, its downstream MCP servers (for health and
/// warm-up; the agent itself reaches them through its toolbox).
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub agents: Agents,
    pub downstream: BTreeMap<String, Arc<McpServers>>,
    /// What a turn's span says of each agent.
    pub about: BTreeMap<String, AgentAbout>,
}

/// What a turn's `invoke_agent` span says of its agent: the provider and the model it runs on
/// (none for an agent without a model), and its description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentAbout {
    pub provider: Option<&'static str>,
    pub model: Option<String>,
    pub description: Option<String>,
}

impl AgentAbout {
    fn of(def: &AgentDef) -> Self {
        let (provider, model) = match &def.model {
            ModelRef::OpenAi(model) => (Some(crate::agents::llm::openai::PROVIDER), Some(model)),
            ModelRef::Anthropic(model) => {
                (Some(crate::agents::llm::anthropic::PROVIDER), Some(model))
            }
            ModelRef::Passthrough | ModelRef::Tck => (None, None),
        };
        Self {
            provider,
            model: model.cloned(),
            description: Some(def.description.clone()).filter(|d| !d.is_empty()),
        }
    }
}

/// One downstream server of one agent, as last seen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DownstreamState {
    pub agent: String,
    pub server: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Fleet {
    /// A fleet of one agent without downstream servers (tests, embedding).
    pub fn single(name: &str, agent: Arc<dyn Agent>) -> Self {
        Self {
            agents: BTreeMap::from([(name.to_owned(), agent)]),
            downstream: BTreeMap::new(),
            about: BTreeMap::new(),
        }
    }

    /// Connects every agent's downstream servers and lists their tools, concurrently, so a
    /// server that is down is reported (logs, `/healthz`) before the first task needs it.
    pub async fn warm_up(&self) {
        let nobody = crate::agents::agent_loop::Bearer::default();
        futures::future::join_all(self.downstream.values().map(|d| d.tools(&nobody))).await;
    }

    /// Every agent's downstream servers as last seen.
    pub fn downstream_states(&self) -> Vec<DownstreamState> {
        let mut out = Vec::new();
        for (agent, servers) in &self.downstream {
            for status in servers.status() {
                out.push(DownstreamState {
                    agent: agent.clone(),
                    server: status.server,
                    ok: status.problem.is_none(),
                    problem: status.problem,
                });
            }
        }
        out
    }
}

/// The provider clients, created once and shared by every agent that uses them.
struct Providers<'a> {
    deployment: &'a Deployment,
    openai: Option<Arc<dyn LlmProvider>>,
    anthropic: Option<Arc<dyn LlmProvider>>,
}

fn settings(s: Option<&ProviderSettings>) -> ProviderSettings {
    s.cloned().unwrap_or_default()
}

impl Providers<'_> {
    fn openai(&mut self) -> Result<(Arc<dyn LlmProvider>, bool), LlmError> {
        let s = settings(self.deployment.openai.as_ref());
        let native = s.openai_dialect() == OpenAiDialect::Openai;
        if self.openai.is_none() {
            self.openai = Some(Arc::new(OpenAiClient::new(&s, RetryPolicy::default())?));
        }
        Ok((Arc::clone(self.openai.as_ref().expect("just set")), native))
    }

    fn anthropic(&mut self) -> Result<Arc<dyn LlmProvider>, LlmError> {
        if self.anthropic.is_none() {
            let s = settings(self.deployment.anthropic.as_ref());
            self.anthropic = Some(Arc::new(AnthropicClient::new(&s, RetryPolicy::default())?));
        }
        Ok(Arc::clone(self.anthropic.as_ref().expect("just set")))
    }
}

/// Builds every agent of `deployment`.
pub fn build(
    deployment: &Deployment,
    sessions: Option<&Arc<dyn ConversationStore>>,
) -> Result<Fleet, LlmError> {
    let mut providers = Providers {
        deployment,
        openai: None,
        anthropic: None,
    };
    let warnings = Arc::new(DropWarnings::default());
    let mut built: Agents = BTreeMap::new();
    let mut downstream = BTreeMap::new();
    let mut about = BTreeMap::new();
    // Sub-agents first: validation ordered every agent after the agents it uses.
    for def in deployment
        .start_order
        .iter()
        .filter_map(|name| deployment.agent(name))
    {
        let (agent, servers) = build_one(
            deployment,
            def,
            &built,
            &mut providers,
            &warnings,
            sessions.cloned(),
        )?;
        built.insert(def.name.clone(), agent);
        about.insert(def.name.clone(), AgentAbout::of(def));
        if let Some(servers) = servers {
            downstream.insert(def.name.clone(), servers);
        }
    }
    Ok(Fleet {
        agents: built,
        downstream,
        about,
    })
}

/// An agent, and its downstream servers when it has a toolbox.
type BuiltAgent = (Arc<dyn Agent>, Option<Arc<McpServers>>);

fn build_one(
    deployment: &Deployment,
    def: &AgentDef,
    built: &Agents,
    providers: &mut Providers<'_>,
    warnings: &Arc<DropWarnings>,
    sessions: Option<Arc<dyn ConversationStore>>,
) -> Result<BuiltAgent, LlmError> {
    let (tools, servers) = toolbox(deployment, def, built);
    let (provider, model, target) = match &def.model {
        ModelRef::Passthrough if def.servers.is_empty() => {
            return Ok((Arc::new(Remembering::new(Passthrough, sessions)), None));
        }
        ModelRef::Passthrough => {
            let agent = Remembering::new(ToolPassthrough::new(tools), sessions);
            return Ok((Arc::new(agent), Some(servers)));
        }
        ModelRef::Tck => return Ok((Arc::new(Remembering::new(Tck, sessions)), None)),
        ModelRef::OpenAi(model) => {
            let (client, native) = providers.openai()?;
            let declared = deployment.model_capabilities.reasoning;
            (
                client,
                model.clone(),
                Target::openai(native, model, declared),
            )
        }
        ModelRef::Anthropic(model) => (
            providers.anthropic()?,
            model.clone(),
            Target::Anthropic {
                model: model.clone(),
            },
        ),
    };
    let agent = Arc::new(LlmAgent {
        name: def.name.clone(),
        provider,
        model,
        instruction: def.instruction.clone(),
        defaults: def.request_params.clone(),
        target,
        vision: deployment.model_capabilities.vision,
        max_output_tokens: deployment.model_capabilities.max_output_tokens,
        context_window: deployment.model_capabilities.context_window,
        compaction: def.compaction,
        warnings: Arc::clone(warnings),
        tools,
        max_iterations: def.max_iterations,
        tool_timeout: TOOL_TIMEOUT,
        sessions,
        personalities: def.personalities.clone(),
        default_personality: def.default_personality.clone(),
        answering: Answering {
            reply_as_message: def.reply_as == ReplyAs::Message,
            may_decline: def.may_decline,
        },
    });
    Ok((agent, Some(servers)))
}

/// `def`'s tools: its sub-agents (already `built`), offered in-process, and its downstream MCP
/// servers, which are also returned for health and warm-up.
fn toolbox(
    deployment: &Deployment,
    def: &AgentDef,
    built: &Agents,
) -> (Arc<dyn ToolSource>, Arc<McpServers>) {
    let mut subagents = SubAgents::new();
    let mut prefixes = Vec::new();
    let mut mcp = BTreeMap::new();
    let mut a2a = BTreeMap::new();
    for server in &def.servers {
        match server {
            ServerRef::Agent(name) => {
                let description = deployment
                    .agent(name)
                    .map(|a| a.description.clone())
                    .unwrap_or_default();
                subagents = subagents.with(name, &description, Arc::clone(&built[name]));
                prefixes.push(name.clone());
            }
            ServerRef::Mcp(server) => {
                let def = deployment.mcp_servers[server].clone();
                match def.kind {
                    ServerKind::Mcp => mcp.insert(server.clone(), def),
                    ServerKind::A2a => a2a.insert(server.clone(), def),
                };
            }
        }
    }
    let mcp_prefixes: Vec<String> = mcp.keys().cloned().collect();
    let servers = Arc::new(McpServers::new(mcp));
    let agents = A2aAgents::new(a2a);
    let tools = Toolbox::new()
        .with(prefixes, Arc::new(subagents))
        .with(agents.names(), Arc::new(agents))
        .with(mcp_prefixes, Arc::clone(&servers) as Arc<dyn ToolSource>);
    (Arc::new(tools), servers)
}
