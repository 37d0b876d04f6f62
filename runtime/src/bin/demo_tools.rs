//! `daedalus-demo-tools`: a small downstream MCP server (Streamable HTTP at `/mcp`) for the
//! compose quick start, so the agent loop has real tools to call:
//!
//! - `add {a, b}`: the sum of two numbers;
//! - `word_count {text}`: how many words, lines and characters `text` has;
//! - `utc_now {}`: the current time, RFC 3339, UTC.
//!
//! It listens on `DEMO_TOOLS_PORT` (default 8000) on every address and accepts any `Host`, as
//! a server on a private compose network does; do not publish its port.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy)]
struct DemoTools;

fn schema(properties: &Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn text(result: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(result)]).into()
}

/// A tool's answer, or why it refused (an `isError` result the model can read).
fn answer(result: Result<String, String>) -> CallToolResponse {
    match result {
        Ok(answer) => text(answer),
        Err(why) => CallToolResult::error(vec![ContentBlock::text(why)]).into(),
    }
}

/// `a + b`, printed without a fraction when it is whole.
fn add(args: &Map<String, Value>) -> Result<String, String> {
    let (Some(a), Some(b)) = (
        args.get("a").and_then(Value::as_f64),
        args.get("b").and_then(Value::as_f64),
    ) else {
        return Err("add needs two numbers, a and b".to_owned());
    };
    let sum = a + b;
    if !sum.is_finite() {
        return Err("the sum is not a finite number".to_owned());
    }
    if sum.fract() == 0.0 && sum.abs() < 9e15 {
        #[expect(clippy::cast_possible_truncation, reason = "whole and below 2^53")]
        return Ok(format!("{}", sum as i64));
    }
    Ok(sum.to_string())
}

fn word_count(args: &Map<String, Value>) -> Result<String, String> {
    let input = args
        .get("text")
        .and_then(Value::as_str)
        .ok_or("word_count needs text")?;
    Ok(json!({
        "words": input.split_whitespace().count(),
        "lines": input.lines().count(),
        "characters": input.chars().count(),
    })
    .to_string())
}

impl ServerHandler for DemoTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let number = json!({"type": "number"});
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "add",
                "Adds two numbers",
                schema(&json!({"a": number, "b": number}), &["a", "b"]),
            ),
            Tool::new(
                "word_count",
                "Counts the words, lines and characters of a text",
                schema(&json!({"text": {"type": "string"}}), &["text"]),
            ),
            Tool::new(
                "utc_now",
                "The current date and time (UTC, RFC 3339)",
                schema(&json!({}), &[]),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "add" => Ok(answer(add(&args))),
            "word_count" => Ok(answer(word_count(&args))),
            "utc_now" => Ok(text(
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            )),
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

fn main() -> ExitCode {
    let port = match std::env::var("DEMO_TOOLS_PORT").map(|p| p.parse::<u16>()) {
        Err(_) => 8000,
        Ok(Ok(port)) => port,
        Ok(Err(e)) => {
            eprintln!("daedalus-demo-tools: DEMO_TOOLS_PORT: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("daedalus-demo-tools: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("daedalus-demo-tools: cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let service: StreamableHttpService<DemoTools, LocalSessionManager> =
            StreamableHttpService::new(
                || Ok(DemoTools),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default().disable_allowed_hosts(),
            );
        let app = axum::Router::new().nest_service("/mcp", service);
        eprintln!("daedalus-demo-tools: serving MCP at http://{addr}/mcp");
        let stop = daedalus_contract::service::shutdown_signal();
        match axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("daedalus-demo-tools: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn add_sums_whole_and_fractional_numbers() {
        assert_eq!(add(&args(json!({"a": 2, "b": 3}))).unwrap(), "5");
        assert_eq!(add(&args(json!({"a": 0.5, "b": 0.25}))).unwrap(), "0.75");
        assert!(
            add(&args(json!({"a": "x"})))
                .unwrap_err()
                .contains("two numbers")
        );
        assert!(add(&args(json!({"a": 1e308, "b": 1e308}))).is_err());
    }

    #[test]
    fn word_count_counts() {
        let counted: Value =
            serde_json::from_str(&word_count(&args(json!({"text": "a b\nc"}))).unwrap()).unwrap();
        assert_eq!(counted, json!({"words": 3, "lines": 2, "characters": 5}));
        assert!(word_count(&args(json!({}))).is_err());
    }
}
