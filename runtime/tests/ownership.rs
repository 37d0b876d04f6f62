//! Tasks, contexts and MCP sessions belong to the principal (and tenant) that made them, on
//! the real runtime binary with tokens of a real OpenID provider (the test kit's): another
//! principal can neither see, list, cancel, subscribe to nor continue them, on one replica and
//! across two on NATS KV; tenants never see each other; an MCP session is its opener's.

use std::time::Duration;

use daedalus_test_kit::a2a_client::{id_of, state_of};
use daedalus_test_kit::{A2aClient, Alg, OidcProvider, wait_until};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::identity::guarded;

mod support;

const AGENT: &str = "proc-test";
const INPUT_REQUIRED: &str = "TASK_STATE_INPUT_REQUIRED";
const COMPLETED: &str = "TASK_STATE_COMPLETED";

#[tokio::test]
async fn another_principal_can_neither_see_list_cancel_subscribe_to_nor_continue_a_task() {
    let provider = OidcProvider::start();
    let rt = guarded(&provider).start();
    let alice = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("alice").await);
    let bob = A2aClient::new(rt.url("/")).with_bearer(provider.token_for("bob").await);
    let mut admin_claims = provider.claims("root", "a2a admin");
    admin_claims["sub"] = json!("root");
    let admin = A2aClient::new(rt.url("/"))
        .with_bearer(provider.mint(admin_claims, Alg::EdDsa, None).await);

    let task = alice.run_task("***INPUT which colour?").await;
    assert_eq!(state_of(&task), INPUT_REQUIRED);
    let id = id_of(&task);
    let context = task["contextId"].as_str().expect("a context").to_owned();

    let not_found = Some("TASK_NOT_FOUND".to_owned());
    assert_eq!(bob.refusal("GetTask", json!({"id": id})).await, not_found);
    assert_eq!(
        bob.refusal("CancelTask", json!({"id": id})).await,
        not_found
    );
    assert_eq!(
        bob.refusal("SubscribeToTask", json!({"id": id})).await,
        not_found
    );
    let continued = bob.send_to_task(&id, "red").await;
    assert_eq!(
        continued["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
        "{continued}"
    );
    let in_context = bob.send_in_context(&context, "what did alice say?").await;
    assert_eq!(
        in_context["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
        "{in_context}"
    );
    assert!(!bob.list_states().await.contains_key(&id));
    let http = reqwest::Client::new();
    let rest = http
        .get(rt.url(&format!("/a2a/rest/tasks/{id}")))
        .header("A2A-Version", "1.0")
        .bearer_auth(provider.token_for("bob").await)
        .send()
        .await
        .expect("answers");
    assert_eq!(rest.status(), StatusCode::NOT_FOUND);

    // Bob's refusals changed nothing: the task is alice's, still waiting for her answer.
    assert_eq!(alice.state_of(&id).await, INPUT_REQUIRED);
    assert_eq!(
        alice.list_states().await.get(&id).map(String::as_str),
        Some(INPUT_REQUIRED)
    );
    // An admin of the tenant sees it; alice continues it.
    assert_eq!(admin.state_of(&id).await, INPUT_REQUIRED);
    assert_eq!(state_of(&alice.continue_task(&id, "red").await), COMPLETED);
    // A context of alice's stays hers for new tasks too.
    let again = alice.send_in_context(&context, "and again").await;
    assert!(again.get("result").is_some(), "{again}");
}

#[tokio::test]
async fn tenants_never_see_each_other_and_a_path_tenant_must_match_the_token() {
    let provider = OidcProvider::start();
    let rt = guarded(&provider).start();
    let acme =
        A2aClient::new(rt.url("/")).with_bearer(provider.token_in_tenant("alice", "acme").await);
    // The same subject in another tenant is someone else.
    let other =
        A2aClient::new(rt.url("/")).with_bearer(provider.token_in_tenant("alice", "other").await);
    let mut admin_claims = provider.claims("root", "a2a admin");
    admin_claims["tenant"] = json!("other");
    let other_admin = A2aClient::new(rt.url("/"))
        .with_bearer(provider.mint(admin_claims, Alg::Rs256, None).await);

    let id = id_of(&acme.run_task("***INPUT acme only").await);
    assert_eq!(acme.state_of(&id).await, INPUT_REQUIRED);
    assert_eq!(other.get(&id).await, None);
    assert_eq!(
        other_admin.get(&id).await,
        None,
        "an admin sees its own tenant only"
    );
    assert!(!other.list_states().await.contains_key(&id));

    let http = reqwest::Client::new();
    let acme_token = provider.token_in_tenant("alice", "acme").await;
    let get = |path: String, token: String| {
        let http = http.clone();
        let url = rt.url(&path);
        async move {
            http.get(url)
                .header("A2A-Version", "1.0")
                .bearer_auth(token)
                .send()
                .await
                .expect("answers")
        }
    };
    let own = get(format!("/a2a/rest/acme/tasks/{id}"), acme_token.clone()).await;
    assert_eq!(own.status(), StatusCode::OK);
    let elsewhere = get(format!("/a2a/rest/other/tasks/{id}"), acme_token).await;
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN);
    // A token without a tenant takes the path's, and sees only that tenant's own tasks.
    let untenanted = provider.token_for("alice").await;
    let through_path = get(format!("/a2a/rest/acme/tasks/{id}"), untenanted.clone()).await;
    assert_eq!(
        through_path.status(),
        StatusCode::OK,
        "alice in tenant acme by path is the owner"
    );
    let without = get(format!("/a2a/rest/tasks/{id}"), untenanted).await;
    assert_eq!(without.status(), StatusCode::NOT_FOUND);
}

/// Opens an MCP session as `token`: its id.
async fn open_session(http: &reqwest::Client, url: &str, token: &str) -> String {
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "identity-test", "version": "1"}}}),
        )
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.headers()["mcp-session-id"]
        .to_str()
        .expect("ascii")
        .to_owned()
}

async fn in_session(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: &str,
    body: Value,
) -> reqwest::Response {
    http.post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .await
        .expect("answers")
}

#[tokio::test]
async fn an_mcp_session_belongs_to_whoever_opened_it() {
    let provider = OidcProvider::start();
    let rt = guarded(&provider).start();
    let http = reqwest::Client::new();
    let url = rt.url(&format!("/agents/{AGENT}/mcp"));
    let alice = provider.token_for("alice").await;
    let bob = provider.token_for("bob").await;
    let session = open_session(&http, &url, &alice).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let done = in_session(&http, &url, &alice, &session, initialized).await;
    assert!(done.status().is_success(), "{}", done.status());

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let stolen = in_session(&http, &url, &bob, &session, list.clone()).await;
    assert_eq!(stolen.status(), StatusCode::NOT_FOUND);
    let own = in_session(&http, &url, &alice, &session, list).await;
    assert_eq!(own.status(), StatusCode::OK);

    // Unauthenticated, the challenge names the endpoint's protected resource metadata.
    let anonymous = http
        .post(&url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .expect("answers");
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let challenge = anonymous.headers()["www-authenticate"]
        .to_str()
        .expect("ascii");
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a metadata URL")
        .to_owned();
    assert!(
        metadata_url.ends_with(&format!(
            "/.well-known/oauth-protected-resource/agents/{AGENT}/mcp"
        )),
        "{metadata_url}"
    );
    let metadata: Value = http
        .get(rt.url(&format!(
            "/.well-known/oauth-protected-resource/agents/{AGENT}/mcp"
        )))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(metadata["authorization_servers"][0], provider.issuer());
    assert!(
        metadata["resource"]
            .as_str()
            .is_some_and(|r| r.ends_with(&format!("/agents/{AGENT}/mcp"))),
        "{metadata}"
    );
}

#[tokio::test]
async fn ownership_travels_with_the_task_across_replicas_on_nats_kv() {
    let provider = OidcProvider::start();
    let nats = daedalus_test_kit::NatsServer::start();
    let tasks_db = format!("{}/owned-tasks", nats.url());
    let replica = |name: &str| {
        guarded(&provider)
            .env("TASKS_DB", &tasks_db)
            .env("REPLICA_ID", name)
            .env("REPLICA_LEASE", "2s")
            .start()
    };
    let (a, b) = (replica("a"), replica("b"));
    let alice_token = provider.token_for("alice").await;
    let bob_token = provider.token_for("bob").await;
    let alice_on_a = A2aClient::new(a.url("/")).with_bearer(alice_token.clone());
    let alice_on_b = A2aClient::new(b.url("/")).with_bearer(alice_token);
    let bob_on_b = A2aClient::new(b.url("/")).with_bearer(bob_token.clone());
    let bob_on_a = A2aClient::new(a.url("/")).with_bearer(bob_token);

    let task = alice_on_a.run_task("***INPUT which replica?").await;
    let id = id_of(&task);
    let context = task["contextId"].as_str().expect("a context").to_owned();
    wait_until("B sees alice's task", Duration::from_secs(10), || async {
        alice_on_b.state_of(&id).await == INPUT_REQUIRED
    })
    .await;
    let not_found = Some("TASK_NOT_FOUND".to_owned());
    for bob in [&bob_on_a, &bob_on_b] {
        assert_eq!(bob.refusal("GetTask", json!({"id": id})).await, not_found);
        assert_eq!(
            bob.refusal("CancelTask", json!({"id": id})).await,
            not_found
        );
        assert_eq!(
            bob.refusal("SubscribeToTask", json!({"id": id})).await,
            not_found
        );
        assert!(!bob.list_states().await.contains_key(&id));
        let stolen = bob.send_to_task(&id, "mine now").await;
        assert_eq!(
            stolen["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
            "{stolen}"
        );
        let context_stolen = bob.send_in_context(&context, "tell me").await;
        assert_eq!(
            context_stolen["error"]["data"][0]["reason"], "TASK_NOT_FOUND",
            "{context_stolen}"
        );
    }
    assert!(alice_on_b.list_states().await.contains_key(&id));
    // Alice answers through B; the task ends hers on both.
    assert_eq!(
        state_of(&alice_on_b.continue_task(&id, "b").await),
        COMPLETED
    );
    assert_eq!(alice_on_a.state_of(&id).await, COMPLETED);
    assert_eq!(bob_on_a.get(&id).await, None);
}
