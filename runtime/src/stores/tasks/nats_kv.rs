//! Tasks in a JetStream KV bucket (`TASKS_DB=nats://…`, default bucket `daedalus-tasks`), so
//! replicas share them: one entry per task (`t.<token of its id>`), its [`StoredTask`] JSON,
//! and the bucket's `max_age` is `TASK_TTL`. The entry's revision is the stream sequence of
//! its last write; a write is `create` (no entry yet) or `update` at the revision it read.
//! The replicas' leases live in the same bucket (`r.<token of REPLICA_ID>`, see
//! [`super::replicas`]), so one watch of the bucket carries both in one order. Running turns'
//! records (durable turns) live in a bucket beside it (`<bucket>-turns`, `k.<token of the
//! task id>`): read only to resume a turn, they stay out of every replica's watch.

use std::time::Duration;

use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};

use super::backend::{BackendError, StoredTask, TaskBackend, TurnStep, Versioned, WriteError};
use crate::stores::versioned::KvRecords;
use daedalus_contract::redact::redact_url;

/// Entries read at once when the recent tasks are read back.
const READ_CONCURRENCY: usize = 32;

/// The prefix of task keys.
pub(crate) const TASK_KEYS: &str = "t.";

/// Room left in a message for the headers a KV write adds.
const HEADER_ROOM: usize = 512;
/// How long a write waits for the server's answer, and then for the entry that tells
/// whether it was stored.
const WRITE_TIMEOUT: Duration = Duration::from_secs(3);

/// Tasks in one KV bucket.
#[derive(Debug, Clone)]
pub struct NatsKvTasks {
    location: String,
    bucket: String,
    kv: kv::Store,
    /// The tasks' entries as versioned records (compare-and-set).
    records: KvRecords,
    /// The running turns' records.
    turns: kv::Store,
    client: async_nats::Client,
}

/// The key of task `task_id`'s turn record, in the turns' bucket.
fn turn_key(task_id: &str) -> String {
    format!("k.{}", daedalus_contract::token::token(task_id))
}

/// The key of task `task_id`.
pub(crate) fn key(task_id: &str) -> String {
    format!("{TASK_KEYS}{}", daedalus_contract::token::token(task_id))
}

impl NatsKvTasks {
    /// Connects to `url` and opens `bucket`, creating it if absent; entries older than `ttl` go.
    pub async fn open(url: &str, bucket: &str, ttl: Duration) -> Result<Self, BackendError> {
        let location = format!("nats bucket {bucket} at {}", redact_url(url));
        let fail =
            |e: crate::stores::kv_bucket::BucketError| BackendError::new(location.clone(), e);
        let opened = crate::stores::kv_bucket::open(url, bucket, "Daedalus runtime A2A tasks", ttl)
            .await
            .map_err(fail)?;
        let turns = crate::stores::kv_bucket::open_on(
            &opened.client,
            &format!("{bucket}-turns"),
            "Daedalus runtime running turns' records (durable turns)",
            ttl,
        )
        .await
        .map_err(fail)?;
        Ok(Self {
            records: KvRecords::new(opened.kv.clone(), location.clone()),
            location,
            bucket: bucket.to_owned(),
            kv: opened.kv,
            turns,
            client: opened.client,
        })
    }

    /// The connection, for the messages replicas send each other.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// The bucket's name (it scopes the replicas' subjects too).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The bucket itself, for its watch and the leases.
    pub(crate) fn kv(&self) -> &kv::Store {
        &self.kv
    }

    pub(crate) fn fail(
        &self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> BackendError {
        BackendError::new(self.location.clone(), source)
    }

    fn decode(&self, bytes: &[u8]) -> Result<StoredTask, BackendError> {
        daedalus_contract::read::from_slice(bytes).map_err(|e| self.fail(e))
    }

    /// The entry of `task_id` as it stands, decoded.
    async fn entry(&self, task_id: &str) -> Result<Option<Versioned>, BackendError> {
        let Some(entry) = self
            .kv
            .entry(key(task_id))
            .await
            .map_err(|e| self.fail(e))?
        else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let stored = self.decode(&entry.value)?;
        // A hashed key names one id; the entry says which.
        Ok((stored.task.id == task_id).then_some(Versioned {
            stored,
            revision: entry.revision,
        }))
    }

    /// Every entry of the bucket whose key starts `prefix`, as it stands (values put, not
    /// deleted), read [`READ_CONCURRENCY`] at a time.
    pub(crate) async fn entries_under(&self, prefix: &str) -> Result<Vec<kv::Entry>, BackendError> {
        let keys: Vec<String> = self
            .kv
            .keys()
            .await
            .map_err(|e| self.fail(e))?
            .try_filter(|k| std::future::ready(k.starts_with(prefix)))
            .try_collect()
            .await
            .map_err(|e| self.fail(e))?;
        let entries: Vec<Option<kv::Entry>> = futures::stream::iter(keys)
            .map(|key| async move { self.kv.entry(key).await })
            .buffer_unordered(READ_CONCURRENCY)
            .try_collect()
            .await
            .map_err(|e| self.fail(e))?;
        Ok(entries
            .into_iter()
            .flatten()
            .filter(|e| e.operation == kv::Operation::Put)
            .collect())
    }

    /// After a write whose answer was lost: its revision if the entry holds it.
    async fn written(&self, stored: &StoredTask) -> Option<u64> {
        let now = tokio::time::timeout(WRITE_TIMEOUT, self.entry(&stored.task.id))
            .await
            .ok()?
            .ok()??;
        (now.stored.write_id == stored.write_id).then_some(now.revision)
    }
}

#[async_trait]
impl TaskBackend for NatsKvTasks {
    async fn load(&self, task_id: &str) -> Result<Option<Versioned>, BackendError> {
        self.entry(task_id).await
    }

    async fn write(&self, stored: &StoredTask, expected: u64) -> Result<u64, WriteError> {
        let body: bytes::Bytes = serde_json::to_vec(stored).map_err(|e| self.fail(e))?.into();
        let limit = self.client.max_payload().saturating_sub(HEADER_ROOM);
        if body.len() > limit {
            return Err(WriteError::TooLarge {
                bytes: body.len(),
                limit,
            });
        }
        match self
            .records
            .write(&key(&stored.task.id), body, expected)
            .await
        {
            Ok(revision) => Ok(revision),
            Err(WriteError::Unavailable(e)) => match self.written(stored).await {
                // The server may have stored it and the answer been lost: the entry tells.
                Some(revision) => Ok(revision),
                None => Err(WriteError::Unavailable(e)),
            },
            Err(e) => Err(e),
        }
    }

    /// The task, then its turn's record in the turns' bucket: a record kept with a begin is
    /// stored before the turn goes on; one dropped with an end goes off the end's path (a
    /// server that is away, its writes waiting out their timeout, holds up no answer).
    async fn write_with_turn(
        &self,
        stored: &StoredTask,
        expected: u64,
        step: TurnStep<'_>,
    ) -> Result<u64, WriteError> {
        let revision = self.write(stored, expected).await?;
        let task_id = stored.task.id.as_str();
        match step {
            TurnStep::Untouched => {}
            TurnStep::Keep(record) => {
                if let Err(e) = self.keep_turn(task_id, Some(record)).await {
                    tracing::warn!(task_id, error = %e, "the turn's record could not be kept");
                }
            }
            TurnStep::Drop => {
                let (tasks, task_id) = (self.clone(), task_id.to_owned());
                tokio::spawn(async move {
                    if let Err(e) = tasks.keep_turn(&task_id, None).await {
                        tracing::warn!(task_id, error = %e, "the turn's record could not be dropped");
                    }
                });
            }
        }
        Ok(revision)
    }

    async fn keep_turn(&self, task_id: &str, record: Option<&str>) -> Result<(), BackendError> {
        let key = turn_key(task_id);
        let kept = async {
            match record {
                Some(record) => self
                    .turns
                    .put(&key, record.to_owned().into())
                    .await
                    .map(|_| ())
                    .map_err(|e| self.fail(e)),
                None => self.turns.delete(&key).await.map_err(|e| self.fail(e)),
            }
        };
        tokio::time::timeout(WRITE_TIMEOUT, kept)
            .await
            .unwrap_or_else(|_| Err(self.fail("no answer from the server in time")))
    }

    async fn turn(&self, task_id: &str) -> Result<Option<String>, BackendError> {
        let entry = self
            .turns
            .entry(turn_key(task_id))
            .await
            .map_err(|e| self.fail(e))?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .map(|e| String::from_utf8_lossy(&e.value).into_owned()))
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Versioned>, BackendError> {
        let entries = self.entries_under(TASK_KEYS).await?;
        let mut tasks: Vec<Versioned> = entries
            .into_iter()
            .filter_map(|entry| match self.decode(&entry.value) {
                Ok(stored) => Some(Versioned {
                    stored,
                    revision: entry.revision,
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "a stored task is unreadable; skipped");
                    None
                }
            })
            .collect();
        tasks.sort_by_key(|t| std::cmp::Reverse(t.stored.updated_ms));
        tasks.truncate(limit);
        Ok(tasks)
    }
}
