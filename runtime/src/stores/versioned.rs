//! Versioned records in a JetStream KV bucket: one record under a key, at a revision that
//! grows with every write, changed only by compare-and-set (a write names the revision it
//! read: `create` when it read none, `update` at that revision otherwise). The tasks, push
//! records and the budgets' shared usage keep their entries through it; what each entry
//! means stays with its store.

use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A backend that could not be reached or read: where, and the error underneath (its
/// `source()`, which a log or a test can follow down to the SQLite or NATS error).
#[derive(Debug, thiserror::Error)]
#[error("task backend {location}: {source}")]
pub struct BackendError {
    pub location: String,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl BackendError {
    /// The backend at `location` failed with `source` (an error, or what happened, said).
    pub fn new(
        location: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            location: location.into(),
            source: source.into(),
        }
    }
}

/// Why a write of a versioned record (a task, a push record, a usage count) was not stored.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The task's entry is not at the revision the write expected: another write came first.
    #[error("the task was written by another writer since it was read")]
    Conflict,
    /// The task is larger than the backend stores in one entry (a NATS server's
    /// `max_payload`): no write of it can succeed.
    #[error("the task is {bytes} bytes, and the task store takes at most {limit} in one entry")]
    TooLarge { bytes: usize, limit: usize },
    /// The backend could not be reached, or did not say whether it stored the write.
    #[error(transparent)]
    Unavailable(#[from] BackendError),
}

/// How long a write waits for the server's answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(3);

/// The versioned records of one bucket, named for errors by `location`.
#[derive(Debug, Clone)]
pub struct KvRecords {
    kv: kv::Store,
    location: String,
}

impl KvRecords {
    pub fn new(kv: kv::Store, location: impl Into<String>) -> Self {
        Self {
            kv,
            location: location.into(),
        }
    }

    /// The bucket, for what is not a record (watches, key listings).
    pub fn kv(&self) -> &kv::Store {
        &self.kv
    }

    /// Where the records are, as errors name it.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// An error of this bucket with `source` underneath.
    pub fn fail(
        &self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> BackendError {
        BackendError::new(self.location.clone(), source)
    }

    /// The record at `key` and its revision (`None`: none, or deleted).
    pub async fn read(&self, key: &str) -> Result<Option<(Bytes, u64)>, BackendError> {
        let entry = self.kv.entry(key).await.map_err(|e| self.fail(e))?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .map(|e| (e.value, e.revision)))
    }

    /// [`KvRecords::read`], decoded from JSON (a record that does not decode is an error).
    pub async fn read_json<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<(T, u64)>, BackendError> {
        let Some((bytes, revision)) = self.read(key).await? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| self.fail(format!("{key} does not read: {e}")))?;
        Ok(Some((value, revision)))
    }

    /// Writes `body` at `key` if the record still stands at `expected` (`0`: there is none
    /// yet); answers its new revision. [`WriteError::Conflict`]: another writer got there
    /// first. No answer within [`WRITE_TIMEOUT`] is [`WriteError::Unavailable`] (the server
    /// may have stored it all the same: a caller that must know reads the record again).
    pub async fn write(&self, key: &str, body: Bytes, expected: u64) -> Result<u64, WriteError> {
        let write = async {
            if expected == 0 {
                self.kv.create(key, body).await.map_err(|e| match e.kind() {
                    kv::CreateErrorKind::AlreadyExists => WriteError::Conflict,
                    _ => WriteError::Unavailable(self.fail(e)),
                })
            } else {
                self.kv
                    .update(key, body, expected)
                    .await
                    .map_err(|e| match e.kind() {
                        kv::UpdateErrorKind::WrongLastRevision => WriteError::Conflict,
                        _ => WriteError::Unavailable(self.fail(e)),
                    })
            }
        };
        tokio::time::timeout(WRITE_TIMEOUT, write)
            .await
            .unwrap_or_else(|_| {
                Err(WriteError::Unavailable(
                    self.fail("no answer from the server in time"),
                ))
            })
    }

    /// [`KvRecords::write`] of `value` as JSON.
    pub async fn write_json(
        &self,
        key: &str,
        value: &impl Serialize,
        expected: u64,
    ) -> Result<u64, WriteError> {
        let body = serde_json::to_vec(value).map_err(|e| WriteError::Unavailable(self.fail(e)))?;
        self.write(key, body.into(), expected).await
    }
}
