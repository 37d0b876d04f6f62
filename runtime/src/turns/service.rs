//! The turn service: admission, starting a turn on the runtime's tracker, and the handle a
//! face holds while it runs.

use std::sync::Arc;

use arc_swap::ArcSwap;
use daedalus_contract::{Message, Task};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conversations::{ConversationKey, ConversationLocks};
use super::handle::TaskHandle;
use super::request::{Memory, TurnRequest};
use super::running::{Canceling, RunningTurns};
use super::stream::{self, EventSender};
use super::{CANCEL_SETTLE, CancelError, TurnError, TurnLimits, task};
use crate::agent_loop::Agent;
use crate::fleet::Fleet;
use crate::lifecycle::{Lifecycle, Phase};
use crate::metrics::Metrics;
use crate::task_store::{RelayHandler, Standing, StoreLimits, TaskCell, TaskStore};

/// Runs turns for every face. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TurnService(pub(super) Arc<Inner>);

#[derive(Debug)]
pub(super) struct Inner {
    /// The deployment's agents; a reload swaps in a new fleet while turns that already
    /// started keep the agent they began with.
    pub(super) fleet: ArcSwap<Fleet>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) lifecycle: Arc<Lifecycle>,
    pub(super) limits: TurnLimits,
    pub(super) tasks: Arc<TaskStore>,
    /// The turns running now, by task id (what a cancel by id reaches).
    pub(super) running: RunningTurns,
    pub(super) conversations: ConversationLocks,
    pub(super) permits: Arc<tokio::sync::Semaphore>,
    /// Every turn being worked on; shutdown waits for it to empty.
    pub(super) inflight: TaskTracker,
    /// Fired when the grace period is over: agents stop at their next safe point.
    pub(super) cancel: CancellationToken,
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
            tasks: Arc::new(TaskStore::new(StoreLimits {
                max_tasks: limits.max_tasks,
                max_bytes: limits.task_memory_bytes,
                ttl: limits.task_ttl,
            })),
            running: RunningTurns::default(),
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
        self.begin(request, false).await?.finish().await
    }

    /// Starts one turn and hands back its [`TaskHandle`]: the task and context ids (resolved
    /// before the turn runs), its live events, and its finished Task. The turn runs on the
    /// runtime's tracker, whether or not the handle is kept.
    pub async fn start(&self, request: TurnRequest) -> Result<TaskHandle, TurnError> {
        self.begin(request, true).await
    }

    async fn begin(&self, request: TurnRequest, listening: bool) -> Result<TaskHandle, TurnError> {
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
        let (out, events) = stream::queue();
        let events = listening.then_some(events);
        let (named, ids) = oneshot::channel();
        let service = self.clone();
        let turn = async move {
            let _permit = permit;
            let started = Started { out, named };
            match request.memory.clone() {
                Memory::Task => service.run_task(&agent, request, started).await,
                Memory::Conversation(key) => {
                    let lock = service.0.conversations.get(key.as_str());
                    let _turn = lock.lock().await;
                    service
                        .run_once(&agent, request, Some(key.as_str()), started)
                        .await
                }
                Memory::None => service.run_once(&agent, request, None, started).await,
            }
        };
        let mut done = self
            .0
            .inflight
            .spawn(tracing::Instrument::instrument(turn, span));
        let Ok((task_id, context_id)) = ids.await else {
            // The turn ended before it had a task (a refusal): say why.
            return Err(match (&mut done).await {
                Ok(Err(refused)) => refused,
                Ok(Ok(_)) => TurnError::WorkerStopped("the turn named no task".to_owned()),
                Err(join) => TurnError::WorkerStopped(join.to_string()),
            });
        };
        Ok(TaskHandle::new(task_id, context_id, events, done))
    }

    /// Cancels task `task_id`: a running turn stops at its next safe point (a tool call in
    /// flight is abandoned, which tells its MCP server) and ends `canceled`; a task waiting for
    /// input becomes `canceled`. Answers the task as it ended, when the runtime remembers it
    /// (an A2A task; a turn of a face's own conversation has no task to show).
    pub async fn cancel(&self, task_id: &str) -> Result<Option<Task>, CancelError> {
        if let Canceling::Running(mut ended) = self.0.running.cancel(task_id) {
            let settle = CANCEL_SETTLE + std::time::Duration::from_secs(1);
            if tokio::time::timeout(settle, ended.wait_for(|ended| *ended))
                .await
                .is_err()
            {
                tracing::warn!(task_id, "a canceled turn did not stop in time");
            }
            let Some(cell) = self.0.tasks.existing(task_id) else {
                return Ok(None);
            };
            // The turn keeps its task locked until it has stored how it ended.
            let _record = cell.lock_turn().await;
            return Ok(cell.task());
        }
        let not_found = || CancelError::NotFound(task_id.to_owned());
        let cell = self.0.tasks.find(task_id).await.ok_or_else(not_found)?;
        let _record = cell.lock_turn().await;
        let task = cell.task().ok_or_else(not_found)?;
        let state = task.status.state;
        if !state.is_terminal() && !state.is_interrupted() {
            // Running on another replica: that one cancels it.
            if let Some(relay) = self.0.tasks.relay()
                && let Some(ended) = relay.ask_cancel(task_id).await
            {
                cell.refresh(ended.clone());
                return Ok(Some(ended));
            }
            // No replica runs it any more: it ends here.
            let canceled = task::canceled(&task);
            self.end_idle(&cell, task_id, canceled.clone()).await;
            return Ok(Some(canceled));
        }
        if !state.is_interrupted() {
            return Err(CancelError::NotCancelable {
                task_id: task_id.to_owned(),
                state: task.status.state,
            });
        }
        let canceled = task::canceled(&task);
        self.end_idle(&cell, task_id, canceled.clone()).await;
        Ok(Some(canceled))
    }

    /// A task no turn runs ends as `ended`: its subscribers, here and on other replicas, hear
    /// it, and the store keeps it.
    async fn end_idle(&self, cell: &TaskCell, task_id: &str, ended: Task) {
        let (seq, event) = cell.end_idle(ended);
        if let Some(relay) = self.0.tasks.relay() {
            relay.publish(task_id, seq, &event);
        }
        self.0.tasks.touch(task_id);
        self.0.tasks.persist(task_id).await;
    }

    /// Task `task_id` as it stands (its own messages as history); a turn of a face's own
    /// conversation, which the store does not keep, is shown `working` while it runs. `None`
    /// for a task the runtime does not know.
    pub fn task_now(&self, task_id: &str) -> Option<Task> {
        if let Some(task) = self.0.tasks.existing(task_id).and_then(|cell| cell.task()) {
            return Some(task);
        }
        let context_id = self.0.running.context_of(task_id)?;
        let mut status = daedalus_contract::TaskStatus::new(daedalus_contract::TaskState::Working);
        status.timestamp =
            Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
        Some(Task {
            id: task_id.to_owned(),
            context_id: Some(context_id),
            status,
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        })
    }

    /// [`TurnService::task_now`], reading the task from the task backend when memory does not
    /// hold it or another replica may have moved it on (a task from before a restart, or one
    /// another replica ran).
    pub async fn find_task(&self, task_id: &str) -> Option<Task> {
        match self
            .0
            .tasks
            .find(task_id)
            .await
            .and_then(|cell| cell.task())
        {
            Some(task) => Some(task),
            None => self.task_now(task_id),
        }
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

    /// The task store (every binding's tasks, continuation and replay, subscriptions).
    pub fn tasks(&self) -> &Arc<TaskStore> {
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
}

/// What a running turn reports to [`TurnService::start`]: its ids once resolved, and its
/// events.
#[derive(Debug)]
pub(super) struct Started {
    pub(super) out: EventSender,
    pub(super) named: oneshot::Sender<(String, String)>,
}

impl Started {
    /// Tells the starter the turn's task and context ids; the turn's events go to `out`.
    pub(super) fn name(self, task_id: &str, context_id: &str) -> EventSender {
        let _ = self.named.send((task_id.to_owned(), context_id.to_owned()));
        self.out
    }
}

/// What this replica answers other replicas about the turns it runs.
#[async_trait::async_trait]
impl RelayHandler for TurnService {
    fn now(&self, task_id: &str) -> Option<Standing> {
        let cell = self.0.tasks.existing(task_id).filter(|c| c.is_running())?;
        let (seq, task) = cell.standing()?;
        Some(Standing { seq, task })
    }

    async fn cancel(&self, task_id: &str) -> Option<Task> {
        self.0.running.context_of(task_id)?;
        self.cancel(task_id).await.ok().flatten()
    }
}
