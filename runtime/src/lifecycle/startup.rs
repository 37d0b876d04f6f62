//! Startup, as named steps, and shutdown. [`super::run::run`] calls them in order:
//!
//! 1. [`open_stores`]: the task store's SQLite file and the conversation store (by default in
//!    that one file), with rows a crash left `pending` marked `error`;
//! 2. [`build_core`]: the fleet of agents over it, the turn service, metrics and preflight;
//! 3. [`serve_main_port`]: the A2A face, every agent's MCP endpoint, the registry and
//!    `/metrics` on the bound listener;
//! 4. [`serve_own_ports`]: agents with their own `port`, in the validated start order, each
//!    once the agents it depends on answer;
//! 5. [`serve_registry_port`];
//! 6. [`go_live`]: ready, then the provider preflight and downstream warm-up in the background;
//! 7. on each reload request (SIGHUP), [`super::reload::Live::reload`]: the new deployment whole,
//!    or none of it;
//! 8. after the shutdown signal, [`Servers::stop`]: the turn service drains under the grace
//!    period, then the servers close.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::serve::{self, ConnectionLimits};
use crate::agents::fleet::{self, Fleet};
use crate::agents::llm::preflight::Preflight;
use crate::config::deployment::AgentDef;
use crate::config::{Config, SessionsDb, TasksDb};
use crate::faces::a2a::{self, A2aFace};
use crate::faces::mcp::wiring::McpPlan;
use crate::faces::mcp::{self, Routes, endpoints};
use crate::platform::metrics;
use crate::services::state::Core;
use crate::services::turns::TurnLimits;
use crate::stores::conversations::{self, ConversationStore};
use crate::stores::sqlite_file::SqliteFile;
use crate::stores::tasks;

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the agent card or manifest built from the configuration is invalid")]
    Discovery(#[source] daedalus_contract::SchemaErrors),
    #[error("cannot open the session store")]
    ConversationStore(#[source] crate::stores::conversations::StoreError),
    #[error("cannot set up the LLM provider")]
    Provider(#[source] crate::agents::llm::LlmError),
    #[error("cannot read the listener's address")]
    Listener(#[source] std::io::Error),
    #[error(transparent)]
    Bind(BindError),
    #[error("an agent could not start")]
    Dependency(#[source] crate::faces::mcp::endpoints::DependencyNotReady),
    #[error("cannot open the task store")]
    Tasks(#[source] crate::stores::tasks::BackendError),
    #[error("cannot read the tasks' push notification configs back")]
    Push(#[source] crate::services::push::PushError),
    #[error("cannot open the budgets' usage store")]
    BudgetUsage(#[source] crate::agents::budgets::shared::UsageError),
    #[error("cannot set up authentication")]
    Identity(#[source] crate::platform::identity::IdentityError),
}

/// How long a provider preflight result is trusted before `/healthz` probes again.
pub const PREFLIGHT_TTL: std::time::Duration = std::time::Duration::from_mins(5);

/// The stores the configuration names, each opened once: the SQLite file `TASKS_DB` names (by
/// default the one file every store lives in) and the conversation store.
#[derive(Debug, Default)]
pub struct Stores {
    /// The task store's SQLite file, open (`None` for memory or a NATS KV bucket).
    pub file: Option<SqliteFile>,
    /// The conversations' SQLite file, when it is another than the task store's.
    pub conversations_file: Option<SqliteFile>,
    /// The conversations live in the task store's file, on its writer.
    pub shared: bool,
    /// The conversation store (`None`: `SESSIONS_DB=off`).
    pub conversations: Option<Arc<dyn ConversationStore>>,
}

/// Opens the stores the configuration names: the task store's SQLite file, and the
/// conversation store in it when `SESSIONS_DB` names the same file (the default), with rows a
/// crash left `pending` marked `error`. Conversations an earlier version kept in a file of
/// their own beside it are read into it once.
pub async fn open_stores(config: &Config) -> Result<Stores, RunError> {
    let file = match &config.tasks_db {
        TasksDb::Sqlite { path } => Some(
            SqliteFile::open(path)
                .map_err(|e| RunError::Tasks(tasks::BackendError::new(path.clone(), e)))?,
        ),
        TasksDb::Memory | TasksDb::NatsKv { .. } => None,
    };
    let (conversations, conversations_file) =
        open_conversation_store(config, file.as_ref()).await?;
    let shared = conversations.is_some()
        && conversations_file.is_none()
        && matches!(&config.sessions_db, Some(SessionsDb::Sqlite(path)) if file.as_ref().is_some_and(|f| f.path() == path));
    Ok(Stores {
        file,
        conversations_file,
        shared,
        conversations,
    })
}

/// Opens the configured conversation store (in `file` when `SESSIONS_DB` names it; its own
/// file, answered too, when another) and marks rows a crash left `pending` as `error`.
async fn open_conversation_store(
    config: &Config,
    file: Option<&SqliteFile>,
) -> Result<(Option<Arc<dyn ConversationStore>>, Option<SqliteFile>), RunError> {
    let mut own_file = None;
    let store: Arc<dyn ConversationStore> = match &config.sessions_db {
        None => return Ok((None, None)),
        Some(SessionsDb::Sqlite(path)) => {
            let backend = RunError::ConversationStore;
            if let Some(file) = file.filter(|f| f.path() == path) {
                let store = conversations::SqliteStore::beside_tasks(file, config.session_ttl)
                    .map_err(backend)?;
                import_legacy_conversations(&store, path)?;
                Arc::new(store)
            } else {
                let opened = SqliteFile::open(path).map_err(|e| {
                    RunError::ConversationStore(conversations::StoreError::Backend {
                        location: path.clone(),
                        source: e.into(),
                    })
                })?;
                let store =
                    conversations::SqliteStore::on(&opened, config.session_ttl).map_err(backend)?;
                own_file = Some(opened);
                Arc::new(store)
            }
        }
        Some(SessionsDb::NatsKv { url, bucket }) => {
            // A pending row younger than the longest a turn may run can belong to another
            // replica's running turn.
            let stale_after = config.limits.request_timeout + config.termination_grace_period;
            Arc::new(
                conversations::NatsKvStore::open_with_ttl(
                    url,
                    bucket,
                    stale_after,
                    config.session_ttl,
                )
                .await
                .map_err(RunError::ConversationStore)?,
            )
        }
    };
    let recovered = store.recover().await.map_err(RunError::ConversationStore)?;
    if recovered > 0 {
        tracing::warn!(
            rows = recovered,
            "a previous run stopped mid-turn; its pending rows are now marked error"
        );
    }
    Ok((Some(store), own_file))
}

/// Reads the conversations an earlier version kept beside the task store's file at
/// `tasks_path` (`daedalus-sessions.sqlite`, its default then) into `store`, once: only into
/// a store that has none yet, and the old file is renamed `….imported` after.
fn import_legacy_conversations(
    store: &conversations::SqliteStore,
    tasks_path: &str,
) -> Result<(), RunError> {
    let Some(dir) = std::path::Path::new(tasks_path).parent() else {
        return Ok(());
    };
    let legacy = dir.join(crate::config::LEGACY_SESSIONS_FILE);
    if !legacy.is_file() {
        return Ok(());
    }
    let imported = store.import(&legacy).map_err(RunError::ConversationStore)?;
    let moved = legacy.with_extension("sqlite.imported");
    if let Err(e) = std::fs::rename(&legacy, &moved) {
        tracing::warn!(error = %e, file = %legacy.display(), "the old conversation file could not be renamed; it is read again (and skipped) at the next start");
    }
    tracing::info!(
        rows = imported,
        from = %legacy.display(),
        into = tasks_path,
        "conversations kept in a file of their own by an earlier version now live in the task store's file"
    );
    Ok(())
}

/// Opens the task backend `TASKS_DB` names (a SQLite file in `WORK_DIR` by default), and reads
/// its tasks back: the turns this replica left running are queued to resume (or failed,
/// saying the runtime restarted, when they cannot be). On a NATS KV store the
/// replica joins the others sharing it (its lease, the bucket's watch, the relay).
pub async fn attach_tasks(
    config: &Config,
    core: &Core,
    file: Option<&SqliteFile>,
    bound: SocketAddr,
) -> Result<(), RunError> {
    let replica = config
        .replica_id
        .clone()
        .unwrap_or_else(|| default_replica_id(bound));
    let store = core.turns().task_store();
    core.metrics().watch_tasks(store.clone());
    let failed = match &config.tasks_db {
        TasksDb::Memory => {
            tracing::info!(
                "TASKS_DB=memory: tasks live in this process only; a restart forgets them, and the turns it cuts are not resumed"
            );
            return Ok(());
        }
        TasksDb::Sqlite { path } => {
            let opened;
            let file = if let Some(file) = file {
                file
            } else {
                opened = SqliteFile::open(path)
                    .map_err(|e| RunError::Tasks(tasks::BackendError::new(path.clone(), e)))?;
                &opened
            };
            core.metrics().watch_store("tasks", file.stats());
            let backend = tasks::SqliteTasks::on(file, config.task_ttl, config.max_tasks)
                .map_err(RunError::Tasks)?;
            save_budgets(core, file)?;
            let push = crate::stores::push::SqlitePush::beside(&backend).await;
            let failed = store
                .attach(Arc::new(backend), &replica)
                .await
                .map_err(RunError::Tasks)?;
            attach_push(core, push).await?;
            failed
        }
        TasksDb::NatsKv { url, bucket } => {
            let kv = tasks::NatsKvTasks::open(url, bucket, config.task_ttl)
                .await
                .map_err(RunError::Tasks)?;
            share_budgets(config, core, &kv, &replica).await?;
            let push = crate::stores::push::NatsKvPush::beside(&kv);
            let lease = tasks::replicas::LeaseConfig {
                lease: config.replica_lease,
            };
            let failed = Box::pin(tasks::replicas::join(store, kv, &replica, lease))
                .await
                .map_err(RunError::Tasks)?;
            if core.push().enabled() {
                let owed = core.push().share(push).await.map_err(RunError::Push)?;
                owed_deliveries(owed);
            }
            failed
        }
    };
    if failed > 0 {
        tracing::warn!(
            tasks = failed,
            replica,
            "tasks this replica left running before it restarted are now failed"
        );
    }
    Ok(())
}

/// Holds the budgets together with every replica of the bucket `kv` is in (their usage in a
/// bucket beside it), its writer supervised.
async fn share_budgets(
    config: &Config,
    core: &Core,
    kv: &tasks::NatsKvTasks,
    replica: &str,
) -> Result<(), RunError> {
    let usage = crate::agents::budgets::shared::SharedUsage::open(
        kv.client(),
        kv.bucket(),
        replica,
        config.replica_lease,
    )
    .await
    .map_err(RunError::BudgetUsage)?;
    let book = Arc::clone(core.turns().budget_book());
    book.share(Arc::new(usage));
    write_budgets(book);
    Ok(())
}

/// Keeps the budgets' usage in the task store's SQLite `file` (what this replica spent before
/// a restart read back), its writer supervised.
fn save_budgets(core: &Core, file: &SqliteFile) -> Result<(), RunError> {
    let saved = crate::stores::budget_usage::SavedUsage::on(file).map_err(|e| {
        RunError::BudgetUsage(crate::agents::budgets::shared::UsageError::new(
            file.path(),
            e,
        ))
    })?;
    let book = Arc::clone(core.turns().budget_book());
    book.save_to(Arc::new(saved))
        .map_err(RunError::BudgetUsage)?;
    write_budgets(book);
    Ok(())
}

/// Runs the budget usage's writer, supervised.
fn write_budgets(book: Arc<crate::agents::budgets::BudgetBook>) {
    tasks::replicas::spawn_supervised("the budget usage writer", move || {
        let book = Arc::clone(&book);
        async move {
            book.keep_written().await;
            Ok::<(), std::convert::Infallible>(())
        }
    });
}

/// How long push deliveries in flight get to stop at shutdown.
const PUSH_STOP: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps tasks' webhooks in `backend` too (beside the tasks), and delivers what a restart
/// left owed.
async fn attach_push(
    core: &Core,
    backend: Result<crate::stores::push::SqlitePush, tasks::BackendError>,
) -> Result<(), RunError> {
    if !core.push().enabled() {
        return Ok(());
    }
    let backend = backend.map_err(RunError::Tasks)?;
    let owed = core
        .push()
        .attach(Arc::new(backend))
        .await
        .map_err(RunError::Push)?;
    owed_deliveries(owed);
    Ok(())
}

fn owed_deliveries(owed: usize) {
    if owed > 0 {
        tracing::info!(
            deliveries = owed,
            "push: webhooks that had not taken their task's last state get it now"
        );
    }
}

/// `<hostname>:<port>`: the same after a restart on the same machine and port, different for
/// each replica.
fn default_replica_id(bound: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "runtime".to_owned());
    format!("{host}:{}", bound.port())
}

/// Every agent of the deployment, over `sessions`.
pub fn build_fleet(
    config: &Config,
    sessions: Option<&Arc<dyn ConversationStore>>,
) -> Result<Fleet, RunError> {
    fleet::build(&config.deployment, sessions).map_err(RunError::Provider)
}

/// The runtime-wide core over `fleet` (the seam tests and benchmarks swap the fleet at).
pub fn build_core(
    config: &Config,
    fleet: Fleet,
    sessions: Option<Arc<dyn ConversationStore>>,
) -> Core {
    let preflight = Preflight::new(&config.deployment, PREFLIGHT_TTL);
    let limits = TurnLimits {
        request_timeout: config.limits.request_timeout,
        budgets: crate::services::turns::Budgets {
            max_turns: config.limits.max_concurrent_tasks,
            memory: usize::try_from(config.limits.turn_memory_bytes).unwrap_or(usize::MAX),
            agent_memory: usize::try_from(config.limits.agent_turn_memory_bytes)
                .unwrap_or(usize::MAX),
        },
        max_tasks: config.max_tasks,
        task_memory_bytes: usize::try_from(config.limits.task_memory_bytes).unwrap_or(usize::MAX),
        task_ttl: config.task_ttl,
        max_resumes: config.turn_max_resumes,
    };
    let core = Core::new(
        fleet,
        sessions,
        preflight,
        limits,
        config.mcp_sessions,
        config.push.clone(),
    );
    core.card_keys().apply(config.card_signing.as_ref());
    core.turns().set_budgets(config.deployment.budgets.clone());
    core.turns()
        .budget_book()
        .name_in_metrics_at_most(config.budget_metric_names);
    core
}

/// Callers are checked as the configuration says from now on (an API key file that does not
/// read stops startup; an identity provider that does not answer does not).
pub async fn authenticate_callers(config: &Config, core: &Core) -> Result<(), RunError> {
    core.identity()
        .reload(&config.auth)
        .await
        .map_err(RunError::Identity)?;
    if config.auth.is_on() {
        tracing::info!(
            tokens = config.auth.tokens.is_some(),
            api_keys = config.auth.api_keys.is_some(),
            "callers must authenticate"
        );
    }
    Ok(())
}

/// The A2A face's state for a server bound at `bound`.
pub fn a2a_face(config: &Config, core: Core, bound: SocketAddr) -> Result<A2aFace, RunError> {
    a2a::wiring::build(config, core, bound).map_err(RunError::Discovery)
}

/// Every agent's MCP face and the registry, for a main port at `bound`.
pub fn plan_mcp(config: &Config, core: &Core, bound: SocketAddr) -> McpPlan {
    McpPlan::build(config, core, bound)
}

/// The running servers: the main port, and the side ports (agents' own ports and the registry
/// port) by number, which a reload opens and closes.
#[derive(Debug)]
pub struct Servers {
    core: Core,
    routes: Arc<Routes>,
    /// Ends every MCP session: fired at shutdown, once turns have drained.
    mcp_sessions: CancellationToken,
    /// Closes every port.
    stop: CancellationToken,
    main: JoinHandle<()>,
    side: BTreeMap<u16, SidePort>,
    connection_limits: ConnectionLimits,
}

/// A side port's server, and the token that closes it alone.
#[derive(Debug)]
struct SidePort {
    close: CancellationToken,
    server: JoinHandle<()>,
}

impl Servers {
    /// Serves a side port: the MCP endpoint of whichever agent owns `port`, the registry and
    /// `/metrics`.
    pub(crate) fn open_side_port(&mut self, listener: TcpListener, port: u16) {
        let identity = self.core.identity().clone();
        let router = mcp::own_port_routes(Arc::clone(&self.routes), port)
            .merge(mcp::auth::own_port_routes(Arc::clone(&self.routes), port))
            .merge(endpoints::registry_routes(
                Arc::clone(&self.routes),
                identity.clone(),
            ))
            .merge(endpoints::metrics_routes(
                Arc::clone(self.core.metrics()),
                identity,
            ));
        let close = self.stop.child_token();
        let server = tokio::spawn(serve::serve(
            listener,
            router,
            self.connection_limits,
            close.clone(),
        ));
        self.side.insert(port, SidePort { close, server });
    }

    /// Stops accepting on `port`; its open exchanges get a few seconds to finish.
    pub(crate) fn close_side_port(&mut self, port: u16) {
        if let Some(side) = self.side.remove(&port) {
            side.close.cancel();
        }
    }

    /// The side ports open now.
    pub(crate) fn side_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.side.keys().copied()
    }

    /// Drains the turn service under `grace`, leaves the shared task store, stops push
    /// deliveries (what they had not delivered is owed from the store after a restart), then
    /// ends MCP sessions and closes every port.
    pub async fn stop(self, grace: std::time::Duration) {
        self.core.turns().drain(grace).await;
        self.core.turns().budget_book().close().await;
        self.core.turns().task_store().leave().await;
        self.core.push().stop(PUSH_STOP).await;
        self.mcp_sessions.cancel();
        self.stop.cancel();
        let servers = std::iter::once(self.main).chain(self.side.into_values().map(|s| s.server));
        for server in servers {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "a server task failed");
            }
        }
    }
}

/// Serves the A2A face, every agent's MCP endpoint, the registry and `/metrics` on
/// `listener`.
pub fn serve_main_port(
    listener: TcpListener,
    config: &Config,
    contract: A2aFace,
    plan: &McpPlan,
) -> Servers {
    let core = contract.core().clone();
    let main = a2a::router(contract)
        .merge(mcp::main_port_routes(Arc::clone(plan.routes())))
        .merge(mcp::auth::main_port_routes(Arc::clone(plan.routes())))
        .merge(endpoints::registry_routes(
            Arc::clone(plan.routes()),
            core.identity().clone(),
        ))
        .merge(endpoints::metrics_routes(
            Arc::clone(core.metrics()),
            core.identity().clone(),
        ));
    let stop = CancellationToken::new();
    let connection_limits = ConnectionLimits::from(&config.limits);
    let main = tokio::spawn(serve::serve(
        listener,
        main,
        connection_limits,
        stop.clone(),
    ));
    tokio::spawn(sweep_mcp_sessions(
        Arc::clone(core.mcp_session_book()),
        plan.routes().stop_token().clone(),
    ));
    Servers {
        core,
        routes: Arc::clone(plan.routes()),
        mcp_sessions: plan.routes().stop_token().clone(),
        stop,
        main,
        side: BTreeMap::new(),
        connection_limits,
    }
}

/// Starts the agents that have their own `port`, in the validated start order: each once the
/// agents it depends on answer on their MCP endpoints (within [`endpoints::DEPENDENCY_WAIT`]).
pub async fn serve_own_ports(
    servers: &mut Servers,
    config: &Config,
    plan: &McpPlan,
) -> Result<(), RunError> {
    let probe = reqwest::Client::new();
    let main_port = plan.bound().port();
    let local = |def: &AgentDef| match def.port {
        Some(port) => format!("http://127.0.0.1:{port}{}", mcp::OWN_PORT_PATH),
        None => format!(
            "http://127.0.0.1:{main_port}{}",
            mcp::main_port_path(&def.name)
        ),
    };
    let table = plan.routes().table();
    let in_order = config
        .deployment
        .start_order
        .iter()
        .filter_map(|name| table.agent(name));
    for endpoint in in_order {
        let face = endpoint.face();
        for dependency in &face.def.depends_on {
            let Some(dep) = config.deployment.agent(dependency) else {
                continue;
            };
            endpoints::wait_ready(
                &probe,
                face.name(),
                dependency,
                &local(dep),
                endpoints::DEPENDENCY_WAIT,
            )
            .await
            .map_err(RunError::Dependency)?;
        }
        if let Some(port) = face.def.port {
            let listener = bind(config.listen.ip(), port, &own_port_key(face.name()))
                .await
                .map_err(RunError::Bind)?;
            servers.open_side_port(listener, port);
            tracing::info!(agent = face.name(), port, "agent MCP endpoint ready");
        }
    }
    Ok(())
}

/// The registry and `/metrics` on `registry_port`, when one is configured.
pub async fn serve_registry_port(servers: &mut Servers, config: &Config) -> Result<(), RunError> {
    if let Some(port) = config.deployment.registry_port {
        let listener = bind(config.listen.ip(), port, REGISTRY_PORT_KEY)
            .await
            .map_err(RunError::Bind)?;
        servers.open_side_port(listener, port);
    }
    Ok(())
}

/// The setting that names the registry's port.
pub(crate) const REGISTRY_PORT_KEY: &str = "registry_port";

/// The setting that names `agent`'s own port.
pub(crate) fn own_port_key(agent: &str) -> String {
    format!("agents.{agent}.port")
}

/// Ends MCP sessions whose handshake or idle time ran out, until `stop` (when every session
/// ends); started again if it ever dies.
async fn sweep_mcp_sessions(
    book: Arc<crate::stores::mcp_sessions::SessionBook>,
    stop: CancellationToken,
) {
    loop {
        let sweep = tokio::spawn(Arc::clone(&book).sweep(stop.clone()));
        if sweep.await.is_ok() || stop.is_cancelled() {
            return;
        }
        tracing::error!("the MCP session sweeper panicked; starting it again");
    }
}

/// Marks the runtime ready, then checks the LLM providers and connects the downstream MCP
/// servers in the background: never blocking startup; logs and `/healthz` show the result.
pub fn go_live(core: &Core) {
    core.readiness().set_ready();
    check_in_background(core);
    resume_left_running(core);
}

/// Resumes, in the background, the turns left running with no turn of them left: this
/// replica's before it restarted, a lost replica's (durable turns: see `turns::record`). The
/// loop is started again if it fails, until shutdown.
fn resume_left_running(core: &Core) {
    let turns = core.turns().clone();
    let stop = turns.cancel_token().clone();
    tokio::spawn(async move {
        loop {
            let resuming = {
                let (turns, stop) = (turns.clone(), stop.clone());
                tokio::spawn(async move { turns.resume_queued(&stop).await })
            };
            if resuming.await.is_ok() || stop.is_cancelled() {
                return;
            }
            tracing::error!("resuming turns failed; starting it again");
        }
    });
}

/// Checks the deployment's LLM providers and connects its agents' downstream MCP servers, in
/// the background (at startup and after a reload).
pub(crate) fn check_in_background(core: &Core) {
    let preflight = core.preflight();
    if !preflight.is_empty() {
        let metrics = Arc::clone(core.metrics());
        tokio::spawn(async move {
            for check in preflight.current().await {
                metrics
                    .llm_provider_up
                    .get_or_create(&metrics::ProviderLabel {
                        provider: check.provider.to_owned(),
                    })
                    .set(i64::from(check.ok));
            }
        });
    }
    let fleet = core.fleet();
    tokio::spawn(async move { fleet.warm_up().await });
}

/// A side port that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot listen on port {port}")]
pub struct BindError {
    /// The setting that asked for the port.
    pub key: String,
    pub port: u16,
    #[source]
    pub source: std::io::Error,
}

/// Binds an agent's or the registry's port; `key` names the setting in errors.
pub(crate) async fn bind(ip: IpAddr, port: u16, key: &str) -> Result<TcpListener, BindError> {
    TcpListener::bind(SocketAddr::new(ip, port))
        .await
        .map_err(|source| BindError {
            key: key.to_owned(),
            port,
            source,
        })
}
