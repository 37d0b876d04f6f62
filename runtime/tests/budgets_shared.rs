//! Budgets held by two replicas together, with real processes on one NATS KV store
//! (`TASKS_DB=nats://…`, the usage in the bucket beside the tasks'):
//! - one principal's 200 turns, spread over both replicas, spend no more of its
//!   `tokens_per_day` than the documented overshoot (one call's reservation per call in
//!   flight); held apart, each replica would have let it spend the limit again;
//! - a principal's `concurrent_turns` counts the turns it runs on every replica: the turns it
//!   runs on one refuse it on the other until they end, or until the one is lost (killed: its
//!   count is not renewed, and no longer counts after `REPLICA_LEASE`);
//! - a tenant's turn killed mid-way with its replica and resumed on the survivor spends from
//!   the tenant's window before and after the kill; and a tenant whose day is spent cannot go
//!   on spending through resumes (the resumed turn fails, naming the limit).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use daedalus_fake_llm::{AutoReply, FakeLlm, Gate};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::a2a_client::state_of;
use daedalus_test_kit::{A2aClient, NatsServer, script_a_turn_cut_at_step_three, wait_until_some};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::identity::api_key_file;
use support::process::{Runtime, runtime};

const KEY: &str = "sk-budgets-shared";
const MODEL: &str = "gpt-budgets-shared";
const TURNS: usize = 200;
/// Turns in flight at once, over both replicas.
const IN_FLIGHT: usize = 16;
/// The principal's tokens a day: about 60 of the turns' worth, so held apart the two
/// replicas would let it spend about twice as much.
const TOKENS_PER_DAY: u64 = 30_000;
/// The largest answer a call may ask for (the model's `max_output_tokens`).
const MAX_OUTPUT: u64 = 600;

/// A deployment of two replicas on one NATS KV store, `budgets` its `budgets:` block.
struct Pair {
    _nats: NatsServer,
    _dir: tempfile::TempDir,
    replicas: [Runtime; 2],
}

fn pair(fake: &FakeLlm, servers: &str, agent: &str, budgets: &str) -> Pair {
    pair_leased(fake, servers, agent, budgets, "5s")
}

/// A [`pair`] whose replicas' leases are `lease`.
fn pair_leased(fake: &FakeLlm, servers: &str, agent: &str, budgets: &str, lease: &str) -> Pair {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().expect("a dir");
    let yaml = support::runtime::on_fake_openai(&fake.openai_base_url, KEY, MODEL, servers, agent)
        .replace(
            "model_capabilities: { vision: true }",
            &format!("model_capabilities: {{ vision: true, max_output_tokens: {MAX_OUTPUT} }}"),
        );
    let config = dir.path().join("agents.yaml");
    std::fs::write(&config, format!("{yaml}budgets:\n{budgets}")).expect("written");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(&keys, &[("key-of-acme", "acme-bot", "acme")]);
    let replica = |name: &str| {
        runtime()
            .env("AGENTS_CONFIG", config.to_str().expect("utf-8"))
            .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
            .env("TASKS_DB", &format!("{}/shared-budgets", nats.url()))
            .env("REPLICA_ID", name)
            .env("REPLICA_LEASE", lease)
            .start()
    };
    let replicas = [replica("budget-a"), replica("budget-b")];
    Pair {
        _nats: nats,
        _dir: dir,
        replicas,
    }
}

/// What `replica`'s `/metrics` count of tokens spent under principal `name` says.
async fn tokens_spent(replica: &Runtime, name: &str) -> u64 {
    tokens_spent_in(replica, "principal", name).await
}

/// What `replica`'s `/metrics` count of tokens spent under `scope` `name` says.
async fn tokens_spent_in(replica: &Runtime, scope: &str, name: &str) -> u64 {
    let metrics = reqwest::get(replica.url("/metrics"))
        .await
        .expect("metrics are served")
        .text()
        .await
        .expect("metrics are text");
    let series =
        format!("daedalus_runtime_budget_tokens_total{{scope=\"{scope}\",name=\"{name}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

fn send_params(text: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]}})
}

/// How one turn ended, as its caller heard it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    Completed,
    /// Refused at admission: `-31429`, the day's budget spent.
    Refused,
    /// Admitted, then failed before a model call: the day's budget spent meanwhile.
    Failed,
}

async fn one_turn(client: &A2aClient, n: usize) -> Heard {
    let answer = client
        .send_raw("SendMessage", send_params(&format!("turn {n}")))
        .await;
    assert_eq!(answer.status(), StatusCode::OK);
    let body: Value = answer.json().await.expect("JSON");
    if body["error"]["code"] == -31429 {
        assert_eq!(
            body["error"]["data"][0]["metadata"]["limit"], "tokens_per_day",
            "{body}"
        );
        return Heard::Refused;
    }
    let task = &body["result"]["task"];
    match state_of(task).as_str() {
        "TASK_STATE_COMPLETED" => Heard::Completed,
        "TASK_STATE_FAILED" => {
            assert!(
                task.to_string().contains("tokens_per_day"),
                "a failed turn names the limit: {task}"
            );
            Heard::Failed
        }
        other => panic!("turn {n} ended {other}: {body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_turns_over_two_replicas_stay_within_the_days_tokens_and_its_overshoot() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    // About 500 tokens of answer per call (the fake counts words), one call per turn.
    fake.auto(AutoReply {
        text: "word ".repeat(500),
        ..AutoReply::default()
    });
    let pair = pair(
        &fake,
        "{}",
        "  proc-test: { instruction: Answer. }\n",
        &format!("  principals:\n    acme-bot: {{ tokens_per_day: {TOKENS_PER_DAY} }}\n"),
    );
    let clients: Arc<[A2aClient; 2]> = Arc::new(
        pair.replicas
            .each_ref()
            .map(|r| A2aClient::new(r.url("/")).with_bearer("key-of-acme")),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (clients, next) = (Arc::clone(&clients), Arc::clone(&next));
            tokio::spawn(async move {
                let mut heard = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= TURNS {
                        return heard;
                    }
                    heard.push((n % 2, one_turn(&clients[n % 2], n).await));
                }
            })
        })
        .collect();
    let mut heard = Vec::new();
    for worker in workers {
        heard.extend(worker.await.expect("a worker"));
    }
    let count = |what: Heard| heard.iter().filter(|(_, h)| *h == what).count();
    let completed_on = |replica: usize| {
        heard
            .iter()
            .filter(|(r, h)| *r == replica && *h == Heard::Completed)
            .count()
    };
    let spent = [
        tokens_spent(&pair.replicas[0], "acme-bot").await,
        tokens_spent(&pair.replicas[1], "acme-bot").await,
    ];
    let total: u64 = spent.iter().sum();
    let calls = fake.requests().len();
    eprintln!(
        "completed {} (a {}, b {}), refused {}, failed {}; {calls} model calls; tokens spent {spent:?} = {total} of {TOKENS_PER_DAY}",
        count(Heard::Completed),
        completed_on(0),
        completed_on(1),
        count(Heard::Refused),
        count(Heard::Failed),
    );
    assert_eq!(heard.len(), TURNS);
    assert_eq!(
        calls,
        count(Heard::Completed),
        "one model call per completed turn, none for a refused or failed one"
    );
    assert!(
        completed_on(0) > 0 && completed_on(1) > 0,
        "both replicas served the principal"
    );
    assert!(
        count(Heard::Refused) + count(Heard::Failed) > 0,
        "the day's tokens ran out"
    );
    // The documented bound: each call in flight when the limit is reached may pass it by its
    // own tokens (at most its prompt and its largest answer).
    let per_call = total / u64::try_from(calls).expect("fits");
    let bound = TOKENS_PER_DAY + u64::try_from(IN_FLIGHT).expect("fits") * (per_call + MAX_OUTPUT);
    assert!(
        total <= bound,
        "{total} tokens spent past the day's {TOKENS_PER_DAY} and its overshoot bound {bound}"
    );
    assert!(
        total >= TOKENS_PER_DAY / 2,
        "the replicas held the budget together, not by refusing early: {total}"
    );
}

/// Two replicas leased for `lease`, and principal acme-bot (`concurrent_turns: 2`) running two
/// slow turns on the first: the pair, the fake, the fixture, a client of each replica, and
/// the two turns.
async fn two_turns_running_on_the_first(
    lease: &str,
) -> (
    Pair,
    FakeLlm,
    McpFixture,
    [A2aClient; 2],
    Vec<tokio::task::JoinHandle<Value>>,
) {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let fx = McpFixture::start().await;
    fake.auto(AutoReply {
        tools: vec!["fx__slow".into()],
        text: "done".into(),
        arguments: Some(json!({"ms": 3_000})),
        rounds: 1,
    });
    let pair = pair_leased(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  proc-test: { instruction: Use the tools., servers: [fx] }\n",
        "  principals:\n    acme-bot: { concurrent_turns: 2 }\n",
        lease,
    );
    let clients = pair
        .replicas
        .each_ref()
        .map(|r| A2aClient::new(r.url("/")).with_bearer("key-of-acme"));
    let running: Vec<_> = (0..2)
        .map(|n| {
            let a = clients[0].clone();
            tokio::spawn(async move { a.run_task(&format!("slow {n}")).await })
        })
        .collect();
    // Both are running once both have asked the model (their tool call then takes seconds).
    wait_until_some(
        "both turns to ask the model",
        Duration::from_secs(10),
        || async { (fake.requests().len() >= 2).then_some(()) },
    )
    .await;
    (pair, fake, fx, clients, running)
}

/// `client`'s turn is refused, naming `concurrent_turns`.
async fn refused_for_concurrent_turns(client: &A2aClient, why: &str) {
    let refused = client.send_raw("SendMessage", send_params("third")).await;
    assert!(refused.headers().contains_key("retry-after"), "{why}");
    let body: Value = refused.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], -31429, "{why}: {body}");
    assert_eq!(
        body["error"]["data"][0]["metadata"]["limit"], "concurrent_turns",
        "{body}"
    );
}

/// `client`'s turn is admitted (within `within`) and completes.
async fn served_within(client: &A2aClient, within: Duration, what: &str) {
    let served = wait_until_some(what, within, || async {
        let answer: Value = client
            .send_raw("SendMessage", send_params("after"))
            .await
            .json()
            .await
            .ok()?;
        answer.get("result").is_some().then_some(answer)
    })
    .await;
    let body = served;
    assert_eq!(
        state_of(&body["result"]["task"]),
        "TASK_STATE_COMPLETED",
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_count_the_turns_a_principal_runs_on_every_replica() {
    let (_pair, _fake, _fx, [_, b], running) = two_turns_running_on_the_first("5s").await;
    refused_for_concurrent_turns(&b, "the two turns running on the other replica count").await;
    for turn in running {
        let task = turn.await.expect("the turn");
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    }
    // The ended turns are written off in the background, within a fraction of a second.
    served_within(
        &b,
        Duration::from_secs(5),
        "the other replica to admit a turn",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_replicas_running_turns_stop_counting_after_its_lease() {
    let (mut pair, _fake, _fx, [_, b], _running) = two_turns_running_on_the_first("2s").await;
    pair.replicas[0].signal("KILL");
    pair.replicas[0].wait_exit(Duration::from_secs(5));
    refused_for_concurrent_turns(&b, "a replica just lost is counted until its lease ends").await;
    // Its turns go on here, resumed (a resumed turn was admitted once, and is not again).
    served_within(
        &b,
        Duration::from_secs(10),
        "the lost replica's count to go stale",
    )
    .await;
}

/// A pair leased for 2 s whose agent adds with `fx`, tenant acme held to `tokens_per_day:
/// limit`; acme's turn (four model calls) runs on the first replica until its third call, which
/// never answers, and the replica is killed there. Answers the pair, the fake, the fixture, the
/// gate that holds the third call, the task's id, and the tokens the first replica counted in
/// the tenant's window before it was killed.
async fn acmes_turn_cut_with_its_replica(
    limit: u64,
) -> (Pair, FakeLlm, McpFixture, Gate, String, u64) {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let fx = McpFixture::start().await;
    let never = Gate::new();
    script_a_turn_cut_at_step_three(&fake, "fx", &never);
    let mut pair = pair_leased(
        &fake,
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  proc-test: { instruction: Use the tools., servers: [fx] }\n",
        &format!("  tenants:\n    acme: {{ tokens_per_day: {limit} }}\n"),
        "2s",
    );
    let first = A2aClient::new(pair.replicas[0].url("/")).with_bearer("key-of-acme");
    let id = first.start_task("add 1+1, 2+2, 3+3").await;
    wait_until_some("the turn's third call", Duration::from_secs(20), || async {
        (fake.requests().len() >= 3).then_some(())
    })
    .await;
    let before = tokens_spent_in(&pair.replicas[0], "tenant", "acme").await;
    pair.replicas[0].child.kill().expect("SIGKILL");
    pair.replicas[0].child.wait().expect("reaped");
    (pair, fake, fx, never, id, before)
}

/// Task `id` once it has ended on `client`'s replica (bounded).
async fn ended_on(client: &A2aClient, id: &str) -> Value {
    wait_until_some("the task to end", Duration::from_secs(30), || async {
        client.get(id).await.filter(|task| {
            matches!(
                state_of(task).as_str(),
                "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED"
            )
        })
    })
    .await
}

/// What is left of acme's day in the shared window, as the survivor's `RateLimit` field says.
async fn left_of_acmes_day(client: &A2aClient, id: &str) -> u64 {
    let answer = client.send_raw("GetTask", json!({"id": id})).await;
    let field = answer
        .headers()
        .get("ratelimit")
        .and_then(|v| v.to_str().ok())
        .expect("the RateLimit field")
        .to_owned();
    field
        .split(',')
        .find(|member| member.trim().starts_with("\"tenant-tokens_per_day\""))
        .and_then(|member| member.split(";r=").nth(1))
        .and_then(|r| r.split(';').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("the tenant's day in {field}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_resumed_on_the_survivor_spends_from_its_tenants_window_before_and_after_the_kill() {
    let limit = 1_000_000;
    let (pair, fake, _fx, never, id, before) = acmes_turn_cut_with_its_replica(limit).await;
    assert!(before > 0, "the first replica counted steps one and two");
    let survivor = A2aClient::new(pair.replicas[1].url("/")).with_bearer("key-of-acme");
    let task = ended_on(&survivor, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(fake.requests().len(), 5, "resumed from step three");
    let after = tokens_spent_in(&pair.replicas[1], "tenant", "acme").await;
    assert!(
        after > 0,
        "the survivor counted the resumed turn's calls in the tenant's budget"
    );
    let used = limit - left_of_acmes_day(&survivor, &id).await;
    assert!(
        used >= before + after,
        "the tenant's window holds the tokens spent before the kill ({before}) and after it \
         ({after}): {used} used"
    );
    never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_day_is_spent_cannot_go_on_spending_through_a_resume() {
    // Each call reserves more than this: the third call's reservation takes what is left of
    // the day, and the killed replica never gives it back.
    let (pair, fake, _fx, never, id, _) = acmes_turn_cut_with_its_replica(700).await;
    let survivor = A2aClient::new(pair.replicas[1].url("/")).with_bearer("key-of-acme");
    let task = ended_on(&survivor, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_FAILED", "{task}");
    let said = task["status"]["message"].to_string();
    assert!(
        said.contains("tokens_per_day") && said.contains("acme"),
        "the resumed turn fails naming the limit: {said}"
    );
    assert_eq!(
        fake.requests().len(),
        3,
        "no model call was made for the tenant past its day"
    );
    never.open();
}
