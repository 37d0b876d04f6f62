//! The runtime's configuration: flags and environment, parsed and validated before anything
//! binds. `Config::from_sources` is a pure function of the arguments and an environment lookup.
//!
//! This is the zero-config surface (one agent from `AGENT_NAME` on `DEFAULT_MODEL`); the
//! `agents.yaml` loader produces the same `AgentConfig` values.

pub mod deployment;
mod size;

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use daedalus_schemas::AgentSkill;
use daedalus_schemas::cli;
pub use daedalus_schemas::cli::ConfigError;
use daedalus_schemas::container::{self, format_duration, parse_duration};
pub use daedalus_schemas::service::LogFormat;
use serde::Serialize;

pub use size::parse_size;

/// The command line. Every flag also reads the environment variable named beside it.
#[derive(Debug, Parser)]
#[command(
    name = "daedalus-runtime",
    version,
    about = "The Daedalus agent runtime: serves the runtime contract (POST /, /health, agent card)."
)]
struct Cli {
    /// Port of the A2A HTTP server.
    #[arg(long, env = "A2A_PORT", default_value_t = container::A2A_PORT_DEFAULT)]
    port: u16,
    /// Address to bind.
    #[arg(long, env = "A2A_HOST", default_value = "0.0.0.0")]
    host: IpAddr,
    /// Name of the agent; a NATS subject token ([A-Za-z0-9_-]{1,64}).
    #[arg(long, env = "AGENT_NAME", default_value = "agent")]
    agent_name: String,
    /// One-line description for the agent card.
    #[arg(long, env = "AGENT_DESCRIPTION")]
    agent_description: Option<String>,
    /// Version for the agent card (default: the runtime's version).
    #[arg(long, env = "AGENT_VERSION")]
    agent_version: Option<String>,
    /// Skills for the agent card, as a JSON array of {id, name, description, tags}.
    #[arg(long, env = "AGENT_SKILLS")]
    agent_skills: Option<String>,
    /// Base URL under which clients reach this runtime (default: http://127.0.0.1:<port>).
    #[arg(long, env = "PUBLIC_URL")]
    public_url: Option<String>,
    /// Model of the agent, as `provider.model`; `passthrough` echoes.
    #[arg(long, env = "DEFAULT_MODEL", default_value = "passthrough")]
    default_model: String,
    /// Writable workspace (default: /workspace, or the current directory if that is absent).
    #[arg(long, env = "WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Largest accepted request body (bytes, or with a unit: 16MiB, 512KiB, 10MB).
    #[arg(long, env = "MAX_BODY_SIZE", default_value = "16MiB", value_parser = parse_size)]
    max_body_size: u64,
    /// Time allowed for a client to send the request headers.
    #[arg(long, env = "HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,
    /// Time allowed for a client to send the request body.
    #[arg(long, env = "BODY_READ_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    body_read_timeout: Duration,
    /// Longest a task may run before it is canceled and reported failed.
    #[arg(long, env = "REQUEST_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Time in-flight requests get to finish after SIGTERM/SIGINT.
    #[arg(long, env = "TERMINATION_GRACE_PERIOD", default_value = "30s", value_parser = parse_duration)]
    termination_grace_period: Duration,
    /// How many tasks are remembered (for input-required continuation and idempotent replay).
    #[arg(long, env = "MAX_TASKS", default_value_t = 10_000)]
    max_tasks: usize,
    /// Log filter: a level (info, debug, ...) or a tracing directive list.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    log_level: String,
    /// Log format: json (one object a line) or text.
    #[arg(long, env = "LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Print the resolved configuration and exit.
    #[arg(long)]
    check_config: bool,
}

/// What the process was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    /// Serve.
    Run(Config),
    /// Print the resolved configuration and exit (`--check-config`).
    CheckConfig(Config),
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub listen: SocketAddr,
    /// Base URL clients use; `None` means `http://127.0.0.1:<bound port>`.
    pub public_url: Option<String>,
    pub agent: AgentConfig,
    pub work_dir: PathBuf,
    pub limits: Limits,
    #[serde(serialize_with = "as_duration")]
    pub termination_grace_period: Duration,
    pub max_tasks: usize,
    pub log_level: String,
    pub log_format: LogFormat,
}

/// One agent served by the runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentConfig {
    pub name: String,
    pub description: String,
    pub version: String,
    pub skills: Vec<AgentSkill>,
    pub model: ModelSpec,
}

/// Which model runs an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "provider", rename_all = "lowercase")]
pub enum ModelSpec {
    /// Echoes the user's message; understands the `***` test directives.
    Passthrough,
}

/// Request limits of the HTTP face.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub max_body_bytes: u64,
    #[serde(serialize_with = "as_duration")]
    pub header_read_timeout: Duration,
    #[serde(serialize_with = "as_duration")]
    pub body_read_timeout: Duration,
    #[serde(serialize_with = "as_duration")]
    pub request_timeout: Duration,
}

impl Launch {
    /// Parses and validates the command line `args` (program name first), reading environment
    /// variables through `env`.
    pub fn from_sources(
        args: impl IntoIterator<Item = OsString>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Launch, ConfigError> {
        let (cli, sourced) = cli::parse_naming_env::<Cli>(args, env)?;
        let key_of = |id: &str, flag: &str| cli::key_for(&sourced, id, flag);
        let check = cli.check_config;
        let config = Config::from_cli(cli, &key_of)?;
        Ok(if check {
            Launch::CheckConfig(config)
        } else {
            Launch::Run(config)
        })
    }
}

impl Config {
    fn from_cli(cli: Cli, key_of: &dyn Fn(&str, &str) -> String) -> Result<Config, ConfigError> {
        let name_key = key_of("agent_name", "--agent-name");
        container::validate_agent_name(&cli.agent_name)
            .map_err(|m| ConfigError::invalid(&name_key, m))?;

        let skills = match &cli.agent_skills {
            None => vec![default_skill(&cli.agent_name)],
            Some(json) => parse_skills(json)
                .map_err(|m| ConfigError::invalid(&key_of("agent_skills", "--agent-skills"), m))?,
        };
        let model = parse_model(&cli.default_model)
            .map_err(|m| ConfigError::invalid(&key_of("default_model", "--default-model"), m))?;
        let public_url = cli
            .public_url
            .map(|url| validate_public_url(&url))
            .transpose()
            .map_err(|m| ConfigError::invalid(&key_of("public_url", "--public-url"), m))?;
        if cli.max_body_size == 0 {
            return Err(ConfigError::invalid(
                &key_of("max_body_size", "--max-body-size"),
                "must be at least 1 byte",
            ));
        }
        if cli.max_tasks == 0 {
            return Err(ConfigError::invalid(
                &key_of("max_tasks", "--max-tasks"),
                "must be > 0",
            ));
        }
        tracing_subscriber::EnvFilter::try_new(&cli.log_level).map_err(|e| {
            ConfigError::invalid(
                &key_of("log_level", "--log-level"),
                format!("not a filter: {e}"),
            )
        })?;

        let work_dir = cli.work_dir.unwrap_or_else(default_work_dir);
        Ok(Config {
            listen: SocketAddr::new(cli.host, cli.port),
            public_url,
            agent: AgentConfig {
                description: cli
                    .agent_description
                    .unwrap_or_else(|| format!("Daedalus agent {}", cli.agent_name)),
                name: cli.agent_name,
                version: cli
                    .agent_version
                    .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
                skills,
                model,
            },
            work_dir,
            limits: Limits {
                max_body_bytes: cli.max_body_size,
                header_read_timeout: cli.header_read_timeout,
                body_read_timeout: cli.body_read_timeout,
                request_timeout: cli.request_timeout,
            },
            termination_grace_period: cli.termination_grace_period,
            max_tasks: cli.max_tasks,
            log_level: cli.log_level,
            log_format: cli.log_format,
        })
    }

    /// A configuration for tests and embedding: one passthrough agent named `name`, listening
    /// on `listen`, with the contract's defaults.
    pub fn for_agent(name: &str, listen: SocketAddr) -> Config {
        let args = ["daedalus-runtime", "--agent-name", name];
        match Launch::from_sources(args.map(OsString::from), &|_| None) {
            Ok(Launch::Run(mut config)) => {
                config.listen = listen;
                config
            }
            other => panic!("the default configuration is valid: {other:?}"),
        }
    }

    /// The base URL clients reach the runtime at, given the address actually bound.
    pub fn public_url_for(&self, bound: SocketAddr) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{}", bound.port()))
    }

    /// The resolved configuration as pretty JSON, for `--check-config`.
    pub fn to_pretty_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the configuration serializes")
    }
}

fn default_skill(agent: &str) -> AgentSkill {
    AgentSkill {
        id: "chat".to_owned(),
        name: "Chat".to_owned(),
        description: format!("Send {agent} a message and get its answer."),
        tags: vec!["chat".to_owned()],
        examples: None,
        input_modes: None,
        output_modes: None,
    }
}

fn parse_skills(json: &str) -> Result<Vec<AgentSkill>, String> {
    let skills: Vec<AgentSkill> = serde_json::from_str(json)
        .map_err(|e| format!("not a JSON array of {{id, name, description, tags}}: {e}"))?;
    if skills.is_empty() {
        return Err("the agent card needs at least one skill".to_owned());
    }
    for (i, s) in skills.iter().enumerate() {
        let missing = [
            ("id", s.id.is_empty()),
            ("name", s.name.is_empty()),
            ("description", s.description.is_empty()),
            ("tags", s.tags.iter().all(String::is_empty)),
        ];
        if let Some((field, _)) = missing.iter().find(|(_, empty)| *empty) {
            return Err(format!("skill [{i}] has an empty {field}"));
        }
    }
    Ok(skills)
}

fn parse_model(model: &str) -> Result<ModelSpec, String> {
    match model {
        "passthrough" => Ok(ModelSpec::Passthrough),
        other => {
            let provider = other.split_once('.').map_or(other, |(p, _)| p);
            Err(format!(
                "unknown model provider {provider:?} in {other:?}; this build knows: passthrough"
            ))
        }
    }
}

fn validate_public_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim_end_matches('/');
    let scheme_ok = trimmed.starts_with("http://") || trimmed.starts_with("https://");
    let has_host = trimmed
        .split_once("://")
        .is_some_and(|(_, rest)| !rest.is_empty());
    if !scheme_ok || !has_host {
        return Err(format!("{url:?} is not an http(s) URL"));
    }
    Ok(trimmed.to_owned())
}

fn default_work_dir() -> PathBuf {
    let workspace = PathBuf::from(container::WORK_DIR_DEFAULT);
    if workspace.is_dir() {
        workspace
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
    }
}

fn as_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

#[cfg(test)]
mod tests;
