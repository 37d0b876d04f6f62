//! Where tasks outlive the process: the [`TaskBackend`] seam, and what it stores.
//!
//! The store in memory is always the one that answers; a backend keeps a copy of each task as
//! it stands, written when a turn begins, when it ends and when a waiting task is canceled.
//! At startup the most recent tasks are read back, and a task that was running in the previous
//! run of this replica becomes `failed` ("the runtime restarted while this task ran"), so a
//! subscriber or a poller learns it and never waits forever.
//!
//! Backends: none (memory only, the default), SQLite (a restart on one machine), NATS KV
//! (replicas share the tasks; see [`super::nats_kv`]).

use async_trait::async_trait;
use chrono::{SecondsFormat, Utc};
use daedalus_contract::{Message, Part, Role, Task, TaskState};
use serde::{Deserialize, Serialize};

/// What a backend keeps of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTask {
    /// The task as it stood, in the contract dialect.
    pub task: Task,
    /// The replica that ran its last turn (`REPLICA_ID`).
    pub owner: String,
    /// When it was written (Unix milliseconds).
    pub updated_ms: i64,
}

/// A backend that could not be reached or read.
#[derive(Debug, thiserror::Error)]
#[error("task backend {location}: {message}")]
pub struct BackendError {
    pub location: String,
    pub message: String,
}

/// Where tasks are kept beyond the process.
#[async_trait]
pub trait TaskBackend: Send + Sync + std::fmt::Debug + 'static {
    /// Writes the task as it stands.
    async fn save(&self, stored: &StoredTask) -> Result<(), BackendError>;
    /// The task `task_id`, if kept.
    async fn load(&self, task_id: &str) -> Result<Option<StoredTask>, BackendError>;
    /// The `limit` most recently written tasks, newest first.
    async fn recent(&self, limit: usize) -> Result<Vec<StoredTask>, BackendError>;
}

/// The message of a task whose turn the restart cut.
pub const RESTARTED: &str = "the runtime restarted while this task ran; send the message again";

/// `stored`'s task if it was left running by this replica's previous run: now `failed`, saying
/// so. `None` for a task that needs nothing.
pub fn failed_by_restart(stored: &StoredTask, replica: &str) -> Option<Task> {
    let state = stored.task.status.state;
    let running = !state.is_terminal() && !state.is_interrupted();
    if !running || stored.owner != replica {
        return None;
    }
    let mut task = stored.task.clone();
    let context_id = task.context_id.clone();
    let mut message = Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::Agent,
        vec![Part::text(RESTARTED)],
    );
    message.task_id = Some(task.id.clone());
    message.context_id = context_id;
    task.status.state = TaskState::Failed;
    task.status.message = Some(message.clone());
    task.status.timestamp = Some(Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true));
    if let Some(history) = task.history.as_mut() {
        history.push(message);
    }
    Some(task)
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}
