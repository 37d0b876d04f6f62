//! The agent loop over real MCP servers (rmcp Streamable HTTP fixtures): tool calls through
//! MCP, tools that fail, hang or take time, per-request bearer forwarding to opted-in servers
//! only, a server that is down. The connection's life on either MCP revision (tool lists that
//! change, lost sessions, canceled calls) is `mcp_connections.rs`.

mod support;

use std::sync::Arc;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::runtime::Runtime;
use support::{post, post_text, post_text_with, tool_results};

const KEY: &str = "sk-mcp";

async fn fixture() -> McpFixture {
    McpFixture::start().await
}

/// Each `tools/call`'s `n` argument and `Authorization` header.
fn calls_by_n(server: &McpFixture) -> Vec<(i64, Option<String>)> {
    server
        .calls()
        .into_iter()
        .map(|c| (c.arguments["n"].as_i64().unwrap_or(-1), c.authorization))
        .collect()
}

#[tokio::test]
async fn tools_run_over_mcp_and_only_opted_in_servers_see_the_callers_token() {
    let forwarding = fixture().await;
    let plain = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fwd__add".into(), json!({"a": 2, "b": 3})),
            ("plain__add".into(), json!({"a": 1, "b": 1})),
        ]),
        Reply::Text("5 and 2".into()),
    ]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fwd: {{ url: \"{}\", forward_inbound_auth: true }}\n    plain: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [fwd, plain] }}\n",
        fake.openai_base_url,
        forwarding.url(),
        plain.url()
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    let task = post(&url, Some("tok-caller-1"), "m-1").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let log = fake.requests();
    let tools = log[0].body["tools"].to_string();
    assert!(
        tools.contains("fwd__add") && tools.contains("plain__add"),
        "{tools}"
    );
    let results = log[1].body["messages"].to_string();
    assert!(
        results.contains("\"5\"") && results.contains("\"2\""),
        "MCP results reached the model: {results}"
    );

    let fwd_seen = forwarding.authorizations();
    assert!(
        fwd_seen.contains(&Some("Bearer tok-caller-1".into())),
        "{fwd_seen:?}"
    );
    let plain_seen = plain.authorizations();
    assert!(
        !plain_seen.is_empty() && plain_seen.iter().all(Option::is_none),
        "{plain_seen:?}"
    );
}

#[tokio::test]
async fn a_server_that_is_down_leaves_the_agent_answering_without_its_tools() {
    let up = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::Text("I can still answer.".into())]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    up: {{ url: \"{}\" }}\n    down: {{ url: \"http://127.0.0.1:9/mcp\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [up, down] }}\n",
        fake.openai_base_url,
        up.url()
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    // Startup connects to every server in the background; health says which one is down.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (code, health) = loop {
        let r = reqwest::get(format!("{url}/healthz"))
            .await
            .expect("healthz");
        let code = r.status().as_u16();
        let health: Value = r.json().await.expect("JSON");
        if health["downstream"]
            .as_array()
            .is_some_and(|d| d.len() == 2 && d.iter().any(|s| s["ok"] == false))
        {
            break (code, health);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "health never reported the down server: {health}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        (code, health["status"].clone()),
        (503, json!("degraded")),
        "{health}"
    );
    assert_eq!(health["downstream"][0]["server"], "down");
    assert!(
        health["downstream"][0]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("127.0.0.1:9")),
        "{health}"
    );
    assert_eq!(
        health["downstream"][1],
        json!({"agent": "a", "server": "up", "ok": true})
    );

    let task = post(&url, None, "m-1").await;
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "I can still answer."
    );
    let tools = fake.requests()[0].body["tools"].to_string();
    assert!(
        tools.contains("up__add") && !tools.contains("down__"),
        "{tools}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_every_downstream_call_carries_only_its_own_requests_token() {
    let forwarding = fixture().await;
    let plain = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: vec!["fwd__echo".into(), "plain__echo".into()],
        text: "done".into(),
        ..Default::default()
    });
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fwd: {{ url: \"{}\", forward_inbound_auth: true }}\n    plain: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Echo., servers: [fwd, plain] }}\n",
        fake.openai_base_url,
        forwarding.url(),
        plain.url()
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    // One client for all 200: building one takes about 30 ms in a debug build (its TLS
    // roots), and 200 built in this one task kept the first connections silent past the
    // runtime's header-read timeout, which rightly closed them.
    let client = reqwest::Client::new();
    let requests = (0..200).map(|i| {
        let (url, client) = (url.clone(), client.clone());
        async move {
            post_text_with(
                &client,
                &url,
                Some(&format!("tok-{i}")),
                &format!("m-{i}"),
                &format!("n={i}"),
            )
            .await
        }
    });
    let tasks = futures::future::join_all(requests).await;
    assert!(
        tasks.iter().all(|t| t["status"]["state"] == "completed"),
        "every task completed"
    );

    let fwd_calls = calls_by_n(&forwarding);
    assert_eq!(fwd_calls.len(), 200);
    for (n, auth) in &fwd_calls {
        assert_eq!(
            auth.as_deref(),
            Some(format!("Bearer tok-{n}").as_str()),
            "call for request {n}"
        );
    }
    let plain_calls = calls_by_n(&plain);
    assert_eq!(plain_calls.len(), 200);
    assert!(
        plain_calls.iter().all(|(_, auth)| auth.is_none()),
        "the server without the flag saw no token"
    );
}

#[tokio::test]
async fn a_server_that_failed_is_left_alone_for_a_while_instead_of_slowing_every_turn() {
    // Accepts connections and drops them: every attempt fails at once, and is counted.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let broken = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn({
        let attempts = Arc::clone(&attempts);
        async move {
            while let Ok((socket, _)) = listener.accept().await {
                attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(socket);
            }
        }
    });
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::Text("one".into()), Reply::Text("two".into())]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    broken: {{ url: \"{broken}\" }}\n\
         agents:\n  a: {{ instruction: Hi., servers: [broken] }}\n",
        fake.openai_base_url
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    post(&url, None, "m-1").await;
    // The client's own retries of that attempt may still be arriving.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let after_first = attempts.load(std::sync::atomic::Ordering::SeqCst);
    assert!(after_first > 0, "the first turn tried the server");
    let task = post(&url, None, "m-2").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "two");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        attempts.load(std::sync::atomic::Ordering::SeqCst),
        after_first,
        "the second turn did not wait on it again"
    );
}

fn fixture_yaml(fake: &FakeLlm, server: &McpFixture, extra: &str) -> String {
    support::one_server_yaml(fake, KEY, &server.url(), extra)
}

/// The tool results the model got in its `n`th request.
#[tokio::test]
async fn a_failing_and_a_hanging_mcp_tool_become_results_the_model_recovers_from() {
    let server = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fx__fail".into(), json!({"reason": "disk full"})),
            ("fx__hang".into(), json!({})),
        ]),
        Reply::Text("I worked around both.".into()),
    ]);
    let yaml = fixture_yaml(&fake, &server, ", read_timeout_seconds: 0.5");
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    let task = post(&url, None, "m-1").await;
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "I worked around both."
    );
    let results = tool_results(&fake, 1);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("disk full"), "{results:?}");
    assert!(
        results[1].contains("fx/hang") && results[1].contains("500ms"),
        "the hanging call was abandoned at the server's timeout: {results:?}"
    );
}

#[tokio::test]
async fn parallel_mcp_calls_reach_the_server_together() {
    let server = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fx__slow".into(), json!({"ms": 500})),
            ("fx__slow".into(), json!({"ms": 500})),
            ("fx__slow".into(), json!({"ms": 500})),
        ]),
        Reply::Text("all slept".into()),
    ]);
    let rt = Runtime::start(&fixture_yaml(&fake, &server, "")).await;
    let url = rt.url.clone();
    post(&url, None, "m-1").await;
    let calls = server.calls();
    assert_eq!(calls.len(), 3);
    let first = calls.iter().map(|c| c.at).min().expect("calls");
    let last = calls.iter().map(|c| c.at).max().expect("calls");
    assert!(
        last - first < std::time::Duration::from_millis(250),
        "each call started before the others (500 ms each) finished: spread {:?}",
        last - first
    );
    assert_eq!(tool_results(&fake, 1), ["slept 500"; 3]);
}

#[tokio::test]
async fn a_tool_that_reports_progress_still_answers_the_loop() {
    let server = fixture().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fx__progress".into(), json!({"steps": 3}))]),
        Reply::Text("finished".into()),
    ]);
    let rt = Runtime::start(&fixture_yaml(&fake, &server, "")).await;
    let url = rt.url.clone();
    let task = post(&url, None, "m-1").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "finished");
    assert_eq!(tool_results(&fake, 1), ["done"]);
}

#[tokio::test]
async fn the_anthropic_provider_runs_mcp_tools_with_well_formed_tool_blocks() {
    let server = fixture().await;
    let fake = FakeLlm::start(KEY, &["claude-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fx__add".into(), json!({"a": 20, "b": 22}))]),
        Reply::Text("42".into()),
    ]);
    let yaml = format!(
        "default_model: anthropic.claude-fake\nanthropic: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [fx] }}\n",
        fake.anthropic_base_url,
        server.url()
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    let task = post(&url, None, "m-1").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "42");
    let log = fake.requests();
    assert!(
        log.iter().all(|r| r.refused.is_none()),
        "the strict fake accepted every request"
    );
    let tools = &log[0].body["tools"];
    assert!(
        tools
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "fx__add"
                && t["input_schema"]["properties"]["a"]["type"] == "integer")),
        "{tools}"
    );
    let messages = log[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let call = &messages[1]["content"][0];
    assert_eq!(call["type"], "tool_use", "{messages:?}");
    assert_eq!(call["name"], "fx__add");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{messages:?}");
    assert_eq!(result["tool_use_id"], call["id"]);
    assert!(result.to_string().contains("42"), "{result}");
    assert_eq!(server.calls()[0].arguments, json!({"a": 20, "b": 22}));
}

#[tokio::test]
async fn a_passthrough_agent_calls_its_servers_tools_with_the_tool_directive() {
    let server = fixture().await;
    let yaml = format!(
        "mcp:\n  servers:\n    fix: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ model: passthrough, servers: [fix] }}\n",
        server.url()
    );
    let rt = Runtime::start(&yaml).await;
    let task = post_text(
        &rt.url,
        None,
        "m-add",
        "***TOOL fix__add {\"a\": 2, \"b\": 3}",
    )
    .await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "5", "{task}");
    let calls = server.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool, "add");
    assert_eq!(calls[0].arguments, json!({"a": 2, "b": 3}));

    let failed = post_text(
        &rt.url,
        None,
        "m-fail",
        "***TOOL fix__fail {\"reason\": \"no\"}",
    )
    .await;
    assert_eq!(failed["status"]["state"], "failed", "{failed}");
    let unknown = post_text(&rt.url, None, "m-nope", "***TOOL nope__x").await;
    assert_eq!(unknown["status"]["state"], "failed", "{unknown}");
    let bad = post_text(&rt.url, None, "m-bad", "***TOOL fix__add [1]").await;
    assert_eq!(bad["status"]["state"], "failed", "{bad}");
    assert_eq!(
        server.calls().len(),
        2,
        "only well-formed calls reach the server"
    );
    let echoed = post_text(&rt.url, None, "m-echo", "hello").await;
    assert_eq!(
        echoed["artifacts"][0]["parts"][0]["text"], "hello",
        "{echoed}"
    );
}

/// Kills the demo tools server when the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_demo_tools_server_answers_an_agent_over_mcp() {
    let port = daedalus_test_kit::free_port();
    let _server = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-demo-tools"))
            .env_clear()
            .env("DEMO_TOOLS_PORT", port.to_string())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the demo tools server starts"),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    daedalus_test_kit::wait_until(
        "the demo tools server listens",
        std::time::Duration::from_secs(10),
        || {
            let url = url.clone();
            async move { reqwest::get(&url).await.is_ok() }
        },
    )
    .await;
    let yaml = format!(
        "mcp:\n  servers:\n    tools: {{ url: \"{url}\" }}\n\
         agents:\n  a: {{ model: passthrough, servers: [tools] }}\n"
    );
    let rt = Runtime::start(&yaml).await;
    let sum = post_text(
        &rt.url,
        None,
        "m-sum",
        "***TOOL tools__add {\"a\": 40, \"b\": 2}",
    )
    .await;
    assert_eq!(sum["artifacts"][0]["parts"][0]["text"], "42", "{sum}");
    let counted = post_text(
        &rt.url,
        None,
        "m-count",
        "***TOOL tools__word_count {\"text\": \"one two three\"}",
    )
    .await;
    let counted: Value = serde_json::from_str(
        counted["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .expect("a text answer"),
    )
    .expect("JSON counts");
    assert_eq!(counted["words"], 3);
}
