//! Push records in the tasks' JetStream KV bucket (`TASKS_DB=nats://…`), beside the tasks:
//! one entry per task with webhooks (`p.<token of its id>`), compare-and-set on the entry's
//! revision (`create`, then `update`). A record whose webhooks were all deleted stays as an
//! empty record (so its revision keeps counting), and ages out with the bucket's `max_age`
//! like the task. Every replica follows the records ([`NatsKvPush::follow`]), so whichever
//! replica stores a state of a task knows its webhooks.

use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::StreamExt;

use super::record::{PushBackend, PushRecord};
use crate::stores::tasks::{BackendError, NatsKvTasks, WriteError};
use crate::stores::versioned::KvRecords;

/// The prefix of push record keys.
const PUSH_KEYS: &str = "p.";

/// Push records in the tasks' bucket.
#[derive(Debug, Clone)]
pub struct NatsKvPush {
    tasks: NatsKvTasks,
    records: KvRecords,
}

fn key(task_id: &str) -> String {
    format!("{PUSH_KEYS}{}", daedalus_contract::token::token(task_id))
}

impl NatsKvPush {
    /// Push records in the bucket `tasks` keeps the tasks in.
    pub fn beside(tasks: &NatsKvTasks) -> Self {
        Self {
            tasks: tasks.clone(),
            records: KvRecords::new(
                tasks.kv().clone(),
                format!("push records in nats bucket {}", tasks.bucket()),
            ),
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<PushRecord, BackendError> {
        serde_json::from_slice(bytes).map_err(|e| self.records.fail(e))
    }

    /// Every record as stored now, then every record as it changes (no webhooks: there are
    /// none any more), each with its revision, in the bucket's order; ends when the watch
    /// does (the caller watches again).
    pub async fn follow(
        &self,
    ) -> Result<impl futures::Stream<Item = (PushRecord, u64)> + Send + use<>, BackendError> {
        let watch = self
            .records
            .kv()
            .watch_with_history(format!("{PUSH_KEYS}>"))
            .await
            .map_err(|e| self.records.fail(e))?;
        let this = self.clone();
        Ok(watch
            .take_while(|entry| std::future::ready(entry.is_ok()))
            .filter_map(move |entry| {
                let this = this.clone();
                async move {
                    let entry = entry.ok().filter(|e| e.operation == kv::Operation::Put)?;
                    match this.decode(&entry.value) {
                        Ok(record) => Some((record, entry.revision)),
                        Err(e) => {
                            tracing::warn!(error = %e, "push: a stored record is unreadable; skipped");
                            None
                        }
                    }
                }
            }))
    }
}

#[async_trait]
impl PushBackend for NatsKvPush {
    async fn load(&self, task_id: &str) -> Result<Option<(PushRecord, u64)>, BackendError> {
        let Some((record, revision)) = self.records.read_json::<PushRecord>(&key(task_id)).await?
        else {
            return Ok(None);
        };
        // A hashed key names one id; the record says which.
        Ok((record.task_id == task_id).then_some((record, revision)))
    }

    async fn write(&self, record: &PushRecord, expected: u64) -> Result<u64, WriteError> {
        self.records
            .write_json(&key(&record.task_id), record, expected)
            .await
    }

    async fn all(&self) -> Result<Vec<(PushRecord, u64)>, BackendError> {
        let entries = self.tasks.entries_under(PUSH_KEYS).await?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| match self.decode(&entry.value) {
                Ok(record) => Some((record, entry.revision)),
                Err(e) => {
                    tracing::warn!(error = %e, "push: a stored record is unreadable; skipped");
                    None
                }
            })
            .collect())
    }
}
