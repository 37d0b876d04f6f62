//! MCP sessions opened by hand over Streamable HTTP (as a flood would), and a process's RSS:
//! what tests and benchmarks of the MCP session bound share.

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
