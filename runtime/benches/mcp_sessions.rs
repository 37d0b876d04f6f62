//! What an idle MCP session costs the runtime, and how fast sessions open: the runtime binary
//! (release) serves the zero-config agent; a client opens `MCP_BENCH_SESSIONS` sessions (each
//! `initialize` + `notifications/initialized`, 64 at a time) and leaves them idle. Printed:
//! sessions per second, RSS bytes per idle session, and RSS once the sessions have expired
//! (`MCP_SESSION_IDLE`) — memory that comes back.
//!
//! `MCP_BENCH_BEFORE=<path to another daedalus-runtime>` measures that binary too, in the same
//! run, for a before/after table:
//!
//! ```sh
//! cargo bench -p daedalus-runtime --bench mcp_sessions
//! MCP_BENCH_BEFORE=/tmp/old/target/release/daedalus-runtime cargo bench -p daedalus-runtime --bench mcp_sessions
//! ```

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daedalus_test_kit::{open_mcp_session, rss_bytes};
use futures::StreamExt;
/// Idle time after which the sessions expire, in the runs that wait for it.
const IDLE: Duration = Duration::from_secs(5);

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

async fn serve(binary: &Path, sessions: usize) -> Served {
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
        .env("MAX_MCP_SESSIONS", (sessions + 1_000).to_string())
        .env("MCP_SESSIONS_MEMORY", "4GiB")
        .env("MCP_SESSION_IDLE", format!("{}s", IDLE.as_secs()))
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

async fn open(http: &reqwest::Client, url: &str) -> bool {
    open_mcp_session(http, url, true).await.session.is_some()
}

struct Figures {
    per_second: f64,
    bytes_per_session: f64,
    rss_before_mib: f64,
    rss_full_mib: f64,
    rss_after_expiry_mib: f64,
}

async fn measure(binary: &Path, sessions: usize) -> Figures {
    let served = serve(binary, sessions).await;
    let pid = served.child.id();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    // Warm up: the first sessions allocate what every later one reuses.
    for _ in 0..16 {
        assert!(open(&http, &served.url).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_bytes(pid);
    let started = Instant::now();
    let opened = futures::stream::iter(0..sessions)
        .map(|_| open(&http, &served.url))
        .buffer_unordered(64)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    let elapsed = started.elapsed();
    assert_eq!(opened, sessions, "every session opened");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let full = rss_bytes(pid);
    // The sessions expire after IDLE (the sweep runs every second).
    tokio::time::sleep(IDLE + Duration::from_secs(8)).await;
    let after = rss_bytes(pid);
    let mib = |b: u64| b as f64 / 1_048_576.0;
    Figures {
        per_second: sessions as f64 / elapsed.as_secs_f64(),
        bytes_per_session: (full.saturating_sub(before)) as f64 / sessions as f64,
        rss_before_mib: mib(before),
        rss_full_mib: mib(full),
        rss_after_expiry_mib: mib(after),
    }
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
    let sessions: usize = std::env::var("MCP_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let mut runs = Vec::new();
    if let Ok(before) = std::env::var("MCP_BENCH_BEFORE") {
        runs.push(("before", PathBuf::from(before)));
    }
    runs.push(("this build", release_binary()));
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    println!(
        "{sessions} idle MCP sessions (initialize + initialized, 64 at a time), RSS from /proc"
    );
    println!(
        "| runtime | sessions/s | bytes per idle session | RSS before | RSS with them | RSS after they expired |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, binary) in runs {
        let f = rt.block_on(measure(&binary, sessions));
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            f.per_second,
            f.bytes_per_session,
            f.rss_before_mib,
            f.rss_full_mib,
            f.rss_after_expiry_mib
        );
    }
}
