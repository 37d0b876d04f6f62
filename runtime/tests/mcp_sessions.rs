//! The MCP face's sessions are bounded (`MAX_MCP_SESSIONS`): a flood of abandoned sessions never
//! holds more than the bound, ends idle sessions first in line (unfinished handshakes, then the
//! least recently used) and never one with a call in flight; when every session is busy a new
//! one is refused with 503 and `Retry-After`. Unfinished handshakes and idle sessions expire
//! (counted, not timed). Daedalus' client (the Python SDK) whose session was ended reconnects.

mod support;

use std::time::Duration;

use daedalus_runtime::stores::mcp_sessions::SESSION_COST;
use daedalus_test_kit::{
    McpOpened, ModernClient, Runtime, RuntimeProcess, modern_mcp_request, open_mcp_session,
    rss_bytes, wait_until,
};
use futures::StreamExt;
use serde_json::{Value, json};
use support::mcp_client::{call, connect, text};
use support::python::{Heard, PythonClient};

const AGENT: &str = "bounded";

/// A passthrough runtime whose MCP sessions are bounded at `max` (and expire after
/// `handshake` and `idle`).
async fn runtime(max: usize, handshake: Duration, idle: Duration) -> Runtime {
    Runtime::passthrough_with(AGENT, |c| {
        c.mcp_sessions.max_sessions = max;
        c.mcp_sessions.handshake_timeout = handshake;
        c.mcp_sessions.idle = idle;
    })
    .await
}

const ACCEPT: &str = "application/json, text/event-stream";

async fn open(http: &reqwest::Client, url: &str, finish: bool) -> McpOpened {
    open_mcp_session(http, url, finish).await
}

/// The status a `tools/list` in session `id` gets (404 once the session is gone).
async fn list_status(http: &reqwest::Client, url: &str, id: &str) -> u16 {
    http.post(url)
        .header("accept", ACCEPT)
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .expect("answered")
        .status()
        .as_u16()
}

async fn metrics(http: &reqwest::Client, rt: &Runtime) -> String {
    http.get(format!("{}/metrics", rt.url))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text")
}

/// The value of the metric line starting with `series ` (0 when absent).
fn value(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

const LIVE: &str = "daedalus_runtime_mcp_sessions{agent=\"bounded\"}";
const EVICTED: &str = "daedalus_runtime_mcp_sessions_evicted_total";
const REFUSED: &str = "daedalus_runtime_mcp_sessions_refused_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_abandoned_sessions_stays_within_the_bound_and_spares_a_busy_session() {
    const MAX: usize = 4;
    let rt = runtime(MAX, Duration::from_mins(1), Duration::from_mins(5)).await;
    let url = rt.mcp(AGENT);
    let http = reqwest::Client::new();
    let client = std::sync::Arc::new(connect(&url, None).await.0);
    let busy = tokio::spawn({
        let client = std::sync::Arc::clone(&client);
        async move {
            call(
                &client,
                "send_message",
                json!({"message": "***SLEEP 2s busy"}),
            )
            .await
        }
    });
    wait_until(
        "the busy call is in flight",
        Duration::from_secs(10),
        || {
            let http = http.clone();
            let rt_url = rt.url.clone();
            async move {
                let text = http.get(format!("{rt_url}/metrics")).send().await.ok();
                match text {
                    Some(r) => r.text().await.is_ok_and(|t| value(&t, LIVE) == 1),
                    None => false,
                }
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut flood = Vec::new();
    for _ in 0..2 * MAX {
        let opened = open(&http, &url, false).await;
        assert_eq!(opened.status, 200, "{}", opened.body);
        flood.push(opened.session.expect("a session id"));
        let live = value(&metrics(&http, &rt).await, LIVE);
        assert!(live <= MAX as u64, "{live} sessions live, bound {MAX}");
    }
    let text = metrics(&http, &rt).await;
    assert_eq!(value(&text, LIVE), MAX as u64);
    assert_eq!(value(&text, EVICTED), MAX as u64 + 1, "{text}");
    assert_eq!(value(&text, REFUSED), 0);
    // The oldest flood sessions were ended (404, as Streamable HTTP prescribes), the newest
    // live on.
    for id in &flood[..=MAX] {
        assert_eq!(list_status(&http, &url, id).await, 404, "{id} was ended");
    }
    for id in &flood[MAX + 1..] {
        assert_eq!(list_status(&http, &url, id).await, 200, "{id} lives");
    }

    let busy = busy.await.expect("the busy call ends");
    assert_eq!(
        text_of(&busy),
        "busy",
        "the busy session's call was answered"
    );
    let again = call(&client, "send_message", json!({"message": "still here"})).await;
    assert_eq!(text_of(&again), "still here");
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    text(result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_session_has_a_call_in_flight_a_new_one_is_refused_with_retry_after() {
    let rt = runtime(2, Duration::from_mins(1), Duration::from_mins(5)).await;
    let url = rt.mcp(AGENT);
    let http = reqwest::Client::new();
    let mut calls = Vec::new();
    for i in 0..2 {
        let (client, _) = connect(&url, None).await;
        calls.push(tokio::spawn(async move {
            let answer = call(
                &client,
                "send_message",
                json!({"message": format!("***SLEEP 2s call {i}")}),
            )
            .await;
            (client, answer)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = open(&http, &url, false).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
    assert_eq!(refused.session, None);
    let body: Value = serde_json::from_str(&refused.body).expect("a JSON-RPC error");
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("every one has a call in flight")),
        "{body}"
    );
    assert_eq!(value(&metrics(&http, &rt).await, REFUSED), 1);
    let healthz: Value = http
        .get(format!("{}/healthz", rt.url))
        .send()
        .await
        .expect("healthz")
        .json()
        .await
        .expect("JSON");
    assert_eq!(healthz["mcp_sessions"]["full"], true, "{healthz}");
    for (i, call) in calls.into_iter().enumerate() {
        let (_client, answer) = call.await.expect("the call ends");
        assert_eq!(
            text(&answer),
            format!("call {i}"),
            "neither busy session was ended"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_handshakes_and_idle_sessions_expire() {
    let rt = runtime(100, Duration::from_secs(1), Duration::from_secs(2)).await;
    let url = rt.mcp(AGENT);
    let http = reqwest::Client::new();
    let half_open = open(&http, &url, false).await.session.expect("a session");
    let idle = open(&http, &url, true).await.session.expect("a session");
    let expired = |reason: &'static str| {
        let (http, rt_url) = (http.clone(), rt.url.clone());
        move || {
            let (http, rt_url) = (http.clone(), rt_url.clone());
            async move {
                let Ok(r) = http.get(format!("{rt_url}/metrics")).send().await else {
                    return false;
                };
                let series =
                    format!("daedalus_runtime_mcp_sessions_expired_total{{reason=\"{reason}\"}}");
                r.text().await.is_ok_and(|t| value(&t, &series) == 1)
            }
        }
    };
    wait_until(
        "the unfinished handshake expires",
        Duration::from_secs(30),
        expired("handshake"),
    )
    .await;
    assert_eq!(list_status(&http, &url, &half_open).await, 404);
    wait_until(
        "the idle session expires",
        Duration::from_secs(30),
        expired("idle"),
    )
    .await;
    assert_eq!(list_status(&http, &url, &idle).await, 404);
    assert_eq!(value(&metrics(&http, &rt).await, LIVE), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daedalus_whose_session_was_ended_for_room_reconnects_and_gets_its_answer() {
    let rt = runtime(2, Duration::from_mins(1), Duration::from_mins(5)).await;
    let url = rt.mcp(AGENT);
    let http = reqwest::Client::new();
    let mut client = PythonClient::start(&support::python::python(), "evicted_client.py", &[&url]);
    let result = tokio::time::timeout(Duration::from_mins(1), async {
        loop {
            match client.next().await {
                Heard::Asks(word) if word == "CALLED" => {
                    // Two newer sessions that finish their handshake: the Python client's is
                    // the least recently used, and is ended for the second.
                    open(&http, &url, true).await;
                    open(&http, &url, true).await;
                    client.ok().await;
                }
                Heard::Asks(word) => panic!("the client asked for {word}"),
                Heard::Result(result) => return result,
            }
        }
    })
    .await
    .expect("the Python client finished in time");
    client.finish().await;
    assert_eq!(result["answer"], "after", "{result}");
    assert!(
        result["ended"]
            .as_str()
            .is_some_and(|e| e.contains("Session terminated")),
        "{result}"
    );
    assert!(value(&metrics(&http, &rt).await, EVICTED) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_twice_the_bound_keeps_the_process_within_its_session_budget() {
    const MAX: usize = 300;
    let rt = RuntimeProcess::start_with("flooded", &[("MAX_MCP_SESSIONS", "300")]).await;
    let url = format!("{}/agents/flooded/mcp", rt.url());
    let pid = rt.pid().expect("running");
    let http = reqwest::Client::new();
    for _ in 0..16 {
        open(&http, &url, true).await;
    }
    let before = rss_bytes(pid);
    let opened = futures::stream::iter(0..2 * MAX)
        .map(|_| open(&http, &url, false))
        .buffer_unordered(32)
        .filter(|o| std::future::ready(o.status == 200))
        .count()
        .await;
    assert_eq!(opened, 2 * MAX, "every new session got a place");
    let grown = rss_bytes(pid).saturating_sub(before);
    // The documented budget: MAX sessions at their measured cost, and half again for the
    // allocator's slack. Twice as many unbounded sessions would take about twice the budget.
    let budget = MAX as u64 * SESSION_COST;
    assert!(
        grown <= budget + budget / 2,
        "RSS grew {grown} bytes for {MAX} sessions at most (budget {budget})"
    );
    let text = http
        .get(format!("{}/metrics", rt.url()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert_eq!(
        value(&text, "daedalus_runtime_mcp_sessions{agent=\"flooded\"}"),
        MAX as u64
    );
}

/// MCP 2026-07-28 has no sessions: a flood of modern calls, each from a client of its own,
/// takes no place in a session book that legacy sessions have filled (a new session there
/// would evict one of them), and leaves nothing per client behind. After a warm-up batch, a
/// second batch of 4,000 clients moves RSS by less than 2 MiB: the allocator's slack here is
/// about 1 MiB, and 500 bytes a client (a session costs 58 KB) would be a leak of that size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_modern_calls_keeps_no_per_client_state() {
    const CLIENTS: usize = 4_000;
    let rt = RuntimeProcess::start_with("flooded", &[("MAX_MCP_SESSIONS", "2")]).await;
    let url = format!("{}/agents/flooded/mcp", rt.url());
    let pid = rt.pid().expect("running");
    let http = reqwest::Client::new();
    for _ in 0..2 {
        assert_eq!(open(&http, &url, true).await.status, 200);
    }
    let flood = |from: usize, to: usize| {
        let (http, url) = (http.clone(), url.clone());
        futures::stream::iter(from..to)
            .map(move |i| {
                let (http, url) = (http.clone(), url.clone());
                async move {
                    let client = ModernClient::named(format!("client-{i}"));
                    let (method, params) = if i % 2 == 0 {
                        ("tools/list", json!({}))
                    } else {
                        ("tools/call", json!({"name": "get_health", "arguments": {}}))
                    };
                    let answer = modern_mcp_request(&http, &url, &client, method, params).await;
                    answer.get("result").is_some()
                }
            })
            .buffer_unordered(32)
            .filter(|answered| std::future::ready(*answered))
            .count()
    };
    // Warm up: what the first requests (a whole batch) allocate, every later one reuses.
    assert_eq!(flood(0, CLIENTS).await, CLIENTS, "every call answered");
    let before = rss_bytes(pid);
    assert_eq!(
        flood(CLIENTS, 2 * CLIENTS).await,
        CLIENTS,
        "every call answered"
    );
    let grown = rss_bytes(pid).saturating_sub(before);
    assert!(
        grown < 2 << 20,
        "RSS grew {grown} bytes for {CLIENTS} more modern clients"
    );
    let text = http
        .get(format!("{}/metrics", rt.url()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert_eq!(
        value(&text, "daedalus_runtime_mcp_sessions{agent=\"flooded\"}"),
        2,
        "the two legacy sessions, and nothing for the modern clients"
    );
}
