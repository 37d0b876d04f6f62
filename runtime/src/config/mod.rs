//! The runtime's configuration: flags and environment, plus the deployment (`agents.yaml`, see
//! [`deployment`]), parsed and validated before anything binds. [`Launch::from_sources`] is a
//! pure function of the arguments, an environment lookup and a working directory.
//!
//! Each part's settings are typed here or by their owner: [`push`] (the webhooks' settings),
//! [`sampling`] (the typed sampling parameters, and what each provider takes).
//!
//! May import: `stores`, `platform`.

pub use crate::platform::card_keys::SigningPlan;
pub use crate::platform::identity::plan as auth;
mod card_signing;
mod checks;
pub mod deployment;
mod flags;
pub mod push;
pub mod sampling;
mod size;
mod stores;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use daedalus_contract::AgentSkill;
use daedalus_contract::cli;
pub use daedalus_contract::cli::ConfigError;
use daedalus_contract::container::{self, format_duration};
pub use daedalus_contract::service::LogFormat;
use serde::Serialize;

use crate::stores::mcp_sessions::SessionLimits;

pub use size::parse_size;
pub use stores::{
    DEFAULT_SESSIONS_BUCKET, DEFAULT_TASKS_BUCKET, SessionsDb, StoreUrlError, TasksDb,
};

use self::flags::{Cli, Command};

use self::deployment::{
    AgentChoiceError, AgentDef, Deployment, DeploymentError, ModelRef, ServerRef, Sources,
};

/// The default of `TURN_MAX_RESUMES`: resumes of one turn before it is failed.
pub const TURN_MAX_RESUMES_DEFAULT: u32 = 3;

/// What the process was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    /// Serve.
    Run(Config),
    /// Print the resolved configuration and exit (`--check-config`).
    CheckConfig(Config),
    /// Probe the `/health` of the runtime at this address (`healthcheck`), without reading
    /// the deployment.
    Healthcheck(SocketAddr),
    /// Migrate a fast-agent module (`migrate-module <file>`), without reading the deployment.
    MigrateModule(PathBuf),
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub listen: SocketAddr,
    /// Base URL clients use; `None` means `http://127.0.0.1:<bound port>`.
    pub public_url: Option<String>,
    /// The agent the A2A face serves.
    pub agent: AgentConfig,
    /// Every agent, model, provider and MCP server configured.
    pub deployment: Deployment,
    pub work_dir: PathBuf,
    /// Where conversations persist; `None` when turned off.
    pub sessions_db: Option<SessionsDb>,
    /// Where A2A tasks are kept beyond memory.
    pub tasks_db: TasksDb,
    /// This replica's name in the task store; `None` = `<hostname>:<port>`.
    pub replica_id: Option<String>,
    /// How long this replica's lease in a shared task store lasts unrenewed.
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub replica_lease: Duration,
    /// How long idle conversations are kept; `None` = forever.
    #[serde(serialize_with = "as_optional_duration")]
    pub session_ttl: Option<Duration>,
    /// `Host` values the MCP endpoints accept (empty list entries dropped).
    pub mcp_allowed_hosts: Vec<String>,
    /// The bounds on live MCP sessions.
    pub mcp_sessions: SessionLimits,
    pub limits: Limits,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub termination_grace_period: Duration,
    pub max_tasks: usize,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub task_ttl: Duration,
    /// Resumes of one turn before it is failed (`TURN_MAX_RESUMES`).
    pub turn_max_resumes: u32,
    /// Names of each budget scope kind with series of their own (`BUDGET_METRIC_NAMES`).
    pub budget_metric_names: usize,
    pub log_level: String,
    pub log_format: LogFormat,
    /// JSON log lines also go to this file (`LOG_FILE`, or Pallas's `PALLAS_LOG_FILE`).
    pub log_file: Option<PathBuf>,
    /// Inbound authentication (off unless configured).
    pub auth: auth::AuthPlan,
    /// A2A push notifications.
    pub push: push::PushSettings,
    /// Whether the A2A bindings serve streams (`A2A_STREAMING`).
    pub a2a_streaming: bool,
    /// The key that signs the agent cards served (`CARD_SIGNING_*`); none: unsigned.
    #[serde(serialize_with = "card_signing::shown")]
    pub card_signing: Option<SigningPlan>,
}

#[expect(clippy::ref_option, reason = "serde's serialize_with passes &Option")]
fn as_optional_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_duration(*d)),
        None => s.serialize_str("forever"),
    }
}

pub use daedalus_contract::redact::{redact_text, redact_url};

/// Why `url` is not an http(s) URL (shown with its secrets masked), if it is not.
pub(crate) fn not_an_http_url(url: &str) -> Option<String> {
    (!(url.starts_with("https://") || url.starts_with("http://")))
        .then(|| format!("{} is not an http(s) URL", redact_url(url)))
}

/// One agent served by the runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentConfig {
    pub name: String,
    pub description: String,
    pub version: String,
    pub skills: Vec<AgentSkill>,
    pub model: ModelRef,
}

/// Request limits of the HTTP face.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub max_body_bytes: u64,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub header_read_timeout: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub body_read_timeout: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub request_timeout: Duration,
    /// Client connections open at once, per listening port.
    pub max_connections: usize,
    /// Turns running at once, at most (a rail).
    pub max_concurrent_tasks: usize,
    /// Bytes the running turns may hold.
    pub turn_memory_bytes: u64,
    /// Bytes one agent's running turns may hold.
    pub agent_turn_memory_bytes: u64,
    /// Bytes the task registry may hold.
    pub task_memory_bytes: u64,
}

impl Limits {
    /// The limits the flags set.
    fn of(cli: &Cli) -> Self {
        Self {
            max_body_bytes: cli.max_body_size,
            header_read_timeout: cli.header_read_timeout,
            body_read_timeout: cli.body_read_timeout,
            request_timeout: cli.request_timeout,
            max_connections: cli.max_connections,
            max_concurrent_tasks: cli.max_concurrent_tasks,
            turn_memory_bytes: cli.turn_memory,
            agent_turn_memory_bytes: cli.agent_turn_memory.unwrap_or(cli.turn_memory),
            task_memory_bytes: cli.task_memory,
        }
    }
}

impl Launch {
    /// Parses and validates the command line `args` (program name first), reading environment
    /// variables through `env`.
    pub fn from_sources(
        args: impl IntoIterator<Item = OsString>,
        env: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
    ) -> Result<Launch, ConfigError> {
        let (cli, sourced) = cli::parse_naming_env::<Cli>(args, env)?;
        match &cli.command {
            Some(Command::Healthcheck) => {
                return Ok(Launch::Healthcheck(
                    daedalus_contract::healthcheck::local_address(cli.host, cli.port),
                ));
            }
            Some(Command::MigrateModule { module }) => {
                return Ok(Launch::MigrateModule(module.clone()));
            }
            None => {}
        }
        let key_of = |id: &str, flag: &str| cli::key_for(&sourced, id, flag);
        let check = cli.check_config;
        if let Some(name) = &cli.agent_name {
            container::validate_agent_name(name)
                .map_err(|m| ConfigError::invalid(&key_of("agent_name", "--agent-name"), m))?;
        }
        let lookup = Sources {
            env,
            cwd: cwd.to_path_buf(),
            agent_name: cli.agent_name.clone().unwrap_or_else(|| "agent".to_owned()),
            default_model: cli.default_model.clone(),
        };
        let deployment = Deployment::load(&lookup).map_err(|e| {
            let key = match &e {
                DeploymentError::UnknownProvider { path, .. } if path == "DEFAULT_MODEL" => {
                    key_of("default_model", "--default-model")
                }
                // The file a variable names is not there: name the variable to fix.
                DeploymentError::Read { .. } => ["AGENTS_CONFIG", "PALLAS_AGENTS_CONFIG"]
                    .into_iter()
                    .find(|var| env(var).is_some())
                    .unwrap_or("agents.yaml")
                    .to_owned(),
                _ => "agents.yaml".to_owned(),
            };
            ConfigError::invalid(&key, e.to_string())
        })?;
        let deployment = match cli.serve_agent.as_deref() {
            Some(name) => deployment.only(name).map_err(|e| {
                ConfigError::invalid(&key_of("serve_agent", "--agent"), e.to_string())
            })?,
            None => deployment,
        };
        let config = Config::from_cli(cli, deployment, &key_of)?;
        Ok(if check {
            Launch::CheckConfig(config)
        } else {
            Launch::Run(config)
        })
    }
}

impl Launch {
    /// The configuration read again for a reload, by the same rules as at startup, except
    /// that with no AGENT_NAME the A2A face keeps `serving` (the agent it serves now)
    /// while the new deployment still has it: adding a second top-level agent does not make
    /// the choice ambiguous. When `serving` is gone, the startup rules choose.
    pub fn reread(
        args: impl IntoIterator<Item = OsString> + Clone,
        env: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
        serving: &str,
    ) -> Result<Config, ConfigError> {
        if env("AGENT_NAME").is_none() {
            let keeping = |key: &str| {
                if key == "AGENT_NAME" {
                    Some(serving.to_owned())
                } else {
                    env(key)
                }
            };
            if let Ok(Launch::Run(config) | Launch::CheckConfig(config)) =
                Launch::from_sources(args.clone(), &keeping, cwd)
            {
                return Ok(config);
            }
        }
        match Launch::from_sources(args, env, cwd)? {
            Launch::Run(config) | Launch::CheckConfig(config) => Ok(config),
            Launch::Healthcheck(_) | Launch::MigrateModule(_) => Err(ConfigError::invalid(
                "command",
                "the arguments ask for a command, not a deployment",
            )),
        }
    }
}

impl Config {
    fn from_cli(
        cli: Cli,
        deployment: Deployment,
        key_of: &dyn Fn(&str, &str) -> String,
    ) -> Result<Config, ConfigError> {
        let limits = Limits::of(&cli);
        let name_key = key_of("agent_name", "--agent-name");
        let requested = cli.agent_name.as_deref().or(cli.serve_agent.as_deref());
        let served = select_agent(&deployment, requested)
            .map_err(|e| ConfigError::invalid(&name_key, e.to_string()))?;
        let skills = match &cli.agent_skills {
            None => served.skills.clone(),
            Some(json) => parse_skills(json)
                .map_err(|m| ConfigError::invalid(&key_of("agent_skills", "--agent-skills"), m))?,
        };
        let log_level = log_level_of(&cli, &deployment, key_of)?;
        let auth = auth_plan(&cli, &deployment, key_of)?;
        checks::check_auth_files(&auth, &cli, key_of)?;
        let push = push_settings(&cli, key_of)?;
        let card_signing = card_signing::plan(&cli, served, key_of)?;
        let public_url = cli
            .public_url
            .as_deref()
            .map(validate_public_url)
            .transpose()
            .map_err(|m| ConfigError::invalid(&key_of("public_url", "--public-url"), m))?;
        let replica_id = cli
            .replica_id
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .map(checks::validate_replica_id)
            .transpose()
            .map_err(|e| {
                ConfigError::invalid(&key_of("replica_id", "--replica-id"), e.to_string())
            })?;
        checks::check_bounds(&cli, key_of)?;

        let work_dir = cli.work_dir.clone().unwrap_or_else(default_work_dir);
        let (tasks_db, sessions_db) = stores_in(&cli, &work_dir, key_of)?;
        Ok(Config {
            listen: SocketAddr::new(cli.host, cli.port),
            public_url,
            agent: agent_config(&cli, served, &deployment, skills),
            deployment,
            work_dir,
            sessions_db,
            tasks_db,
            replica_id,
            replica_lease: cli.replica_lease,
            session_ttl: Some(cli.session_ttl).filter(|t| !t.is_zero()),
            mcp_allowed_hosts: cli
                .mcp_allowed_hosts
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            mcp_sessions: SessionLimits {
                max_sessions: cli.max_mcp_sessions,
                max_bytes: cli.mcp_sessions_memory,
                handshake_timeout: cli.mcp_handshake_timeout,
                idle: cli.mcp_session_idle,
            },
            limits,
            termination_grace_period: cli.termination_grace_period,
            max_tasks: cli.max_tasks,
            task_ttl: cli.task_ttl,
            turn_max_resumes: cli.turn_max_resumes,
            budget_metric_names: cli.budget_metric_names,
            log_level,
            log_format: cli.log_format,
            log_file: cli.log_file.or(cli.pallas_log_file),
            auth,
            push,
            a2a_streaming: cli.a2a_streaming,
            card_signing,
        })
    }

    /// A configuration for unit tests: one passthrough agent named `name`, listening on
    /// `listen`, with the contract's defaults (integration tests use the test kit's).
    #[cfg(test)]
    pub(crate) fn for_agent(name: &str, listen: SocketAddr) -> Config {
        let args = ["daedalus-runtime", "--agent-name", name];
        let nowhere = std::env::temp_dir().join("daedalus-runtime-no-config");
        match Launch::from_sources(args.map(OsString::from), &|_| None, &nowhere) {
            Ok(Launch::Run(mut config)) => {
                config.listen = listen;
                config.sessions_db = Some(SessionsDb::Sqlite(":memory:".to_owned()));
                config.tasks_db = TasksDb::Memory;
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

/// The push notification settings of the `PUSH_*` flags.
fn push_settings(
    cli: &Cli,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<push::PushSettings, ConfigError> {
    let allow = push::AllowList::parse(&cli.push_allow_hosts).map_err(|why| {
        ConfigError::invalid(
            &key_of("push_allow_hosts", "--push-allow-hosts"),
            why.to_string(),
        )
    })?;
    for (zero, id, flag) in [
        (cli.push_timeout.is_zero(), "push_timeout", "--push-timeout"),
        (
            cli.push_queue_bytes == 0,
            "push_queue_bytes",
            "--push-queue-bytes",
        ),
    ] {
        if zero {
            return Err(ConfigError::invalid(
                &key_of(id, flag),
                "must be more than zero",
            ));
        }
    }
    Ok(push::PushSettings {
        enabled: cli.push_notifications,
        allow,
        timeout: cli.push_timeout,
        retry_for: cli.push_retry_for,
        queue_bytes: usize::try_from(cli.push_queue_bytes).unwrap_or(usize::MAX),
    })
}

/// The authentication plan: the `AUTH_*` flags over the deployment file's `auth:` block. A
/// wrong key is named as the flag (or variable) that set it, else as the file's key.
fn auth_plan(
    cli: &Cli,
    deployment: &Deployment,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<auth::AuthPlan, ConfigError> {
    let flags = auth::AuthSettings {
        issuer: cli.auth_issuer.clone(),
        audience: cli.auth_audience.clone(),
        jwks_url: cli.auth_jwks_url.clone(),
        jwks_file: cli.auth_jwks_file.clone(),
        clock_skew: cli.auth_clock_skew.map(|d| d.as_secs()),
        api_keys_file: cli.auth_api_keys_file.clone(),
        api_key_header: cli.auth_api_key_header.clone(),
        required_scopes: cli.auth_required_scopes.clone(),
        admin_scope: cli.auth_admin_scope.clone(),
        tenant_claim: cli.auth_tenant_claim.clone(),
        metrics: cli.metrics_auth.clone(),
    };
    deployment.auth.clone().over(flags).plan().map_err(|e| {
        let id = e.key.to_ascii_lowercase();
        let flag = format!("--{}", id.replace('_', "-"));
        let key = key_of(&id, &flag);
        let key = if key == flag && cli_is_silent(cli, &id) {
            format!(
                "auth.{}",
                id.trim_start_matches("auth_")
                    .trim_start_matches("metrics_")
            )
        } else {
            key
        };
        ConfigError::invalid(&key, e.why)
    })
}

/// Whether the flag `id` was not given (so the value came from the deployment file).
fn cli_is_silent(cli: &Cli, id: &str) -> bool {
    match id {
        "auth_issuer" => cli.auth_issuer.is_none(),
        "auth_audience" => cli.auth_audience.is_none(),
        "auth_jwks_url" => cli.auth_jwks_url.is_none(),
        "auth_clock_skew" => cli.auth_clock_skew.is_none(),
        "auth_api_key_header" => cli.auth_api_key_header.is_none(),
        "auth_admin_scope" => cli.auth_admin_scope.is_none(),
        "auth_required_scopes" => cli.auth_required_scopes.is_none(),
        "metrics_auth" => cli.metrics_auth.is_none(),
        _ => true,
    }
}

/// The file conversations were kept in by default before they moved into the task store's
/// (read into it once at startup, [`crate::lifecycle`]'s `open_stores`).
pub const LEGACY_SESSIONS_FILE: &str = "daedalus-sessions.sqlite";

/// The task store and the conversation store (`None`: `SESSIONS_DB=off`) the settings name.
/// By default both live in one SQLite file in `work_dir` (conversations in the task store's
/// file, whenever that is a SQLite file), so a turn's writes share one writer and its commits.
fn stores_in(
    cli: &Cli,
    work_dir: &std::path::Path,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<(TasksDb, Option<SessionsDb>), ConfigError> {
    let in_work_dir = |file: &str| work_dir.join(file).to_string_lossy().into_owned();
    let tasks_db = match cli.tasks_db.as_deref() {
        Some(value) => TasksDb::parse(value).map_err(|why| {
            ConfigError::invalid(&key_of("tasks_db", "--tasks-db"), why.to_string())
        })?,
        None => TasksDb::Sqlite {
            path: in_work_dir("daedalus-tasks.sqlite"),
        },
    };
    let sessions_db = match cli.sessions_db.as_deref() {
        Some("off") => None,
        Some(value) => Some(SessionsDb::parse(value).map_err(|why| {
            ConfigError::invalid(&key_of("sessions_db", "--sessions-db"), why.to_string())
        })?),
        None => Some(SessionsDb::Sqlite(match &tasks_db {
            TasksDb::Sqlite { path } => path.clone(),
            TasksDb::Memory | TasksDb::NatsKv { .. } => in_work_dir(LEGACY_SESSIONS_FILE),
        })),
    };
    Ok((tasks_db, sessions_db))
}

/// The served agent as its card shows it: the settings' description and version where they
/// give one, else the deployment's (this build's version for the zero-config agent).
fn agent_config(
    cli: &Cli,
    served: &AgentDef,
    deployment: &Deployment,
    skills: Vec<daedalus_contract::AgentSkill>,
) -> AgentConfig {
    AgentConfig {
        description: cli.agent_description.clone().unwrap_or_else(|| {
            if served.description.is_empty() {
                format!("Daedalus agent {}", served.name)
            } else {
                served.description.clone()
            }
        }),
        name: served.name.clone(),
        version: cli.agent_version.clone().unwrap_or_else(|| {
            if deployment.sources.is_empty() {
                env!("CARGO_PKG_VERSION").to_owned()
            } else {
                deployment.version.clone()
            }
        }),
        skills,
        model: served.model.clone(),
    }
}

/// The agent the A2A face serves: `AGENT_NAME`, or the only agent nobody else depends on.
fn select_agent<'d>(
    deployment: &'d Deployment,
    requested: Option<&str>,
) -> Result<&'d AgentDef, AgentChoiceError> {
    if let Some(name) = requested {
        return deployment
            .agent(name)
            .ok_or_else(|| AgentChoiceError::unknown(name, deployment));
    }
    let used: std::collections::BTreeSet<&str> = deployment
        .agents
        .iter()
        .flat_map(|a| {
            let subagents = a.servers.iter().filter_map(|s| match s {
                ServerRef::Agent(n) => Some(n.as_str()),
                ServerRef::Mcp(_) => None,
            });
            a.depends_on.iter().map(String::as_str).chain(subagents)
        })
        .collect();
    let top: Vec<&AgentDef> = deployment
        .agents
        .iter()
        .filter(|a| !used.contains(a.name.as_str()))
        .collect();
    match top.as_slice() {
        [only] => Ok(only),
        _ => Err(AgentChoiceError::Several {
            agents: deployment.agent_names(),
        }),
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

/// The log filter the flags, the Pallas aliases and the deployment's `logger.level` ask for,
/// checked.
fn log_level_of(
    cli: &Cli,
    deployment: &Deployment,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<String, ConfigError> {
    let log_level = log_filter(
        cli.log_level
            .clone()
            .or_else(|| cli.pallas_log_level.clone())
            .or_else(|| deployment.log_level.clone())
            .unwrap_or_else(|| "info".to_owned()),
        cli.root_log_level.as_deref(),
    );
    if let Some(root) = &cli.root_log_level
        && root.parse::<tracing::level_filters::LevelFilter>().is_err()
    {
        return Err(ConfigError::invalid(
            &key_of("root_log_level", "--root-log-level"),
            format!("{root:?} is not a level (trace, debug, info, warn, error, off)"),
        ));
    }
    tracing_subscriber::EnvFilter::try_new(&log_level).map_err(|e| {
        let key = if cli.log_level.is_none() && cli.pallas_log_level.is_some() {
            key_of("pallas_log_level", "--pallas-log-level")
        } else {
            key_of("log_level", "--log-level")
        };
        ConfigError::invalid(&key, format!("not a filter: {e}"))
    })?;
    Ok(log_level)
}

/// The log filter: `level` alone, or with a `root` level for third-party crates, the runtime's
/// own crates at `level` (a directive list in `level` is kept as written, after the root).
fn log_filter(level: String, root: Option<&str>) -> String {
    let Some(root) = root.filter(|r| !r.trim().is_empty()) else {
        return level;
    };
    if level.contains('=') || level.contains(',') {
        return format!("{root},{level}");
    }
    format!("{root},daedalus_runtime={level},daedalus_contract={level}")
}

#[cfg(test)]
mod tests;
