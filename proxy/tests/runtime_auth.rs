//! The proxy in front of a runtime that requires a caller: it presents its own credential (an
//! OAuth2 client-credentials token from a real OpenID provider, refreshed before it expires),
//! the tasks it forwards are owned by its principal, and startup names the step when the
//! runtime refuses it.

mod support;

use std::time::Duration;

use daedalus_contract::TaskState;
use daedalus_contract::credentials::CredentialError;
use daedalus_contract::credentials::{CredentialSource, OAuthClient, Secret};
use daedalus_proxy::ProxyError;
use daedalus_proxy::error::{StartupError, Step};
use daedalus_proxy::forward::http::CredentialCheckError;
use daedalus_runtime::config::auth::AuthSettings;
use daedalus_test_kit::{A2aClient, OidcClient, OidcProvider};
use support::*;

const WAIT: Duration = Duration::from_secs(30);
/// The proxy's tokens live this long: the test outlives several.
const TOKEN_TTL_SECS: u64 = 3;

/// A runtime checking tokens of `provider` for audience `daedalus`.
async fn guarded_runtime(
    agent: &str,
    provider: &OidcProvider,
) -> (String, tokio_util::sync::CancellationToken) {
    let plan = AuthSettings {
        issuer: Some(provider.issuer().to_owned()),
        audience: Some(daedalus_test_kit::AUDIENCE.to_owned()),
        ..AuthSettings::default()
    }
    .plan()
    .expect("a valid plan");
    real_runtime_with(agent, move |config| config.auth = plan).await
}

fn grant(provider: &OidcProvider, secret: &str) -> CredentialSource {
    CredentialSource::ClientCredentials(OAuthClient {
        token_url: provider.token_url(),
        client_id: "proxy-echo".to_owned(),
        client_secret: Secret::new(secret),
        scope: Some("a2a".to_owned()),
        audience: Some(daedalus_test_kit::AUDIENCE.to_owned()),
    })
}

async fn register_proxy(provider: &OidcProvider) {
    provider
        .register_client(&OidcClient {
            id: "proxy-echo",
            secret: "proxy-secret",
            audience: daedalus_test_kit::AUDIENCE,
            scope: "a2a",
            ttl_secs: TOKEN_TTL_SECS,
            delay_secs: 0.0,
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_presents_its_own_token_through_its_expiry_and_owns_what_it_forwards() {
    let provider = OidcProvider::start();
    register_proxy(&provider).await;
    let nats = NatsServer::start();
    let (runtime, _stop) = guarded_runtime("echo", &provider).await;
    let mut config = proxy_config("echo", &nats.url(), &runtime);
    config.runtime_credential = Some(grant(&provider, "proxy-secret"));
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;

    // Tasks over three token lifetimes: each is forwarded with a live token.
    let rounds = 8;
    for i in 0..rounds {
        let body = task_body(
            &format!("m-{i}"),
            Some(&format!("t-{i}")),
            &format!("hi {i}"),
        );
        publish(&js, "echo", &format!("m-{i}"), body).await;
        tokio::time::sleep(Duration::from_millis(1_200)).await;
    }
    let found = wait_results(&js, "echo", rounds, WAIT).await;
    assert_eq!(found.len(), rounds);
    for (_, _, task) in &found {
        assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    }
    let stats = provider.stats().await;
    let tokens = stats["token"].as_u64().unwrap_or(0);
    assert!(
        (2..=rounds as u64 + 2).contains(&tokens),
        "the token was fetched again before it expired, not per task: {tokens} fetches"
    );

    // The tasks are the proxy's: its principal lists them, another principal does not.
    let as_proxy = A2aClient::new(format!("{runtime}/")).with_bearer(
        provider
            .mint(
                provider.claims("proxy-echo", "a2a"),
                daedalus_test_kit::Alg::Rs256,
                None,
            )
            .await,
    );
    let listed = as_proxy.list_states().await;
    assert!(listed.contains_key("t-0") && listed.contains_key(&format!("t-{}", rounds - 1)));
    let alice =
        A2aClient::new(format!("{runtime}/")).with_bearer(provider.token_for("alice").await);
    assert!(alice.list_states().await.is_empty());
    assert_eq!(alice.get("t-0").await, None);
    proxy.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn startup_names_the_step_when_the_runtime_refuses_the_proxy() {
    let provider = OidcProvider::start();
    register_proxy(&provider).await;
    let nats = NatsServer::start();
    let (runtime, _stop) = guarded_runtime("echo", &provider).await;

    // No credential at all: refused at once, and said how to fix it.
    let config = proxy_config("echo", &nats.url(), &runtime);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let outcome = tokio::time::timeout(
        WAIT,
        Box::pin(daedalus_proxy::run(
            listener,
            config,
            std::future::pending(),
        )),
    )
    .await
    .expect("startup stops by itself");
    let error = outcome.expect_err("startup is refused");
    assert!(
        matches!(error, ProxyError::RuntimeCredential { .. }),
        "{error}"
    );
    let text = error.to_string();
    assert!(
        text.contains("presenting the proxy's credential to the runtime")
            && text.contains("401")
            && text.contains("RUNTIME_TOKEN_FILE"),
        "{text}"
    );

    // A wrong secret: the token endpoint refuses the client, which asking again cannot change.
    // Startup stops at once (one request to the endpoint, well inside STARTUP_TIMEOUT),
    // naming the step and the refusal, and never prints the secret.
    let mut config = proxy_config("echo", &nats.url(), &runtime);
    config.runtime_credential = Some(grant(&provider, "not-the-secret"));
    config.startup_timeout = Duration::from_mins(10);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let refused_before = provider.stats().await["refused"].as_u64().unwrap_or(0);
    let error = tokio::time::timeout(
        WAIT,
        Box::pin(daedalus_proxy::run(
            listener,
            config,
            std::future::pending(),
        )),
    )
    .await
    .expect("startup stops by itself, long before STARTUP_TIMEOUT")
    .expect_err("startup does not finish");
    assert!(
        matches!(
            &error,
            ProxyError::RuntimeCredential {
                source: CredentialCheckError::NoToken(CredentialError::Refused { error, .. })
            } if error == "invalid_client"
        ),
        "{error:?}"
    );
    let refused = provider.stats().await["refused"].as_u64().unwrap_or(0) - refused_before;
    assert_eq!(
        refused, 1,
        "the endpoint was asked once, not until the deadline"
    );
    let text = error.to_string();
    assert!(
        text.contains("presenting the proxy's credential to the runtime")
            && text.contains("invalid_client"),
        "{text}"
    );
    assert!(!text.contains("not-the-secret"), "{text}");

    // A token endpoint that does not answer is waited for until STARTUP_TIMEOUT, and the
    // error names the configured timeout.
    let mut config = proxy_config("echo", &nats.url(), &runtime);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let mut unreachable = grant(&provider, "proxy-secret");
    if let CredentialSource::ClientCredentials(client) = &mut unreachable {
        client.token_url = format!("http://{}/token", silent.local_addr().expect("an address"));
    }
    drop(silent);
    config.runtime_credential = Some(unreachable);
    config.startup_timeout = Duration::from_secs(2);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let error = Box::pin(daedalus_proxy::run(
        listener,
        config,
        std::future::pending(),
    ))
    .await
    .expect_err("startup does not finish");
    assert!(
        matches!(
            error,
            ProxyError::Startup(StartupError::Deadline {
                step: Step::RuntimeCredential,
                timeout,
                ..
            }) if timeout == Duration::from_secs(2)
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("within STARTUP_TIMEOUT (2s)"),
        "{error}"
    );
}
