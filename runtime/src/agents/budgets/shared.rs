//! Budgets held by every replica together: with `TASKS_DB=nats://…` the usage lives in a KV
//! bucket beside the tasks' (`<bucket>-budgets`), and every change to it is a compare-and-set,
//! so N replicas hold one budget as one process would.
//!
//! - `w.<scope kind>.<token of the name>.<limit>`: one windowed count, `{"start": ms, "used":
//!   n}`. A write in a later window starts the count again from zero; a change meant for a
//!   window that is over is dropped.
//! - `c.<scope kind>.<token of the name>`: the turns each replica runs now under one scope,
//!   `{"<replica>": {"n": 3, "at": ms}}`. A replica writes its own count when a turn begins
//!   (checked against the others' in the same compare-and-set), again when one ends, and
//!   every fifth of `REPLICA_LEASE` while it runs any; a count not written for
//!   `REPLICA_LEASE` is a lost replica's, and is not counted (as its lease, the same span).
//!
//! What must be checked before a turn or a call goes on (a turn's place, a call's tokens) is
//! written before it goes on; what only gives back (a turn's end, a call that never answered)
//! is queued and written by [`SharedUsage::run`] in the background, at most [`FLUSH_EVERY`]
//! later. The bucket's entries expire two days after their last write.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::{LimitKind, ScopeKind};
use crate::stores::tasks::WriteError;
use crate::stores::versioned::KvRecords;

/// The longest a queued change waits to be written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Compare-and-set attempts before a change gives up (many writers on one key).
const CAS_ATTEMPTS: usize = 64;
/// How long the bucket keeps an entry after its last write: past a day's window.
const RETENTION: Duration = Duration::from_hours(48);

/// The usage store could not be read or written: where, and the error underneath (its
/// `source()`: the NATS or SQLite error, or what was wrong with an entry).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the shared budget usage ({location}): {source}")]
pub struct UsageError {
    location: String,
    source: Arc<dyn std::error::Error + Send + Sync>,
}

impl UsageError {
    pub(crate) fn new(
        location: &str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            location: location.to_owned(),
            source: Arc::from(source.into()),
        }
    }
}

/// One windowed count as stored.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct StoredWindow {
    start: u64,
    used: u64,
}

/// One replica's running turns under a scope, as stored.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct StoredRunning {
    n: u64,
    at: u64,
}

/// What one change to a window did: what it added (less than asked when the limit left less
/// room) and the window's count after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    pub taken: u64,
    pub used: u64,
}

/// Changes queued for the background writer.
#[derive(Debug, Default)]
struct Queued {
    /// Windows to change: (key, window start) → tokens or turns to add (negative: give back).
    deltas: HashMap<(String, u64), i64>,
    /// Concurrency keys whose count of this replica's turns changed since it was written.
    dirty: std::collections::HashSet<String>,
}

/// The budget usage in one KV bucket, as this replica sees and changes it.
#[derive(Debug)]
pub struct SharedUsage {
    location: String,
    records: KvRecords,
    replica: String,
    /// A replica's running count not written for this long is not counted: it is lost.
    stale_after_ms: u64,
    /// How often this replica writes its running counts again, so the others know it lives.
    refresh: Duration,
    /// This replica's running turns by concurrency key: what it writes as its own count.
    running: Mutex<HashMap<String, u64>>,
    /// One write of this replica's own counts at a time, so the last written is the latest.
    writing: tokio::sync::Mutex<()>,
    queued: Mutex<Queued>,
    wake: Notify,
}

/// The key of a scope's windowed count.
pub(super) fn window_key(kind: ScopeKind, name: &str, limit: LimitKind) -> String {
    format!(
        "w.{}.{}.{}",
        kind.as_str(),
        daedalus_contract::token::token(name),
        limit.key()
    )
}

/// The key of a scope's running turns.
pub(super) fn running_key(kind: ScopeKind, name: &str) -> String {
    format!(
        "c.{}.{}",
        kind.as_str(),
        daedalus_contract::token::token(name)
    )
}

impl SharedUsage {
    /// The usage in `<tasks_bucket>-budgets` on `client` (created if absent), written by
    /// `replica`, whose counts of running turns are held as long as its `lease`.
    pub async fn open(
        client: &async_nats::Client,
        tasks_bucket: &str,
        replica: &str,
        lease: Duration,
    ) -> Result<Self, UsageError> {
        let bucket = format!("{tasks_bucket}-budgets");
        let location = format!("nats bucket {bucket}");
        let kv = crate::stores::kv_bucket::open_on(
            client,
            &bucket,
            "Daedalus runtime budget usage (budgets:)",
            RETENTION,
        )
        .await
        .map_err(|e| UsageError::new(&location, e))?;
        Ok(Self {
            records: KvRecords::new(kv, location.clone()),
            location,
            replica: replica.to_owned(),
            stale_after_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            refresh: lease / 5,
            running: Mutex::default(),
            writing: tokio::sync::Mutex::new(()),
            queued: Mutex::default(),
            wake: Notify::new(),
        })
    }

    fn fail(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> UsageError {
        UsageError::new(&self.location, e)
    }

    /// The entry at `key`, decoded, and its revision (`None`: no entry).
    async fn read<T: for<'de> Deserialize<'de>>(
        &self,
        key: &str,
    ) -> Result<Option<(T, u64)>, UsageError> {
        self.records.read_json(key).await.map_err(|e| self.fail(e))
    }

    /// Writes `value` at `key` if it still stands at `revision` (`None`: if it has no entry);
    /// `Ok(false)`: another writer got there first.
    async fn write_at(
        &self,
        key: &str,
        value: &impl Serialize,
        revision: Option<u64>,
    ) -> Result<bool, UsageError> {
        match self
            .records
            .write_json(key, value, revision.unwrap_or(0))
            .await
        {
            Ok(_) => Ok(true),
            Err(WriteError::Conflict) => Ok(false),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The count of the window of `key` that started at `start`.
    pub async fn used(&self, key: &str, start: u64) -> Result<u64, UsageError> {
        Ok(self
            .read::<StoredWindow>(key)
            .await?
            .filter(|(w, _)| w.start == start)
            .map_or(0, |(w, _)| w.used))
    }

    /// Adds `delta` to the window of `key` that started at `start`: no more than the room
    /// `limit` leaves when one is given (nothing when the window is full), no less than zero.
    /// A give-back to a window that is over changes nothing; an addition for one (a replica
    /// whose clock is behind) counts in the window that is on.
    pub async fn add(
        &self,
        key: &str,
        start: u64,
        delta: i64,
        limit: Option<u64>,
    ) -> Result<Added, UsageError> {
        for _ in 0..CAS_ATTEMPTS {
            let stored = self.read::<StoredWindow>(key).await?;
            let (window, revision) = match stored {
                Some((w, revision)) => (w, Some(revision)),
                None => (StoredWindow { start, used: 0 }, None),
            };
            let start = if window.start > start {
                if delta <= 0 {
                    // A give-back to a window that is over: nothing to give back to.
                    return Ok(Added {
                        taken: 0,
                        used: window.used,
                    });
                }
                // This replica's clock is behind the others' by a window's turn: count in the
                // window they are in.
                window.start
            } else {
                start
            };
            let used = if window.start == start {
                window.used
            } else {
                0
            };
            let added = match (delta, limit) {
                (d, Some(limit)) if d > 0 => d.unsigned_abs().min(limit.saturating_sub(used)),
                (d, _) if d > 0 => d.unsigned_abs(),
                _ => 0,
            };
            let after = if delta < 0 {
                used.saturating_sub(delta.unsigned_abs())
            } else {
                used.saturating_add(added)
            };
            if after == used && window.start == start {
                return Ok(Added { taken: 0, used });
            }
            let value = StoredWindow { start, used: after };
            if self.write_at(key, &value, revision).await? {
                return Ok(Added {
                    taken: added,
                    used: after,
                });
            }
        }
        Err(self.fail(format!("{key}: too many writers at once")))
    }

    /// Counts one more turn of this replica under the scope of `key`, if the turns every
    /// replica runs under it (a lost replica's not counted) leave room under `limit`;
    /// `Ok(false)`: they do not.
    pub async fn enter(&self, key: &str, limit: u64, now: u64) -> Result<bool, UsageError> {
        let _writing = self.writing.lock().await;
        let mine = self.running_here(key);
        for _ in 0..CAS_ATTEMPTS {
            let (mut counts, revision) = self.counts(key).await?;
            let others: u64 = self.live_others(&counts, now);
            if others.saturating_add(mine) >= limit {
                return Ok(false);
            }
            counts.insert(
                self.replica.clone(),
                StoredRunning {
                    n: mine + 1,
                    at: now,
                },
            );
            if self.write_at(key, &counts, revision).await? {
                *self
                    .running
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(key.to_owned())
                    .or_default() += 1;
                return Ok(true);
            }
        }
        Err(self.fail(format!("{key}: too many writers at once")))
    }

    /// One turn of this replica under the scope of `key` ended: its count is written again in
    /// the background.
    pub fn leave(&self, key: &str) {
        {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = running.get_mut(key) {
                *n = n.saturating_sub(1);
            }
        }
        self.queue().dirty.insert(key.to_owned());
        self.wake.notify_one();
    }

    /// Queues `delta` for the window of `key` that started at `start`, written in the
    /// background (a give-back, or a change a failed write left).
    pub fn add_later(&self, key: &str, start: u64, delta: i64) {
        if delta == 0 {
            return;
        }
        *self
            .queue()
            .deltas
            .entry((key.to_owned(), start))
            .or_default() += delta;
        self.wake.notify_one();
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn running_here(&self, key: &str) -> u64 {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    async fn counts(
        &self,
        key: &str,
    ) -> Result<(BTreeMap<String, StoredRunning>, Option<u64>), UsageError> {
        Ok(match self.read(key).await? {
            Some((counts, revision)) => (counts, Some(revision)),
            None => (BTreeMap::new(), None),
        })
    }

    /// The turns the other replicas run, by `counts`, leaving out the counts of lost replicas.
    fn live_others(&self, counts: &BTreeMap<String, StoredRunning>, now: u64) -> u64 {
        let stale = self.stale_after_ms;
        counts
            .iter()
            .filter(|(replica, count)| {
                **replica != self.replica && now.saturating_sub(count.at) < stale
            })
            .map(|(_, count)| count.n)
            .sum()
    }

    /// Writes this replica's own count at `key` as it stands now (and drops lost replicas'
    /// counts while at it).
    async fn write_mine(&self, key: &str, now: u64) -> Result<(), UsageError> {
        let _writing = self.writing.lock().await;
        let stale = self.stale_after_ms;
        for _ in 0..CAS_ATTEMPTS {
            let mine = self.running_here(key);
            let (mut counts, revision) = self.counts(key).await?;
            counts.retain(|_, count| now.saturating_sub(count.at) < stale);
            if mine == 0 {
                if counts.remove(&self.replica).is_none() && revision.is_some() {
                    return Ok(());
                }
            } else {
                counts.insert(self.replica.clone(), StoredRunning { n: mine, at: now });
            }
            if self.write_at(key, &counts, revision).await? {
                if mine == 0 {
                    let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
                    if running.get(key) == Some(&0) {
                        running.remove(key);
                    }
                }
                return Ok(());
            }
        }
        Err(self.fail(format!("{key}: too many writers at once")))
    }

    /// Writes what is queued; what cannot be written now stays queued.
    pub async fn flush(&self, now: u64) -> Result<(), UsageError> {
        let Queued { deltas, dirty } = std::mem::take(&mut *self.queue());
        let mut failed = None;
        for key in dirty {
            if let Err(e) = self.write_mine(&key, now).await {
                self.queue().dirty.insert(key);
                failed = Some(e);
            }
        }
        for ((key, start), delta) in deltas {
            if let Err(e) = self.add(&key, start, delta, None).await {
                self.add_later(&key, start, delta);
                failed = Some(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Writes what is queued as it comes (at most [`FLUSH_EVERY`] apart), and this replica's
    /// running counts every fifth of its lease, until `stop`; `clock` is the wall clock in Unix ms.
    /// A queued change left at `stop` is written by the last [`Self::flush`].
    pub async fn run(
        &self,
        clock: &(dyn Fn() -> u64 + Send + Sync),
        stop: &tokio_util::sync::CancellationToken,
    ) {
        let mut refresh = tokio::time::interval(self.refresh);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = self.wake.notified() => tokio::time::sleep(FLUSH_EVERY).await,
                _ = refresh.tick() => {
                    let running: Vec<String> = self
                        .running
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .keys()
                        .cloned()
                        .collect();
                    self.queue().dirty.extend(running);
                }
            }
            if let Err(e) = self.flush(clock()).await {
                tracing::warn!(error = %e, "budget usage not written; trying again");
            }
        }
    }
}
