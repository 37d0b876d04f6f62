//! Where an agent's tools come from: the [`ToolSource`] seam (downstream MCP servers,
//! sub-agents) and what a call returns. Tool names reach the model as `<server>__<tool>`.

use std::fmt;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::events::EventSink;
use crate::agents::llm::ToolSpec;

pub use crate::platform::bearer::Bearer;

/// What a tool call gives back: text for the model, and files for the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub content: String,
    /// The tool reported an error (or could not be reached): the model reads it and may recover.
    pub is_error: bool,
    /// Files the tool returned (an MCP embedded resource, resource link, image or audio; a
    /// remote agent's file artifact), as A2A file parts: the model reads a line about each,
    /// and they reach the caller as the turn's artifacts.
    pub files: Vec<daedalus_contract::Part>,
}

impl ToolResult {
    /// A result the model reads as the tool's answer, with no files.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            files: Vec::new(),
        }
    }

    /// A result the model reads as what went wrong (it may recover).
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            files: Vec::new(),
        }
    }
}

/// Everything a tool call needs besides its arguments.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub bearer: Bearer,
    pub cancel: CancellationToken,
    pub events: EventSink,
    /// Sub-agent depth of the caller.
    pub depth: u32,
    /// The tools this turn may call (`tools_allowlist`); `None` allows every tool offered.
    pub allowed: Option<std::sync::Arc<std::collections::BTreeSet<String>>>,
    /// Where this call notes a remote task it starts (another A2A agent's), when its turn
    /// takes checkpoints.
    pub note: Option<super::checkpoint::StartedNote>,
    /// The remote task this call started before its turn was interrupted: the source follows
    /// it to its end instead of making the call again.
    pub started: Option<String>,
    /// The turn's budgets: a sub-agent's model calls spend from them too.
    pub budget: crate::agents::budgets::TurnBudget,
}

impl CallContext {
    /// This context for one call: noting in `in_flight`, or following `started`.
    #[must_use]
    pub fn for_call(
        &self,
        call_id: &str,
        in_flight: Option<&std::sync::Arc<super::checkpoint::InFlight>>,
        started: Option<&String>,
    ) -> Self {
        Self {
            note: in_flight.map(|f| f.note_for(call_id)),
            started: started.cloned(),
            ..self.clone()
        }
    }
}

/// A set of tools.
#[async_trait]
pub trait ToolSource: Send + Sync + fmt::Debug + 'static {
    /// The tools offered now to the caller holding `bearer`, named `<server>__<tool>`.
    async fn tools(&self, bearer: &Bearer) -> Vec<ToolSpec>;

    /// Calls `name` with `arguments`. Failures are results with `is_error`, never panics.
    async fn call(&self, name: &str, arguments: &Value, context: &CallContext) -> ToolResult;

    /// Whether tools named `<server>__...` come from here. The model may name any prefix; only
    /// known ones become metric labels.
    fn serves(&self, server: &str) -> bool;

    /// Whether tool `name` may be called again when a call of it was in flight as its turn was
    /// interrupted (its fate unknown): the tool says it only reads or is idempotent (MCP's
    /// `readOnlyHint`, `idempotentHint`), or its server is marked `idempotent: true`. None is
    /// unless its source says so.
    fn repeatable(&self, name: &str) -> bool {
        let _ = name;
        false
    }
}

/// The server label of a tool call whose prefix no source serves: model-chosen names must not
/// make a new metric series each.
pub const UNKNOWN_SERVER: &str = "(unknown)";

/// No tools at all.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

#[async_trait]
impl ToolSource for NoTools {
    fn serves(&self, _server: &str) -> bool {
        false
    }

    async fn tools(&self, _bearer: &Bearer) -> Vec<ToolSpec> {
        Vec::new()
    }

    async fn call(&self, name: &str, _: &Value, _: &CallContext) -> ToolResult {
        ToolResult::error(format!("no tool named {name}"))
    }
}

/// Splits `server__tool` into its parts (the server part for events and metrics).
pub fn split_name(name: &str) -> (&str, &str) {
    name.split_once("__").unwrap_or(("", name))
}

/// Several tool sources behind one: each tool is routed to the source that offers its
/// `<server>` prefix.
#[derive(Debug, Default)]
pub struct Toolbox {
    sources: Vec<(Vec<String>, std::sync::Arc<dyn ToolSource>)>,
}

impl Toolbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `source`, which serves tools named `<prefix>__...` for each of `prefixes`.
    #[must_use]
    pub fn with(mut self, prefixes: Vec<String>, source: std::sync::Arc<dyn ToolSource>) -> Self {
        self.sources.push((prefixes, source));
        self
    }
}

#[async_trait]
impl ToolSource for Toolbox {
    fn serves(&self, server: &str) -> bool {
        self.sources
            .iter()
            .any(|(prefixes, _)| prefixes.iter().any(|p| p == server))
    }

    fn repeatable(&self, name: &str) -> bool {
        let (prefix, _) = split_name(name);
        self.sources
            .iter()
            .find(|(prefixes, _)| prefixes.iter().any(|p| p == prefix))
            .is_some_and(|(_, source)| source.repeatable(name))
    }

    async fn tools(&self, bearer: &Bearer) -> Vec<ToolSpec> {
        let lists =
            futures::future::join_all(self.sources.iter().map(|(_, s)| s.tools(bearer))).await;
        lists.into_iter().flatten().collect()
    }

    async fn call(&self, name: &str, arguments: &Value, context: &CallContext) -> ToolResult {
        let (prefix, _) = split_name(name);
        match self
            .sources
            .iter()
            .find(|(prefixes, _)| prefixes.iter().any(|p| p == prefix))
        {
            Some((_, source)) => source.call(name, arguments, context).await,
            None => ToolResult::error(format!("no tool named {name}")),
        }
    }
}
