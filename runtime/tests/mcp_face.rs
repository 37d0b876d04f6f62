//! The MCP face as Daedalus uses it, over real Streamable HTTP with rmcp's client: the tools,
//! progress, get_health, scopes, images, the history prompt, the registry, metrics and
//! isolation under load. (`mcp_python.rs` repeats the core of it with the official Python SDK.)

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_runtime::config::Launch;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, GetPromptRequestParams, NumberOrString,
    ProgressNotificationParam, ProgressToken, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-face";

/// A runtime serving `yaml`, stopped on drop.
struct Runtime {
    url: String,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Runtime {
    fn mcp(&self, agent: &str) -> String {
        format!("{}/agents/{agent}/mcp", self.url)
    }
}

async fn runtime(yaml: &str) -> Runtime {
    runtime_serving(yaml, None).await
}

/// [`runtime`], with `agent` on the contract face (needed when several could be).
async fn runtime_serving(yaml: &str, agent: Option<&str>) -> Runtime {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("agents.yaml"), yaml).expect("written");
    let args = [
        "daedalus-runtime",
        "--port",
        "0",
        "--sessions-db",
        ":memory:",
        "--log-level",
        "warn",
    ]
    .map(std::ffi::OsString::from);
    let env = |k: &str| {
        (k == "AGENT_NAME")
            .then(|| agent.map(str::to_owned))
            .flatten()
    };
    let config = match Launch::from_sources(args, &env, dir.path()) {
        Ok(Launch::Run(c)) => c,
        other => panic!("config: {other:?}"),
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    tokio::spawn(async move { daedalus_runtime::run(listener, config, shutdown).await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while reqwest::get(format!("{url}/health"))
        .await
        .map_or(true, |r| r.status() != 200)
    {
        assert!(Instant::now() < deadline, "the runtime became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Runtime {
        url,
        stop,
        _dir: dir,
    }
}

/// A deployment on the fake LLM: `agents` is YAML for the `agents:` map, `servers` for
/// `mcp.servers`.
fn deployment(fake: &FakeLlm, servers: &str, agents: &str) -> String {
    format!(
        "default_model: openai.gpt-face\nmodel_capabilities: {{ vision: true }}\n\
         openai: {{ api_key: {KEY}, base_url: \"{}\" }}\nmcp:\n  servers:\n{servers}\nagents:\n{agents}",
        fake.openai_base_url
    )
}

type Progress = Arc<Mutex<Vec<(String, f64, Option<f64>, Option<String>)>>>;

/// Records every progress notification: (token, progress, total, message).
#[derive(Debug, Clone, Default)]
struct Recorder {
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

type Client = RunningService<RoleClient, Recorder>;

async fn connect(url: &str, bearer: Option<&str>) -> (Client, Progress) {
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

async fn call(client: &Client, tool: &str, args: Value, token: Option<&str>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    if let Some(t) = token {
        let mut meta = RequestMetaObject::default();
        meta.set_progress_token(ProgressToken(NumberOrString::String(t.to_owned().into())));
        params.meta = Some(meta);
    }
    client.call_tool(params).await.expect("tools/call answered")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_runs_the_loop_with_progress_from_tools_and_a_sub_agent() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fx__add".into(), json!({"a": 2, "b": 3})),
            ("fx__echo".into(), json!({"n": 7})),
            ("helper__send_message".into(), json!({"message": "check"})),
        ]),
        Reply::Text("checked".into()),
        Reply::Text("5, 7 and checked".into()),
        Reply::Text("no token this time".into()),
    ]);
    let yaml = deployment(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  harper: { instruction: Work., servers: [fx, helper] }\n  helper: { instruction: Help. }\n",
    );
    let rt = runtime(&yaml).await;
    let (client, progress) = connect(&rt.mcp("harper"), None).await;

    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, ["send_message", "harper", "get_health"]);

    let result = call(&client, "harper", json!({"message": "go"}), Some("tok-1")).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "5, 7 and checked");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = progress.lock().expect("lock").clone();
    // (rmcp's client numbers the tokens itself; one call, one token.)
    assert!(
        seen.iter()
            .all(|(t, _, total, _)| *t == seen[0].0 && total.is_none()),
        "{seen:?}"
    );
    // rmcp's client hands notifications to its handler on separate tasks, so arrival order
    // here may differ from the wire's (the Python test checks arrival order). What the server
    // controls: one counter, every value once, in the order of the loop's events.
    let mut by_progress = seen.clone();
    by_progress.sort_by(|a, b| a.1.total_cmp(&b.1));
    let values: Vec<f64> = by_progress.iter().map(|(_, p, _, _)| *p).collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "no progress value repeats: {values:?}"
    );
    let at = |m: &str| {
        by_progress
            .iter()
            .position(|(_, _, _, msg)| msg.as_deref() == Some(m))
            .unwrap_or_else(|| panic!("{m:?} missing from {by_progress:?}"))
    };
    assert!(at("harper step 1 (llm)") < at("harper step 1 (tool)"));
    assert!(at("fx/add: started") < at("fx/add: completed"));
    assert!(at("helper/send_message: started") < at("helper step 1 (llm)"));
    assert!(at("helper step 1 (llm)") < at("helper/send_message: completed"));
    assert!(at("helper/send_message: completed") < at("harper step 2 (llm)"));
    let messages: Vec<String> = seen.iter().filter_map(|(_, _, _, m)| m.clone()).collect();
    for expected in [
        "harper step 1 (llm)",
        "harper step 1 (tool)",
        "fx/add: started",
        "fx/add: completed",
        "fx/echo: completed",
        "helper/send_message: started",
        "helper step 1 (llm)",
        "helper/send_message: completed",
        "harper step 2 (llm)",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "{expected:?} missing from {messages:?}"
        );
    }
    let pattern = regex_lite(&messages);
    assert!(pattern, "every message follows a pattern: {messages:?}");

    // (rmcp's client attaches a progress token to every request, so "no token, no progress"
    // is checked with the Python SDK in mcp_python.rs.)
    let plain = call(&client, "send_message", json!({"message": "again"}), None).await;
    assert_eq!(text(&plain), "no token this time");
}

/// Every message is `{server}/{tool}: started|completed|failed` or `{agent} step N (llm|tool)`.
fn regex_lite(messages: &[String]) -> bool {
    messages.iter().all(|m| {
        let tool = m.split_once(": ").is_some_and(|(head, tail)| {
            head.split_once('/')
                .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
                && matches!(tail, "started" | "completed" | "failed")
        });
        let step = m
            .strip_suffix(" (llm)")
            .or_else(|| m.strip_suffix(" (tool)"))
            .and_then(|rest| rest.rsplit_once(" step "))
            .is_some_and(|(agent, n)| !agent.is_empty() && n.parse::<u32>().is_ok());
        tool || step
    })
}

async fn health(client: &Client) -> Value {
    let result = call(client, "get_health", json!({}), None).await;
    serde_json::from_str(&text(&result)).expect("get_health answers JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_health_probes_downstream_servers_without_the_model() {
    let mut fixtures = Vec::new();
    for _ in 0..4 {
        fixtures.push(McpFixture::start().await);
    }
    // A server that accepts connections and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let hanging_url = format!("http://{}/mcp", hanging.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hanging.accept().await {
            held.push(socket);
        }
    });
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let mut servers: Vec<String> = fixtures
        .iter()
        .enumerate()
        .map(|(i, f)| format!("    s{i}: {{ url: \"{}\" }}", f.url()))
        .collect();
    servers.push(format!("    slow: {{ url: \"{hanging_url}\" }}"));
    let yaml = deployment(
        &fake,
        &servers.join("\n"),
        "  watched: { instruction: Watch., servers: [s0, s1, s2, s3, slow] }\n",
    );
    let rt = runtime(&yaml).await;
    let (client, _) = connect(&rt.mcp("watched"), None).await;

    let started = Instant::now();
    let report = health(&client).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(3500), "answered in {took:?}");
    assert_eq!(report["status"], "degraded", "{report}");
    let message = report["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("slow") && !message.contains("s0"),
        "{message}"
    );
    assert!(
        report["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        fake.requests().iter().all(|r| !r.path.contains("chat")),
        "get_health never asks the model: {:?}",
        fake.requests()
            .iter()
            .map(|r| r.path.clone())
            .collect::<Vec<_>>()
    );
    // Each probe is an initialize, then the session is closed again.
    assert!(fixtures.iter().all(|f| f.count("initialize") >= 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_health_follows_a_server_going_down_and_coming_back() {
    let mut fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let yaml = deployment(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  watched: { instruction: Watch., servers: [fx] }\n",
    );
    let rt = runtime(&yaml).await;
    let (client, _) = connect(&rt.mcp("watched"), None).await;
    assert_eq!(health(&client).await["status"], "ok");
    fx.stop().await;
    let down = health(&client).await;
    assert_eq!(down["status"], "degraded");
    assert!(
        down["message"].as_str().is_some_and(|m| m.contains("fx")),
        "{down}"
    );
    fx.restart().await;
    assert_eq!(health(&client).await["status"], "ok");

    let metrics = reqwest::get(format!("{}/metrics", rt.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("pallas_downstream_up{agent=\"watched\",server=\"fx\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pallas_agent_health_status{agent=\"watched\"} 1"),
        "{metrics}"
    );
}

async fn history(client: &Client, agent: &str) -> Vec<(String, String)> {
    let prompt = client
        .get_prompt(GetPromptRequestParams::new(format!("{agent}_history")))
        .await
        .expect("prompts/get answered");
    prompt
        .messages
        .iter()
        .map(|m| {
            let role = serde_json::to_value(&m.role)
                .expect("role")
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let text = m
                .content
                .as_text()
                .map(|t| t.text.clone())
                .unwrap_or_default();
            (role, text)
        })
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_scope_decides_which_conversation_a_call_continues() {
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: Vec::new(),
        text: "noted".into(),
    });
    let yaml = deployment(
        &fake,
        "    {}",
        "  perconn: { instruction: A., instance_scope: connection }\n  \
           common: { instruction: B., instance_scope: shared }\n  \
           oneoff: { instruction: C., instance_scope: request }\n",
    )
    .replace("  servers:\n    {}\n", "  servers: {}\n");
    let rt = runtime_serving(&yaml, Some("perconn")).await;

    // connection: two sessions, two conversations.
    let (ann, _) = connect(&rt.mcp("perconn"), None).await;
    let (bob, _) = connect(&rt.mcp("perconn"), None).await;
    call(&ann, "send_message", json!({"message": "I am A"}), None).await;
    call(&bob, "send_message", json!({"message": "I am B"}), None).await;
    assert_eq!(
        history(&ann, "perconn").await,
        [pair("user", "I am A"), pair("assistant", "noted")]
    );
    assert_eq!(
        history(&bob, "perconn").await,
        [pair("user", "I am B"), pair("assistant", "noted")]
    );

    // shared: everybody continues one conversation.
    let (cat, _) = connect(&rt.mcp("common"), None).await;
    let (dan, _) = connect(&rt.mcp("common"), None).await;
    call(&cat, "send_message", json!({"message": "from C"}), None).await;
    call(&dan, "send_message", json!({"message": "from D"}), None).await;
    let shared = history(&dan, "common").await;
    assert_eq!(
        shared,
        [
            pair("user", "from C"),
            pair("assistant", "noted"),
            pair("user", "from D"),
            pair("assistant", "noted")
        ]
    );
    assert_eq!(history(&cat, "common").await, shared);

    // request: nothing is kept, and there is no history prompt.
    let (eve, _) = connect(&rt.mcp("oneoff"), None).await;
    call(&eve, "send_message", json!({"message": "first"}), None).await;
    call(&eve, "send_message", json!({"message": "second"}), None).await;
    let last = fake.requests().last().expect("a request").body["messages"].clone();
    assert_eq!(
        last,
        json!([{"role": "system", "content": "C."}, {"role": "user", "content": "second"}]),
        "a request-scoped call starts empty"
    );
    let prompts = eve.list_prompts(None).await.expect("prompts/list");
    assert!(prompts.prompts.is_empty(), "{prompts:?}");
    assert!(
        eve.get_prompt(GetPromptRequestParams::new("oneoff_history"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn images_reach_a_vision_model_and_bad_ones_are_refused_clearly() {
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.script([Reply::Text("a red pixel".into())]);
    let yaml = deployment(&fake, "    {}", "  eyes: { instruction: Look. }\n")
        .replace("  servers:\n    {}\n", "  servers: {}\n");
    let rt = runtime(&yaml).await;
    let (client, _) = connect(&rt.mcp("eyes"), None).await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let result = call(
        &client,
        "eyes",
        json!({"message": "what is this?", "images": [{"data": png, "mime_type": "image/png"}]}),
        None,
    )
    .await;
    assert_eq!(text(&result), "a red pixel");
    let sent = fake.requests()[0].body["messages"][1]["content"].clone();
    assert_eq!(sent[0], json!({"type": "text", "text": "what is this?"}));
    assert_eq!(
        sent[1]["image_url"]["url"],
        format!("data:image/png;base64,{png}"),
        "{sent}"
    );

    let refused = call(
        &client,
        "eyes",
        json!({"message": "and this?", "images": [{"data": png, "mime_type": "text/plain"}]}),
        None,
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("images[0].mime_type"),
        "{}",
        text(&refused)
    );
    let missing = call(&client, "eyes", json!({"text": "no message key"}), None).await;
    assert_eq!(missing.is_error, Some(true));
    assert!(text(&missing).contains("message"), "{}", text(&missing));
    assert_eq!(
        fake.requests().len(),
        1,
        "refused calls never reach the model"
    );
}

#[tokio::test]
async fn a_text_only_model_refuses_images_through_send_message() {
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let yaml = deployment(&fake, "    {}", "  eyes: { instruction: Look. }\n")
        .replace("  servers:\n    {}\n", "  servers: {}\n")
        .replace("vision: true", "vision: false");
    let rt = runtime(&yaml).await;
    let (client, _) = connect(&rt.mcp("eyes"), None).await;
    let result = call(
        &client,
        "send_message",
        json!({"message": "look", "images": [{"data": "AAAA", "mime_type": "image/png"}]}),
        None,
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("text-only"), "{}", text(&result));
}

/// The value of the sample `line_start` (name and labels) in an exposition text.
fn sample<T: std::str::FromStr>(metrics: &str, line_start: &str) -> T {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {line_start} in\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_scripted_conversation() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fx__add".into(), json!({"a": 1, "b": 2})),
            ("fx__fail".into(), json!({"reason": "nope"})),
        ]),
        Reply::Text("3, and one failed".into()),
        Reply::Error {
            status: 400,
            retry_after: None,
        },
        Reply::Text("contract face".into()),
    ]);
    let yaml = deployment(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  harper: { instruction: Work., servers: [fx] }\n",
    );
    let rt = runtime(&yaml).await;
    let (client, _) = connect(&rt.mcp("harper"), None).await;
    let ok = call(&client, "send_message", json!({"message": "add"}), None).await;
    assert_eq!(ok.is_error, Some(false));
    let failed = call(&client, "harper", json!({"message": "fail"}), None).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(text(&failed).contains("openai"), "{}", text(&failed));
    let task: Value = reqwest::Client::new()
        .post(format!("{}/", rt.url))
        .json(&json!({"message": {"messageId": "m-1", "role": "user", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    assert_eq!(task["status"]["state"], "completed");

    let metrics = reqwest::get(format!("{}/metrics", rt.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    // Counters, gauges and histogram counts are whole numbers; sums are seconds.
    let m = |s: &str| sample::<u64>(&metrics, s);
    let secs = |s: &str| sample::<f64>(&metrics, s);
    assert_eq!(m("pallas_up"), 1);
    let port = rt.url.rsplit(':').next().unwrap_or_default();
    assert_eq!(
        m(&format!(
            "pallas_agent_info{{agent=\"harper\",port=\"{port}\"}}"
        )),
        1
    );
    assert_eq!(
        m("pallas_send_message_total{agent=\"harper\",outcome=\"ok\"}"),
        1
    );
    assert_eq!(
        m("pallas_send_message_total{agent=\"harper\",outcome=\"error\"}"),
        1
    );
    assert_eq!(
        m("pallas_send_message_duration_seconds_count{agent=\"harper\"}"),
        2
    );
    assert!(secs("pallas_send_message_duration_seconds_sum{agent=\"harper\"}") > 0.0);
    // Two turns of the first call, one of the contract task; the refused turn never finished.
    assert_eq!(
        m("pallas_llm_turns_total{agent=\"harper\",model=\"gpt-face\"}"),
        3
    );
    assert!(m("pallas_llm_tokens_total{agent=\"harper\",model=\"gpt-face\",kind=\"input\"}") > 0);
    assert!(m("pallas_llm_tokens_total{agent=\"harper\",model=\"gpt-face\",kind=\"output\"}") > 0);
    assert_eq!(
        m(
            "pallas_tool_calls_total{agent=\"harper\",server=\"fx\",operation=\"tool\",outcome=\"ok\"}"
        ),
        1
    );
    assert_eq!(
        m(
            "pallas_tool_calls_total{agent=\"harper\",server=\"fx\",operation=\"tool\",outcome=\"error\"}"
        ),
        1
    );
    assert_eq!(
        m(
            "pallas_tool_call_duration_seconds_count{agent=\"harper\",server=\"fx\",operation=\"tool\"}"
        ),
        2
    );
    assert_eq!(m("daedalus_runtime_tasks_total{state=\"completed\"}"), 1);
    assert_eq!(m("daedalus_runtime_task_duration_seconds_count"), 1);
    assert!(m("process_resident_memory_bytes") > 0);
    for family in [
        "# TYPE pallas_send_message counter",
        "# TYPE pallas_send_message_duration_seconds histogram",
        "# TYPE pallas_llm_turns counter",
        "# TYPE pallas_tool_call_duration_seconds histogram",
        "# TYPE pallas_agent_info gauge",
    ] {
        assert!(metrics.contains(family), "{family} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_with_their_own_bearers_never_cross() {
    let forwarding = McpFixture::start().await;
    let plain = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: vec!["fwd__echo".into(), "plain__echo".into()],
        text: "done {n}".into(),
    });
    let yaml = deployment(
        &fake,
        &format!(
            "    fwd: {{ url: \"{}\", forward_inbound_auth: true }}\n    plain: {{ url: \"{}\" }}",
            forwarding.url(),
            plain.url()
        ),
        "  iso: { instruction: Echo., servers: [fwd, plain], instance_scope: connection }\n",
    );
    let rt = runtime(&yaml).await;
    let sessions = futures::future::join_all((0..100).map(|i| {
        let url = rt.mcp("iso");
        async move {
            let (client, _) = connect(&url, Some(&format!("tok-{i}"))).await;
            let result = call(
                &client,
                "send_message",
                json!({"message": format!("n={i}")}),
                None,
            )
            .await;
            let history = history(&client, "iso").await;
            (i, result, history)
        }
    }))
    .await;
    for (i, result, history) in &sessions {
        assert_eq!(result.is_error, Some(false), "{i}: {}", text(result));
        assert_eq!(
            text(result),
            format!("done {i}"),
            "session {i} got its own reply"
        );
        assert_eq!(
            history,
            &[
                pair("user", &format!("n={i}")),
                pair("assistant", &format!("done {i}"))
            ],
            "session {i} sees only its own conversation"
        );
    }
    let calls = forwarding.calls();
    assert_eq!(calls.len(), 100);
    for call in &calls {
        let n = call.arguments["n"].as_i64().expect("n");
        assert_eq!(
            call.authorization.as_deref(),
            Some(format!("Bearer tok-{n}").as_str()),
            "the call for n={n} carried its own caller's token"
        );
    }
    assert!(
        plain.authorizations().iter().all(Option::is_none),
        "the non-opted server saw no token"
    );
    // What the model saw: each tool result answers its own conversation's number.
    for request in fake.requests() {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(user) = messages.iter().find(|m| m["role"] == "user") else {
            continue;
        };
        let n = user["content"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("n=")
            .to_owned();
        for tool in messages.iter().filter(|m| m["role"] == "tool") {
            assert_eq!(tool["content"].as_str(), Some(n.as_str()), "{messages:?}");
        }
    }
}
