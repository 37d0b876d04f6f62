//! Held streamed turns, side by side with the official A2A SDKs' servers (the Python SDK,
//! a2a-sdk 1.3.0 on uvicorn, its echo agent, `test-kit/py/a2a_echo_agent.py`; the Rust SDK,
//! a2a-rs `a2a-server-lf` 0.5.3, `test-kit/peers/a2a-rs-echo`): N concurrent JSON-RPC
//! `SendStreamingMessage` turns, each a model that waits 20 s, opened over 10 s; while every
//! one is held, the server's RSS and 100 probes (`GET` of the agent card, which both serve). Per server and N: turns that
//! completed, RSS per held turn, the first event's p99, and the probes' p50/p99.
//!
//! Our runtime runs with its defaults (the `passthrough` model's `***SLEEP 20s`; the SDKs'
//! agents `SLEEP 20`). `HELD_TURNS` picks the sizes (default `2000,10000`). Targets at 2,000:
//! at least 5× less memory per turn than the SDK, a first-event p99 at most 1/5 of its, a
//! probe p99 no worse; 10,000 held turns complete on one replica with probes under 50 ms p99.
//!
//! Run: `cargo bench -p daedalus-runtime --bench held_turns` (needs `.venv-a2a`: `.ci/setup`).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use daedalus_test_kit::{EchoAgent, RuntimeProcess, RustSdkEcho};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long each turn's model waits.
const TURN_SECONDS: u64 = 20;
/// How long opening every turn takes.
const OPEN_OVER: Duration = Duration::from_secs(10);
const PROBES: usize = 100;

/// A server under test.
struct Target {
    port: u16,
    pid: u32,
    path: &'static str,
    text: String,
}

/// What one run measured.
struct Figures {
    completed: usize,
    kib_per_turn: f64,
    first_event_p99_ms: f64,
    probe_p50_ms: f64,
    probe_p99_ms: f64,
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Opens one streamed turn; answers when its first event came (and how long that took),
/// then keeps reading until it ends, counting it in `completed` if it completed.
async fn held_turn(
    target: &Target,
    i: usize,
    first: tokio::sync::mpsc::UnboundedSender<Option<Duration>>,
    completed: Arc<AtomicUsize>,
) {
    let body = json!({"jsonrpc": "2.0", "id": i, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": format!("held-{i}"), "role": "ROLE_USER",
            "parts": [{"text": target.text}]}}})
    .to_string();
    let began = Instant::now();
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", target.port)).await else {
        let _ = first.send(None);
        return;
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n\
         Accept: text/event-stream\r\nContent-Length: {}\r\n\r\n",
        target.path,
        body.len()
    );
    if stream
        .write_all(format!("{head}{body}").as_bytes())
        .await
        .is_err()
    {
        let _ = first.send(None);
        return;
    }
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut seen_first = false;
    loop {
        line.clear();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !seen_first && line.starts_with("HTTP/1.1 ") && !line.contains(" 200 ") {
            break;
        }
        if !seen_first && line.starts_with("data:") {
            seen_first = true;
            let _ = first.send(Some(began.elapsed()));
            break;
        }
    }
    if !seen_first {
        let _ = first.send(None);
        return;
    }
    let mut rest = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => rest.extend_from_slice(&chunk[..n]),
        }
        if rest
            .windows(9)
            .any(|w| w.eq_ignore_ascii_case(b"completed"))
        {
            completed.fetch_add(1, Ordering::Relaxed);
            break;
        }
    }
}

async fn probe(port: u16) -> Duration {
    let began = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("a probe connects");
    stream
        .write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("a probe is sent");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    began.elapsed()
}

fn at(samples: &[Duration], p: usize) -> f64 {
    samples
        .get((samples.len() * p / 100).min(samples.len().saturating_sub(1)))
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

async fn run(target: Arc<Target>, turns: usize) -> Figures {
    let before = rss_kib(target.pid);
    let completed = Arc::new(AtomicUsize::new(0));
    let (first, mut firsts) = tokio::sync::mpsc::unbounded_channel();
    let pause = OPEN_OVER / u32::try_from(turns).expect("a count");
    let mut running = tokio::task::JoinSet::new();
    for i in 0..turns {
        let (target, first, completed) =
            (Arc::clone(&target), first.clone(), Arc::clone(&completed));
        running.spawn(async move { held_turn(&target, i, first, completed).await });
        tokio::time::sleep(pause).await;
    }
    drop(first);
    let mut latencies = Vec::new();
    for _ in 0..turns {
        if let Some(Some(latency)) = firsts.recv().await {
            latencies.push(latency);
        }
    }
    let held = rss_kib(target.pid);
    let mut probes = Vec::new();
    for _ in 0..PROBES {
        probes.push(probe(target.port).await);
    }
    while running.join_next().await.is_some() {}
    latencies.sort();
    probes.sort();
    Figures {
        completed: completed.load(Ordering::Relaxed),
        kib_per_turn: held.saturating_sub(before) as f64 / latencies.len().max(1) as f64,
        first_event_p99_ms: at(&latencies, 99),
        probe_p50_ms: at(&probes, 50),
        probe_p99_ms: at(&probes, 99),
    }
}

/// Every held turn is a socket here too: the soft open-file limit goes up to the hard one.
fn raise_open_file_limit() {
    #[expect(unsafe_code, reason = "getrlimit and setrlimit on a struct we own")]
    // SAFETY: both calls only read or write the `rlimit` we pass.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit);
        }
    }
}

fn main() {
    raise_open_file_limit();
    let sizes: Vec<usize> = std::env::var("HELD_TURNS")
        .unwrap_or_else(|_| "2000,10000".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        println!(
            "\nHeld streamed JSON-RPC turns ({TURN_SECONDS} s each, opened over {} s)\n",
            OPEN_OVER.as_secs()
        );
        println!(
            "| held | server | completed | RSS per held turn | first event p99 | probe p50 / p99 |"
        );
        println!("|---|---|---|---|---|---|");
        let mut verdicts = Vec::new();
        for &turns in &sizes {
            let sdk = EchoAgent::start();
            let theirs = run(
                Arc::new(Target {
                    port: sdk.port(),
                    pid: sdk.pid(),
                    path: "/a2a/jsonrpc",
                    text: format!("SLEEP {TURN_SECONDS} done"),
                }),
                turns,
            )
            .await;
            drop(sdk);
            let rust_sdk = RustSdkEcho::start();
            let rust = run(
                Arc::new(Target {
                    port: rust_sdk.port(),
                    pid: rust_sdk.pid(),
                    path: "/",
                    text: format!("SLEEP {TURN_SECONDS} done"),
                }),
                turns,
            )
            .await;
            drop(rust_sdk);
            let runtime = RuntimeProcess::start("bench").await;
            let ours = run(
                Arc::new(Target {
                    port: runtime.port(),
                    pid: runtime.pid().expect("it runs"),
                    path: "/",
                    text: format!("***SLEEP {TURN_SECONDS}s done"),
                }),
                turns,
            )
            .await;
            drop(runtime);
            for (name, f) in [
                ("a2a-sdk 1.3.0 (uvicorn)", &theirs),
                ("a2a-rs 0.5.3 (official Rust SDK)", &rust),
                ("daedalus-runtime, defaults", &ours),
            ] {
                println!(
                    "| {turns} | {name} | {} / {turns} | {:.1} KiB | {:.1} ms | {:.2} / {:.2} ms |",
                    f.completed,
                    f.kib_per_turn,
                    f.first_event_p99_ms,
                    f.probe_p50_ms,
                    f.probe_p99_ms
                );
            }
            let memory = theirs.kib_per_turn / ours.kib_per_turn;
            let first = theirs.first_event_p99_ms / ours.first_event_p99_ms;
            verdicts.push(format!(
                "at {turns}: {memory:.1}× less memory per turn (target 5×: {}), first-event p99 \
                 1/{first:.0} of the SDK's (target 1/5: {}), probe p99 {:.2} vs {:.2} ms, \
                 {}/{turns} of ours completed",
                if memory >= 5.0 { "met" } else { "NOT met" },
                if first >= 5.0 { "met" } else { "NOT met" },
                ours.probe_p99_ms,
                theirs.probe_p99_ms,
                ours.completed,
            ));
        }
        println!();
        for verdict in verdicts {
            println!("{verdict}");
        }
    });
}
