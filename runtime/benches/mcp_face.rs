//! The MCP face's speed, through rmcp's client over real Streamable HTTP:
//!
//! - `get_health` with five live downstream MCP servers (rmcp fixtures): p50 and p99. Target:
//!   under 10 ms at p50.
//! - `send_message` on the `passthrough` model: the round trip p50 and p99, one session; and
//!   calls per second with 16 sessions calling at once.
//!
//! Run: `cargo bench -p daedalus-runtime --bench mcp_face`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::time::{Duration, Instant};

use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::Runtime;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

type Client = RunningService<RoleClient, ()>;

async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .expect("an MCP session")
}

async fn call(client: &Client, tool: &str, args: serde_json::Value) {
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("answered");
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

fn percentile(samples: &mut [Duration], p: usize) -> f64 {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)].as_secs_f64() * 1e3
}

async fn get_health() {
    const CALLS: usize = 500;
    let mut fixtures = Vec::new();
    for _ in 0..5 {
        fixtures.push(McpFixture::start().await);
    }
    let servers: Vec<String> = fixtures
        .iter()
        .enumerate()
        .map(|(i, f)| format!("    s{i}: {{ url: \"{}\" }}", f.url()))
        .collect();
    let yaml = format!(
        "mcp:\n  servers:\n{}\nagents:\n  watched: {{ servers: [s0, s1, s2, s3, s4] }}\n",
        servers.join("\n")
    );
    let rt = Runtime::start(&yaml).await;
    let url = rt.url.clone();
    let client = connect(&format!("{url}/agents/watched/mcp")).await;
    for _ in 0..50 {
        call(&client, "get_health", json!({})).await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        call(&client, "get_health", json!({})).await;
        samples.push(t.elapsed());
    }
    let p50 = percentile(&mut samples, 50);
    let p99 = percentile(&mut samples, 99);
    println!("\nget_health, five live downstream servers probed concurrently ({CALLS} calls)\n");
    println!("| p50 | p99 | target |");
    println!("|---|---|---|");
    println!(
        "| {p50:.2} ms | {p99:.2} ms | p50 under 10 ms: {} |",
        if p50 < 10.0 { "met" } else { "NOT met" }
    );
}

async fn send_message() {
    const CALLS: usize = 1000;
    const SESSIONS: usize = 16;
    const PER_SESSION: usize = 200;
    let rt = Runtime::start("agents:\n  echo: { instance_scope: connection }\n").await;
    let url = rt.url.clone();
    let endpoint = format!("{url}/agents/echo/mcp");
    let client = connect(&endpoint).await;
    for i in 0..100 {
        call(
            &client,
            "send_message",
            json!({"message": format!("warm {i}")}),
        )
        .await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let t = Instant::now();
        call(
            &client,
            "send_message",
            json!({"message": format!("hello {i}")}),
        )
        .await;
        samples.push(t.elapsed());
    }
    let p50 = percentile(&mut samples, 50);
    let p99 = percentile(&mut samples, 99);

    let mut clients = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        clients.push(connect(&endpoint).await);
    }
    let t = Instant::now();
    futures::future::join_all(clients.iter().map(|c| async move {
        for i in 0..PER_SESSION {
            call(c, "send_message", json!({"message": format!("n={i}")})).await;
        }
    }))
    .await;
    let elapsed = t.elapsed().as_secs_f64();
    let rate = (SESSIONS * PER_SESSION) as f64 / elapsed;
    println!("\nsend_message on the passthrough model\n");
    println!("| round trip p50 | round trip p99 | calls/s, {SESSIONS} sessions at once |");
    println!("|---|---|---|");
    println!("| {p50:.3} ms | {p99:.3} ms | {rate:.0} |");
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        get_health().await;
        send_message().await;
    });
}
