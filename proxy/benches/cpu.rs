//! What a task costs the proxy in CPU, with every party in its own process.
//!
//! 1. CPU µs per task, read from `/proc/<pid>/stat` over a batch of tasks, at 1 and 32 in
//!    flight: the `daedalus-proxy` binary next to the floor worker (this bench run again as a
//!    child: pull one, publish the result with its ack awaited, confirmed ack; no HTTP), and
//!    the nats-server under each. The runtime (passthrough) runs in this process.
//! 2. Instructions per task of the proxy binary under `valgrind --tool=callgrind`: the same
//!    tasks, published before the proxy starts, at two sizes; the difference over the
//!    difference in tasks leaves out startup and shutdown. Counts repeat run to run, whatever
//!    else the machine does, so this is the figure to compare changes by.
//!
//! 3. Syscalls and context switches per task at 32 in flight, for the floor worker and the
//!    proxy (`LOG_LEVEL=warn`), in runs of their own: syscalls counted by `perf stat -e
//!    raw_syscalls:sys_enter -p <pid>` (when `perf` is on `PATH` and allowed), context
//!    switches (every wakeup of a thread that slept) summed over `/proc/<pid>/task/*/status`.
//!
//! 4. The proxy streaming every task (`STREAM_TASKS=auto`; the tables above run it with
//!    `never`, so that it relays nothing, like the floor worker).
//!
//! Run: `cargo bench -p daedalus-proxy --bench cpu` (needs `bash .ci/setup` once; the
//! callgrind part runs when `valgrind` is on `PATH`). `CPU_BENCH_ONLY=callgrind` runs only the
//! instruction counts (about a minute, and repeatable on a busy machine), `CPU_BENCH_ONLY=proc`
//! only the `/proc` table;
//! `CALLGRIND_OUT_DIR=<dir>` keeps the profiles for `callgrind_annotate`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream::{self, Context};
use common::proxy_config;
use daedalus_test_kit::{NatsServer, Runtime};
use tokio_util::sync::CancellationToken;

/// Set in the child that runs the floor workers: the agent whose tasks they take.
const FLOOR_AGENT_VAR: &str = "DAEDALUS_BENCH_FLOOR_AGENT";
/// Tasks per CPU sample, by tasks in flight: enough for the 10 ms clock tick to matter little.
const CPU_TASKS: [(usize, usize); 2] = [(1, 4_000), (32, 20_000)];
/// The two workload sizes of the callgrind runs, at 32 in flight.
const CALLGRIND_TASKS: [usize; 2] = [400, 2_000];

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    if let Ok(agent) = std::env::var(FLOOR_AGENT_VAR) {
        runtime.block_on(floor_child(&agent));
    } else {
        runtime.block_on(bench());
    }
}

/// The floor workers' process: `WORKERS` floor workers until killed.
async fn floor_child(agent: &str) {
    let url = std::env::var("NATS_URL").expect("NATS_URL");
    let workers: usize = std::env::var("WORKERS")
        .expect("WORKERS")
        .parse()
        .expect("a number");
    let js = jetstream::new(async_nats::connect(url).await.expect("connect"));
    for _ in 0..workers {
        tokio::spawn(common::floor_worker(
            js.clone(),
            agent.to_owned(),
            CancellationToken::new(),
        ));
    }
    std::future::pending::<()>().await;
}

/// CPU time (user + system) a process has used so far.
fn cpu_time(pid: u32, ticks_per_second: f64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command name, which ends at the last ')': state is field 3, utime 14.
    let rest = &stat[stat.rfind(')').expect("a command name") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_secs_f64(ticks as f64 / ticks_per_second)
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// One batch measured: CPU µs per task of the worker process and of nats-server, and the rate.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Syscalls and context switches of the worker process per task (kernel-side counts).
    syscalls: Option<f64>,
    switches: f64,
    worker_us: f64,
    nats_us: f64,
    tasks_per_second: f64,
}

struct Bench {
    /// Count syscalls with `perf` during samples (only in the kernel-side table: counting
    /// costs the process a little CPU).
    count_syscalls: bool,
    /// Added to the agent names of a table's runs (each table publishes its own tasks: the
    /// stream drops a message id it saw within its duplicate window).
    table: &'static str,
    /// `STREAM_TASKS` of the proxy under test: `never` for the comparison with the floor
    /// worker (which relays nothing), `auto` for the streaming row.
    stream_tasks: &'static str,
    nats: NatsServer,
    runtime_url: String,
    client: async_nats::Client,
    js: Context,
    ticks: f64,
}

impl Bench {
    /// Runs `count` tasks for `agent` and reads the CPU `worker` and nats-server used meanwhile.
    async fn sample(&self, worker: u32, agent: &str, count: usize) -> Sample {
        let nats = self.nats.pid().expect("nats-server runs");
        let counting = self.count_syscalls.then(|| SyscallCount::attach(worker));
        let switches_before = context_switches(worker);
        let (worker_before, nats_before) =
            (cpu_time(worker, self.ticks), cpu_time(nats, self.ticks));
        let took = common::run_batch(&self.client, &self.js, agent, count).await;
        let (worker_after, nats_after) = (cpu_time(worker, self.ticks), cpu_time(nats, self.ticks));
        let switches = context_switches(worker).saturating_sub(switches_before);
        let per_task = |d: Duration| d.as_secs_f64() * 1e6 / count as f64;
        Sample {
            syscalls: counting
                .flatten()
                .and_then(SyscallCount::finish)
                .map(|n| n as f64 / count as f64),
            switches: switches as f64 / count as f64,
            worker_us: per_task(worker_after.saturating_sub(worker_before)),
            nats_us: per_task(nats_after.saturating_sub(nats_before)),
            tasks_per_second: count as f64 / took.as_secs_f64(),
        }
    }

    fn proxy_command(
        &self,
        program: &mut Command,
        agent: &str,
        concurrency: usize,
        log_level: &str,
    ) {
        program
            .env("AGENT_NAME", agent)
            .env("NATS_URL", self.nats.url())
            .env("RUNTIME_URL", &self.runtime_url)
            .env("CONCURRENCY", concurrency.to_string())
            .env("PROXY_PORT", "0")
            .env("PROXY_HOST", "127.0.0.1")
            .env("HEALTH_INTERVAL", "10m")
            .env("LOG_LEVEL", log_level)
            .env("STREAM_TASKS", self.stream_tasks)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    }

    async fn floor(&self, in_flight: usize, count: usize) -> Sample {
        let agent = format!("floor{in_flight}{}", self.table);
        let mut child = Killed(
            Command::new(std::env::current_exe().expect("this bench"))
                .env(FLOOR_AGENT_VAR, &agent)
                .env("NATS_URL", self.nats.url())
                .env("WORKERS", in_flight.to_string())
                .stdout(Stdio::null())
                .spawn()
                .expect("the floor child starts"),
        );
        common::wait_for_consumer(&self.js, &format!("floor-{agent}")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sample = self.sample(child.0.id(), &agent, count).await;
        child.stop();
        sample
    }

    async fn proxy(&self, in_flight: usize, count: usize, log_level: &str) -> Sample {
        let agent = format!("proxy{in_flight}{log_level}{}", self.table);
        let mut command = Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"));
        self.proxy_command(&mut command, &agent, in_flight, log_level);
        let mut child = Killed(command.spawn().expect("the proxy starts"));
        common::wait_for_consumer(&self.js, &format!("agent-{agent}")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sample = self.sample(child.0.id(), &agent, count).await;
        child.stop();
        sample
    }

    /// Instructions the proxy binary spends on `count` tasks published before it starts, from
    /// start to a clean exit on SIGTERM.
    async fn callgrind(&self, out_dir: &Path, log_level: &str, count: usize) -> u64 {
        let agent = format!("cg-{log_level}-{count}");
        let out = out_dir.join(format!("{agent}.out"));
        let mut results = self
            .client
            .subscribe(format!("agent.results.{agent}.>"))
            .await
            .expect("subscribe");
        self.client.flush().await.expect("flush");
        common::publish_tasks(&self.js, &agent, count).await;
        let mut command = Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(env!("CARGO_BIN_EXE_daedalus-proxy"));
        self.proxy_command(&mut command, &agent, 32, log_level);
        let mut child = command.spawn().expect("valgrind starts");
        common::await_results(&mut results, count).await;
        let terminated = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(terminated.success(), "SIGTERM delivered");
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .expect("joins")
            .expect("waits");
        assert!(
            status.success(),
            "the proxy exits cleanly under callgrind: {status}"
        );
        instructions(&out)
    }
}

/// The instruction total of a callgrind output file.
fn instructions(out: &Path) -> u64 {
    let text = std::fs::read_to_string(out).expect("callgrind output");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .expect("a totals line")
}

/// A child process killed (SIGKILL) and reaped when dropped.
struct Killed(Child);

impl Killed {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.stop();
    }
}

fn valgrind_present() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

async fn bench() {
    let nats = NatsServer::start();
    let serving = Runtime::passthrough_with("bench", |c| c.log_level = "warn".into()).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = jetstream::new(client.clone());
    let runtime_url = serving.url.clone();
    daedalus_proxy::nats::ensure_streams(
        &js,
        &proxy_config("x", &nats.url(), &runtime_url).streams,
    )
    .await
    .expect("streams");
    let mut bench = Bench {
        count_syscalls: false,
        table: "",
        stream_tasks: "never",
        nats,
        runtime_url,
        client,
        js,
        ticks: clock_ticks_per_second(),
    };

    let only = std::env::var("CPU_BENCH_ONLY").unwrap_or_default();
    if only != "callgrind" {
        proc_table(&bench).await;
        bench.count_syscalls = perf_present();
        bench.table = "k";
        kernel_table(&bench).await;
        bench.count_syscalls = false;
        bench.stream_tasks = "auto";
        bench.table = "s";
        streaming_row(&bench).await;
        bench.stream_tasks = "never";
    }
    if only == "proc" {
        return;
    }
    if !valgrind_present() {
        println!("\n(valgrind is not on PATH: no instruction counts)");
        return;
    }
    callgrind_table(&bench).await;
}

/// CPU per task from `/proc`, at 1 and 32 in flight.
async fn proc_table(bench: &Bench) {
    println!("\nproxy CPU per task (own processes, /proc/<pid>/stat)\n");
    println!(
        "| in flight | tasks | floor worker µs/task | proxy µs/task, LOG_LEVEL warn / info | nats-server µs/task under floor / proxy | tasks/s floor / proxy | proxy / floor |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (in_flight, count) in CPU_TASKS {
        let floor = bench.floor(in_flight, count).await;
        let quiet = bench.proxy(in_flight, count, "warn").await;
        let default = bench.proxy(in_flight, count, "info").await;
        println!(
            "| {in_flight} | {count} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.0} / {:.0} | {:.2} |",
            floor.worker_us,
            quiet.worker_us,
            default.worker_us,
            floor.nats_us,
            quiet.nats_us,
            floor.tasks_per_second,
            quiet.tasks_per_second,
            quiet.tasks_per_second / floor.tasks_per_second,
        );
    }
}

/// The proxy streaming every task (the runtime's card says it streams; `STREAM_TASKS=auto`):
/// each task's events read as SSE, relayed to NATS, and rebuilt into its result.
async fn streaming_row(bench: &Bench) {
    let (in_flight, count) = CPU_TASKS[1];
    let sample = bench.proxy(in_flight, count, "warn").await;
    println!(
        "\nstreamed (STREAM_TASKS=auto, {count} tasks, {in_flight} in flight, LOG_LEVEL warn): proxy {:.1} µs/task, nats-server {:.1} µs/task, {:.0} tasks/s, {:.1} context switches/task",
        sample.worker_us, sample.nats_us, sample.tasks_per_second, sample.switches
    );
}

/// Syscalls and context switches per task at 32 in flight, floor worker and proxy.
async fn kernel_table(bench: &Bench) {
    let (in_flight, count) = CPU_TASKS[1];
    println!("\nkernel side per task ({count} tasks, {in_flight} in flight, LOG_LEVEL warn)\n");
    println!("| process | syscalls per task | context switches per task |");
    println!("|---|---|---|");
    let floor = bench.floor(in_flight, count).await;
    let proxy = bench.proxy(in_flight, count, "warn").await;
    for (name, sample) in [("floor worker", floor), ("proxy", proxy)] {
        let syscalls = sample
            .syscalls
            .map_or_else(|| "n/a (no perf)".to_owned(), |n| format!("{n:.1}"));
        println!("| {name} | {syscalls} | {:.1} |", sample.switches);
    }
}

/// Context switches so far of every thread of `pid` (voluntary: it slept and was woken;
/// involuntary: preempted).
fn context_switches(pid: u32) -> u64 {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    threads
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// `perf stat` counting one process's syscalls until [`SyscallCount::finish`].
struct SyscallCount {
    perf: Child,
    out: tempfile::NamedTempFile,
}

impl SyscallCount {
    fn attach(pid: u32) -> Option<Self> {
        let out = tempfile::NamedTempFile::new().ok()?;
        let perf = Command::new("perf")
            .args(["stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-o"])
            .arg(out.path())
            .args(["-p", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // perf attaches asynchronously; give it a moment before the batch starts.
        std::thread::sleep(Duration::from_millis(200));
        Some(Self { perf, out })
    }

    fn finish(mut self) -> Option<u64> {
        let interrupted = Command::new("kill")
            .args(["-INT", &self.perf.id().to_string()])
            .status()
            .ok()?;
        if !interrupted.success() {
            return None;
        }
        self.perf.wait().ok()?;
        let text = std::fs::read_to_string(self.out.path()).ok()?;
        text.lines()
            .find(|l| l.contains("raw_syscalls:sys_enter"))
            .and_then(|l| l.split(',').next()?.trim().parse().ok())
    }
}

fn perf_present() -> bool {
    Command::new("perf")
        .args(["stat", "-e", "raw_syscalls:sys_enter", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Instructions per task under callgrind, at `LOG_LEVEL` warn and info.
async fn callgrind_table(bench: &Bench) {
    // `CALLGRIND_OUT_DIR` keeps the profiles, for `callgrind_annotate`.
    let temporary = tempfile::tempdir().expect("temp dir");
    let out_dir = std::env::var_os("CALLGRIND_OUT_DIR")
        .map_or_else(|| temporary.path().to_owned(), std::path::PathBuf::from);
    let [small, large] = CALLGRIND_TASKS;
    println!(
        "\nproxy instructions per task (callgrind, 32 in flight; ({large} tasks - {small} tasks) / {})\n",
        large - small
    );
    println!("| LOG_LEVEL | instructions per task |");
    println!("|---|---|");
    for level in ["warn", "info"] {
        let fewer = bench.callgrind(&out_dir, level, small).await;
        let more = bench.callgrind(&out_dir, level, large).await;
        let per_task = more.saturating_sub(fewer) as f64 / (large - small) as f64;
        println!("| {level} | {per_task:.0} |");
    }
}
