//! What is kept of a task's webhooks: its [`PushRecord`], one per task, beside the task in
//! the task store's backend (its own entry, compare-and-set on its own revision, so webhook
//! changes never race the task's turn), and the [`PushBackend`] seam that keeps it.

use async_trait::async_trait;
use daedalus_contract::TaskPushNotificationConfig;
use serde::{Deserialize, Serialize};

use crate::platform::identity::Principal;
use crate::stores::versioned::{BackendError, WriteError};

/// A task's webhooks, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushRecord {
    pub task_id: String,
    /// Who set them up (the task's owner): only it (or an admin of its tenant) sees them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    pub webhooks: Vec<Webhook>,
}

/// One webhook of a task, and how far its deliveries have got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub config: TaskPushNotificationConfig,
    /// The store revision of the last state of the task the webhook took (`0`: none yet,
    /// or a store that keeps no revisions).
    #[serde(default)]
    pub delivered: u64,
}

impl PushRecord {
    /// A record with no webhooks yet.
    pub fn new(task_id: &str, principal: Option<Principal>) -> Self {
        Self {
            task_id: task_id.to_owned(),
            principal,
            webhooks: Vec::new(),
        }
    }

    /// The webhook `id`.
    pub fn webhook(&self, id: &str) -> Option<&Webhook> {
        self.webhooks.iter().find(|w| w.config.id == id)
    }
}

/// Where push records outlive the process (the task store's backend: SQLite, NATS KV).
#[async_trait]
pub trait PushBackend: Send + Sync + std::fmt::Debug + 'static {
    /// Task `task_id`'s record and its revision, if kept.
    async fn load(&self, task_id: &str) -> Result<Option<(PushRecord, u64)>, BackendError>;
    /// Stores `record` (or, with no webhooks, removes it) if it is still at revision
    /// `expected` (`0`: there is none yet); answers the new revision (`0` once removed).
    async fn write(&self, record: &PushRecord, expected: u64) -> Result<u64, WriteError>;
    /// Every record kept, for a restart to deliver what it had not.
    async fn all(&self) -> Result<Vec<(PushRecord, u64)>, BackendError>;
}
