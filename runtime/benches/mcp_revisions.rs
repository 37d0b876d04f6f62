//! The MCP face on its two kinds of revision, side by side, against the runtime binary
//! (release) serving the zero-config agent on the `passthrough` model:
//!
//! - `tools/call` at 16 in flight (16 clients, each calling one after another), through rmcp's
//!   client over real Streamable HTTP: legacy sessions (`initialize`, one session a client)
//!   against MCP 2026-07-28 (`server/discover`, stateless). Two tools: `get_health` (the face
//!   and the protocol alone) and `send_message` (a turn; on 2026-07-28 it is a task of the task
//!   store). Requests/s and p50/p99 per request.
//! - RSS with `MCP_BENCH_CLIENTS` (10,000) distinct clients: legacy sessions opened and left
//!   idle, against 2026-07-28 clients that each made a call; each in a fresh process.
//!
//! Run: `cargo bench -p daedalus-runtime --bench mcp_revisions`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daedalus_test_kit::{ModernClient, modern_mcp_request, open_mcp_session, rss_bytes};
use futures::StreamExt;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const IN_FLIGHT: usize = 16;
const CALLS_PER_CLIENT: usize = 250;

type Client = RunningService<RoleClient, ()>;

struct Served {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(binary: &Path, clients: usize) -> Served {
    let dir = tempfile::tempdir().expect("a dir");
    let port = daedalus_test_kit::free_port();
    let child = Command::new(binary)
        .current_dir(dir.path())
        .env_clear()
        .env("A2A_PORT", port.to_string())
        .env("A2A_HOST", "127.0.0.1")
        .env("AGENT_NAME", "bench")
        .env("WORK_DIR", dir.path())
        .env("SESSIONS_DB", ":memory:")
        .env("LOG_LEVEL", "warn")
        .env("MAX_MCP_SESSIONS", (clients + 1_000).to_string())
        .env("MCP_SESSIONS_MEMORY", "4GiB")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the runtime starts");
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http
        .get(format!("{url}/health"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        assert!(Instant::now() < deadline, "the runtime became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Served {
        child,
        url: format!("{url}/agents/bench/mcp"),
        _dir: dir,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Revision {
    Legacy,
    Modern,
}

impl Revision {
    fn name(self) -> &'static str {
        match self {
            Self::Legacy => "2025-11-25, a session per client",
            Self::Modern => "2026-07-28, stateless",
        }
    }
}

async fn connect(url: &str, revision: Revision) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    match revision {
        Revision::Legacy => ().serve(transport).await,
        Revision::Modern => {
            let discover = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            ().serve_with_lifecycle(transport, discover).await
        }
    }
    .expect("connected")
}

async fn call(client: &Client, tool: &str, i: usize) {
    let arguments = if tool == "send_message" {
        json!({"message": format!("hello {i}")})
    } else {
        json!({})
    };
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("answered");
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

fn percentile(samples: &mut [Duration], p: usize) -> f64 {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)].as_secs_f64() * 1e3
}

/// `(requests/s, p50 ms, p99 ms)` of `tool` from [`IN_FLIGHT`] clients of `revision`.
async fn load(url: &str, revision: Revision, tool: &str) -> (f64, f64, f64) {
    let mut clients = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        clients.push(connect(url, revision).await);
    }
    for client in &clients {
        for i in 0..20 {
            call(client, tool, i).await;
        }
    }
    let started = Instant::now();
    let samples = futures::future::join_all(clients.iter().map(|client| async move {
        let mut samples = Vec::with_capacity(CALLS_PER_CLIENT);
        for i in 0..CALLS_PER_CLIENT {
            let t = Instant::now();
            call(client, tool, i).await;
            samples.push(t.elapsed());
        }
        samples
    }))
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut samples: Vec<Duration> = samples.into_iter().flatten().collect();
    let rate = samples.len() as f64 / elapsed;
    (
        rate,
        percentile(&mut samples, 50),
        percentile(&mut samples, 99),
    )
}

/// RSS growth, in bytes per client, for `clients` distinct clients of `revision`.
async fn rss_per_client(binary: &Path, revision: Revision, clients: usize) -> (f64, f64) {
    let served = serve(binary, clients).await;
    let pid = served.child.id();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    let one = |i: usize| {
        let (http, url) = (http.clone(), served.url.clone());
        async move {
            match revision {
                Revision::Legacy => open_mcp_session(&http, &url, true).await.session.is_some(),
                Revision::Modern => {
                    let client = ModernClient::named(format!("client-{i}"));
                    let params = json!({"name": "get_health", "arguments": {}});
                    let answer =
                        modern_mcp_request(&http, &url, &client, "tools/call", params).await;
                    answer.get("result").is_some()
                }
            }
        }
    };
    for i in 0..64 {
        assert!(one(i).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_bytes(pid);
    let done = futures::stream::iter(64..64 + clients)
        .map(one)
        .buffer_unordered(64)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    assert_eq!(done, clients);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_bytes(pid);
    (
        after.saturating_sub(before) as f64 / clients as f64,
        after as f64 / 1_048_576.0,
    )
}

fn release_binary() -> PathBuf {
    let built = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "-p",
            "daedalus-runtime",
            "--bin",
            "daedalus-runtime",
        ])
        .status()
        .expect("cargo runs");
    assert!(built.success());
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/daedalus-runtime")
}

fn main() {
    let clients: usize = std::env::var("MCP_BENCH_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let binary = release_binary();
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        println!(
            "\ntools/call, {IN_FLIGHT} clients in flight, {CALLS_PER_CLIENT} calls each (release binary, passthrough model)\n"
        );
        println!("| tool | revision | requests/s | p50 | p99 |");
        println!("|---|---|---|---|---|");
        for tool in ["get_health", "send_message"] {
            for revision in [Revision::Legacy, Revision::Modern] {
                // A fresh process for each, so neither inherits the other's tasks.
                let served = serve(&binary, IN_FLIGHT).await;
                let (rate, p50, p99) = load(&served.url, revision, tool).await;
                println!(
                    "| {tool} | {} | {rate:.0} | {p50:.2} ms | {p99:.2} ms |",
                    revision.name()
                );
            }
        }
        println!("\nRSS with {clients} distinct clients (each in a fresh process)\n");
        println!("| revision | bytes per client | RSS with them |");
        println!("|---|---|---|");
        for revision in [Revision::Legacy, Revision::Modern] {
            let (per_client, total) = rss_per_client(&binary, revision, clients).await;
            println!(
                "| {} | {per_client:.0} | {total:.1} MiB |",
                revision.name()
            );
        }
    });
}
