//! The MCP face as Daedalus uses it, over real Streamable HTTP with rmcp's client: the tools,
//! progress, scopes and the history prompt, images, and isolation under load. `get_health` and
//! metrics are in `mcp_face_health.rs`; `mcp_python.rs` repeats the core with the official
//! Python SDK.

mod support;

use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::wait_until;
use rmcp::model::GetPromptRequestParams;
use serde_json::json;
use support::mcp_client::{Client, call, connect, text};
use support::runtime::Runtime;

const KEY: &str = "sk-face";

fn deployment(fake: &FakeLlm, servers: &str, agents: &str) -> String {
    support::runtime::on_fake_openai(&fake.openai_base_url, KEY, "gpt-face", servers, agents)
}

/// The progress messages one `harper` call sends, in no particular order.
const EXPECTED_PROGRESS: [&str; 9] = [
    "harper step 1 (llm)",
    "harper step 1 (tool)",
    "fx/add: started",
    "fx/add: completed",
    "fx/echo: completed",
    "helper/send_message: started",
    "helper step 1 (llm)",
    "helper/send_message: completed",
    "harper step 2 (llm)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_runs_the_loop_with_progress_from_tools_and_a_sub_agent() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.script(
        support::two_tools_and_a_sub_agent()
            .into_iter()
            .chain([Reply::Text("no token this time".into())]),
    );
    let yaml = deployment(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  harper: { instruction: Work., servers: [fx, helper] }\n  helper: { instruction: Help. }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let (client, progress) = connect(&rt.mcp("harper"), None).await;

    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, ["send_message", "harper", "get_health"]);

    let result = call(&client, "harper", json!({"message": "go"})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "5, 7 and checked");
    let has = |m: &str| {
        progress
            .lock()
            .expect("lock")
            .iter()
            .any(|(_, _, _, msg)| msg.as_deref() == Some(m))
    };
    wait_until(
        "every progress notification",
        Duration::from_secs(5),
        || {
            let all = EXPECTED_PROGRESS.iter().all(|m| has(m));
            async move { all }
        },
    )
    .await;
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
    let pattern = regex_lite(&messages);
    assert!(pattern, "every message follows a pattern: {messages:?}");

    // (rmcp's client attaches a progress token to every request, so "no token, no progress"
    // is checked with the Python SDK in mcp_python.rs.)
    let plain = call(&client, "send_message", json!({"message": "again"})).await;
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
        ..Default::default()
    });
    let yaml = deployment(
        &fake,
        "    {}",
        "  perconn: { instruction: A., instance_scope: connection }\n  \
           common: { instruction: B., instance_scope: shared }\n  \
           oneoff: { instruction: C., instance_scope: request }\n",
    );
    let rt = Runtime::serving(&yaml, Some("perconn")).await;

    // connection: two sessions, two conversations.
    let (ann, _) = connect(&rt.mcp("perconn"), None).await;
    let (bob, _) = connect(&rt.mcp("perconn"), None).await;
    call(&ann, "send_message", json!({"message": "I am A"})).await;
    call(&bob, "send_message", json!({"message": "I am B"})).await;
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
    call(&cat, "send_message", json!({"message": "from C"})).await;
    call(&dan, "send_message", json!({"message": "from D"})).await;
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
    call(&eve, "send_message", json!({"message": "first"})).await;
    call(&eve, "send_message", json!({"message": "second"})).await;
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
    let yaml = deployment(&fake, "    {}", "  eyes: { instruction: Look. }\n");
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("eyes"), None).await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let result = call(
        &client,
        "eyes",
        json!({"message": "what is this?", "images": [{"data": png, "mime_type": "image/png"}]}),
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
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("images[0].mime_type"),
        "{}",
        text(&refused)
    );
    let missing = call(&client, "eyes", json!({"text": "no message key"})).await;
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
        .replace("vision: true", "vision: false");
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("eyes"), None).await;
    let result = call(
        &client,
        "send_message",
        json!({"message": "look", "images": [{"data": "AAAA", "mime_type": "image/png"}]}),
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("text-only"), "{}", text(&result));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_with_their_own_bearers_never_cross() {
    let forwarding = McpFixture::start().await;
    let plain = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: vec!["fwd__echo".into(), "plain__echo".into()],
        text: "done {n}".into(),
        ..Default::default()
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
    let rt = Runtime::start(&yaml).await;
    let sessions = futures::future::join_all((0..100).map(|i| {
        let url = rt.mcp("iso");
        async move {
            let (client, _) = connect(&url, Some(&format!("tok-{i}"))).await;
            let result = call(
                &client,
                "send_message",
                json!({"message": format!("n={i}")}),
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

/// The JSON-RPC messages of one `tools/call` answered as a Server-Sent Events stream, in the
/// order they were written.
fn sse_messages(body: &str) -> Vec<serde_json::Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter(|data| !data.trim().is_empty())
        .map(|data| serde_json::from_str(data.trim()).expect("each event is JSON"))
        .collect()
}

// A call's progress used to be sent by a task of its own, so the answer could overtake the
// last notifications: a client reading the stream in order (as the Python SDK does) then
// missed them. Several calls in a row, each read off the wire in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_progress_notification_is_on_the_wire_before_the_calls_answer() {
    const CALLS: usize = 12;
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    fake.script((0..CALLS).flat_map(|_| support::two_tools_and_a_sub_agent()));
    let yaml = deployment(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  harper: { instruction: Work., servers: [fx, helper] }\n  helper: { instruction: Help. }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let http = reqwest::Client::new();
    let post = |session: Option<&reqwest::header::HeaderValue>, body: serde_json::Value| {
        let mut request = http
            .post(rt.mcp("harper"))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session.clone());
        }
        request.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = post(None, init).await.expect("initialize");
    let session = response.headers()["mcp-session-id"].clone();
    let _ = response.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = post(Some(&session), initialized)
        .await
        .expect("initialized");

    for id in 1..=CALLS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "harper", "arguments": {"message": "go"},
            "_meta": {"progressToken": format!("call-{id}")}}});
        let body = post(Some(&session), call)
            .await
            .expect("tools/call")
            .text()
            .await
            .expect("the stream");
        let messages = sse_messages(&body);
        let answer = messages
            .iter()
            .position(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("call {id} answered: {messages:?}"));
        assert_eq!(
            answer,
            messages.len() - 1,
            "the answer comes last: {messages:?}"
        );
        let before: Vec<&str> = messages[..answer]
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter(|m| m["params"]["progressToken"] == json!(format!("call-{id}")))
            .filter_map(|m| m["params"]["message"].as_str())
            .collect();
        for expected in EXPECTED_PROGRESS {
            assert!(
                before.contains(&expected),
                "call {id}: {expected:?} is not before the answer in {before:?}"
            );
        }
    }
}

#[tokio::test]
async fn closing_a_session_answers_200_as_the_python_sdks_expect() {
    let rt = Runtime::start("agents:\n  echo: {}\n").await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = http
        .post(rt.mcp("echo"))
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .expect("initialize");
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"].clone();
    let closed = http
        .delete(rt.mcp("echo"))
        .header("mcp-session-id", session.clone())
        .send()
        .await
        .expect("delete");
    assert_eq!(closed.status(), 200);
    let again = http
        .post(rt.mcp("echo"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .expect("after delete");
    assert_eq!(again.status(), 404, "the session is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_mcp_sessions_instead_of_waiting_on_them() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("agents.yaml"), "agents:\n  echo: {}\n").expect("written");
    let args = [
        "daedalus-runtime",
        "--port",
        "0",
        "--sessions-db",
        ":memory:",
        "--tasks-db",
        "memory",
    ]
    .map(std::ffi::OsString::from);
    let config = match daedalus_runtime::config::Launch::from_sources(args, &|_| None, dir.path()) {
        Ok(daedalus_runtime::config::Launch::Run(c)) => c,
        other => panic!("config: {other:?}"),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let url = format!("{base}/agents/echo/mcp");
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(daedalus_runtime::run(
        listener,
        config,
        stop.clone().cancelled_owned(),
    ));
    // The runtime takes turns once it is ready; sessions open before that.
    let http = reqwest::Client::new();
    wait_until(
        "the runtime to be ready",
        Duration::from_secs(10),
        || async {
            http.get(format!("{base}/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        },
    )
    .await;
    // Two clients with open sessions (and their server-to-client streams).
    let (first, _) = connect(&url, None).await;
    let (second, _) = connect(&url, None).await;
    assert_eq!(
        text(&call(&first, "echo", json!({"message": "hi"})).await),
        "hi"
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(4), server)
        .await
        .expect("the runtime stopped without waiting out the connections")
        .expect("joined")
        .expect("ran");
    drop((first, second));
}
