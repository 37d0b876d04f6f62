//! The runtime's tasks, for every binding: each task as it stands (status, artifacts, its own
//! messages as history), what the contract binding's replay needs, and a per-task event log
//! with sequence numbers that subscribers read ([`cell`]).
//!
//! The store is bounded three ways: by count (`MAX_TASKS`), by bytes (`TASK_MEMORY`, every
//! task's history, artifacts and log counted) and by age (`TASK_TTL`, since the task last
//! changed). The least recently changed tasks go first; a task in use (a turn runs it, a
//! subscriber or a request holds it) is never dropped. [`list`] answers `ListTasks`.

pub mod backend;
pub mod cell;
pub mod follow;
pub mod list;
pub mod nats_kv;
pub mod relay;
pub(crate) mod size;
pub mod sqlite;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use daedalus_contract::{Task, TaskState};

pub use backend::{BackendError, StoredTask, TaskBackend};
pub use cell::{SubscribeRefusal, Subscription, TaskCell, TaskRecord};
pub use follow::Follow;
pub use list::{ListError, ListPage, ListQuery};
pub use nats_kv::NatsKvTasks;
pub use relay::{Relay, RelayHandler, Standing};
pub use sqlite::SqliteTasks;

/// What the store may hold.
#[derive(Debug, Clone, Copy)]
pub struct StoreLimits {
    /// Tasks kept (`MAX_TASKS`).
    pub max_tasks: usize,
    /// Bytes they may hold (`TASK_MEMORY`).
    pub max_bytes: usize,
    /// How long a task is kept after it last changed (`TASK_TTL`).
    pub ttl: Duration,
}

/// Tasks by id.
#[derive(Debug)]
pub struct TaskStore {
    limits: StoreLimits,
    inner: Mutex<Inner>,
    /// Where tasks are kept beyond memory, once attached at startup.
    persistence: OnceLock<Persistence>,
}

#[derive(Debug)]
struct Persistence {
    backend: Arc<dyn TaskBackend>,
    /// This replica's name (`REPLICA_ID`).
    replica: String,
    /// How replicas sharing the backend reach each other (NATS KV only).
    relay: Option<Relay>,
}

#[derive(Debug, Default)]
struct Inner {
    cells: HashMap<String, Entry>,
    /// Task ids by the stamp of their last change, oldest first.
    by_age: BTreeMap<u64, String>,
    clock: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    cell: Arc<TaskCell>,
    bytes: usize,
    stamp: u64,
    changed: Instant,
}

impl TaskStore {
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            limits: StoreLimits {
                max_tasks: limits.max_tasks.max(1),
                ..limits
            },
            inner: Mutex::default(),
            persistence: OnceLock::new(),
        }
    }

    /// From now on keeps tasks in `backend` too, as replica `replica`, after reading back the
    /// most recent ones: those this replica left running become `failed`. Answers how many did.
    pub async fn attach(
        &self,
        backend: Arc<dyn TaskBackend>,
        replica: &str,
        relay: Option<Relay>,
    ) -> Result<usize, BackendError> {
        let recent = backend.recent(self.limits.max_tasks).await?;
        let mut failed = 0;
        // Oldest first, so the newest are the most recent in memory too.
        for stored in recent.into_iter().rev() {
            let task = match backend::failed_by_restart(&stored, replica) {
                Some(task) => {
                    let failed_task = StoredTask {
                        task,
                        owner: replica.to_owned(),
                        updated_ms: backend::now_ms(),
                    };
                    backend.save(&failed_task).await?;
                    failed += 1;
                    failed_task.task
                }
                None => stored.task,
            };
            self.restore(task);
        }
        let _ = self.persistence.set(Persistence {
            backend,
            replica: replica.to_owned(),
            relay,
        });
        Ok(failed)
    }

    /// Writes task `task_id` as it stands to the backend, if there is one. A write that fails
    /// is logged: the task stays in memory, and the next write tries again.
    pub async fn persist(&self, task_id: &str) {
        let Some(persistence) = self.persistence.get() else {
            return;
        };
        let Some(task) = self.existing(task_id).and_then(|cell| cell.task()) else {
            return;
        };
        let stored = StoredTask {
            task,
            owner: persistence.replica.clone(),
            updated_ms: backend::now_ms(),
        };
        if let Err(e) = persistence.backend.save(&stored).await {
            tracing::warn!(task_id, error = %e, "could not write the task to its backend");
        }
    }

    /// Tells other replicas the end of task `task_id`'s turn, held back until the backend had
    /// it (so a replica that hears the end and then reads the task finds it ended).
    pub fn tell_end(&self, task_id: &str) {
        let (Some(relay), Some(cell)) = (self.relay(), self.existing(task_id)) else {
            return;
        };
        if let Some((seq, event)) = cell.take_end() {
            relay.publish(task_id, seq, &event);
        }
    }

    /// The relay to other replicas, when the backend is shared.
    pub fn relay(&self) -> Option<&Relay> {
        self.persistence.get().and_then(|p| p.relay.as_ref())
    }

    /// The cell of `task_id`: in memory, else read back from the backend (a task from before a
    /// restart, or one another replica ran). A task not running here and not finished is read
    /// again, since another replica may have moved it on.
    pub async fn find(&self, task_id: &str) -> Option<Arc<TaskCell>> {
        let held = self.existing(task_id);
        let settled = held.as_ref().is_some_and(|cell| {
            cell.is_running() || cell.state().is_some_and(TaskState::is_terminal)
        });
        if settled {
            return held;
        }
        let Some(persistence) = self.persistence.get() else {
            return held;
        };
        match persistence.backend.load(task_id).await {
            Ok(Some(stored)) => {
                if let Some(cell) = held {
                    cell.refresh(stored.task);
                    return Some(cell);
                }
                self.restore(stored.task);
                self.existing(task_id)
            }
            Ok(None) => held,
            Err(e) => {
                tracing::warn!(task_id, error = %e, "could not read the task from its backend");
                held
            }
        }
    }

    /// The task as it stands and its events from here on, wherever its turn runs.
    pub async fn follow(&self, task_id: &str) -> Result<(Task, Follow), SubscribeRefusal> {
        let cell = self.find(task_id).await.ok_or(SubscribeRefusal::Unknown)?;
        let task = cell.task().ok_or(SubscribeRefusal::Unknown)?;
        let elsewhere = !cell.is_running()
            && !task.status.state.is_terminal()
            && !task.status.state.is_interrupted();
        match self.relay() {
            Some(relay) if elsewhere => {
                // Subscribe first, then ask: nothing falls between the two.
                let events = relay.events(task_id).await;
                match (events, relay.ask_now(task_id).await) {
                    (Some(events), Some(standing)) => {
                        let remote = follow::RemoteFollow::new(
                            task_id,
                            relay.clone(),
                            events,
                            standing.seq,
                            standing.task.clone(),
                        );
                        Ok((standing.task, Follow::Remote(Box::new(remote))))
                    }
                    // No replica runs it: it is over, whatever the store last heard.
                    _ => Ok((follow::orphaned(task), Follow::Ended)),
                }
            }
            _ => {
                let (task, subscription) = cell.subscribe()?;
                Ok((task, Follow::Local(subscription)))
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cell of `task_id`, created empty if the task is new.
    pub fn cell(&self, task_id: &str) -> Arc<TaskCell> {
        let mut inner = self.lock();
        if let Some(entry) = inner.cells.get(task_id) {
            return Arc::clone(&entry.cell);
        }
        let cell = Arc::new(TaskCell::default());
        inner.insert(task_id, Arc::clone(&cell));
        inner.evict(&self.limits);
        cell
    }

    /// The cell of `task_id`, if the store holds the task.
    pub fn existing(&self, task_id: &str) -> Option<Arc<TaskCell>> {
        let mut inner = self.lock();
        inner.evict(&self.limits);
        inner.cells.get(task_id).map(|e| Arc::clone(&e.cell))
    }

    /// Puts back a task read from elsewhere (a backend at startup), unless one of that id is
    /// held.
    pub fn restore(&self, task: Task) {
        let mut inner = self.lock();
        if inner.cells.contains_key(&task.id) {
            return;
        }
        let id = task.id.clone();
        let cell = Arc::new(TaskCell::restored(task));
        let bytes = cell.approx_bytes();
        inner.insert(&id, cell);
        inner.resize(&id, bytes);
        inner.evict(&self.limits);
    }

    /// Task `task_id` changed: it counts as recent again, its size is taken anew, and old
    /// tasks are dropped until the limits hold.
    pub fn touch(&self, task_id: &str) {
        let mut inner = self.lock();
        let Some(bytes) = inner.cells.get(task_id).map(|e| e.cell.approx_bytes()) else {
            return;
        };
        inner.resize(task_id, bytes);
        inner.evict(&self.limits);
    }

    /// Bytes the tasks hold, as last taken.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How many tasks the store holds.
    pub fn len(&self) -> usize {
        self.lock().cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One page of the tasks that `query` selects, most recently changed status first.
    pub fn list(&self, query: &ListQuery) -> Result<ListPage, ListError> {
        let cells: Vec<Arc<TaskCell>> = {
            let mut inner = self.lock();
            inner.evict(&self.limits);
            inner.cells.values().map(|e| Arc::clone(&e.cell)).collect()
        };
        list::page(&cells, query)
    }
}

impl Inner {
    fn insert(&mut self, task_id: &str, cell: Arc<TaskCell>) {
        self.clock += 1;
        self.by_age.insert(self.clock, task_id.to_owned());
        self.cells.insert(
            task_id.to_owned(),
            Entry {
                cell,
                bytes: 0,
                stamp: self.clock,
                changed: Instant::now(),
            },
        );
    }

    /// Task `task_id` now holds `bytes`, and changed now.
    fn resize(&mut self, task_id: &str, bytes: usize) {
        self.clock += 1;
        let clock = self.clock;
        let Some(entry) = self.cells.get_mut(task_id) else {
            return;
        };
        let before = std::mem::replace(&mut entry.bytes, bytes);
        let stamp = std::mem::replace(&mut entry.stamp, clock);
        entry.changed = Instant::now();
        self.bytes = self.bytes - before + bytes;
        self.by_age.remove(&stamp);
        self.by_age.insert(clock, task_id.to_owned());
    }

    /// Drops the least recently changed tasks nobody holds until the limits hold, and every
    /// task older than the TTL that nobody holds.
    fn evict(&mut self, limits: &StoreLimits) {
        let mut kept = Vec::new();
        while let Some((&stamp, id)) = self.by_age.first_key_value() {
            let Some(entry) = self.cells.get(id) else {
                self.by_age.remove(&stamp);
                continue;
            };
            let over = self.cells.len() > limits.max_tasks || self.bytes > limits.max_bytes;
            let expired = entry.changed.elapsed() > limits.ttl;
            if !over && !expired {
                break;
            }
            let id = id.clone();
            self.by_age.remove(&stamp);
            if Arc::strong_count(&entry.cell) > 1 {
                kept.push((stamp, id));
            } else if let Some(entry) = self.cells.remove(&id) {
                self.bytes -= entry.bytes;
            }
        }
        self.by_age.extend(kept);
    }
}

#[cfg(test)]
mod tests;
