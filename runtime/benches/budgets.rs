//! What holding budgets costs: the runtime with a `budgets:` block that holds every caller
//! (its principal's `default`, its tenant's and its agent's limits: tokens a minute and a day,
//! turns a minute, concurrent turns, tokens a turn, and the tenants' fair share) against the
//! same runtime with no block, in one run, alternated, at 1 and 16 turns in flight. Both
//! authenticate the caller by API key and keep tasks on the default store (a SQLite file in
//! `WORK_DIR`, where the budgets' usage is saved too); the limits are far above what the run
//! spends, so no turn is refused and only the checks are measured.
//!
//! Each turn is a JSON-RPC `SendMessage` of a new task whose agent's model (the fake LLM,
//! answering at once) calls one tool of a real MCP server, then answers: one admission, two
//! model calls (each reserved and settled), one tool call.
//!
//! Target: the budgets cost at most 5% of the turns per second at 16 in flight.
//!
//! Run: `cargo bench -p daedalus-runtime --bench budgets`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{AgentsYaml, RuntimeProcess};
use load::Figures;

const KEY: &str = "sk-bench";
const MODEL: &str = "gpt-bench";
const API_KEY: &str = "key-of-the-bench";
/// Turns per row, after a warm-up.
const TURNS: usize = 1_500;
const WARM_UP: usize = 200;
/// Each configuration is measured this many times, alternated with the other.
const ROUNDS: usize = 3;

/// A budget on every caller, far above what the run spends.
const BUDGETS: &str = "budgets:
  default:
    tokens_per_minute: 1000000000000
    tokens_per_day: 1000000000000
    turns_per_minute: 100000000
    concurrent_turns: 100000
  tenants:
    bench: { tokens_per_day: 1000000000000, concurrent_turns: 100000, share: 1 }
  agents:
    tools: { tokens_per_turn: 100000000 }
";

/// The better of `rounds` (the one with more turns per second): noise only slows a run.
fn best(rounds: &[Figures]) -> Figures {
    rounds
        .iter()
        .copied()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .expect("at least one round")
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
        let keys = dir.path().join("api-keys.yaml");
        std::fs::write(
            &keys,
            format!(
                "keys:\n  - sha256: {}\n    principal: bench-bot\n    tenant: bench\n    scopes: [a2a]\n",
                daedalus_runtime::identity::api_keys::hash_hex(API_KEY)
            ),
        )
        .expect("the key file is written");
        let keys = keys.to_str().expect("utf-8").to_owned();

        let mut runtimes = Vec::new();
        for (name, block) in [("no budgets", ""), ("a budget on every caller", BUDGETS)] {
            let agents = dir.path().join(format!("agents-{}.yaml", runtimes.len()));
            std::fs::write(&agents, format!("{yaml}{block}")).expect("agents.yaml written");
            let agents = agents.to_str().expect("utf-8").to_owned();
            let env = [
                ("AGENTS_CONFIG", agents.as_str()),
                ("AUTH_API_KEYS_FILE", keys.as_str()),
            ];
            runtimes.push((name, RuntimeProcess::start_with("tools", &env).await));
        }

        println!("\nJSON-RPC SendMessage (a tool turn: two model calls, one tool call), {TURNS} turns per row after {WARM_UP} to warm up, best of {ROUNDS} alternated runs\n");
        println!("| in flight | budgets | turns/s | p50 | p99 |");
        println!("|---|---|---|---|---|");
        let mut verdicts = Vec::new();
        for in_flight in [1, 16] {
            let mut figures = vec![Vec::new(); runtimes.len()];
            for _ in 0..ROUNDS {
                for (i, (_, runtime)) in runtimes.iter().enumerate() {
                    let url = format!("{}/", runtime.url());
                    let run = load::jsonrpc(&url, in_flight, Some(API_KEY), WARM_UP, TURNS);
                    figures[i].push(run.await);
                }
            }
            let best: Vec<Figures> = figures.iter().map(|f| best(f)).collect();
            for ((name, _), f) in runtimes.iter().zip(&best) {
                println!(
                    "| {in_flight} | {name} | {:.0} | {:.3} ms | {:.3} ms |",
                    f.rate, f.p50_ms, f.p99_ms
                );
            }
            let cost = 100.0 * (1.0 - best[1].rate / best[0].rate);
            verdicts.push(format!(
                "{in_flight} in flight: the budgets cost {cost:.1}% of the turns per second{}; p99 {:.3} ms against {:.3} ms",
                if in_flight == 16 {
                    if cost <= 5.0 { " (target at most 5%: met)" } else { " (target at most 5%: NOT met)" }
                } else {
                    ""
                },
                best[1].p99_ms,
                best[0].p99_ms,
            ));
        }
        println!();
        for verdict in verdicts {
            println!("{verdict}");
        }
        println!("\nmodel requests served: {}", fake.requests().len());
    });
}
