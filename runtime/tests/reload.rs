//! SIGHUP reloads the deployment file, against the real binary: agents added appear in the
//! registry and answer over MCP, agents removed answer 404 and leave the registry, a turn in
//! flight finishes, an unchanged agent keeps its MCP session, ports follow the agents that own
//! them, and a bad file is refused with a log line naming the key while the old deployment
//! keeps serving.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use daedalus_runtime::config::ConfigError;
use daedalus_test_kit::{free_port, runtime_config, wait_until};
use serde_json::{Value, json};
use support::mcp_client::{call, connect, text};
use support::process::{self, Runtime};

/// How long a reload may take to show.
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

/// A deployment directory whose `agents.yaml` the test rewrites.
struct DeploymentFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl DeploymentFile {
    fn new(yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("agents.yaml");
        let file = Self { _dir: dir, path };
        file.write(yaml);
        file
    }

    fn write(&self, yaml: &str) {
        std::fs::write(&self.path, yaml).expect("agents.yaml written");
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// `agents.yaml` with passthrough agents, each `(name, extra keys)`.
fn agents(list: &[(&str, &str)]) -> String {
    use std::fmt::Write as _;
    let mut yaml = String::from("name: lab\nhost: 127.0.0.1\nagents:\n");
    for (name, extra) in list {
        let _ = writeln!(yaml, "  {name}: {{ description: agent {name} {extra} }}");
    }
    yaml
}

fn start(file: &DeploymentFile) -> Runtime {
    process::runtime()
        .env("AGENTS_CONFIG", &file.path().display().to_string())
        .env("AGENT_NAME", "alpha")
        .start()
}

/// The agent names the registry lists (the part after the namespace).
async fn registry_names(url: &str) -> Vec<String> {
    let doc: Value = reqwest::get(url)
        .await
        .expect("the registry answers")
        .json()
        .await
        .expect("JSON");
    doc["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .filter_map(|s| s["server"]["name"].as_str())
        .map(|n| n.rsplit('/').next().unwrap_or(n).to_owned())
        .collect()
}

/// The agent card the A2A face serves now.
async fn agent_card(rt: &Runtime) -> Value {
    reqwest::get(rt.url("/.well-known/agent-card.json"))
        .await
        .expect("the card answers")
        .json()
        .await
        .expect("JSON")
}

async fn wait_for_registry(rt: &Runtime, want: &[&str]) {
    let url = rt.url("/.well-known/mcp/server.json");
    let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    wait_until(
        &format!("the registry lists exactly {want:?}"),
        RELOAD_WITHIN,
        || {
            let url = url.clone();
            let want = want.clone();
            async move { registry_names(&url).await == want }
        },
    )
    .await;
}

/// POSTs an MCP `initialize` to `url`.
async fn initialize(url: &str) -> reqwest::Result<reqwest::Response> {
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "reload-test", "version": "1"}
            }
        }))
        .send()
        .await
}

/// The status `initialize` gets at `url` (0 when nothing answers).
async fn initialize_status(url: &str) -> u16 {
    initialize(url).await.map_or(0, |r| r.status().as_u16())
}

/// Opens an MCP session on `url` by hand: its `mcp-session-id`.
async fn open_session(url: &str) -> String {
    let init = initialize(url).await.expect("initialize answered");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let initialized = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized answered");
    assert!(initialized.status().is_success(), "{initialized:?}");
    session
}

/// The status and body of `tools/list` in `session`.
async fn list_tools(url: &str, session: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .expect("tools/list answered");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

async fn post_task(url: String, id: &str, text: &str) -> Value {
    reqwest::Client::new()
        .post(&url)
        .json(&json!({"message": {"messageId": id, "role": "user", "parts": [{"text": text}]}}))
        .send()
        .await
        .expect("POST / answered")
        .json()
        .await
        .expect("a task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_adds_and_removes_agents_while_a_turn_and_a_session_carry_on() {
    let file = DeploymentFile::new(&agents(&[("alpha", "")]));
    let rt = start(&file);
    wait_for_registry(&rt, &["alpha"]).await;
    let beta = rt.url("/agents/beta/mcp");
    assert_eq!(
        initialize_status(&beta).await,
        404,
        "beta is not served yet"
    );

    let alpha = rt.url("/agents/alpha/mcp");
    let alpha_session = open_session(&alpha).await;
    assert_eq!(list_tools(&alpha, &alpha_session).await.0, 200);
    let slow = tokio::spawn(post_task(rt.url("/"), "slow-1", "***SLEEP 2s survived"));

    file.write(&agents(&[("alpha", ""), ("beta", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha", "beta"]).await;

    let (beta_session, _) = connect(&beta, None).await;
    let answer = call(&beta_session, "send_message", json!({"message": "hi beta"})).await;
    assert_eq!(text(&answer), "hi beta", "{answer:?}");
    assert_eq!(
        list_tools(&alpha, &alpha_session).await.0,
        200,
        "an unchanged agent keeps its sessions across a reload"
    );

    // A changed agent: its old sessions are gone (404: open a new one), the new one shows
    // the change.
    file.write(&agents(&[("alpha", "renewed"), ("beta", "")]));
    rt.signal("HUP");
    wait_until("alpha's old session ends", RELOAD_WITHIN, || {
        let (alpha, session) = (alpha.clone(), alpha_session.clone());
        async move { list_tools(&alpha, &session).await.0 == 404 }
    })
    .await;
    let renewed = open_session(&alpha).await;
    let (status, tools) = list_tools(&alpha, &renewed).await;
    assert_eq!(status, 200);
    assert!(tools.contains("agent alpha renewed"), "{tools}");
    let card = agent_card(&rt).await;
    assert_eq!(card["description"], "agent alpha renewed", "{card}");

    file.write(&agents(&[("alpha", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha"]).await;
    assert_eq!(initialize_status(&beta).await, 404, "beta is gone");

    let task = slow.await.expect("the slow task's client ran");
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "survived",
        "{task}"
    );
    let task = post_task(rt.url("/"), "after-reloads", "still here").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_is_refused_naming_the_key_and_the_old_agents_keep_serving() {
    let file = DeploymentFile::new(&agents(&[("alpha", ""), ("beta", "")]));
    let rt = start(&file);
    wait_for_registry(&rt, &["alpha", "beta"]).await;

    file.write("name: lab\nagents:\n  alpha: {}\n  beta: { model: nope.x }\n");
    rt.signal("HUP");
    let refused = rt.wait_for_log(RELOAD_WITHIN, |l| {
        l["message"] == "reload refused; the running deployment keeps serving"
    });
    let error = refused["error"]
        .as_str()
        .expect("the refusal names its error");
    assert!(error.contains("agents.beta.model"), "{refused}");
    assert_eq!(refused["level"], "ERROR", "{refused}");

    wait_for_registry(&rt, &["alpha", "beta"]).await;
    let (beta_session, _) = connect(&rt.url("/agents/beta/mcp"), None).await;
    let answer = call(&beta_session, "send_message", json!({"message": "still"})).await;
    assert_eq!(text(&answer), "still");
    let task = post_task(rt.url("/"), "after-refusal", "ok").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");

    // A refusal leaves reloading working.
    file.write(&agents(&[("alpha", ""), ("gamma", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha", "gamma"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_own_port_opens_with_it_and_closes_when_it_goes() {
    let file = DeploymentFile::new(&agents(&[("alpha", "")]));
    let rt = start(&file);
    wait_for_registry(&rt, &["alpha"]).await;

    let port = free_port();
    // Agents on their own ports get a registry (24200 unless named): a free one here.
    let registry = format!("registry_port: {}\n", free_port());
    file.write(
        &(registry.clone() + &agents(&[("alpha", ""), ("beta", &format!(", port: {port}"))])),
    );
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha", "beta"]).await;
    let own = format!("http://127.0.0.1:{port}/mcp");
    let (session, _) = connect(&own, None).await;
    let answer = call(&session, "send_message", json!({"message": "own port"})).await;
    assert_eq!(text(&answer), "own port");

    // A port someone else holds refuses the reload, naming the setting.
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let taken_port = taken.local_addr().expect("addr").port();
    file.write(
        &(registry.clone()
            + &agents(&[
                ("alpha", ""),
                ("beta", &format!(", port: {port}")),
                ("gamma", &format!(", port: {taken_port}")),
            ])),
    );
    rt.signal("HUP");
    let refused = rt.wait_for_log(RELOAD_WITHIN, |l| {
        l["message"] == "reload refused; the running deployment keeps serving"
    });
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("agents.gamma.port")),
        "{refused}"
    );
    wait_for_registry(&rt, &["alpha", "beta"]).await;
    drop(taken);

    file.write(&agents(&[("alpha", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha"]).await;
    wait_until("beta's own port is closed", RELOAD_WITHIN, || {
        let own = own.clone();
        async move { initialize_status(&own).await == 0 }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_agent_name_an_added_top_level_agent_leaves_the_contract_face_where_it_was() {
    let file = DeploymentFile::new(&agents(&[("alpha", "")]));
    let rt = process::runtime()
        .env("AGENTS_CONFIG", &file.path().display().to_string())
        .env_remove("AGENT_NAME")
        .start();
    wait_for_registry(&rt, &["alpha"]).await;

    file.write(&agents(&[("alpha", ""), ("beta", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["alpha", "beta"]).await;
    let card = agent_card(&rt).await;
    assert_eq!(card["name"], "alpha", "{card}");

    // Its agent gone and one top-level agent left, the A2A face serves that one.
    file.write(&agents(&[("beta", "")]));
    rt.signal("HUP");
    wait_for_registry(&rt, &["beta"]).await;
    let task = post_task(rt.url("/"), "to-beta", "hello beta").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
}

#[tokio::test]
async fn a_runtime_whose_reload_requests_end_keeps_serving() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let config = runtime_config("alpha", listener.local_addr().expect("addr"));
    // One request, whose reading fails, then no more: the runtime serves on until it is shut
    // down.
    let reloads =
        daedalus_runtime::lifecycle::reload::Reloader::new(futures::stream::iter([()]), |_| {
            Err(ConfigError::invalid("agents.yaml", "broken"))
        });
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(daedalus_runtime::run_reloading(
        listener,
        config,
        stop.clone().cancelled_owned(),
        reloads,
    ));
    wait_until("the runtime is ready", RELOAD_WITHIN, || {
        let health = format!("{url}/health");
        async move { reqwest::get(health).await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    let task = post_task(format!("{url}/"), "after-the-stream", "serving").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    stop.cancel();
    serving
        .await
        .expect("the runtime's task did not panic")
        .expect("the runtime stopped cleanly");
}

/// A 2026-07-28 client listening on an agent (`subscriptions/listen`) hears when a reload
/// changes it, and its tools listed again show the change; an unchanged agent's listener hears
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_client_hears_that_a_reload_changed_its_agent() {
    use support::python::{Heard, PythonClient};
    let file = DeploymentFile::new(&agents(&[("alpha", ""), ("beta", "")]));
    let rt = start(&file);
    let python = support::python::python();
    let listen = |agent: &str| {
        let url = rt.url(&format!("/agents/{agent}/mcp"));
        PythonClient::start(&python, "listen_client.py", &[&url])
    };
    let mut alpha = listen("alpha");
    let mut beta = listen("beta");
    for client in [&mut alpha, &mut beta] {
        let heard = tokio::time::timeout(RELOAD_WITHIN, client.next())
            .await
            .expect("acknowledged in time");
        assert!(matches!(heard, Heard::Asks(word) if word == "LISTENING"));
        client.ok().await;
    }
    file.write(&agents(&[("alpha", "renamed"), ("beta", "")]));
    rt.signal("HUP");
    let Heard::Result(result) = tokio::time::timeout(RELOAD_WITHIN, alpha.next())
        .await
        .expect("told in time")
    else {
        panic!("alpha asked for something else");
    };
    assert!(
        result["tools"]
            .as_array()
            .is_some_and(|tools| tools.contains(&json!("send_message"))),
        "{result}"
    );
    alpha.finish().await;
    let quiet = tokio::time::timeout(Duration::from_millis(500), beta.next()).await;
    assert!(quiet.is_err(), "beta did not change");
}
