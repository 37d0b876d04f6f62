//! What holding budgets costs, two ways in one run:
//! - **the book alone**, in this process: what one turn's admission, one model call's
//!   reservation and settlement, and the turn's end take, alone and with 16 turns at once;
//! - **end to end**: the runtime with a `budgets:` block that holds every caller (its
//!   principal's `default`, its tenant's and its agent's limits: tokens a minute and a day,
//!   cost a day, turns a minute, concurrent turns, tokens a turn, and the tenants' fair share)
//!   against the same runtime with no block, alternated, at 1 and 16 turns in flight. Both
//!   authenticate the caller by API key and keep tasks in memory (`TASKS_DB=memory`, so a
//!   store's writes do not blur the comparison); the limits are far above what the run spends,
//!   so no turn is refused and only the checks are measured. Each turn is a JSON-RPC
//!   `SendMessage` of a new task whose agent's model (the fake LLM, answering at once) answers:
//!   one admission, one model call reserved and settled.
//!
//! Target: the budgets cost at most 5% of the turns per second at 16 in flight.
//!
//! Run: `cargo bench -p daedalus-runtime --bench budgets`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_test_kit::{AgentsYaml, RuntimeProcess};
use load::{Figures, best};

const KEY: &str = "sk-bench";
const MODEL: &str = "gpt-bench";
const API_KEY: &str = "key-of-the-bench";
/// Turns per row, after a warm-up.
const TURNS: usize = 3_000;
const WARM_UP: usize = 300;
/// Each configuration is measured this many times, alternated with the other.
const ROUNDS: usize = 4;
/// Turns through the book alone, per row.
const BOOK_TURNS: usize = 200_000;

/// A budget on every caller, far above what the run spends.
const BUDGETS: &str = "budgets:
  default:
    tokens_per_minute: 1000000000000
    tokens_per_day: 1000000000000
    turns_per_minute: 100000000
    concurrent_turns: 100000
  tenants:
    bench: { tokens_per_day: 1000000000000, cost_per_day: 1000000, concurrent_turns: 100000, share: 1 }
  agents:
    chat: { tokens_per_turn: 100000000 }
models:
  openai.gpt-bench: { price: { input_per_mtok: 2.5, output_per_mtok: 10 } }
";

/// What one turn through the book alone takes (admission, one call reserved and settled, the
/// end), over `lanes` tasks at once: nanoseconds a turn.
async fn book_alone(lanes: usize) -> f64 {
    use daedalus_runtime::agents::budgets::BudgetBook;
    use daedalus_runtime::config::deployment::budgets::{BudgetPlan, Price};
    use daedalus_runtime::platform::identity::{Caller, Known, Principal, Via};
    use std::sync::Arc;

    let block: String = BUDGETS
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with(' '))
        .map(|line| line.strip_prefix("  ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n");
    let mut plan: BudgetPlan = serde_saphyr::from_str(&block).expect("the plan");
    plan.prices.insert(
        format!("openai.{MODEL}"),
        Price {
            input_nanos: 2_500,
            output_nanos: 10_000,
        },
    );
    let book = Arc::new(BudgetBook::new(Some(plan)));
    let caller = Caller::known(Known {
        principal: Principal {
            issuer: None,
            subject: "bench-bot".to_owned(),
            tenant: Some("bench".to_owned()),
        },
        scopes: std::collections::BTreeSet::new(),
        admin: false,
        via: Via::ApiKey,
    });
    let model = format!("openai.{MODEL}");
    let started = std::time::Instant::now();
    let per_lane = BOOK_TURNS / lanes;
    let tasks: Vec<_> = (0..lanes)
        .map(|_| {
            let (book, caller, model) = (Arc::clone(&book), caller.clone(), model.clone());
            tokio::spawn(async move {
                for _ in 0..per_lane {
                    let turn = book
                        .admit(book.scopes(&caller, "chat"))
                        .await
                        .expect("admitted");
                    let call = turn.reserve(200, 1_000, &model).await.expect("room");
                    call.settle(300, 100).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a lane");
    }
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let per_turn = started.elapsed().as_nanos() as f64 / (per_lane * lanes) as f64;
    per_turn
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let fake = FakeLlm::start(KEY, &[MODEL]).await;
        println!("\nThe book alone: one turn's admission, one call reserved and settled, its end ({BOOK_TURNS} turns)\n");
        println!("| turns at once | per turn |");
        println!("|---|---|");
        for lanes in [1, 16] {
            println!("| {lanes} | {:.0} ns |", book_alone(lanes).await);
        }

        fake.auto(AutoReply {
            text: "answered {n}".into(),
            ..Default::default()
        });
        let yaml = AgentsYaml::on_openai(&fake.openai_base_url, KEY, MODEL)
            .agent("chat", "{ instruction: Answer. }")
            .build();
        let dir = tempfile::tempdir().expect("a dir");
        let keys = dir.path().join("api-keys.yaml");
        std::fs::write(
            &keys,
            format!(
                "keys:\n  - sha256: {}\n    principal: bench-bot\n    tenant: bench\n    scopes: [a2a]\n",
                daedalus_runtime::platform::identity::api_keys::hash_hex(API_KEY)
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
                ("TASKS_DB", "memory"),
            ];
            runtimes.push((name, RuntimeProcess::start_with("chat", &env).await));
        }

        println!("\nJSON-RPC SendMessage (one model call), {TURNS} turns per row after {WARM_UP} to warm up, best of {ROUNDS} alternated runs\n");
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
