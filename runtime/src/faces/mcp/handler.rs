//! The MCP methods of one agent's server: `tools/list`, `tools/call`, `prompts/list`,
//! `prompts/get`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, Prompt, PromptMessage, ProtocolVersion, Role as McpRole,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::caller::{bearer, conversation, trace};
use super::{Face, send};
use crate::config::deployment::InstanceScope;
use crate::sampling::SamplingParams;

/// The tool that runs the agent.
pub const SEND_MESSAGE: &str = "send_message";
/// The tool that reports health without the model.
pub const GET_HEALTH: &str = "get_health";

/// One MCP session's handler of an agent.
#[derive(Debug, Clone)]
pub struct AgentServer {
    face: Arc<Face>,
}

impl AgentServer {
    pub fn new(face: Arc<Face>) -> Self {
        Self { face }
    }

    fn history_prompt(&self) -> String {
        format!("{}_history", self.face.name())
    }

    /// The alias tool name, unless it would shadow a built-in tool.
    fn alias(&self) -> Option<&str> {
        Some(self.face.name()).filter(|n| *n != SEND_MESSAGE && *n != GET_HEALTH)
    }
}

fn object(value: &Value) -> Arc<Map<String, Value>> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

/// [`send_schema`], the same for every agent and every listing: derived once.
static SEND_SCHEMA: LazyLock<Arc<Map<String, Value>>> = LazyLock::new(|| object(&send_schema()));

/// The `send_message` arguments, as a JSON schema; the sampling keys come from
/// [`SamplingParams`], the one list of them, and the chat controls from the typed
/// [`crate::agent_loop::TurnControls`].
fn send_schema() -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "The message to the agent"},
            "images": {
                "type": "array",
                "description": "Images for a vision model, base64-encoded",
                "items": {
                    "type": "object",
                    "properties": {
                        "data": {"type": "string", "description": "base64 image bytes"},
                        "mime_type": {"type": "string", "description": "e.g. image/png"}
                    },
                    "required": ["data", "mime_type"]
                }
            },
            "request_params": {
                "type": "object",
                "description": "Sampling parameters for this call (null clears the agent's default)"
            }
        },
        "required": ["message"]
    });
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.extend(SamplingParams::property_schemas());
        properties.extend(crate::agent_loop::TurnControls::property_schemas());
    }
    schema
}

impl AgentServer {
    async fn get_health(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let report = self.face.health.check(&bearer(context)).await;
        let text = serde_json::to_string(&report).unwrap_or_default();
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        let def = &self.face.def;
        let capabilities = if def.instance_scope == InstanceScope::Request {
            ServerCapabilities::builder().enable_tools().build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new(def.name.clone(), env!("CARGO_PKG_VERSION"))
                    .with_description(def.description.clone()),
            )
            .with_instructions(format!(
                "Call {SEND_MESSAGE} (or {}) with a message to talk to {}. {}",
                def.name, def.title, def.description
            ))
    }

    /// Stop at the last revision with `initialize` and sessions, which per-connection
    /// history needs; clients fall back to it.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let def = &self.face.def;
        let about = if def.description.is_empty() {
            format!(
                "Send a message to the {} agent and get its answer.",
                def.title
            )
        } else {
            format!(
                "Send a message to the {} agent and get its answer. {}",
                def.title, def.description
            )
        };
        let schema = Arc::clone(&SEND_SCHEMA);
        let mut tools = vec![Tool::new(SEND_MESSAGE, about.clone(), Arc::clone(&schema))];
        if let Some(alias) = self.alias() {
            tools.push(Tool::new(alias.to_owned(), about, schema));
        }
        tools.push(Tool::new(
            GET_HEALTH,
            "Returns the health status of this agent and its downstream dependencies.",
            object(&json!({"type": "object", "properties": {}, "additionalProperties": false})),
        ));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if name == GET_HEALTH {
            let span = tracing::info_span!(
                "get_health",
                gen_ai.agent.name = %self.face.name(),
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty,
            );
            crate::telemetry::continue_trace(&span, &trace(&context));
            let report = tracing::Instrument::instrument(self.get_health(&context), span).await;
            return Ok(report.into());
        }
        if name == SEND_MESSAGE || Some(name) == self.alias() {
            let arguments = request.arguments.unwrap_or_default();
            return Ok(send::send_message(&self.face, arguments, &context)
                .await
                .into());
        }
        Err(ErrorData::invalid_params(
            format!("no tool named {name}; this agent offers {SEND_MESSAGE} and {GET_HEALTH}"),
            None,
        ))
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if self.face.scope() == InstanceScope::Request {
            return Ok(ListPromptsResult::with_all_items(Vec::new()));
        }
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            self.history_prompt(),
            Some(format!(
                "The conversation with {} so far",
                self.face.def.title
            )),
            None,
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if self.face.scope() == InstanceScope::Request || request.name != self.history_prompt() {
            return Err(ErrorData::invalid_params(
                format!("no prompt named {}", request.name),
                None,
            ));
        }
        let messages = match conversation(&self.face, &context) {
            Some(key) => {
                let turns = self.face.core.turns();
                turns.conversation(self.face.name(), &key).await
            }
            None => Vec::new(),
        };
        let messages = messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    daedalus_contract::Role::User => McpRole::User,
                    daedalus_contract::Role::Agent => McpRole::Assistant,
                };
                PromptMessage::new_text(role, m.text())
            })
            .collect();
        Ok(GetPromptResult::new(messages)
            .with_description(format!("The conversation with {}", self.face.def.title))
            .into())
    }
}
