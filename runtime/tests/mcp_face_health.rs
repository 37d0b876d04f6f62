//! The MCP face's health and numbers: `get_health` probing downstream servers (never the
//! model, within its time budget, following a server down and back) and `/metrics` after a
//! scripted conversation.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncReadExt;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::mcp_client::{Client, call, connect, text};
use support::runtime::Runtime;

const KEY: &str = "sk-health";

fn deployment(fake: &FakeLlm, servers: &str, agents: &str) -> String {
    support::runtime::on_fake_openai(&fake.openai_base_url, KEY, "gpt-face", servers, agents)
}

async fn health(client: &Client) -> Value {
    let result = call(client, "get_health", json!({})).await;
    serde_json::from_str(&text(&result)).expect("get_health answers JSON")
}

/// A server that accepts connections and never answers; its MCP URL.
/// A server that accepts connections and never answers; `waiting` counts the `get_health`
/// probes (their `initialize` names the prober) waiting on every such server at once, and
/// `most_waiting` the most there ever were.
/// The `clientInfo.name` of `get_health`'s probes.
const PROBER: &str = "daedalus-runtime-health";

async fn hanging_server(waiting: &Arc<AtomicUsize>, most_waiting: &Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let (waiting, most) = (Arc::clone(waiting), Arc::clone(most_waiting));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (waiting, most) = (Arc::clone(&waiting), Arc::clone(&most));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut chunk = [0_u8; 4096];
                let mut counted = false;
                // Read until the caller gives up and closes the connection.
                while let Ok(n @ 1..) = socket.read(&mut chunk).await {
                    seen.extend_from_slice(&chunk[..n]);
                    if !counted && String::from_utf8_lossy(&seen).contains(PROBER) {
                        counted = true;
                        let now = waiting.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                    }
                }
                if counted {
                    waiting.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_health_probes_downstream_servers_without_the_model() {
    let mut fixtures = Vec::new();
    for _ in 0..3 {
        fixtures.push(McpFixture::start().await);
    }
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let mut servers: Vec<String> = fixtures
        .iter()
        .enumerate()
        .map(|(i, f)| format!("    s{i}: {{ url: \"{}\" }}", f.url()))
        .collect();
    // Two that accept connections and never answer: probed one after the other, only one
    // probe would ever be waiting on them.
    let (waiting, most_waiting) = (Arc::default(), Arc::default());
    for name in ["slow", "stuck"] {
        let url = hanging_server(&waiting, &most_waiting).await;
        servers.push(format!("    {name}: {{ url: \"{url}\" }}"));
    }
    let yaml = deployment(
        &fake,
        &servers.join("\n"),
        "  watched: { instruction: Watch., servers: [s0, s1, s2, slow, stuck] }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("watched"), None).await;

    let report = health(&client).await;
    assert_eq!(
        most_waiting.load(Ordering::SeqCst),
        2,
        "both hanging servers were probed at once"
    );
    assert_eq!(report["status"], "degraded", "{report}");
    let message = report["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("slow") && message.contains("stuck") && !message.contains("s0"),
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
    let rt = Runtime::start(&yaml).await;
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
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("harper"), None).await;
    let ok = call(&client, "send_message", json!({"message": "add"})).await;
    assert_eq!(ok.is_error, Some(false));
    let failed = call(&client, "harper", json!({"message": "fail"})).await;
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
    let port = rt.port();
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
    // The turn service counts every turn, whichever face asked: the two MCP calls and the task.
    assert_eq!(m("daedalus_runtime_tasks_total{state=\"completed\"}"), 2);
    assert_eq!(m("daedalus_runtime_tasks_total{state=\"failed\"}"), 1);
    assert_eq!(m("daedalus_runtime_task_duration_seconds_count"), 3);
    assert!(m("process_resident_memory_bytes") > 0);
    // The Prometheus text format by default, as Pallas serves it: a counter family is named
    // with its `_total`.
    for family in [
        "# TYPE pallas_send_message_total counter",
        "# TYPE pallas_send_message_duration_seconds histogram",
        "# TYPE pallas_llm_turns_total counter",
        "# TYPE pallas_tool_call_duration_seconds histogram",
        "# TYPE pallas_agent_info gauge",
    ] {
        assert!(metrics.contains(family), "{family} in\n{metrics}");
    }
}
