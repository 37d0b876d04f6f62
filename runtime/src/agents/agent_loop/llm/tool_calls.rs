//! The tools of a turn: the ones offered (narrowed by `tools_allowlist`, plus
//! `request_user_input`), and each call run under the timeout, traced and reported.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::{ASK_USER_TOOL, DECLINE_TOOL, LlmAgent};
use crate::agents::agent_loop::AgentRequest;
use crate::agents::agent_loop::events::LoopEvent;
use crate::agents::agent_loop::tools::{self, CallContext, ToolResult, split_name};
use crate::agents::llm::{ToolCall, ToolSpec};

/// Keeps only the tools `allow` names, each of which must be offered; answers the set.
fn allowed_tools(
    tools: &mut Vec<ToolSpec>,
    allow: &[String],
) -> Result<BTreeSet<String>, super::CannotStart> {
    let offered: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    if let Some(missing) = allow.iter().find(|name| !offered.contains(name.as_str())) {
        let mut names: Vec<&str> = offered.into_iter().collect();
        names.truncate(20);
        return Err(super::CannotStart::UnknownTool {
            missing: missing.clone(),
            offered: if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            },
        });
    }
    let allowed: BTreeSet<String> = allow.iter().cloned().collect();
    tools.retain(|t| allowed.contains(&t.name));
    Ok(allowed)
}

fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER_TOOL.to_owned(),
        description: "Ask the user a question and wait for the answer. Use only when you cannot go on without it.".to_owned(),
        input_schema: json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
    }
}

fn decline_spec() -> ToolSpec {
    ToolSpec {
        name: DECLINE_TOOL.to_owned(),
        description: "Decline the request: you will not do it (it is outside what you are for, or not allowed). Say why; the task ends rejected.".to_owned(),
        input_schema: json!({"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}),
    }
}

impl LlmAgent {
    /// Runs one tool call under the timeout, reporting it.
    pub(super) async fn call_tool(
        &self,
        call: &ToolCall,
        step: u32,
        context: &CallContext,
    ) -> ToolResult {
        if let Some(allowed) = &context.allowed
            && !allowed.contains(&call.name)
        {
            return ToolResult::error(format!(
                "{} is not allowed in this turn (tools_allowlist); use one of the tools offered",
                call.name
            ));
        }
        let (server, tool) = split_name(&call.name);
        let server = if self.tools.serves(server) {
            server
        } else {
            tools::UNKNOWN_SERVER
        };
        // The MCP client's attributes (`mcp.*`, `jsonrpc.request.id`, `server.*`) are added by
        // a downstream MCP server's call: the MCP conventions put them on this span.
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {tool}"),
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            gen_ai.tool.call.id = %call.id,
            daedalus.tool.server = server,
            mcp.method.name = tracing::field::Empty,
            mcp.protocol.version = tracing::field::Empty,
            mcp.session.id = tracing::field::Empty,
            jsonrpc.request.id = tracing::field::Empty,
            rpc.response.status_code = tracing::field::Empty,
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
            network.transport = tracing::field::Empty,
            error.type = tracing::field::Empty,
            outcome = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        crate::platform::telemetry::record_ids(&span);
        let result = tracing::Instrument::instrument(
            self.run_tool(call, (server, tool), step, context),
            span.clone(),
        )
        .await;
        span.record("outcome", if result.is_error { "error" } else { "ok" });
        result
    }

    /// Runs `call` of `tool` on `server` (as [`Self::call_tool`] resolved them), reporting it.
    pub(super) async fn run_tool(
        &self,
        call: &ToolCall,
        (server, tool): (&str, &str),
        step: u32,
        context: &CallContext,
    ) -> ToolResult {
        let (server, tool) = (server.to_owned(), tool.to_owned());
        let depth = context.depth;
        context.events.emit(LoopEvent::ToolStarted {
            agent: self.name.clone(),
            depth,
            step,
            server: server.clone(),
            tool: tool.clone(),
            call_id: call.id.clone(),
        });
        let started = Instant::now();
        let result = match tokio::time::timeout(
            self.tool_timeout,
            self.tools.call(&call.name, &call.arguments, context),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => ToolResult::error(format!(
                "the tool {} did not answer within {:?} and was abandoned",
                call.name, self.tool_timeout
            )),
        };
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let event = if result.is_error {
            LoopEvent::ToolFailed {
                agent: self.name.clone(),
                depth,
                step,
                server,
                tool,
                call_id: call.id.clone(),
                reason: result.content.clone(),
                elapsed_ms,
            }
        } else {
            LoopEvent::ToolFinished {
                agent: self.name.clone(),
                depth,
                step,
                server,
                tool,
                call_id: call.id.clone(),
                elapsed_ms,
            }
        };
        context.events.emit(event);
        result
    }

    /// The tools this turn offers the model (its allowlist's, when it has one, and
    /// `ask_user`), and the set a call must be in.
    pub(super) async fn offered_tools(
        &self,
        request: &AgentRequest,
    ) -> Result<(Vec<ToolSpec>, Option<Arc<BTreeSet<String>>>), super::CannotStart> {
        let mut tools = self.tools.tools(&request.bearer).await;
        let allowed = match &request.controls.tools_allowlist {
            None => None,
            Some(allow) => Some(Arc::new(allowed_tools(&mut tools, allow)?)),
        };
        tools.push(ask_user_spec());
        if self.answering.may_decline {
            tools.push(decline_spec());
        }
        Ok((tools, allowed))
    }
}
