//! Tasks in a JetStream KV bucket (`TASKS_DB=nats://…`, default bucket `daedalus-tasks`), so
//! replicas share them: one entry per task (`t.<token of its id>`), its JSON as it stands, and
//! the bucket's `max_age` is `TASK_TTL`. What a replica does not hold in memory it reads here
//! ([`super::TaskStore::find`]); live events and cancels travel as NATS messages
//! over the same connection.

use std::time::Duration;

use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};

use super::backend::{BackendError, StoredTask, TaskBackend};
use crate::config::redact_url;

/// Entries read at once when the recent tasks are read back.
const READ_CONCURRENCY: usize = 32;

/// Tasks in one KV bucket.
#[derive(Debug, Clone)]
pub struct NatsKvTasks {
    location: String,
    kv: kv::Store,
    client: async_nats::Client,
}

fn key(task_id: &str) -> String {
    format!("t.{}", daedalus_contract::token::token(task_id))
}

impl NatsKvTasks {
    /// Connects to `url` and opens `bucket`, creating it if absent; entries older than `ttl` go.
    pub async fn open(url: &str, bucket: &str, ttl: Duration) -> Result<Self, BackendError> {
        let location = format!("nats bucket {bucket} at {}", redact_url(url));
        let fail = |message: String| BackendError {
            location: location.clone(),
            message,
        };
        let opened = crate::kv_bucket::open(url, bucket, "Daedalus runtime A2A tasks", ttl)
            .await
            .map_err(fail)?;
        let (client, kv) = (opened.client, opened.kv);
        Ok(Self {
            location,
            kv,
            client,
        })
    }

    /// The connection, for the messages that carry live events and cancels.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    fn fail(&self, message: impl std::fmt::Display) -> BackendError {
        BackendError {
            location: self.location.clone(),
            message: message.to_string(),
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<StoredTask, BackendError> {
        daedalus_contract::read::from_slice(bytes).map_err(|e| self.fail(e))
    }
}

#[async_trait]
impl TaskBackend for NatsKvTasks {
    async fn save(&self, stored: &StoredTask) -> Result<(), BackendError> {
        let body = serde_json::to_vec(stored).map_err(|e| self.fail(e))?;
        self.kv
            .put(key(&stored.task.id), body.into())
            .await
            .map_err(|e| self.fail(e))?;
        Ok(())
    }

    async fn load(&self, task_id: &str) -> Result<Option<StoredTask>, BackendError> {
        let Some(bytes) = self.kv.get(key(task_id)).await.map_err(|e| self.fail(e))? else {
            return Ok(None);
        };
        let stored = self.decode(&bytes)?;
        // A hashed key names one id; the entry says which.
        Ok((stored.task.id == task_id).then_some(stored))
    }

    async fn recent(&self, limit: usize) -> Result<Vec<StoredTask>, BackendError> {
        let keys: Vec<String> = self
            .kv
            .keys()
            .await
            .map_err(|e| self.fail(e))?
            .try_collect()
            .await
            .map_err(|e| self.fail(e))?;
        let entries: Vec<Option<bytes::Bytes>> = futures::stream::iter(keys)
            .map(|key| async move { self.kv.get(key).await })
            .buffer_unordered(READ_CONCURRENCY)
            .try_collect()
            .await
            .map_err(|e| self.fail(e))?;
        let mut tasks: Vec<StoredTask> = entries
            .into_iter()
            .flatten()
            .filter_map(|bytes| match self.decode(&bytes) {
                Ok(stored) => Some(stored),
                Err(e) => {
                    tracing::warn!(error = %e, "a stored task is unreadable; skipped");
                    None
                }
            })
            .collect();
        tasks.sort_by_key(|t| std::cmp::Reverse(t.updated_ms));
        tasks.truncate(limit);
        Ok(tasks)
    }
}
