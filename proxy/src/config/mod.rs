//! The proxy's configuration: flags with environment fallbacks, parsed and validated before
//! anything connects. [`Launch::from_sources`] is a pure function of its inputs.

use daedalus_contract::credentials::{CredentialSource, OAuthClient, Secret as CredentialSecret};
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use daedalus_contract::cli;
pub use daedalus_contract::cli::ConfigError;
use daedalus_contract::container;
pub use daedalus_contract::service::LogFormat;

/// Whether the proxy streams tasks from a runtime that can (`STREAM_TASKS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamTasks {
    /// When the runtime's card says `capabilities.streaming: true`.
    Auto,
    /// Never: every task waits for the whole Task, and no event is relayed.
    Never,
}
use serde::{Serialize, Serializer};

use crate::wire::subjects;

mod flags;

use flags::{Cli, Command, NatsArgs, RuntimeAuthArgs};

/// A secret value: never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// How to reach NATS.
#[derive(Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated; shown with credentials masked.
    #[serde(serialize_with = "masked_url")]
    pub url: String,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
    pub creds_file: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &daedalus_contract::redact::redact_url(&self.url))
            .field("user", &self.user)
            .field("password", &self.password)
            .field("token", &self.token)
            .field("creds_file", &self.creds_file)
            .field("tls_ca", &self.tls_ca)
            .finish()
    }
}

impl NatsConfig {
    /// The server URLs of the comma-separated list (a client fails over between them).
    pub fn servers(&self) -> Vec<&str> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect()
    }
}

/// Stream names and settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamsConfig {
    pub tasks: String,
    pub results: String,
    pub deadletter: String,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub results_max_age: Duration,
    /// Replicas of the streams the proxy creates.
    pub replicas: u8,
}

/// The sidecar's configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProxyConfig {
    pub nats: NatsConfig,
    pub streams: StreamsConfig,
    pub agent: String,
    pub runtime_url: String,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub startup_timeout: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub termination_grace_period: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub task_timeout: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub ack_wait: Duration,
    pub max_deliver: u32,
    pub concurrency: usize,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub retry_base_delay: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub retry_max_delay: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub health_interval: Duration,
    /// How long the runtime may be down before the proxy reports not ready and hands its
    /// held tasks back.
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub runtime_down_limit: Duration,
    /// How long a task refused for a spent budget may wait before it fails (`BUDGET_WAIT`).
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub budget_wait: Duration,
    /// Whether tasks are streamed from a runtime that can (`STREAM_TASKS`).
    pub stream_tasks: StreamTasks,
    /// How long storing a result may keep retrying while the lease is kept.
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub result_store_timeout: Duration,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub pull_expires: Duration,
    /// Prefixes a `reply-to` must start with to be honoured.
    pub reply_to_prefixes: Vec<String>,
    pub listen: SocketAddr,
    pub log_level: String,
    pub log_format: LogFormat,
    /// Spans are exported over OTLP (the standard `OTEL_*` variables ask for it). Without it
    /// the proxy makes no per-step spans and its trace ids without OpenTelemetry.
    pub export_spans: bool,
    /// The credential the proxy presents to a runtime that requires a caller (secrets masked
    /// when printed).
    pub runtime_credential: Option<CredentialSource>,
    /// A JWKS file whose keys must sign the runtime's agent card (`RUNTIME_CARD_KEYS`).
    pub runtime_card_keys: Option<PathBuf>,
}

/// What `daedalus-proxy publish` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PublishConfig {
    pub nats: NatsConfig,
    pub streams: StreamsConfig,
    pub agent: String,
    pub text: Option<String>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub json_file: Option<PathBuf>,
    pub wait: bool,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub timeout: Duration,
    pub json: bool,
    /// Print the task's stream events as they are relayed (`--follow`).
    pub follow: bool,
    /// The trace to continue (`--traceparent`), already checked.
    pub traceparent: Option<String>,
    pub log_level: String,
}

/// What the process was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    Run(ProxyConfig),
    CheckConfig(ProxyConfig),
    Publish(PublishConfig),
    /// Probe the `/healthz` of the proxy at this address (`healthcheck`).
    Healthcheck(SocketAddr),
}

impl Launch {
    /// Parses and validates `args` (program name first), reading the environment via `env`.
    pub fn from_sources(
        args: impl IntoIterator<Item = OsString>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Launch, ConfigError> {
        let (cli, sourced) = cli::parse_naming_env::<Cli>(args, env)?;
        if let Some(Command::Healthcheck) = cli.command {
            return Ok(Launch::Healthcheck(
                daedalus_contract::healthcheck::local_address(cli.proxy_host, cli.proxy_port),
            ));
        }
        let key = |id: &str, flag: &str| cli::key_for(&sourced, id, flag);
        let nats = nats_config(&cli.nats, &key)?;
        let streams = StreamsConfig {
            tasks: cli.streams.tasks_stream.clone(),
            results: cli.streams.results_stream.clone(),
            deadletter: cli.streams.deadletter_stream.clone(),
            results_max_age: cli.streams.results_max_age,
            replicas: cli.streams.stream_replicas,
        };
        check_stream_names(&streams, &key)?;
        tracing_subscriber::EnvFilter::try_new(&cli.log_level).map_err(|e| {
            ConfigError::invalid(
                &key("log_level", "--log-level"),
                format!("not a filter: {e}"),
            )
        })?;

        if let Some(Command::Publish(publish)) = cli.command {
            return publish_config(publish, cli.agent_name, nats, streams, cli.log_level)
                .map(Launch::Publish);
        }
        let check_config = cli.check_config;
        let config = proxy_config(cli, nats, streams, &key, env)?;
        Ok(if check_config {
            Launch::CheckConfig(config)
        } else {
            Launch::Run(config)
        })
    }
}

/// `publish`'s plan: the agent (`--agent`, else `AGENT_NAME`) and a W3C `--traceparent`.
fn publish_config(
    p: flags::PublishArgs,
    agent_name: Option<String>,
    nats: NatsConfig,
    streams: StreamsConfig,
    log_level: String,
) -> Result<PublishConfig, ConfigError> {
    let agent = p.agent.or(agent_name).ok_or_else(|| {
        ConfigError::invalid("--agent", "name the agent with --agent or AGENT_NAME")
    })?;
    check_agent(&agent, "--agent")?;
    if let Some(tp) = &p.traceparent
        && crate::wire::trace::TraceParent::parse(tp).is_none()
    {
        return Err(ConfigError::invalid(
            "--traceparent",
            format!("{tp:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"),
        ));
    }
    Ok(PublishConfig {
        nats,
        streams,
        agent,
        text: p.text,
        context_id: p.context_id,
        task_id: p.task_id,
        json_file: p.json_file,
        wait: !p.no_wait,
        timeout: p.timeout,
        json: p.json,
        follow: p.follow,
        traceparent: p.traceparent,
        log_level,
    })
}

/// The sidecar's plan: the agent it serves, the runtime it calls, and every bound checked.
fn proxy_config(
    cli: Cli,
    nats: NatsConfig,
    streams: StreamsConfig,
    key: &dyn Fn(&str, &str) -> String,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProxyConfig, ConfigError> {
    let agent_key = key("agent_name", "--agent-name");
    let agent = cli
        .agent_name
        .ok_or_else(|| ConfigError::invalid(&agent_key, "required: the agent to serve"))?;
    check_agent(&agent, &agent_key)?;
    let runtime_url = runtime_url(cli.runtime_url.as_deref(), cli.a2a_port, key)?;
    let positive = |d: Duration, id: &str, flag: &str| {
        if d.is_zero() {
            Err(ConfigError::invalid(
                &key(id, flag),
                "must be more than zero",
            ))
        } else {
            Ok(d)
        }
    };
    let ack_wait = positive(cli.ack_wait, "ack_wait", "--ack-wait")?;
    check_delivery(ack_wait, cli.max_deliver, cli.concurrency, key)?;
    let reply_to_prefixes = reply_prefixes(
        &cli.reply_to_prefixes,
        &key("reply_to_prefixes", "--reply-to-prefixes"),
    )?;
    Ok(ProxyConfig {
        nats,
        streams,
        agent,
        runtime_url,
        startup_timeout: positive(cli.startup_timeout, "startup_timeout", "--startup-timeout")?,
        termination_grace_period: cli.termination_grace_period,
        task_timeout: positive(cli.task_timeout, "task_timeout", "--task-timeout")?,
        ack_wait,
        max_deliver: cli.max_deliver,
        concurrency: cli.concurrency,
        retry_base_delay: cli.retry_base_delay,
        retry_max_delay: cli.retry_max_delay.max(cli.retry_base_delay),
        health_interval: positive(cli.health_interval, "health_interval", "--health-interval")?,
        runtime_down_limit: cli.runtime_down_limit,
        budget_wait: positive(cli.budget_wait, "budget_wait", "--budget-wait")?,
        stream_tasks: cli.stream_tasks,
        result_store_timeout: positive(
            cli.result_store_timeout,
            "result_store_timeout",
            "--result-store-timeout",
        )?,
        pull_expires: positive(cli.pull_expires, "pull_expires", "--pull-expires")?,
        reply_to_prefixes,
        listen: SocketAddr::new(cli.proxy_host, cli.proxy_port),
        log_level: cli.log_level,
        log_format: cli.log_format,
        export_spans: daedalus_contract::telemetry::exports(env),
        runtime_credential: runtime_credential(&cli.runtime_auth, key)?,
        runtime_card_keys: runtime_card_keys(&cli.runtime_auth, key)?,
    })
}

/// The runtime's URL: `--runtime-url` without a trailing `/` (an http(s) URL), else the
/// runtime's A2A port on this host.
fn runtime_url(
    url: Option<&str>,
    a2a_port: u16,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<String, ConfigError> {
    let Some(url) = url else {
        return Ok(format!("http://127.0.0.1:{a2a_port}"));
    };
    let trimmed = url.trim_end_matches('/').to_owned();
    if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
        return Err(ConfigError::invalid(
            &key("runtime_url", "--runtime-url"),
            format!("{url:?} is not an http(s) URL"),
        ));
    }
    Ok(trimmed)
}

/// The bounds of how tasks are delivered: an ack wait of at least a second, at least one
/// delivery, and 1 to 1024 tasks at once.
fn check_delivery(
    ack_wait: Duration,
    max_deliver: u32,
    concurrency: usize,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<(), ConfigError> {
    if ack_wait < Duration::from_secs(1) {
        return Err(ConfigError::invalid(
            &key("ack_wait", "--ack-wait"),
            "must be at least 1s",
        ));
    }
    if max_deliver == 0 {
        return Err(ConfigError::invalid(
            &key("max_deliver", "--max-deliver"),
            "must be >= 1",
        ));
    }
    if concurrency == 0 || concurrency > 1024 {
        return Err(ConfigError::invalid(
            &key("concurrency", "--concurrency"),
            "must be between 1 and 1024",
        ));
    }
    Ok(())
}

fn nats_config(
    args: &NatsArgs,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<NatsConfig, ConfigError> {
    if args.nats_user.is_some() != args.nats_password.is_some() {
        return Err(ConfigError::invalid(
            &key("nats_password", "--nats-password"),
            "NATS_USER and NATS_PASSWORD go together",
        ));
    }
    let methods = [
        args.nats_user.is_some(),
        args.nats_token.is_some(),
        args.nats_creds.is_some(),
    ];
    if methods.iter().filter(|m| **m).count() > 1 {
        return Err(ConfigError::invalid(
            &key("nats_token", "--nats-token"),
            "choose one of user/password, token and creds file",
        ));
    }
    for (path, id, flag) in [
        (&args.nats_creds, "nats_creds", "--nats-creds"),
        (&args.nats_tls_ca, "nats_tls_ca", "--nats-tls-ca"),
    ] {
        if let Some(p) = path
            && !p.is_file()
        {
            return Err(ConfigError::invalid(
                &key(id, flag),
                format!("{} is not a file", p.display()),
            ));
        }
    }
    let url_key = key("nats_url", "--nats-url");
    let mut servers = args
        .nats_url
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .peekable();
    if servers.peek().is_none() {
        return Err(ConfigError::invalid(&url_key, "must not be empty"));
    }
    for server in servers {
        if server.parse::<async_nats::ServerAddr>().is_err() {
            return Err(ConfigError::invalid(
                &url_key,
                format!(
                    "{} is not a NATS server URL",
                    daedalus_contract::redact::redact_url(server)
                ),
            ));
        }
    }
    Ok(NatsConfig {
        url: args.nats_url.clone(),
        user: args.nats_user.clone(),
        password: args.nats_password.clone().map(Secret),
        token: args.nats_token.clone().map(Secret),
        creds_file: args.nats_creds.clone(),
        tls_ca: args.nats_tls_ca.clone(),
    })
}

/// The configured reply prefixes, each checked.
fn reply_prefixes(list: &str, key: &str) -> Result<Vec<String>, ConfigError> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            subjects::check_reply_prefix(p)
                .map(|()| p.to_owned())
                .map_err(|why| ConfigError::invalid(key, format!("{p:?}: {why}")))
        })
        .collect()
}

/// Every stream name is one NATS subject token.
fn check_stream_names(
    streams: &StreamsConfig,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<(), ConfigError> {
    for (name, id, flag) in [
        (&streams.tasks, "tasks_stream", "--tasks-stream"),
        (&streams.results, "results_stream", "--results-stream"),
        (
            &streams.deadletter,
            "deadletter_stream",
            "--deadletter-stream",
        ),
    ] {
        if !subjects::is_token(name, 255) {
            return Err(ConfigError::invalid(
                &key(id, flag),
                format!("{name:?} is not a stream name"),
            ));
        }
    }
    Ok(())
}

/// The proxy's credential for the runtime, from its flags: a token file, or a whole
/// client-credentials grant (token URL, client id, and one secret), never both.
/// `RUNTIME_CARD_KEYS`, checked: a file that reads as a JWKS with at least one key a card may
/// be signed with.
fn runtime_card_keys(
    args: &RuntimeAuthArgs,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<Option<PathBuf>, ConfigError> {
    let Some(path) = &args.runtime_card_keys else {
        return Ok(None);
    };
    let name = key("runtime_card_keys", "--runtime-card-keys");
    let bytes = std::fs::read(path).map_err(|e| {
        ConfigError::invalid(
            &name,
            format!("cannot read {}: {}", path.display(), e.kind()),
        )
    })?;
    let (keys, _) = daedalus_contract::card_signing::KeySet::read(&bytes)
        .map_err(|e| ConfigError::invalid(&name, format!("{}: {e}", path.display())))?;
    if keys.is_empty() {
        return Err(ConfigError::invalid(
            &name,
            format!(
                "{} holds no ES256, EdDSA or RS256 public key",
                path.display()
            ),
        ));
    }
    Ok(Some(path.clone()))
}

fn runtime_credential(
    args: &RuntimeAuthArgs,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<Option<CredentialSource>, ConfigError> {
    let grant_named = args.runtime_token_url.is_some()
        || args.runtime_client_id.is_some()
        || args.runtime_client_secret.is_some()
        || args.runtime_client_secret_file.is_some();
    if let Some(file) = &args.runtime_token_file {
        if grant_named {
            return Err(ConfigError::invalid(
                &key("runtime_token_file", "--runtime-token-file"),
                "names a token file and a client-credentials grant too; keep one",
            ));
        }
        return Ok(Some(CredentialSource::TokenFile(file.clone())));
    }
    if !grant_named {
        // A scope or an audience alone would be ignored: say what they belong to.
        if args.runtime_scope.is_some() || args.runtime_audience.is_some() {
            let (id, flag) = if args.runtime_scope.is_some() {
                ("runtime_scope", "--runtime-scope")
            } else {
                ("runtime_audience", "--runtime-audience")
            };
            return Err(ConfigError::invalid(
                &key(id, flag),
                "belongs to a client-credentials grant: set RUNTIME_TOKEN_URL, RUNTIME_CLIENT_ID and RUNTIME_CLIENT_SECRET too",
            ));
        }
        return Ok(None);
    }
    let required = |value: &Option<String>, id: &str, flag: &str, var: &str| {
        value
            .clone()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                ConfigError::invalid(
                    &key(id, flag),
                    format!("{var} is required for the proxy's client-credentials grant"),
                )
            })
    };
    let token_url = required(
        &args.runtime_token_url,
        "runtime_token_url",
        "--runtime-token-url",
        "RUNTIME_TOKEN_URL",
    )?;
    if !(token_url.starts_with("https://") || token_url.starts_with("http://")) {
        return Err(ConfigError::invalid(
            &key("runtime_token_url", "--runtime-token-url"),
            format!(
                "{} is not an http(s) URL",
                daedalus_contract::redact::redact_url(&token_url)
            ),
        ));
    }
    let client_id = required(
        &args.runtime_client_id,
        "runtime_client_id",
        "--runtime-client-id",
        "RUNTIME_CLIENT_ID",
    )?;
    let secret = client_secret(args, key)?;
    Ok(Some(CredentialSource::ClientCredentials(OAuthClient {
        token_url,
        client_id,
        client_secret: CredentialSecret::new(secret),
        scope: args.runtime_scope.clone().filter(|s| !s.trim().is_empty()),
        audience: args
            .runtime_audience
            .clone()
            .filter(|s| !s.trim().is_empty()),
    })))
}

/// The grant's client secret: `RUNTIME_CLIENT_SECRET` or the file `RUNTIME_CLIENT_SECRET_FILE`
/// names (one of them), and not empty.
fn client_secret(
    args: &RuntimeAuthArgs,
    key: &dyn Fn(&str, &str) -> String,
) -> Result<String, ConfigError> {
    let secret = match (
        &args.runtime_client_secret,
        &args.runtime_client_secret_file,
    ) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                &key("runtime_client_secret", "--runtime-client-secret"),
                "and RUNTIME_CLIENT_SECRET_FILE both name the secret; keep one",
            ));
        }
        (Some(secret), None) => secret.clone(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .map(|s| s.trim().to_owned())
            .map_err(|e| {
                ConfigError::invalid(
                    &key("runtime_client_secret_file", "--runtime-client-secret-file"),
                    format!("cannot read {}: {e}", file.display()),
                )
            })?,
        (None, None) => {
            return Err(ConfigError::invalid(
                &key("runtime_client_secret", "--runtime-client-secret"),
                "RUNTIME_CLIENT_SECRET (or RUNTIME_CLIENT_SECRET_FILE) is required for the proxy's client-credentials grant",
            ));
        }
    };
    if secret.trim().is_empty() {
        let (id, flag) = if args.runtime_client_secret_file.is_some() {
            ("runtime_client_secret_file", "--runtime-client-secret-file")
        } else {
            ("runtime_client_secret", "--runtime-client-secret")
        };
        return Err(ConfigError::invalid(
            &key(id, flag),
            "the client secret is empty (a secret reference that resolved to nothing?)",
        ));
    }
    Ok(secret)
}

fn masked_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&daedalus_contract::redact::redact_url(url))
}

fn check_agent(agent: &str, key: &str) -> Result<(), ConfigError> {
    container::validate_agent_name(agent).map_err(|m| ConfigError::invalid(key, m))
}

impl ProxyConfig {
    /// The configuration of a proxy for `agent`, with NATS at `nats_url` and the runtime at
    /// `runtime_url`, every other setting at its default: what `daedalus-proxy --agent-name …
    /// --nats-url … --runtime-url …` runs with in an empty environment. For embedding the proxy.
    pub fn for_agent(agent: &str, nats_url: &str, runtime_url: &str) -> Result<Self, ConfigError> {
        let args = [
            "daedalus-proxy",
            "--agent-name",
            agent,
            "--nats-url",
            nats_url,
            "--runtime-url",
            runtime_url,
        ]
        .map(OsString::from);
        match Launch::from_sources(args, &|_| None)? {
            Launch::Run(config) => Ok(config),
            other => unreachable!("no subcommand was given, yet it parsed as {other:?}"),
        }
    }

    /// The resolved configuration as pretty JSON, secrets masked.
    pub fn to_pretty_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the configuration serializes")
    }
}

#[cfg(test)]
mod tests;
