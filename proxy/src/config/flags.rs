//! The proxy's flags, each with the environment variable beside it (clap): what
//! [`Launch::from_sources`](super::Launch::from_sources) parses before it checks anything.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use daedalus_contract::container::{self, parse_duration};

use super::{LogFormat, StreamTasks};
use crate::wire::subjects;

#[derive(Debug, Parser)]
#[command(
    name = "daedalus-proxy",
    version,
    about = "NATS JetStream sidecar: feeds an agent's tasks to its runtime and publishes the results."
)]
pub(super) struct Cli {
    #[command(flatten)]
    pub(super) nats: NatsArgs,
    #[command(flatten)]
    pub(super) streams: StreamArgs,
    /// The agent whose tasks this proxy consumes ([A-Za-z0-9_-]{1,64}).
    #[arg(long, env = "AGENT_NAME", global = true)]
    pub(super) agent_name: Option<String>,
    /// Port of the runtime on localhost (ignored when RUNTIME_URL is set).
    #[arg(long, env = "A2A_PORT", global = true, default_value_t = container::A2A_PORT_DEFAULT)]
    pub(super) a2a_port: u16,
    /// Base URL of the runtime (default: http://127.0.0.1:$A2A_PORT).
    #[arg(long, env = "RUNTIME_URL", global = true)]
    pub(super) runtime_url: Option<String>,
    /// Longest wait for NATS and the runtime's /health at startup.
    #[arg(long, env = "STARTUP_TIMEOUT", global = true, default_value = "60s", value_parser = parse_duration)]
    pub(super) startup_timeout: Duration,
    /// Time the in-flight task gets after SIGTERM/SIGINT before it is handed back.
    #[arg(long, env = "TERMINATION_GRACE_PERIOD", global = true, default_value = "30s", value_parser = parse_duration)]
    pub(super) termination_grace_period: Duration,
    /// Longest a runtime call may take before it counts as a transient failure.
    #[arg(long, env = "TASK_TIMEOUT", global = true, default_value = "20m", value_parser = parse_duration)]
    pub(super) task_timeout: Duration,
    /// The consumer's ack wait: a task's lease, renewed by progress acks every third of it.
    #[arg(long, env = "ACK_WAIT", global = true, default_value = "30s", value_parser = parse_duration)]
    pub(super) ack_wait: Duration,
    /// Deliveries of a task before it is given up with a failed result.
    #[arg(long, env = "MAX_DELIVER", global = true, default_value_t = 5)]
    pub(super) max_deliver: u32,
    /// Tasks worked on at once.
    #[arg(long, env = "CONCURRENCY", global = true, default_value_t = 1)]
    pub(super) concurrency: usize,
    /// First retry delay after a transient failure; doubles per attempt.
    #[arg(long, env = "RETRY_BASE_DELAY", global = true, default_value = "1s", value_parser = parse_duration)]
    pub(super) retry_base_delay: Duration,
    /// Cap of the retry delay.
    #[arg(long, env = "RETRY_MAX_DELAY", global = true, default_value = "1m", value_parser = parse_duration)]
    pub(super) retry_max_delay: Duration,
    /// How often the runtime's /health is polled (every 250 ms at most while it is down).
    #[arg(long, env = "HEALTH_INTERVAL", global = true, default_value = "2s", value_parser = parse_duration)]
    pub(super) health_interval: Duration,
    /// How long the runtime may be down (unreachable, or /health not 200) before /healthz says
    /// the proxy is not ready and held tasks are handed back for another pod. Shorter outages
    /// (a restart, a crash loop) cost no task a delivery.
    #[arg(long, env = "RUNTIME_DOWN_LIMIT", global = true, default_value = "30s", value_parser = parse_duration)]
    pub(super) runtime_down_limit: Duration,
    /// How long a task the runtime refuses for a spent budget (429 with Retry-After) may wait
    /// in the stream, published again for each wait, before it fails saying why. Budget
    /// waits spend no delivery of the task.
    #[arg(long, env = "BUDGET_WAIT", global = true, default_value = "1h", value_parser = parse_duration)]
    pub(super) budget_wait: Duration,
    /// auto: stream tasks from a runtime whose card says it streams, relaying each event to
    /// agent.events.<agent>.<task-token>; never: always wait for the whole Task (cheaper, no
    /// live events).
    #[arg(long, env = "STREAM_TASKS", global = true, value_enum, default_value_t = StreamTasks::Auto)]
    pub(super) stream_tasks: StreamTasks,
    /// How long storing a result may keep retrying (through a stream leader election, say)
    /// while the task's lease is kept; past it the task is naked for a later delivery.
    #[arg(long, env = "RESULT_STORE_TIMEOUT", global = true, default_value = "2m", value_parser = parse_duration)]
    pub(super) result_store_timeout: Duration,
    /// How long one pull request waits for a task.
    #[arg(long, env = "PULL_EXPIRES", global = true, default_value = "5s", value_parser = parse_duration)]
    pub(super) pull_expires: Duration,
    /// Port of the proxy's /healthz and /metrics.
    #[arg(long, env = "PROXY_PORT", global = true, default_value_t = 9090)]
    pub(super) proxy_port: u16,
    /// Subject prefixes a task's `reply-to` header may name, comma-separated. Never `agent.`,
    /// `$` subjects or wildcards; any other reply-to is logged and ignored.
    #[arg(long, env = "REPLY_TO_PREFIXES", global = true, default_value = subjects::REPLY_TO_PREFIXES_DEFAULT)]
    pub(super) reply_to_prefixes: String,
    /// Address of the proxy's /healthz and /metrics.
    #[arg(long, env = "PROXY_HOST", global = true, default_value = "0.0.0.0")]
    pub(super) proxy_host: std::net::IpAddr,
    /// Log filter: a level or a tracing directive list.
    #[arg(long, env = "LOG_LEVEL", global = true, default_value = "info")]
    pub(super) log_level: String,
    /// Log format: json or text.
    #[arg(long, env = "LOG_FORMAT", global = true, default_value = "json")]
    pub(super) log_format: LogFormat,
    #[command(flatten)]
    pub(super) runtime_auth: RuntimeAuthArgs,
    /// Print the resolved configuration (secrets masked) and exit.
    #[arg(long)]
    pub(super) check_config: bool,
    #[command(subcommand)]
    pub(super) command: Option<Command>,
}

/// The proxy's own credential for a runtime that requires a caller: a token file, or an
/// OAuth2 client-credentials grant.
#[derive(Debug, Args)]
pub(super) struct RuntimeAuthArgs {
    /// A file holding the bearer token to present to the runtime (read again when it changes).
    #[arg(long, env = "RUNTIME_TOKEN_FILE", global = true)]
    pub(super) runtime_token_file: Option<PathBuf>,
    /// A JWKS file: the runtime's agent card must carry a signature (A2A §8.4) by one of its
    /// keys, or the proxy does not start. Unset: the card's signatures are not looked at.
    #[arg(long, env = "RUNTIME_CARD_KEYS", global = true)]
    pub(super) runtime_card_keys: Option<PathBuf>,
    /// The token endpoint of an OAuth2 client-credentials grant for the runtime.
    #[arg(long, env = "RUNTIME_TOKEN_URL", global = true)]
    pub(super) runtime_token_url: Option<String>,
    /// The proxy's client id at that endpoint.
    #[arg(long, env = "RUNTIME_CLIENT_ID", global = true)]
    pub(super) runtime_client_id: Option<String>,
    /// Its client secret.
    #[arg(
        long,
        env = "RUNTIME_CLIENT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub(super) runtime_client_secret: Option<String>,
    /// Its client secret, from a file.
    #[arg(long, env = "RUNTIME_CLIENT_SECRET_FILE", global = true)]
    pub(super) runtime_client_secret_file: Option<PathBuf>,
    /// Scopes to ask for (space-separated).
    #[arg(long, env = "RUNTIME_SCOPE", global = true)]
    pub(super) runtime_scope: Option<String>,
    /// The audience to ask for (the runtime's AUTH_AUDIENCE).
    #[arg(long, env = "RUNTIME_AUDIENCE", global = true)]
    pub(super) runtime_audience: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct NatsArgs {
    /// NATS server URL(s), comma-separated.
    #[arg(
        long,
        env = "NATS_URL",
        global = true,
        default_value = "nats://127.0.0.1:4222"
    )]
    pub(super) nats_url: String,
    /// User name (with NATS_PASSWORD).
    #[arg(long, env = "NATS_USER", global = true)]
    pub(super) nats_user: Option<String>,
    /// Password (with NATS_USER).
    #[arg(long, env = "NATS_PASSWORD", global = true, hide_env_values = true)]
    pub(super) nats_password: Option<String>,
    /// Token authentication.
    #[arg(long, env = "NATS_TOKEN", global = true, hide_env_values = true)]
    pub(super) nats_token: Option<String>,
    /// Credentials file (JWT + NKey seed).
    #[arg(long, env = "NATS_CREDS", global = true)]
    pub(super) nats_creds: Option<PathBuf>,
    /// CA certificate (PEM) to verify the server; also turns TLS on.
    #[arg(long, env = "NATS_TLS_CA", global = true)]
    pub(super) nats_tls_ca: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct StreamArgs {
    /// Stream holding tasks (work-queue, subjects agent.tasks.>).
    #[arg(
        long,
        env = "TASKS_STREAM",
        global = true,
        default_value = "AGENT_TASKS"
    )]
    pub(super) tasks_stream: String,
    /// Stream holding results (subjects agent.results.>).
    #[arg(
        long,
        env = "RESULTS_STREAM",
        global = true,
        default_value = "AGENT_RESULTS"
    )]
    pub(super) results_stream: String,
    /// Stream holding dead letters (subjects agent.deadletter.>).
    #[arg(
        long,
        env = "DEADLETTER_STREAM",
        global = true,
        default_value = "AGENT_DEADLETTER"
    )]
    pub(super) deadletter_stream: String,
    /// How long results are kept.
    #[arg(long, env = "RESULTS_MAX_AGE", global = true, default_value = "24h", value_parser = parse_duration)]
    pub(super) results_max_age: Duration,
    /// Replicas of the streams the proxy creates (1 on one server; 3 on a cluster). Streams
    /// that exist already keep theirs.
    #[arg(long, env = "STREAM_REPLICAS", global = true, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub(super) stream_replicas: u8,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Put a task on NATS and wait for its result.
    Publish(PublishArgs),
    /// Exit 0 when this proxy's `GET /healthz` (at PROXY_HOST:PROXY_PORT, loopback for
    /// 0.0.0.0) answers 200, else 1: a container HEALTHCHECK that needs no curl.
    Healthcheck,
}

#[derive(Debug, Args)]
pub(super) struct PublishArgs {
    /// The agent to send the task to (default: AGENT_NAME).
    #[arg(long)]
    pub(super) agent: Option<String>,
    /// The message text; read from stdin when absent.
    pub(super) text: Option<String>,
    /// Continue this conversation.
    #[arg(long)]
    pub(super) context_id: Option<String>,
    /// Task id (to answer an input-required task, pass its id).
    #[arg(long)]
    pub(super) task_id: Option<String>,
    /// Send this SendMessageRequest (JSON) instead of building one from the text.
    #[arg(long, value_name = "FILE", conflicts_with = "text")]
    pub(super) json_file: Option<PathBuf>,
    /// Publish and exit without waiting for the result.
    #[arg(long)]
    pub(super) no_wait: bool,
    /// Longest wait for the result.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub(super) timeout: Duration,
    /// Print the Task as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Print the answer as it streams (when the agent's runtime streams), tool steps as dim
    /// lines on a terminal's stderr; still exit by the final state.
    #[arg(long, conflicts_with_all = ["no_wait", "json"])]
    pub(super) follow: bool,
    /// Continue this W3C trace (`00-<trace id>-<span id>-<flags>`); without it, publish starts
    /// a new trace. Either way the trace id is printed to stderr.
    #[arg(long, value_name = "TRACEPARENT")]
    pub(super) traceparent: Option<String>,
}
