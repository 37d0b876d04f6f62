//! The command line: every flag, each reading the environment variable beside it, and the
//! subcommands. Parsed by [`super::Launch::from_sources`]; nothing here validates.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use daedalus_contract::container::{self, parse_duration};
use daedalus_contract::service::LogFormat;

use super::size::parse_size;

/// The command line. Every flag also reads the environment variable named beside it.
#[derive(Debug, Parser)]
#[command(
    name = "daedalus-runtime",
    version,
    about = "The Daedalus agent runtime: serves the runtime contract (POST /, /health, agent card)."
)]
pub(super) struct Cli {
    /// Port of the A2A HTTP server.
    #[arg(long, env = "A2A_PORT", global = true, default_value_t = container::A2A_PORT_DEFAULT)]
    pub(super) port: u16,
    /// Address to bind.
    #[arg(long, env = "A2A_HOST", global = true, default_value = "0.0.0.0")]
    pub(super) host: IpAddr,
    /// The agent the A2A face serves (with no agents.yaml: the one agent's name);
    /// a NATS subject token ([A-Za-z0-9_-]{1,64}).
    #[arg(long, env = "AGENT_NAME", global = true)]
    pub(super) agent_name: Option<String>,
    /// Serve only this agent of agents.yaml, as `pallas --agent` does: only it and the
    /// sub-agents it calls are built, and only it is served (its own port, the registry,
    /// `POST /`).
    #[arg(long = "agent", env = "SERVE_AGENT", global = true)]
    pub(super) serve_agent: Option<String>,
    /// One-line description for the agent card.
    #[arg(long, env = "AGENT_DESCRIPTION", global = true)]
    pub(super) agent_description: Option<String>,
    /// Version for the agent card (default: the runtime's version).
    #[arg(long, env = "AGENT_VERSION", global = true)]
    pub(super) agent_version: Option<String>,
    /// Skills for the agent card, as a JSON array of {id, name, description, tags}.
    #[arg(long, env = "AGENT_SKILLS", global = true)]
    pub(super) agent_skills: Option<String>,
    /// Base URL under which clients reach this runtime (default: `http://127.0.0.1:<port>`).
    #[arg(long, env = "PUBLIC_URL", global = true)]
    pub(super) public_url: Option<String>,
    /// Model of the agent, as `provider.model`; `passthrough` echoes, `tck` plays the A2A
    /// conformance kit's scenarios.
    #[arg(
        long,
        env = "DEFAULT_MODEL",
        global = true,
        default_value = "passthrough"
    )]
    pub(super) default_model: String,
    /// Writable workspace (default: /workspace, or the current directory if that is absent).
    #[arg(long, env = "WORK_DIR", global = true)]
    pub(super) work_dir: Option<PathBuf>,
    /// The session store: a SQLite file (default: the task store's file when that is SQLite,
    /// else <WORK_DIR>/daedalus-sessions.sqlite), `:memory:`, `nats://host:4222[/bucket]` (a
    /// JetStream KV bucket shared by replicas), or `off`.
    #[arg(long, env = "SESSIONS_DB", global = true)]
    pub(super) sessions_db: Option<String>,
    /// Where A2A tasks and their running turns are kept: a SQLite file (default:
    /// <WORK_DIR>/daedalus-tasks.sqlite; a restart keeps the tasks and resumes their turns),
    /// `nats://host:4222[/bucket]` (a JetStream KV bucket shared by replicas, default bucket
    /// `daedalus-tasks`), or `memory` (a restart forgets them and fails the turns it cut).
    #[arg(long, env = "TASKS_DB", global = true)]
    pub(super) tasks_db: Option<String>,
    /// This replica's name among those sharing a task store (default: `<hostname>:<port>`):
    /// after a restart, the tasks it left running are reported failed.
    #[arg(long, env = "REPLICA_ID", global = true)]
    pub(super) replica_id: Option<String>,
    /// How long a replica sharing a NATS KV task store keeps its lease unrenewed (renewed
    /// every fifth of it); a replica silent for longer is lost, and another fails the tasks it
    /// was running. 1s to 10m.
    #[arg(long, env = "REPLICA_LEASE", global = true, default_value = "5s", value_parser = parse_duration)]
    pub(super) replica_lease: Duration,
    /// Whether A2A push notifications are served (`on` or `off`; also `true`/`false`,
    /// `yes`/`no`, `1`/`0`): tasks' webhooks, and the delivery of each state of a task to them.
    // A switch takes a value (`ArgAction::Set`): a bare `bool` field would be a flag that
    // refuses `=off`, and the environment's value comes in as `--push-notifications=off`.
    #[arg(
        long,
        env = "PUSH_NOTIFICATIONS",
        global = true,
        default_value = "on",
        value_name = "on|off",
        action = clap::ArgAction::Set,
        value_parser = parse_switch
    )]
    pub(super) push_notifications: bool,
    /// Whether the A2A bindings serve streams (`on` or `off`, as `PUSH_NOTIFICATIONS`):
    /// `SendStreamingMessage` and `SubscribeToTask`. `off`: the card says `streaming: false`
    /// and both answer `UnsupportedOperationError`; the contract's `POST /` streams still.
    #[arg(
        long,
        env = "A2A_STREAMING",
        global = true,
        default_value = "on",
        value_name = "on|off",
        action = clap::ArgAction::Set,
        value_parser = parse_switch
    )]
    pub(super) a2a_streaming: bool,
    /// Hosts a webhook may be at although they are not public addresses (loopback, private,
    /// link-local), comma-separated: names, addresses or CIDR ranges (`127.0.0.1,10.0.0.0/8`).
    #[arg(long, env = "PUSH_ALLOW_HOSTS", global = true, value_delimiter = ',')]
    pub(super) push_allow_hosts: Vec<String>,
    /// How long one POST to a webhook may take.
    #[arg(long, env = "PUSH_TIMEOUT", global = true, default_value = "10s", value_parser = parse_duration)]
    pub(super) push_timeout: Duration,
    /// How long a delivery a webhook cannot take is tried again (with backoff) before it is
    /// given up.
    #[arg(long, env = "PUSH_RETRY_FOR", global = true, default_value = "5m", value_parser = parse_duration)]
    pub(super) push_retry_for: Duration,
    /// Bytes that may wait for webhooks, in all (with a unit: 64MiB).
    #[arg(long, env = "PUSH_QUEUE_BYTES", global = true, default_value = "64MiB", value_parser = parse_size)]
    pub(super) push_queue_bytes: u64,
    /// The private key that signs the agent cards served (A2A §8.4): a PEM file (PKCS#8 EC
    /// P-256, Ed25519 or RSA) or a private JWK. Unset: cards go unsigned. Read again on SIGHUP.
    #[arg(long, env = "CARD_SIGNING_KEY", global = true)]
    pub(super) card_signing_key: Option<PathBuf>,
    /// The `kid` signatures name (default: the key's RFC 7638 thumbprint).
    #[arg(long, env = "CARD_SIGNING_KID", global = true)]
    pub(super) card_signing_kid: Option<String>,
    /// Where the public keys are published, for the signatures' `jku` (default: none; this
    /// runtime serves them at /.well-known/jwks.json either way).
    #[arg(long, env = "CARD_SIGNING_JKU", global = true)]
    pub(super) card_signing_jku: Option<String>,
    /// How long a replaced signing key keeps signing beside the new one and stays published.
    #[arg(long, env = "CARD_SIGNING_OVERLAP", global = true, default_value = "24h", value_parser = parse_duration)]
    pub(super) card_signing_overlap: Duration,
    /// How long a conversation idle for longer is kept in the session store (`720h` = 30
    /// days); `0` keeps them forever.
    #[arg(long, env = "SESSION_TTL", global = true, default_value = "720h", value_parser = parse_duration)]
    pub(super) session_ttl: Duration,
    /// Extra `Host` values the MCP endpoints accept, comma-separated (besides loopback, the
    /// deployment's `host` and PUBLIC_URL's host); `*` accepts any.
    #[arg(long, env = "MCP_ALLOWED_HOSTS", global = true, value_delimiter = ',')]
    pub(super) mcp_allowed_hosts: Vec<String>,
    /// Largest accepted request body (bytes, or with a unit: 16MiB, 512KiB, 10MB).
    #[arg(long, env = "MAX_BODY_SIZE", global = true, default_value = "16MiB", value_parser = parse_size)]
    pub(super) max_body_size: u64,
    /// Time allowed for a client to send the request headers.
    #[arg(long, env = "HEADER_READ_TIMEOUT", global = true, default_value = "10s", value_parser = parse_duration)]
    pub(super) header_read_timeout: Duration,
    /// Most client connections open at once on each port; past it a new connection is answered
    /// 503 with `Retry-After` at once (a health probe or card fetch is served) and closed.
    #[arg(long, env = "MAX_CONNECTIONS", global = true, default_value_t = 20_000)]
    pub(super) max_connections: usize,
    /// Time allowed for a client to send the request body.
    #[arg(long, env = "BODY_READ_TIMEOUT", global = true, default_value = "30s", value_parser = parse_duration)]
    pub(super) body_read_timeout: Duration,
    /// Longest a task may run before it is canceled and reported failed.
    #[arg(long, env = "REQUEST_TIMEOUT", global = true, default_value = "15m", value_parser = parse_duration)]
    pub(super) request_timeout: Duration,
    /// Time in-flight requests get to finish after SIGTERM/SIGINT.
    #[arg(long, env = "TERMINATION_GRACE_PERIOD", global = true, default_value = "30s", value_parser = parse_duration)]
    pub(super) termination_grace_period: Duration,
    /// How many tasks are remembered (for input-required continuation and idempotent replay).
    #[arg(long, env = "MAX_TASKS", global = true, default_value_t = 10_000)]
    pub(super) max_tasks: usize,
    /// How many bytes the remembered tasks may hold (bytes, or with a unit: 64MiB); the oldest
    /// idle ones are forgotten first.
    #[arg(long, env = "TASK_MEMORY", global = true, default_value = "64MiB", value_parser = parse_size)]
    pub(super) task_memory: u64,
    /// How long a task is kept after it last changed (for `GetTask`, `ListTasks`, continuation
    /// and replay).
    #[arg(long, env = "TASK_TTL", global = true, default_value = "24h", value_parser = parse_duration)]
    pub(super) task_ttl: Duration,
    /// Turns run at once, at most: a rail far above what `TURN_MEMORY` admits. Past any
    /// turn limit `POST /` and the A2A bindings answer 503 with `Retry-After` (the proxy
    /// retries later) and the MCP face answers with an error to retry.
    #[arg(
        long,
        env = "MAX_CONCURRENT_TASKS",
        global = true,
        default_value_t = 100_000
    )]
    pub(super) max_concurrent_tasks: usize,
    /// The names of each budget scope kind (principals, tenants, agents) that get series of
    /// their own in `/metrics`; the rest are counted as `other`. 1 to 10,000.
    #[arg(long, env = "BUDGET_METRIC_NAMES", global = true, default_value_t = super::deployment::budgets::METRIC_NAMES)]
    pub(super) budget_metric_names: usize,
    /// Resumes of one turn (after its runtime stopped mid-turn) before it is failed, saying so:
    /// a turn that keeps stopping its runtime is not resumed forever.
    #[arg(long, env = "TURN_MAX_RESUMES", global = true, default_value_t = super::TURN_MAX_RESUMES_DEFAULT)]
    pub(super) turn_max_resumes: u32,
    /// Bytes the running turns may hold, every agent's together (each is charged what a held
    /// turn costs plus its message); with a unit: 512MiB.
    #[arg(long, env = "TURN_MEMORY", global = true, default_value = "512MiB", value_parser = parse_size)]
    pub(super) turn_memory: u64,
    /// Bytes one agent's running turns may hold (default: all of TURN_MEMORY); set it lower so
    /// one agent's flood leaves the others room.
    #[arg(long, env = "AGENT_TURN_MEMORY", global = true, value_parser = parse_size)]
    pub(super) agent_turn_memory: Option<u64>,
    /// Live MCP sessions at most, across every agent. At the bound a new session ends the
    /// idle session first in line (an unfinished handshake, else the least recently used); when
    /// every session has a call in flight, a new `initialize` gets 503 with `Retry-After`.
    #[arg(long, env = "MAX_MCP_SESSIONS", global = true, default_value_t = 1_000)]
    pub(super) max_mcp_sessions: usize,
    /// Bytes the live MCP sessions may hold (each is charged the measured cost of an idle
    /// session); with a unit: 64MiB.
    #[arg(long, env = "MCP_SESSIONS_MEMORY", global = true, default_value = "64MiB", value_parser = parse_size)]
    pub(super) mcp_sessions_memory: u64,
    /// An MCP session whose client has not sent `notifications/initialized` by then is ended.
    #[arg(long, env = "MCP_HANDSHAKE_TIMEOUT", global = true, default_value = "10s", value_parser = parse_duration)]
    pub(super) mcp_handshake_timeout: Duration,
    /// An MCP session unused for this long (and with no call in flight) is ended.
    #[arg(long, env = "MCP_SESSION_IDLE", global = true, default_value = "5m", value_parser = parse_duration)]
    pub(super) mcp_session_idle: Duration,
    /// Log filter: a level (info, debug, ...) or a tracing directive list (default: the
    /// deployment's logger.level, else info).
    #[arg(long, env = "LOG_LEVEL", global = true)]
    pub(super) log_level: Option<String>,
    /// Pallas's name for `LOG_LEVEL` (a compatibility alias; `LOG_LEVEL` wins).
    #[arg(long, env = "PALLAS_LOG_LEVEL", global = true, hide = true)]
    pub(super) pallas_log_level: Option<String>,
    /// The level of third-party crates' logs (Pallas's `PALLAS_ROOT_LOG_LEVEL`); the
    /// runtime's own follow the log level.
    #[arg(long, env = "PALLAS_ROOT_LOG_LEVEL", global = true)]
    pub(super) root_log_level: Option<String>,
    /// Log format: json (one object a line) or text.
    #[arg(long, env = "LOG_FORMAT", global = true, default_value = "json")]
    pub(super) log_format: LogFormat,
    /// Also write JSON log lines to this file, rotated at 10 MB with 5 files kept.
    #[arg(long, env = "LOG_FILE", global = true)]
    pub(super) log_file: Option<PathBuf>,
    /// Pallas's name for `LOG_FILE` (a compatibility alias; `LOG_FILE` wins).
    #[arg(long, env = "PALLAS_LOG_FILE", global = true, hide = true)]
    pub(super) pallas_log_file: Option<PathBuf>,
    /// Inbound authentication: the token issuer (`iss`); its OIDC discovery document names
    /// the signing keys. Off (with AUTH_API_KEYS_FILE unset) means every caller is served.
    #[arg(long, env = "AUTH_ISSUER", global = true)]
    pub(super) auth_issuer: Option<String>,
    /// The audience (`aud`) bearer tokens must be for.
    #[arg(long, env = "AUTH_AUDIENCE", global = true)]
    pub(super) auth_audience: Option<String>,
    /// The issuer's JWKS, instead of the one its discovery document names.
    #[arg(long, env = "AUTH_JWKS_URL", global = true)]
    pub(super) auth_jwks_url: Option<String>,
    /// A JWKS file instead.
    #[arg(long, env = "AUTH_JWKS_FILE", global = true)]
    pub(super) auth_jwks_file: Option<PathBuf>,
    /// Clock difference allowed on a token's `exp` and `nbf` (at most 5m; default 30s).
    #[arg(long, env = "AUTH_CLOCK_SKEW", global = true, value_parser = parse_duration)]
    pub(super) auth_clock_skew: Option<Duration>,
    /// API keys: a YAML file of SHA-256 hashes with their principals, tenants and scopes
    /// (read again on SIGHUP).
    #[arg(long, env = "AUTH_API_KEYS_FILE", global = true)]
    pub(super) auth_api_keys_file: Option<PathBuf>,
    /// The header an API key comes in (default X-API-Key; a key may also come as the bearer).
    #[arg(long, env = "AUTH_API_KEY_HEADER", global = true)]
    pub(super) auth_api_key_header: Option<String>,
    /// Scopes every caller must hold (comma-separated); without one, `403`.
    #[arg(
        long,
        env = "AUTH_REQUIRED_SCOPES",
        global = true,
        value_delimiter = ','
    )]
    pub(super) auth_required_scopes: Option<Vec<String>>,
    /// The scope that sees every task and conversation of its tenant.
    #[arg(long, env = "AUTH_ADMIN_SCOPE", global = true)]
    pub(super) auth_admin_scope: Option<String>,
    /// The token claim naming the caller's tenant.
    #[arg(long, env = "AUTH_TENANT_CLAIM", global = true)]
    pub(super) auth_tenant_claim: Option<String>,
    /// Who may read /metrics: open (default), caller, or `scope:<name>`.
    #[arg(long, env = "METRICS_AUTH", global = true)]
    pub(super) metrics_auth: Option<String>,
    /// Print the resolved configuration and exit.
    #[arg(long, global = true)]
    pub(super) check_config: bool,
    #[command(subcommand)]
    pub(super) command: Option<Command>,
}

/// Every flag is `global`, so the values the environment supplies (appended as flags) are
/// accepted after a subcommand too.
#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Exit 0 when this runtime's `GET /health` (at A2A_HOST:A2A_PORT, loopback for 0.0.0.0)
    /// answers 200, else 1: a container HEALTHCHECK that needs no curl.
    Healthcheck,
    /// Print the inline agents.yaml definitions of a fast-agent module's `@fast.agent(...)`
    /// agents (Python modules cannot run here); what could not be read statically is named on
    /// stderr and left as a placeholder marked FILL IN.
    MigrateModule {
        /// The Python module.
        module: PathBuf,
    },
}

/// `on`/`off` (also `true`/`false`, `1`/`0`, `yes`/`no`).
fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        other => Err(format!("{other:?} is neither on nor off")),
    }
}
