//! A rolling deploy of durable turns, with real processes: three replicas on one NATS KV task
//! store run 60 long turns (each four model calls and three calls of a slow, idempotent MCP
//! tool); each replica in turn is sent SIGTERM with a grace shorter than the turns, and started
//! again under its name. Every turn completes with its own answer, and the model is asked no
//! more than each turn's steps plus the one step each handed-off turn had in flight. Hand-offs
//! are not counted against `TURN_MAX_RESUMES` (set to 1 here, below the hand-offs a turn may
//! see).

mod support;

use std::time::Duration;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::a2a_client::state_of;
use daedalus_test_kit::{A2aClient, NatsServer, wait_until_some};
use serde_json::{Value, json};
use support::process::{Runtime, runtime};

const KEY: &str = "sk-rolling";
const MODEL: &str = "gpt-rolling";
const TURNS: usize = 60;
const REPLICAS: [&str; 3] = ["rolling-a", "rolling-b", "rolling-c"];
/// Tool rounds per turn; each turn asks the model once more, for its answer.
const ROUNDS: usize = 3;
/// How long each tool call takes: a turn lasts several seconds, far past the grace.
const TOOL_MS: u64 = 1_500;

/// The deployment every replica shares, in `dir`.
struct Fleet {
    nats: NatsServer,
    fake: FakeLlm,
    fx: McpFixture,
    dir: tempfile::TempDir,
}

impl Fleet {
    async fn set_up() -> Self {
        let nats = NatsServer::start();
        let fx = McpFixture::start().await;
        let fake = FakeLlm::start(KEY, &[MODEL]).await;
        fake.auto(AutoReply {
            tools: vec!["fx__slow".into()],
            text: "turn {n} done".into(),
            arguments: Some(json!({"ms": TOOL_MS})),
            rounds: ROUNDS,
        });
        let dir = tempfile::tempdir().expect("a dir");
        let yaml = support::runtime::on_fake_openai(
            &fake.openai_base_url,
            KEY,
            MODEL,
            &format!("    fx: {{ url: \"{}\" }}", fx.url()),
            "  proc-test: { instruction: Use the tools., servers: [fx] }\n",
        );
        std::fs::write(dir.path().join("agents.yaml"), yaml).expect("agents.yaml written");
        Self {
            nats,
            fake,
            fx,
            dir,
        }
    }

    /// Replica `name` on the shared stores, its grace one second.
    fn replica(&self, name: &str) -> Runtime {
        let config = self.dir.path().join("agents.yaml");
        runtime()
            .env("AGENTS_CONFIG", config.to_str().expect("utf-8"))
            .env("TASKS_DB", &format!("{}/rolling-tasks", self.nats.url()))
            .env(
                "SESSIONS_DB",
                &format!("{}/rolling-sessions", self.nats.url()),
            )
            .env("REPLICA_ID", name)
            .env("REPLICA_LEASE", "2s")
            .env("TERMINATION_GRACE_PERIOD", "1s")
            // A turn may be handed off by each replica in turn: hand-offs are not counted
            // against it, so one resume allowed is enough.
            .env("TURN_MAX_RESUMES", "1")
            .start()
    }
}

/// How many times `logs` say a turn was handed off at the end of the grace.
fn handed_off(logs: &[Value]) -> usize {
    logs.iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("the turn is handed off"))
        })
        .count()
}

/// Prints the lines of `logs` (by replica) that name task `id`, and every warning and error,
/// for a failure to explain.
fn print_lines_naming(id: &str, logs: &[(String, Value)]) {
    for (replica, line) in logs {
        if line.to_string().contains(id) || line["level"] == "ERROR" || line["level"] == "WARN" {
            eprintln!("{replica}: {line}");
        }
    }
}

/// What `replica`'s `/metrics` count of turns resumed after a hand-off says.
async fn resumed_after_a_hand_off(replica: &Runtime) -> u64 {
    let metrics = reqwest::get(replica.url("/metrics"))
        .await
        .expect("metrics are served")
        .text()
        .await
        .expect("metrics are text");
    metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("daedalus_runtime_turns_resumed_total{cause=\"hand_off\"} ")
        })
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_turns_complete_through_a_rolling_restart_of_three_replicas() {
    let fleet = Fleet::set_up().await;
    let mut replicas: Vec<Runtime> = REPLICAS.iter().map(|name| fleet.replica(name)).collect();
    let mut ids = Vec::with_capacity(TURNS);
    for n in 0..TURNS {
        let client = A2aClient::new(replicas[n % REPLICAS.len()].url("/"));
        ids.push(client.start_task(&format!("turn {n}")).await);
    }
    // Each replica in turn leaves with its turns running, and comes back under its name.
    let mut hand_offs = 0;
    let mut all_logs: Vec<(String, Value)> = Vec::new();
    for (at, name) in REPLICAS.iter().enumerate() {
        let leaving = &mut replicas[at];
        leaving.signal("TERM");
        assert!(
            leaving.wait_exit(Duration::from_secs(30)).success(),
            "{name} drained and exited"
        );
        let mut logs = leaving.startup_logs().to_vec();
        logs.extend(leaving.drain_logs());
        hand_offs += handed_off(&logs);
        all_logs.extend(logs.into_iter().map(|l| (format!("{name} (first)"), l)));
        replicas[at] = fleet.replica(name);
    }
    assert!(
        hand_offs > 0,
        "the grace ran out on some turns, which were handed off"
    );

    let client = A2aClient::new(replicas[0].url("/"));
    for (n, id) in ids.iter().enumerate() {
        let task = wait_until_some(
            &format!("turn {n} ends"),
            Duration::from_mins(2),
            || async {
                client.get(id).await.filter(|task| {
                    !matches!(
                        state_of(task).as_str(),
                        "TASK_STATE_WORKING" | "TASK_STATE_SUBMITTED"
                    )
                })
            },
        )
        .await;
        if state_of(&task) != "TASK_STATE_COMPLETED" {
            for (at, replica) in replicas.iter().enumerate() {
                let logs = replica
                    .startup_logs()
                    .iter()
                    .cloned()
                    .chain(replica.drain_logs());
                all_logs.extend(logs.map(|l| (format!("{} (second)", REPLICAS[at]), l)));
            }
            print_lines_naming(id, &all_logs);
        }
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "turn {n}: {task}");
        assert_eq!(
            task["artifacts"][0]["parts"][0]["text"],
            format!("turn {n} done"),
            "turn {n} answered its own question"
        );
    }
    let mut resumed_after_hand_offs = 0;
    for replica in &replicas {
        hand_offs += handed_off(&replica.drain_logs());
        resumed_after_hand_offs += resumed_after_a_hand_off(replica).await;
    }
    assert!(
        resumed_after_hand_offs > 0,
        "the replicas' metrics count the turns they resumed after a hand-off"
    );
    let steps = TURNS * (ROUNDS + 1);
    let asked = fleet.fake.requests().len();
    assert!(
        asked >= steps && asked <= steps + hand_offs,
        "the model was asked {asked} times: each of the {steps} steps once, and at most the \
         {hand_offs} steps in flight at the hand-offs again"
    );
    let tool_calls = fleet.fx.calls().iter().filter(|c| c.tool == "slow").count();
    eprintln!(
        "{TURNS} turns of {steps} steps in all: {hand_offs} hand-offs, {asked} model requests, \
         {tool_calls} tool calls"
    );
    assert!(
        tool_calls >= TURNS * ROUNDS && tool_calls <= TURNS * ROUNDS + hand_offs,
        "the tool was called {tool_calls} times: once per round, and again at most once per \
         hand-off (it is idempotent)"
    );
}
