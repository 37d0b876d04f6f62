use std::collections::HashMap;
use std::path::Path;

use super::*;
use crate::config::sampling::Setting;

/// A project directory with the given files.
fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn load_in(dir: &Path, env: &[(&str, &str)]) -> Result<Deployment, DeploymentError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |k: &str| env.get(k).cloned();
    Deployment::load(&Sources {
        env: &lookup,
        cwd: dir.to_path_buf(),
        agent_name: "solo".to_owned(),
        default_model: "passthrough".to_owned(),
    })
}

const TWO_AGENTS: &str = r#"
name: demo
version: "2.0.0"
host: agents.example.com
namespace: com.example.demo
registry_port: 8200
default_model: openai.gpt-4o-mini
model_capabilities: { vision: true, context_window: 128000 }
openai:
  api_key: "${OPENAI_API_KEY}"
  base_url: "${OPENAI_BASE_URL:-https://api.openai.com/v1}"
mcp:
  servers:
    search:
      url: http://search:8000/mcp
      headers: { Authorization: "Bearer ${SEARCH_TOKEN}" }
    kernos:
      url: http://kernos:9000/mcp
      forward_inbound_auth: true
      idempotent: true
agents:
  coder:
    port: 8201
    description: Writes code
    instruction: You write code.
    model: anthropic.claude-sonnet-4-5
    servers: [kernos, researcher]
    depends_on: [researcher]
    request_params: { temperature: 0.2, top_p: null }
    max_iterations: 8
    instance_scope: connection
  researcher:
    port: 8202
    instruction: You search.
    servers: [search]
"#;

#[test]
fn no_file_means_one_agent_on_the_default_model() {
    let dir = project(&[]);
    let d = load_in(dir.path(), &[]).unwrap();
    assert!(d.sources.is_empty());
    assert_eq!(d.agents.len(), 1);
    assert_eq!(d.agents[0].name, "solo");
    assert_eq!(d.agents[0].model, ModelRef::Passthrough);
    assert_eq!(d.agents[0].max_iterations, 12);
}

#[test]
fn agents_yaml_alone_holds_topology_agents_providers_and_servers() {
    let dir = project(&[("agents.yaml", TWO_AGENTS)]);
    let d = load_in(
        dir.path(),
        &[("OPENAI_API_KEY", "sk-test"), ("SEARCH_TOKEN", "tok")],
    )
    .unwrap();
    assert_eq!(
        (d.name.as_str(), d.version.as_str(), d.host.as_str()),
        ("demo", "2.0.0", "agents.example.com")
    );
    assert_eq!(d.registry_port, Some(8200));
    assert_eq!(d.default_model, ModelRef::OpenAi("gpt-4o-mini".into()));
    assert!(d.model_capabilities.vision);
    assert_eq!(d.model_capabilities.context_window, 128_000);
    assert_eq!(d.model_capabilities.max_output_tokens, 16_384);
    let openai = d.openai.as_ref().unwrap();
    assert_eq!(openai.api_key.as_deref(), Some("sk-test"));
    assert_eq!(
        openai.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(
        d.mcp_servers["search"].headers["Authorization"],
        "Bearer tok"
    );
    assert!(d.mcp_servers["kernos"].forward_inbound_auth);
    assert!(!d.mcp_servers["search"].forward_inbound_auth);
    assert!(d.mcp_servers["kernos"].idempotent);
    assert!(!d.mcp_servers["search"].idempotent);

    let coder = d.agent("coder").unwrap();
    assert_eq!(coder.model, ModelRef::Anthropic("claude-sonnet-4-5".into()));
    assert_eq!(
        coder.servers,
        vec![
            ServerRef::Mcp("kernos".into()),
            ServerRef::Agent("researcher".into())
        ]
    );
    assert_eq!(coder.title, "Coder");
    assert_eq!(coder.max_iterations, 8);
    assert_eq!(coder.instance_scope, InstanceScope::Connection);
    assert_eq!(coder.request_params.temperature, Setting::Set(0.2));
    assert_eq!(
        coder.request_params.top_p,
        Setting::Clear,
        "null is kept: it clears a default"
    );
    let researcher = d.agent("researcher").unwrap();
    assert_eq!(
        researcher.model,
        ModelRef::OpenAi("gpt-4o-mini".into()),
        "default_model applies"
    );
    assert_eq!(researcher.skills[0].tags, ["chat"]);
}

#[test]
fn the_pallas_layout_merges_fastagent_config_and_secrets() {
    let dir = project(&[
        (
            "agents.yaml",
            "name: pallas-demo\nregistry_port: 24200\nagents:\n  jarvis:\n    port: 24201\n    title: Jarvis\n    instruction: Help.\n    servers: [argos]\n",
        ),
        (
            "fastagent.config.yaml",
            "default_model: anthropic.claude-haiku-4-5\nmodel_capabilities:\n  vision: false\nmcp:\n  servers:\n    argos:\n      url: http://argos/mcp\nlogger:\n  level: debug\nanthropic:\n  base_url: http://anthropic.local\n",
        ),
        (
            "fastagent.secrets.yaml",
            "anthropic:\n  api_key: \"${ANTHROPIC_API_KEY}\"\n",
        ),
    ]);
    let d = load_in(dir.path(), &[("ANTHROPIC_API_KEY", "sk-ant")]).unwrap();
    assert_eq!(d.sources.len(), 3);
    assert_eq!(
        d.default_model,
        ModelRef::Anthropic("claude-haiku-4-5".into())
    );
    let anthropic = d.anthropic.as_ref().unwrap();
    assert_eq!(
        anthropic.api_key.as_deref(),
        Some("sk-ant"),
        "secrets merge into the config's block"
    );
    assert_eq!(
        anthropic.base_url.as_deref(),
        Some("http://anthropic.local")
    );
    assert_eq!(d.log_level.as_deref(), Some("debug"));
    assert_eq!(
        d.agent("jarvis").unwrap().servers,
        vec![ServerRef::Mcp("argos".into())]
    );
}

#[test]
fn dot_env_fills_in_but_never_overrides_the_environment() {
    let dir = project(&[
        (
            "agents.yaml",
            "openai: { api_key: \"${KEY}\", base_url: \"${URL}\" }\nagents: { a: {} }\n",
        ),
        (".env", "KEY=from-dotenv\nURL=http://from-dotenv\n"),
    ]);
    let d = load_in(dir.path(), &[("KEY", "from-env")]).unwrap();
    let openai = d.openai.unwrap();
    assert_eq!(openai.api_key.as_deref(), Some("from-env"));
    assert_eq!(openai.base_url.as_deref(), Some("http://from-dotenv"));
}

#[test]
fn unset_variables_are_reported_with_their_key() {
    let dir = project(&[(
        "agents.yaml",
        "anthropic: { api_key: \"${NOPE}\" }\nagents: { a: {} }\n",
    )]);
    let d = load_in(dir.path(), &[]).unwrap();
    assert_eq!(d.anthropic.unwrap().api_key, None);
    assert_eq!(d.unset_variables.len(), 1);
    assert!(
        d.unset_variables[0].ends_with("anthropic.api_key: ${NOPE}"),
        "{:?}",
        d.unset_variables
    );
}

#[test]
fn the_file_is_found_through_agents_config_or_pallas_agents_config() {
    let dir = project(&[("custom.yaml", "agents: { via-var: {} }\n")]);
    for var in ["AGENTS_CONFIG", "PALLAS_AGENTS_CONFIG"] {
        let d = load_in(dir.path(), &[(var, "custom.yaml")]).unwrap();
        assert_eq!(d.agents[0].name, "via-var", "{var}");
    }
    let missing = load_in(dir.path(), &[("AGENTS_CONFIG", "nope.yaml")]).unwrap_err();
    assert!(matches!(missing, DeploymentError::Read { .. }), "{missing}");
}

#[test]
fn the_openai_dialect_is_declared_or_follows_the_base_url() {
    let dialect = |yaml: &str| {
        let dir = project(&[("agents.yaml", yaml)]);
        let deployment = load_in(dir.path(), &[]).expect("valid");
        deployment.openai.expect("an openai block").openai_dialect()
    };
    let agents = "\nagents: { a: { model: openai.gpt-x } }";
    for (block, wanted) in [
        ("openai: {}", OpenAiDialect::Openai),
        (
            "openai: { base_url: https://api.openai.com/v1 }",
            OpenAiDialect::Openai,
        ),
        (
            "openai: { base_url: http://vllm:8000/v1 }",
            OpenAiDialect::Compatible,
        ),
        (
            "openai: { base_url: https://api.openai.com.evil.example/v1 }",
            OpenAiDialect::Compatible,
        ),
        (
            "openai: { base_url: https://gateway.example/v1, dialect: openai }",
            OpenAiDialect::Openai,
        ),
        ("openai: { dialect: compatible }", OpenAiDialect::Compatible),
    ] {
        assert_eq!(dialect(&format!("{block}{agents}")), wanted, "{block}");
    }
}

#[test]
fn secrets_are_masked_when_printed() {
    let dir = project(&[("agents.yaml", TWO_AGENTS)]);
    let d = load_in(
        dir.path(),
        &[
            ("OPENAI_API_KEY", "sk-secret"),
            ("SEARCH_TOKEN", "tok-secret"),
        ],
    )
    .unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert!(
        !json.contains("sk-secret") && !json.contains("tok-secret"),
        "{json}"
    );
    assert!(json.contains("\"api_key\":\"***\""), "{json}");
}

fn error(yaml: &str) -> DeploymentError {
    let dir = project(&[("agents.yaml", yaml)]);
    load_in(dir.path(), &[]).unwrap_err()
}

#[test]
fn a_server_entry_is_mcp_unless_it_says_a2a() {
    let dir = project(&[(
        "agents.yaml",
        "mcp: { servers: { tools: { url: http://t }, peer: { type: a2a, url: http://p }, \
         named: { type: mcp, url: http://n } } }\nagents: { a: { servers: [tools, peer, named] } }",
    )]);
    let deployment = load_in(dir.path(), &[]).unwrap();
    assert_eq!(deployment.mcp_servers["tools"].kind, ServerKind::Mcp);
    assert_eq!(deployment.mcp_servers["peer"].kind, ServerKind::A2a);
    assert_eq!(deployment.mcp_servers["named"].kind, ServerKind::Mcp);
}

#[test]
fn every_validation_error_names_the_file_and_key() {
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            "default_model: mystery.x\nagents: { a: {} }",
            "UnknownProvider",
            "default_model",
        ),
        (
            "agents: { a: { model: gpt-4o } }",
            "UnknownProvider",
            "agents.a.model",
        ),
        (
            "agents: { a: { servers: [ghost] } }",
            "UnknownServer",
            "agents.a.servers",
        ),
        (
            "agents: { a: { depends_on: [ghost] } }",
            "UnknownDependency",
            "agents.a.depends_on",
        ),
        (
            "agents: { a: { depends_on: [b] }, b: { depends_on: [a] } }",
            "DependencyCycle",
            "a -> b -> a",
        ),
        (
            "agents: { a: { servers: [b] }, b: { servers: [a] } }",
            "DependencyCycle",
            "a -> b -> a",
        ),
        (
            "agents: { a: { servers: [a] } }",
            "DependencyCycle",
            "a -> a",
        ),
        (
            "agents: { a: { port: 9000 }, b: { port: 9000 } }",
            "DuplicatePort",
            "agents.b.port",
        ),
        (
            "registry_port: 9000\nagents: { a: { port: 9000 } }",
            "DuplicatePort",
            "registry_port",
        ),
        (
            "agents: { \"my agent\": {} }",
            "BadAgentName",
            "agents.my agent",
        ),
        ("agents: { a.b: {} }", "BadAgentName", "a.b"),
        (
            "agents: { jarvis: { module: agents.jarvis, port: 9000 } }",
            "ModuleWithoutDefinition",
            "define the agent inline",
        ),
        (
            "mcp: { servers: { s: { headers: {} } } }\nagents: { a: {} }",
            "ServerWithoutUrl",
            "mcp.servers.s.url",
        ),
        ("agents: { a: { port: lots } }", "Shape", "agents.a.port"),
        (
            "agents: { a: { default_personality: calm } }",
            "Shape",
            "agents.a.default_personality",
        ),
        (
            "agents: { a: { personalities: { calm: { request_params: { temperature: hot } } } } }",
            "Shape",
            "agents.a.personalities.calm.request_params.temperature",
        ),
        (
            "mcp: { servers: { s: { url: http://x, type: sse } } }\nagents: { a: {} }",
            "Shape",
            "mcp.servers.s.type",
        ),
        (
            "mcp: { servers: { s: { url: http://x, read_timeout_seconds: -1 } } }\nagents: { a: {} }",
            "Shape",
            "mcp.servers.s.read_timeout_seconds",
        ),
        (
            "openai: { timeout: -5 }\nagents: { a: {} }",
            "Shape",
            "openai.timeout",
        ),
        (
            "anthropic: { timeout: .nan }\nagents: { a: {} }",
            "Yaml",
            "non-finite",
        ),
        (
            "anthropic: { timeout: 0 }\nagents: { a: {} }",
            "Shape",
            "anthropic.timeout",
        ),
        (
            "anthropic: { timeout: 1e300 }\nagents: { a: {} }",
            "Shape",
            "anthropic.timeout",
        ),
        (
            "agents: { a: { request_params: { temperature: hot } } }",
            "Shape",
            "agents.a.request_params.temperature",
        ),
        (
            "agents: { a: { request_params: { max_tokens: -5 } } }",
            "Shape",
            "agents.a.request_params.max_tokens",
        ),
        (
            "agents: { a: { max_iterations: 0 } }",
            "Shape",
            "agents.a.max_iterations",
        ),
        (
            "anthropic: { dialect: openai }\nagents: { a: {} }",
            "Shape",
            "anthropic.dialect",
        ),
        (
            "openai: { dialect: azure }\nagents: { a: {} }",
            "Shape",
            "openai.dialect",
        ),
        ("agents: [unclosed", "Yaml", "not valid YAML"),
        ("name: nothing", "NoAgents", "no agents"),
    ];
    for (yaml, variant, mentions) in cases {
        let e = error(yaml);
        let got = format!("{e:?}");
        assert!(
            got.starts_with(variant),
            "{yaml}: expected {variant}, got {got}"
        );
        let text = e.to_string();
        assert!(
            text.contains("agents.yaml"),
            "{yaml}: the file is named: {text}"
        );
        assert!(text.contains(mentions), "{yaml}: {text}");
    }
}

#[test]
fn a_module_with_an_inline_definition_is_accepted() {
    let dir = project(&[(
        "agents.yaml",
        "agents: { jarvis: { module: agents.jarvis, instruction: Help. } }",
    )]);
    assert_eq!(
        load_in(dir.path(), &[]).unwrap().agents[0].instruction,
        "Help."
    );
}

#[test]
fn urls_are_printed_without_userinfo_or_query() {
    let dir = project(&[(
        "agents.yaml",
        "openai: { base_url: \"https://u:pw-secret@llm.example/v1?key=q-secret\" }\n\
         mcp: { servers: { s: { url: \"https://u:pw-secret@mcp.example/mcp?api_key=q-secret\" } } }\n\
         agents: { a: { servers: [s] } }",
    )]);
    let d = load_in(dir.path(), &[]).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert!(
        !json.contains("pw-secret") && !json.contains("q-secret"),
        "{json}"
    );
    assert!(json.contains("https://***@mcp.example/mcp?***"), "{json}");
    assert_eq!(
        d.mcp_servers["s"].url, "https://u:pw-secret@mcp.example/mcp?api_key=q-secret",
        "the real URL is still used"
    );
}

#[test]
fn validation_orders_agents_after_what_they_depend_on_and_use() {
    let dir = project(&[(
        "agents.yaml",
        "agents:\n  web: { depends_on: [db] }\n  lead: { servers: [helper] }\n  db: {}\n  helper: {}\n",
    )]);
    let order = load_in(dir.path(), &[]).unwrap().start_order;
    let at = |name: &str| order.iter().position(|n| n == name).unwrap();
    assert_eq!(order.len(), 4, "{order:?}");
    assert!(at("db") < at("web"), "{order:?}");
    assert!(at("helper") < at("lead"), "{order:?}");
}

#[test]
fn provider_keys_and_endpoints_come_from_the_environment_when_the_files_leave_them_out() {
    let dir = project(&[(
        "agents.yaml",
        "default_model: openai.gpt-4o\nanthropic: { api_key: from-file }\nagents:\n  a: {}\n  b: { model: anthropic.claude-x }\n",
    )]);
    let d = load_in(
        dir.path(),
        &[
            ("OPENAI_API_KEY", "sk-env"),
            ("OPENAI_BASE_URL", "http://llm.internal/v1/"),
            ("ANTHROPIC_API_KEY", "not-used"),
        ],
    )
    .unwrap();
    let openai = d
        .openai
        .as_ref()
        .expect("a block made from the environment");
    assert_eq!(openai.api_key.as_deref(), Some("sk-env"));
    assert_eq!(openai.base_url.as_deref(), Some("http://llm.internal/v1"));
    assert_eq!(
        openai.origins.api_key,
        Origin::Environment("OPENAI_API_KEY")
    );
    assert_eq!(
        openai.origins.base_url,
        Origin::Environment("OPENAI_BASE_URL")
    );
    let anthropic = d.anthropic.as_ref().expect("the file's block");
    assert_eq!(
        anthropic.api_key.as_deref(),
        Some("from-file"),
        "the file wins"
    );
    assert_eq!(anthropic.origins.api_key, Origin::File);
    assert_eq!(anthropic.origins.base_url, Origin::Default);

    // --check-config says where each came from, and never shows the key.
    let shown = serde_json::to_value(&d).unwrap();
    assert_eq!(shown["openai"]["api_key"], "***");
    assert_eq!(
        shown["openai"]["origins"]["api_key"],
        "environment (OPENAI_API_KEY)"
    );
    assert_eq!(shown["anthropic"]["origins"]["api_key"], "file");
    assert_eq!(shown["anthropic"]["origins"]["base_url"], "default");
    assert!(!shown.to_string().contains("sk-env"));
}

#[test]
fn with_no_file_an_openai_model_runs_on_the_environments_key() {
    let dir = project(&[]);
    let env: HashMap<String, String> = [("OPENAI_API_KEY", "sk-zero")]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |k: &str| env.get(k).cloned();
    let d = Deployment::load(&Sources {
        env: &lookup,
        cwd: dir.path().to_path_buf(),
        agent_name: "solo".to_owned(),
        default_model: "openai.gpt-4o-mini".to_owned(),
    })
    .unwrap();
    let openai = d.openai.expect("made from the environment");
    assert_eq!(openai.api_key.as_deref(), Some("sk-zero"));
    assert_eq!(openai.base_url, None, "the public endpoint");
    assert_eq!(openai.origins.base_url, Origin::Default);
    assert_eq!(d.anthropic, None, "nobody uses it and nothing names it");
}

#[test]
fn a_budgets_block_is_read_and_a_bad_one_refused_naming_the_key() {
    let with = |budgets: &str| {
        let dir = project(&[(
            "agents.yaml",
            &format!("agents:\n  researcher: {{ instruction: Look. }}\nbudgets:\n{budgets}"),
        )]);
        load_in(dir.path(), &[])
    };
    let read = with("  agents: { researcher: { tokens_per_turn: 400000 } }\n").expect("loads");
    let plan = read.budgets.expect("a plan");
    assert_eq!(plan.agents["researcher"].tokens_per_turn, Some(400_000));
    let refused = |budgets: &str| match with(budgets) {
        Err(DeploymentError::Shape { path, message, .. }) => format!("{path}: {message}"),
        other => panic!("refused, not {other:?}"),
    };
    let unknown = refused("  default: { tokens_per_hour: 5 }\n");
    assert!(unknown.contains("tokens_per_hour"), "{unknown}");
    let zero = refused("  default: { tokens_per_minute: 0 }\n");
    assert!(
        zero.starts_with("budgets.default.tokens_per_minute"),
        "{zero}"
    );
    let nobody = refused("  agents: { writer: { tokens_per_turn: 5 } }\n");
    assert!(nobody.starts_with("budgets.agents.writer"), "{nobody}");
}

#[test]
fn model_prices_are_read_and_cost_per_day_needs_every_agents_model_priced() {
    let with = |extra: &str| {
        let dir = project(&[(
            "agents.yaml",
            &format!(
                "default_model: openai.gpt-x\nopenai: {{ api_key: k }}\n\
                 agents:\n  researcher: {{ instruction: Look. }}\n{extra}"
            ),
        )]);
        load_in(dir.path(), &[])
    };
    let priced =
        "models:\n  openai.gpt-x: { price: { input_per_mtok: 2.5, output_per_mtok: 10 } }\n";
    let read = with(&format!(
        "{priced}budgets:\n  tenants: {{ acme: {{ cost_per_day: 25.5 }} }}\n"
    ))
    .expect("loads");
    let plan = read.budgets.expect("a plan");
    assert_eq!(
        plan.tenants["acme"].cost_per_day.map(|c| c.0),
        Some(25_500_000),
        "in millionths"
    );
    let price = plan.prices["openai.gpt-x"];
    assert_eq!((price.input_nanos, price.output_nanos), (2_500, 10_000));
    assert_eq!(price.cost(1_000_000, 1_000_000), 12_500_000, "2.5 + 10");

    let refused = |extra: &str| match with(extra) {
        Err(DeploymentError::Shape { path, message, .. }) => format!("{path}: {message}"),
        other => panic!("refused, not {other:?}"),
    };
    let unpriced = refused("budgets:\n  default: { cost_per_day: 5 }\n");
    assert!(
        unpriced.starts_with("models.openai.gpt-x.price") && unpriced.contains("researcher"),
        "{unpriced}"
    );
    let negative =
        refused("models:\n  openai.gpt-x: { price: { input_per_mtok: -1, output_per_mtok: 1 } }\n");
    assert!(
        negative.starts_with("models.openai.gpt-x.price.input_per_mtok"),
        "{negative}"
    );
    let nameless =
        refused("models:\n  gpt-x: { price: { input_per_mtok: 1, output_per_mtok: 1 } }\n");
    assert!(nameless.starts_with("models.gpt-x"), "{nameless}");
    assert!(
        with("models:\n  openai.gpt-x: { cost: 1 }\n").is_err(),
        "an unknown key in a model's entry"
    );
    assert!(
        with("budgets:\n  default: { cost_per_day: 0 }\n").is_err(),
        "a cost of 0 is no limit"
    );
    assert!(with("budgets:\n  default: { cost_per_day: .nan }\n").is_err());
}
