//! The MCP methods of one agent's server: `tools/list`, `tools/call`, `prompts/list`,
//! `prompts/get`; on 2026-07-28 also `server/discover`, `subscriptions/listen` (the agent's
//! tools changed by a reload) and the tasks extension's `tasks/*`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ProtocolVersion,
    Role as McpRole, ServerCapabilities, ServerConfig, ServerNotification, SubscriptionFilter,
    TASKS_EXTENSION_ID, Tool, ToolListChangedNotification, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::caller::{self, bearer, conversation};
use super::routes::ChangeFeed;
use super::{Face, send, stateless, tasks, traced};
use crate::config::deployment::InstanceScope;
use crate::config::sampling::SamplingParams;
use crate::platform::telemetry::mcp;
use crate::services::turns::ConversationKey;

/// The tool that runs the agent.
pub const SEND_MESSAGE: &str = "send_message";
/// The tool that reports health without the model.
pub const GET_HEALTH: &str = "get_health";

/// The handler of an agent's MCP session (legacy revisions) or of one request (2026-07-28).
#[derive(Debug, Clone)]
pub struct AgentServer {
    face: Arc<Face>,
    /// What reloads changed, for `subscriptions/listen`.
    changes: ChangeFeed,
}

/// The argument of the history prompt (and of `send_message`) that names a 2026-07-28
/// conversation of a `connection` agent.
const CONVERSATION_ID: &str = "conversation_id";

impl AgentServer {
    pub fn new(face: Arc<Face>, changes: ChangeFeed) -> Self {
        Self { face, changes }
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
/// [`send_schema`] with `conversation_id`, for `connection` agents.
static SEND_SCHEMA_WITH_CONVERSATION: LazyLock<Arc<Map<String, Value>>> = LazyLock::new(|| {
    let mut schema = send_schema();
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            CONVERSATION_ID.to_owned(),
            json!({
                "type": "string",
                "description": "MCP 2026-07-28: the conversation to continue (the conversation_id in an earlier answer's _meta); leave it out to start one. A legacy session continues its own."
            }),
        );
    }
    object(&schema)
});

/// The `send_message` arguments, as a JSON schema; the sampling keys come from
/// [`SamplingParams`], the one list of them, and the chat controls from the typed
/// [`crate::services::turns::TurnControls`].
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
        properties.extend(crate::services::turns::TurnControls::property_schemas());
    }
    schema
}

impl AgentServer {
    async fn get_health(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let report = self.face.health.check(&bearer(context)).await;
        match serde_json::to_string(&report) {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "the health report cannot be written: {e}"
            ))]),
        }
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        let def = &self.face.def;
        let builder = ServerCapabilities::builder().enable_tools();
        let capabilities = if def.instance_scope == InstanceScope::Request {
            builder.enable_tool_list_changed().enable_tasks().build()
        } else {
            builder
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_tasks()
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

    /// A legacy session is offered what it gets: its agent never changes under it (a reload
    /// that changes the agent retires the session's endpoint), and the notification rides only
    /// 2026-07-28's `subscriptions/listen`; its calls answer when their turn ends, never as a
    /// task of the tasks extension.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let span = traced::span(&context, "initialize", None);
        traced::run(
            span,
            Box::pin(async move {
                context.peer.set_peer_info(request.clone());
                let mut offered = self.negotiate_initialize(&request)?;
                if let Some(tools) = offered.capabilities.tools.as_mut() {
                    tools.list_changed = None;
                }
                if let Some(extensions) = offered.capabilities.extensions.as_mut() {
                    extensions.remove(TASKS_EXTENSION_ID);
                }
                offered.capabilities.extensions =
                    offered.capabilities.extensions.filter(|e| !e.is_empty());
                Ok(offered)
            }),
        )
        .await
    }

    /// Every revision up to 2026-07-28: the stateless one, and the legacy ones with
    /// `initialize` and sessions, chosen per request.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(super::revisions())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// Tells the listener when a reload changes (or removes) this agent, until the client
    /// cancels or the runtime stops.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut reloads = self.changes.subscribe();
        loop {
            tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                told = reloads.recv() => match told {
                    Ok(changes) if !changes.touches(self.face.name()) => {}
                    // A listener that fell behind may have missed a change: say so.
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let note = ServerNotification::ToolListChangedNotification(
                            ToolListChangedNotification::default(),
                        );
                        if subscription.sink().send(note).await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let span = traced::span(&context, "tasks/get", None);
        traced::run(
            span,
            Box::pin(async move { tasks::get(&self.face, request, &context).await }),
        )
        .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::span(&context, "tasks/update", None);
        traced::run(
            span,
            Box::pin(async move { tasks::update(&self.face, request, &context).await }),
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::span(&context, "tasks/cancel", None);
        traced::run(
            span,
            Box::pin(async move { tasks::cancel(&self.face, request, &context).await }),
        )
        .await
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let span = traced::span(&context, "tools/list", None);
        traced::run(
            span,
            Box::pin(async move {
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
                let schema = if def.instance_scope == InstanceScope::Connection {
                    Arc::clone(&SEND_SCHEMA_WITH_CONVERSATION)
                } else {
                    Arc::clone(&SEND_SCHEMA)
                };
                let mut tools = vec![Tool::new(SEND_MESSAGE, about.clone(), Arc::clone(&schema))];
                if let Some(alias) = self.alias() {
                    tools.push(Tool::new(alias.to_owned(), about, schema));
                }
                tools.push(Tool::new(
                    GET_HEALTH,
                    "Returns the health status of this agent and its downstream dependencies.",
                    object(
                        &json!({"type": "object", "properties": {}, "additionalProperties": false}),
                    ),
                ));
                Ok(ListToolsResult::with_all_items(tools))
            }),
        )
        .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = traced::span(&context, mcp::TOOLS_CALL, Some(request.name.as_ref()));
        traced::run(
            span,
            Box::pin(async move {
                let name = request.name.as_ref();
                if name == GET_HEALTH {
                    // Under the face's span, `tools/call get_health` ([`super::traced`]).
                    let report = self.get_health(&context).await.into();
                    traced::tool_answered(&report);
                    return Ok(report);
                }
                if name == SEND_MESSAGE || Some(name) == self.alias() {
                    let started = std::time::Instant::now();
                    let response = if caller::modern(&context) {
                        stateless::send(&self.face, request, &context).await
                    } else {
                        let arguments = request.arguments.unwrap_or_default();
                        send::legacy(&self.face, arguments, &context).await.into()
                    };
                    send::record(&self.face, &response, started);
                    traced::tool_answered(&response);
                    return Ok(response);
                }
                Err(ErrorData::invalid_params(
                    format!(
                        "no tool named {name}; this agent offers {SEND_MESSAGE} and {GET_HEALTH}"
                    ),
                    None,
                ))
            }),
        )
        .await
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let span = traced::span(&context, "prompts/list", None);
        traced::run(
            span,
            Box::pin(async move {
                if self.face.scope() == InstanceScope::Request {
                    return Ok(ListPromptsResult::with_all_items(Vec::new()));
                }
                // A 2026-07-28 client names its conversation; a legacy session's is its own.
                let arguments = (self.face.scope() == InstanceScope::Connection).then(|| {
                    vec![PromptArgument::new(CONVERSATION_ID).with_description(
                    "MCP 2026-07-28: the conversation (the conversation_id in an answer's _meta)",
                )]
                });
                Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
                    self.history_prompt(),
                    Some(format!(
                        "The conversation with {} so far",
                        self.face.def.title
                    )),
                    arguments,
                )]))
            }),
        )
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = traced::span(&context, mcp::PROMPTS_GET, Some(request.name.as_str()));
        traced::run(
            span,
            Box::pin(async move {
                if self.face.scope() == InstanceScope::Request
                    || request.name != self.history_prompt()
                {
                    return Err(ErrorData::invalid_params(
                        format!("no prompt named {}", request.name),
                        None,
                    ));
                }
                let key =
                    if caller::modern(&context) && self.face.scope() == InstanceScope::Connection {
                        request
                            .arguments
                            .as_ref()
                            .and_then(|arguments| arguments.get(CONVERSATION_ID))
                            .and_then(Value::as_str)
                            .map(|id| ConversationKey::a2a_for(id, &caller::who(&context)))
                    } else {
                        conversation(&self.face, &context)
                    };
                let messages = match key {
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
            }),
        )
        .await
    }
}
