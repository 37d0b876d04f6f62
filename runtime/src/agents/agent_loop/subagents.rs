//! Sub-agents as tools: an agent named in another agent's `servers` is offered to the model as
//! `<agent>__send_message` and called in-process — no HTTP round trip; its loop events go to the
//! same sink, one level deeper; the caller's bearer goes with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use daedalus_contract::{Message, Part, Role};
use serde_json::{Value, json};

use super::tools::{CallContext, ToolResult, ToolSource, split_name};
use super::{Agent, AgentOutcome, AgentRequest};
use crate::agents::agent_loop::Bearer;
use crate::agents::llm::ToolSpec;

/// The tool each sub-agent offers.
pub const SUBAGENT_TOOL: &str = "send_message";

/// Other agents of the deployment, callable as tools.
#[derive(Debug, Default)]
pub struct SubAgents {
    /// Name ⇒ (description, agent).
    agents: BTreeMap<String, (String, Arc<dyn Agent>)>,
}

impl SubAgents {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `agent` under `name`.
    #[must_use]
    pub fn with(mut self, name: &str, description: &str, agent: Arc<dyn Agent>) -> Self {
        self.agents
            .insert(name.to_owned(), (description.to_owned(), agent));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

#[async_trait]
impl ToolSource for SubAgents {
    fn serves(&self, server: &str) -> bool {
        self.agents.contains_key(server)
    }

    async fn tools(&self, _bearer: &Bearer) -> Vec<ToolSpec> {
        self.agents
            .iter()
            .map(|(name, (description, _))| ToolSpec {
                name: format!("{name}__{SUBAGENT_TOOL}"),
                description: if description.is_empty() { format!("Ask the {name} agent.") } else { description.clone() },
                input_schema: json!({
                    "type": "object",
                    "properties": {"message": {"type": "string", "description": "What to ask the agent"}},
                    "required": ["message"]
                }),
            })
            .collect()
    }

    async fn call(&self, name: &str, arguments: &Value, context: &CallContext) -> ToolResult {
        let (agent_name, tool) = split_name(name);
        let Some((_, agent)) = self
            .agents
            .get(agent_name)
            .filter(|_| tool == SUBAGENT_TOOL)
        else {
            return ToolResult::error(format!("no sub-agent tool named {name}"));
        };
        let Some(text) = arguments.get("message").and_then(Value::as_str) else {
            return ToolResult::error("the argument `message` (a string) is required".to_owned());
        };
        let id = uuid::Uuid::new_v4().to_string();
        let mut request = AgentRequest::new(
            &id,
            &id,
            Message::new(id.clone(), Role::User, vec![Part::text(text)]),
        );
        request.bearer = context.bearer.clone();
        request.events = context.events.clone();
        request.depth = context.depth + 1;
        request.budget = context.budget.clone();
        // Each delegation is a fresh conversation of the sub-agent's, not worth keeping.
        request.persist = false;
        match agent.run(request, context.cancel.child_token()).await {
            AgentOutcome::Completed { artifacts } => {
                let texts: Vec<&str> = artifacts
                    .iter()
                    .flat_map(|a| &a.parts)
                    .filter_map(Part::as_text)
                    .collect();
                ToolResult::text(texts.join("\n"))
            }
            AgentOutcome::Replied { parts } => {
                let texts: Vec<&str> = parts.iter().filter_map(Part::as_text).collect();
                ToolResult::text(texts.join("\n"))
            }
            AgentOutcome::Rejected { reason } => {
                ToolResult::error(format!("{agent_name} declined: {reason}"))
            }
            AgentOutcome::InputRequired { question } => {
                let q: Vec<&str> = question.iter().filter_map(Part::as_text).collect();
                ToolResult::error(format!("{agent_name} needs more input: {}", q.join(" ")))
            }
            AgentOutcome::AuthRequired { challenge } => {
                let c: Vec<&str> = challenge.iter().filter_map(Part::as_text).collect();
                ToolResult::error(format!(
                    "{agent_name} needs the user to authenticate: {}",
                    c.join(" ")
                ))
            }
            AgentOutcome::Failed { reason } => {
                ToolResult::error(format!("{agent_name} failed: {reason}"))
            }
            AgentOutcome::Canceled => ToolResult::error(format!("{agent_name} was canceled")),
        }
    }
}
