//! Our runtime on its defaults against the official A2A SDKs, in one run on one machine with
//! one load tool: JSON-RPC `SendMessage` of a new task (every request its own `messageId`),
//! answered by an echo.
//!
//! - **a2a-rs**: the official Rust SDK (`a2a-server-lf` 0.5.3, `a2a-lf` 0.4.2,
//!   `test-kit/peers/a2a-rs-echo`, built here when first asked), its in-memory task store;
//! - **ours, defaults**: `daedalus-runtime` with nothing set but its agent (`passthrough`):
//!   the task store and the conversation store in one SQLite file in `WORK_DIR`;
//! - **ours, nothing kept**: `TASKS_DB=memory`, `SESSIONS_DB=off` (what the SDKs keep);
//! - **a2a-sdk**: the official Python SDK (1.3.0 on uvicorn, `test-kit/py/a2a_echo_agent.py`).
//!
//! Rows: requests per second at 1 and 16 in flight (best of [`ROUNDS`] alternated runs), then
//! [`SEQUENTIAL`] requests one at a time with every round trip timed: p50, p99, p99.9, the
//! slowest, and how many took over 10 ms; and each server's RSS idle and after the run.
//! Targets (issue 64): the defaults ≥ 0.75× a2a-rs at 1 in flight and ≥ 1.0× at 16; nothing
//! kept ≥ 1.0× at 1 and ≥ 1.25× at 16; the defaults' sequential p99.9 ≤ 2 ms with no round
//! trip over 10 ms.
//!
//! Run: `cargo bench -p daedalus-runtime --bench sdk_peers` (the Python row needs `.venv-a2a`:
//! `.ci/setup`; `SDK_PEERS_PYTHON=off` leaves it out).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_test_kit::{EchoAgent, RuntimeProcess, RustSdkEcho, rss_bytes};
use load::{Figures, best};

/// Requests per throughput run, after a warm-up.
const REQUESTS: usize = 4_000;
const WARM_UP: usize = 500;
/// Each server's throughput is measured this many times, alternated with the others'.
const ROUNDS: usize = 3;
/// Requests of the latency run, one at a time.
const SEQUENTIAL: usize = 10_000;
/// The Python SDK serves a few hundred a second: fewer requests keep its rows short.
const PYTHON_REQUESTS: usize = 600;

/// A server under test: its row's name, its JSON-RPC URL and its process.
struct Server {
    name: &'static str,
    url: String,
    pid: u32,
    idle_rss: u64,
    requests: usize,
}

fn mib(bytes: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let bytes = bytes as f64;
    bytes / f64::from(1 << 20)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let rust_sdk = RustSdkEcho::start();
        let defaults = RuntimeProcess::start("bench").await;
        let unkept = RuntimeProcess::start_with(
            "bench",
            &[("TASKS_DB", "memory"), ("SESSIONS_DB", "off")],
        )
        .await;
        let python = (std::env::var("SDK_PEERS_PYTHON").as_deref() != Ok("off"))
            .then(EchoAgent::start);
        let mut servers = vec![
            server("a2a-rs 0.5.3 echo (official Rust SDK)", rust_sdk.jsonrpc_url(), rust_sdk.pid(), REQUESTS),
            server("daedalus-runtime, defaults (tasks and conversation in SQLite)", format!("{}/", defaults.url()), defaults.pid().expect("runs"), REQUESTS),
            server("daedalus-runtime, TASKS_DB=memory SESSIONS_DB=off", format!("{}/", unkept.url()), unkept.pid().expect("runs"), REQUESTS),
        ];
        if let Some(python) = &python {
            servers.push(server("a2a-sdk 1.3.0 echo (official Python SDK)", python.jsonrpc_url(), python.pid(), PYTHON_REQUESTS));
        }

        println!("\nJSON-RPC SendMessage, best of {ROUNDS} alternated runs of {REQUESTS} after {WARM_UP} to warm up\n");
        println!("| server | 1 in flight, req/s | 16 in flight, req/s |");
        println!("|---|---|---|");
        let mut rates = vec![[0.0_f64; 2]; servers.len()];
        for (column, in_flight) in [1, 16].into_iter().enumerate() {
            let mut rounds = vec![Vec::new(); servers.len()];
            for _ in 0..ROUNDS {
                for (i, s) in servers.iter().enumerate() {
                    rounds[i].push(load::jsonrpc(&s.url, in_flight, None, WARM_UP.min(s.requests), s.requests).await);
                }
            }
            for (i, r) in rounds.iter().enumerate() {
                rates[i][column] = best(r).rate;
            }
        }
        for (s, [one, sixteen]) in servers.iter().zip(&rates) {
            println!("| {} | {one:.0} | {sixteen:.0} |", s.name);
        }

        println!("\n{SEQUENTIAL} requests one at a time, every round trip timed\n");
        println!("| server | p50 | p99 | p99.9 | slowest | over 10 ms | RSS idle → after |");
        println!("|---|---|---|---|---|---|---|");
        let mut latencies = Vec::new();
        for s in &servers {
            let count = if s.requests < REQUESTS { s.requests } else { SEQUENTIAL };
            let f = load::jsonrpc(&s.url, 1, None, WARM_UP.min(count), count).await;
            println!(
                "| {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.1} ms | {} of {} | {:.1} → {:.1} MiB |",
                s.name, f.p50_ms, f.p99_ms, f.p999_ms, f.max_ms, f.stalls, f.requests,
                mib(s.idle_rss), mib(rss_bytes(s.pid)),
            );
            latencies.push(f);
        }

        println!();
        let (theirs, ours) = (&latencies[0], &latencies[1]);
        // (row, its name, its targets at 1 and at 16 in flight)
        let targets = [(1, "defaults", [0.75, 1.0]), (2, "nothing kept", [1.0, 1.25])];
        for (row, name, wanted) in targets {
            for (column, in_flight) in [1, 16].into_iter().enumerate() {
                let ratio = rates[row][column] / rates[0][column];
                println!(
                    "{name} at {in_flight} in flight: {ratio:.2}× a2a-rs (target {:.2}×: {})",
                    wanted[column],
                    verdict(ratio >= wanted[column])
                );
            }
        }
        report_latency(theirs, ours);
    });
}

fn server(name: &'static str, url: String, pid: u32, requests: usize) -> Server {
    Server {
        name,
        url,
        pid,
        idle_rss: rss_bytes(pid),
        requests,
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn report_latency(theirs: &Figures, ours: &Figures) {
    println!(
        "defaults' sequential p99 {:.3} ms against a2a-rs's {:.3} ms",
        ours.p99_ms, theirs.p99_ms,
    );
    println!(
        "defaults' p99.9 {:.3} ms against a2a-rs's {:.3} ms (target ≤ 2 ms: {})",
        ours.p999_ms,
        theirs.p999_ms,
        verdict(ours.p999_ms <= 2.0)
    );
    println!(
        "defaults' round trips over 10 ms: {} of {} (target none: {})",
        ours.stalls,
        ours.requests,
        verdict(ours.stalls == 0)
    );
}
