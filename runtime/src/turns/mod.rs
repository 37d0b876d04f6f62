//! The turn service: the one way a turn runs, whichever face asked for it.
//!
//! A face (the contract's `POST /`, the MCP face, later SSE and the A2A bindings) turns its
//! wire into a [`TurnRequest`] and the [`Task`] it gets back into its wire; everything in
//! between is decided here:
//!
//! - admission: 503-class refusals while starting or draining, and the `MAX_CONCURRENT_TASKS`
//!   cap ([`TurnError::Busy`]);
//! - one turn at a time per conversation, shared by every face ([`conversations`]);
//! - for A2A tasks: the task id and context rules, continuation of an `input-required` task,
//!   and replay of a redelivered `messageId` from the byte-bounded task memory ([`tasks`]);
//! - the turn runs on the runtime's task tracker, so a caller that goes away does not stop
//!   it; under `REQUEST_TIMEOUT`, and canceled when shutdown's grace period ends ([`drain`]);
//! - events: every turn's loop events feed the metrics, then the face's own listener
//!   (progress, SSE);
//! - the metrics of a turn: `daedalus_runtime_tasks_total{state}` and its duration.
//!
//! [`drain`]: TurnService::drain

pub mod conversations;
mod request;
mod task;
pub mod tasks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use daedalus_contract::{Message, Task};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use conversations::ConversationKey;
pub use request::{Memory, TurnRequest};

use crate::agent_loop::{Agent, AgentOutcome, AgentRequest, EventSink};
use crate::fleet::Fleet;
use crate::lifecycle::{Lifecycle, Phase};
use crate::metrics::{Metrics, StateLabel};
use conversations::ConversationLocks;
use tasks::TaskRegistry;

/// How long a turn canceled by the request timeout or shutdown gets to reach a safe point.
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// The limits the service runs turns under.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// Longest a turn may run (`REQUEST_TIMEOUT`); past it the turn fails.
    pub request_timeout: Duration,
    /// Turns running at once (`MAX_CONCURRENT_TASKS`).
    pub max_concurrent: usize,
    /// Tasks remembered for continuation and replay (`MAX_TASKS`).
    pub max_tasks: usize,
    /// Bytes that memory may hold (`TASK_MEMORY`).
    pub task_memory_bytes: usize,
}

/// Why a turn did not run (a turn that ran and failed is a `failed` task, not an error).
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("message.{field} {why}")]
    InvalidMessage {
        field: &'static str,
        why: &'static str,
    },
    #[error("task {task_id} belongs to context {known}, not {given}")]
    ContextMismatch {
        task_id: String,
        known: String,
        given: String,
    },
    #[error("no agent named {0} in this deployment")]
    UnknownAgent(String),
    #[error("runtime is starting; not ready for tasks yet")]
    NotReady,
    #[error("runtime is shutting down; send the task to another replica")]
    ShuttingDown,
    #[error("runtime is running as many tasks as it may (MAX_CONCURRENT_TASKS); retry later")]
    Busy,
    #[error("runtime is shutting down; the task was canceled before it finished")]
    CanceledByShutdown,
    #[error("the task's worker stopped: {0}")]
    WorkerStopped(String),
}

/// Runs turns for every face. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TurnService(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The deployment's agents; a reload swaps in a new fleet while turns that already
    /// started keep the agent they began with.
    fleet: ArcSwap<Fleet>,
    metrics: Arc<Metrics>,
    lifecycle: Arc<Lifecycle>,
    limits: TurnLimits,
    tasks: TaskRegistry,
    conversations: ConversationLocks,
    permits: Arc<tokio::sync::Semaphore>,
    /// Every turn being worked on; shutdown waits for it to empty.
    inflight: TaskTracker,
    /// Fired when the grace period is over: agents stop at their next safe point.
    cancel: CancellationToken,
}

impl TurnService {
    pub fn new(
        fleet: Arc<Fleet>,
        metrics: Arc<Metrics>,
        lifecycle: Arc<Lifecycle>,
        limits: TurnLimits,
    ) -> Self {
        Self(Arc::new(Inner {
            fleet: ArcSwap::new(fleet),
            metrics,
            lifecycle,
            tasks: TaskRegistry::new(limits.max_tasks, limits.task_memory_bytes),
            conversations: ConversationLocks::default(),
            permits: Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent)),
            limits,
            inflight: TaskTracker::new(),
            cancel: CancellationToken::new(),
        }))
    }

    /// Runs one turn and answers with its task. The turn runs on the runtime's tracker: if
    /// the caller goes away, it still finishes (and an A2A task's answer is kept for replay).
    pub async fn run(&self, request: TurnRequest) -> Result<Task, TurnError> {
        match self.0.lifecycle.phase() {
            Phase::Starting => return Err(TurnError::NotReady),
            Phase::Draining => return Err(TurnError::ShuttingDown),
            Phase::Ready => {}
        }
        if let Memory::Task = request.memory {
            task::check_message(&request.message)?;
        }
        let agent = self.agent(&request.agent)?;
        let permit = Arc::clone(&self.0.permits)
            .try_acquire_owned()
            .map_err(|_| TurnError::Busy)?;
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {}", request.agent),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %request.agent,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        crate::telemetry::continue_trace(&span, &request.trace);
        let service = self.clone();
        let turn = async move {
            let _permit = permit;
            match request.memory.clone() {
                Memory::Task => service.run_task(&agent, request).await,
                Memory::Conversation(key) => {
                    let lock = service.0.conversations.get(key.as_str());
                    let _turn = lock.lock().await;
                    service.run_once(&agent, request, Some(key.as_str())).await
                }
                Memory::None => service.run_once(&agent, request, None).await,
            }
        };
        let turn = self
            .0
            .inflight
            .spawn(tracing::Instrument::instrument(turn, span));
        turn.await
            .map_err(|join| TurnError::WorkerStopped(join.to_string()))?
    }

    /// The stored conversation `key` of `agent`, oldest first (empty when it keeps none).
    pub async fn conversation(&self, agent: &str, key: &ConversationKey) -> Vec<Message> {
        let agent = self.0.fleet.load().agents.get(agent).cloned();
        match agent {
            Some(agent) => agent.conversation(key.as_str()).await.unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// The deployment's agents, as of now.
    pub fn fleet(&self) -> Arc<Fleet> {
        self.0.fleet.load_full()
    }

    /// Runs new turns on `fleet`; turns already running finish on the agents they began with.
    pub fn replace_fleet(&self, fleet: Arc<Fleet>) {
        self.0.fleet.store(fleet);
    }

    /// Refuses new turns, gives running ones `grace` to finish, then cancels the rest.
    pub async fn drain(&self, grace: Duration) {
        self.0.lifecycle.set_draining();
        let inflight = &self.0.inflight;
        inflight.close();
        tracing::info!(in_flight = inflight.len(), grace = ?grace, "draining");
        if tokio::time::timeout(grace, inflight.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(
            in_flight = inflight.len(),
            "grace period over; canceling remaining tasks"
        );
        self.0.cancel.cancel();
        if tokio::time::timeout(CANCEL_SETTLE, inflight.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                in_flight = inflight.len(),
                "tasks did not stop after cancellation"
            );
        }
    }

    /// Marks a request as in flight until the token drops (a face holds one while it answers,
    /// so shutdown waits for the answer to be written).
    pub fn hold(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.0.inflight.token()
    }

    /// Turns that could start now before `MAX_CONCURRENT_TASKS` is reached.
    pub fn free_permits(&self) -> usize {
        self.0.permits.available_permits()
    }

    /// The token that cancels running turns (fired when the grace period runs out).
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.0.cancel
    }

    /// The task memory (continuation and replay).
    pub fn tasks(&self) -> &TaskRegistry {
        &self.0.tasks
    }

    fn agent(&self, name: &str) -> Result<Arc<dyn Agent>, TurnError> {
        self.0
            .fleet
            .load()
            .agents
            .get(name)
            .cloned()
            .ok_or_else(|| TurnError::UnknownAgent(name.to_owned()))
    }

    /// An A2A task's turn: replay, continuation, the context rules, then the agent.
    async fn run_task(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
    ) -> Result<Task, TurnError> {
        let task_id = request.message.effective_task_id().to_owned();
        let slot = self.0.tasks.slot(&task_id);
        let mut record = slot.lock().await;
        if let Some((answered, task)) = &record.last
            && *answered == request.message.message_id
        {
            tracing::info!(
                task_id,
                "message already answered; replaying the stored task"
            );
            let task = task.clone();
            return Ok(self
                .with_history(agent, task, &record, request.history_length)
                .await);
        }
        let context_id = task::resolve_context(&record, &request.message, &task_id)?;
        let mut message = request.message.clone();
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());
        let key = ConversationKey::a2a(&context_id);
        let lock = self.0.conversations.get(key.as_str());
        let _turn = lock.lock().await;
        let mut agent_request = AgentRequest::new(&task_id, key.as_str(), message.clone());
        agent_request.history.clone_from(&record.history);
        let history_length = request.history_length;
        let answered_id = request.message.message_id.clone();
        let task = self
            .execute(agent, request, agent_request, &task_id, &context_id)
            .await?;
        record.context_id = Some(context_id);
        record.history.push(message);
        record.history.extend(task.status.message.clone());
        record.last = Some((answered_id, task.clone()));
        let answer = self
            .with_history(agent, task, &record, history_length)
            .await;
        record.trim();
        self.0.tasks.account(&task_id, record.approx_bytes());
        Ok(answer)
    }

    /// A turn without task memory: in `conversation` (already locked), or alone.
    async fn run_once(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
        conversation: Option<&str>,
    ) -> Result<Task, TurnError> {
        let task_id = uuid::Uuid::new_v4().to_string();
        let context = conversation.unwrap_or(&task_id);
        let mut agent_request = AgentRequest::new(&task_id, context, request.message.clone());
        agent_request.persist = conversation.is_some();
        self.execute(agent, request, agent_request, &task_id, context)
            .await
    }

    /// Runs the agent on `agent_request` with the face's credentials, sampling and events,
    /// and records the turn's metrics.
    async fn execute(
        &self,
        agent: &Arc<dyn Agent>,
        request: TurnRequest,
        mut agent_request: AgentRequest,
        task_id: &str,
        context_id: &str,
    ) -> Result<Task, TurnError> {
        agent_request.bearer = request.bearer;
        let metrics = Arc::clone(&self.0.metrics);
        let listener = request.events;
        agent_request.events = EventSink::new(move |event| {
            metrics.observe(&event);
            listener.emit(event);
        });
        tracing::info!(task_id, context_id, "task started");
        let started = Instant::now();
        let outcome = match request.sampling {
            Ok(sampling) => {
                agent_request.sampling = sampling;
                self.run_agent(agent, agent_request).await?
            }
            Err(e) => AgentOutcome::Failed {
                reason: e.to_string(),
            },
        };
        let task = task::finish(task_id, context_id, outcome);
        tracing::info!(task_id, state = %task.status.state, "task finished");
        self.0
            .metrics
            .tasks
            .get_or_create(&StateLabel {
                state: task.status.state.to_string(),
            })
            .inc();
        self.0
            .metrics
            .task_duration
            .observe(started.elapsed().as_secs_f64());
        Ok(task)
    }

    /// Runs `agent` under the request timeout and the shutdown token; `Err` when shutdown
    /// canceled it (the caller should retry elsewhere).
    async fn run_agent(
        &self,
        agent: &Arc<dyn Agent>,
        request: AgentRequest,
    ) -> Result<AgentOutcome, TurnError> {
        let cancel = self.0.cancel.child_token();
        let run = agent.run(request, cancel.clone());
        tokio::pin!(run);
        let timed_out = tokio::select! {
            outcome = &mut run => return settle(outcome, false),
            () = tokio::time::sleep(self.0.limits.request_timeout) => true,
        };
        cancel.cancel();
        let outcome = tokio::time::timeout(CANCEL_SETTLE, run)
            .await
            .unwrap_or(AgentOutcome::Canceled);
        settle(outcome, timed_out)
    }

    /// Adds the last `history_length` messages, when asked for: from the context's stored
    /// conversation when the agent keeps one (so it spans tasks and restarts), else the
    /// messages of this task the runtime remembers.
    async fn with_history(
        &self,
        agent: &Arc<dyn Agent>,
        mut task: Task,
        record: &tasks::TaskRecord,
        history_length: Option<u32>,
    ) -> Task {
        let Some(n) = history_length else {
            return task;
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let stored = match &task.context_id {
            Some(context) => {
                let key = ConversationKey::a2a(context);
                agent.conversation(key.as_str()).await.map(|mut messages| {
                    // Stored under the conversation key; shown under the client's context id.
                    for m in &mut messages {
                        if let Some(turn) = m.message_id.strip_prefix(key.as_str()) {
                            m.message_id = format!("{context}{turn}");
                        }
                        m.context_id = Some(context.clone());
                    }
                    messages
                })
            }
            None => None,
        };
        let mut history = stored.unwrap_or_else(|| record.history.clone());
        history.drain(..history.len().saturating_sub(n));
        task.history = Some(history);
        task
    }
}

fn settle(outcome: AgentOutcome, timed_out: bool) -> Result<AgentOutcome, TurnError> {
    match outcome {
        AgentOutcome::Canceled if timed_out => Ok(AgentOutcome::Failed {
            reason: "the task ran longer than the runtime's REQUEST_TIMEOUT and was canceled"
                .to_owned(),
        }),
        AgentOutcome::Canceled => Err(TurnError::CanceledByShutdown),
        other => Ok(other),
    }
}
