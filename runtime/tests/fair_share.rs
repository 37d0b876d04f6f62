//! Fair admission between tenants (a `budgets:` block, `share` 1 each), with a real runtime
//! process: under a `TURN_MEMORY` that admits 500 turns, tenant a opens 2,000 slow turns and
//! tenant b then 50. Every one of b's turns is admitted as it asks; a is refused past its share
//! (`-31503` over JSON-RPC, naming it), never b.

mod support;

use std::sync::Arc;
use std::time::Instant;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::A2aClient;
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::identity::api_key_file;
use support::process::runtime;

const KEY: &str = "sk-fair";
const MODEL: &str = "gpt-fair";
/// What one of these turns is charged: 40 KiB and its message, in whole KiB.
const TURN_KIB: usize = 41;
/// How many of those the turn memory admits.
const ROOM: usize = 500;

/// Sends a turn of `text` that answers at once (`returnImmediately`); whether it was admitted.
async fn admitted(client: &A2aClient, text: &str) -> bool {
    let params = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": true}});
    let answer = client.send_raw("SendMessage", params).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let body: Value = answer.json().await.expect("JSON");
    if body.get("result").is_some() {
        return true;
    }
    // Refused at once: the JSON-RPC error, as every JSON-RPC error, in an HTTP 200.
    assert_eq!(body["error"]["code"], -31503, "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("fair share"), "{body}");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_flooding_first_leaves_another_tenant_its_share() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let fx = McpFixture::start().await;
    fake.auto(AutoReply {
        tools: vec!["fx__slow".into()],
        text: "done".into(),
        arguments: Some(json!({"ms": 60_000})),
        rounds: 1,
    });
    let dir = tempfile::tempdir().expect("a dir");
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        MODEL,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  proc-test: { instruction: Use the tools., servers: [fx] }\n",
    );
    let config = dir.path().join("agents.yaml");
    std::fs::write(
        &config,
        format!("{yaml}budgets:\n  tenants:\n    a: {{ share: 1 }}\n    b: {{ share: 1 }}\n"),
    )
    .expect("written");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(
        &keys,
        &[("key-of-a", "a-bot", "a"), ("key-of-b", "b-bot", "b")],
    );
    let memory = format!("{}KiB", TURN_KIB * ROOM);
    let rt = runtime()
        .env("AGENTS_CONFIG", config.to_str().expect("utf-8"))
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .env("TASKS_DB", "memory")
        .env("TURN_MEMORY", &memory)
        .env("AGENT_TURN_MEMORY", &memory)
        .start();
    let a = Arc::new(A2aClient::new(rt.url("/")).with_bearer("key-of-a"));
    let b = A2aClient::new(rt.url("/")).with_bearer("key-of-b");

    let a_admitted = futures::stream::iter(0..2_000)
        .map(|n| {
            let a = Arc::clone(&a);
            async move { admitted(&a, &format!("a {n}")).await }
        })
        .buffer_unordered(32)
        .filter(|admitted| std::future::ready(*admitted))
        .count()
        .await;
    assert!(
        (ROOM / 2 - 5..=ROOM / 2).contains(&a_admitted),
        "alone, a holds its half and keeps a seat for another tenant: {a_admitted}"
    );

    let asked = Instant::now();
    let mut b_admitted = 0;
    for n in 0..50 {
        if admitted(&b, &format!("b {n}")).await {
            b_admitted += 1;
        }
    }
    eprintln!(
        "a: {a_admitted} of 2,000 admitted; b: {b_admitted} of 50 in {:?}",
        asked.elapsed()
    );
    assert_eq!(b_admitted, 50, "every one of b's turns is admitted");
    assert!(
        !admitted(&a, "one more").await,
        "a stays held to its share while b runs"
    );
    let metrics = reqwest::get(rt.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics
            .lines()
            .any(|l| l
                .starts_with("daedalus_runtime_turns_refused_total{limit=\"TURN_MEMORY_SHARE\"}")),
        "refusals by share are counted apart"
    );
}
