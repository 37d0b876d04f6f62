//! MCP by hand over Streamable HTTP, as a flood would send it: legacy sessions opened, and
//! MCP 2026-07-28 requests (stateless, the client's context in `_meta`); and a process's RSS.
//! What tests and benchmarks of the MCP face share.

use serde_json::json;

const ACCEPT: &str = "application/json, text/event-stream";

/// What a raw `initialize` got.
#[derive(Debug)]
pub struct McpOpened {
    pub status: u16,
    /// `Mcp-Session-Id`, when a session was opened.
    pub session: Option<String>,
    pub retry_after: Option<String>,
    pub body: String,
}

/// Opens an MCP session at `url` by hand: `initialize`, and, when `finish`,
/// `notifications/initialized` (a session that never sends it is an abandoned handshake).
pub async fn open_mcp_session(http: &reqwest::Client, url: &str, finish: bool) -> McpOpened {
    let response = http
        .post(url)
        .header("accept", ACCEPT)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"}}}),
        )
        .send()
        .await
        .expect("initialize answered");
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (session, retry_after) = (header("mcp-session-id"), header("retry-after"));
    let body = response.text().await.expect("a body");
    if let (true, Some(id)) = (finish, &session) {
        let done = http
            .post(url)
            .header("accept", ACCEPT)
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .expect("initialized answered");
        assert_eq!(done.status(), 202, "notifications/initialized accepted");
    }
    McpOpened {
        status,
        session,
        retry_after,
        body,
    }
}

/// Who sends a 2026-07-28 request: its name (each request may come from a client of its own)
/// and whether it declares the tasks extension.
#[derive(Debug, Clone)]
pub struct ModernClient {
    pub name: String,
    pub tasks: bool,
    /// The W3C trace its requests carry in `_meta` (and not as HTTP headers).
    pub traceparent: Option<String>,
}

impl ModernClient {
    /// A client called `name`, declaring no extension.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tasks: false,
            traceparent: None,
        }
    }

    /// The same client, its requests in trace `traceparent` (carried in `_meta`).
    #[must_use]
    pub fn in_trace(self, traceparent: impl Into<String>) -> Self {
        Self {
            traceparent: Some(traceparent.into()),
            ..self
        }
    }

    /// The same client, declaring the tasks extension.
    #[must_use]
    pub fn with_tasks(self) -> Self {
        Self {
            tasks: true,
            ..self
        }
    }
}

/// One MCP 2026-07-28 request to `url`, from `client`: `_meta` carries the revision, the
/// client's capabilities and its name; `Mcp-Method` (and `Mcp-Name` for a named call) ride as
/// headers. Answers the JSON-RPC response (the last message of the SSE stream with an id);
/// an HTTP error fails the caller.
pub async fn modern_mcp_request(
    http: &reqwest::Client,
    url: &str,
    client: &ModernClient,
    method: &str,
    mut params: serde_json::Value,
) -> serde_json::Value {
    let capabilities = if client.tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": client.name, "version": "1"},
    });
    if let Some(traceparent) = &client.traceparent {
        params["_meta"]["traceparent"] = json!(traceparent);
    }
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .map(str::to_owned);
    let mut request = http
        .post(url)
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("sent");
    let status = response.status();
    let body = response.text().await.expect("a body");
    assert!(status.is_success(), "{method}: {status} {body}");
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .chain(serde_json::from_str::<serde_json::Value>(&body).ok())
        .rfind(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("{method}: no answer in {body}"))
}

/// The resident set size of process `pid`, in bytes (from `/proc`).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}
