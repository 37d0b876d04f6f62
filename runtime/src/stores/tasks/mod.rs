//! The runtime's tasks, for every binding: each task as it stands (status, artifacts, its own
//! messages as history), what the contract binding's replay needs, and a per-task event log
//! with sequence numbers that subscribers read.
//!
//! **One writer.** The store owns every write of task state, through one handle per turn
//! ([`TaskTurn`], from [`TaskStore::open_turn`]): begin, the turn's events, and one `end` for
//! every way a task ends, stored before it is told. Everyone else reads: [`TaskStore::get`],
//! [`TaskStore::find`], [`TaskStore::list`], [`TaskStore::follow`]; a cancel is the store's
//! own protocol ([`TaskStore::cancel`]). In a backend a task changes only by compare-and-set
//! on its revision, so the first end stored wins and is never overwritten.
//!
//! Memory holds the tasks ([`bounded_cells`]: bounded by count, bytes and age), and is what answers.
//! A backend (`TASKS_DB`) keeps them beyond the process; a NATS KV backend is shared by
//! replicas ([`replicas`]): every replica mirrors the bucket, follows turns that run
//! elsewhere, and fails the running tasks of a replica whose lease ran out.

pub mod backend;
mod bounded_cells;
mod cancel;
pub mod follow;
mod index;
pub mod list;
pub mod nats_kv;
pub mod replicas;
mod resume;
pub(crate) mod size;
pub mod sqlite;
mod sqlite_select;
mod stop;
mod task_cell;
pub mod turn;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use crate::platform::identity::Caller;
use daedalus_contract::{Task, TaskState};

pub use backend::{BackendError, StoredTask, TaskBackend, Versioned, WriteError};
pub use cancel::CancelError;
pub use follow::Follow;
pub use list::{ListError, ListPage, ListQuery};
pub use nats_kv::NatsKvTasks;
pub use replicas::{Relay, ReplicaHealth};
pub use resume::{Resumable, ResumeCause};
pub use sqlite::SqliteTasks;
pub use stop::TurnStop;
pub use task_cell::{LOG_BYTES, SubscribeRefusal};
pub use turn::{BeginError, Ended, TaskTurn, TurnLog};

use task_cell::{Absorbed, TaskCell};

/// `task` with `event` applied, as a listener of its stream rebuilds it.
pub fn apply_event(task: Task, event: &daedalus_contract::StreamEvent) -> Task {
    task_cell::apply(task, event)
}
use bounded_cells::BoundedCells;

/// How long a read of the backend may take before memory answers alone.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Told of every state of a task this replica stores, after the store took it (push
/// notifications deliver them). Called on the writer's path: it must only queue.
pub trait StoreObserver: Send + Sync + std::fmt::Debug + 'static {
    /// `task` was stored at `revision` (`0` where no backend keeps revisions).
    fn stored(&self, task: &Task, revision: u64);
    /// Whether it wants to hear of task `task_id`'s states as they are stored (a begin it
    /// wants is never left for its end's commit).
    fn watches(&self, task_id: &str) -> bool;
}

/// What the store may hold in memory.
#[derive(Debug, Clone, Copy)]
pub struct StoreLimits {
    /// Tasks kept (`MAX_TASKS`).
    pub max_tasks: usize,
    /// Bytes they may hold (`TASK_MEMORY`).
    pub max_bytes: usize,
    /// How long a task is kept after it last changed (`TASK_TTL`).
    pub ttl: Duration,
}

/// The tasks, by id. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TaskStore(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    limits: StoreLimits,
    cells: Mutex<BoundedCells>,
    /// Where tasks are kept beyond memory, once attached at startup.
    persistence: OnceLock<Persistence>,
    /// Who is told of each state stored.
    observer: OnceLock<Arc<dyn StoreObserver>>,
    /// Every task of a shared bucket, as `ListTasks` selects from (empty otherwise).
    index: Mutex<index::TaskIndex>,
    /// Turns to be resumed here (a restart's, a lost replica's), with their records.
    resumable: Mutex<Vec<Resumable>>,
    /// Told when tasks join `resumable`.
    queued: tokio::sync::Notify,
    /// Whether turns left running are resumed (`TURN_MAX_RESUMES` above 0) or failed.
    resuming: std::sync::atomic::AtomicBool,
    /// Tasks whose turns this replica handed off at shutdown: running in the store with no
    /// turn here, on purpose (not leftovers to settle).
    handed_off: Mutex<std::collections::HashSet<String>>,
}

#[derive(Debug)]
struct Persistence {
    backend: Arc<dyn TaskBackend>,
    /// This replica's name (`REPLICA_ID`).
    replica: String,
    /// The other replicas sharing the backend (NATS KV only).
    replicas: Option<replicas::Replicas>,
}

impl TaskStore {
    pub fn new(limits: StoreLimits) -> Self {
        Self(Arc::new(Inner {
            limits: StoreLimits {
                max_tasks: limits.max_tasks.max(1),
                ..limits
            },
            cells: Mutex::default(),
            persistence: OnceLock::new(),
            observer: OnceLock::new(),
            index: Mutex::new(index::TaskIndex::new(index::INDEX_BYTES)),
            resumable: Mutex::default(),
            queued: tokio::sync::Notify::new(),
            resuming: std::sync::atomic::AtomicBool::new(true),
            handed_off: Mutex::default(),
        }))
    }

    /// [`TaskStore::written_here`], or, for a task memory does not hold on a store this
    /// replica has alone (SQLite: a restart reads finished tasks only when asked), as the
    /// backend keeps it, read without keeping it in memory.
    pub async fn written_here_or_kept(&self, task_id: &str) -> Option<(Task, u64)> {
        if let Some(held) = self.written_here(task_id) {
            return Some(held);
        }
        if self.replicas().is_some() || self.existing(task_id).is_some() {
            return None;
        }
        let versioned = self.load(task_id).await.ok()??;
        Some((versioned.stored.task, versioned.revision))
    }

    /// From now on tells `observer` of each state stored (once; a second is ignored).
    pub fn observe(&self, observer: Arc<dyn StoreObserver>) {
        let _ = self.0.observer.set(observer);
    }

    /// Task `task_id` as memory holds it and the revision it stands at, if this replica
    /// wrote it last (or no other replica shares the store).
    pub fn written_here(&self, task_id: &str) -> Option<(Task, u64)> {
        let cell = self.existing(task_id)?;
        let (revision, owner) = cell.revision();
        // Alone on its store (SQLite), this replica answers for every task, whatever name
        // wrote it before a restart.
        if self.replicas().is_some() && owner.as_deref() != self.replica() {
            return None;
        }
        Some((cell.task()?, revision))
    }

    /// From now on keeps tasks in `backend` too, as replica `replica`, after reading back the
    /// tasks left running (a backend that cannot find them alone: the most recent ones; the
    /// others are read when someone asks for them). Those this replica left running are resumed when their turn's record
    /// was kept ([`TaskStore::take_resumable`] hands them to the turn service); the others
    /// become `failed`, saying the runtime restarted. Answers how many failed.
    pub(crate) async fn attach(
        &self,
        backend: Arc<dyn TaskBackend>,
        replica: &str,
    ) -> Result<usize, BackendError> {
        // A backend that finds the turns left running is one process's alone (SQLite): this
        // replica answers for every one of them, whatever name it ran under before
        // (REPLICA_ID unset, the name has the port, which may change). Otherwise only for
        // those left under its own name.
        let (recent, every_owner) = match backend.left_running(replica).await? {
            Some(running) => (running, true),
            None => (backend.recent(self.0.limits.max_tasks).await?, false),
        };
        self.set_persistence(Arc::clone(&backend), replica, None);
        // Oldest first, so the newest are the most recent in memory too.
        let mut left = std::collections::BTreeMap::<String, Vec<String>>::new();
        for versioned in recent.into_iter().rev() {
            if versioned.stored.is_running() && (every_owner || versioned.stored.owner == replica) {
                left.entry(versioned.stored.owner.clone())
                    .or_default()
                    .push(versioned.stored.task.id.clone());
            }
            self.absorb(versioned);
        }
        let mut failed = 0;
        for (owner, tasks) in &left {
            failed += self
                .resume_or_fail(tasks, backend::RESTARTED, owner, ResumeCause::Restart)
                .await;
        }
        Ok(failed)
    }

    fn set_persistence(
        &self,
        backend: Arc<dyn TaskBackend>,
        replica: &str,
        replicas: Option<replicas::Replicas>,
    ) {
        let _ = self.0.persistence.set(Persistence {
            backend,
            replica: replica.to_owned(),
            replicas,
        });
    }

    /// Opens task `task_id` for writing: waits for the task's turn lock on this replica, and
    /// answers the one handle its writes go through.
    pub(crate) async fn open_turn(&self, task_id: &str) -> TaskTurn {
        let cell = match self.find_cell(task_id).await {
            Some(cell) => cell,
            None => self.cell(task_id),
        };
        let lock = cell.lock_turn().await;
        TaskTurn::new(self.clone(), task_id, cell, lock)
    }

    /// [`TaskStore::open_turn`] of a task this runtime just named (a fresh id no task has
    /// had): nothing to read from the backend.
    pub(crate) async fn open_new_turn(&self, task_id: &str) -> TaskTurn {
        let cell = self.cell(task_id);
        let lock = cell.lock_turn().await;
        TaskTurn::new(self.clone(), task_id, cell, lock)
    }

    /// Task `task_id` as this replica holds it now, if `caller` may see it.
    pub fn get(&self, task_id: &str, caller: &Caller) -> Option<Task> {
        self.existing(task_id)
            .filter(|cell| caller.may_see(cell.principal().as_ref()))?
            .task()
    }

    /// Task `task_id` as it stands, if `caller` may see it: from memory when a turn of it
    /// runs here or it is over, else read from the backend (another replica may have moved it
    /// on, or it is from before a restart). To anyone else the task does not exist.
    pub async fn find(&self, task_id: &str, caller: &Caller) -> Option<Task> {
        self.find_for(task_id, caller).await?.task()
    }

    /// Whether context `context_id` is open to `caller`: no task of it belongs to someone
    /// `caller` may not see.
    /// Memory tells among what it holds; a backend that can tell among every task it keeps
    /// (SQLite: finished tasks are not all in memory) is asked too.
    pub async fn context_open_to(&self, context_id: &str, caller: &Caller) -> bool {
        if matches!(caller, Caller::Anyone) {
            return true;
        }
        let cells = self.lock().all();
        let open_here = cells.iter().all(|cell| {
            cell.peek(|t| t.context_id.as_deref() == Some(context_id)) != Some(true)
                || caller.may_see(cell.principal().as_ref())
        });
        if !open_here {
            return false;
        }
        let Some(p) = self.0.persistence.get().filter(|p| p.replicas.is_none()) else {
            return true;
        };
        match p.backend.context_closed_to(context_id, caller).await {
            Ok(closed) => !closed.unwrap_or(false),
            Err(e) => {
                // Not known to be open: refused (the caller may try again).
                tracing::warn!(error = %e, "cannot tell who owns a context's tasks");
                false
            }
        }
    }

    /// One page of the tasks that `query` selects, most recently changed status first. With
    /// replicas, what every replica stored before the call is in it.
    pub async fn list(&self, query: &ListQuery) -> Result<ListPage, ListError> {
        if let Some(replicas) = self.replicas() {
            replicas.catch_up().await;
            return self.list_shared(query).await;
        }
        if let Some(p) = self.0.persistence.get() {
            let asked = list::Asked::of(query)?;
            match p.backend.select(&asked).await {
                Ok(Some(selection)) => return Ok(self.page_of(selection, query).await),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "ListTasks cannot select in the task store; memory answers");
                }
            }
        }
        let cells = {
            let mut cells = self.lock();
            cells.evict(&self.0.limits);
            cells.all()
        };
        list::page(&cells, query)
    }

    /// The page a backend selected: each task from memory when memory holds it (a turn may
    /// have moved it on since its last commit), else read from the backend.
    async fn page_of(&self, selection: list::Selection, query: &ListQuery) -> ListPage {
        let read = selection.ids.iter().map(|id| async move {
            match self.existing(id).and_then(|cell| cell.task()) {
                Some(task) => Some(task),
                None => self.read_listed(id).await.ok().flatten(),
            }
        });
        let tasks = futures::future::join_all(read).await;
        list::shaped_page(selection, tasks, query)
    }

    /// Task `id` read from the backend for a page of `ListTasks` (`Ok(None)`: no longer kept);
    /// a failed read is logged, and the page goes on without the task.
    async fn read_listed(&self, id: &str) -> Result<Option<Task>, ()> {
        match self.load(id).await {
            Ok(found) => Ok(found.map(|versioned| versioned.stored.task)),
            Err(e) => {
                tracing::warn!(task_id = id, error = %e, "ListTasks could not read a task");
                Err(())
            }
        }
    }

    /// `ListTasks` on a shared bucket: selected from the index of every task the bucket
    /// holds; each task of the page from memory when memory holds it as indexed, else read
    /// from the bucket.
    async fn list_shared(&self, query: &ListQuery) -> Result<ListPage, ListError> {
        let (selection, revisions) = {
            let index = self.0.index.lock().unwrap_or_else(PoisonError::into_inner);
            let selection = list::select(index.facts(), query)?;
            let revisions: Vec<Option<u64>> =
                selection.ids.iter().map(|id| index.revision(id)).collect();
            (selection, revisions)
        };
        let read = selection
            .ids
            .iter()
            .zip(revisions)
            .map(|(id, indexed)| async move {
                if let Some(cell) = self.existing(id)
                    && cell.revision().0 >= indexed.unwrap_or(0)
                {
                    return cell.task();
                }
                let read = self.read_listed(id).await;
                if matches!(read, Ok(None)) {
                    // Aged out of the bucket since.
                    self.0
                        .index
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .forget(id);
                }
                read.ok().flatten()
            });
        let tasks = futures::future::join_all(read).await;
        Ok(list::shaped_page(selection, tasks, query))
    }

    /// The mirror read task `task_id`'s entry: what `ListTasks` selects on.
    fn index(&self, task_id: &str, entry: index::Entry) {
        self.0
            .index
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(task_id, entry);
    }

    /// Bytes the tasks in memory hold, as last taken.
    pub fn bytes(&self) -> usize {
        self.lock().bytes()
    }

    /// How many tasks memory holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl crate::platform::metrics::MemoryFigures for TaskStore {
    fn tasks(&self) -> u64 {
        u64::try_from(self.len()).unwrap_or(u64::MAX)
    }

    fn bytes(&self) -> u64 {
        u64::try_from(TaskStore::bytes(self)).unwrap_or(u64::MAX)
    }
}

impl TaskStore {
    /// How many subscriptions are open on task `task_id`.
    pub fn subscribers(&self, task_id: &str) -> usize {
        self.existing(task_id).map_or(0, |cell| cell.subscribers())
    }

    /// The replicas' state, when the backend is shared.
    pub fn replica_health(&self) -> Option<ReplicaHealth> {
        self.replicas().map(replicas::Replicas::health)
    }

    /// This replica leaves the shared store (at shutdown, once its turns are over): its lease
    /// goes at once, so nobody waits for it to run out.
    pub async fn leave(&self) {
        if let Some(replicas) = self.replicas() {
            replicas.leave().await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, BoundedCells> {
        self.0.cells.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cell of `task_id`, created empty if the task is new.
    fn cell(&self, task_id: &str) -> Arc<TaskCell> {
        let mut cells = self.lock();
        if let Some(cell) = cells.get(task_id) {
            return cell;
        }
        let cell = Arc::new(TaskCell::new());
        cells.insert(task_id, Arc::clone(&cell));
        cells.evict(&self.0.limits);
        cell
    }

    /// The cell of `task_id`, if memory holds the task.
    fn existing(&self, task_id: &str) -> Option<Arc<TaskCell>> {
        let mut cells = self.lock();
        cells.evict(&self.0.limits);
        cells.get(task_id)
    }

    /// The cell of `task_id`, read from the backend when memory lacks it or may be behind.
    async fn find_cell(&self, task_id: &str) -> Option<Arc<TaskCell>> {
        let held = self.existing(task_id);
        let settled = held.as_ref().is_some_and(|cell| {
            cell.is_running() || cell.state().is_some_and(TaskState::is_terminal)
        });
        if settled || self.0.persistence.get().is_none() {
            return held;
        }
        self.refresh(task_id).await;
        self.existing(task_id)
    }

    /// The cell of `task_id` (as [`TaskStore::find_cell`]), if `caller` may see its task.
    async fn find_for(&self, task_id: &str, caller: &Caller) -> Option<Arc<TaskCell>> {
        self.find_cell(task_id)
            .await
            .filter(|cell| cell.task().is_some() && caller.may_see(cell.principal().as_ref()))
    }

    /// Reads task `task_id` from the backend into memory.
    async fn refresh(&self, task_id: &str) {
        match self.load(task_id).await {
            Ok(Some(versioned)) => self.absorb(versioned),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(task_id, error = %e, "could not read the task from its backend");
            }
        }
    }

    /// A task as the backend holds it, written here or elsewhere: memory takes it if it is
    /// newer (a turn running here that it ended is told to stop: it has lost).
    fn absorb(&self, versioned: Versioned) {
        let task_id = versioned.stored.task.id.clone();
        let held = self.lock().get(&task_id);
        if let Some(cell) = held {
            match cell.absorb(versioned) {
                Absorbed::Nothing => return,
                Absorbed::Applied => {}
                Absorbed::EndedUnderTurn(stop) => {
                    tracing::warn!(
                        task_id,
                        "another writer ended a task whose turn runs here; stopping the turn"
                    );
                    stop.request();
                    return;
                }
            }
        } else {
            let cell = Arc::new(TaskCell::restored(versioned));
            let mut cells = self.lock();
            if cells.get(&task_id).is_some() {
                // Taken meanwhile; the next revision will reach it.
                return;
            }
            cells.insert(&task_id, cell);
        }
        self.touch(&task_id);
    }

    /// Whether memory wants task `task_id` at `revision`, written as `write_id` (a write by
    /// another replica, newer than memory's), so the bucket's entry is worth reading whole.
    fn wants(&self, task_id: &str, revision: u64, write_id: &str) -> bool {
        self.lock()
            .get(task_id)
            .is_none_or(|cell| cell.wants(revision, write_id))
    }

    /// Task `task_id` changed: it counts as recent again, its size is taken anew, and old
    /// tasks are dropped until the limits hold.
    fn touch(&self, task_id: &str) {
        let mut cells = self.lock();
        cells.touch(task_id);
        cells.evict(&self.0.limits);
    }

    /// Writes `task` (answering `answered`) to the backend at revision `expected`, as this
    /// replica's write of `cell`'s task, with `step` for its turn's record; memory alone
    /// answers `0` and builds nothing.
    async fn write(
        &self,
        cell: &TaskCell,
        task: &Task,
        answered: Option<&str>,
        expected: u64,
        step: backend::TurnStep<'_>,
    ) -> Result<u64, WriteError> {
        let Some(p) = self.0.persistence.get() else {
            self.told_stored(task, 0);
            return Ok(0);
        };
        let mut stored = StoredTask::new(task.clone(), &p.replica, answered.map(str::to_owned));
        stored.principal = cell.principal();
        cell.writes(&stored.write_id);
        let revision = p.backend.write_with_turn(&stored, expected, step).await?;
        self.told_stored(task, revision);
        Ok(revision)
    }

    /// Writes `task` as [`TaskStore::write`] does, without telling the observer: the caller
    /// tells it ([`TaskStore::told_stored`]) once what came before is told.
    async fn write_untold(
        &self,
        cell: &TaskCell,
        task: &Task,
        answered: Option<&str>,
        expected: u64,
        step: backend::TurnStep<'_>,
    ) -> Result<u64, WriteError> {
        let Some(p) = self.0.persistence.get() else {
            return Ok(0);
        };
        let mut stored = StoredTask::new(task.clone(), &p.replica, answered.map(str::to_owned));
        stored.principal = cell.principal();
        cell.writes(&stored.write_id);
        p.backend.write_with_turn(&stored, expected, step).await
    }

    /// The begin of `task` (at `expected`, with the turn's `record`) queued to be committed
    /// with the turn's end, where the backend can and no observer waits to hear of it
    /// ([`backend::TaskBackend::begin_later`]): its outcome once committed. `None`: the
    /// begin is written now.
    fn begin_later(
        &self,
        cell: &TaskCell,
        task: &Task,
        answered: Option<&str>,
        expected: u64,
        record: Option<&str>,
    ) -> Option<crate::stores::turn_writes::Pending<Result<backend::BeganLater, WriteError>>> {
        let p = self.0.persistence.get()?;
        if self
            .0
            .observer
            .get()
            .is_some_and(|observer| observer.watches(&task.id))
        {
            return None;
        }
        let mut stored = StoredTask::new(task.clone(), &p.replica, answered.map(str::to_owned));
        stored.principal = cell.principal();
        cell.writes(&stored.write_id);
        p.backend.begin_later(&stored, expected, record)
    }

    fn told_stored(&self, task: &Task, revision: u64) {
        if let Some(observer) = self.0.observer.get() {
            observer.stored(task, revision);
        }
    }

    /// Task `task_id` as the backend holds it (within [`READ_TIMEOUT`]).
    async fn load(&self, task_id: &str) -> Result<Option<Versioned>, BackendError> {
        let Some(p) = self.0.persistence.get() else {
            return Ok(None);
        };
        tokio::time::timeout(READ_TIMEOUT, p.backend.load(task_id))
            .await
            .unwrap_or_else(|_| {
                Err(BackendError::new(
                    "the task backend",
                    format!("no answer within {READ_TIMEOUT:?}"),
                ))
            })
    }

    /// This replica's name, once a backend is attached.
    fn replica(&self) -> Option<&str> {
        self.0.persistence.get().map(|p| p.replica.as_str())
    }

    fn replicas(&self) -> Option<&replicas::Replicas> {
        self.0.persistence.get()?.replicas.as_ref()
    }

    /// The relay to other replicas, when the backend is shared.
    fn relay(&self) -> Option<&Relay> {
        self.replicas().map(replicas::Replicas::relay)
    }
}

#[cfg(test)]
mod tests;
