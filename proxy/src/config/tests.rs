use std::collections::HashMap;
use std::time::Duration;

use super::*;

fn launch(args: &[&str], env: &[(&str, &str)]) -> Result<Launch, ConfigError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let command_line = std::iter::once("daedalus-proxy")
        .chain(args.iter().copied())
        .map(OsString::from);
    Launch::from_sources(command_line, &|k| env.get(k).cloned())
}

fn run_config(args: &[&str], env: &[(&str, &str)]) -> ProxyConfig {
    match launch(args, env) {
        Ok(Launch::Run(c)) => c,
        other => panic!("expected a run config, got {other:?}"),
    }
}

fn invalid_key(args: &[&str], env: &[(&str, &str)]) -> String {
    match launch(args, env) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

#[test]
fn defaults_follow_the_design() {
    let c = run_config(&[], &[("AGENT_NAME", "coder")]);
    assert_eq!(c.agent, "coder");
    assert_eq!(c.runtime_url, "http://127.0.0.1:8080");
    assert_eq!(c.startup_timeout, Duration::from_mins(1));
    assert_eq!(c.termination_grace_period, Duration::from_secs(30));
    assert_eq!(c.ack_wait, Duration::from_secs(30));
    assert_eq!(c.max_deliver, 5);
    assert_eq!(c.concurrency, 1);
    assert_eq!(c.streams.tasks, "AGENT_TASKS");
    assert_eq!(c.streams.results, "AGENT_RESULTS");
    assert_eq!(c.nats.url, "nats://127.0.0.1:4222");
    assert_eq!(c.runtime_down_limit, Duration::from_secs(30));
    assert_eq!(c.result_store_timeout, Duration::from_mins(2));
    assert_eq!(c.stream_tasks, StreamTasks::Auto);
}

#[test]
fn streaming_can_be_turned_off() {
    let c = run_config(&[], &[("AGENT_NAME", "a"), ("STREAM_TASKS", "never")]);
    assert_eq!(c.stream_tasks, StreamTasks::Never);
    assert!(c.to_pretty_json().contains("\"stream_tasks\": \"never\""));
}

#[test]
fn fault_bounds_come_from_the_environment() {
    let c = run_config(
        &[],
        &[
            ("AGENT_NAME", "a"),
            ("RUNTIME_DOWN_LIMIT", "0s"),
            ("RESULT_STORE_TIMEOUT", "10s"),
        ],
    );
    assert_eq!(
        c.runtime_down_limit,
        Duration::ZERO,
        "0: not ready once down"
    );
    assert_eq!(c.result_store_timeout, Duration::from_secs(10));
    assert_eq!(
        invalid_key(&[], &[("AGENT_NAME", "a"), ("RESULT_STORE_TIMEOUT", "0s")]),
        "RESULT_STORE_TIMEOUT"
    );
}

#[test]
fn the_runtime_is_found_by_port_or_url() {
    assert_eq!(
        run_config(&[], &[("AGENT_NAME", "a"), ("A2A_PORT", "9001")]).runtime_url,
        "http://127.0.0.1:9001"
    );
    let c = run_config(
        &[],
        &[
            ("AGENT_NAME", "a"),
            ("A2A_PORT", "9001"),
            ("RUNTIME_URL", "http://rt:8080/"),
        ],
    );
    assert_eq!(c.runtime_url, "http://rt:8080");
    assert_eq!(
        invalid_key(&[], &[("AGENT_NAME", "a"), ("RUNTIME_URL", "rt:8080")]),
        "RUNTIME_URL"
    );
}

#[test]
fn the_agent_is_required_and_subject_safe() {
    assert_eq!(invalid_key(&[], &[]), "--agent-name");
    assert_eq!(invalid_key(&[], &[("AGENT_NAME", "a.b")]), "AGENT_NAME");
}

#[test]
fn bad_values_name_their_variable() {
    let base = ("AGENT_NAME", "a");
    assert_eq!(invalid_key(&[], &[base, ("ACK_WAIT", "soon")]), "ACK_WAIT");
    assert_eq!(invalid_key(&[], &[base, ("ACK_WAIT", "500ms")]), "ACK_WAIT");
    assert_eq!(
        invalid_key(&[], &[base, ("MAX_DELIVER", "0")]),
        "MAX_DELIVER"
    );
    assert_eq!(
        invalid_key(&[], &[base, ("CONCURRENCY", "0")]),
        "CONCURRENCY"
    );
    assert_eq!(
        invalid_key(&[], &[base, ("TASKS_STREAM", "a.b")]),
        "TASKS_STREAM"
    );
    assert_eq!(
        invalid_key(&[], &[base, ("NATS_USER", "u")]),
        "--nats-password"
    );
    assert_eq!(
        invalid_key(&[], &[base, ("NATS_CREDS", "/no/such/file")]),
        "NATS_CREDS"
    );
}

#[test]
fn credentials_in_nats_url_are_masked_in_check_config_and_debug() {
    let c = run_config(
        &[],
        &[
            ("AGENT_NAME", "a"),
            ("NATS_URL", "nats://u:hunter2@n1:4222,nats://tok3n@n2:4222"),
        ],
    );
    assert_eq!(
        c.nats.servers(),
        ["nats://u:hunter2@n1:4222", "nats://tok3n@n2:4222"]
    );
    let shown = format!("{}\n{c:?}", c.to_pretty_json());
    assert!(
        !shown.contains("hunter2") && !shown.contains("tok3n"),
        "{shown}"
    );
    assert!(
        shown.contains("nats://***@n1:4222,nats://***@n2:4222"),
        "{shown}"
    );
}

#[test]
fn a_bad_server_url_or_reply_prefix_names_its_variable() {
    let base = ("AGENT_NAME", "a");
    assert_eq!(
        invalid_key(&[], &[base, ("NATS_URL", "nats://ok:4222,not a url")]),
        "NATS_URL"
    );
    for prefix in ["agent.", "$JS.", ">", "a.*.", "age"] {
        assert_eq!(
            invalid_key(&[], &[base, ("REPLY_TO_PREFIXES", prefix)]),
            "REPLY_TO_PREFIXES",
            "{prefix}"
        );
    }
    let c = run_config(&[], &[base, ("REPLY_TO_PREFIXES", "_INBOX., replies.app.")]);
    assert_eq!(c.reply_to_prefixes, ["_INBOX.", "replies.app."]);
    assert_eq!(run_config(&[], &[base]).reply_to_prefixes, ["_INBOX."]);
}

#[test]
fn an_overflowing_duration_is_a_usage_error_not_a_panic() {
    let huge = "153722867280912929m1hrs6148914691236517205333ms1281023894007607h";
    assert_eq!(
        invalid_key(&[], &[("AGENT_NAME", "a"), ("ACK_WAIT", huge)]),
        "ACK_WAIT"
    );
}

#[test]
fn credentials_are_masked_in_check_config() {
    let launch = launch(
        &["--check-config"],
        &[
            ("AGENT_NAME", "a"),
            ("NATS_USER", "u"),
            ("NATS_PASSWORD", "hunter2"),
        ],
    );
    match launch {
        Ok(Launch::CheckConfig(c)) => {
            let json = c.to_pretty_json();
            assert!(!json.contains("hunter2"), "{json}");
            assert!(json.contains("\"password\": \"***\""), "{json}");
            assert!(!format!("{c:?}").contains("hunter2"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn publish_takes_the_agent_from_a_flag_or_the_environment() {
    match launch(&["publish", "--agent", "x", "hello"], &[]) {
        Ok(Launch::Publish(p)) => {
            assert_eq!(
                (p.agent.as_str(), p.text.as_deref(), p.wait),
                ("x", Some("hello"), true)
            );
        }
        other => panic!("{other:?}"),
    }
    match launch(
        &["publish", "--no-wait"],
        &[("AGENT_NAME", "y"), ("NATS_URL", "nats://n:4222")],
    ) {
        Ok(Launch::Publish(p)) => {
            assert_eq!(
                (p.agent.as_str(), p.wait, p.nats.url.as_str()),
                ("y", false, "nats://n:4222")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(invalid_key(&["publish", "hi"], &[]), "--agent");
}

#[test]
fn the_runtime_credential_is_a_token_file_or_a_whole_grant_and_its_secret_never_prints() {
    let agent = ("AGENT_NAME", "coder");
    assert_eq!(run_config(&[], &[agent]).runtime_credential, None);
    let file = run_config(&[], &[agent, ("RUNTIME_TOKEN_FILE", "/var/run/token")]);
    assert_eq!(
        file.runtime_credential,
        Some(CredentialSource::TokenFile("/var/run/token".into()))
    );
    let grant = [
        agent,
        ("RUNTIME_TOKEN_URL", "https://idp.example/token"),
        ("RUNTIME_CLIENT_ID", "proxy"),
        ("RUNTIME_CLIENT_SECRET", "s3cr3t-value"),
        ("RUNTIME_AUDIENCE", "daedalus"),
    ];
    let c = run_config(&[], &grant);
    let Some(CredentialSource::ClientCredentials(client)) = &c.runtime_credential else {
        panic!("a grant: {:?}", c.runtime_credential)
    };
    assert_eq!(client.client_secret.expose(), "s3cr3t-value");
    assert_eq!(client.audience.as_deref(), Some("daedalus"));
    let shown = format!("{} {c:?}", c.to_pretty_json());
    assert!(!shown.contains("s3cr3t-value"), "{shown}");

    assert_eq!(
        invalid_key(
            &[],
            &[
                agent,
                ("RUNTIME_TOKEN_URL", "https://idp/token"),
                ("RUNTIME_CLIENT_ID", "p")
            ]
        ),
        "--runtime-client-secret",
        "a missing value is named by its flag"
    );
    assert_eq!(
        invalid_key(
            &[],
            &[
                agent,
                ("RUNTIME_CLIENT_ID", "p"),
                ("RUNTIME_CLIENT_SECRET", "s")
            ]
        ),
        "--runtime-token-url"
    );
    assert_eq!(
        invalid_key(
            &[],
            &[
                agent,
                ("RUNTIME_TOKEN_FILE", "/t"),
                ("RUNTIME_CLIENT_ID", "p")
            ]
        ),
        "RUNTIME_TOKEN_FILE"
    );
    assert_eq!(
        invalid_key(
            &[],
            &[
                agent,
                ("RUNTIME_TOKEN_URL", "ftp://idp/token"),
                ("RUNTIME_CLIENT_ID", "p"),
                ("RUNTIME_CLIENT_SECRET", "s")
            ]
        ),
        "RUNTIME_TOKEN_URL"
    );
}
