//! Downstream MCP servers that misbehave: one slow to list its tools, one that lists only
//! with the caller's token, one whose URL carries credentials. None of them stalls a turn or
//! `/healthz`, leaks a token across callers, or shows a secret.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::json;
use support::runtime::Runtime;
use support::{post, tool_names, tool_results};

const KEY: &str = "sk-mcp";

/// The tool names the model was offered in request `n`.
fn offered(fake: &FakeLlm, n: usize) -> Vec<String> {
    tool_names(&fake.requests()[n])
}

#[tokio::test]
async fn a_server_slow_to_list_its_tools_stalls_neither_healthz_nor_turns() {
    let slow = McpFixture::start_with(daedalus_mcp_fixture::Options {
        list_delay: Some(std::time::Duration::from_mins(5)),
        ..Default::default()
    })
    .await;
    let quick = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::Text("went on".into())]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    slow: {{ url: \"{}\" }}\n    quick: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Work., servers: [slow, quick] }}\n",
        fake.openai_base_url,
        slow.url(),
        quick.url()
    );
    let rt = Runtime::start(&yaml).await;
    // Startup is listing the slow server's tools right now; /healthz does not wait for it.
    let healthz = reqwest::Client::new()
        .get(format!("{}/healthz", rt.url))
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await
        .expect("/healthz answers while a server is slow to list its tools");
    assert!(healthz.status().as_u16() == 200 || healthz.status().as_u16() == 503);
    let task = post(&rt.url, None, "m-1").await;
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "went on",
        "{task}"
    );
    let names = offered(&fake, 0);
    assert!(names.iter().any(|n| n == "quick__add"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("slow__")),
        "the turn went on without the slow server's tools: {names:?}"
    );
    assert!(slow.count("tools/list") >= 1, "the slow server was asked");
}

#[tokio::test]
async fn a_forwarding_server_that_requires_auth_lists_its_tools_with_the_callers_token() {
    let guarded = McpFixture::start_with(daedalus_mcp_fixture::Options {
        required_token: Some("tok-alice".into()),
        ..Default::default()
    })
    .await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("g__add".into(), json!({"a": 20, "b": 22}))]),
        Reply::Text("42".into()),
        Reply::Text("no tools for you".into()),
    ]);
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    g: {{ url: \"{}\", forward_inbound_auth: true }}\n\
         agents:\n  a: {{ instruction: Add., servers: [g] }}\n",
        fake.openai_base_url,
        guarded.url()
    );
    let rt = Runtime::start(&yaml).await;
    let task = post(&rt.url, Some("tok-alice"), "m-1").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "42", "{task}");
    assert!(
        offered(&fake, 0).iter().any(|n| n == "g__add"),
        "listed with the caller's token: {:?}",
        offered(&fake, 0)
    );
    assert_eq!(tool_results(&fake, 1), ["42"]);
    assert_eq!(
        guarded.calls()[0].authorization.as_deref(),
        Some("Bearer tok-alice")
    );
    // Another caller without a token sees none of it: nothing was kept from Alice's listing.
    let task = post(&rt.url, None, "m-2").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "no tools for you");
    assert!(
        !offered(&fake, 2).iter().any(|n| n.starts_with("g__")),
        "{:?}",
        offered(&fake, 2)
    );
}

#[tokio::test]
async fn credentials_in_a_server_url_reach_neither_healthz_nor_the_model() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("down__add".into(), json!({"a": 1, "b": 2}))]),
        Reply::Text("could not".into()),
    ]);
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    down: {{ url: \"http://user:hunter2@{refused}/mcp?api_key=hunter2\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [down] }}\n",
        fake.openai_base_url
    );
    let rt = Runtime::start(&yaml).await;
    let task = post(&rt.url, None, "m-1").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "could not");
    let results = tool_results(&fake, 1);
    assert!(!results.is_empty(), "the model read why the call failed");
    let healthz = reqwest::get(format!("{}/healthz", rt.url))
        .await
        .expect("healthz")
        .text()
        .await
        .expect("text");
    assert!(
        healthz.contains("down"),
        "the down server is named: {healthz}"
    );
    for shown in results.iter().chain([&healthz]) {
        assert!(!shown.contains("hunter2"), "a secret leaked: {shown}");
    }
}
