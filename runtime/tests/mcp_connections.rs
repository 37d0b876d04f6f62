//! The runtime's connection to a downstream MCP server, on either revision: a tool list that
//! changes (told on the legacy session, or through `subscriptions/listen` on 2026-07-28), a
//! session the server lost, a call abandoned when its turn is canceled (told by
//! `notifications/cancelled`, or by closing the call's stream), and servers of each revision
//! serving one agent.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::{McpFixture, Options, Revisions};
use rmcp::ServerHandler;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use support::runtime::Runtime;
use support::{post, tool_names, tool_results};

const KEY: &str = "sk-connections";

/// A server whose tool list grows: calling `grow` adds `extra` and announces it with
/// `notifications/tools/list_changed`: on the session (legacy revisions), or to every
/// `subscriptions/listen` (2026-07-28). `legacy_only` keeps it to the revisions with
/// sessions; `ends_first_subscription` ends the first `subscriptions/listen` at once, as a
/// server restarting its notifier would.
#[derive(Debug, Clone, Default)]
struct Growing {
    grown: Arc<std::sync::atomic::AtomicBool>,
    announce: Arc<tokio::sync::Notify>,
    legacy_only: bool,
    ends_first_subscription: bool,
    /// How many `subscriptions/listen` it took.
    listens: Arc<std::sync::atomic::AtomicUsize>,
}

impl ServerHandler for Growing {
    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        use rmcp::model::ProtocolVersion;
        std::borrow::Cow::Borrowed(if self.legacy_only {
            ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
        } else {
            ProtocolVersion::KNOWN_VERSIONS
        })
    }

    fn accepted_subscription_filter(
        &self,
        _: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(
            rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build(),
        )
    }

    async fn listen(
        &self,
        subscription: rmcp::service::SubscriptionContext,
    ) -> Result<(), rmcp::ErrorData> {
        let before = self
            .listens
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.ends_first_subscription && before == 0 {
            return Ok(());
        }
        loop {
            tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                () = self.announce.notified() => {
                    let note = rmcp::model::ServerNotification::ToolListChangedNotification(
                        rmcp::model::ToolListChangedNotification::default(),
                    );
                    let _ = subscription.sink().send(note).await;
                }
            }
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _: Option<rmcp::model::PaginatedRequestParams>,
        _: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = Arc::new(
            json!({"type": "object", "properties": {}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let mut tools = vec![rmcp::model::Tool::new(
            "grow",
            "Adds a tool",
            Arc::clone(&schema),
        )];
        if self.grown.load(std::sync::atomic::Ordering::SeqCst) {
            tools.push(rmcp::model::Tool::new("extra", "Appeared later", schema));
        }
        Ok(rmcp::model::ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        if request.name == "grow" {
            self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
            self.announce.notify_waiters();
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(format!(
                "{} done",
                request.name
            ))])
            .into(),
        )
    }
}

/// A `Growing` server whose sessions the test can drop, and which counts `initialize`s and
/// subscriptions.
struct GrowingFixture {
    url: String,
    sessions: Arc<LocalSessionManager>,
    initializes: Arc<std::sync::atomic::AtomicUsize>,
    listens: Arc<std::sync::atomic::AtomicUsize>,
}

async fn growing(legacy_only: bool) -> GrowingFixture {
    serve_growing(Growing {
        legacy_only,
        ..Growing::default()
    })
    .await
}

async fn serve_growing(server: Growing) -> GrowingFixture {
    let sessions = Arc::new(LocalSessionManager::default());
    let listens = Arc::clone(&server.listens);
    let service: StreamableHttpService<Growing, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::clone(&sessions),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    );
    let initializes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = {
        let initializes = Arc::clone(&initializes);
        move |req: Request, next: Next| {
            let initializes = Arc::clone(&initializes);
            async move {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20)
                    .await
                    .unwrap_or_default();
                if serde_json::from_slice::<Value>(&bytes)
                    .is_ok_and(|rpc| rpc["method"] == "initialize")
                {
                    initializes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                    .await
            }
        }
    };
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn(count));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    GrowingFixture {
        url: format!("http://{addr}/mcp"),
        sessions,
        initializes,
        listens,
    }
}

fn growing_yaml(fake: &FakeLlm, server: &str) -> String {
    format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    g: {{ url: \"{server}\" }}\n\
         agents:\n  a: {{ instruction: Grow., servers: [g] }}\n",
        fake.openai_base_url
    )
}

/// Two turns over a server whose tools grow during the first; answers how many `initialize`s
/// the server saw.
async fn tool_cache_refresh(legacy_only: bool) -> usize {
    let server = growing(legacy_only).await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("g__grow".into(), json!({}))]),
        Reply::Text("grown".into()),
        Reply::Text("I see more tools".into()),
    ]);
    let rt = Runtime::start(&growing_yaml(&fake, &server.url)).await;
    let url = rt.url.clone();
    post(&url, None, "m-1").await;
    // The notification travels on the session's stream (or the subscription's); give it a
    // moment to land.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    post(&url, None, "m-2").await;

    let log = fake.requests();
    assert!(!tool_names(&log[0]).contains(&"g__extra".to_owned()));
    assert!(
        tool_names(&log[2]).contains(&"g__extra".to_owned()),
        "the next turn offers the new tool: {:?}",
        tool_names(&log[2])
    );
    server.initializes.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test]
async fn the_tool_cache_refreshes_after_tools_list_changed() {
    assert_eq!(
        tool_cache_refresh(true).await,
        1,
        "refreshed on the same session, not by reconnecting"
    );
}

#[tokio::test]
async fn on_2026_07_28_the_tool_cache_refreshes_from_a_subscription() {
    assert_eq!(
        tool_cache_refresh(false).await,
        0,
        "no initialize: the server was spoken to statelessly"
    );
}

/// A 2026-07-28 server that ends the subscription telling its tool changes (as one
/// restarting its notifier would) is connected to again on the next turn, which listens again:
/// a change after that still reaches the tool cache.
#[tokio::test]
async fn an_ended_subscription_is_opened_again_and_later_changes_still_arrive() {
    let server = serve_growing(Growing {
        ends_first_subscription: true,
        ..Growing::default()
    })
    .await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::Text("first".into()),
        Reply::ToolCalls(vec![("g__grow".into(), json!({}))]),
        Reply::Text("grown".into()),
        Reply::Text("I see more tools".into()),
    ]);
    let rt = Runtime::start(&growing_yaml(&fake, &server.url)).await;
    let url = rt.url.clone();
    post(&url, None, "m-1").await;
    let ended = || {
        let listens = Arc::clone(&server.listens);
        async move { listens.load(std::sync::atomic::Ordering::SeqCst) >= 1 }
    };
    daedalus_test_kit::wait_until("the first subscription", Duration::from_secs(10), ended).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    post(&url, None, "m-2").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    post(&url, None, "m-3").await;

    assert_eq!(
        server.listens.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "listened again after the first subscription ended"
    );
    let log = fake.requests();
    assert!(
        tool_names(&log[3]).contains(&"g__extra".to_owned()),
        "the change after the new subscription arrived: {:?}",
        tool_names(&log[3])
    );
}

#[tokio::test]
async fn a_lost_session_is_initialized_again_and_the_call_goes_through() {
    let server = growing(true).await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::Text("ready".into()),
        Reply::ToolCalls(vec![("g__grow".into(), json!({}))]),
        Reply::Text("grown after all".into()),
    ]);
    let rt = Runtime::start(&growing_yaml(&fake, &server.url)).await;
    let url = rt.url.clone();
    post(&url, None, "m-1").await;
    let before = server.initializes.load(std::sync::atomic::Ordering::SeqCst);
    // The server forgets every session (as after a restart): the next call gets a 404.
    server.sessions.sessions.write().await.clear();

    let task = post(&url, None, "m-2").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "grown after all");
    let log = fake.requests();
    let result = &log[2].body["messages"];
    assert!(
        result.to_string().contains("grow done"),
        "the model got the tool's real result, not an error: {result}"
    );
    assert_eq!(
        server.initializes.load(std::sync::atomic::Ordering::SeqCst),
        before + 1,
        "exactly one new initialize"
    );
}

/// A turn canceled while a tool call is in flight abandons the call, and the MCP server is told
/// instead of working on until its timeout: on the legacy revisions by
/// `notifications/cancelled`, on 2026-07-28 by the call's stream closing (the spec's signal
/// over HTTP). Answers the server, once it has stopped the call.
async fn canceled_turn_on(revisions: Revisions) -> McpFixture {
    let server = McpFixture::start_with(Options {
        revisions,
        ..Default::default()
    })
    .await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::ToolCalls(vec![("fx__hang".into(), json!({}))])]);
    let yaml = support::one_server_yaml(&fake, KEY, &server.url(), "");
    let rt = Runtime::serving_with(&yaml, None, |config| {
        config.limits.request_timeout = Duration::from_millis(500);
    })
    .await;
    let url = rt.url.clone();
    let task = tokio::spawn(async move {
        let answer = reqwest::Client::new()
            .post(format!("{url}/"))
            .json(&json!({"message": {"messageId": "m-hang", "role": "user", "parts": [{"text": "hang"}]}}))
            .send()
            .await?;
        let status = answer.status().as_u16();
        let task: Value = answer.json().await?;
        assert_eq!(task["status"]["state"], "failed", "{task}");
        Ok::<_, reqwest::Error>(status)
    });
    let calls = || {
        let server = &server;
        async move { server.calls().len() == 1 }
    };
    daedalus_test_kit::wait_until(
        "the call to reach the server",
        Duration::from_secs(10),
        calls,
    )
    .await;
    assert_eq!(server.abandoned_calls(), 0);
    // REQUEST_TIMEOUT ends while the tool hangs: the turn is canceled, and fails saying so.
    let status = task.await.expect("joined").expect("answered");
    assert_eq!(status, 200);
    let stopped = || {
        let server = &server;
        async move { server.abandoned_calls() == 1 }
    };
    daedalus_test_kit::wait_until(
        "the server to stop the call",
        Duration::from_secs(10),
        stopped,
    )
    .await;
    assert_eq!(fake.requests().len(), 1, "no model call after the cancel");
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_turn_tells_the_mcp_server_its_call_is_abandoned() {
    let server = canceled_turn_on(Revisions::LegacyOnly).await;
    assert_eq!(server.count("notifications/cancelled"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_2026_07_28_a_canceled_turn_closes_the_calls_stream() {
    let server = canceled_turn_on(Revisions::ModernOnly).await;
    assert_eq!(server.count("initialize"), 0, "spoken to statelessly");
}

/// One downstream server of each revision in one deployment: a tool of each runs.
#[tokio::test]
async fn downstream_servers_of_either_revision_serve_one_agent() {
    let legacy = McpFixture::start_with(Options {
        revisions: Revisions::LegacyOnly,
        ..Default::default()
    })
    .await;
    let modern = McpFixture::start_with(Options {
        revisions: Revisions::ModernOnly,
        ..Default::default()
    })
    .await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("old__add".into(), json!({"a": 1, "b": 2})),
            ("new__add".into(), json!({"a": 30, "b": 4})),
        ]),
        Reply::Text("3 and 34".into()),
    ]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    old: {{ url: \"{}\" }}\n    new: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [old, new] }}\n",
        fake.openai_base_url,
        legacy.url(),
        modern.url()
    );
    let rt = Runtime::start(&yaml).await;
    let task = post(&rt.url, None, "m-both").await;
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "3 and 34",
        "{task}"
    );
    let mut results = tool_results(&fake, 1);
    results.sort();
    assert_eq!(results, ["3", "34"]);
    assert!(
        legacy.count("initialize") >= 1,
        "the legacy server got a session"
    );
    assert_eq!(
        modern.count("initialize"),
        0,
        "the 2026-07-28 server got none"
    );
    assert!(modern.count("server/discover") >= 1);
}
