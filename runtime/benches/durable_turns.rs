//! What durable turns cost: the runtime on its default task store (a SQLite file in
//! `WORK_DIR`: every task stored when its turn begins and ends, and the turn's record and a
//! checkpoint after each step kept beside it) against the same runtime with `TASKS_DB=memory`
//! (nothing kept beyond the process), in one run, alternated, at 1 and 16 turns in flight:
//! turns per second and the round trip's p50 and p99.
//!
//! Two kinds of turn, each a JSON-RPC `SendMessage` of a new task:
//! - **a tool turn**: the agent's model (the fake LLM, answering at once) calls one tool of a
//!   real MCP server (the fixture's `echo`), then answers: two model calls, one tool call, two
//!   checkpoints;
//! - **a passthrough turn**: the zero-config agent, no model: the task's begin and end alone.
//!
//! Beside each row: what one turn wrote to disk (`/proc/<pid>/io` `write_bytes` over the run:
//! the WAL's appends and the checkpoints' copies into the file) and the store's commits per
//! turn (`daedalus_runtime_store_commits_total`).
//!
//! Targets (issue 64): durability costs at most 25% on a passthrough turn and 5% on a tool
//! turn; a passthrough turn writes at most 8 KiB at 16 in flight.
//!
//! Run: `cargo bench -p daedalus-runtime --bench durable_turns`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{AgentsYaml, RuntimeProcess};
use load::{Figures, best};

const KEY: &str = "sk-bench";
const MODEL: &str = "gpt-bench";
/// Turns per row, after a warm-up.
const TURNS: usize = 1_200;
const WARM_UP: usize = 200;
/// Each configuration is measured this many times, alternated with the other.
const ROUNDS: usize = 2;

/// The two stores compared.
const STORES: [(&str, &[(&str, &str)]); 2] = [
    ("TASKS_DB=memory", &[("TASKS_DB", "memory")]),
    ("default (SQLite in WORK_DIR)", &[]),
];

async fn load(url: &str, in_flight: usize) -> Figures {
    load::jsonrpc(url, in_flight, None, WARM_UP, TURNS).await
}

/// Bytes process `pid` has had written to disk so far (`/proc/<pid>/io`).
fn written(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The commits the runtime at `url` made on its default store so far (0 on memory).
async fn commits(url: &str) -> u64 {
    let Ok(response) = reqwest::get(format!("{url}/metrics")).await else {
        return 0;
    };
    response
        .text()
        .await
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("daedalus_runtime_store_commits_total{store=\"tasks\"} "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A run's figures, and what each of its turns wrote: KiB to disk, commits.
async fn measured(target: &RuntimeProcess, in_flight: usize) -> (Figures, f64, f64) {
    let pid = target.pid().expect("running");
    let (bytes, made) = (written(pid), commits(&target.url()).await);
    let figures = load(&format!("{}/", target.url()), in_flight).await;
    #[expect(clippy::cast_precision_loss, reason = "figures for people")]
    let per_turn = |n: u64| n as f64 / (WARM_UP + TURNS) as f64;
    let kib = per_turn(written(pid) - bytes) / 1024.0;
    let commits = per_turn(commits(&target.url()).await - made);
    (figures, kib, commits)
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let fake = FakeLlm::start(KEY, &[MODEL]).await;
        fake.auto(AutoReply {
            tools: vec!["fx__echo".into()],
            text: "echoed {n}".into(),
            ..Default::default()
        });
        let fixture = McpFixture::start().await;
        let yaml = AgentsYaml::on_openai(&fake.openai_base_url, KEY, MODEL)
            .mcp_server("fx", &fixture.url())
            .agent("tools", "{ instruction: Echo., servers: [fx] }")
            .build();
        let dir = tempfile::tempdir().expect("a dir");
        let agents = dir.path().join("agents.yaml");
        std::fs::write(&agents, yaml).expect("agents.yaml written");
        let agents = agents.to_str().expect("utf-8").to_owned();

        let mut runtimes = Vec::new();
        for (name, env) in STORES {
            let mut with_tools = vec![("AGENTS_CONFIG", agents.as_str())];
            with_tools.extend_from_slice(env);
            let tool_turns = RuntimeProcess::start_with("tools", &with_tools).await;
            let passthrough = RuntimeProcess::start_with("bench", env).await;
            runtimes.push((name, tool_turns, passthrough));
        }

        println!("\nJSON-RPC SendMessage, {TURNS} turns per row after {WARM_UP} to warm up, best of {ROUNDS} alternated runs\n");
        println!("| turn | in flight | task store | turns/s | p50 | p99 | KiB written / turn | commits / turn |");
        println!("|---|---|---|---|---|---|---|---|");
        let mut verdicts = Vec::new();
        for (kind, tools) in [("tool turn", true), ("passthrough", false)] {
            for in_flight in [1, 16] {
                let mut figures = vec![Vec::new(); runtimes.len()];
                let mut writes = vec![(0.0, 0.0); runtimes.len()];
                for _ in 0..ROUNDS {
                    for (i, (_, tool_turns, passthrough)) in runtimes.iter().enumerate() {
                        let target = if tools { tool_turns } else { passthrough };
                        let (f, kib, commits) = measured(target, in_flight).await;
                        figures[i].push(f);
                        writes[i] = (kib, commits);
                    }
                }
                let best: Vec<Figures> = figures.iter().map(|f| best(f)).collect();
                for (((name, ..), f), (kib, commits)) in runtimes.iter().zip(&best).zip(&writes) {
                    println!(
                        "| {kind} | {in_flight} | {name} | {:.0} | {:.3} ms | {:.3} ms | {kib:.1} | {commits:.2} |",
                        f.rate, f.p50_ms, f.p99_ms
                    );
                }
                let cost = 100.0 * (1.0 - best[1].rate / best[0].rate);
                let target = if tools { 5.0 } else { 25.0 };
                verdicts.push(format!(
                    "{kind}, {in_flight} in flight: durability costs {cost:.1}% of the turns per second \
                     (target at most {target}%: {}); p99 {:.3} ms against {:.3} ms",
                    if cost <= target { "met" } else { "NOT met" },
                    best[1].p99_ms,
                    best[0].p99_ms,
                ));
            }
        }
        println!();
        for verdict in verdicts {
            println!("{verdict}");
        }
        println!("\nmodel requests served: {}", fake.requests().len());
    });
}
