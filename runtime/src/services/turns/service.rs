//! The turn service: admission, starting a turn on the runtime's tracker, and the handle a
//! face holds while it runs.

use crate::platform::identity::Caller;
use std::sync::Arc;

use arc_swap::ArcSwap;
use daedalus_contract::{Message, Task};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::{Admission, FairShares, Group};
use super::conversation_locks::{ConversationKey, ConversationLocks};
use super::handle::TaskHandle;
use super::history::{self, Unset};
use super::request::{Memory, TurnRequest};
use super::stream::{self, EventSender};
use super::{CancelError, FollowError, Following, Limit, TurnError, TurnLimits, task};
use crate::agents::agent_loop::Agent;
use crate::agents::fleet::Fleet;
use crate::platform::metrics::Metrics;
use crate::services::turns::{Phase, Readiness};
use crate::stores::tasks::size::message_bytes;
use crate::stores::tasks::{
    ListError, ListPage, ListQuery, Resumable, ResumeCause, StoreLimits, TaskStore,
};

/// How long a turn that could not resume for want of room waits before it is tried again.
const RESUME_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// How many times it is tried again before it is failed (about five minutes).
const RESUME_TRIES: usize = 300;
/// The longest wait for its caller's budget a turn left running waits out to resume (a
/// minute's window, a running turn of the caller ending); a longer one (a day's) fails it,
/// naming the limit.
const BUDGET_WAIT_TO_RESUME: std::time::Duration = std::time::Duration::from_mins(1);

/// What came of resuming a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resumed {
    /// It runs again here.
    Now,
    /// Another replica has it, it ended, it failed, or shutdown leaves it to another.
    Elsewhere,
    /// It cannot now (no room, the store away): try again later.
    Later,
}

/// Runs turns for every face. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TurnService(pub(super) Arc<Inner>);

#[derive(Debug)]
pub(super) struct Inner {
    /// The deployment's agents; a reload swaps in a new fleet while turns that already
    /// started keep the agent they began with.
    pub(super) fleet: ArcSwap<Fleet>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) readiness: Arc<Readiness>,
    pub(super) limits: TurnLimits,
    /// Every task: the turns running here write them through it, and a cancel by id goes
    /// through it to wherever the turn runs.
    pub(super) tasks: TaskStore,
    pub(super) conversations: ConversationLocks,
    pub(super) admission: Admission,
    /// Every turn being worked on; shutdown waits for it to empty.
    pub(super) inflight: TaskTracker,
    /// Fired when the grace period is over: agents stop at their next safe point.
    pub(super) cancel: CancellationToken,
    /// What each principal, tenant and agent may spend, and what they spent.
    pub(super) budgets: Arc<crate::agents::budgets::BudgetBook>,
    /// The conversation store shares the task store's writer (the default: one SQLite
    /// file): a turn's conversation is committed with its end.
    pub(super) conversations_commit_with_tasks: std::sync::atomic::AtomicBool,
}

impl TurnService {
    pub fn new(
        fleet: Arc<Fleet>,
        metrics: Arc<Metrics>,
        readiness: Arc<Readiness>,
        limits: TurnLimits,
    ) -> Self {
        let tasks = TaskStore::new(StoreLimits {
            max_tasks: limits.max_tasks,
            max_bytes: limits.task_memory_bytes,
            ttl: limits.task_ttl,
        });
        tasks.resume_turns(limits.max_resumes > 0);
        let budgets = Arc::new(
            crate::agents::budgets::BudgetBook::new(None).counted_in(Arc::clone(&metrics)),
        );
        Self(Arc::new(Inner {
            fleet: ArcSwap::new(fleet),
            metrics,
            readiness,
            tasks,
            conversations: ConversationLocks::default(),
            admission: Admission::new(limits.budgets),
            limits,
            inflight: TaskTracker::new(),
            cancel: CancellationToken::new(),
            budgets,
            conversations_commit_with_tasks: std::sync::atomic::AtomicBool::new(false),
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
        match self.0.readiness.phase() {
            Phase::Starting => return Err(TurnError::NotReady),
            Phase::Draining => return Err(TurnError::ShuttingDown),
            Phase::Ready => {}
        }
        if let Memory::Task = request.memory {
            task::check_message(&request.message)?;
        }
        let agent = self.agent(&request.agent)?;
        let may_reply = agent.may_reply(&request.message);
        let bytes = message_bytes(&request.message);
        if let Err(limit) = self.0.admission.could_ever_fit(bytes) {
            return Err(TurnError::TaskTooLarge(format!(
                "the message ({bytes} bytes) is larger than {limit} lets one turn hold"
            )));
        }
        let permit = self
            .0
            .admission
            .admit(&request.agent, fair_group(&request.caller), bytes)
            .map_err(|limit| TurnError::Busy(self.refused_by(limit)))?;
        // After the room is found, so a turn refused for want of room spends no budget. A
        // resumed turn is admitted again, for the caller its record names: it takes its place
        // among that caller's running turns, spends from the same windows, and counts what its
        // calls used before its last checkpoint against `tokens_per_turn`.
        let budget = {
            let budgets = &self.0.budgets;
            budgets
                .admit(budgets.scopes(&request.caller, &request.agent))
                .await
                .map_err(TurnError::OverBudget)?
        };
        if let Some(resume) = &request.resume {
            budget.spent_before(resume.record.tokens_spent());
        }
        let span = self.turn_span(&request.agent);
        crate::platform::telemetry::continue_trace(&span, &request.trace);
        // Boxed: the turn's future holds a pointer to it at each step, not a copy.
        let request = Box::new(request);
        let (out, events) = stream::queue();
        let events = listening.then_some(events);
        let (named, ids) = oneshot::channel();
        let service = self.clone();
        let turn = async move {
            let _permit = permit;
            let started = Started { out, named, budget };
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
        let Ok(Named {
            task_id,
            context_id,
            began,
        }) = ids.await
        else {
            // The turn ended before it had a task (a refusal): say why.
            return Err(match (&mut done).await {
                Ok(Err(refused)) => refused,
                Ok(Ok(_)) => TurnError::WorkerStopped("the turn named no task".to_owned()),
                Err(join) => TurnError::WorkerStopped(join.to_string()),
            });
        };
        Ok(TaskHandle::new(task_id, context_id, events, done, may_reply).began_as(began))
    }

    /// Resumes, as they are queued, the turns left running with no turn of them left: this
    /// replica's before a restart, a lost replica's (see [`super::record`]). Each goes on from
    /// its record: the same task and context, from the loop's last checkpoint. Runs until
    /// `stop`.
    pub async fn resume_queued(&self, stop: &CancellationToken) {
        loop {
            let queued = tokio::select! {
                () = stop.cancelled() => return,
                queued = self.0.tasks.next_resumable() => queued,
            };
            let mut resumed = 0;
            for turn in queued {
                match self.resume_one(&turn).await {
                    Resumed::Now => resumed += 1,
                    Resumed::Elsewhere => {}
                    Resumed::Later => self.resume_later(turn),
                }
            }
            if resumed > 0 {
                tracing::info!(turns = resumed, "turns left running are resumed");
            }
        }
    }

    /// Tries `turn` again every [`RESUME_RETRY`], at most [`RESUME_TRIES`] times, while it
    /// cannot resume for want of room or of the store; then fails it.
    fn resume_later(&self, turn: Resumable) {
        let service = self.clone();
        let stop = self.0.cancel.clone();
        tokio::spawn(async move {
            for _ in 0..RESUME_TRIES {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RESUME_RETRY) => {}
                }
                if service.resume_one(&turn).await != Resumed::Later {
                    return;
                }
            }
            let why = "this task's turn found no room (or no task store) to resume in";
            tracing::warn!(
                task_id = turn.task_id,
                why,
                "a turn left running is not resumed"
            );
            service.0.tasks.fail_left_running(&turn.task_id, why).await;
        });
    }

    /// Resumes `turn` from its record. A task another replica resumed first,
    /// or that ended, is left to it; one that cannot resume now (no room, the store away) is
    /// to be tried later; at shutdown the record stays for another replica or a restart; any
    /// other refusal fails it, saying why.
    async fn resume_one(&self, turn: &Resumable) -> Resumed {
        let task_id = turn.task_id.as_str();
        let Some(record) = super::record::TurnRecord::from_json(&turn.record) else {
            let why = "the record of this task's turn could not be read, so it is not resumed";
            tracing::warn!(task_id, why, "a turn left running is not resumed");
            self.0.tasks.fail_left_running(task_id, why).await;
            return Resumed::Elsewhere;
        };
        let kept = record.checkpoint.as_ref().map_or(0, |c| c.step);
        let cause = if record.handed_off {
            ResumeCause::HandOff
        } else {
            turn.cause
        };
        let mut request =
            TurnRequest::new(record.agent.clone(), record.message.clone(), Memory::Task);
        request.caller = Caller::resumed(record.principal.clone());
        request.sampling = Ok(record.sampling.clone());
        request.controls = record.controls.clone();
        request.stream = record.stream;
        request.replay = false;
        request.trace.traceparent.clone_from(&record.traceparent);
        request.resume = Some(super::record::Resume {
            record,
            left_by: turn.left_by.clone(),
        });
        match self.begin(request, false).await {
            Ok(_) => {
                self.0
                    .metrics
                    .turns_resumed
                    .get_or_create(&crate::platform::metrics::CauseLabel {
                        cause: cause.as_str(),
                    })
                    .inc();
                self.0.metrics.steps_kept.inc_by(u64::from(kept));
                tracing::info!(
                    task_id,
                    cause = cause.as_str(),
                    steps_kept = kept,
                    "a turn is resumed from its last checkpoint"
                );
                Resumed::Now
            }
            Err(e @ (TurnError::TaskMoved(_) | TurnError::TaskFinished { .. })) => {
                tracing::info!(
                    task_id,
                    error = %e,
                    "a turn left running was resumed or ended elsewhere first"
                );
                Resumed::Elsewhere
            }
            Err(TurnError::ShuttingDown) => Resumed::Elsewhere,
            // Its caller's budget has room again within a minute (a minute's window, its
            // running turns): the turn waits for it, as a new one would be told to.
            Err(TurnError::OverBudget(refusal))
                if refusal
                    .retry_after
                    .is_some_and(|after| after <= BUDGET_WAIT_TO_RESUME) =>
            {
                tracing::info!(task_id, %refusal, "a turn left running waits for its caller's budget to resume");
                Resumed::Later
            }
            Err(
                e @ (TurnError::Busy(_) | TurnError::NotReady | TurnError::StoreUnavailable(_)),
            ) => {
                tracing::info!(task_id, error = %e, "a turn left running waits to resume (no room, or the store is away)");
                Resumed::Later
            }
            Err(e) => {
                let why = format!("this task's turn could not resume: {e}");
                tracing::warn!(task_id, why, "a turn left running is not resumed");
                self.0.tasks.fail_left_running(task_id, &why).await;
                Resumed::Elsewhere
            }
        }
    }

    /// Cancels task `task_id`, wherever its turn runs: a running turn stops at its next safe
    /// point (a tool call in flight is abandoned, which tells its MCP server) and ends
    /// `canceled`; a task waiting for input becomes `canceled`. A task that stored another end
    /// first is not cancelable. Answers the task as it ended, without its history.
    pub async fn cancel(&self, task_id: &str, caller: &Caller) -> Result<Task, CancelError> {
        let task = self.0.tasks.cancel(task_id, caller).await?;
        Ok(history::shape(task, Some(0), Unset::All))
    }

    /// Task `task_id` as it stands, read from the task backend when memory does not hold it
    /// or another replica may have moved it on (its own messages as history).
    pub async fn find_task(&self, task_id: &str, caller: &Caller) -> Option<Task> {
        self.0.tasks.find(task_id, caller).await
    }

    /// `GetTask`: task `task_id` as it stands, showing `history_length` of its own messages
    /// (unset: all).
    pub async fn get_task(
        &self,
        task_id: &str,
        caller: &Caller,
        history_length: Option<u32>,
    ) -> Option<Task> {
        let task = self.find_task(task_id, caller).await?;
        Some(history::shape(task, history_length, Unset::All))
    }

    /// One page of the tasks `query` selects, each showing `query.history_length` of its own
    /// messages (unset: none).
    pub async fn list_tasks(&self, query: &ListQuery) -> Result<ListPage, ListError> {
        let mut page = self.0.tasks.list(query).await?;
        page.tasks = std::mem::take(&mut page.tasks)
            .into_iter()
            .map(|task| history::shape(task, query.history_length, Unset::Nothing))
            .collect();
        Ok(page)
    }

    /// Counts a refusal by `limit` (`daedalus_runtime_turns_refused`), and answers it.
    fn refused_by(&self, limit: Limit) -> Limit {
        self.0
            .metrics
            .turns_refused
            .get_or_create(&crate::platform::metrics::LimitLabel {
                limit: limit.setting(),
            })
            .inc();
        limit
    }

    /// Task `task_id` as it stands and its events from here on, wherever its turn runs; the
    /// stream takes its room in the turn memory, or is refused at once when there is none.
    pub async fn follow_task(
        &self,
        task_id: &str,
        caller: &Caller,
    ) -> Result<(Task, Following), FollowError> {
        let (task, follow) = self
            .0
            .tasks
            .follow(task_id, caller)
            .await
            .map_err(FollowError::Refused)?;
        // Asked only for a task there is to follow: an unknown one is not found, full or not.
        let room = self
            .0
            .admission
            .admit_stream()
            .map_err(|limit| FollowError::Busy(self.refused_by(limit)))?;
        Ok((task, Following::new(follow, room)))
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

    /// The windowed budgets that hold `caller`'s turns of `agent`, and where each stands now
    /// (what a refused turn's [`BudgetRefusal::rate_limits`] told as it was refused).
    pub fn rate_limits(&self, caller: &Caller, agent: &str) -> Vec<daedalus_contract::RateLimit> {
        self.0.budgets.rate_limits(caller, agent)
    }

    /// What `/healthz` says of the budgets (`None` with no `budgets:` block).
    pub fn budgets_health(&self) -> Option<crate::agents::budgets::BudgetsHealth> {
        self.0.budgets.health()
    }

    /// Holds turns to `plan` from now on (`None`: nothing is limited); what was spent stays.
    /// The budget book (to share its usage with the other replicas, and close it).
    pub fn budget_book(&self) -> &Arc<crate::agents::budgets::BudgetBook> {
        &self.0.budgets
    }

    /// The conversation store shares the task store's writer (one SQLite file): a turn's
    /// conversation rows are committed with its end, in one commit. Otherwise each store
    /// commits its own, the conversation first.
    pub fn commit_conversations_with_tasks(&self, shared: bool) {
        self.0
            .conversations_commit_with_tasks
            .store(shared, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn set_budgets(&self, plan: Option<crate::config::deployment::budgets::BudgetPlan>) {
        self.0.admission.share_fairly(plan.as_ref().map(|plan| {
            FairShares {
                shares: plan
                    .tenants
                    .iter()
                    .filter_map(|(tenant, limits)| Some((tenant.clone(), limits.share?)))
                    .collect(),
            }
        }));
        self.0.budgets.replace(plan);
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

    /// How long a task is kept after it last changed (`TASK_TTL`).
    pub fn task_ttl(&self) -> std::time::Duration {
        self.0.limits.task_ttl
    }

    /// Turns (of the smallest size) that could start now before a process-wide turn limit
    /// is reached.
    pub fn free_permits(&self) -> usize {
        self.0.admission.room()
    }

    /// The token that cancels running turns (fired when the grace period runs out).
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.0.cancel
    }

    /// The task store, for startup to attach its backend. Faces read tasks through the
    /// methods above and never write them.
    pub(crate) fn task_store(&self) -> &TaskStore {
        &self.0.tasks
    }

    /// This replica's part in a shared task store, when it has one.
    pub fn replica_health(&self) -> Option<crate::stores::tasks::ReplicaHealth> {
        self.0.tasks.replica_health()
    }

    /// How many tasks memory holds, and their bytes.
    pub fn task_memory(&self) -> (usize, usize) {
        (self.0.tasks.len(), self.0.tasks.bytes())
    }

    /// How many subscriptions are open on task `task_id` here.
    pub fn task_subscribers(&self, task_id: &str) -> usize {
        self.0.tasks.subscribers(task_id)
    }

    /// The span of a turn of `agent`: `invoke_agent <agent>`, INTERNAL (the agent runs here),
    /// with its provider, model and description; the turn records its context as
    /// `gen_ai.conversation.id` once it is resolved.
    fn turn_span(&self, agent: &str) -> tracing::Span {
        use tracing::field::Empty;
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {agent}"),
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = agent,
            gen_ai.agent.description = Empty,
            gen_ai.provider.name = Empty,
            gen_ai.request.model = Empty,
            gen_ai.conversation.id = Empty,
            error.type = Empty,
            trace_id = Empty,
            span_id = Empty,
        );
        if let Some(about) = self.0.fleet.load().about.get(agent) {
            if let Some(provider) = about.provider {
                span.record("gen_ai.provider.name", provider);
            }
            if let Some(model) = &about.model {
                span.record("gen_ai.request.model", model.as_str());
            }
            if let Some(description) = &about.description {
                span.record("gen_ai.agent.description", description.as_str());
            }
        }
        span
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
    pub(super) named: oneshot::Sender<Named>,
    /// The turn's hold on its budgets.
    pub(super) budget: crate::agents::budgets::TurnBudget,
}

/// What a running turn tells [`TurnService::start`] once its task is named.
#[derive(Debug)]
pub(super) struct Named {
    task_id: String,
    context_id: String,
    /// The task as the turn began it, for a caller that hears it then ([`Heard::AsItBegan`]).
    began: Option<Box<Task>>,
}

impl Started {
    /// Tells the starter the turn's task and context ids; the turn's events go to `out`.
    pub(super) fn name(self, task_id: &str, context_id: &str) -> EventSender {
        self.name_with(task_id, context_id, None)
    }

    /// As [`Started::name`], handing over the task as the turn began it (shaped for the
    /// caller already) when the caller hears it then.
    pub(super) fn name_with(
        self,
        task_id: &str,
        context_id: &str,
        began: Option<Task>,
    ) -> EventSender {
        // Inside the turn's span: its context is the conversation it continues.
        tracing::Span::current().record("gen_ai.conversation.id", context_id);
        let _ = self.named.send(Named {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            began: began.map(Box::new),
        });
        self.out
    }
}

/// The group `caller`'s turns are admitted in, fairly by share: its tenant's.
fn fair_group(caller: &Caller) -> Group<'_> {
    caller
        .principal()
        .and_then(|p| p.tenant.as_deref())
        .map_or(Group::NoTenant, Group::Tenant)
}
