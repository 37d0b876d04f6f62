//! An MCP client as Daedalus uses one (rmcp, Streamable HTTP), recording progress.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, NumberOrString, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

/// Every progress notification: (token, progress, total, message).
pub type Progress = Arc<Mutex<Vec<(String, f64, Option<f64>, Option<String>)>>>;

#[derive(Debug, Clone, Default)]
pub struct Recorder {
    progress: Progress,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_progress(&self, p: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let token = match &p.progress_token.0 {
            NumberOrString::String(s) => s.to_string(),
            NumberOrString::Number(n) => n.to_string(),
        };
        self.progress
            .lock()
            .expect("lock")
            .push((token, p.progress, p.total, p.message));
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// A session with `url`, sending `bearer` when given.
pub async fn connect(url: &str, bearer: Option<&str>) -> (Client, Progress) {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(b) = bearer {
        config = config.auth_header(b.to_owned());
    }
    let recorder = Recorder::default();
    let progress = Arc::clone(&recorder.progress);
    let client = recorder
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("an MCP session");
    (client, progress)
}

/// A session with `url` that sends `headers` on every request.
pub async fn connect_with_headers(url: &str, headers: &[(&str, &str)]) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    for (name, value) in headers {
        config.custom_headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
            http::HeaderValue::from_str(value).expect("a header value"),
        );
    }
    Recorder::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("an MCP session")
}

/// `tools/call` (rmcp attaches a progress token to every request).
pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.expect("tools/call answered")
}

/// The text of a result.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
