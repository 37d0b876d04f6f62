//! Credentials for every downstream hop, against a real OpenID provider and a real MCP server
//! (the official Python SDK) that only takes tokens of that provider for its own audience:
//! the runtime's own client-credentials token (through its expiry), the caller's token
//! exchanged (RFC 8693) so the server sees the end user (100 concurrent callers, each as
//! themselves), and a token endpoint that fails or hangs giving the tool call a clear error
//! within its timeout.

mod support;

use std::time::{Duration, Instant};

use daedalus_test_kit::a2a_client::state_of;
use daedalus_test_kit::{A2aClient, OidcClient, OidcProvider};
use serde_json::Value;
use support::process::{Runtime, runtime};
use support::python::PythonServer;

const TOOLS_AUDIENCE: &str = "tools-api";
const COMPLETED: &str = "TASK_STATE_COMPLETED";
const FAILED: &str = "TASK_STATE_FAILED";

/// The guarded MCP server (for audience [`TOOLS_AUDIENCE`] of `provider`), killed on drop.
async fn guarded_server(provider: &OidcProvider) -> PythonServer {
    PythonServer::start(
        "guarded_mcp_server.py",
        &[provider.issuer(), TOOLS_AUDIENCE],
    )
    .await
}

/// A runtime whose agent `proc-test` (passthrough) has the one server `tools` at `url` with
/// `auth`; `inbound` turns authentication on, with `provider` as the issuer.
fn runtime_with(
    dir: &tempfile::TempDir,
    provider: &OidcProvider,
    url: &str,
    auth: &str,
    extra: &str,
    inbound: bool,
) -> Runtime {
    let file = dir.path().join("agents.yaml");
    std::fs::write(
        &file,
        format!(
            "mcp:\n  servers:\n    tools:\n      url: \"{url}\"\n{extra}      auth:\n{auth}\nagents:\n  proc-test:\n    servers: [tools]\n"
        ),
    )
    .expect("agents.yaml written");
    let mut builder = runtime()
        .env("AGENTS_CONFIG", file.to_str().expect("utf-8"))
        .env("LOG_LEVEL", "debug");
    if inbound {
        builder = builder
            .env("AUTH_ISSUER", provider.issuer())
            .env("AUTH_AUDIENCE", daedalus_test_kit::AUDIENCE);
    }
    builder.start()
}

fn auth_block(kind: &str, provider: &OidcProvider, client: &str, secret: &str) -> String {
    format!(
        "        type: {kind}\n        token_url: \"{}\"\n        client_id: {client}\n        client_secret: {secret}\n        audience: {TOOLS_AUDIENCE}\n",
        provider.token_url()
    )
}

async fn register(provider: &OidcProvider, id: &str, secret: &str, ttl: u64, delay: f64) {
    provider
        .register_client(&OidcClient {
            id,
            secret,
            audience: TOOLS_AUDIENCE,
            scope: "tools",
            ttl_secs: ttl,
            delay_secs: delay,
        })
        .await;
}

/// The `whoami` the server answered in `task`'s artifact.
fn whoami(task: &Value) -> Value {
    let text = task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("an artifact: {task}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_caller_s_token_is_exchanged_so_the_server_sees_the_end_user_and_100_callers_each_as_themselves()
 {
    let provider = OidcProvider::start();
    register(&provider, "runtime-exchanger", "exchange-secret", 300, 0.0).await;
    let server = guarded_server(&provider).await;
    let dir = tempfile::tempdir().expect("a dir");
    let auth = auth_block(
        "token_exchange",
        &provider,
        "runtime-exchanger",
        "exchange-secret",
    );
    let rt = runtime_with(&dir, &provider, &server.mcp_url(), &auth, "", true);

    let alice_token = provider.token_for("alice").await;
    let alice = A2aClient::new(rt.url("/")).with_bearer(alice_token.clone());
    let task = alice.run_task("***TOOL tools__whoami").await;
    assert_eq!(state_of(&task), COMPLETED, "{task}");
    let seen = whoami(&task);
    assert_eq!(seen["sub"], "alice", "the server sees the end user: {seen}");
    assert_eq!(seen["aud"], TOOLS_AUDIENCE, "{seen}");
    assert_eq!(seen["act"], "runtime-exchanger", "{seen}");
    let again = alice.run_task("***TOOL tools__whoami").await;
    assert_eq!(whoami(&again)["sub"], "alice");
    let exchanged_once = provider.stats().await["exchange"].as_u64().unwrap_or(0);
    assert_eq!(
        exchanged_once, 1,
        "one token, one exchange, kept for the next call"
    );

    // 100 callers with distinct tokens at once: each reaches the server as itself.
    let mut calls = Vec::new();
    for i in 0..100 {
        let client =
            A2aClient::new(rt.url("/")).with_bearer(provider.token_for(&format!("user-{i}")).await);
        calls.push(tokio::spawn(async move {
            let task = client.run_task("***TOOL tools__whoami").await;
            (i, task)
        }));
    }
    for call in calls {
        let (i, task) = call.await.expect("the call ran");
        assert_eq!(state_of(&task), COMPLETED, "user-{i}: {task}");
        assert_eq!(whoami(&task)["sub"], format!("user-{i}"), "{task}");
    }
    let exchanges = provider.stats().await["exchange"].as_u64().unwrap_or(0);
    assert_eq!(exchanges, 101, "one exchange per distinct caller token");

    // No log line carries the caller's token or the exchanger's secret.
    let logs = rt.drain_logs();
    assert!(!logs.is_empty());
    for line in logs {
        let text = line.to_string();
        assert!(
            !text.contains(&alice_token[alice_token.len() - 24..])
                && !text.contains("exchange-secret"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn the_runtime_s_own_token_reaches_the_server_through_its_expiry() {
    let provider = OidcProvider::start();
    register(&provider, "runtime-itself", "own-secret", 3, 0.0).await;
    let server = guarded_server(&provider).await;
    let dir = tempfile::tempdir().expect("a dir");
    let auth = auth_block(
        "oauth2_client_credentials",
        &provider,
        "runtime-itself",
        "own-secret",
    );
    let rt = runtime_with(&dir, &provider, &server.mcp_url(), &auth, "", false);
    let client = A2aClient::new(rt.url("/"));
    let calls = 6;
    for _ in 0..calls {
        let task = client.run_task("***TOOL tools__whoami").await;
        assert_eq!(state_of(&task), COMPLETED, "{task}");
        let seen = whoami(&task);
        assert_eq!(seen["sub"], "runtime-itself", "{seen}");
        assert_eq!(seen["aud"], TOOLS_AUDIENCE, "{seen}");
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    let tokens = provider.stats().await["token"].as_u64().unwrap_or(0);
    assert!(
        (2..=calls).contains(&tokens),
        "fetched again before expiry, not per call: {tokens}"
    );
}

#[tokio::test]
async fn a_token_endpoint_that_refuses_or_hangs_fails_the_call_clearly_within_its_timeout() {
    let provider = OidcProvider::start();
    register(&provider, "runtime-itself", "own-secret", 300, 0.0).await;
    register(&provider, "slow-client", "slow-secret", 300, 30.0).await;
    let server = guarded_server(&provider).await;

    // A wrong secret: the endpoint refuses, and the call says so (never the secret).
    let dir = tempfile::tempdir().expect("a dir");
    let auth = auth_block(
        "oauth2_client_credentials",
        &provider,
        "runtime-itself",
        "wrong-secret",
    );
    let rt = runtime_with(&dir, &provider, &server.mcp_url(), &auth, "", false);
    let task = A2aClient::new(rt.url("/"))
        .run_task("***TOOL tools__whoami")
        .await;
    assert_eq!(state_of(&task), FAILED, "{task}");
    let why = status_text(&task);
    assert!(
        why.contains("invalid_client") && why.contains("token endpoint"),
        "{why}"
    );
    assert!(!why.contains("wrong-secret"), "{why}");

    // A token endpoint that hangs: the call's own timeout ends it.
    let dir = tempfile::tempdir().expect("a dir");
    let auth = auth_block(
        "oauth2_client_credentials",
        &provider,
        "slow-client",
        "slow-secret",
    );
    let rt = runtime_with(
        &dir,
        &provider,
        &server.mcp_url(),
        &auth,
        "      read_timeout_seconds: 2\n",
        false,
    );
    let started = Instant::now();
    let task = A2aClient::new(rt.url("/"))
        .run_task("***TOOL tools__whoami")
        .await;
    assert_eq!(state_of(&task), FAILED, "{task}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call ended by its timeout, not the endpoint's 30 s"
    );
    assert!(status_text(&task).contains("no answer within"), "{task}");
}

/// An API key is the runtime's own long-lived secret: sent as the bearer or in its header, it
/// is never handed to the identity provider as a token to exchange. Only a caller that
/// authenticated with a token has one to exchange.
#[tokio::test]
async fn an_api_key_is_never_exchanged_even_when_sent_as_the_bearer() {
    const KEY: &str = "dk_test_the_runtime_s_own_long_lived_key";
    let provider = OidcProvider::start();
    register(&provider, "runtime-exchanger", "exchange-secret", 300, 0.0).await;
    let server = guarded_server(&provider).await;
    let dir = tempfile::tempdir().expect("a dir");
    let keys = dir.path().join("keys.yaml");
    std::fs::write(
        &keys,
        format!(
            "keys:\n  - sha256: {}\n    principal: ci-bot\n",
            daedalus_runtime::platform::identity::api_keys::hash_hex(KEY)
        ),
    )
    .expect("keys written");
    let file = dir.path().join("agents.yaml");
    std::fs::write(
        &file,
        format!(
            "mcp:\n  servers:\n    tools:\n      url: \"{}\"\n      auth:\n{}agents:\n  proc-test:\n    servers: [tools]\n",
            server.mcp_url(),
            auth_block("token_exchange", &provider, "runtime-exchanger", "exchange-secret")
        ),
    )
    .expect("agents.yaml written");
    let rt = runtime()
        .env("AGENTS_CONFIG", file.to_str().expect("utf-8"))
        .env("AUTH_ISSUER", provider.issuer())
        .env("AUTH_AUDIENCE", daedalus_test_kit::AUDIENCE)
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .start();

    let as_bearer = A2aClient::new(rt.url("/")).with_bearer(KEY);
    let task = as_bearer.run_task("***TOOL tools__whoami").await;
    assert_eq!(state_of(&task), FAILED, "{task}");
    assert!(
        status_text(&task).contains("no caller token to exchange"),
        "{task}"
    );
    let in_header = reqwest::Client::new()
        .post(rt.url("/"))
        .header("X-API-Key", KEY)
        .json(&serde_json::json!({"message": {"messageId": "m-key", "role": "user", "parts": [{"text": "***TOOL tools__whoami"}]}}))
        .send()
        .await
        .expect("sent")
        .json::<Value>()
        .await
        .expect("a task");
    assert_eq!(in_header["status"]["state"], "failed", "{in_header}");
    let stats = provider.stats().await;
    assert_eq!(
        (stats["exchange"].as_u64(), stats["refused"].as_u64()),
        (Some(0), Some(0)),
        "the key never reached the token endpoint: {stats}"
    );

    // A caller with a token still has it exchanged.
    let alice = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    let task = alice.run_task("***TOOL tools__whoami").await;
    assert_eq!(whoami(&task)["sub"], "alice", "{task}");
    assert!(
        rt.drain_logs()
            .iter()
            .all(|line| !line.to_string().contains(KEY)),
        "no log line carries the key"
    );
}

#[test]
fn an_auth_block_with_a_forwarded_token_too_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("a dir");
    let file = dir.path().join("agents.yaml");
    std::fs::write(
        &file,
        "mcp:\n  servers:\n    tools:\n      url: http://127.0.0.1:1/mcp\n      forward_inbound_auth: true\n      auth: { type: token_exchange, token_url: \"http://127.0.0.1:1/token\", client_id: c, client_secret: s, audience: a }\nagents:\n  proc-test:\n    servers: [tools]\n",
    )
    .expect("written");
    let output = std::process::Command::new(support::process::runtime_binary())
        .env_clear()
        .env("AGENTS_CONFIG", file.to_str().expect("utf-8"))
        .arg("--check-config")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("mcp.servers.tools.auth") && stderr.contains("forward_inbound_auth"),
        "{stderr}"
    );
}

#[tokio::test]
async fn another_agent_gets_the_caller_exchanged_and_its_task_is_the_caller_s() {
    let provider = OidcProvider::start();
    provider
        .register_client(&OidcClient {
            id: "runtime-a",
            secret: "a-secret",
            audience: "agent-b",
            scope: "a2a",
            ttl_secs: 300,
            delay_secs: 0.0,
        })
        .await;
    // B requires tokens for its own audience.
    let b = runtime()
        .env("AGENT_NAME", "agent-b")
        .env("AUTH_ISSUER", provider.issuer())
        .env("AUTH_AUDIENCE", "agent-b")
        .start();
    let dir = tempfile::tempdir().expect("a dir");
    let file = dir.path().join("agents.yaml");
    std::fs::write(
        &file,
        format!(
            "mcp:\n  servers:\n    b:\n      type: a2a\n      url: \"{}\"\n      auth:\n        type: token_exchange\n        token_url: \"{}\"\n        client_id: runtime-a\n        client_secret: a-secret\n        audience: agent-b\nagents:\n  proc-test:\n    servers: [b]\n",
            b.url(""),
            provider.token_url()
        ),
    )
    .expect("written");
    let a = runtime()
        .env("AGENTS_CONFIG", file.to_str().expect("utf-8"))
        .env("AUTH_ISSUER", provider.issuer())
        .env("AUTH_AUDIENCE", daedalus_test_kit::AUDIENCE)
        .start();
    let alice = A2aClient::new(a.url("/")).with_bearer(provider.token_for("alice").await);
    let task = alice
        .run_task(r#"***TOOL b__chat {"message": "hello b"}"#)
        .await;
    assert_eq!(state_of(&task), COMPLETED, "{task}");

    // On B the task is alice's: she sees it with a token for B, nobody else does.
    let mut claims = provider.claims("alice", "a2a");
    claims["aud"] = serde_json::json!("agent-b");
    let alice_on_b = A2aClient::new(b.url("/")).with_bearer(
        provider
            .mint(claims, daedalus_test_kit::Alg::Rs256, None)
            .await,
    );
    let on_b = alice_on_b.list_states().await;
    assert_eq!(on_b.len(), 1, "{on_b:?}");
    let mut claims = provider.claims("bob", "a2a");
    claims["aud"] = serde_json::json!("agent-b");
    let bob_on_b = A2aClient::new(b.url("/")).with_bearer(
        provider
            .mint(claims, daedalus_test_kit::Alg::Rs256, None)
            .await,
    );
    assert!(bob_on_b.list_states().await.is_empty());
}
