use std::collections::HashMap;
use std::time::Duration;

use super::*;

/// Launches with no agents.yaml (an empty working directory).
fn launch(args: &[&str], env: &[(&str, &str)]) -> Result<Launch, ConfigError> {
    let empty = tempfile::tempdir().unwrap();
    launch_in(empty.path(), args, env)
}

fn config(args: &[&str], env: &[(&str, &str)]) -> Config {
    match launch(args, env) {
        Ok(Launch::Run(c)) => c,
        other => panic!("expected a runnable config, got {other:?}"),
    }
}

fn invalid_key(args: &[&str], env: &[(&str, &str)]) -> String {
    match launch(args, env) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

#[test]
fn defaults_follow_the_contract() {
    let c = config(&[], &[]);
    assert_eq!(c.listen.port(), 8080);
    assert_eq!(c.termination_grace_period, Duration::from_secs(30));
    assert_eq!(c.limits.max_body_bytes, 16 * 1024 * 1024);
    assert_eq!(c.agent.model, deployment::ModelRef::Passthrough);
    assert_eq!(c.agent.name, "agent");
    assert_eq!(c.public_url_for(c.listen), "http://127.0.0.1:8080");
    assert_eq!(c.agent.skills.len(), 1);
    assert!(!c.agent.skills[0].tags.is_empty());
}

#[test]
fn environment_fills_what_flags_leave_out() {
    let c = config(
        &[],
        &[("A2A_PORT", "9000"), ("TERMINATION_GRACE_PERIOD", "2m")],
    );
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.termination_grace_period, Duration::from_mins(2));
    assert_eq!(c.public_url_for(c.listen), "http://127.0.0.1:9000");
}

#[test]
fn flags_win_over_the_environment() {
    let c = config(&["--port", "7000"], &[("A2A_PORT", "9000")]);
    assert_eq!(c.listen.port(), 7000);
}

#[test]
fn grace_period_takes_every_contract_spelling() {
    for (value, secs) in [("30s", 30), ("2m", 120), ("45", 45)] {
        let c = config(&[], &[("TERMINATION_GRACE_PERIOD", value)]);
        assert_eq!(
            c.termination_grace_period,
            Duration::from_secs(secs),
            "{value}"
        );
    }
}

#[test]
fn a_bad_value_from_the_environment_names_the_variable() {
    assert_eq!(
        invalid_key(&[], &[("TERMINATION_GRACE_PERIOD", "soon")]),
        "TERMINATION_GRACE_PERIOD"
    );
    assert_eq!(invalid_key(&[], &[("A2A_PORT", "80800")]), "A2A_PORT");
    assert_eq!(
        invalid_key(&[], &[("MAX_BODY_SIZE", "big")]),
        "MAX_BODY_SIZE"
    );
}

#[test]
fn a_bad_flag_is_a_cli_error() {
    assert!(matches!(
        launch(&["--port", "x"], &[]),
        Err(ConfigError::Cli(_))
    ));
    assert!(matches!(
        launch(&["--no-such-flag"], &[]),
        Err(ConfigError::Cli(_))
    ));
}

#[test]
fn agent_names_must_be_subject_tokens() {
    assert_eq!(
        invalid_key(&[], &[("AGENT_NAME", "my agent")]),
        "AGENT_NAME"
    );
    assert_eq!(invalid_key(&["--agent-name", "a.b"], &[]), "--agent-name");
    let long = "a".repeat(65);
    assert_eq!(invalid_key(&["--agent-name", &long], &[]), "--agent-name");
    assert_eq!(
        config(&["--agent-name", "Agent_1-x"], &[]).agent.name,
        "Agent_1-x"
    );
}

#[test]
fn skills_come_from_json_and_are_checked() {
    let good = r#"[{"id":"review","name":"Review","description":"Reviews code","tags":["code"]}]"#;
    let c = config(&[], &[("AGENT_SKILLS", good)]);
    assert_eq!(c.agent.skills[0].id, "review");
    for bad in [
        "not json",
        "[]",
        r#"[{"id":"x","name":"X","description":"d","tags":[]}]"#,
        r#"[{"id":"","name":"X","description":"d","tags":["t"]}]"#,
    ] {
        assert_eq!(
            invalid_key(&[], &[("AGENT_SKILLS", bad)]),
            "AGENT_SKILLS",
            "{bad}"
        );
    }
}

#[test]
fn unknown_model_providers_are_refused_by_key() {
    match launch(&[], &[("DEFAULT_MODEL", "mystery.model-1")]) {
        Err(ConfigError::Invalid { key, message }) => {
            assert_eq!(key, "DEFAULT_MODEL");
            assert!(message.contains("mystery.model-1"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_values_are_checked() {
    assert_eq!(invalid_key(&[], &[("PUBLIC_URL", "ftp://x")]), "PUBLIC_URL");
    assert_eq!(invalid_key(&[], &[("MAX_BODY_SIZE", "0")]), "MAX_BODY_SIZE");
    assert_eq!(
        invalid_key(&[], &[("LOG_LEVEL", "=nonsense=")]),
        "LOG_LEVEL"
    );
    let c = config(&[], &[("PUBLIC_URL", "https://agents.example.com/")]);
    assert_eq!(c.public_url.as_deref(), Some("https://agents.example.com"));
}

#[test]
fn check_config_is_its_own_launch_mode() {
    match launch(&["--check-config"], &[]) {
        Ok(Launch::CheckConfig(c)) => {
            let json = c.to_pretty_json();
            assert!(
                json.contains("\"termination_grace_period\": \"30s\""),
                "{json}"
            );
        }
        other => panic!("{other:?}"),
    }
}

fn launch_in(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Launch, ConfigError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let command_line = std::iter::once("daedalus-runtime")
        .chain(args.iter().copied())
        .map(OsString::from);
    Launch::from_sources(command_line, &|k| env.get(k).cloned(), dir)
}

fn project(yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agents.yaml"), yaml).unwrap();
    dir
}

fn run_in(dir: &std::path::Path, env: &[(&str, &str)]) -> Config {
    match launch_in(dir, &[], env) {
        Ok(Launch::Run(c)) => c,
        other => panic!("expected a runnable config, got {other:?}"),
    }
}

#[test]
fn the_example_project_loads_and_serves_its_top_level_agent() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/two-agents");
    let c = run_in(&example, &[]);
    assert_eq!(c.agent.name, "coordinator");
    assert_eq!(c.agent.skills[0].id, "plan");
    assert_eq!(
        c.agent.description,
        "Plans the work and delegates research."
    );
    assert_eq!(c.deployment.agents.len(), 2);
    assert_eq!(c.deployment.version, c.agent.version);
    let json = c.to_pretty_json();
    assert!(json.contains("\"forward_inbound_auth\": true"), "{json}");
}

#[test]
fn agent_name_picks_the_served_agent_when_several_could() {
    let dir = project("agents: { a: {}, b: {} }");
    match launch_in(dir.path(), &[], &[]) {
        Err(ConfigError::Invalid { key, message }) => {
            assert_eq!(key, "--agent-name");
            assert!(message.contains("set AGENT_NAME"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(run_in(dir.path(), &[("AGENT_NAME", "b")]).agent.name, "b");
    assert_eq!(
        invalid_key_in(dir.path(), &[("AGENT_NAME", "c")]),
        "AGENT_NAME"
    );
}

fn invalid_key_in(dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    match launch_in(dir, &[], env) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

#[test]
fn deployment_errors_stop_startup_with_the_file_and_key() {
    let dir = project("agents: { a: { servers: [ghost] } }");
    match launch_in(dir.path(), &[], &[]) {
        Err(ConfigError::Invalid { message, .. }) => {
            assert!(
                message.contains("agents.yaml: agents.a.servers"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_served_agent_runs_on_its_configured_provider() {
    let dir = project("agents: { a: { model: openai.gpt-4o } }");
    assert_eq!(
        run_in(dir.path(), &[]).agent.model,
        deployment::ModelRef::OpenAi("gpt-4o".into())
    );
    let c = config(&[], &[("DEFAULT_MODEL", "anthropic.claude-x")]);
    assert_eq!(
        c.agent.model,
        deployment::ModelRef::Anthropic("claude-x".into())
    );
}

#[test]
fn the_logger_level_of_the_file_applies_unless_log_level_is_set() {
    let dir = project("logger: { level: debug }\nagents: { a: {} }");
    assert_eq!(run_in(dir.path(), &[]).log_level, "debug");
    assert_eq!(
        run_in(dir.path(), &[("LOG_LEVEL", "warn")]).log_level,
        "warn"
    );
}

#[test]
fn sessions_db_names_a_sqlite_file_or_a_nats_kv_bucket() {
    assert_eq!(
        SessionsDb::parse("/data/s.sqlite"),
        Ok(SessionsDb::Sqlite("/data/s.sqlite".into()))
    );
    assert_eq!(
        SessionsDb::parse("nats://u:p@nats:4222/team-a"),
        Ok(SessionsDb::NatsKv {
            url: "nats://u:p@nats:4222".into(),
            bucket: "team-a".into()
        })
    );
    assert_eq!(
        SessionsDb::parse("tls://nats:4222"),
        Ok(SessionsDb::NatsKv {
            url: "tls://nats:4222".into(),
            bucket: DEFAULT_SESSIONS_BUCKET.into()
        })
    );
    assert_eq!(
        SessionsDb::parse("nats://nats:4222/bad.bucket"),
        Err(stores::StoreUrlError::BadBucket {
            bucket: "bad.bucket".into()
        })
    );
    assert_eq!(
        SessionsDb::parse("nats:///b"),
        Err(stores::StoreUrlError::NoServer {
            scheme: "nats://".into()
        })
    );
    assert_eq!(
        SessionsDb::parse("postgres://db/x"),
        Err(stores::StoreUrlError::UnknownScheme {
            scheme: "postgres".into()
        })
    );
    assert_eq!(SessionsDb::parse("  "), Err(stores::StoreUrlError::Empty));
    assert_eq!(redact_url("nats://u:s3cret@h:1"), "nats://***@h:1");
    assert_eq!(
        invalid_key(&[], &[("SESSIONS_DB", "nats://h/bad.bucket")]),
        "SESSIONS_DB"
    );
}

#[test]
fn tasks_db_is_memory_by_default_or_a_sqlite_file_or_a_nats_kv_bucket() {
    assert_eq!(TasksDb::parse("memory"), Ok(TasksDb::Memory));
    assert_eq!(
        TasksDb::parse("/data/t.sqlite"),
        Ok(TasksDb::Sqlite {
            path: "/data/t.sqlite".into()
        })
    );
    assert_eq!(
        TasksDb::parse("nats://nats:4222"),
        Ok(TasksDb::NatsKv {
            url: "nats://nats:4222".into(),
            bucket: DEFAULT_TASKS_BUCKET.into()
        })
    );
    assert_eq!(
        TasksDb::parse("nats://nats:4222/team-tasks"),
        Ok(TasksDb::NatsKv {
            url: "nats://nats:4222".into(),
            bucket: "team-tasks".into()
        })
    );
    assert_eq!(
        invalid_key(&[], &[("TASKS_DB", "nats://h/bad.bucket")]),
        "TASKS_DB"
    );
}

#[test]
fn an_overflowing_duration_names_its_variable_instead_of_panicking() {
    let huge = "153722867280912929m1hrs6148914691236517205333ms1281023894007607h";
    assert_eq!(
        invalid_key(&[], &[("REQUEST_TIMEOUT", huge)]),
        "REQUEST_TIMEOUT"
    );
}

#[test]
fn max_connections_must_be_positive() {
    assert_eq!(
        invalid_key(&[], &[("MAX_CONNECTIONS", "0")]),
        "MAX_CONNECTIONS"
    );
    assert_eq!(config(&[], &[]).limits.max_connections, 20_000);
}

#[test]
fn turns_are_bounded_by_bytes_per_process_and_per_agent_with_a_count_rail() {
    let defaults = config(&[], &[]).limits;
    assert_eq!(defaults.turn_memory_bytes, 512 * 1024 * 1024);
    assert_eq!(
        defaults.agent_turn_memory_bytes, defaults.turn_memory_bytes,
        "one agent may use all of it unless told otherwise"
    );
    assert_eq!(defaults.max_concurrent_tasks, 100_000);
    let set = config(
        &[],
        &[("TURN_MEMORY", "64MiB"), ("AGENT_TURN_MEMORY", "16MiB")],
    )
    .limits;
    assert_eq!(
        (set.turn_memory_bytes, set.agent_turn_memory_bytes),
        (64 << 20, 16 << 20)
    );
    assert_eq!(invalid_key(&[], &[("TURN_MEMORY", "lots")]), "TURN_MEMORY");
}

#[test]
fn session_ttl_defaults_to_thirty_days_and_zero_keeps_forever() {
    assert_eq!(
        config(&[], &[]).session_ttl,
        Some(Duration::from_hours(720))
    );
    assert_eq!(config(&[], &[("SESSION_TTL", "0")]).session_ttl, None);
    assert_eq!(invalid_key(&[], &[("SESSION_TTL", "soon")]), "SESSION_TTL");
}

/// [`Launch::reread`] in `dir` with `env`, the A2A face serving `serving` now.
fn reread_in(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    serving: &str,
) -> Result<Config, ConfigError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let args = vec![OsString::from("daedalus-runtime")];
    Launch::reread(args, &|k| env.get(k).cloned(), dir, serving)
}

#[test]
fn a_reload_keeps_the_served_agent_when_another_top_level_agent_is_added() {
    let dir = project("agents:\n  alpha: {}\n  beta: {}\n");
    // At startup, two top-level agents without AGENT_NAME are ambiguous...
    assert!(matches!(
        launch_in(dir.path(), &[], &[]),
        Err(ConfigError::Invalid { .. })
    ));
    // ...but a reload keeps the agent already served.
    let config = reread_in(dir.path(), &[], "alpha").unwrap();
    assert_eq!(config.agent.name, "alpha");
}

#[test]
fn a_reload_whose_served_agent_is_gone_chooses_by_the_startup_rules() {
    let dir = project("agents:\n  gamma: {}\n");
    assert_eq!(
        reread_in(dir.path(), &[], "alpha").unwrap().agent.name,
        "gamma"
    );
    let ambiguous = project("agents:\n  gamma: {}\n  delta: {}\n");
    assert!(matches!(
        reread_in(ambiguous.path(), &[], "alpha"),
        Err(ConfigError::Invalid { .. })
    ));
}

#[test]
fn agent_name_from_the_environment_wins_over_the_served_agent() {
    let dir = project("agents:\n  alpha: {}\n  beta: {}\n");
    let config = reread_in(dir.path(), &[("AGENT_NAME", "beta")], "alpha").unwrap();
    assert_eq!(config.agent.name, "beta");
}

#[test]
fn a_bad_file_on_reload_names_its_key() {
    let dir = project("agents:\n  alpha: { model: nope.x }\n");
    match reread_in(dir.path(), &[], "alpha") {
        Err(e) => assert!(e.to_string().contains("agents.alpha.model"), "{e}"),
        Ok(c) => panic!("a bad file was accepted: {c:?}"),
    }
}

#[test]
fn pallas_log_knobs_are_aliases_and_the_root_level_is_for_third_party_crates() {
    assert_eq!(
        config(&[], &[("PALLAS_LOG_LEVEL", "debug")]).log_level,
        "debug"
    );
    assert_eq!(
        config(&[], &[("PALLAS_LOG_LEVEL", "debug"), ("LOG_LEVEL", "warn")]).log_level,
        "warn",
        "LOG_LEVEL wins"
    );
    assert_eq!(
        config(
            &[],
            &[
                ("PALLAS_LOG_LEVEL", "debug"),
                ("PALLAS_ROOT_LOG_LEVEL", "warn")
            ]
        )
        .log_level,
        "warn,daedalus_runtime=debug,daedalus_contract=debug"
    );
    assert_eq!(
        config(
            &[],
            &[
                ("LOG_LEVEL", "info,rmcp=debug"),
                ("PALLAS_ROOT_LOG_LEVEL", "error")
            ]
        )
        .log_level,
        "error,info,rmcp=debug"
    );
    assert_eq!(
        invalid_key(&[], &[("PALLAS_ROOT_LOG_LEVEL", "loud")]),
        "PALLAS_ROOT_LOG_LEVEL"
    );
    assert_eq!(
        invalid_key(&[], &[("PALLAS_LOG_LEVEL", "info,=[")]),
        "PALLAS_LOG_LEVEL"
    );
}

#[test]
fn agent_mode_serves_one_agent_and_builds_only_it_and_its_sub_agents() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/two-agents");
    let run = |args: &[&str], env: &[(&str, &str)]| match launch_in(&example, args, env) {
        Ok(Launch::Run(c)) => c,
        other => panic!("expected a runnable config, got {other:?}"),
    };
    let names = |c: &Config| -> Vec<String> {
        c.deployment.agents.iter().map(|a| a.name.clone()).collect()
    };
    let coordinator = run(&["--agent", "coordinator"], &[]);
    assert_eq!(coordinator.agent.name, "coordinator");
    assert_eq!(
        names(&coordinator),
        ["coordinator", "researcher"],
        "its sub-agent is built"
    );
    assert!(coordinator.deployment.serves("coordinator"));
    assert!(
        !coordinator.deployment.serves("researcher"),
        "built, not served"
    );
    let researcher = run(&[], &[("SERVE_AGENT", "researcher")]);
    assert_eq!(researcher.agent.name, "researcher");
    assert_eq!(names(&researcher), ["researcher"]);
    assert_eq!(
        invalid_key_with(&example, &["--agent", "ghost"]),
        "--agent",
        "an unknown agent names the flag"
    );
}

fn invalid_key_with(dir: &std::path::Path, args: &[&str]) -> String {
    match launch_in(dir, args, &[]) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

#[test]
fn agents_on_their_own_ports_get_the_registry_on_24200_unless_the_file_says() {
    let own = project("agents: { a: { port: 24301 } }");
    assert_eq!(
        run_in(own.path(), &[]).deployment.registry_port,
        Some(24200)
    );
    let named = project("registry_port: 24399\nagents: { a: { port: 24301 } }");
    assert_eq!(
        run_in(named.path(), &[]).deployment.registry_port,
        Some(24399)
    );
    let none = project("agents: { a: {} }");
    assert_eq!(run_in(none.path(), &[]).deployment.registry_port, None);
}

#[test]
fn the_log_file_is_log_file_or_pallas_log_file() {
    assert_eq!(config(&[], &[]).log_file, None);
    let pallas = config(&[], &[("PALLAS_LOG_FILE", "/var/log/pallas.log")]);
    assert_eq!(
        pallas.log_file.as_deref(),
        Some(std::path::Path::new("/var/log/pallas.log"))
    );
    let both = config(
        &[],
        &[
            ("PALLAS_LOG_FILE", "/var/log/pallas.log"),
            ("LOG_FILE", "/var/log/r.log"),
        ],
    );
    assert_eq!(
        both.log_file.as_deref(),
        Some(std::path::Path::new("/var/log/r.log"))
    );
}

#[test]
fn authentication_comes_from_the_environment_over_the_file_and_prints_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.yaml");
    std::fs::write(&keys, "keys: []\n").unwrap();
    std::fs::write(
        dir.path().join("agents.yaml"),
        format!(
            "auth:\n  issuer: https://file-idp.example\n  audience: from-file\n  tenant_claim: org\n  api_keys_file: {}\nagents:\n  a: {{ instruction: hi }}\n",
            keys.display()
        ),
    )
    .unwrap();
    let env = [(
        "AUTH_ISSUER",
        "https://user:secret@env-idp.example/realm?key=hidden",
    )];
    let config = match launch_in(dir.path(), &["--check-config"], &env) {
        Ok(Launch::CheckConfig(c)) => c,
        other => panic!("{other:?}"),
    };
    let tokens = config.auth.tokens.as_ref().expect("tokens on");
    assert_eq!(
        tokens.issuer,
        "https://user:secret@env-idp.example/realm?key=hidden"
    );
    assert_eq!(
        tokens.audience, "from-file",
        "the file fills what the environment does not"
    );
    assert_eq!(config.auth.tenant_claim.as_deref(), Some("org"));
    assert!(config.auth.is_on());
    let json = config.to_pretty_json();
    assert!(json.contains("\"auth\""), "{json}");
    assert!(
        !json.contains("secret") && !json.contains("hidden"),
        "{json}"
    );

    // A wrong key is named as the variable that set it, or as the file's key.
    match launch_in(dir.path(), &[], &[("AUTH_CLOCK_SKEW", "1h")]) {
        Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "AUTH_CLOCK_SKEW"),
        other => panic!("{other:?}"),
    }
    std::fs::write(
        dir.path().join("agents.yaml"),
        "auth:\n  issuer: https://idp.example\nagents:\n  a: { instruction: hi }\n",
    )
    .unwrap();
    match launch_in(dir.path(), &[], &[]) {
        Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "auth.audience"),
        other => panic!("{other:?}"),
    }
    std::fs::write(
        dir.path().join("agents.yaml"),
        "auth:\n  issuer: https://idp.example\n  audiense: typo\nagents:\n  a: { instruction: hi }\n",
    )
    .unwrap();
    assert!(
        launch_in(dir.path(), &[], &[]).is_err(),
        "an unknown key in auth: is an error"
    );
}

#[test]
fn check_config_refuses_what_startup_would_stop_on_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let missing = missing.to_str().unwrap();
    assert_eq!(
        invalid_key(&[], &[("AUTH_API_KEYS_FILE", missing)]),
        "AUTH_API_KEYS_FILE"
    );
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "keys: [ {").unwrap();
    assert_eq!(
        invalid_key(&[], &[("AUTH_API_KEYS_FILE", broken.to_str().unwrap())]),
        "AUTH_API_KEYS_FILE"
    );
    let issuer = [
        ("AUTH_ISSUER", "https://idp.example"),
        ("AUTH_AUDIENCE", "d"),
        ("AUTH_JWKS_FILE", missing),
    ];
    assert_eq!(invalid_key(&[], &issuer), "AUTH_JWKS_FILE");
    for (var, value) in [
        ("TURN_MEMORY", "0"),
        ("AGENT_TURN_MEMORY", "0"),
        ("SESSIONS_DB", "redis://cache:6379"),
        ("TASKS_DB", "postgres://db/tasks"),
        ("REPLICA_ID", "a\nb"),
    ] {
        assert_eq!(invalid_key(&[], &[(var, value)]), var, "{var}={value:?}");
    }
    let long = "r".repeat(254);
    assert_eq!(invalid_key(&[], &[("REPLICA_ID", &long)]), "REPLICA_ID");
}

fn test_key(name: &str) -> String {
    format!(
        "{}/../schemas/tests/card_keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn invalid_in(dir: &std::path::Path, env: &[(&str, &str)]) -> (String, String) {
    match launch_in(dir, &[], env) {
        Err(ConfigError::Invalid { key, message }) => (key, message),
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
}

#[test]
fn the_card_signing_key_comes_from_the_settings_else_the_served_agent() {
    let dir = project(&format!(
        "agents: {{ a: {{ card_signing: {{ key_file: \"{}\", kid: agent-key }} }} }}",
        test_key("ed25519.pem")
    ));
    let from_agent = run_in(dir.path(), &[]).card_signing.expect("a key");
    assert_eq!(from_agent.key.kid(), "agent-key");
    assert_eq!(from_agent.key.algorithm().name(), "EdDSA");
    let from_settings = run_in(
        dir.path(),
        &[
            ("CARD_SIGNING_KEY", &test_key("es256.pem")),
            ("CARD_SIGNING_OVERLAP", "10m"),
        ],
    )
    .card_signing
    .expect("a key");
    assert_eq!(from_settings.key.algorithm().name(), "ES256");
    assert_eq!(from_settings.overlap, Duration::from_mins(10));
    let shown = run_in(dir.path(), &[]).to_pretty_json();
    assert!(
        shown.contains("\"kid\": \"agent-key\"") && !shown.contains("PRIVATE"),
        "{shown}"
    );

    let none = project("agents: { a: {} }");
    assert!(run_in(none.path(), &[]).card_signing.is_none());
    assert_eq!(
        invalid_key_in(none.path(), &[("CARD_SIGNING_KID", "k")]),
        "CARD_SIGNING_KID"
    );
}

#[test]
fn an_unusable_card_signing_key_is_refused_naming_where_it_was_set() {
    let none = project("agents: { a: {} }");
    let (key, message) = invalid_in(none.path(), &[("CARD_SIGNING_KEY", &test_key("p384.pem"))]);
    assert_eq!(key, "CARD_SIGNING_KEY");
    assert!(message.contains("ES256"), "{message}");
    let (key, _) = invalid_in(none.path(), &[("CARD_SIGNING_KEY", "/nonexistent/key.pem")]);
    assert_eq!(key, "CARD_SIGNING_KEY");
    let (key, _) = invalid_in(
        none.path(),
        &[
            ("CARD_SIGNING_KEY", &test_key("es256.pem")),
            ("CARD_SIGNING_JKU", "ftp://keys"),
        ],
    );
    assert_eq!(key, "CARD_SIGNING_JKU");
    let agent = project(&format!(
        "agents: {{ a: {{ card_signing: {{ key_file: \"{}\" }} }} }}",
        test_key("es256.public.jwk")
    ));
    let (key, message) = invalid_in(agent.path(), &[]);
    assert_eq!(key, "agents.a.card_signing.key_file");
    assert!(message.contains("public key"), "{message}");
}

#[test]
fn an_a2a_agents_trust_is_checked_and_inherits_the_default() {
    let jwk = std::fs::read_to_string(test_key("es256.public.jwk")).unwrap();
    let mut pinned: serde_json::Value = serde_json::from_str(&jwk).unwrap();
    pinned["kid"] = serde_json::json!("k1");
    let dir = project(&format!(
        "mcp:\n  trust: {{ policy: required, keys: [{pinned}] }}\n  servers:\n    \
         a: {{ type: a2a, url: \"http://a\" }}\n    \
         b: {{ type: a2a, url: \"http://b\", trust: {{ policy: if_signed, jwks_url: \"https://b/jwks.json\" }} }}\n\
         agents: {{ x: {{ servers: [a, b] }} }}\n"
    ));
    let c = run_in(dir.path(), &[]);
    let a = &c.deployment.mcp_servers["a"].trust;
    assert_eq!(a.policy, deployment::TrustPolicy::Required);
    assert_eq!(a.keys.len(), 1);
    let b = &c.deployment.mcp_servers["b"].trust;
    assert_eq!(b.policy, deployment::TrustPolicy::IfSigned);
    assert!(
        b.keys.is_empty(),
        "a trust of its own replaces the default whole"
    );

    for (yaml, path) in [
        (
            "mcp: { servers: { a: { type: a2a, url: \"http://a\", trust: { policy: required } } } }\nagents: { x: { servers: [a] } }",
            "mcp.servers.a.trust.policy",
        ),
        (
            "mcp: { servers: { a: { type: a2a, url: \"http://a\", trust: { policy: always, keys: [] } } } }\nagents: { x: { servers: [a] } }",
            "mcp.servers.a.trust.policy",
        ),
        (
            "mcp: { servers: { m: { url: \"http://m\", trust: { policy: off } } } }\nagents: { x: { servers: [m] } }",
            "mcp.servers.m.trust",
        ),
        (
            "mcp: { trust: { policy: required, keys: [{ kty: oct, k: c2VjcmV0, kid: h }] }, servers: {} }\nagents: { x: {} }",
            "mcp.trust.keys[0]",
        ),
        (
            "mcp: { trust: { policy: required, jwks_file: /nonexistent.json }, servers: {} }\nagents: { x: {} }",
            "mcp.trust.jwks_file",
        ),
    ] {
        let dir = project(yaml);
        let (_, message) = invalid_in(dir.path(), &[]);
        assert!(message.contains(path), "{path}: {message}");
    }
}

#[test]
fn a_push_allow_list_entry_and_a_replica_id_are_refused_by_kind() {
    let entries = |e: &str| vec![e.to_owned()];
    assert_eq!(
        push::AllowList::parse(&entries("10.0.0.0/33")),
        Err(push::AllowListError::BadPrefix("10.0.0.0/33".into()))
    );
    assert_eq!(
        push::AllowList::parse(&entries("ten/8")),
        Err(push::AllowListError::NotARange("ten/8".into()))
    );
    assert!(push::AllowList::parse(&entries("hooks.example.com")).is_ok());
    assert_eq!(
        checks::validate_replica_id(&"r".repeat(254)),
        Err(checks::ReplicaIdError::TooLong(254))
    );
    assert_eq!(
        checks::validate_replica_id("pod\n1"),
        Err(checks::ReplicaIdError::ControlCharacter)
    );
    assert_eq!(checks::validate_replica_id("pod-1"), Ok("pod-1".into()));
}
