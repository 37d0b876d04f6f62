//! Replicas sharing one NATS KV task store, and what keeps their stories the same:
//!
//! - **The mirror.** Every replica watches the whole bucket (one ordered watch: every task
//!   write and every lease renewal, in the order the bucket stored them) and takes each task
//!   write into memory ([`TaskStore::absorb`]): `GetTask`, `ListTasks` and subscribers read
//!   the same revisions on every replica, milliseconds after they are stored.
//!   [`Replicas::catch_up`] waits until the watch has delivered everything stored before it
//!   was called, so a `ListTasks` on one replica shows what any replica stored first.
//! - **Leases.** Every replica renews its lease (`r.<token of REPLICA_ID>`) every
//!   lease / 5. A replica whose lease is not renewed for a whole lease (or was deleted: it
//!   left) is gone, and a surviving replica resumes the turns it was running from their records
//!   (durable turns: the turn service begins each again by compare-and-set, so one survivor
//!   wins), and fails those it kept no record of, by compare-and-set (so one failure is
//!   stored, and never over an end the task stored first), with a message saying the replica
//!   was lost. From a crash to `FAILED` in the store: at most the lease and
//!   one renewal period, whatever name the replacement has. On each renewal a replica also
//!   settles its own leftovers: a task the store says it runs that no turn here runs (an end
//!   it could not store while NATS was away) is stored as memory has it, or failed.
//! - **The relay** ([`relay`]): live events of running turns, and requests to the replica
//!   running a task.
//!
//! Each of the three runs on a loop of its own, started again when it fails; `/healthz`
//! shows whether the lease is renewed and the watch live.

mod book;
pub mod relay;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use daedalus_contract::TaskState;
use daedalus_contract::token::token;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::TaskStore;
use super::backend::{self, BackendError, StoredTask, Versioned};
use super::nats_kv::{NatsKvTasks, TASK_KEYS};
use book::Book;
pub use relay::{Answers, AskError, Feed, Now, Relay, RelayedEvent, Stopped};

/// The prefix of lease keys.
const LEASE_KEYS: &str = "r.";
/// How long joining waits for the bucket's contents.
const SNAPSHOT_WAIT: Duration = Duration::from_mins(1);
/// How long a `ListTasks` waits for the watch to deliver what was stored before it.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);
/// How long a failed loop waits before it starts again.
const RESTART_PAUSE: Duration = Duration::from_millis(500);

/// The head of a task's entry: who wrote it, as which write, and the task's id and state,
/// read without reading the rest of the task.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    #[serde(default, borrow)]
    task_id: Cow<'a, str>,
    #[serde(borrow)]
    owner: Cow<'a, str>,
    #[serde(default, borrow)]
    write_id: Cow<'a, str>,
    #[serde(default)]
    principal: Option<crate::platform::identity::Principal>,
    #[serde(borrow)]
    task: TaskHead<'a>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskHead<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default, borrow)]
    context_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: StatusHead<'a>,
}

#[derive(Debug, Deserialize)]
struct StatusHead<'a> {
    #[serde(borrow)]
    state: Cow<'a, str>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
}

impl<'a> Head<'a> {
    fn read(bytes: &'a [u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// What a lease entry holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lease {
    replica: String,
    /// This process (a replica restarted under the same name is another instance).
    instance: String,
    lease_ms: u64,
}

/// How a replica shares the store.
#[derive(Debug, Clone, Copy)]
pub struct LeaseConfig {
    /// How long a replica's lease lasts unrenewed (`REPLICA_LEASE`).
    pub lease: Duration,
}

impl LeaseConfig {
    /// How often the lease is renewed.
    pub fn beat(&self) -> Duration {
        (self.lease / 5).max(Duration::from_millis(100))
    }
}

/// The replicas' state as `/healthz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaHealth {
    /// This replica's name.
    pub replica: String,
    /// Its lease was renewed within the lease.
    pub lease_held: bool,
    /// Its watch of the bucket is live (its own renewals arrive through it).
    pub watch_live: bool,
    /// Milliseconds since the lease was last renewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_renewed_ms_ago: Option<u64>,
}

impl ReplicaHealth {
    pub fn ok(&self) -> bool {
        self.lease_held && self.watch_live
    }
}

/// This replica's part in a shared store.
#[derive(Debug)]
pub(crate) struct Replicas(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    kv: NatsKvTasks,
    relay: Relay,
    me: String,
    me_token: String,
    instance: String,
    config: LeaseConfig,
    book: Mutex<Book>,
    /// The last revision of the bucket the watch delivered.
    applied: watch::Sender<u64>,
    /// When this replica last renewed its lease.
    renewed: Mutex<Option<Instant>>,
    /// Replicas whose tasks are being failed now (tokens).
    failing: Mutex<std::collections::HashSet<String>>,
    /// Renewals have begun: a renewal of this name by another process is a duplicate.
    beating: AtomicBool,
    /// Stops the renewals (the replica leaves).
    leave: CancellationToken,
    /// Told when another replica's lease is deleted (it left).
    departed: tokio::sync::Notify,
}

/// Makes `store` one of the replicas sharing `kv`, as `replica`: reads the bucket into
/// memory, fails the tasks this replica's previous run left running, renews its lease, and
/// starts the watch, lease and relay loops. Answers how many tasks it failed.
pub(crate) async fn join(
    store: &TaskStore,
    kv: NatsKvTasks,
    replica: &str,
    config: LeaseConfig,
) -> Result<usize, BackendError> {
    let shared = Arc::new(Shared {
        relay: Relay::new(kv.client().clone(), kv.bucket()),
        me: replica.to_owned(),
        me_token: token(replica).into_owned(),
        instance: uuid::Uuid::new_v4().to_string(),
        config,
        book: Mutex::default(),
        applied: watch::Sender::new(0),
        renewed: Mutex::default(),
        failing: Mutex::default(),
        beating: AtomicBool::new(false),
        leave: CancellationToken::new(),
        departed: tokio::sync::Notify::new(),
        kv,
    });
    let watch = shared.snapshot(store).await?;
    store.set_persistence(
        Arc::new(shared.kv.clone()),
        replica,
        Some(Replicas(Arc::clone(&shared))),
    );
    let cut = shared.book().running_of(&shared.me_token);
    let failed = store
        .resume_or_fail(
            &cut,
            backend::RESTARTED,
            replica,
            super::ResumeCause::Restart,
        )
        .await;
    shared.renew().await.map_err(|e| shared.kv.fail(e))?;
    shared.beating.store(true, Ordering::SeqCst);
    spawn_supervised("the task store's watch", {
        let (shared, store) = (Arc::clone(&shared), store.clone());
        let mut first = Some(watch);
        move || {
            let (shared, store, watch) = (Arc::clone(&shared), store.clone(), first.take());
            async move { shared.mirror(&store, watch).await }
        }
    });
    spawn_supervised("the replica lease", {
        let (shared, store) = (Arc::clone(&shared), store.clone());
        move || {
            let (shared, store) = (Arc::clone(&shared), store.clone());
            async move { shared.beat(&store).await }
        }
    });
    spawn_supervised("the task relay", {
        let (shared, store) = (Arc::clone(&shared), store.clone());
        move || {
            let (shared, store) = (Arc::clone(&shared), store.clone());
            async move {
                let answers: Arc<dyn Answers> = Arc::new(store);
                shared
                    .relay
                    .serve(&shared.me, answers)
                    .await
                    .map_err(LoopStopped::Relay)
            }
        }
    });
    Ok(failed)
}

/// A transport's error, kept as the source of the loop's.
type Source = Box<dyn std::error::Error + Send + Sync>;

/// Why one of a replica's loops stopped (it is started again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoopStopped {
    #[error("the watch of the task bucket failed: {0}")]
    Watch(#[source] Source),
    #[error("the watch of the task bucket ended")]
    WatchEnded,
    #[error("this replica's lease could not be written: {0}")]
    Lease(#[source] Source),
    #[error("the task relay stopped: {0}")]
    Relay(#[source] Source),
}

/// Runs the loop `make` starts, starting it again whenever it ends with an error or panics,
/// until it ends well or the process ends.
pub(crate) fn spawn_supervised<F, Fut, E>(what: &'static str, mut make: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match tokio::spawn(make()).await {
                Ok(Ok(())) => return,
                Ok(Err(why)) => tracing::error!(what, error = %why, "stopped; starting it again"),
                Err(e) => tracing::error!(what, error = %e, "failed; starting it again"),
            }
            tokio::time::sleep(RESTART_PAUSE).await;
        }
    });
}

impl Replicas {
    pub(crate) fn relay(&self) -> &Relay {
        &self.0.relay
    }

    /// Waits (up to [`CATCH_UP_WAIT`]) until the watch has delivered every write the bucket
    /// stored before this call.
    pub(crate) async fn catch_up(&self) {
        let info = tokio::time::timeout(CATCH_UP_WAIT, self.0.kv.kv().stream.get_info()).await;
        let Ok(Ok(info)) = info else {
            return;
        };
        let target = info.state.last_sequence;
        let mut applied = self.0.applied.subscribe();
        if tokio::time::timeout(CATCH_UP_WAIT, applied.wait_for(|at| *at >= target))
            .await
            .is_err()
        {
            tracing::warn!(
                target,
                "the task store's watch is behind; listing what it has"
            );
        }
    }

    pub(crate) fn health(&self) -> ReplicaHealth {
        let now = Instant::now();
        let renewed = *lock(&self.0.renewed);
        let ago = renewed.map(|at| now.saturating_duration_since(at));
        ReplicaHealth {
            replica: self.0.me.clone(),
            lease_held: ago.is_some_and(|ago| ago <= self.0.config.lease),
            watch_live: self.0.book().is_live(self.0.config.beat(), now),
            lease_renewed_ms_ago: ago.map(|ago| u64::try_from(ago.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// Stops renewing the lease and deletes it: the replica has left.
    pub(crate) async fn leave(&self) {
        self.0.leave.cancel();
        let key = format!("{LEASE_KEYS}{}", self.0.me_token);
        if let Err(e) = self.0.kv.kv().delete(key).await {
            tracing::warn!(error = %e, "could not delete this replica's lease");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn book(&self) -> MutexGuard<'_, Book> {
        lock(&self.book)
    }

    /// Opens the watch and reads the bucket as it stands through it; answers the watch, to go
    /// on from there.
    async fn snapshot(&self, store: &TaskStore) -> Result<kv::Watch, BackendError> {
        let kv = self.kv.kv();
        let info = kv.stream.get_info().await.map_err(|e| self.kv.fail(e))?;
        let mut watch = kv
            .watch_with_history(">")
            .await
            .map_err(|e| self.kv.fail(e))?;
        if info.state.messages == 0 {
            return Ok(watch);
        }
        let deadline = tokio::time::Instant::now() + SNAPSHOT_WAIT;
        loop {
            let entry = tokio::time::timeout_at(deadline, watch.next())
                .await
                .map_err(|_| self.kv.fail("the bucket's contents did not arrive in time"))?
                .ok_or_else(|| self.kv.fail("the bucket's watch ended"))?
                .map_err(|e| self.kv.fail(e))?;
            let caught_up = entry.delta == 0;
            self.on_entry(store, &entry);
            if caught_up {
                return Ok(watch);
            }
        }
    }

    /// Takes every entry the watch delivers, from `watch` or a new one from the revision
    /// after the last one taken, until it fails.
    async fn mirror(&self, store: &TaskStore, watch: Option<kv::Watch>) -> Result<(), LoopStopped> {
        let mut watch = if let Some(watch) = watch {
            watch
        } else {
            let from = *self.applied.borrow() + 1;
            self.kv
                .kv()
                .watch_all_from_revision(from)
                .await
                .map_err(|e| LoopStopped::Watch(e.into()))?
        };
        while let Some(entry) = watch.next().await {
            self.on_entry(store, &entry.map_err(|e| LoopStopped::Watch(e.into()))?);
        }
        Err(LoopStopped::WatchEnded)
    }

    /// One write of the bucket: a task into memory (and the running index), a lease into
    /// the book.
    fn on_entry(&self, store: &TaskStore, entry: &kv::Entry) {
        let now = Instant::now();
        if let Some(key) = entry.key.strip_prefix(LEASE_KEYS) {
            self.on_lease(key, entry, now);
        } else if entry.key.starts_with(TASK_KEYS) && entry.operation == kv::Operation::Put {
            self.on_task(store, entry);
        }
        self.applied.send_if_modified(|at| {
            let newer = entry.revision > *at;
            if newer {
                *at = entry.revision;
            }
            newer
        });
    }

    /// A task's entry: its owner and whether it runs into the book (from the entry's head,
    /// read without the task), then the whole task into memory if memory wants it.
    fn on_task(&self, store: &TaskStore, entry: &kv::Entry) {
        let Some(head) = Head::read(&entry.value) else {
            tracing::warn!(key = entry.key, "a stored task is unreadable; skipped");
            return;
        };
        let state = TaskState::parse_lenient(&head.task.status.state);
        let running = state.is_some_and(backend::running);
        let task_id = if head.task_id.is_empty() {
            &head.task.id
        } else {
            &head.task_id
        };
        self.book()
            .stored(task_id, &head.owner, &token(&head.owner), running);
        if let Some(state) = state {
            store.index(
                task_id,
                super::index::Entry {
                    principal: head.principal.clone(),
                    context_id: head.task.context_id.as_deref().map(str::to_owned),
                    state,
                    status_micros: super::list::micros_of(head.task.status.timestamp.as_deref()),
                    revision: entry.revision,
                },
            );
        }
        if !store.wants(task_id, entry.revision, &head.write_id) {
            return;
        }
        match daedalus_contract::read::from_slice::<StoredTask>(&entry.value) {
            Ok(stored) => store.absorb(Versioned {
                stored,
                revision: entry.revision,
            }),
            Err(e) => {
                tracing::warn!(key = entry.key, error = %e, "a stored task is unreadable; skipped");
            }
        }
    }

    fn on_lease(&self, key: &str, entry: &kv::Entry, now: Instant) {
        if entry.operation != kv::Operation::Put {
            self.book().left(key, now);
            self.departed.notify_one();
            return;
        }
        let Ok(lease) = serde_json::from_slice::<Lease>(&entry.value) else {
            return;
        };
        let mut book = self.book();
        if key == self.me_token {
            if lease.instance == self.instance {
                book.own_renewal(self.config.beat(), now);
            } else if self.beating.load(Ordering::SeqCst)
                && book.instance_of(key) != Some(lease.instance.as_str())
            {
                tracing::error!(
                    replica = self.me,
                    "another process renews this replica's lease: REPLICA_ID must differ between replicas"
                );
            }
        }
        book.renewed(
            key,
            Duration::from_millis(lease.lease_ms),
            &lease.instance,
            now,
        );
    }

    /// Renews this replica's lease.
    async fn renew(&self) -> Result<(), LoopStopped> {
        let lease = Lease {
            replica: self.me.clone(),
            instance: self.instance.clone(),
            lease_ms: u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX),
        };
        let body = serde_json::to_vec(&lease).map_err(|e| LoopStopped::Lease(e.into()))?;
        self.kv
            .kv()
            .put(format!("{LEASE_KEYS}{}", self.me_token), body.into())
            .await
            .map_err(|e| LoopStopped::Lease(e.into()))?;
        *lock(&self.renewed) = Some(Instant::now());
        Ok(())
    }

    /// Renews the lease every beat and fails the tasks of replicas found gone, until the
    /// replica leaves.
    async fn beat(self: &Arc<Self>, store: &TaskStore) -> Result<(), LoopStopped> {
        let beat = self.config.beat();
        let mut ticks = tokio::time::interval(beat);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.leave.cancelled() => return Ok(()),
                _ = ticks.tick() => {}
                // A replica that left (its lease deleted at its shutdown) handed its turns
                // off: they are taken over now, not at the next renewal.
                () = self.departed.notified() => {
                    self.bury(store);
                    continue;
                }
            }
            if let Err(e) = self.renew().await {
                tracing::warn!(error = %e, "could not renew this replica's lease");
            }
            self.bury(store);
            self.tidy(store);
        }
    }

    /// Fails the running tasks of every replica found gone (one such job per replica at a
    /// time).
    fn bury(self: &Arc<Self>, store: &TaskStore) {
        let now = Instant::now();
        let gone = self
            .book()
            .dead(&self.me_token, self.config.beat(), self.config.lease, now);
        for replica in gone {
            if !lock(&self.failing).insert(replica.token.clone()) {
                continue;
            }
            tracing::warn!(
                lost = replica.name,
                tasks = replica.tasks.len(),
                "a replica's lease ran out; resuming the turns it was running (failing those it kept no record of)"
            );
            let (shared, store) = (Arc::clone(self), store.clone());
            tokio::spawn(async move {
                let why = backend::lost_message(&replica.name);
                let failed = store
                    .resume_or_fail(
                        &replica.tasks,
                        &why,
                        &replica.name,
                        super::ResumeCause::ReplicaLost,
                    )
                    .await;
                tracing::info!(
                    lost = replica.name,
                    failed,
                    "the lost replica's tasks are resumed or failed"
                );
                lock(&shared.failing).remove(&replica.token);
            });
        }
    }

    /// Settles the tasks the store says this replica runs that no turn here runs (one such
    /// job at a time).
    fn tidy(self: &Arc<Self>, store: &TaskStore) {
        let leftover: Vec<String> = self
            .book()
            .running_of(&self.me_token)
            .into_iter()
            .filter(|id| !store.is_running_here(id) && !store.was_handed_off(id))
            .collect();
        if leftover.is_empty() || !lock(&self.failing).insert(self.me_token.clone()) {
            return;
        }
        let (shared, store) = (Arc::clone(self), store.clone());
        tokio::spawn(async move {
            for task_id in leftover {
                store.settle_leftover(&task_id).await;
            }
            lock(&shared.failing).remove(&shared.me_token);
        });
    }
}

/// This replica's answers to the others: the store's turns running here.
#[async_trait::async_trait]
impl Answers for TaskStore {
    fn now(&self, task_id: &str) -> Now {
        match self.existing(task_id).filter(|cell| cell.is_running()) {
            Some(cell) => match cell.standing() {
                Some((seq, task)) => Now::Running { seq, task },
                None => Now::NotRunning,
            },
            None => Now::NotRunning,
        }
    }

    async fn cancel(&self, task_id: &str) -> Stopped {
        self.stop_here(task_id).await.unwrap_or(Stopped::NotRunning)
    }
}
