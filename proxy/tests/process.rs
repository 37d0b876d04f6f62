//! The `daedalus-proxy` binary as a child process: crashes, signals, a NATS restart, startup
//! refusals, and the `publish` command.

mod support;

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use daedalus_contract::TaskState;
use serde_json::json;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(30);

/// The proxy binary with a test environment.
fn proxy_command(agent: &str, nats: &NatsServer, runtime_url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"));
    command
        .env_clear()
        .env("AGENT_NAME", agent)
        .env("NATS_URL", nats.url())
        .env("RUNTIME_URL", runtime_url)
        .env("PROXY_PORT", "0")
        .env("PROXY_HOST", "127.0.0.1")
        .env("HEALTH_INTERVAL", "100ms")
        .env("PULL_EXPIRES", "1s")
        .env("RETRY_BASE_DELAY", "100ms")
        .env("STARTUP_TIMEOUT", "10s")
        .env("LOG_LEVEL", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Spawns and waits for the "consuming tasks" log line.
async fn spawn_consuming(mut command: Command) -> Child {
    let mut child = command.spawn().expect("the proxy starts");
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("consuming tasks") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the proxy did not start consuming");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running").to_string();
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

async fn exit_within(child: &mut Child, within: Duration) -> ExitStatus {
    tokio::time::timeout(within, child.wait())
        .await
        .expect("exited in time")
        .expect("waited")
}

async fn wait_for_call(fake: &FakeRuntime, task_id: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    while fake.calls_for(task_id) < n {
        assert!(
            Instant::now() < deadline,
            "the runtime never got call {n} of {task_id}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_proxy_killed_mid_task_leaves_it_to_another_and_one_result_exists() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut first = spawn_consuming({
        let mut c = proxy_command("crash", &nats, &fake.url);
        c.env("ACK_WAIT", "2s");
        c
    })
    .await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "crash",
        "m-1",
        task_body("m-1", Some("t-1"), "sleep:1500 survived"),
    )
    .await;
    wait_for_call(&fake, "t-1", 1).await;
    signal(&first, "KILL");
    let _ = first.wait().await;

    let mut config = proxy_config("crash", &nats.url(), &fake.url);
    config.ack_wait = Duration::from_secs(2);
    let second = Proxy::start(config).await;
    let found = wait_results(&js, "crash", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(results(&js, "crash").await.len(), 1, "exactly one result");
    assert_eq!(fake.calls_for("t-1"), 2, "the second proxy ran it again");
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn sigterm_mid_task_publishes_the_result_and_exits_zero() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut proxy = spawn_consuming({
        let mut c = proxy_command("term", &nats, &fake.url);
        c.env("TERMINATION_GRACE_PERIOD", "10s");
        c
    })
    .await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "term",
        "m-1",
        task_body("m-1", Some("t-1"), "sleep:1000 finished"),
    )
    .await;
    wait_for_call(&fake, "t-1", 1).await;
    let sent = Instant::now();
    signal(&proxy, "TERM");
    let status = exit_within(&mut proxy, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "exited within the grace period"
    );
    let found = results(&js, "term").await;
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].2.artifacts[0].parts[0].as_text(),
        Some("sleep:1000 finished")
    );
    assert_eq!(tasks_left(&js).await, 0);
}

#[tokio::test]
async fn a_task_longer_than_the_grace_period_is_handed_to_another_replica() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut leaving = spawn_consuming({
        let mut c = proxy_command("handover", &nats, &fake.url);
        c.env("TERMINATION_GRACE_PERIOD", "1s");
        c
    })
    .await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "handover",
        "m-1",
        task_body("m-1", Some("t-1"), "sleep:2500 done"),
    )
    .await;
    wait_for_call(&fake, "t-1", 1).await;
    let staying = Proxy::start(proxy_config("handover", &nats.url(), &fake.url)).await;
    signal(&leaving, "TERM");
    let status = exit_within(&mut leaving, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0));
    let found = wait_results(&js, "handover", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    assert_eq!(fake.calls_for("t-1"), 2, "the staying replica ran it");
    staying
        .wait_metric("daedalus_proxy_tasks_completed_total", 1)
        .await;
    staying.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_task_is_lost_when_nats_server_is_killed_and_restarted() {
    let mut nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("resilient", &nats.url(), &fake.url);
    config.ack_wait = Duration::from_secs(2);
    config.concurrency = 4;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    for i in 0..30 {
        publish(
            &js,
            "resilient",
            &format!("m-{i}"),
            task_body(&format!("m-{i}"), Some(&format!("t-{i}")), "sleep:150 x"),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    nats.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.restart();
    let (_client, js) = client(&nats).await;
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut ids = Vec::new();
    while Instant::now() < deadline {
        ids = results(&js, "resilient")
            .await
            .into_iter()
            .map(|(_, _, t)| t.id)
            .collect();
        ids.sort();
        ids.dedup();
        if ids.len() == 30 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(ids.len(), 30, "every task has a result");
    assert_eq!(tasks_left(&js).await, 0);
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_abandons_the_runtime_call_and_publishes_nothing() {
    let mut nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("lease", &nats.url(), &fake.url);
    config.ack_wait = Duration::from_secs(1);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "lease",
        "m-1",
        task_body("m-1", Some("t-1"), "sleep:4000 slow"),
    )
    .await;
    wait_for_call(&fake, "t-1", 1).await;
    nats.kill();
    // Progress acks cannot be confirmed now: within about an ack wait the lease is lost.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lost = metric(&proxy.metrics().await, "daedalus_proxy_leases_lost_total");
        if lost == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease was never declared lost"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        fake.calls()[0].ended.is_none(),
        "the runtime call was abandoned, not awaited"
    );
    nats.restart();
    let (_client, js) = client(&nats).await;
    let found = wait_results(&js, "lease", 1, WAIT).await;
    assert_eq!(found.len(), 1);
    assert_eq!(
        fake.calls_for("t-1"),
        2,
        "redelivered and run again after the restart"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        results(&js, "lease").await.len(),
        1,
        "the abandoned attempt published nothing"
    );
    proxy.shutdown().await.unwrap();
}

async fn startup_failure(fake: &FakeRuntime, nats: &NatsServer) -> (Option<i32>, String) {
    let mut c = proxy_command("refuse", nats, &fake.url);
    c.env("STARTUP_TIMEOUT", "1s");
    let out = tokio::time::timeout(WAIT, c.output())
        .await
        .expect("exits")
        .expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test]
async fn startup_refusals_exit_non_zero_and_say_why() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;

    fake.set_healthy(false);
    let (code, text) = startup_failure(&fake, &nats).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("did not finish waiting for the runtime's /health to answer 200"),
        "the deadline names the step: {text}"
    );
    assert!(text.contains("answered 503"), "and the last error: {text}");
    fake.set_healthy(true);

    *fake.state.card.lock().unwrap() =
        json!({"name": "x", "description": "d", "version": "1", "skills": []});
    let (code, text) = startup_failure(&fake, &nats).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("no skill"), "{text}");
    *fake.state.card.lock().unwrap() = json!({"name": "x", "description": "d", "version": "1",
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]});

    *fake.state.manifest.lock().unwrap() = Some(
        json!({"contractVersion": "v2", "runtime": {"name": "x", "version": "1"}, "conformanceLevel": 1}),
    );
    let (code, text) = startup_failure(&fake, &nats).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("implements contract v2"), "{text}");
}

#[test]
fn an_overflowing_duration_or_a_secret_url_is_handled_at_startup() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("AGENT_NAME", "a")
        .env(
            "ACK_WAIT",
            "153722867280912929m1hrs6148914691236517205333ms1281023894007607h",
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "exit 2, not a panic's 101");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ACK_WAIT"));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("AGENT_NAME", "a")
        .env("NATS_URL", "nats://user:hunter2@127.0.0.1:4222")
        .arg("--check-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("nats://***@127.0.0.1:4222"), "{printed}");

    // Connect attempts that fail, logged and in the final error: masked too.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("AGENT_NAME", "a")
        .env("NATS_URL", format!("nats://user:hunter2@{free}"))
        .env("STARTUP_TIMEOUT", "1s")
        .env("PROXY_PORT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let logs = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(logs.contains("cannot"), "{logs}");
    assert!(!logs.contains("hunter2"), "{logs}");
}

#[tokio::test]
async fn a_conflicting_consumer_is_a_startup_error() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let (_client, js) = client(&nats).await;
    let stream = js
        .create_stream(async_nats::jetstream::stream::Config {
            name: "AGENT_TASKS".into(),
            subjects: vec!["agent.tasks.>".into()],
            retention: async_nats::jetstream::stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .unwrap();
    stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("agent-refuse".into()),
            filter_subject: "agent.tasks.somebody-else".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let (code, text) = startup_failure(&fake, &nats).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("filters \\\"agent.tasks.somebody-else\\\""),
        "{text}"
    );
}

/// Runs `daedalus-proxy publish` with `args`.
async fn publish_command(
    nats: &NatsServer,
    args: &[&str],
    stdin: Option<&str>,
) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"));
    command
        .env_clear()
        .env("NATS_URL", nats.url())
        .arg("publish")
        .args(args);
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("publish runs");
    if let Some(text) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut pipe = child.stdin.take().expect("piped");
        pipe.write_all(text.as_bytes())
            .await
            .expect("stdin written");
        drop(pipe);
    }
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("exits")
        .expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_waits_for_the_result_and_exits_by_its_state() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("pub").await;
    let proxy = Proxy::start(proxy_config("pub", &nats.url(), &runtime)).await;

    let (code, out, err) =
        publish_command(&nats, &["--agent", "pub", "--json", "hello there"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let task: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello there");

    let (code, out, err) = publish_command(
        &nats,
        &[
            "--agent",
            "pub",
            "--task-id",
            "ask-1",
            "***INPUT Which branch?",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        out.contains("input-required") && out.contains("Which branch?"),
        "{out}"
    );
    let (code, out, _) = publish_command(
        &nats,
        &["--agent", "pub", "--task-id", "ask-1", "main"],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "answering continues the task: {out}");
    assert!(out.contains("task ask-1  completed"), "{out}");

    let (code, out, _) =
        publish_command(&nats, &["--agent", "pub", "***FAIL out of cheese"], None).await;
    assert_eq!(code, Some(1));
    assert!(
        out.contains("failed") && out.contains("out of cheese"),
        "{out}"
    );

    let (code, out, _) = publish_command(&nats, &["--agent", "pub"], Some("from stdin\n")).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("from stdin"), "{out}");

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), r#"{"message":{"messageId":"file-1","taskId":"file-task","role":"user","parts":[{"text":"from a file"}]}}"#).unwrap();
    let path = file.path().to_str().unwrap();
    let (code, out, _) = publish_command(
        &nats,
        &["--agent", "pub", "--json-file", path, "--json"],
        None,
    )
    .await;
    assert_eq!(code, Some(0));
    assert!(out.contains("\"file-task\""), "{out}");

    let (code, out, _) = publish_command(
        &nats,
        &["--agent", "pub", "--no-wait", "fire and forget"],
        None,
    )
    .await;
    assert_eq!(code, Some(0));
    assert!(out.starts_with("published task"), "{out}");
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_starts_or_continues_a_trace_that_reaches_the_runtime() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let proxy = Proxy::start(proxy_config("traced", &nats.url(), &fake.url)).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let given = format!("00-{trace}-00f067aa0ba902b7-01");

    let (code, _, err) = publish_command(
        &nats,
        &[
            "--agent",
            "traced",
            "--task-id",
            "t-given",
            "--traceparent",
            &given,
            "hi",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("trace {trace}")),
        "the trace id is printed: {err}"
    );
    let (code, _, err) = publish_command(
        &nats,
        &["--agent", "traced", "--task-id", "t-new", "hi"],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let started = err
        .lines()
        .find_map(|l| l.strip_prefix("trace "))
        .expect("a trace id is printed")
        .to_owned();
    assert_eq!(started.len(), 32);
    assert_ne!(started, trace, "a new trace");

    // The runtime sees each task in its publisher's trace (through the proxy's span).
    let trace_of = |task: &str| {
        let call = fake
            .calls()
            .into_iter()
            .find(|c| c.task_id == task)
            .expect("the task reached the runtime");
        let traceparent = call.traceparent.expect("with a traceparent");
        traceparent
            .split('-')
            .nth(1)
            .expect("a trace id")
            .to_owned()
    };
    assert_eq!(trace_of("t-given"), trace);
    assert_eq!(trace_of("t-new"), started);

    let (code, _, err) = publish_command(
        &nats,
        &["--agent", "traced", "--traceparent", "00-nope-01", "hi"],
        None,
    )
    .await;
    assert_eq!(
        code,
        Some(2),
        "a malformed --traceparent is a usage error: {err}"
    );
    assert!(err.contains("--traceparent"), "{err}");
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_exports_its_spans_in_the_publishers_trace() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let receiver = daedalus_test_kit::OtlpReceiver::start().await;
    let mut command = proxy_command("spans", &nats, &fake.url);
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_SERVICE_NAME", "proxy-under-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let mut proxy = spawn_consuming(command).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let publisher_span = "00f067aa0ba902b7";
    let (code, _, err) = publish_command(
        &nats,
        &[
            "--agent",
            "spans",
            "--task-id",
            "t-spans",
            "--traceparent",
            &format!("00-{trace}-{publisher_span}-01"),
            "hi",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    signal(&proxy, "TERM");
    assert!(exit_within(&mut proxy, WAIT).await.success());

    // Flushed at shutdown: the task span under the publisher's, its two children under it.
    let spans = receiver.spans();
    let named = |prefix: &str| {
        spans
            .iter()
            .find(|s| s.name.starts_with(prefix))
            .unwrap_or_else(|| panic!("a {prefix:?} span in {spans:?}"))
            .clone()
    };
    let task = named("process agent.tasks.spans");
    // The A2A client span of the send (`SendMessage`, or `SendStreamingMessage`).
    let call = named("Send");
    assert_eq!(call.attribute("a2a.method.name"), Some(call.name.as_str()));
    assert_eq!(call.attribute("a2a.task.id"), Some("t-spans"));
    let result = named("publish agent.results.spans");
    for span in [&task, &call, &result] {
        assert_eq!(span.trace_id, trace, "{span:?}");
        assert_eq!(span.service, "proxy-under-test");
    }
    assert_eq!(
        task.parent_span_id, publisher_span,
        "a child of the publisher's span"
    );
    assert_eq!(call.parent_span_id, task.span_id);
    assert_eq!(result.parent_span_id, task.span_id);
    assert_eq!(task.attribute("messaging.system"), Some("nats"));
    // The runtime got the runtime call's span as its parent.
    let seen = fake
        .calls()
        .into_iter()
        .find(|c| c.task_id == "t-spans")
        .and_then(|c| c.traceparent)
        .expect("the runtime got a traceparent");
    assert_eq!(seen, format!("00-{trace}-{}-01", call.span_id));
}

#[tokio::test]
async fn publish_times_out_with_exit_one_when_nobody_answers() {
    let nats = NatsServer::start();
    let (code, _, err) = publish_command(
        &nats,
        &["--agent", "nobody", "--timeout", "1s", "anyone?"],
        None,
    )
    .await;
    assert_eq!(code, Some(1));
    assert!(err.contains("no result for task"), "{err}");
}

/// `daedalus-proxy healthcheck` against `PROXY_PORT=port`.
fn healthcheck(port: u16) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("PROXY_PORT", port.to_string())
        .arg("healthcheck")
        .output()
        .expect("the healthcheck runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_exits_zero_while_the_proxy_is_healthy_and_one_once_it_is_gone() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let port = daedalus_test_kit::free_port();
    let mut proxy = spawn_consuming({
        let mut c = proxy_command("hc", &nats, &fake.url);
        c.env("PROXY_PORT", port.to_string());
        c
    })
    .await;
    let healthy = healthcheck(port);
    assert!(healthy.status.success(), "{healthy:?}");

    signal(&proxy, "TERM");
    assert_eq!(exit_within(&mut proxy, WAIT).await.code(), Some(0));
    let gone = healthcheck(port);
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(said.contains("cannot connect"), "{said}");
}

/// The contract crate's test key `name`.
fn test_key(name: &str) -> daedalus_contract::card_signing::SigningKey {
    let path = format!(
        "{}/../schemas/tests/card_keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    daedalus_contract::card_signing::SigningKey::read(
        &std::fs::read(path).expect("a test key"),
        Some("runtime-key"),
        None,
    )
    .expect("the test key reads")
}

#[tokio::test]
async fn with_runtime_card_keys_the_proxy_starts_only_on_a_card_signed_by_one_of_them() {
    use daedalus_contract::card_signing::{jwks, sign_card};
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let trusted = test_key("es256.pem");
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("runtime.jwks.json");
    std::fs::write(&keys, serde_json::to_vec(&jwks(&[&trusted])).unwrap()).unwrap();
    let unsigned = fake.state.card.lock().unwrap().clone();
    let refused = |card: serde_json::Value| {
        *fake.state.card.lock().unwrap() = card;
        let mut c = proxy_command("signed", &nats, &fake.url);
        c.env("STARTUP_TIMEOUT", "1s")
            .env("RUNTIME_CARD_KEYS", &keys);
        async move {
            let out = tokio::time::timeout(WAIT, c.output())
                .await
                .expect("exits")
                .expect("runs");
            assert_eq!(out.status.code(), Some(1));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let text = refused(unsigned.clone()).await;
    assert!(
        text.contains("RUNTIME_CARD_KEYS") && text.contains("not signed"),
        "{text}"
    );
    let by_another = sign_card(&unsigned, &[&test_key("ed25519.pem")]).unwrap();
    let text = refused(by_another).await;
    assert!(
        text.contains("RUNTIME_CARD_KEYS") && text.contains("runtime-key"),
        "{text}"
    );

    *fake.state.card.lock().unwrap() = sign_card(&unsigned, &[&trusted]).unwrap();
    let mut command = proxy_command("signed", &nats, &fake.url);
    command.env("RUNTIME_CARD_KEYS", &keys);
    let mut proxy = spawn_consuming(command).await;
    signal(&proxy, "TERM");
    assert!(exit_within(&mut proxy, WAIT).await.success());
}
