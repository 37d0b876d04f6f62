//! Every variable of the proxy's configuration table in `docs/proxy.md`, tried as a user would
//! (`daedalus-proxy --check-config`): its documented default and values are taken and shown,
//! a value outside them is refused naming it. The list below is held to those pages and to
//! `--help`, so a flag added without a row, or a row without a test, fails here.

use daedalus_test_kit::documented::{Binary, Page, Setting, check_every_setting};
use serde_json::{Value, json};

/// The pages whose configuration tables document this binary.
const PAGES: &[Page] = &[Page {
    path: "docs/proxy.md",
    text: include_str!("../../docs/proxy.md"),
}];

/// A client-credentials grant but for the setting under test.
const GRANT: [(&str, &str); 3] = [
    ("RUNTIME_TOKEN_URL", "https://idp.example/token"),
    ("RUNTIME_CLIENT_ID", "proxy"),
    ("RUNTIME_CLIENT_SECRET", "s3cret"),
];

fn with_grant_but(mut setting: Setting, var: &str) -> Setting {
    for (other, value) in GRANT {
        if other != var {
            setting = setting.with(other, value);
        }
    }
    setting
}

/// The settings of NATS and the runtime the proxy feeds.
fn connections(dir: &str) -> Vec<Setting> {
    vec![
        Setting::new("AGENT_NAME", "/agent")
            .takes("reviewer", json!("reviewer"))
            .refuses("a.b")
            .refuses(""),
        Setting::new("NATS_URL", "/nats/url")
            .by_default(json!("nats://127.0.0.1:4222"))
            .takes(
                "nats://svc:pw@a:4222,nats://b:4222",
                json!("nats://***@a:4222,nats://b:4222"),
            )
            .refuses("http://nats:4222"),
        Setting::new("NATS_USER", "/nats/user")
            .with("NATS_PASSWORD", "pw")
            .takes("svc", json!("svc"))
            .any_value("a user name, checked by the server"),
        Setting::new("NATS_PASSWORD", "/nats/password")
            .with("NATS_USER", "svc")
            .takes("pw", json!("***"))
            .any_value("a password, checked by the server"),
        Setting::new("NATS_TOKEN", "/nats/token")
            .by_default(Value::Null)
            .takes("t0ken", json!("***"))
            .any_value("a token, checked by the server"),
        Setting::new("NATS_CREDS", "/nats/creds_file")
            .by_default(Value::Null)
            .takes(
                &format!("{dir}/nats.creds"),
                json!(format!("{dir}/nats.creds")),
            )
            .refuses(&format!("{dir}/missing.creds")),
        Setting::new("NATS_TLS_CA", "/nats/tls_ca")
            .by_default(Value::Null)
            .takes(&format!("{dir}/ca.pem"), json!(format!("{dir}/ca.pem")))
            .refuses(&format!("{dir}/missing.pem")),
        Setting::new("A2A_PORT", "/runtime_url")
            .by_default(json!("http://127.0.0.1:8080"))
            .takes("9000", json!("http://127.0.0.1:9000"))
            .refuses("80800"),
        Setting::new("RUNTIME_URL", "/runtime_url")
            .takes("http://localhost:9000/", json!("http://localhost:9000"))
            .takes("https://runtime.example", json!("https://runtime.example"))
            .refuses("ftp://runtime.example"),
        Setting::new("STARTUP_TIMEOUT", "/startup_timeout")
            .by_default(json!("1m"))
            .takes("2m", json!("2m"))
            .refuses("0")
            .refuses("soon"),
        Setting::new("TERMINATION_GRACE_PERIOD", "/termination_grace_period")
            .by_default(json!("30s"))
            .takes("2m", json!("2m"))
            .refuses("soon"),
        Setting::new("TASK_TIMEOUT", "/task_timeout")
            .by_default(json!("20m"))
            .takes("1h", json!("1h"))
            .refuses("0"),
        Setting::new("HEALTH_INTERVAL", "/health_interval")
            .by_default(json!("2s"))
            .takes("5s", json!("5s"))
            .refuses("0"),
        Setting::new("RUNTIME_DOWN_LIMIT", "/runtime_down_limit")
            .by_default(json!("30s"))
            .takes("2m", json!("2m"))
            .refuses("a while"),
        Setting::new("BUDGET_WAIT", "/budget_wait")
            .by_default(json!("1h"))
            .takes("10m", json!("10m"))
            .refuses("0"),
        Setting::new("STREAM_TASKS", "/stream_tasks")
            .by_default(json!("auto"))
            .choice("auto", json!("auto"))
            .choice("never", json!("never"))
            .refuses("maybe"),
    ]
}

/// The settings of the consumer, the streams and the proxy's own endpoints.
fn consuming() -> Vec<Setting> {
    vec![
        Setting::new("ACK_WAIT", "/ack_wait")
            .by_default(json!("30s"))
            .takes("1m", json!("1m"))
            .refuses("0")
            .refuses("500ms"),
        Setting::new("MAX_DELIVER", "/max_deliver")
            .by_default(json!(5))
            .takes("10", json!(10))
            .refuses("0"),
        Setting::new("CONCURRENCY", "/concurrency")
            .by_default(json!(1))
            .takes("32", json!(32))
            .refuses("0")
            .refuses("1025"),
        Setting::new("RETRY_BASE_DELAY", "/retry_base_delay")
            .by_default(json!("1s"))
            .takes("2s", json!("2s"))
            .refuses("later"),
        Setting::new("RETRY_MAX_DELAY", "/retry_max_delay")
            .by_default(json!("1m"))
            .takes("5m", json!("5m"))
            .refuses("later"),
        Setting::new("RESULT_STORE_TIMEOUT", "/result_store_timeout")
            .by_default(json!("2m"))
            .takes("30s", json!("30s"))
            .refuses("0"),
        Setting::new("PULL_EXPIRES", "/pull_expires")
            .by_default(json!("5s"))
            .takes("10s", json!("10s"))
            .refuses("0"),
        Setting::new("REPLY_TO_PREFIXES", "/reply_to_prefixes")
            .by_default(json!(["_INBOX."]))
            .choice("_INBOX.", json!(["_INBOX."]))
            .takes("_INBOX.,replies.", json!(["_INBOX.", "replies."]))
            .refuses("agent.")
            .refuses("$JS."),
        Setting::new("TASKS_STREAM", "/streams/tasks")
            .by_default(json!("AGENT_TASKS"))
            .takes("TASKS_2", json!("TASKS_2"))
            .refuses("bad name"),
        Setting::new("RESULTS_STREAM", "/streams/results")
            .by_default(json!("AGENT_RESULTS"))
            .takes("RESULTS_2", json!("RESULTS_2"))
            .refuses("a.b"),
        Setting::new("DEADLETTER_STREAM", "/streams/deadletter")
            .by_default(json!("AGENT_DEADLETTER"))
            .takes("DEAD_2", json!("DEAD_2"))
            .refuses("a*"),
        Setting::new("RESULTS_MAX_AGE", "/streams/results_max_age")
            .by_default(json!("24h"))
            .takes("168h", json!("168h"))
            .refuses("a week"),
        Setting::new("STREAM_REPLICAS", "/streams/replicas")
            .by_default(json!(1))
            .takes("3", json!(3))
            .refuses("0")
            .refuses("6"),
        Setting::new("PROXY_PORT", "/listen")
            .by_default(json!("0.0.0.0:9090"))
            .takes("9191", json!("0.0.0.0:9191"))
            .refuses("70000"),
        Setting::new("PROXY_HOST", "/listen")
            .takes("::1", json!("[::1]:9090"))
            .refuses("localhost"),
        Setting::new("LOG_LEVEL", "/log_level")
            .by_default(json!("info"))
            .takes("debug", json!("debug"))
            .refuses("info,["),
        Setting::new("LOG_FORMAT", "/log_format")
            .by_default(json!("json"))
            .takes("text", json!("text"))
            .refuses("xml"),
    ]
}

/// The settings of the proxy's own credential for the runtime, and of the runtime's card.
fn credential(dir: &str) -> Vec<Setting> {
    let grant = |var: &'static str| with_grant_but(Setting::new(var, "/runtime_credential"), var);
    vec![
        Setting::new("RUNTIME_CARD_KEYS", "/runtime_card_keys")
            .by_default(Value::Null)
            .takes(
                &format!("{dir}/card.jwks.json"),
                json!(format!("{dir}/card.jwks.json")),
            )
            .refuses(&format!("{dir}/missing.json"))
            .refuses(&format!("{dir}/no-keys.jwks.json"))
            .refuses(&format!("{dir}/empty")),
        Setting::new("RUNTIME_TOKEN_FILE", "/runtime_credential")
            .by_default(Value::Null)
            .takes(
                &format!("{dir}/token"),
                json!({"token_file": format!("{dir}/token")}),
            )
            .any_value(
                "a projected token may be written after the proxy starts: it is read when first needed, and waited for until STARTUP_TIMEOUT",
            ),
        grant("RUNTIME_TOKEN_URL")
            .takes(
                "https://idp.example/oauth2/token",
                json!({"client_credentials": {"token_url": "https://idp.example/oauth2/token"}}),
            )
            .refuses("idp.example/token"),
        grant("RUNTIME_CLIENT_ID")
            .takes(
                "proxy-1",
                json!({"client_credentials": {"client_id": "proxy-1"}}),
            )
            .refuses(""),
        grant("RUNTIME_CLIENT_SECRET")
            .takes(
                "an0ther",
                json!({"client_credentials": {"client_secret": "***"}}),
            )
            .refuses(""),
        with_grant_but(
            Setting::new("RUNTIME_CLIENT_SECRET_FILE", "/runtime_credential"),
            "RUNTIME_CLIENT_SECRET",
        )
        .takes(
            &format!("{dir}/secret"),
            json!({"client_credentials": {"client_secret": "***"}}),
        )
        .refuses(&format!("{dir}/missing"))
        .refuses(&format!("{dir}/empty")),
        // Without a grant, a scope or an audience is refused: it would be ignored.
        with_grant_but(Setting::new("RUNTIME_SCOPE", "/runtime_credential"), "")
            .takes("a2a", json!({"client_credentials": {"scope": "a2a"}}))
            .refuses_alone("a2a"),
        with_grant_but(Setting::new("RUNTIME_AUDIENCE", "/runtime_credential"), "")
            .takes(
                "daedalus",
                json!({"client_credentials": {"audience": "daedalus"}}),
            )
            .refuses_alone("daedalus"),
    ]
}

#[test]
fn every_documented_setting_takes_its_documented_values_and_refuses_others_by_name() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().to_str().expect("utf-8").to_owned();
    for (file, text) in [
        ("nats.creds", "-----BEGIN NATS USER JWT-----\n"),
        ("ca.pem", "-----BEGIN CERTIFICATE-----\n"),
        ("token", "a-token\n"),
        ("secret", "a-secret\n"),
        ("empty", "\n"),
        (
            "card.jwks.json",
            r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k"}]}"#,
        ),
        ("no-keys.jwks.json", r#"{"keys":[]}"#),
    ] {
        std::fs::write(dir.path().join(file), text).expect("written");
    }
    let binary = Binary {
        path: env!("CARGO_BIN_EXE_daedalus-proxy").into(),
        base_env: vec![("AGENT_NAME", "echo".to_owned())],
        dir: dir.path().to_owned(),
        not_in_help: &[],
    };
    let settings = [connections(&path), consuming(), credential(&path)].concat();
    let failures = check_every_setting(&binary, PAGES, &settings);
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
