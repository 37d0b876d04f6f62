//! Other A2A agents as tools: a server entry `type: a2a` names another agent's card, and each
//! of its skills becomes a tool `<server>__<skill>` taking `{message, task_id?}`.
//!
//! - The card is read when the tools are first listed and again after [`CARD_TTL`]; an agent
//!   whose card cannot be read offers no tools until it can.
//! - Its signatures are checked against the entry's `trust:` ([`trust`]): under `required` an
//!   unsigned card, a signature that does not verify or a key not trusted makes the agent
//!   offer no tools, and a call of one is refused without reaching it. The verdict is kept
//!   with the card; a card read again is checked again.
//! - A call is an A2A v1 `SendStreamingMessage` to the card's JSON-RPC interface (a blocking
//!   `SendMessage` when the card says it does not stream), carrying the caller's trace context
//!   (`traceparent`, `tracestate`), the server's headers, and the caller's bearer when the entry
//!   opted in (`forward_inbound_auth`). The skill rides in the message's `metadata.skill`.
//! - What comes back: the text of the remote task's artifacts; an `input-required` task comes
//!   back as its question with the remote task's id, which the model passes as `task_id` with
//!   its answer; a failed, rejected or canceled task is an error result saying why.
//! - A cancel of the calling turn reaches the remote agent: its `CancelTask` is called for the
//!   task the call started ([`call`]).
//! - A durable turn notes the remote task's id in its checkpoint as soon as the agent names it
//!   (a streamed answer's first event); resumed after its runtime stopped mid-call, the turn
//!   asks for that task (`GetTask`) and follows it to its end (`SubscribeToTask`, or `GetTask`
//!   again each second when the card does not stream) instead of sending the message again.
//!   A call whose task was never named (a blocking `SendMessage`, or cut before the first
//!   event) is not made again: the model reads that it was interrupted.

mod call;
mod card;
pub mod trust;

pub use card::{CardError, card_url, read as read_card};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use daedalus_contract::AgentCard;
use serde_json::{Value, json};

use crate::agents::agent_loop::tools::split_name;
use crate::agents::agent_loop::{Bearer, CallContext, ToolResult, ToolSource};
use crate::agents::downstream_auth::Downstream;
use crate::agents::llm::ToolSpec;
use crate::config::deployment::McpServer;

/// How long a card read is trusted.
pub const CARD_TTL: Duration = Duration::from_mins(5);
/// The longest tool name providers take.
const MAX_TOOL_NAME: usize = 64;

/// Other A2A agents, by server name.
#[derive(Debug)]
pub struct A2aAgents {
    servers: BTreeMap<String, RemoteAgent>,
    http: reqwest::Client,
}

/// How long a card refused by its trust is kept refused before it is read again.
const REFUSED_TTL: Duration = Duration::from_secs(30);

/// A card as read last: when, and the card if its trust let it be used (else why not).
type CardRead = (Instant, Result<Arc<AgentCard>, CardError>);

#[derive(Debug)]
struct RemoteAgent {
    def: McpServer,
    /// The card read last, when, and whether its trust let it be used.
    card: Mutex<Option<CardRead>>,
    trust: trust::TrustCheck,
    /// The runtime's credential for it, when its entry has an `auth` block.
    credential: Option<Downstream>,
}

/// A tool call's arguments.
#[derive(Debug, serde::Deserialize)]
struct CallArgs {
    message: String,
    #[serde(default)]
    task_id: Option<String>,
}

impl A2aAgents {
    pub fn new(servers: BTreeMap<String, McpServer>) -> Self {
        Self {
            servers: servers
                .into_iter()
                .map(|(name, def)| {
                    (
                        name,
                        RemoteAgent {
                            credential: Downstream::of(&def),
                            trust: trust::TrustCheck::new(&def.trust),
                            def,
                            card: Mutex::new(None),
                        },
                    )
                })
                .collect(),
            http: reqwest::Client::new(),
        }
    }

    /// The names of the servers.
    pub fn names(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }

    /// `server`'s card, read again when older than [`CARD_TTL`].
    async fn card(&self, server: &str) -> Result<Arc<AgentCard>, CardError> {
        let remote = self
            .servers
            .get(server)
            .ok_or_else(|| CardError::Unknown(server.to_owned()))?;
        if let Some((read, card)) = remote
            .card
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && read.elapsed() < if card.is_ok() { CARD_TTL } else { REFUSED_TTL }
        {
            return card.clone();
        }
        let bytes = card::read(&self.http, server, &remote.def).await?;
        let verdict = self.trusted(server, remote, &bytes).await;
        *remote.card.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), verdict.clone()));
        verdict
    }

    /// The card in `bytes`, if its trust lets it be used.
    async fn trusted(
        &self,
        server: &str,
        remote: &RemoteAgent,
        bytes: &[u8],
    ) -> Result<Arc<AgentCard>, CardError> {
        let server = server.to_owned();
        let json: Value = serde_json::from_slice(bytes).map_err(|e| CardError::NotJson {
            server: server.clone(),
            why: e.to_string(),
        })?;
        match remote.trust.check(&self.http, &json).await {
            Ok(Some(verified)) => {
                tracing::debug!(server, kid = verified.kid, "an A2A agent's card verified");
            }
            Ok(None) => {}
            Err(refused) => {
                let refused = CardError::Untrusted { server, refused };
                tracing::warn!(why = %refused, "an A2A agent's card is refused");
                return Err(refused);
            }
        }
        let card: AgentCard = serde_json::from_value(json).map_err(|e| CardError::NotACard {
            server,
            why: e.to_string(),
        })?;
        Ok(Arc::new(card))
    }
}

/// The tool name of `skill` of `server`: `[A-Za-z0-9_-]` only, at most 64 characters.
fn tool_name(server: &str, skill: &str) -> String {
    let skill: String = skill
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{server}__{skill}");
    name.truncate(MAX_TOOL_NAME);
    name
}

fn input_schema(agent: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": format!("What to ask {agent}")},
            "task_id": {
                "type": "string",
                "description": "To answer a question the agent asked: the task_id it gave",
            },
        },
        "required": ["message"],
        "additionalProperties": false,
    })
}

#[async_trait]
impl ToolSource for A2aAgents {
    fn serves(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }

    async fn tools(&self, _bearer: &Bearer) -> Vec<ToolSpec> {
        let mut tools = Vec::new();
        for server in self.servers.keys() {
            let card = match self.card(server).await {
                Ok(card) => card,
                Err(why) => {
                    tracing::warn!(server, %why, "an A2A agent offers no tools");
                    continue;
                }
            };
            if card.skills.is_empty() {
                tools.push(ToolSpec {
                    name: tool_name(server, "send_message"),
                    description: card.description.clone(),
                    input_schema: input_schema(&card.name),
                });
            }
            for skill in &card.skills {
                tools.push(ToolSpec {
                    name: tool_name(server, &skill.id),
                    description: format!("{} ({}): {}", skill.name, card.name, skill.description),
                    input_schema: input_schema(&card.name),
                });
            }
        }
        tools
    }

    async fn call(&self, name: &str, arguments: &Value, context: &CallContext) -> ToolResult {
        let (server, tool) = split_name(name);
        let error = |content: String| ToolResult {
            content,
            is_error: true,
            files: Vec::new(),
        };
        let Some(remote) = self.servers.get(server) else {
            return error(format!("no tool named {name}"));
        };
        let args: CallArgs = match serde_json::from_value(arguments.clone()) {
            Ok(args) => args,
            Err(e) => {
                return error(format!(
                    "{name}: the arguments are not {{message, task_id?}}: {e}"
                ));
            }
        };
        let card = match self.card(server).await {
            Ok(card) => card,
            Err(why) => return error(why.to_string()),
        };
        let skill = card
            .skills
            .iter()
            .find(|s| tool_name(server, &s.id) == name)
            .map(|s| s.id.clone());
        if skill.is_none() && !card.skills.is_empty() {
            return error(format!("{server} has no skill {tool}"));
        }
        let token = match &remote.credential {
            Some(credential) => match credential.token(&context.bearer).await {
                Ok(token) => Some(token),
                Err(problem) => return error(format!("{server}: {problem}")),
            },
            None => None,
        };
        let target = call::Target {
            server,
            def: &remote.def,
            card: &card,
            http: &self.http,
            token,
        };
        match &context.started {
            Some(started) => call::follow(&target, started.clone(), context).await,
            None => call::send(&target, args.message, args.task_id, skill, context).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_provider_safe_and_bounded() {
        assert_eq!(tool_name("echo", "echo"), "echo__echo");
        assert_eq!(tool_name("a", "say hi/now"), "a__say_hi_now");
        assert_eq!(tool_name("a", &"x".repeat(100)).len(), MAX_TOOL_NAME);
    }

    #[test]
    fn the_card_is_at_the_url_or_under_it() {
        assert_eq!(card_url("http://h:1/card.json"), "http://h:1/card.json");
        assert_eq!(
            card_url("http://h:1/"),
            "http://h:1/.well-known/agent-card.json"
        );
    }
}
