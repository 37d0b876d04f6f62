//! A real MCP server for tests: rmcp's Streamable HTTP server on a free port, with tools
//!
//! - `add {a, b}` → the sum; `echo {n}` → `n`;
//! - `fail {reason}` → an `isError` result carrying `reason`;
//! - `hang {}` → never answers (until the call is canceled or the server stops);
//! - `slow {ms}` → answers `slept <ms>` after `ms` milliseconds;
//! - `progress {steps}` → sends `steps` progress notifications (when the call has a
//!   `progressToken`), then answers `done`.
//!
//! Every HTTP request's `Authorization` header and every `tools/call` (tool, arguments,
//! `Authorization`) are recorded. The server can be stopped and started again on the same
//! port, to play a downstream server that goes down and comes back. [`Options`] make it
//! answer `tools/list` late, refuse (401) every request without a given bearer token, or speak
//! only the legacy revisions (`initialize`, sessions) or only MCP 2026-07-28 (stateless).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// One `tools/call` as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub tool: String,
    pub arguments: Value,
    /// The request's `Authorization` header.
    pub authorization: Option<String>,
    /// The request's `traceparent` header.
    pub traceparent: Option<String>,
    /// `params._meta.traceparent`.
    pub meta_traceparent: Option<String>,
    /// When it arrived.
    pub at: std::time::Instant,
}

/// What the server saw.
#[derive(Debug, Default)]
struct Log {
    /// The `Authorization` header of every HTTP request.
    authorizations: Vec<Option<String>>,
    calls: Vec<Call>,
    /// JSON-RPC methods, in order.
    methods: Vec<String>,
    /// `(method, traceparent header)` of every JSON-RPC request, in order.
    traces: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, Default)]
struct Tools {
    list_delay: Option<Duration>,
    revisions: Revisions,
    /// `hang` calls that ended because their caller went away or canceled them.
    abandoned: Arc<std::sync::atomic::AtomicUsize>,
}

/// The MCP revisions the fixture speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Revisions {
    /// 2026-07-28 and every older one (rmcp's default).
    #[default]
    Every,
    /// Up to 2025-11-25: `initialize` and sessions; `server/discover` is refused.
    LegacyOnly,
    /// 2026-07-28 only: `initialize` is refused.
    ModernOnly,
}

/// How the fixture misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `tools/list` answers only after this long.
    pub list_delay: Option<Duration>,
    /// Every HTTP request without `Authorization: Bearer <this>` gets 401.
    pub required_token: Option<String>,
    pub revisions: Revisions,
}

fn schema(properties: &Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn text(result: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(result)]).into()
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match self.revisions {
            Revisions::Every => std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
            Revisions::LegacyOnly => std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(
                &ProtocolVersion::V_2025_11_25,
            )),
            Revisions::ModernOnly => std::borrow::Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
        }
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(delay) = self.list_delay {
            tokio::time::sleep(delay).await;
        }
        let int = json!({"type": "integer"});
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "add",
                "Adds two numbers",
                schema(&json!({"a": int, "b": int}), &["a", "b"]),
            ),
            Tool::new("echo", "Echoes n", schema(&json!({"n": int}), &["n"])),
            Tool::new(
                "fail",
                "Always fails, with the given reason",
                schema(&json!({"reason": {"type": "string"}}), &[]),
            ),
            Tool::new("hang", "Never answers", schema(&json!({}), &[])),
            // Asking again changes nothing: it says so (`idempotentHint`).
            Tool::new(
                "slow",
                "Answers after ms milliseconds",
                schema(&json!({"ms": int}), &["ms"]),
            )
            .with_annotations(rmcp::model::ToolAnnotations::new().idempotent(true)),
            Tool::new(
                "progress",
                "Reports progress steps times, then answers",
                schema(&json!({"steps": int}), &[]),
            ),
            Tool::new(
                "report",
                "Writes a report: a line of text, the report as an embedded resource and a link to its data",
                schema(&json!({}), &[]),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let int = |key: &str| args.get(key).and_then(Value::as_i64).unwrap_or(0);
        match request.name.as_ref() {
            "add" => Ok(text((int("a") + int("b")).to_string())),
            "echo" => Ok(text(int("n").to_string())),
            "fail" => {
                let reason = args
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("the fixture failed on purpose");
                Ok(CallToolResult::error(vec![ContentBlock::text(reason)]).into())
            }
            "hang" => {
                context.ct.cancelled().await;
                self.abandoned
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(text("canceled"))
            }
            "slow" => {
                let ms = u64::try_from(int("ms")).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(text(format!("slept {ms}")))
            }
            "progress" => {
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=int("steps") {
                        #[expect(clippy::cast_precision_loss, reason = "small step counts")]
                        let progress = step as f64;
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), progress)
                                    .with_message(format!("step {step}")),
                            )
                            .await;
                    }
                }
                Ok(text("done"))
            }
            "report" => {
                let mut data =
                    rmcp::model::Resource::new("https://example.com/data.csv", "data.csv");
                data.mime_type = Some("text/csv".to_owned());
                Ok(CallToolResult::success(vec![
                    ContentBlock::text("the report is attached"),
                    ContentBlock::Resource(rmcp::model::EmbeddedResource::new(
                        rmcp::model::ResourceContents::TextResourceContents {
                            uri: "file:///reports/summary.txt".to_owned(),
                            mime_type: Some("text/plain".to_owned()),
                            text: "all good".to_owned(),
                            meta: None,
                        },
                    )),
                    ContentBlock::resource_link(data),
                ])
                .into())
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

/// A running (or stopped) fixture server.
#[derive(Debug)]
pub struct McpFixture {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    abandoned: Arc<std::sync::atomic::AtomicUsize>,
    stop: CancellationToken,
    options: Options,
}

impl McpFixture {
    /// Starts a server on a free port.
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    /// Starts a server on a free port that misbehaves as `options` say.
    pub async fn start_with(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds a free port");
        let addr = listener.local_addr().expect("has an address");
        let mut fixture = Self {
            addr,
            log: Arc::default(),
            abandoned: Arc::default(),
            stop: CancellationToken::new(),
            options,
        };
        fixture.serve(listener);
        fixture
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let tools = Tools {
            list_delay: self.options.list_delay,
            revisions: self.options.revisions,
            abandoned: Arc::clone(&self.abandoned),
        };
        let service: StreamableHttpService<Tools, LocalSessionManager> = StreamableHttpService::new(
            move || Ok(tools.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default().with_sse_keep_alive(None),
        );
        let log = Arc::clone(&self.log);
        let required = self
            .options
            .required_token
            .as_ref()
            .map(|t| format!("Bearer {t}"));
        let record = move |req: Request, next: Next| {
            let log = Arc::clone(&log);
            let required = required.clone();
            async move {
                let authorization = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(required) = &required
                    && authorization.as_deref() != Some(required.as_str())
                {
                    log.lock()
                        .expect("the log lock")
                        .authorizations
                        .push(authorization);
                    return axum::http::StatusCode::UNAUTHORIZED.into_response();
                }
                let traceparent = req
                    .headers()
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 16 << 20)
                    .await
                    .unwrap_or_default();
                {
                    let mut log = log.lock().expect("the log lock");
                    log.authorizations.push(authorization.clone());
                    if let Ok(rpc) = serde_json::from_slice::<Value>(&bytes) {
                        if let Some(method) = rpc["method"].as_str() {
                            log.methods.push(method.to_owned());
                            log.traces.push((method.to_owned(), traceparent.clone()));
                        }
                        if rpc["method"] == "tools/call" {
                            log.calls.push(Call {
                                tool: rpc["params"]["name"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                                arguments: rpc["params"]["arguments"].clone(),
                                authorization,
                                traceparent: traceparent.clone(),
                                meta_traceparent: rpc["params"]["_meta"]["traceparent"]
                                    .as_str()
                                    .map(str::to_owned),
                                at: std::time::Instant::now(),
                            });
                        }
                    }
                }
                next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                    .await
            }
        };
        let app = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn(record));
        let stop = CancellationToken::new();
        self.stop = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        });
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops answering: new connections are refused.
    pub async fn stop(&self) {
        self.stop.cancel();
        // Wait until the port no longer accepts.
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(self.addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Serves again on the same port (new sessions: the old ones are gone).
    pub async fn restart(&mut self) {
        let mut attempts = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) if attempts < 100 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot bind {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    /// Every `tools/call`, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.log.lock().expect("the log lock").calls.clone()
    }

    /// The `Authorization` header of every HTTP request.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.log
            .lock()
            .expect("the log lock")
            .authorizations
            .clone()
    }

    /// The `traceparent` header of every request of JSON-RPC `method`, in order.
    pub fn traceparents(&self, method: &str) -> Vec<Option<String>> {
        self.log
            .lock()
            .expect("the log lock")
            .traces
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// How many `hang` calls ended because they were canceled: told by
    /// `notifications/cancelled` (legacy revisions) or by the caller closing the call's
    /// stream (2026-07-28).
    pub fn abandoned_calls(&self) -> usize {
        self.abandoned.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many requests used JSON-RPC `method`.
    pub fn count(&self, method: &str) -> usize {
        self.log
            .lock()
            .expect("the log lock")
            .methods
            .iter()
            .filter(|m| *m == method)
            .count()
    }
}

impl Drop for McpFixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
