//! Every variable of the runtime's configuration tables in `docs/`, tried as a user would
//! (`daedalus-runtime --check-config`): its documented default and values are taken and shown,
//! a value outside them is refused naming it. The list below is held to those pages and to
//! `--help`, so a flag added without a row, or a row without a test, fails here.

use daedalus_test_kit::documented::{Binary, Page, Setting, check_every_setting};
use serde_json::{Value, json};

/// The pages whose configuration tables document this binary.
const PAGES: &[Page] = &[
    Page {
        path: "docs/running.md",
        text: include_str!("../../docs/running.md"),
    },
    Page {
        path: "docs/identity.md",
        text: include_str!("../../docs/identity.md"),
    },
    Page {
        path: "docs/mcp-face.md",
        text: include_str!("../../docs/mcp-face.md"),
    },
];
const KEY_HASH: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

/// An issuer for the settings that need tokens on.
const ISSUER: &str = "https://idp.example";

/// A byte count as `--check-config` shows it.
fn size(bytes: u64) -> Value {
    json!(bytes)
}

/// The settings of what the runtime serves, and as what.
fn serving(dir: &str) -> Vec<Setting> {
    vec![
        Setting::new("A2A_PORT", "/listen")
            .by_default(json!("0.0.0.0:8080"))
            .takes("9000", json!("0.0.0.0:9000"))
            .refuses("80800")
            .refuses("http"),
        Setting::new("A2A_HOST", "/listen")
            .takes("127.0.0.1", json!("127.0.0.1:8080"))
            .takes("::1", json!("[::1]:8080"))
            .refuses("localhost"),
        Setting::new("AGENT_NAME", "/agent/name")
            .by_default(json!("agent"))
            .takes("reviewer", json!("reviewer"))
            .refuses("a.b")
            .refuses(&"x".repeat(65)),
        Setting::new("SERVE_AGENT", "/deployment/serve_only")
            .by_default(Value::Null)
            .takes("agent", json!("agent"))
            .refuses("nobody"),
        Setting::new("AGENT_DESCRIPTION", "/agent/description")
            .by_default(json!("Daedalus agent agent"))
            .takes("Reviews pull requests", json!("Reviews pull requests"))
            .any_value("a card's free-text description"),
        Setting::new("AGENT_VERSION", "/agent/version")
            .by_default(json!(env!("CARGO_PKG_VERSION")))
            .takes("2.1.0", json!("2.1.0"))
            .any_value("the card's version is the deployment's own text"),
        Setting::new("AGENT_SKILLS", "/agent/skills/0/id")
            .by_default(json!("chat"))
            .takes(
                r#"[{"id":"review","name":"Review","description":"Reviews code","tags":["code"]}]"#,
                json!("review"),
            )
            .refuses("[]")
            .refuses("not json")
            .refuses(r#"[{"id":"","name":"n","description":"d","tags":["t"]}]"#),
        Setting::new("PUBLIC_URL", "/public_url")
            .by_default(Value::Null)
            .takes(
                "https://agents.example/reviewer/",
                json!("https://agents.example/reviewer"),
            )
            .refuses("ftp://agents.example/"),
        Setting::new("DEFAULT_MODEL", "/agent/model")
            .by_default(json!("passthrough"))
            .choice("passthrough", json!("passthrough"))
            .takes("tck", json!("tck"))
            .takes("openai.gpt-4o", json!("openai.gpt-4o"))
            .takes(
                "anthropic.claude-sonnet-4-5",
                json!("anthropic.claude-sonnet-4-5"),
            )
            .refuses("nope.model"),
        Setting::new("AGENTS_CONFIG", "/deployment/sources")
            .by_default(json!([]))
            .takes(
                &format!("{dir}/agents.yaml"),
                json!([format!("{dir}/agents.yaml")]),
            )
            .refuses(&format!("{dir}/missing.yaml")),
        Setting::new("PALLAS_AGENTS_CONFIG", "/deployment/sources")
            .takes(
                &format!("{dir}/agents.yaml"),
                json!([format!("{dir}/agents.yaml")]),
            )
            .refuses(&format!("{dir}/missing.yaml")),
        Setting::new("WORK_DIR", "/work_dir")
            .takes(dir, json!(dir))
            .any_value("a directory made at startup if missing"),
    ]
}

/// The settings of requests, time limits and the stores.
fn limits(dir: &str) -> Vec<Setting> {
    vec![
        Setting::new("MAX_BODY_SIZE", "/limits/max_body_bytes")
            .by_default(size(16 << 20))
            .choice("1048576", size(1_048_576))
            .choice("512KiB", size(512 << 10))
            .choice("10MB", size(10_000_000))
            .refuses("big")
            .refuses("0"),
        Setting::new("HEADER_READ_TIMEOUT", "/limits/header_read_timeout")
            .by_default(json!("10s"))
            .takes("30s", json!("30s"))
            .refuses("soon"),
        Setting::new("MAX_CONNECTIONS", "/limits/max_connections")
            .by_default(json!(20000))
            .takes("100", json!(100))
            .refuses("0")
            .refuses("-1"),
        Setting::new("BODY_READ_TIMEOUT", "/limits/body_read_timeout")
            .by_default(json!("30s"))
            .takes("1m", json!("1m"))
            .refuses("forever"),
        Setting::new("REQUEST_TIMEOUT", "/limits/request_timeout")
            .by_default(json!("15m"))
            .takes("1h", json!("1h"))
            .refuses("10 minutes"),
        Setting::new("TERMINATION_GRACE_PERIOD", "/termination_grace_period")
            .by_default(json!("30s"))
            .choice("30s", json!("30s"))
            .choice("2m", json!("2m"))
            .choice("45", json!("45s"))
            .refuses("soon"),
        Setting::new("MCP_ALLOWED_HOSTS", "/mcp_allowed_hosts")
            .by_default(json!([]))
            .takes(
                "agents.example, tools.internal",
                json!(["agents.example", "tools.internal"]),
            )
            .choice("*", json!(["*"]))
            .any_value("Host values are matched, never resolved"),
        Setting::new("SESSIONS_DB", "/sessions_db")
            .by_default(json!({"sqlite": format!("{dir}/daedalus-tasks.sqlite")}))
            .choice(":memory:", json!({"sqlite": ":memory:"}))
            .choice("off", Value::Null)
            .takes(
                &format!("{dir}/c.sqlite"),
                json!({"sqlite": format!("{dir}/c.sqlite")}),
            )
            .takes(
                "nats://user:pass@nats:4222/chats",
                json!({"nats_kv": {"url": "nats://***@nats:4222", "bucket": "chats"}}),
            )
            .takes(
                "nats://nats:4222",
                json!({"nats_kv": {"bucket": "daedalus-sessions"}}),
            )
            .refuses("redis://cache:6379")
            .refuses("nats://nats:4222/bad.bucket")
            .refuses(""),
        Setting::new("SESSION_TTL", "/session_ttl")
            .by_default(json!("720h"))
            .choice("0", json!("forever"))
            .takes("24h", json!("24h"))
            .refuses("a month"),
        Setting::new("MAX_TASKS", "/max_tasks")
            .by_default(json!(10000))
            .takes("50", json!(50))
            .refuses("0"),
        Setting::new("TASK_MEMORY", "/limits/task_memory_bytes")
            .by_default(size(64 << 20))
            .takes("1GiB", size(1 << 30))
            .refuses("lots"),
        Setting::new("TASK_TTL", "/task_ttl")
            .by_default(json!("24h"))
            .takes("1h", json!("1h"))
            .refuses("a day"),
        Setting::new("TASKS_DB", "/tasks_db")
            .by_default(json!({"kind": "sqlite", "path": format!("{dir}/daedalus-tasks.sqlite")}))
            .choice("memory", json!({"kind": "memory"}))
            .takes(
                &format!("{dir}/tasks.sqlite"),
                json!({"kind": "sqlite", "path": format!("{dir}/tasks.sqlite")}),
            )
            .takes(
                "nats://nats:4222",
                json!({"kind": "nats_kv", "bucket": "daedalus-tasks"}),
            )
            .refuses("postgres://db/tasks"),
        Setting::new("REPLICA_ID", "/replica_id")
            .by_default(Value::Null)
            .takes("runtime-0:8080", json!("runtime-0:8080"))
            .refuses("a\nb")
            .refuses(&"r".repeat(254)),
    ]
}

/// The settings of push notifications, replicas, turn memory and logs.
fn push_and_logs(dir: &str) -> Vec<Setting> {
    vec![
        Setting::new("PUSH_NOTIFICATIONS", "/push/enabled")
            .by_default(json!(true))
            .choice("on", json!(true))
            .choice("off", json!(false))
            .choice("true", json!(true))
            .choice("false", json!(false))
            .choice("yes", json!(true))
            .choice("no", json!(false))
            .choice("1", json!(true))
            .choice("0", json!(false))
            .refuses("maybe")
            .refuses(""),
        Setting::new("A2A_STREAMING", "/a2a_streaming")
            .by_default(json!(true))
            .choice("on", json!(true))
            .choice("off", json!(false))
            .choice("no", json!(false))
            .refuses("maybe"),
        Setting::new("PUSH_ALLOW_HOSTS", "/push/allow")
            .by_default(json!({"names": [], "ranges": []}))
            .choice(
                "127.0.0.1,10.0.0.0/8",
                json!({"names": [], "ranges": ["127.0.0.1/32", "10.0.0.0/8"]}),
            )
            .takes("hooks.internal", json!({"names": ["hooks.internal"]}))
            .refuses("10.0.0.0/33"),
        Setting::new("PUSH_TIMEOUT", "/push/timeout")
            .by_default(json!("10s"))
            .takes("3s", json!("3s"))
            .refuses("0")
            .refuses("quick"),
        Setting::new("PUSH_RETRY_FOR", "/push/retry_for")
            .by_default(json!("5m"))
            .takes("1h", json!("1h"))
            .refuses("long"),
        Setting::new("PUSH_QUEUE_BYTES", "/push/queue_bytes")
            .by_default(size(64 << 20))
            .takes("8MiB", size(8 << 20))
            .refuses("0")
            .refuses("much"),
        Setting::new("REPLICA_LEASE", "/replica_lease")
            .by_default(json!("5s"))
            .takes("1s", json!("1s"))
            .takes("10m", json!("10m"))
            .refuses("11m")
            .refuses("500ms"),
        Setting::new("TURN_MEMORY", "/limits/turn_memory_bytes")
            .by_default(size(512 << 20))
            .takes("1GiB", size(1 << 30))
            .refuses("0")
            .refuses("all"),
        Setting::new("AGENT_TURN_MEMORY", "/limits/agent_turn_memory_bytes")
            .by_default(size(512 << 20))
            .takes("64MiB", size(64 << 20))
            .refuses("0"),
        Setting::new("BUDGET_METRIC_NAMES", "/budget_metric_names")
            .by_default(json!(100))
            .takes("1", json!(1))
            .takes("10000", json!(10_000))
            .refuses("0")
            .refuses("10001")
            .refuses("many"),
        Setting::new("TURN_MAX_RESUMES", "/turn_max_resumes")
            .by_default(json!(3))
            .takes("0", json!(0))
            .takes("10", json!(10))
            .refuses("-1")
            .refuses("many"),
        Setting::new("MAX_CONCURRENT_TASKS", "/limits/max_concurrent_tasks")
            .by_default(json!(100_000))
            .takes("10", json!(10))
            .refuses("0"),
        Setting::new("LOG_LEVEL", "/log_level")
            .by_default(json!("info"))
            .takes("debug", json!("debug"))
            .choice(
                "info,daedalus_runtime=debug",
                json!("info,daedalus_runtime=debug"),
            )
            .refuses("info,["),
        Setting::new("LOG_FORMAT", "/log_format")
            .by_default(json!("json"))
            .choice("json", json!("json"))
            .choice("text", json!("text"))
            .refuses("xml"),
        Setting::new("PALLAS_LOG_LEVEL", "/log_level")
            .takes("debug", json!("debug"))
            .refuses("info,["),
        Setting::new("PALLAS_ROOT_LOG_LEVEL", "/log_level")
            .choice(
                "warn",
                json!("warn,daedalus_runtime=info,daedalus_contract=info"),
            )
            .refuses("loud"),
        Setting::new("LOG_FILE", "/log_file")
            .by_default(Value::Null)
            .takes(&format!("{dir}/r.log"), json!(format!("{dir}/r.log")))
            .any_value("a path; the file is made when the runtime starts"),
        Setting::new("PALLAS_LOG_FILE", "/log_file")
            .takes(&format!("{dir}/p.log"), json!(format!("{dir}/p.log")))
            .any_value("a path; the file is made when the runtime starts"),
    ]
}

/// The settings of identity (`docs/identity.md`).
fn identity(dir: &str) -> Vec<Setting> {
    let keys = format!("{dir}/keys.yaml");
    vec![
        Setting::new("AUTH_ISSUER", "/auth/tokens")
            .with("AUTH_AUDIENCE", "daedalus")
            .takes(
                ISSUER,
                json!({"issuer": ISSUER, "audience": "daedalus", "keys": {"discovery": format!("{ISSUER}/.well-known/openid-configuration")}}),
            )
            .refuses("not a url"),
        Setting::new("AUTH_AUDIENCE", "/auth/tokens/audience")
            .with("AUTH_ISSUER", ISSUER)
            .takes("daedalus", json!("daedalus"))
            .refuses(""),
        Setting::new("AUTH_JWKS_URL", "/auth/tokens/keys")
            .with("AUTH_ISSUER", ISSUER)
            .with("AUTH_AUDIENCE", "daedalus")
            .takes("https://idp.example/keys", json!({"url": "https://idp.example/keys"}))
            .refuses("keys.json"),
        Setting::new("AUTH_JWKS_FILE", "/auth/tokens/keys")
            .with("AUTH_ISSUER", ISSUER)
            .with("AUTH_AUDIENCE", "daedalus")
            .takes(&format!("{dir}/jwks.json"), json!({"file": format!("{dir}/jwks.json")}))
            .refuses(&format!("{dir}/missing.json")),
        Setting::new("AUTH_CLOCK_SKEW", "/auth/tokens/clock_skew")
            .with("AUTH_ISSUER", ISSUER)
            .with("AUTH_AUDIENCE", "daedalus")
            .by_default(json!("30s"))
            .takes("5m", json!("5m"))
            .refuses("6m"),
        Setting::new("AUTH_API_KEYS_FILE", "/auth/api_keys")
            .by_default(Value::Null)
            .takes(&keys, json!({"file": keys, "header": "X-API-Key"}))
            .refuses(&format!("{dir}/missing.yaml"))
            .refuses(&format!("{dir}/agents.yaml")),
        Setting::new("AUTH_API_KEY_HEADER", "/auth/api_keys/header")
            .with("AUTH_API_KEYS_FILE", &keys)
            .by_default(json!("X-API-Key"))
            .takes("X-Daedalus-Key", json!("X-Daedalus-Key"))
            .refuses("bad header")
            .refuses("Authorization"),
        Setting::new("AUTH_REQUIRED_SCOPES", "/auth/required_scopes")
            .with("AUTH_API_KEYS_FILE", &keys)
            .by_default(json!([]))
            .takes("a2a,ops", json!(["a2a", "ops"]))
            .refuses("a b"),
        Setting::new("AUTH_ADMIN_SCOPE", "/auth/admin_scope")
            .with("AUTH_API_KEYS_FILE", &keys)
            .by_default(Value::Null)
            .takes("admin", json!("admin"))
            .refuses("ad min"),
        Setting::new("AUTH_TENANT_CLAIM", "/auth/tenant_claim")
            .with("AUTH_API_KEYS_FILE", &keys)
            .by_default(Value::Null)
            .takes("org", json!("org"))
            .any_value("a claim's name"),
        Setting::new("METRICS_AUTH", "/auth/metrics")
            .with("AUTH_API_KEYS_FILE", &keys)
            .by_default(json!("open"))
            .choice("open", json!("open"))
            .choice("caller", json!("caller"))
            .takes("scope:ops", json!({"scope": "ops"}))
            .refuses("everyone"),
    ]
}

/// The settings of MCP sessions (`docs/mcp-face.md`).
fn mcp_sessions() -> Vec<Setting> {
    vec![
        Setting::new("MAX_MCP_SESSIONS", "/mcp_sessions/max_sessions")
            .by_default(json!(1000))
            .takes("10", json!(10))
            .refuses("0"),
        Setting::new("MCP_SESSIONS_MEMORY", "/mcp_sessions/max_bytes")
            .by_default(size(64 << 20))
            .takes("1GiB", size(1 << 30))
            .refuses("1"),
        Setting::new("MCP_HANDSHAKE_TIMEOUT", "/mcp_sessions/handshake_timeout")
            .by_default(json!("10s"))
            .takes("3s", json!("3s"))
            .refuses("0"),
        Setting::new("MCP_SESSION_IDLE", "/mcp_sessions/idle")
            .by_default(json!("5m"))
            .takes("1h", json!("1h"))
            .refuses("0"),
    ]
}

/// Every setting of the runtime's configuration tables.
fn settings(dir: &str) -> Vec<Setting> {
    [
        serving(dir),
        limits(dir),
        push_and_logs(dir),
        identity(dir),
        mcp_sessions(),
        card_signing(),
    ]
    .concat()
}

/// The card signing key and how its signatures name it (`docs/card-signing.md`).
fn card_signing() -> Vec<Setting> {
    let keys = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/tests/card_keys");
    let key = format!("{keys}/es256.pem");
    vec![
        Setting::new("CARD_SIGNING_KEY", "/card_signing/alg")
            .takes(&key, json!("ES256"))
            .takes(&format!("{keys}/ed25519.jwk"), json!("EdDSA"))
            .takes(&format!("{keys}/rs256.pem"), json!("RS256"))
            .refuses(&format!("{keys}/es256.public.jwk"))
            .refuses(&format!("{keys}/p384.pem"))
            .refuses(&format!("{keys}/missing.pem")),
        Setting::new("CARD_SIGNING_KID", "/card_signing/kid")
            .with("CARD_SIGNING_KEY", &key)
            .takes("billing-2026-12", json!("billing-2026-12"))
            .refuses_alone("billing-2026-12"),
        Setting::new("CARD_SIGNING_JKU", "/card_signing/jku")
            .with("CARD_SIGNING_KEY", &key)
            .takes(
                "https://keys.example/jwks.json",
                json!("https://keys.example/jwks.json"),
            )
            .refuses("ftp://keys.example/jwks.json")
            .refuses_alone("https://keys.example/jwks.json"),
        Setting::new("CARD_SIGNING_OVERLAP", "/card_signing/overlap")
            .with("CARD_SIGNING_KEY", &key)
            .by_default(json!("24h"))
            .takes("10m", json!("10m"))
            .refuses("soon"),
    ]
}

#[test]
fn every_documented_setting_takes_its_documented_values_and_refuses_others_by_name() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().to_str().expect("utf-8").to_owned();
    std::fs::write(
        dir.path().join("agents.yaml"),
        "agents:\n  agent: { instruction: hi }\n",
    )
    .expect("written");
    std::fs::write(
        dir.path().join("keys.yaml"),
        format!("keys:\n  - sha256: {KEY_HASH}\n    principal: ci-bot\n"),
    )
    .expect("written");
    std::fs::write(dir.path().join("jwks.json"), r#"{"keys":[]}"#).expect("written");
    // The working directory holds no agents.yaml: the runs without AGENTS_CONFIG are
    // zero-config.
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).expect("made");
    let binary = Binary {
        path: env!("CARGO_BIN_EXE_daedalus-runtime").into(),
        base_env: vec![("WORK_DIR", path.clone())],
        dir: cwd,
        not_in_help: &[
            // Read by the deployment loader, beside the flags.
            "AGENTS_CONFIG",
            "PALLAS_AGENTS_CONFIG",
            // Pallas's names, kept as hidden aliases.
            "PALLAS_LOG_LEVEL",
            "PALLAS_LOG_FILE",
        ],
    };
    let failures = check_every_setting(&binary, PAGES, &settings(&path));
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
