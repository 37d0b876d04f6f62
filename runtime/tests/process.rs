//! The real `daedalus-runtime` binary as a child process: startup, logs, limits, and the
//! SIGTERM/SIGINT sequence of the contract.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::process::runtime;

mod support;

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "user", "parts": [{"text": text}]}})
}

async fn post(client: &reqwest::Client, rt_url: &str, body: &Value) -> (u16, Value) {
    let response = client
        .post(rt_url)
        .json(body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

#[tokio::test]
async fn serves_the_contract_and_logs_json_lines() {
    let rt = runtime().start();
    let client = reqwest::Client::new();
    let health = client.get(rt.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let (status, task) = post(&client, &rt.url("/"), &message("m-1", "hello")).await;
    assert_eq!(status, 200);
    assert_eq!(task["id"], "m-1");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello");
    drop(client);
    let logs = rt.drain_logs();
    assert!(
        logs.iter()
            .any(|l| l["message"] == "task finished" && l["task_id"] == "m-1"),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
}

#[tokio::test]
async fn the_log_lines_of_a_turn_carry_the_callers_trace_id() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const CALLER_SPAN: &str = "00f067aa0ba902b7";
    let rt = runtime().start();
    let response = reqwest::Client::new()
        .post(rt.url("/"))
        .header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .json(&message("m-traced", "hello"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let logs = rt.drain_logs();
    let traced: Vec<&Value> = logs
        .iter()
        .filter(|l| l["span"]["trace_id"] == TRACE)
        .collect();
    for message in ["task started", "task finished"] {
        assert!(
            traced.iter().any(|l| l["message"] == message),
            "{message:?} carries the trace id: {logs:?}"
        );
    }
    let span_id = traced[0]["span"]["span_id"].as_str().expect("a span id");
    assert_eq!(span_id.len(), 16);
    assert_ne!(span_id, CALLER_SPAN, "the turn's own span");
}

#[tokio::test]
async fn sigterm_lets_in_flight_tasks_finish_refuses_new_ones_and_exits_zero() {
    let mut rt = runtime().env("TERMINATION_GRACE_PERIOD", "10s").start();
    let client = reqwest::Client::new();
    let slow = tokio::spawn({
        let (client, url) = (client.clone(), rt.url("/"));
        async move { post(&client, &url, &message("slow", "***SLEEP 1s finished")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    rt.signal("TERM");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (status, body) = post(&client, &rt.url("/"), &message("late", "x")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], 503);
    let health = client.get(rt.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 503);

    let (status, task) = slow.await.unwrap();
    assert_eq!(
        (status, task["status"]["state"].as_str()),
        (200, Some("completed"))
    );
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "finished");
    let exit = rt.wait_exit(Duration::from_secs(8));
    assert_eq!(exit.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "drained in {:?}",
        started.elapsed()
    );
    // The 503s it sent on purpose while draining are not errors.
    let errors: Vec<_> = rt
        .drain_logs()
        .into_iter()
        .filter(|l| l["level"] == "ERROR")
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test]
async fn tasks_outliving_the_grace_period_are_canceled_with_503_then_exit_zero() {
    let mut rt = runtime().env("TERMINATION_GRACE_PERIOD", "500ms").start();
    let client = reqwest::Client::new();
    let stuck = tokio::spawn({
        let (client, url) = (client.clone(), rt.url("/"));
        async move { post(&client, &url, &message("stuck", "***SLEEP 1h")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    rt.signal("INT");
    let (status, body) = stuck.await.unwrap();
    assert_eq!(
        status, 503,
        "a canceled task is retryable elsewhere: {body}"
    );
    assert_eq!(rt.wait_exit(Duration::from_secs(8)).code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let mut rt = runtime().env("TERMINATION_GRACE_PERIOD", "1h").start();
    let client = reqwest::Client::new();
    let _stuck = tokio::spawn({
        let (client, url) = (client.clone(), rt.url("/"));
        async move {
            client
                .post(url)
                .json(&message("stuck", "***SLEEP 1h"))
                .send()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    rt.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        rt.child.try_wait().unwrap().is_none(),
        "still draining after one signal"
    );
    rt.signal("TERM");
    let exit = rt.wait_exit(Duration::from_secs(3));
    assert_eq!(exit.code(), Some(130));
}

#[tokio::test]
async fn a_client_that_sends_an_oversized_body_whole_still_reads_the_413() {
    // Clients without `Expect: 100-continue` write the whole body before reading; refusing
    // early and closing would hand them a broken pipe instead of the 413.
    let rt = runtime().env("MAX_BODY_SIZE", "1KiB").start();
    let body = json!({"message": {"messageId": "big", "role": "user",
        "parts": [{"text": "x".repeat(4 * 1024 * 1024)}]}});
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let (status, error) = post(&client, &rt.url("/"), &body).await;
        assert_eq!(status, 413, "{error}");
        assert_eq!(error["error"]["code"], 413);
    }
}

/// Writes `requests` on one connection at once and reads until the server closes it or
/// `answers` responses have arrived; returns everything read.
fn pipelined(addr: std::net::SocketAddr, requests: &[u8], answers: usize) -> String {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.write_all(requests).expect("writes");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("sets a timeout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 16_384];
    loop {
        let text = String::from_utf8_lossy(&seen);
        if text.matches("HTTP/1.1 ").count() >= answers && text.ends_with('}') {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) => panic!("the server neither answered nor closed: {e}; read so far: {text}"),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn a_pipelined_request_after_a_415_with_a_body_is_answered() {
    let rt = runtime().start();
    let body = "x".repeat(64 * 1024);
    let requests = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}\
         GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        body.len()
    );
    let answers = pipelined(rt.addr, requests.as_bytes(), 2);
    assert!(answers.starts_with("HTTP/1.1 415"), "{answers}");
    assert!(
        answers.contains("HTTP/1.1 200"),
        "the second request was answered: {answers}"
    );
}

#[test]
fn an_early_error_that_leaves_a_body_unread_closes_the_connection() {
    let rt = runtime().start();
    let body = "x".repeat(64 * 1024);
    // A body on a path with no handler: nothing reads it.
    let requests = format!(
        "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}\
         GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        body.len()
    );
    let answers = pipelined(rt.addr, requests.as_bytes(), 2);
    assert!(answers.starts_with("HTTP/1.1 40"), "{answers}");
    let second_in_step = answers.contains("HTTP/1.1 200");
    let closed = answers.to_ascii_lowercase().contains("connection: close");
    assert!(
        second_in_step || closed,
        "either the body was skipped and the next request answered, or the connection closed: {answers}"
    );
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let rt = runtime().env("HEADER_READ_TIMEOUT", "300ms").start();
    let mut stream = TcpStream::connect(rt.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = Vec::new();
    let read = stream.read_to_end(&mut buf);
    assert!(
        matches!(read, Ok(0)),
        "the server closed the silent connection (rather than our read timing out): {read:?}"
    );
}

#[test]
fn connections_past_max_connections_are_answered_503_at_once_not_left_waiting() {
    let rt = runtime().env("MAX_CONNECTIONS", "1").start();
    let request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    let work = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut first = TcpStream::connect(rt.addr).unwrap();
    first.write_all(request).unwrap();
    let mut buf = [0u8; 4096];
    let n = first.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The first connection stays open (keep-alive) and holds the only slot: the next ones are
    // answered, 503 with Retry-After, and closed.
    for _ in 0..3 {
        let mut over = TcpStream::connect(rt.addr).unwrap();
        over.write_all(work).unwrap();
        over.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut answer = String::new();
        over.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("Retry-After: 1"), "{answer}");
        assert!(answer.contains("MAX_CONNECTIONS"), "{answer}");
    }
    // A probe is never starved: served, one request, and closed.
    let mut probe = TcpStream::connect(rt.addr).unwrap();
    probe.write_all(request).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    probe.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(first);
    // The slot is free again: a new connection is served.
    let served = (0..100).any(|_| {
        let mut next = TcpStream::connect(rt.addr).unwrap();
        next.write_all(request).unwrap();
        let n = next.read(&mut buf).unwrap_or(0);
        if String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
        false
    });
    assert!(served, "served once the slot was free");
}

/// A line of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

#[tokio::test]
async fn sixty_distinct_8_mib_tasks_keep_the_process_under_256_mib() {
    let rt = runtime().start();
    let client = reqwest::Client::new();
    let filler = "x".repeat(8 * 1024 * 1024 - 2);
    for i in 0..60 {
        // Built by hand: the test measures the runtime, not a debug-build JSON encoder.
        let body = format!(
            r#"{{"message":{{"messageId":"big-{i}","role":"user","parts":[{{"text":"{i:02}{filler}"}}]}}}}"#
        );
        let response = client
            .post(rt.url("/"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        let bytes = response.bytes().await.expect("the answer");
        assert!(bytes.len() > 8 * 1024 * 1024, "the echo came back");
    }
    let rss = proc_status_kib(rt.child.id(), "VmRSS");
    let peak = proc_status_kib(rt.child.id(), "VmHWM");
    eprintln!("after 60 tasks of 8 MiB: RSS {rss} KiB, peak {peak} KiB");
    assert!(rss < 256 * 1024, "RSS {rss} KiB after 60 tasks of 8 MiB");
    assert!(
        peak < 256 * 1024,
        "peak RSS {peak} KiB during 60 tasks of 8 MiB"
    );
}

#[test]
fn slow_headers_are_cut_off() {
    let rt = runtime().env("HEADER_READ_TIMEOUT", "300ms").start();
    let mut stream = TcpStream::connect(rt.addr).unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "connection held {:?}",
        started.elapsed()
    );
}

#[test]
fn check_config_prints_the_resolved_configuration() {
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .env("AGENT_NAME", "checked")
        .env("TERMINATION_GRACE_PERIOD", "2m")
        .arg("--check-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["agent"]["name"], "checked");
    assert_eq!(config["termination_grace_period"], "2m");
}

#[test]
fn a_bad_configuration_stops_startup_naming_the_key() {
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .env("AGENT_NAME", "has space")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AGENT_NAME"), "{stderr}");
}

#[test]
fn an_overflowing_duration_exits_2_naming_the_key_not_101() {
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .env(
            "REQUEST_TIMEOUT",
            "153722867280912929m1hrs6148914691236517205333ms1281023894007607h",
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("REQUEST_TIMEOUT"), "{stderr}");
}

/// Two agents on the strict fake LLM: `coordinator` delegates to `researcher` in-process.
fn delegating_deployment(dir: &std::path::Path, fake: &daedalus_fake_llm::FakeLlm) -> String {
    let path = dir.join("agents.yaml");
    std::fs::write(
        &path,
        format!(
            "default_model: openai.gpt-crash\nopenai: {{ api_key: sk-crash, base_url: \"{}\" }}\n\
             agents:\n  coordinator: {{ instruction: Coordinate., servers: [researcher] }}\n  \
             researcher: {{ instruction: Research. }}\n",
            fake.openai_base_url
        ),
    )
    .expect("written");
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_killed_mid_loop_restarts_with_the_half_turn_marked_error_and_the_context_usable()
{
    use daedalus_fake_llm::{FakeLlm, Reply};
    use daedalus_runtime::stores::conversations::{ConversationStore, RowStatus, SqliteStore};

    let fake = FakeLlm::start("sk-crash", &["gpt-crash"]).await;
    fake.script([
        Reply::Text("Hi.".into()),
        Reply::ToolCalls(vec![(
            "researcher__send_message".into(),
            json!({"message": "look it up"}),
        )]),
        Reply::Text("Found it.".into()),
        // The coordinator's next turn never answers: the runtime is killed while it waits.
        Reply::Delayed(
            Duration::from_mins(2),
            Box::new(Reply::Text("never".into())),
        ),
        Reply::Text("Fresh start.".into()),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = delegating_deployment(dir.path(), &fake);
    let db = dir.path().join("sessions.sqlite");
    let db = db.to_string_lossy().into_owned();
    let start = || {
        runtime()
            .env("AGENTS_CONFIG", &config)
            .env("AGENT_NAME", "coordinator")
            .env("SESSIONS_DB", &db)
            .start()
    };
    let client = reqwest::Client::new();
    let in_context = |id: &str, text: &str| {
        json!({"message": {"messageId": id, "contextId": "ctx-crash", "role": "user",
                           "parts": [{"text": text}]}})
    };

    let first = start();
    let (status, _) = post(&client, &first.url("/"), &in_context("m-1", "Hello.")).await;
    assert_eq!(status, 200);
    let url = first.url("/");
    let doomed = tokio::spawn({
        let client = client.clone();
        let body = in_context("m-2", "Research this.");
        async move { client.post(url).json(&body).send().await }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while fake.requests().len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the loop reached its third model call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first); // SIGKILL mid-loop: no drain, no settling.
    assert!(
        doomed.await.expect("joined").is_err(),
        "the connection died"
    );

    let second = start();
    let store = SqliteStore::open(&db).expect("the store opens beside the runtime");
    let rows = store.rows("ctx-crash", usize::MAX).await.expect("rows");
    let statuses: Vec<(String, RowStatus)> =
        rows.iter().map(|r| (r.content.clone(), r.status)).collect();
    assert_eq!(
        statuses[..2],
        [
            ("Hello.".to_owned(), RowStatus::Complete),
            ("Hi.".to_owned(), RowStatus::Complete)
        ]
    );
    assert!(
        rows.len() >= 4 && rows[2..].iter().all(|r| r.status == RowStatus::Error),
        "the interrupted turn (user, tool call, tool result) is error: {statuses:?}"
    );

    let (status, task) = post(&client, &second.url("/"), &in_context("m-3", "Again.")).await;
    assert_eq!(status, 200, "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Fresh start.");
    let sent = fake.requests()[4].body["messages"].clone();
    assert_eq!(
        sent,
        json!([
            {"role": "system", "content": "Coordinate."},
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "Again."}
        ]),
        "the interrupted turn is left out; no tool call without its result"
    );
}

/// `daedalus-runtime healthcheck` against `A2A_PORT=port`.
fn healthcheck(port: u16) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .env("A2A_PORT", port.to_string())
        .arg("healthcheck")
        .output()
        .expect("the healthcheck runs")
}

#[tokio::test]
async fn healthcheck_exits_zero_while_ready_and_one_when_draining_or_gone() {
    let mut rt = runtime().env("TERMINATION_GRACE_PERIOD", "10s").start();
    let port = rt.addr.port();
    let healthy = healthcheck(port);
    assert!(healthy.status.success(), "{healthy:?}");

    let client = reqwest::Client::new();
    let url = rt.url("/");
    let slow =
        tokio::spawn(
            async move { post(&client, &url, &message("slow-hc", "***SLEEP 2s done")).await },
        );
    tokio::time::sleep(Duration::from_millis(300)).await;
    rt.signal("TERM");
    let draining = daedalus_test_kit::wait_until_some(
        "the healthcheck fails while draining",
        Duration::from_secs(5),
        || async move {
            let out = healthcheck(port);
            (out.status.code() == Some(1)).then_some(out)
        },
    )
    .await;
    assert!(
        String::from_utf8_lossy(&draining.stderr).contains("503"),
        "{draining:?}"
    );
    assert_eq!(slow.await.expect("the client ran").0, 200);
    assert_eq!(rt.wait_exit(Duration::from_secs(10)).code(), Some(0));
    let gone = healthcheck(port);
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
}

#[tokio::test]
async fn pallas_log_file_gets_the_json_lines_too() {
    let dir = tempfile::tempdir().expect("a dir");
    let file = dir.path().join("logs/runtime.log");
    let rt = runtime()
        .env("PALLAS_LOG_FILE", file.to_str().expect("utf-8"))
        .start();
    let (status, _) = post(
        &reqwest::Client::new(),
        &rt.url("/"),
        &message("m-file", "hi"),
    )
    .await;
    assert_eq!(status, 200);
    let text = std::fs::read_to_string(&file).expect("the log file exists");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(
        lines.iter().any(|l| l["message"] == "runtime ready"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "task finished" && l["task_id"] == "m-file"),
        "{text}"
    );
}

/// `migrate-module` on `module` (under `tests/modules`): its stdout and stderr.
fn migrate(module: &str) -> (String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/modules")
        .join(module);
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .arg("migrate-module")
        .arg(&path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--check-config` in a Pallas layout: `agents` as migrated, the servers in
/// fastagent.config.yaml.
fn check_config(agents_yaml: &str, servers: &[&str], serve: &str) -> Value {
    let dir = tempfile::tempdir().expect("a dir");
    std::fs::write(dir.path().join("agents.yaml"), agents_yaml).expect("written");
    let servers: String = servers.iter().fold(String::new(), |mut out, s| {
        use std::fmt::Write as _;
        let _ = writeln!(out, "    {s}: {{ url: \"http://127.0.0.1:1/{s}\" }}");
        out
    });
    std::fs::write(
        dir.path().join("fastagent.config.yaml"),
        format!("mcp:\n  servers:\n{servers}"),
    )
    .expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-runtime"))
        .env_clear()
        .current_dir(dir.path())
        .env("AGENT_NAME", serve)
        .arg("--check-config")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{agents_yaml}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the configuration as JSON")
}

#[test]
fn a_migrated_module_is_a_deployment_check_config_accepts() {
    let (yaml, review) = migrate("research_team.py");
    let config = check_config(&yaml, &["search", "fetch"], "researcher");
    let agents = config["deployment"]["agents"].as_array().expect("agents");
    let researcher = agents
        .iter()
        .find(|a| a["name"] == "researcher")
        .expect("researcher");
    assert_eq!(
        researcher["instruction"],
        "You research questions with the search tools.\nCite every source you use."
    );
    assert_eq!(researcher["max_iterations"], 12);
    assert_eq!(researcher["request_params"]["max_tokens"], 4096);
    let editor = agents
        .iter()
        .find(|a| a["name"] == "editor")
        .expect("editor");
    assert_eq!(
        editor["instruction"],
        "You edit drafts for clarity and tone."
    );
    assert!(
        review.contains("editor: use_history is not carried over"),
        "{review}"
    );

    let (yaml, review) = migrate("support_desk.py");
    assert!(yaml.contains("FILL IN"), "{yaml}");
    for unread in [
        "triage: instruction is not a literal (TRIAGE_PROMPT)",
        "triage: servers is not a literal (TOOLS)",
        "triage: model is not a literal",
        "triage: request_params is not a literal",
        "kb_writer: instruction is not a literal",
    ] {
        assert!(review.contains(unread), "{unread} in {review}");
    }
    let config = check_config(&yaml, &["kb"], "triage");
    assert_eq!(
        config["deployment"]["agents"].as_array().map(Vec::len),
        Some(2)
    );
}
