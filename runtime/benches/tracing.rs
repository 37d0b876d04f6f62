//! What tracing costs: the runtime binary's `POST /` passthrough rate with spans exported over
//! OTLP to a receiver in this process, against the same binary with export off, in one run.
//!
//! Each mode runs twice, alternating (off, on, off, on), on a fresh process: 16 clients send
//! 4,000 tasks after 500 warm-up ones. Export on means `OTEL_EXPORTER_OTLP_ENDPOINT` set (the
//! batch processor's default 5 s delay, http/protobuf); off means no endpoint (span ids are
//! still made, for `traceparent`). Target: on within 10% of off.
//! Run: `cargo bench -p daedalus-runtime --bench tracing`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CLIENTS: usize = 16;
const TASKS: usize = 4_000;
const WARM_UP: usize = 500;

/// An OTLP/HTTP receiver that counts the bytes it is sent.
async fn receiver() -> (String, Arc<AtomicU64>) {
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&bytes);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(body.len() as u64, Ordering::Relaxed);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, bytes)
}

struct Runtime {
    child: Child,
    url: String,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(otlp: Option<&str>) -> Runtime {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"));
    command
        .env_clear()
        .env("A2A_PORT", port.to_string())
        .env("A2A_HOST", "127.0.0.1")
        .env("AGENT_NAME", "bench")
        .env("SESSIONS_DB", ":memory:")
        .env("LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(endpoint) = otlp {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
        // Batch settings to compare (`OTEL_BSP_MAX_QUEUE_SIZE=8192 cargo bench ...`).
        for (key, value) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_BSP_")) {
            command.env(key, value);
        }
    }
    let runtime = Runtime {
        child: command.spawn().expect("the runtime starts"),
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{}/health", runtime.url))
        .await
        .map_or(true, |r| r.status() != 200)
    {
        assert!(Instant::now() < deadline, "the runtime became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    runtime
}

/// Sends `total` tasks from `CLIENTS` clients at once; the rate, in tasks per second.
async fn load(url: &str, total: usize, tag: &str) -> f64 {
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (client, next, url, tag) = (
                client.clone(),
                Arc::clone(&next),
                url.to_owned(),
                tag.to_owned(),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total as u64 {
                        break;
                    }
                    let body = serde_json::json!({"message": {"messageId": format!("{tag}-{i}"),
                        "role": "user", "parts": [{"text": "hello"}]}});
                    let response = client
                        .post(format!("{url}/"))
                        .header(
                            "traceparent",
                            format!("00-{:032x}-{:016x}-01", i + 1, i + 1),
                        )
                        .json(&body)
                        .send()
                        .await
                        .expect("answered");
                    assert_eq!(response.status(), 200);
                    let _ = response.bytes().await;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let (endpoint, exported) = receiver().await;
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..2 {
        for (mode, otlp) in [(0, None), (1, Some(endpoint.as_str()))] {
            let runtime = start(otlp).await;
            load(&runtime.url, WARM_UP, &format!("warm-{round}-{mode}")).await;
            let rate = load(&runtime.url, TASKS, &format!("run-{round}-{mode}")).await;
            rates[mode].push(rate);
            // SIGTERM flushes the batch: the receiver sees this run's spans.
            let _ = Command::new("kill")
                .args(["-TERM", &runtime.child.id().to_string()])
                .status();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (off, on) = (mean(&rates[0]), mean(&rates[1]));
    println!("\nPOST / passthrough, {CLIENTS} clients, {TASKS} tasks a run, two runs each\n");
    println!("| tracing | tasks/s (runs) | mean | vs off |");
    println!("|---|---|---|---|");
    let runs = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!("| export off | {} | {off:.0} | 1.00 |", runs(&rates[0]));
    println!(
        "| OTLP export on | {} | {on:.0} | {:.2} |",
        runs(&rates[1]),
        on / off
    );
    println!(
        "\nOTLP bytes received: {} (from {} traced tasks); target: on within 10% of off: {}",
        exported.load(Ordering::Relaxed),
        2 * (TASKS + WARM_UP),
        if on >= off * 0.9 { "met" } else { "NOT met" }
    );
}
