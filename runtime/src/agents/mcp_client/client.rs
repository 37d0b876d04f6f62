//! The agent's downstream MCP servers. Tools are listed when first needed and cached, each
//! offered to the model as `<server>__<tool>` with its JSON schema. A server that is down does
//! not stop the agent: it runs without that server's tools (and says so), and the server is
//! tried again on the next turn.
//!
//! No lock is held across network I/O: a server's state sits behind a short synchronous lock,
//! and one (re)connection at a time runs behind a separate gate that only connecting turns
//! wait on. Connecting and listing each have a timeout, and listing stops after
//! [`MAX_TOOL_PAGES`] pages or [`MAX_TOOLS`] tools, so a slow or endless server costs a turn at
//! most the timeouts (then the turn goes on without its tools, and the server is left alone
//! for [`RETRY_DOWN_AFTER`]) and never stalls `/healthz`.
//!
//! Bearer forwarding is per request by construction: a server marked `forward_inbound_auth`
//! gets, for a call made on behalf of a request carrying `Authorization: Bearer X`, a connection
//! of its own opened with `X` and closed after the call. No connection, cache or client that
//! outlives the call ever holds a caller's token, so no request can see another's. A server
//! whose configured headers set `Authorization` keeps that header; the inbound token never
//! replaces it. Servers without the flag never see an inbound token.
//!
//! A server with an `auth` block gets the runtime's credential instead: with
//! `oauth2_client_credentials`, the runtime's own token (fetched before the call, so a token
//! endpoint that fails is the call's error; presented afresh on every request of the shared
//! connection); with `token_exchange`, the caller's token exchanged (RFC 8693) for one whose
//! audience is the server, on a connection of the call's own, as for a forwarded token.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, ClientConfig, MetaObject, ProtocolVersion, RequestMetaObject,
    ServerNotification, SubscriptionFilter,
};
use rmcp::service::NotificationContext;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;

use super::traced_http::{CallSpans, TracedHttp};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::agents::agent_loop::{Bearer, CallContext, ToolResult, ToolSource};
use crate::agents::downstream_auth::Downstream;
use crate::agents::llm::ToolSpec;
use crate::agents::mcp_client::McpError;
use crate::config::deployment::McpServer;
use crate::config::{redact_text, redact_url};
use crate::platform::telemetry::{mcp, record_error, record_server};
use daedalus_contract::credentials::Credentials;

/// How long connecting (`server/discover`, or `initialize` after it) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long listing a server's tools (every page) may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most `tools/list` pages read from one server.
const MAX_TOOL_PAGES: usize = 20;
/// The most tools taken from one server.
const MAX_TOOLS: usize = 500;
/// How long a server that could not be reached is left alone before the next attempt, so a
/// hanging server does not cost every turn the connect timeout.
const RETRY_DOWN_AFTER: Duration = Duration::from_secs(30);

type Client = RunningService<RoleClient, Watcher>;

/// The client side of a shared connection: notes `notifications/tools/list_changed` so the
/// tool cache is refreshed before the next turn.
#[derive(Debug, Clone, Default)]
struct Watcher {
    stale: Arc<AtomicBool>,
    /// The connection's tool calls in flight, for their spans ([`CallSpans`]).
    calls: Arc<CallSpans>,
}

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::Release);
    }
}

/// One server: its state, and the gate of its (re)connection.
#[derive(Debug, Default)]
struct Link {
    /// Read and written in short critical sections, never across an await.
    state: std::sync::Mutex<LinkState>,
    /// Held by the one task (re)connecting or refreshing the tool list.
    connecting: Mutex<()>,
    /// Set by the server's `tools/list_changed`.
    stale: Arc<AtomicBool>,
    /// Set when the 2026-07-28 subscription that tells tool changes ended while its
    /// connection lived on: the next turn connects again, and so listens again.
    deaf: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct LinkState {
    /// The shared connection (static headers only).
    client: Option<Arc<Client>>,
    /// The tools it offered when last listed.
    tools: Vec<ToolSpec>,
    /// Of those, the ones that say they only read or are idempotent (`server__tool`).
    repeatable: std::collections::BTreeSet<String>,
    /// Why the last connection attempt failed.
    down: Option<McpError>,
    /// No new attempt before this, after a failure.
    retry_at: Option<Instant>,
}

impl LinkState {
    /// The server `name` listed `tools`.
    fn listed(&mut self, name: &str, tools: Vec<rmcp::model::Tool>) {
        self.repeatable = tools
            .iter()
            .filter(|t| {
                t.annotations.as_ref().is_some_and(|a| {
                    a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)
                })
            })
            .map(|t| format!("{name}__{}", t.name))
            .collect();
        self.tools = specs(name, tools);
    }
}

impl Link {
    fn state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer without connecting: the live connection (unless its tool list is stale), or
    /// the last failure while it is too early to try again.
    fn settled(&self) -> Option<Result<Arc<Client>, McpError>> {
        if self.deaf.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state();
        if let Some(client) = &state.client {
            return (!self.stale.load(Ordering::Acquire)).then(|| Ok(Arc::clone(client)));
        }
        match (state.retry_at, &state.down) {
            (Some(at), Some(problem)) if Instant::now() < at => Some(Err(problem.clone())),
            _ => None,
        }
    }
}

/// Whether each server was reachable at its last attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpStatus {
    pub server: String,
    pub problem: Option<String>,
}

/// An agent's downstream MCP servers.
#[derive(Debug)]
pub struct McpServers {
    servers: BTreeMap<String, McpServer>,
    links: BTreeMap<String, Link>,
    /// The runtime's credential of each server that has one.
    credentials: BTreeMap<String, Downstream>,
}

impl McpServers {
    pub fn new(servers: BTreeMap<String, McpServer>) -> Self {
        let links = servers
            .keys()
            .map(|k| (k.clone(), Link::default()))
            .collect();
        let credentials = servers
            .iter()
            .filter_map(|(name, server)| Some((name.clone(), Downstream::of(server)?)))
            .collect();
        Self {
            servers,
            links,
            credentials,
        }
    }

    /// The runtime's own token source for `name` (client credentials), for its shared
    /// connection.
    fn own_credential(&self, name: &str) -> Option<Arc<Credentials>> {
        match self.credentials.get(name)? {
            Downstream::Own(credentials) => Some(Arc::clone(credentials)),
            Downstream::Exchange(_) => None,
        }
    }

    /// The token a call on behalf of the caller holding `bearer` takes to `name` on a
    /// connection of its own: an exchanged token, or the forwarded one; `None` for the shared
    /// connection. The runtime's own token is fetched here too, so that a token endpoint that
    /// fails is this call's error.
    async fn call_token(
        &self,
        name: &str,
        server: &McpServer,
        bearer: &Bearer,
    ) -> Result<Option<String>, McpError> {
        match self.credentials.get(name) {
            Some(exchange @ Downstream::Exchange(_)) => Ok(Some(exchange.token(bearer).await?)),
            Some(own @ Downstream::Own(_)) => {
                own.token(bearer).await.map(|_| None).map_err(Into::into)
            }
            None => Ok(forwarded_token(server, bearer)),
        }
    }

    /// The last known state of every server. Never waits on a connection in progress.
    pub fn status(&self) -> Vec<McpStatus> {
        self.links
            .iter()
            .map(|(server, link)| McpStatus {
                server: server.clone(),
                problem: link.state().down.as_ref().map(ToString::to_string),
            })
            .collect()
    }

    fn headers(server: &McpServer) -> HashMap<HeaderName, HeaderValue> {
        server
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("authorization"))
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from_bytes(k.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect()
    }

    /// The configured `Authorization` value, without its `Bearer ` prefix.
    fn configured_auth(server: &McpServer) -> Option<String> {
        server
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.strip_prefix("Bearer ").unwrap_or(v).to_owned())
    }

    /// A transport to `server`, presenting `token` (or `credential`'s).
    fn transport(
        server: &McpServer,
        token: Option<String>,
        credential: Option<Arc<Credentials>>,
        calls: &Arc<CallSpans>,
    ) -> StreamableHttpClientTransport<TracedHttp> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.clone())
            .custom_headers(Self::headers(server));
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        StreamableHttpClientTransport::with_client(
            TracedHttp::presenting(credential, Arc::clone(calls)),
            config,
        )
    }

    /// Connects on the newest revision the server speaks: MCP 2026-07-28 (`server/discover`,
    /// no session) when it does, else `initialize` and a session, whether the server does not
    /// know `server/discover` or knows it and serves only older revisions.
    async fn connect(
        server: &McpServer,
        token: Option<String>,
        credential: Option<Arc<Credentials>>,
        watcher: Watcher,
    ) -> Result<Client, McpError> {
        let attempt = async {
            let modern = ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: None,
            };
            let transport =
                Self::transport(server, token.clone(), credential.clone(), &watcher.calls);
            match watcher
                .clone()
                .serve_with_lifecycle(transport, modern)
                .await
            {
                Err(ClientInitializeError::NoCompatibleProtocolVersion { .. }) => {
                    let transport = Self::transport(server, token, credential, &watcher.calls);
                    watcher.serve(transport).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(McpError::Initialize {
                url: redact_url(&server.url),
                reason: redact_text(&e.to_string()),
            }),
            Err(_) => Err(McpError::InitializeTimeout {
                url: redact_url(&server.url),
                after: CONNECT_TIMEOUT,
            }),
        }
    }

    /// The shared connection to `name`, (re)connecting and listing its tools if needed.
    async fn shared(&self, name: &str, reconnect: bool) -> Result<Arc<Client>, McpError> {
        let server = &self.servers[name];
        let link = &self.links[name];
        if !reconnect && let Some(answer) = link.settled() {
            return answer;
        }
        let _gate = link.connecting.lock().await;
        // Another task may have connected (or failed) while this one waited.
        if !reconnect && let Some(answer) = link.settled() {
            return answer;
        }
        // A connection whose subscription ended is replaced, listening again.
        let reconnect = link.deaf.swap(false, Ordering::AcqRel) || reconnect;
        let current = link.state().client.clone();
        if let Some(client) = current.filter(|_| !reconnect) {
            // Connected, but the server said its tools changed.
            link.stale.store(false, Ordering::Release);
            match list_tools(&client).await {
                Ok(tools) => link.state().listed(name, tools),
                Err(problem) => {
                    tracing::warn!(server = name, %problem, "refreshing the tool list failed; keeping the old one");
                }
            }
            return Ok(client);
        }
        link.stale.store(false, Ordering::Release);
        let watcher = Watcher {
            stale: Arc::clone(&link.stale),
            calls: Arc::default(),
        };
        let credential = self.own_credential(name);
        let attempt = async {
            let client =
                Self::connect(server, Self::configured_auth(server), credential, watcher).await?;
            let tools = list_tools(&client).await?;
            Ok::<_, McpError>((client, tools))
        };
        let outcome = attempt.await;
        let mut state = link.state();
        match outcome {
            Ok((client, tools)) => {
                state.listed(name, tools);
                state.retry_at = None;
                if state.down.take().is_some() {
                    tracing::info!(server = name, "downstream MCP server reachable again");
                }
                let client = Arc::new(client);
                listen_for_tool_changes(name, &client, link);
                state.client = Some(Arc::clone(&client));
                Ok(client)
            }
            Err(problem) => {
                tracing::warn!(server = name, %problem, "downstream MCP server unavailable; the agent runs without its tools");
                state.client = None;
                state.down = Some(problem.clone());
                state.retry_at = Some(Instant::now() + RETRY_DOWN_AFTER);
                Err(problem)
            }
        }
    }

    /// `name`'s tools as listed on a connection of the caller's own, for a server that opted
    /// into `forward_inbound_auth` and refused the shared (unauthenticated) listing. Nothing is
    /// kept: the list is the caller's alone.
    async fn tools_for_caller(&self, name: &str, token: String) -> Vec<ToolSpec> {
        let server = &self.servers[name];
        let listed = async {
            let client = Self::connect(server, Some(token), None, Watcher::default()).await?;
            let tools = list_tools(&client).await;
            let _ = client.cancel().await;
            tools
        };
        match listed.await {
            Ok(tools) => specs(name, tools),
            Err(problem) => {
                tracing::warn!(server = name, %problem, "listing with the caller's token failed too");
                Vec::new()
            }
        }
    }

    async fn call_on(
        client: &Client,
        tool: &str,
        arguments: &Value,
    ) -> Result<ToolResult, CallFailure> {
        let args = match arguments {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            other => {
                return Ok(ToolResult::error(format!(
                    "arguments must be a JSON object, got {other}"
                )));
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        params.meta = trace_meta();
        // The call's `execute_tool` span gets the MCP client's attributes; the transport adds
        // the JSON-RPC id and the session ([`CallSpans`]).
        let span = tracing::Span::current();
        let protocol = client.peer_info().map(|info| info.protocol_version.clone());
        mcp::record_tool_call(&span, protocol.as_ref().map(ProtocolVersion::as_str));
        let traceparent = params
            .meta
            .as_ref()
            .and_then(|meta| meta.0.get("traceparent")?.as_str().map(str::to_owned));
        let _watching = traceparent.map(|tp| client.service().calls.watch(&tp, span.clone()));
        let result = client.call_tool(params).await.inspect_err(|e| {
            if let ServiceError::McpError(error) = e {
                mcp::record_rpc_error(&span, error.code.0, false);
            } else {
                record_error(&span, "transport_error");
            }
        });
        let result = result.map_err(|e| CallFailure {
            // The connection is gone (rmcp has already re-initialized once on a 404):
            // the server never got the call, so one more on a new session is safe.
            connection_lost: matches!(
                e,
                ServiceError::TransportClosed | ServiceError::TransportSend(_)
            ),
            message: redact_text(&e.to_string()),
        })?;
        let mut texts: Vec<String> = Vec::with_capacity(result.content.len());
        let mut files = Vec::new();
        for block in &result.content {
            if let Some(t) = block.as_text() {
                texts.push(t.text.clone());
            } else if let Some(file) = super::files::file_of(block) {
                texts.push(file.line);
                files.push(file.part);
            }
        }
        if texts.is_empty()
            && let Some(structured) = &result.structured_content
        {
            texts.push(structured.to_string());
        }
        if result.is_error == Some(true) {
            mcp::record_tool_error(&span);
        }
        Ok(ToolResult {
            content: texts.join("\n"),
            is_error: result.is_error == Some(true),
            files,
        })
    }
}

/// On a 2026-07-28 connection, where there is no session stream, a `subscriptions/listen`
/// for `notifications/tools/list_changed` marks the tool cache stale, as the legacy session's
/// notification does. The listener lives as long as the connection; if the subscription ends
/// while the connection is still in use (the server ended it, or it broke), the link is marked
/// deaf and the next turn connects again, which listens again. A server that does not offer
/// subscriptions is simply not listened to.
fn listen_for_tool_changes(name: &str, client: &Arc<Client>, link: &Link) {
    let modern = client.peer().peer_info().is_some_and(|info| {
        info.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
    });
    let offers = client.peer().peer_info().and_then(|info| {
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
    }) == Some(true);
    if !modern || !offers {
        return;
    }
    let peer = client.peer().clone();
    let connection = Arc::downgrade(client);
    let (stale, deaf) = (Arc::clone(&link.stale), Arc::clone(&link.deaf));
    let server = name.to_owned();
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::debug!(server, error = %e, "the server takes no subscriptions/listen");
                return;
            }
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                stale.store(true, Ordering::Release);
            }
        }
        if connection.upgrade().is_some() {
            tracing::info!(
                server,
                "the tool-change subscription ended; reconnecting on the next turn"
            );
            deaf.store(true, Ordering::Release);
        }
    });
}

#[async_trait]
impl ToolSource for McpServers {
    fn serves(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }

    fn repeatable(&self, name: &str) -> bool {
        let (server, _) = crate::agents::agent_loop::tools::split_name(name);
        self.servers.get(server).is_some_and(|s| s.idempotent)
            || self
                .links
                .get(server)
                .is_some_and(|link| link.state().repeatable.contains(name))
    }

    async fn tools(&self, bearer: &Bearer) -> Vec<ToolSpec> {
        // Servers are (re)connected concurrently: one slow server costs a turn its own delay,
        // not the sum.
        let lists =
            futures::future::join_all(self.servers.iter().map(|(name, server)| async move {
                if let Some(exchange @ Downstream::Exchange(_)) = self.credentials.get(name) {
                    // The server sees callers only as themselves: its tools are listed with
                    // the caller's exchanged token, and kept for nobody.
                    return match exchange.token(bearer).await {
                        Ok(token) => self.tools_for_caller(name, token).await,
                        Err(problem) => {
                            tracing::warn!(server = name.as_str(), %problem, "no tools from this server for this call");
                            Vec::new()
                        }
                    };
                }
                match self.shared(name, false).await {
                    Ok(_) => self.links[name].state().tools.clone(),
                    Err(_) => match forwarded_token(server, bearer) {
                        Some(token) => self.tools_for_caller(name, token).await,
                        None => Vec::new(),
                    },
                }
            }))
            .await;
        lists.into_iter().flatten().collect()
    }

    async fn call(&self, name: &str, arguments: &Value, context: &CallContext) -> ToolResult {
        let (server_name, tool) = crate::agents::agent_loop::tools::split_name(name);
        let Some(server) = self.servers.get(server_name) else {
            return ToolResult::error(format!("no MCP server named {server_name}"));
        };
        let call = async {
            let token = self
                .call_token(server_name, server, &context.bearer)
                .await?;
            self.call_via(server_name, server, tool, arguments, token)
                .await
        };
        let outcome = match server.call_timeout {
            Some(limit) => tokio::time::timeout(limit, call)
                .await
                .unwrap_or(Err(McpError::CallTimeout(limit))),
            None => call.await,
        };
        outcome.unwrap_or_else(|problem| {
            ToolResult::error(format!("{server_name}/{tool} failed: {problem}"))
        })
    }
}

impl McpServers {
    /// Calls `tool` on a connection of the request's own (a forwarded token), else on the
    /// shared one.
    async fn call_via(
        &self,
        server_name: &str,
        server: &McpServer,
        tool: &str,
        arguments: &Value,
        forwarded: Option<String>,
    ) -> Result<ToolResult, McpError> {
        let span = tracing::Span::current();
        record_server(&span, &server.url);
        span.record("network.transport", "tcp");
        match forwarded {
            // A connection of this request's own, closed after the call.
            Some(token) => match Self::connect(server, Some(token), None, Watcher::default()).await
            {
                Ok(client) => {
                    let result = Self::call_on(&client, tool, arguments).await;
                    let _ = client.cancel().await;
                    result.map_err(|e| McpError::Call(e.message))
                }
                Err(e) => Err(e),
            },
            None => {
                match self.shared(server_name, false).await {
                    Ok(client) => match Self::call_on(&client, tool, arguments).await {
                        Ok(result) => Ok(result),
                        // The session is gone for good (the server restarted and rmcp's own
                        // re-initialization failed): once more on a new connection.
                        Err(first) if first.connection_lost => {
                            match self.shared(server_name, true).await {
                                Ok(client) => Self::call_on(&client, tool, arguments)
                                    .await
                                    .map_err(|e| McpError::Retried {
                                        first: first.message,
                                        then: Box::new(McpError::Call(e.message)),
                                    }),
                                Err(e) => Err(McpError::Reconnect {
                                    first: first.message,
                                    then: Box::new(e),
                                }),
                            }
                        }
                        Err(first) => Err(McpError::Call(first.message)),
                    },
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// Every page of a server's tools, within [`LIST_TIMEOUT`], [`MAX_TOOL_PAGES`] and
/// [`MAX_TOOLS`].
async fn list_tools(client: &Client) -> Result<Vec<rmcp::model::Tool>, McpError> {
    let pages = async {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_TOOL_PAGES {
            let page = client
                .list_tools(Some(
                    rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
                ))
                .await
                .map_err(|e| McpError::ListTools(redact_text(&e.to_string())))?;
            tools.extend(page.tools);
            if tools.len() >= MAX_TOOLS {
                tracing::warn!(
                    kept = MAX_TOOLS,
                    "the server offers more tools than are taken"
                );
                tools.truncate(MAX_TOOLS);
                return Ok(tools);
            }
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        tracing::warn!(
            pages = MAX_TOOL_PAGES,
            "tools/list kept paging; the rest is left out"
        );
        Ok(tools)
    };
    tokio::time::timeout(LIST_TIMEOUT, pages)
        .await
        .unwrap_or(Err(McpError::ListTimeout(LIST_TIMEOUT)))
}

/// Why a `tools/call` failed.
struct CallFailure {
    message: String,
    /// The connection or session is gone, so the call never reached the server.
    connection_lost: bool,
}

/// The model's view of a server's tools.
fn specs(server: &str, tools: Vec<rmcp::model::Tool>) -> Vec<ToolSpec> {
    tools
        .into_iter()
        .map(|t| ToolSpec {
            name: format!("{server}__{}", t.name),
            description: t.description.map(|d| d.to_string()).unwrap_or_default(),
            input_schema: Value::Object((*t.input_schema).clone()),
        })
        .collect()
}

/// The inbound token to send to `server`: only if it opted in and has no `Authorization` of its own.
fn forwarded_token(server: &McpServer, bearer: &Bearer) -> Option<String> {
    let configured = server
        .headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    if server.forward_inbound_auth && !configured {
        bearer.expose().map(str::to_owned)
    } else {
        None
    }
}

/// The current span's trace context as a tool call's `_meta` (`traceparent`, `tracestate`),
/// when there is one.
fn trace_meta() -> Option<RequestMetaObject> {
    let headers = crate::platform::telemetry::current_headers();
    let meta = super::traced_http::TRACE_KEYS
        .iter()
        .filter_map(|key| {
            let value = headers.get(*key)?.to_str().ok()?;
            Some(((*key).to_owned(), Value::String(value.to_owned())))
        })
        .collect();
    let meta: serde_json::Map<String, Value> = meta;
    (!meta.is_empty()).then_some(RequestMetaObject(MetaObject(meta)))
}
