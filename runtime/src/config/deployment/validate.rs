//! Turning the merged file into a validated [`Deployment`]: defaults, model strings, server and
//! dependency references, cycles, ports, names. The downstream servers are checked in
//! [`super::servers`].

use std::collections::{BTreeMap, BTreeSet};

use daedalus_contract::AgentSkill;
use daedalus_contract::container::validate_agent_name;

use super::file::{CompactionFile, DeploymentFile, ProviderFile};
use super::servers::mcp_servers_of;
use super::{
    AgentDef, CompactionPolicy, DEFAULT_MAX_ITERATIONS, Deployment, DeploymentError,
    ModelCapabilities, ModelRef, ProviderSettings, ServerRef, parse_model,
};
use crate::config::sampling::SamplingParams;

pub(super) fn build(
    file: &str,
    doc: DeploymentFile,
    default_model: &ModelRef,
) -> Result<Deployment, DeploymentError> {
    if doc.agents.is_empty() {
        return Err(DeploymentError::NoAgents {
            file: file.to_owned(),
        });
    }
    let mcp_servers = mcp_servers_of(file, doc.mcp.unwrap_or_default())?;
    let agent_names: BTreeSet<&str> = doc.agents.keys().map(String::as_str).collect();

    let mut agents = Vec::with_capacity(doc.agents.len());
    for (name, def) in &doc.agents {
        agents.push(agent_def(file, name, def, default_model, |server| {
            if agent_names.contains(server) {
                Some(ServerRef::Agent(server.to_owned()))
            } else {
                mcp_servers
                    .contains_key(server)
                    .then(|| ServerRef::Mcp(server.to_owned()))
            }
        })?);
    }
    let start_order = start_order(file, &agents)?;
    // Pallas: agents on their own ports get a registry, on 24200 unless the file says.
    let registry_port = doc.registry_port.or_else(|| {
        agents
            .iter()
            .any(|a| a.port.is_some())
            .then_some(super::DEFAULT_REGISTRY_PORT)
    });
    check_ports(file, registry_port, &agents)?;

    let prices = model_prices(file, &doc.models)?;
    let budgets = doc
        .budgets
        .map(|plan| priced_plan(file, plan, prices, &agents))
        .transpose()?;
    Ok(Deployment {
        sources: Vec::new(),
        name: doc.name.unwrap_or_else(|| "daedalus".to_owned()),
        version: doc.version.unwrap_or_else(|| "1.0.0".to_owned()),
        host: doc.host.unwrap_or_else(|| "localhost".to_owned()),
        namespace: doc.namespace,
        registry_port,
        default_model: default_model.clone(),
        model_capabilities: model_capabilities(doc.model_capabilities.unwrap_or_default()),
        openai: doc
            .openai
            .map(|p| provider(file, "openai", p))
            .transpose()?,
        anthropic: doc
            .anthropic
            .map(|p| provider(file, "anthropic", p))
            .transpose()?,
        mcp_servers,
        log_level: doc.logger.and_then(|l| l.level),
        agents,
        start_order,
        unset_variables: Vec::new(),
        serve_only: None,
        auth: doc.auth.unwrap_or_default(),
        budgets,
    })
}

/// What `model_capabilities:` says of the models, with the defaults for what it leaves out.
fn model_capabilities(caps: super::file::CapabilitiesFile) -> ModelCapabilities {
    ModelCapabilities {
        vision: caps.vision.unwrap_or(false),
        context_window: caps.context_window.unwrap_or(131_072),
        max_output_tokens: caps.max_output_tokens.unwrap_or(16_384),
        reasoning: caps.reasoning,
    }
}

/// Agent `name`'s definition, checked: its name, its module, its model (`default_model`
/// when it names none), its servers and dependencies (`server_named` tells what a name in
/// `servers:` is: another agent, an MCP server, or nothing known), and its settings.
fn agent_def(
    file: &str,
    name: &String,
    def: &super::file::AgentFile,
    default_model: &ModelRef,
    server_named: impl Fn(&str) -> Option<ServerRef>,
) -> Result<AgentDef, DeploymentError> {
    let bad_name = |message: String| DeploymentError::BadAgentName {
        file: file.to_owned(),
        agent: name.clone(),
        message,
    };
    validate_agent_name(name).map_err(bad_name)?;
    if let Some(module) = &def.module {
        let inline = def.instruction.is_some() || def.model.is_some() || !def.servers.is_empty();
        if !inline {
            return Err(DeploymentError::ModuleWithoutDefinition {
                file: file.to_owned(),
                agent: name.clone(),
                module: module.clone(),
            });
        }
    }
    let model = match &def.model {
        None => default_model.clone(),
        Some(m) => parse_model(m).ok_or_else(|| DeploymentError::UnknownProvider {
            file: file.to_owned(),
            path: format!("agents.{name}.model"),
            model: m.clone(),
        })?,
    };
    let servers = servers_of(file, name, def, server_named)?;
    if def.max_iterations == Some(0) {
        return Err(DeploymentError::Shape {
            file: file.to_owned(),
            path: format!("agents.{name}.max_iterations"),
            message: "must be at least 1".to_owned(),
        });
    }
    let compaction = compaction_of(file, name, def.compaction.as_ref())?;
    let (personalities, default_personality) = personalities_of(file, name, def)?;
    let description = def.description.clone().unwrap_or_default();
    Ok(AgentDef {
        name: name.clone(),
        title: def.title.clone().unwrap_or_else(|| title_case(name)),
        skills: def
            .skills
            .clone()
            .unwrap_or_else(|| vec![default_skill(name, &description)]),
        description,
        icon: def.icon.clone().filter(|i| !i.is_empty()),
        port: def.port,
        depends_on: def.depends_on.clone(),
        instruction: def.instruction.clone().unwrap_or_default(),
        model,
        servers,
        request_params: sampling_of(file, name, &def.request_params)?,
        max_iterations: def.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
        instance_scope: def.instance_scope.unwrap_or_default(),
        compaction,
        personalities,
        default_personality,
        reply_as: def.reply_as.unwrap_or_default(),
        may_decline: def.may_decline.unwrap_or(false),
        card_signing: def.card_signing.clone(),
    })
}

/// Agent `name`'s servers, each an MCP server or an agent the file names; each of its
/// `depends_on` must be an agent too.
fn servers_of(
    file: &str,
    name: &str,
    def: &super::file::AgentFile,
    server_named: impl Fn(&str) -> Option<ServerRef>,
) -> Result<Vec<ServerRef>, DeploymentError> {
    let mut servers = Vec::with_capacity(def.servers.len());
    for server in &def.servers {
        let Some(known) = server_named(server) else {
            return Err(DeploymentError::UnknownServer {
                file: file.to_owned(),
                agent: name.to_owned(),
                server: server.clone(),
            });
        };
        servers.push(known);
    }
    for dependency in &def.depends_on {
        if !matches!(server_named(dependency), Some(ServerRef::Agent(_))) {
            return Err(DeploymentError::UnknownDependency {
                file: file.to_owned(),
                agent: name.to_owned(),
                dependency: dependency.clone(),
            });
        }
    }
    Ok(servers)
}

/// The prices of `models:`, by `<provider>.<model>`; a bad entry refused naming its key.
fn model_prices(
    file: &str,
    models: &BTreeMap<String, super::file::ModelFile>,
) -> Result<BTreeMap<String, super::budgets::Price>, DeploymentError> {
    let shape = |path: String, message: String| DeploymentError::Shape {
        file: file.to_owned(),
        path,
        message,
    };
    let mut prices = BTreeMap::new();
    for (model, entry) in models {
        if !(model.starts_with("openai.") || model.starts_with("anthropic.")) {
            let message = "a model is named <provider>.<model>, the provider openai or anthropic";
            return Err(shape(format!("models.{model}"), message.to_owned()));
        }
        if let Some(price) = entry.price {
            let price = price
                .price()
                .map_err(|(key, message)| shape(format!("models.{model}.price.{key}"), message))?;
            prices.insert(model.clone(), price);
        }
    }
    Ok(prices)
}

/// `plan` validated, with the models' `prices`; every agent's model priced when a scope
/// counts cost.
fn priced_plan(
    file: &str,
    mut plan: super::budgets::BudgetPlan,
    prices: BTreeMap<String, super::budgets::Price>,
    agents: &[AgentDef],
) -> Result<super::budgets::BudgetPlan, DeploymentError> {
    let shape = |path: String, message: String| DeploymentError::Shape {
        file: file.to_owned(),
        path,
        message,
    };
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    plan.validate(&names)
        .map_err(|problem| shape(problem.path, problem.message))?;
    plan.prices = prices;
    if plan.counts_cost() {
        for agent in agents {
            let key = match &agent.model {
                ModelRef::OpenAi(model) => format!("openai.{model}"),
                ModelRef::Anthropic(model) => format!("anthropic.{model}"),
                ModelRef::Passthrough | ModelRef::Tck => continue,
            };
            if !plan.prices.contains_key(&key) {
                let message = format!(
                    "a budget counts cost_per_day, and agent {:?} calls {key}, which has no price",
                    agent.name
                );
                return Err(shape(format!("models.{key}.price"), message));
            }
        }
    }
    Ok(plan)
}

/// An agent's `compaction` block over the defaults (truncate at 0.8 of the budget).
fn compaction_of(
    file: &str,
    agent: &str,
    block: Option<&CompactionFile>,
) -> Result<CompactionPolicy, DeploymentError> {
    let mut policy = CompactionPolicy::default();
    let Some(block) = block else {
        return Ok(policy);
    };
    if let Some(strategy) = block.strategy {
        policy.strategy = strategy;
    }
    if let Some(threshold) = block.threshold {
        if !(threshold.is_finite() && threshold > 0.0 && threshold <= 1.0) {
            return Err(DeploymentError::Shape {
                file: file.to_owned(),
                path: format!("agents.{agent}.compaction.threshold"),
                message: format!("{threshold} is not a fraction of the budget in (0, 1]"),
            });
        }
        policy.threshold = threshold;
    }
    Ok(policy)
}

/// An agent's `request_params`, each of the type its key takes.
/// An agent's personalities, each checked, and its default, which must be one of them.
fn personalities_of(
    file: &str,
    agent: &str,
    def: &super::file::AgentFile,
) -> Result<(BTreeMap<String, super::Personality>, Option<String>), DeploymentError> {
    let mut personalities = BTreeMap::new();
    for (name, p) in &def.personalities {
        let path = format!("agents.{agent}.personalities.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(DeploymentError::Shape {
                file: file.to_owned(),
                path,
                message: "a personality's name holds only letters, digits, - and _".to_owned(),
            });
        }
        let request_params = SamplingParams::from_map(&p.request_params).map_err(|e| {
            let e = e.under(&format!("{path}.request_params"));
            DeploymentError::Shape {
                file: file.to_owned(),
                path: e.key,
                message: e.why,
            }
        })?;
        personalities.insert(
            name.clone(),
            super::Personality {
                instruction: p.instruction.clone().unwrap_or_default(),
                description: p.description.clone().unwrap_or_default(),
                request_params,
            },
        );
    }
    let default = def.default_personality.clone().filter(|d| !d.is_empty());
    if let Some(default) = &default
        && !personalities.contains_key(default)
    {
        return Err(DeploymentError::Shape {
            file: file.to_owned(),
            path: format!("agents.{agent}.default_personality"),
            message: format!("{default:?} is not one of the agent's personalities"),
        });
    }
    Ok((personalities, default))
}

fn sampling_of(
    file: &str,
    agent: &str,
    params: &serde_json::Map<String, serde_json::Value>,
) -> Result<SamplingParams, DeploymentError> {
    SamplingParams::from_map(params).map_err(|e| {
        let e = e.under(&format!("agents.{agent}.request_params"));
        DeploymentError::Shape {
            file: file.to_owned(),
            path: e.key,
            message: e.why,
        }
    })
}

fn provider(file: &str, key: &str, p: ProviderFile) -> Result<ProviderSettings, DeploymentError> {
    if let Some(secs) = p.timeout
        && !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0)
    {
        return Err(DeploymentError::Shape {
            file: file.to_owned(),
            path: format!("{key}.timeout"),
            message: format!("{secs} is not a number of seconds between 0 and 86400"),
        });
    }
    if key != "openai" && p.dialect.is_some() {
        return Err(DeploymentError::Shape {
            file: file.to_owned(),
            path: format!("{key}.dialect"),
            message: "only an openai: block has a dialect".to_owned(),
        });
    }
    Ok(ProviderSettings {
        api_key: p.api_key.filter(|k| !k.is_empty()),
        base_url: p
            .base_url
            .filter(|u| !u.is_empty())
            .map(|u| u.trim_end_matches('/').to_owned()),
        headers: p.headers,
        timeout_secs: p.timeout,
        forward_inbound_auth: p.forward_inbound_auth,
        dialect: p.dialect,
        origins: super::ProviderOrigins::default(),
    })
}

/// Python's `str.title()`, as Pallas uses for default titles.
fn title_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut start = true;
    for c in name.chars() {
        if c.is_alphabetic() {
            if start {
                out.extend(c.to_uppercase());
            } else {
                out.extend(c.to_lowercase());
            }
            start = false;
        } else {
            out.push(c);
            start = true;
        }
    }
    out
}

fn default_skill(agent: &str, description: &str) -> AgentSkill {
    AgentSkill {
        id: "chat".to_owned(),
        name: "Chat".to_owned(),
        description: if description.is_empty() {
            format!("Send {agent} a message and get its answer.")
        } else {
            description.to_owned()
        },
        tags: vec!["chat".to_owned()],
        examples: None,
        input_modes: None,
        output_modes: None,
    }
}

/// The agents in an order where each comes after every agent it depends on or uses as a
/// sub-agent; a cycle through `depends_on` or sub-agents is refused, naming it.
fn start_order(file: &str, agents: &[AgentDef]) -> Result<Vec<String>, DeploymentError> {
    let edges = |a: &AgentDef| -> Vec<String> {
        let subagents = a.servers.iter().filter_map(|s| match s {
            ServerRef::Agent(name) => Some(name.clone()),
            ServerRef::Mcp(_) => None,
        });
        a.depends_on.iter().cloned().chain(subagents).collect()
    };
    let graph: BTreeMap<&str, Vec<String>> =
        agents.iter().map(|a| (a.name.as_str(), edges(a))).collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut order: Vec<String> = Vec::with_capacity(agents.len());
    // In declaration order, so agents with no dependencies between them start as written.
    for start in agents.iter().map(|a| a.name.as_str()) {
        let mut path: Vec<&str> = Vec::new();
        if let Some(cycle) = visit(start, &graph, &mut path, &mut done, &mut order) {
            return Err(DeploymentError::DependencyCycle {
                file: file.to_owned(),
                cycle,
            });
        }
    }
    Ok(order)
}

fn visit<'a>(
    node: &'a str,
    graph: &'a BTreeMap<&'a str, Vec<String>>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
    order: &mut Vec<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|n| *n == node) {
        let mut cycle: Vec<String> = path[i..].iter().map(|s| (*s).to_owned()).collect();
        cycle.push(node.to_owned());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node);
    for next in graph.get(node).into_iter().flatten() {
        let (key, _) = graph.get_key_value(next.as_str())?;
        if let Some(cycle) = visit(key, graph, path, done, order) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(node);
    // Post-order: everything this agent needs is already in `order`.
    order.push(node.to_owned());
    None
}

fn check_ports(
    file: &str,
    registry: Option<u16>,
    agents: &[AgentDef],
) -> Result<(), DeploymentError> {
    let mut used: BTreeMap<u16, String> = BTreeMap::new();
    let ports = registry
        .map(|p| (p, "registry_port".to_owned()))
        .into_iter()
        .chain(
            agents
                .iter()
                .filter_map(|a| a.port.map(|p| (p, format!("agents.{}.port", a.name)))),
        );
    for (port, key) in ports {
        if let Some(first) = used.get(&port) {
            return Err(DeploymentError::DuplicatePort {
                file: file.to_owned(),
                port,
                first: first.clone(),
                second: key,
            });
        }
        used.insert(port, key);
    }
    Ok(())
}

#[cfg(test)]
mod title_tests {
    #[test]
    fn titles_follow_python() {
        assert_eq!(super::title_case("jarvis"), "Jarvis");
        assert_eq!(super::title_case("research_agent"), "Research_Agent");
        assert_eq!(super::title_case("deep-THINK"), "Deep-Think");
    }
}
