//! Authentication end to end, on the real runtime binary and a real OpenID provider (the test
//! kit's, whose tokens joserfc signs): hostile credentials are refused on every binding and
//! face and leave the process unharmed; keys rotate and the provider goes down without
//! stopping anyone who holds a good token; API keys reload on SIGHUP; and no log line ever
//! carries a token or a key. Who owns what is `ownership.rs`.

use std::time::Duration;

use daedalus_test_kit::a2a_client::{id_of, state_of};
use daedalus_test_kit::{A2aClient, Alg, OidcProvider, unix_now, wait_until};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::identity::{api_key_file, guarded};
use support::process::{Runtime, runtime};

mod support;

const INPUT_REQUIRED: &str = "TASK_STATE_INPUT_REQUIRED";
const COMPLETED: &str = "TASK_STATE_COMPLETED";

struct Probe {
    method: reqwest::Method,
    path: &'static str,
    a2a: bool,
    body: Option<Value>,
}

fn jsonrpc(method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

fn message(text: &str) -> Value {
    json!({"messageId": format!("m-{}", unix_now()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// Every way in: the contract binding, JSON-RPC (v1 and v0.3), HTTP+JSON (with and without a
/// tenant), SSE, the MCP face and the registry.
fn probes() -> Vec<Probe> {
    use reqwest::Method;
    let post = |path, a2a, body| Probe {
        method: Method::POST,
        path,
        a2a,
        body: Some(body),
    };
    let get = |path| Probe {
        method: Method::GET,
        path,
        a2a: true,
        body: None,
    };
    vec![
        post(
            "/",
            false,
            json!({"message": {"messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}),
        ),
        post(
            "/",
            true,
            jsonrpc("SendMessage", &json!({"message": message("hi")})),
        ),
        post(
            "/",
            true,
            jsonrpc("SendStreamingMessage", &json!({"message": message("hi")})),
        ),
        post("/", true, jsonrpc("GetTask", &json!({"id": "t-1"}))),
        post("/", true, jsonrpc("ListTasks", &json!({}))),
        post("/", true, jsonrpc("CancelTask", &json!({"id": "t-1"}))),
        post("/", true, jsonrpc("SubscribeToTask", &json!({"id": "t-1"}))),
        post("/", true, jsonrpc("GetExtendedAgentCard", &json!({}))),
        post(
            "/",
            false,
            jsonrpc(
                "message/send",
                &json!({"message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}),
            ),
        ),
        post(
            "/a2a/rest/message:send",
            true,
            json!({"message": message("hi")}),
        ),
        post(
            "/a2a/rest/message:stream",
            true,
            json!({"message": message("hi")}),
        ),
        get("/a2a/rest/tasks"),
        get("/a2a/rest/acme/tasks"),
        get("/a2a/rest/tasks/t-1"),
        post("/a2a/rest/tasks/t-1:cancel", true, json!({})),
        get("/a2a/rest/tasks/t-1:subscribe"),
        get("/a2a/rest/extendedAgentCard"),
        post(
            "/agents/proc-test/mcp",
            false,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}),
        ),
        Probe {
            method: Method::GET,
            path: "/.well-known/mcp/server.json",
            a2a: false,
            body: None,
        },
    ]
}

/// `probe` sent with `authorization` (the whole header value, if any).
async fn send(
    http: &reqwest::Client,
    rt: &Runtime,
    probe: &Probe,
    authorization: Option<&str>,
) -> reqwest::Response {
    let mut request = http
        .request(probe.method.clone(), rt.url(probe.path))
        .header("accept", "application/json, text/event-stream");
    if probe.a2a {
        request = request.header("A2A-Version", "1.0");
    }
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    if let Some(body) = &probe.body {
        request = request.json(body);
    }
    request.send().await.expect("the runtime answers")
}

/// Every hostile credential a caller can present, by name.
async fn hostile_credentials(provider: &OidcProvider) -> Vec<(&'static str, Option<String>)> {
    let now = unix_now();
    let mut expired = provider.claims("mallory", "a2a");
    expired["exp"] = json!(now - 600);
    expired["iat"] = json!(now - 900);
    expired["nbf"] = json!(now - 900);
    let mut early = provider.claims("mallory", "a2a");
    early["nbf"] = json!(now + 600);
    let mut issuer = provider.claims("mallory", "a2a");
    issuer["iss"] = json!("https://evil.example");
    let mut audience = provider.claims("mallory", "a2a");
    audience["aud"] = json!("someone-else");
    let good = provider.claims("mallory", "a2a");
    let signed = provider.token_for("mallory").await;
    let (head, rest) = signed.split_once('.').expect("a JWT");
    let tampered = format!(
        "{head}.{}.{}",
        base64_json(
            &json!({"iss": provider.issuer(), "sub": "root", "aud": daedalus_test_kit::AUDIENCE, "exp": now + 300, "scope": "admin"})
        ),
        rest.rsplit('.').next().expect("a signature")
    );
    vec![
        ("none", None),
        ("empty bearer", Some("Bearer ".to_owned())),
        ("basic", Some("Basic bWFsbG9yeTpzZWNyZXQ=".to_owned())),
        ("garbage", Some("Bearer not-a-token".to_owned())),
        ("malformed", Some("Bearer a.b.c".to_owned())),
        (
            "huge",
            Some(format!(
                "Bearer {}.{}.x",
                "A".repeat(20_000),
                "B".repeat(20_000)
            )),
        ),
        (
            "expired",
            Some(format!(
                "Bearer {}",
                provider.mint(expired, Alg::Rs256, None).await
            )),
        ),
        (
            "not yet valid",
            Some(format!(
                "Bearer {}",
                provider.mint(early, Alg::Es256, None).await
            )),
        ),
        (
            "wrong issuer",
            Some(format!(
                "Bearer {}",
                provider.mint(issuer, Alg::Rs256, None).await
            )),
        ),
        (
            "wrong audience",
            Some(format!(
                "Bearer {}",
                provider.mint(audience, Alg::EdDsa, None).await
            )),
        ),
        (
            "alg none",
            Some(format!(
                "Bearer {}",
                provider.forge(good.clone(), "none").await
            )),
        ),
        (
            "hmac with the public key",
            Some(format!(
                "Bearer {}",
                provider.forge(good.clone(), "hmac").await
            )),
        ),
        (
            "unknown kid",
            Some(format!(
                "Bearer {}",
                provider
                    .mint(good, Alg::Rs256, Some("kid-nobody-published"))
                    .await
            )),
        ),
        ("tampered claims", Some(format!("Bearer {tampered}"))),
    ]
}

fn base64_json(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(value).expect("JSON"))
}

#[tokio::test]
async fn hostile_credentials_are_refused_on_every_binding_and_face_and_harm_nothing() {
    let provider = OidcProvider::start();
    let rt = guarded(&provider).start();
    let http = reqwest::Client::new();
    let credentials = hostile_credentials(&provider).await;
    let mut refused = 0;
    for (name, credential) in &credentials {
        for probe in probes() {
            let response = send(&http, &rt, &probe, credential.as_deref()).await;
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{name}: {} {}",
                probe.method,
                probe.path
            );
            let challenge = response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            assert!(
                challenge.starts_with("Bearer "),
                "{name}: {} {}: {challenge:?}",
                probe.method,
                probe.path
            );
            if probe.path.ends_with("/mcp") {
                assert!(
                    challenge.contains("resource_metadata=\""),
                    "{name}: {challenge}"
                );
            }
            if credential.is_some() && !matches!(*name, "empty bearer" | "basic") {
                assert!(
                    challenge.contains("error=\"invalid_token\""),
                    "{name}: {challenge}"
                );
            }
            refused += 1;
        }
    }
    assert_eq!(refused, credentials.len() * probes().len());

    // Open: liveness and the public card, which says how to authenticate.
    let health = http.get(rt.url("/health")).send().await.expect("answers");
    assert_eq!(health.status(), StatusCode::OK);
    let card: Value = http
        .get(rt.url("/.well-known/agent-card.json"))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("a card");
    assert_eq!(
        card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
        format!("{}/.well-known/openid-configuration", provider.issuer())
    );
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert!(
        card["securityRequirements"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );

    // The process is unharmed: a good token is served on every binding.
    let alice = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    assert_eq!(state_of(&alice.run_task("hello").await), COMPLETED);
    for probe in probes() {
        let token = provider.token_for("alice").await;
        let response = send(&http, &rt, &probe, Some(&format!("Bearer {token}"))).await;
        assert!(
            !matches!(
                response.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ),
            "a good token on {} {}: {}",
            probe.method,
            probe.path,
            response.status()
        );
    }
}

#[tokio::test]
async fn keys_rotate_while_tasks_run_and_a_provider_that_is_down_stops_no_known_key() {
    let provider = OidcProvider::start();
    let rt = guarded(&provider).start();
    let alice = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    let running = alice.start_task("***SLEEP 2s finished").await;

    provider.rotate(false).await;
    let rotated = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    assert!(
        rotated.get(&running).await.is_some(),
        "a token signed with the new key is accepted at once"
    );
    let stats = provider.stats().await;
    wait_until("the task finishes", Duration::from_secs(10), || async {
        rotated.state_of(&running).await == COMPLETED
    })
    .await;

    // The provider goes down: keys already fetched keep working; a new key fails closed.
    provider.pause().await;
    let cached = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    assert_eq!(state_of(&cached.run_task("still here").await), COMPLETED);
    provider.rotate(false).await;
    let unseen = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    let refused = unseen.send_raw("GetTask", json!({"id": running})).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    provider.resume().await;
    wait_until(
        "the new key is fetched",
        Duration::from_secs(10),
        || async { unseen.get(&running).await.is_some() },
    )
    .await;
    // Unknown kids refetch, but not on every request.
    let hammer = hostile_unknown_kid(&provider, rt.url("/")).await;
    for _ in 0..50 {
        let response = hammer.send_raw("ListTasks", json!({})).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let after = provider.stats().await;
    let fetched = after["jwks"].as_u64().unwrap_or(0) - stats["jwks"].as_u64().unwrap_or(0);
    assert!(
        fetched < 20,
        "50 unknown kids fetched the keys {fetched} times"
    );
}

async fn hostile_unknown_kid(provider: &OidcProvider, url: String) -> A2aClient {
    let token = provider
        .mint(
            provider.claims("mallory", "a2a"),
            Alg::Rs256,
            Some("kid-unknown"),
        )
        .await;
    A2aClient::new(url).with_bearer(token)
}

#[tokio::test]
async fn api_keys_name_their_holder_and_reload_on_sighup() {
    let dir = tempfile::tempdir().expect("a dir");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(&keys, &[("key-of-ci", "ci-bot", "acme")]);
    let rt = runtime()
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .env("LOG_LEVEL", "debug")
        .start();
    let http = reqwest::Client::new();
    let with_key = |key: &'static str| {
        let http = http.clone();
        let url = rt.url("/a2a/rest/tasks");
        async move {
            http.get(url)
                .header("A2A-Version", "1.0")
                .header("X-API-Key", key)
                .send()
                .await
                .expect("answers")
                .status()
        }
    };
    assert_eq!(with_key("key-of-ci").await, StatusCode::OK);
    assert_eq!(with_key("key-of-nobody").await, StatusCode::UNAUTHORIZED);
    let as_bearer = A2aClient::new(rt.url("/")).with_bearer("key-of-ci");
    let task = as_bearer.run_task("***INPUT keyed").await;
    let id = id_of(&task);

    // The key is rotated: the old one stops working, the new one names the same principal.
    api_key_file(&keys, &[("key-of-ci-2", "ci-bot", "acme")]);
    rt.signal("HUP");
    wait_until("the new key works", Duration::from_secs(10), || async {
        with_key("key-of-ci-2").await == StatusCode::OK
    })
    .await;
    assert_eq!(with_key("key-of-ci").await, StatusCode::UNAUTHORIZED);
    let rotated = A2aClient::new(rt.url("/")).with_bearer("key-of-ci-2");
    assert_eq!(
        rotated.state_of(&id).await,
        INPUT_REQUIRED,
        "the same principal"
    );

    // A broken file keeps the keys loaded.
    std::fs::write(&keys, "keys: [ {").expect("written");
    rt.signal("HUP");
    rt.wait_for_log(Duration::from_secs(10), |l| {
        l["message"]
            .as_str()
            .is_some_and(|m| m.contains("reload refused"))
    });
    assert_eq!(with_key("key-of-ci-2").await, StatusCode::OK);
}

#[tokio::test]
async fn no_log_line_carries_a_token_or_a_key() {
    let provider = OidcProvider::start();
    let dir = tempfile::tempdir().expect("a dir");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(&keys, &[("secret-api-key-123", "ci-bot", "acme")]);
    let rt = guarded(&provider)
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .start();
    let http = reqwest::Client::new();
    let mut secrets = vec![
        "secret-api-key-123".to_owned(),
        "wrong-api-key-456".to_owned(),
    ];
    let good = provider.token_for("alice").await;
    secrets.push(good.clone());
    for (_, credential) in hostile_credentials(&provider).await {
        if let Some(value) = credential {
            let token = value.trim_start_matches("Bearer ").to_owned();
            if token.len() > 8 && !token.starts_with("bWFsbG9y") {
                secrets.push(token);
            }
            for probe in probes() {
                send(&http, &rt, &probe, Some(&value)).await;
            }
        }
    }
    for key in ["secret-api-key-123", "wrong-api-key-456"] {
        for probe in probes() {
            send(&http, &rt, &probe, Some(&format!("Bearer {key}"))).await;
        }
    }
    let alice = A2aClient::new(rt.url("/")).with_bearer(good);
    assert_eq!(state_of(&alice.run_task("hello").await), COMPLETED);
    let logs = rt.drain_logs();
    assert!(logs.len() > 10, "the runtime logged at debug");
    for line in &logs {
        let text = line.to_string();
        for secret in &secrets {
            // Any 24-character piece of a token would do to replay or recognise it.
            let piece = &secret[secret.len().saturating_sub(24)..];
            assert!(
                !text.contains(piece),
                "a log line carries a credential: {text}"
            );
        }
    }
}

#[tokio::test]
async fn a_provider_that_is_down_at_startup_stops_nothing_and_its_tokens_wait_for_it() {
    let provider = OidcProvider::start();
    provider.pause().await;
    let rt = guarded(&provider).start();
    let http = reqwest::Client::new();
    let health: Value = http
        .get(rt.url("/healthz"))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(health["auth"]["on"], true, "{health}");
    assert_eq!(health["auth"]["token_keys"]["keys"], 0, "{health}");
    let alice = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    let refused = alice.send_raw("ListTasks", json!({})).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "fails closed");
    provider.resume().await;
    wait_until("the keys arrive", Duration::from_secs(10), || async {
        alice.send_raw("ListTasks", json!({})).await.status() == StatusCode::OK
    })
    .await;
    assert_eq!(state_of(&alice.run_task("hello").await), COMPLETED);
}
