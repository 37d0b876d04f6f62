//! Push notifications (A2A §9): a task's webhooks, and the delivery of each state of the
//! task to them.
//!
//! - **Configs** ([`Push::create`], [`get`](Push::get), [`list`](Push::list),
//!   [`delete`](Push::delete), and inline in `SendMessage` with [`Push::set_up`]) belong to the
//!   task's owner, are checked by the SSRF guard ([`guard`]) when set up and again at each
//!   delivery, and are kept with the task in its store ([`record`]: memory, SQLite).
//! - **Delivery.** Every state of a task the store keeps (the task store tells
//!   [`Push`] of each write) is POSTed to each of its webhooks as an A2A `StreamResponse`
//!   holding the task as it stands (`{"task": …}`, history left out), in the order stored, at
//!   least once: tried again with backoff until `PUSH_RETRY_FOR` ([`send`]), then given up,
//!   counted, logged and shown in `/healthz` ([`delivery`]). Queues are bounded in bytes ([`queues`]); a
//!   slow or dead webhook holds up neither a turn (the store only queues) nor another
//!   webhook's deliveries.
//! - **Restarts.** Each webhook's record says the last state it took; a runtime starting on a
//!   store that outlives it (SQLite) delivers the task as it stands to every webhook that had
//!   not taken it. States stored while the runtime was down, or between the last delivered one
//!   and the one standing, are not sent one by one: the one standing holds them.

mod delivery;
pub mod guard;
mod queues;
pub mod send;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use daedalus_contract::{
    ListPushConfigsRequest, ListPushConfigsResponse, Task, TaskPushNotificationConfig,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::config::push::PushSettings;
use crate::platform::identity::Caller;
use crate::platform::metrics::Metrics;
use crate::stores::push::{NatsKvPush, PushBackend, PushRecord, Webhook};
use crate::stores::tasks::{StoreObserver, TaskStore, WriteError};
use guard::GuardedResolver;
use queues::Queues;
use send::Sender;

/// Webhooks one task may have.
pub const MAX_WEBHOOKS: usize = 16;
/// The largest webhook config taken (its JSON), in bytes.
pub const MAX_CONFIG_BYTES: usize = 8 * 1024;
/// Webhook configs a page of `ListTaskPushNotificationConfigs` holds at most.
const MAX_PAGE: usize = 100;
/// How many times a webhook change is tried against a store that changed under it.
const WRITE_ATTEMPTS: usize = 8;

/// Why a push operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("push notifications are not supported (the card says pushNotifications: false)")]
    NotSupported,
    #[error("task {0} not found")]
    TaskNotFound(String),
    #[error("push notification config {id} of task {task_id} not found")]
    ConfigNotFound { task_id: String, id: String },
    #[error("invalid push notification config: {0}")]
    Invalid(String),
    #[error("the push notification configs could not be stored: {0}")]
    Unavailable(String),
}

/// What deliveries came to, since the start (for `/healthz` and the metrics).
#[derive(Debug, Default)]
struct Counts {
    delivered: AtomicU64,
    retried: AtomicU64,
    gave_up: AtomicU64,
    dropped: AtomicU64,
    superseded: AtomicU64,
    owed: AtomicU64,
}

/// The last delivery given up, as `/healthz` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failure {
    pub task_id: String,
    pub webhook: String,
    pub why: String,
    pub at: String,
}

/// Push notifications, as `/healthz` shows them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PushHealth {
    pub enabled: bool,
    /// States waiting for their webhooks (bodies and markers), and their bytes
    /// (`PUSH_QUEUE_BYTES` bounds them).
    pub waiting: usize,
    pub waiting_bytes: usize,
    /// Of the states waiting, those owed as their task stands (markers).
    pub waiting_owed: usize,
    /// Deliveries under way (at most 8 a host), and their bodies' bytes.
    pub delivering: usize,
    pub delivering_bytes: usize,
    pub delivered: u64,
    pub retried: u64,
    /// Deliveries given up: the webhook refused, stayed down past `PUSH_RETRY_FOR`, is no
    /// longer allowed, or the state could not wait (`dropped`).
    pub gave_up: u64,
    /// States given up because not even a marker of them fitted in the queue's bytes (counted
    /// in `gave_up` too).
    pub dropped: u64,
    /// States never sent because a later state of their task, waiting for the same webhook,
    /// replaced them at the queue's bound (nothing is lost: the later state holds them).
    pub superseded: u64,
    /// States that waited as a marker instead of their body, at a bound: their webhook got
    /// (or gets) the task as it stands when its turn came, read from the task store.
    pub owed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Failure>,
}

/// A task's webhooks as this replica holds them, and the revision of their record.
#[derive(Debug, Clone)]
struct Entry {
    record: PushRecord,
    revision: u64,
}

/// The push notification service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Push(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    settings: PushSettings,
    tasks: TaskStore,
    metrics: Arc<Metrics>,
    /// Every task's webhooks, by task id.
    book: Mutex<HashMap<String, Entry>>,
    backend: OnceLock<Arc<dyn PushBackend>>,
    queues: Mutex<Queues>,
    sender: Sender,
    counts: Counts,
    last_failure: Mutex<Option<Failure>>,
    workers: TaskTracker,
    stop: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Push {
    /// The service, told of every write of `tasks`.
    pub fn new(mut settings: PushSettings, tasks: &TaskStore, metrics: Arc<Metrics>) -> Self {
        let allow = Arc::new(settings.allow.clone());
        let guarded = reqwest::Client::builder()
            .dns_resolver(GuardedResolver::new(allow))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(settings.timeout)
            .timeout(settings.timeout)
            .user_agent(concat!("daedalus-runtime/", env!("CARGO_PKG_VERSION")))
            .build();
        let http = match guarded {
            Ok(http) => http,
            Err(e) => {
                // Never deliver through a client without the guard: push is off instead.
                tracing::error!(error = %e, "push: the delivery client could not be built; push notifications are off");
                settings.enabled = false;
                reqwest::Client::new()
            }
        };
        let push = Self(Arc::new(Inner {
            sender: Sender::new(http, settings.retry_for),
            queues: Mutex::new(Queues::new(settings.queue_bytes)),
            settings,
            tasks: tasks.clone(),
            metrics,
            book: Mutex::default(),
            backend: OnceLock::new(),
            counts: Counts::default(),
            last_failure: Mutex::default(),
            workers: TaskTracker::new(),
            stop: CancellationToken::new(),
        }));
        if push.0.settings.enabled {
            tasks.observe(Arc::new(Observer(Arc::downgrade(&push.0))));
        }
        push
    }

    /// Whether push notifications are served.
    pub fn enabled(&self) -> bool {
        self.0.settings.enabled
    }

    /// From now on keeps webhooks in `backend` too, after reading back those kept: each
    /// webhook that had not taken the state its task stands in (as this replica last wrote
    /// it, read from the task store when memory does not hold it) gets it now.
    pub async fn attach(&self, backend: Arc<dyn PushBackend>) -> Result<usize, PushError> {
        let kept = backend
            .all()
            .await
            .map_err(|e| PushError::Unavailable(e.to_string()))?;
        let _ = self.0.backend.set(backend);
        let mut owed = 0;
        for (record, revision) in kept {
            let task_id = record.task_id.clone();
            lock(&self.0.book).insert(task_id.clone(), Entry { record, revision });
            if let Some((task, stored_at)) = self.0.tasks.written_here_or_kept(&task_id).await {
                owed += self.0.stored(&task, stored_at, true);
            }
        }
        Ok(owed)
    }

    /// On a bucket shared by replicas: keeps webhooks beside the tasks, delivers what a
    /// restart left owed, and from now on follows the records every replica writes, so this
    /// one knows the webhooks of any task it stores a state of.
    pub async fn share(&self, backend: NatsKvPush) -> Result<usize, PushError> {
        let owed = self.attach(Arc::new(backend.clone())).await?;
        let inner = Arc::downgrade(&self.0);
        let stop = self.0.stop.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                let followed = match backend.follow().await {
                    Ok(changes) => {
                        pause = Duration::from_millis(100);
                        let mut changes = std::pin::pin!(changes);
                        loop {
                            tokio::select! {
                                () = stop.cancelled() => return,
                                change = futures::StreamExt::next(&mut changes) => match change {
                                    Some((record, revision)) => match inner.upgrade() {
                                        Some(inner) => inner.keep(record, revision),
                                        None => return,
                                    },
                                    None => break,
                                },
                            }
                        }
                        "the watch ended".to_owned()
                    }
                    Err(e) => e.to_string(),
                };
                tracing::warn!(
                    error = followed,
                    "push: following the webhooks of other replicas; watching again"
                );
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        });
        Ok(owed)
    }

    /// Stops delivering (shutdown): deliveries in flight stop at once; what was not
    /// delivered is delivered after a restart, from the store.
    pub async fn stop(&self, grace: Duration) {
        self.0.stop.cancel();
        self.0.workers.close();
        let _ = tokio::time::timeout(grace, self.0.workers.wait()).await;
    }

    /// Push notifications as `/healthz` shows them.
    pub fn health(&self) -> PushHealth {
        let queues = lock(&self.0.queues);
        let c = &self.0.counts;
        let (delivering, delivering_bytes) = queues.delivering();
        PushHealth {
            enabled: self.0.settings.enabled,
            waiting: queues.len(),
            waiting_bytes: queues.bytes(),
            waiting_owed: queues.markers(),
            delivering,
            delivering_bytes,
            delivered: c.delivered.load(Ordering::Relaxed),
            retried: c.retried.load(Ordering::Relaxed),
            gave_up: c.gave_up.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            superseded: c.superseded.load(Ordering::Relaxed),
            owed: c.owed.load(Ordering::Relaxed),
            last_failure: lock(&self.0.last_failure).clone(),
        }
    }

    /// `CreateTaskPushNotificationConfig`: a webhook for task `task_id` (one with the same
    /// id is replaced). Answers it as kept, its id named when the client left it empty.
    pub async fn create(
        &self,
        caller: &Caller,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, PushError> {
        self.visible(caller, task_id).await?;
        self.add(caller, task_id, config).await
    }

    /// The webhook of a `SendMessage` configuration, set up before its turn begins (a new
    /// task is the caller's; an existing one was checked by the send).
    pub async fn set_up(
        &self,
        caller: &Caller,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, PushError> {
        self.add(caller, task_id, config).await
    }

    /// Drops the webhooks set up for a task whose turn never began.
    pub async fn forget(&self, task_id: &str) {
        let _ = self
            .0
            .change(task_id, None, |record| {
                record.webhooks.clear();
                Ok(())
            })
            .await;
    }

    /// `GetTaskPushNotificationConfig`.
    pub async fn get(
        &self,
        caller: &Caller,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, PushError> {
        self.visible(caller, task_id).await?;
        lock(&self.0.book)
            .get(task_id)
            .and_then(|e| e.record.webhook(id))
            .map(|w| w.config.clone())
            .ok_or_else(|| PushError::ConfigNotFound {
                task_id: task_id.to_owned(),
                id: id.to_owned(),
            })
    }

    /// `ListTaskPushNotificationConfigs`: a page of the task's webhooks (the token is the
    /// index of the next one).
    pub async fn list(
        &self,
        caller: &Caller,
        request: &ListPushConfigsRequest,
    ) -> Result<ListPushConfigsResponse, PushError> {
        self.visible(caller, &request.task_id).await?;
        let size = match request.page_size {
            None | Some(0) => MAX_PAGE,
            Some(n) if n < 0 => {
                return Err(PushError::Invalid("pageSize must not be negative".into()));
            }
            Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
        };
        let start = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => token
                .parse::<usize>()
                .map_err(|_| PushError::Invalid(format!("pageToken {token:?} is not ours")))?,
        };
        let all: Vec<TaskPushNotificationConfig> = lock(&self.0.book)
            .get(&request.task_id)
            .map(|e| e.record.webhooks.iter().map(|w| w.config.clone()).collect())
            .unwrap_or_default();
        let end = (start + size).min(all.len());
        let configs = all.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
        Ok(ListPushConfigsResponse {
            configs,
            next_page_token: if end < all.len() {
                end.to_string()
            } else {
                String::new()
            },
        })
    }

    /// `DeleteTaskPushNotificationConfig`: done also when there was none (deleting twice is
    /// not an error). What waited for the webhook is dropped.
    pub async fn delete(&self, caller: &Caller, task_id: &str, id: &str) -> Result<(), PushError> {
        self.visible(caller, task_id).await?;
        self.0
            .change(task_id, None, |record| {
                record.webhooks.retain(|w| w.config.id != id);
                Ok(())
            })
            .await?;
        lock(&self.0.queues).forget(&(task_id.to_owned(), id.to_owned()));
        Ok(())
    }

    async fn visible(&self, caller: &Caller, task_id: &str) -> Result<(), PushError> {
        if !self.0.settings.enabled {
            return Err(PushError::NotSupported);
        }
        match self.0.tasks.find(task_id, caller).await {
            Some(_) => Ok(()),
            None => Err(PushError::TaskNotFound(task_id.to_owned())),
        }
    }

    async fn add(
        &self,
        caller: &Caller,
        task_id: &str,
        mut config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, PushError> {
        if !self.0.settings.enabled {
            return Err(PushError::NotSupported);
        }
        guard::check_url(&config.url, &self.0.settings.allow)
            .map_err(|e| PushError::Invalid(e.to_string()))?;
        if config.id.is_empty() {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        config.task_id = task_id.to_owned();
        config.tenant = None;
        let size = serde_json::to_vec(&config).map_or(usize::MAX, |v| v.len());
        if size > MAX_CONFIG_BYTES {
            return Err(PushError::Invalid(format!(
                "the config is {size} bytes; at most {MAX_CONFIG_BYTES} are taken"
            )));
        }
        let kept = config.clone();
        self.0
            .change(task_id, caller.principal().cloned(), move |record| {
                let count = record.webhooks.len();
                match record
                    .webhooks
                    .iter_mut()
                    .find(|w| w.config.id == config.id)
                {
                    Some(same) => same.config = config.clone(),
                    None if count >= MAX_WEBHOOKS => {
                        return Err(PushError::Invalid(format!(
                            "a task has at most {MAX_WEBHOOKS} push notification configs"
                        )));
                    }
                    None => record.webhooks.push(Webhook {
                        config: config.clone(),
                        delivered: 0,
                    }),
                }
                Ok(())
            })
            .await?;
        Ok(kept)
    }
}

impl Inner {
    /// Changes task `task_id`'s record by `edit`, in memory and (compare-and-set) in the
    /// backend.
    async fn change(
        &self,
        task_id: &str,
        principal: Option<crate::platform::identity::Principal>,
        edit: impl Fn(&mut PushRecord) -> Result<(), PushError>,
    ) -> Result<(), PushError> {
        let mut current = lock(&self.book)
            .get(task_id)
            .map(|e| (e.record.clone(), e.revision));
        for _ in 0..WRITE_ATTEMPTS {
            let (mut record, revision) = current
                .take()
                .unwrap_or_else(|| (PushRecord::new(task_id, principal.clone()), 0));
            edit(&mut record)?;
            let Some(backend) = self.backend.get() else {
                self.keep(record, 0);
                return Ok(());
            };
            match backend.write(&record, revision).await {
                Ok(revision) => {
                    self.keep(record, revision);
                    return Ok(());
                }
                // Written elsewhere since: read it again and redo the change on it.
                Err(WriteError::Conflict) => {
                    current = backend
                        .load(task_id)
                        .await
                        .map_err(|e| PushError::Unavailable(e.to_string()))?;
                }
                Err(e) => return Err(PushError::Unavailable(e.to_string())),
            }
        }
        Err(PushError::Unavailable(
            "the configs kept changing elsewhere".to_owned(),
        ))
    }

    /// Holds `record` as stored at `revision`, unless a later revision is held already.
    fn keep(&self, record: PushRecord, revision: u64) {
        let mut book = lock(&self.book);
        let newer = book
            .get(&record.task_id)
            .is_some_and(|held| revision != 0 && held.revision > revision);
        if newer {
            return;
        }
        if record.webhooks.is_empty() {
            book.remove(&record.task_id);
        } else {
            book.insert(record.task_id.clone(), Entry { record, revision });
        }
    }
}

/// What the task store tells: each state it stores.
#[derive(Debug)]
struct Observer(std::sync::Weak<Inner>);

impl StoreObserver for Observer {
    fn stored(&self, task: &Task, revision: u64) {
        if let Some(inner) = self.0.upgrade() {
            inner.stored(task, revision, false);
        }
    }

    fn watches(&self, task_id: &str) -> bool {
        self.0
            .upgrade()
            .is_some_and(|inner| lock(&inner.book).contains_key(task_id))
    }
}

#[cfg(test)]
mod tests;
