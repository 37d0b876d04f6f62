//! What a restart costs on the default store (a SQLite file in `WORK_DIR`): the time from the
//! spawn to the first healthy `/health`, and the resident memory once idle, of a runtime
//! starting on a fresh file against the same runtime starting again on a file that holds
//! `TASKS` finished tasks (each answered by a JSON-RPC `SendMessage`, 16 in flight).
//!
//! Target (issue 64): over 100,000 finished tasks, healthy within 100 ms and idle within
//! 8 MiB of a fresh start (a restart reads back the tasks left running, and every other task
//! only when someone asks for it).
//!
//! Run: `cargo bench -p daedalus-runtime --bench restart`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use std::time::Duration;

use daedalus_test_kit::RuntimeProcess;

/// Finished tasks in the file before the restart.
const TASKS: usize = 100_000;
/// Starts measured of each; the best is kept.
const STARTS: usize = 3;
/// How long a started runtime is left before its memory is read.
const SETTLE: Duration = Duration::from_secs(2);

/// Resident memory of process `pid`, in MiB (`/proc/<pid>/status` `VmRSS`).
fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The best of [`STARTS`] starts of `runtime`: milliseconds to healthy, and MiB once idle.
async fn starts(runtime: &mut RuntimeProcess) -> (f64, f64) {
    let (mut healthy, mut idle) = (f64::MAX, f64::MAX);
    for _ in 0..STARTS {
        let took = runtime.relaunch().await;
        tokio::time::sleep(SETTLE).await;
        healthy = healthy.min(took.as_secs_f64() * 1000.0);
        idle = idle.min(rss_mib(runtime.pid().expect("running")));
    }
    (healthy, idle)
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let env = [("MAX_TASKS", "1000000")];
        let mut full = RuntimeProcess::start_with("bench", &env).await;
        let filled = load::jsonrpc(&full.url(), 16, None, 0, TASKS).await;
        println!(
            "\n{TASKS} finished tasks written at {:.0} turns/s; each start the best of {STARTS}\n",
            filled.rate
        );
        // A fresh start: a file holding only its tables.
        let mut fresh = RuntimeProcess::start_with("bench", &env).await;
        let (fresh_ms, fresh_mib) = starts(&mut fresh).await;
        let (full_ms, full_mib) = starts(&mut full).await;
        println!("| start | healthy after | idle RSS |");
        println!("|---|---|---|");
        println!("| fresh file | {fresh_ms:.1} ms | {fresh_mib:.1} MiB |");
        println!("| {TASKS} finished tasks | {full_ms:.1} ms | {full_mib:.1} MiB |");
        let grew = full_mib - fresh_mib;
        println!(
            "\nhealthy within 100 ms: {}; idle within 8 MiB of a fresh start (+{grew:.1} MiB): {}",
            if full_ms <= 100.0 { "met" } else { "NOT met" },
            if grew <= 8.0 { "met" } else { "NOT met" },
        );
        // Every task is still there to be asked for.
        let client = reqwest::Client::new();
        let listed: serde_json::Value = client
            .post(format!("{}/", full.url()))
            .header("A2A-Version", "1.0")
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                "params": {"pageSize": 1}}),
            )
            .send()
            .await
            .expect("ListTasks")
            .json()
            .await
            .expect("a page");
        println!(
            "ListTasks after the restart: totalSize {}",
            listed["result"]["totalSize"]
        );
    });
}
