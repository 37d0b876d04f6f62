//! Durable turns, with real processes: a runtime on a SQLite task store, `kill -9`ed in the
//! middle of a turn of several tool steps (a scripted LLM that counts requests, a real MCP
//! server that counts calls), restarted, goes on with the turn from its last checkpoint: the
//! task completes, and no completed step is asked of the model or the tool again.

mod support;

use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Gate, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::a2a_client::state_of;
use daedalus_test_kit::{
    A2aClient, SUMS, script_a_turn_cut_at_step_three, wait_until, wait_until_some,
};
use serde_json::{Value, json};
use support::process::{Runtime, runtime};

const KEY: &str = "sk-durable";
const MODEL: &str = "gpt-durable";

fn add(a: i64, b: i64) -> Reply {
    Reply::ToolCalls(vec![("fx__add".into(), json!({"a": a, "b": b}))])
}

/// The runtime of the test: its agent on the fake LLM with the MCP fixture's tools, its tasks
/// and conversations in `dir` (a replica id that survives the restart's new port).
fn durable_runtime(dir: &tempfile::TempDir, fake: &FakeLlm, fx: &McpFixture) -> Runtime {
    durable_runtime_with(dir, fake, fx, &[])
}

fn durable_runtime_with(
    dir: &tempfile::TempDir,
    fake: &FakeLlm,
    fx: &McpFixture,
    env: &[(&str, &str)],
) -> Runtime {
    let path = |name: &str| dir.path().join(name).to_str().expect("utf-8").to_owned();
    let mut builder = runtime_in(dir, fake, fx)
        .env("TASKS_DB", &path("tasks.sqlite"))
        .env("SESSIONS_DB", &path("sessions.sqlite"));
    for (key, value) in env {
        builder = builder.env(key, value);
    }
    builder.start()
}

/// The runtime of the test with `dir` as its `WORK_DIR` and nothing said of its stores, and
/// the replica id the restart keeps.
fn runtime_in(
    dir: &tempfile::TempDir,
    fake: &FakeLlm,
    fx: &McpFixture,
) -> support::process::RuntimeBuilder {
    runtime_with_server(dir, fake, "fx", &format!("{{ url: \"{}\" }}", fx.url()))
}

/// The runtime of the test with `dir` as its `WORK_DIR`, its agent using the one server
/// `name`, whose entry is `entry`.
fn runtime_with_server(
    dir: &tempfile::TempDir,
    fake: &FakeLlm,
    name: &str,
    entry: &str,
) -> support::process::RuntimeBuilder {
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        MODEL,
        &format!("    {name}: {entry}"),
        &format!("  proc-test: {{ instruction: Use the tools., servers: [{name}] }}\n"),
    );
    let file = dir.path().join("agents.yaml");
    std::fs::write(&file, yaml).expect("agents.yaml written");
    runtime()
        .env("AGENTS_CONFIG", file.to_str().expect("utf-8"))
        .env("WORK_DIR", dir.path().to_str().expect("utf-8"))
        .env("REPLICA_ID", "durable-test")
}

/// Waits (bounded) until the fake LLM has had `n` requests.
async fn until_requests(fake: &FakeLlm, n: usize) {
    wait_until(
        &format!("{n} model requests"),
        Duration::from_secs(20),
        || {
            let had = fake.requests().len();
            async move { had >= n }
        },
    )
    .await;
}

/// Task `id` once it has ended (bounded).
async fn ended(client: &A2aClient, id: &str) -> Value {
    wait_until_some(
        &format!("task {id} ends"),
        Duration::from_secs(20),
        || async {
            client.get(id).await.filter(|task| {
                !matches!(
                    state_of(task).as_str(),
                    "TASK_STATE_WORKING" | "TASK_STATE_SUBMITTED"
                )
            })
        },
    )
    .await
}

fn tool_calls(fx: &McpFixture) -> Vec<Value> {
    fx.calls()
        .into_iter()
        .filter(|c| c.tool == "add")
        .map(|c| c.arguments)
        .collect()
}

/// What most of these tests share: the MCP fixture, the fake LLM scripted for a turn cut at
/// step three ([`script_a_turn_cut_at_step_three`], its third answer held at `never`), and the
/// directory the runtimes keep their files in.
struct CutTurn {
    fx: McpFixture,
    fake: FakeLlm,
    never: Gate,
    dir: tempfile::TempDir,
}

impl CutTurn {
    async fn set_up() -> Self {
        let fx = McpFixture::start().await;
        let fake = FakeLlm::start(KEY, &[MODEL]).await;
        let never = Gate::new();
        script_a_turn_cut_at_step_three(&fake, "fx", &never);
        let dir = tempfile::tempdir().expect("a dir");
        Self {
            fx,
            fake,
            never,
            dir,
        }
    }

    /// Starts the turn on `runtime` and waits until it is in step three: the task's id.
    async fn start_on(&self, runtime: &Runtime) -> String {
        let id = A2aClient::new(runtime.url("/"))
            .start_task("add 1+1, 2+2, 3+3")
            .await;
        until_requests(&self.fake, 3).await;
        id
    }

    /// A replica on the NATS KV stores of `nats` (tasks and conversations shared), named
    /// `name`.
    fn replica(&self, nats: &daedalus_test_kit::NatsServer, name: &str) -> Runtime {
        let tasks = format!("{}/durable-tasks", nats.url());
        let sessions = format!("{}/durable-sessions", nats.url());
        durable_runtime_with(
            &self.dir,
            &self.fake,
            &self.fx,
            &[
                ("TASKS_DB", &tasks),
                ("SESSIONS_DB", &sessions),
                ("REPLICA_ID", name),
                ("REPLICA_LEASE", "1s"),
            ],
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_killed_mid_turn_resumes_it_after_a_restart_without_repeating_a_step() {
    let scene = CutTurn::set_up().await;
    let CutTurn {
        fx,
        fake,
        never,
        dir,
    } = &scene;
    let first = durable_runtime(dir, fake, fx);
    let id = scene.start_on(&first).await;
    first.signal("KILL");
    let trace_of = |logs: &[Value]| {
        logs.iter()
            .find(|l| l["message"] == "task started" && l["span"]["trace_id"].is_string())
            .map(|l| l["span"]["trace_id"].clone())
    };
    let first_trace = trace_of(&first.drain_logs()).expect("the first run's trace");
    drop(first);

    let second = durable_runtime(dir, fake, fx);
    let client = A2aClient::new(second.url("/"));
    let task = ended(&client, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], SUMS, "{task}");
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        5,
        "steps 1 and 2 once, step 3 twice (it was in flight), step 4 once"
    );
    assert!(requests.iter().all(|r| r.refused.is_none()), "{requests:?}");
    let resumed = requests[3].body["messages"].to_string();
    assert!(
        resumed.contains("add 1+1") && resumed.contains("\"4\""),
        "the resumed step goes on from step 2's result: {resumed}"
    );
    assert_eq!(
        tool_calls(fx),
        [
            json!({"a": 1, "b": 1}),
            json!({"a": 2, "b": 2}),
            json!({"a": 3, "b": 3})
        ],
        "each tool call was made once"
    );
    // The restart says it resumed the turn (it may say so after the task is seen ended).
    let seen = std::cell::RefCell::new(Vec::new());
    second.wait_for_log(Duration::from_secs(10), |line| {
        seen.borrow_mut().push(line.clone());
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains("resumed from its last checkpoint"))
    });
    let mut logs = seen.into_inner();
    logs.extend(second.drain_logs());
    assert_eq!(
        trace_of(&logs),
        Some(first_trace),
        "the resumed turn goes on in the first run's trace"
    );
    never.open();
}

/// On the defaults (no `TASKS_DB`, no `SESSIONS_DB`: both SQLite files in `WORK_DIR`), a
/// runtime `kill -9`ed mid-turn and restarted resumes the turn too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_on_the_defaults_resumes_its_turn_after_a_kill() {
    let scene = CutTurn::set_up().await;
    let on_the_defaults = || {
        runtime_in(&scene.dir, &scene.fake, &scene.fx)
            .env_remove("SESSIONS_DB")
            .start()
    };
    let first = on_the_defaults();
    let id = scene.start_on(&first).await;
    first.signal("KILL");
    drop(first);
    assert!(
        scene.dir.path().join("daedalus-tasks.sqlite").exists(),
        "the default task store is a file in WORK_DIR"
    );

    let second = on_the_defaults();
    let task = ended(&A2aClient::new(second.url("/")), &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], SUMS, "{task}");
    assert_eq!(
        scene.fake.requests().len(),
        5,
        "no completed step asked again"
    );
    assert_eq!(
        tool_calls(&scene.fx).len(),
        3,
        "each tool call was made once"
    );
    scene.never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_keeps_losing_its_runtime_fails_after_turn_max_resumes() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let never = Gate::new();
    let paused = || Reply::Paused {
        before: String::new(),
        after: String::new(),
        gate: never.clone(),
    };
    fake.script([add(1, 1), paused(), paused(), paused()]);
    let dir = tempfile::tempdir().expect("a dir");
    let limit = [("TURN_MAX_RESUMES", "1")];
    let first = durable_runtime_with(&dir, &fake, &fx, &limit);
    let id = A2aClient::new(first.url("/")).start_task("add").await;
    until_requests(&fake, 2).await;
    first.signal("KILL");
    drop(first);
    // Resumed once: it asks for step 2 again, and dies again.
    let second = durable_runtime_with(&dir, &fake, &fx, &limit);
    until_requests(&fake, 3).await;
    second.signal("KILL");
    drop(second);
    let third = durable_runtime_with(&dir, &fake, &fx, &limit);
    let task = ended(&A2aClient::new(third.url("/")), &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_FAILED", "{task}");
    let why = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("TURN_MAX_RESUMES"), "{why}");
    assert_eq!(fake.requests().len(), 3, "not asked a third time");
    never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_resumes_the_turns_of_a_replica_killed_mid_turn() {
    let nats = daedalus_test_kit::NatsServer::start();
    let scene = CutTurn::set_up().await;
    let CutTurn {
        fx,
        fake,
        never,
        dir: _,
    } = &scene;
    let doomed = scene.replica(&nats, "replica-a");
    let survivor = scene.replica(&nats, "replica-b");
    let id = scene.start_on(&doomed).await;
    doomed.signal("KILL");
    let killed = std::time::Instant::now();
    drop(doomed);
    until_requests(fake, 4).await;
    // Measured, not asserted: the bound is REPLICA_LEASE + REPLICA_LEASE/5 (1.2 s here).
    println!(
        "from the SIGKILL to the survivor's first model call of the resumed turn: {} ms (REPLICA_LEASE 1s)",
        killed.elapsed().as_millis()
    );

    let client = A2aClient::new(survivor.url("/"));
    let task = ended(&client, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], SUMS);
    assert_eq!(
        fake.requests().len(),
        5,
        "steps 1 and 2 once, step 3 twice (it was in flight), step 4 once"
    );
    assert_eq!(tool_calls(fx).len(), 3, "each tool call was made once");
    let metrics = reqwest::get(survivor.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("daedalus_runtime_turns_resumed_total{cause=\"replica_lost\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("daedalus_runtime_resumed_steps_kept_total 2"),
        "{metrics}"
    );
    never.open();
}

/// Waits (bounded) until the fixture has had a call of `tool`.
async fn until_called(fx: &McpFixture, tool: &str) {
    wait_until(
        &format!("a call of {tool}"),
        Duration::from_secs(10),
        || {
            let called = fx.calls().iter().any(|c| c.tool == tool);
            async move { called }
        },
    )
    .await;
}

/// A turn whose runtime is killed while its one tool call (`tool`, `arguments`) is in flight,
/// resumed after a restart: the task as it ended, and the model's requests.
async fn killed_during_a_tool_call(
    tool: &str,
    arguments: Value,
) -> (Value, McpFixture, Vec<daedalus_fake_llm::Logged>) {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::ToolCalls(vec![(format!("fx__{tool}"), arguments)]),
        Reply::Text("went on".into()),
    ]);
    let dir = tempfile::tempdir().expect("a dir");
    let first = durable_runtime(&dir, &fake, &fx);
    let id = A2aClient::new(first.url("/")).start_task("call it").await;
    until_called(&fx, tool).await;
    first.signal("KILL");
    drop(first);
    let second = durable_runtime(&dir, &fake, &fx);
    let task = ended(&A2aClient::new(second.url("/")), &id).await;
    (task, fx, fake.requests())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_in_flight_is_not_made_again_unless_the_tool_says_it_may_be() {
    // `hang` says nothing of itself: it may have taken effect, so it is not called again, and
    // the model reads that it was interrupted.
    let (task, fx, requests) = killed_during_a_tool_call("hang", json!({})).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(fx.calls().iter().filter(|c| c.tool == "hang").count(), 1);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let told = requests[1].body["messages"].to_string();
    assert!(told.contains("was interrupted"), "{told}");

    // `slow` says it is idempotent (`idempotentHint`): it is called again.
    let (task, fx, requests) = killed_during_a_tool_call("slow", json!({"ms": 2000})).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(fx.calls().iter().filter(|c| c.tool == "slow").count(), 2);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let told = requests[1].body["messages"].to_string();
    assert!(!told.contains("was interrupted"), "{told}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_the_grace_is_handed_off_at_sigterm_and_resumed_after_the_restart() {
    let scene = CutTurn::set_up().await;
    let CutTurn {
        fx,
        fake,
        never,
        dir,
    } = &scene;
    let grace = [("TERMINATION_GRACE_PERIOD", "1s")];
    let mut first = durable_runtime_with(dir, fake, fx, &grace);
    // A caller waits on the turn (a blocking SendMessage): the official Python client, which
    // reads a JSON-RPC error only from an HTTP 200.
    let waiting = {
        let url = first.url("/");
        tokio::spawn(async move {
            support::python::a2a_steps(
                "a2a_refused.py",
                &[&url, "-", "add 1+1, 2+2, 3+3", "blocking"],
            )
            .await
        })
    };
    until_requests(fake, 3).await;
    first.signal("TERM");
    let answer = waiting.await.expect("the caller is answered")["blocking"].clone();
    let told = answer["message"].as_str().unwrap_or_default();
    assert!(
        told.contains("-31503") && !told.contains("HTTP Error"),
        "the SDK raises the JSON-RPC error: {answer}"
    );
    // The task the answer names is the one that goes on after the restart.
    let id = told
        .split_once("runtime is shutting down; task ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .map_or_else(
            || panic!("the caller is told which task goes on: {answer}"),
            |(id, _)| id.to_owned(),
        );
    assert!(told.contains("poll it"), "{answer}");
    assert!(first.wait_exit(Duration::from_secs(30)).success());
    assert!(
        first.drain_logs().iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("handed off"))),
        "the turn was handed off, not ended"
    );

    let second = durable_runtime_with(dir, fake, fx, &grace);
    let task = ended(&A2aClient::new(second.url("/")), &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(fake.requests().len(), 5);
    assert_eq!(tool_calls(fx).len(), 3, "each tool call was made once");
    never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_resumes_a_turn_handed_off_at_sigterm_at_once_not_after_the_lease() {
    let nats = daedalus_test_kit::NatsServer::start();
    let scene = CutTurn::set_up().await;
    let CutTurn {
        fx,
        fake,
        never,
        dir,
    } = &scene;
    let tasks = format!("{}/handoff-tasks", nats.url());
    let sessions = format!("{}/handoff-sessions", nats.url());
    // A lease far longer than the test may wait: the peer must not wait for it.
    let env = |name: &'static str| {
        [
            ("TASKS_DB", tasks.clone()),
            ("SESSIONS_DB", sessions.clone()),
            ("REPLICA_ID", name.to_owned()),
            ("REPLICA_LEASE", "10m".to_owned()),
            ("TERMINATION_GRACE_PERIOD", "1s".to_owned()),
        ]
    };
    let start = |name: &'static str| {
        let env = env(name);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        durable_runtime_with(dir, fake, fx, &env)
    };
    let mut leaving = start("replica-a");
    let peer = start("replica-b");
    let id = scene.start_on(&leaving).await;
    leaving.signal("TERM");
    assert!(leaving.wait_exit(Duration::from_secs(30)).success());

    let task = ended(&A2aClient::new(peer.url("/")), &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(fake.requests().len(), 5);
    assert_eq!(tool_calls(fx).len(), 3, "each tool call was made once");
    never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_survivors_race_to_resume_a_lost_turn_and_one_does_it_once() {
    let nats = daedalus_test_kit::NatsServer::start();
    let scene = CutTurn::set_up().await;
    let CutTurn {
        fx,
        fake,
        never,
        dir: _,
    } = &scene;
    let doomed = scene.replica(&nats, "replica-a");
    let b = scene.replica(&nats, "replica-b");
    let c = scene.replica(&nats, "replica-c");
    let id = scene.start_on(&doomed).await;
    doomed.signal("KILL");
    drop(doomed);

    let (on_b, on_c) = (A2aClient::new(b.url("/")), A2aClient::new(c.url("/")));
    let task = ended(&on_b, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    // Both survivors saw the replica go and raced; one turn ran, once.
    assert_eq!(fake.requests().len(), 5, "one resume, not two");
    assert_eq!(tool_calls(fx).len(), 3, "each tool call was made once");
    let on_c_now = ended(&on_c, &id).await;
    assert_eq!(on_c_now["status"], task["status"], "both survivors agree");
    let resumed = |rt: &Runtime| {
        rt.drain_logs()
            .iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("resumed from its last checkpoint"))
            })
            .count()
    };
    assert_eq!(resumed(&b) + resumed(&c), 1, "one survivor resumed it");
    never.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_step_turn_killed_in_step_five_asks_each_completed_step_once() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let never = Gate::new();
    // Steps 1-9 each call `add`, step 10 answers; step 5's first answer never comes.
    let mut script: Vec<Reply> = (1..=4).map(|k| add(k, k)).collect();
    script.push(Reply::Paused {
        before: String::new(),
        after: String::new(),
        gate: never.clone(),
    });
    script.extend((5..=9).map(|k| add(k, k)));
    script.push(Reply::Text("ten steps done".into()));
    fake.script(script);
    let dir = tempfile::tempdir().expect("a dir");
    let first = durable_runtime(&dir, &fake, &fx);
    let id = A2aClient::new(first.url("/")).start_task("ten steps").await;
    until_requests(&fake, 5).await;
    first.signal("KILL");
    drop(first);

    let second = durable_runtime(&dir, &fake, &fx);
    let client = A2aClient::new(second.url("/"));
    let task = ended(&client, &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "ten steps done");
    assert_eq!(
        fake.requests().len(),
        11,
        "steps 1-4 once, step 5 twice (in flight at the kill), steps 6-10 once"
    );
    let sums: Vec<Value> = (1..=9).map(|k| json!({"a": k, "b": k})).collect();
    assert_eq!(
        tool_calls(&fx),
        sums,
        "each step's tool call was made once, in order"
    );
    never.open();
}

/// A call to another A2A agent (a second runtime) in flight when the runtime is `kill -9`ed:
/// after the restart the turn asks the agent for the task the call started and follows it to
/// its end; the message is not sent again, and the model reads the agent's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_an_a2a_agent_cut_by_a_kill_is_followed_to_its_end_not_sent_again() {
    let inner = runtime().env("AGENT_NAME", "inner").start();
    let inner_url = inner.url("");
    let card: Value = reqwest::get(format!("{inner_url}/.well-known/agent-card.json"))
        .await
        .expect("the card is served")
        .json()
        .await
        .expect("the card is JSON");
    let tool = card["skills"][0]["id"].as_str().map_or_else(
        || "inner__send_message".to_owned(),
        |s| format!("inner__{s}"),
    );
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::ToolCalls(vec![(tool, json!({"message": "***SLEEP 4s asked once"}))]),
        Reply::Text("the inner agent answered".into()),
    ]);
    let dir = tempfile::tempdir().expect("a dir");
    let entry = format!("{{ type: a2a, url: \"{inner_url}\" }}");
    let outer = || {
        let path = dir.path().join("tasks.sqlite");
        runtime_with_server(&dir, &fake, "inner", &entry)
            .env("TASKS_DB", path.to_str().expect("utf-8"))
            .start()
    };
    let first = outer();
    let id = A2aClient::new(first.url("/"))
        .start_task("ask the inner agent")
        .await;
    first.wait_for_log(Duration::from_secs(20), |line| {
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains("noted the A2A task the call started"))
    });
    first.signal("KILL");
    drop(first);

    let second = outer();
    let task = ended(&A2aClient::new(second.url("/")), &id).await;
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "the inner agent answered",
        "{task}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the model was asked once per step");
    let results = requests[1].body["messages"].to_string();
    assert!(
        results.contains("asked once") && !results.contains("interrupted"),
        "the model reads the inner agent's answer: {results}"
    );
    let listed = A2aClient::new(inner.url("/"))
        .call("ListTasks", json!({}))
        .await;
    assert_eq!(
        listed["result"]["totalSize"], 1,
        "the inner agent got the message once: {listed}"
    );
}
