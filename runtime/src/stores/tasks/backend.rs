//! Where tasks outlive the process: the [`TaskBackend`] seam, and what it stores.
//!
//! A backend keeps one entry per task, its [`StoredTask`], under a revision that grows with
//! every write. Writes are compare-and-set ([`TaskBackend::write`]): a write names the
//! revision it read, and is refused when the entry moved on since, so two writers of one task
//! never overwrite each other unseen. The loser reads the entry again and answers from it.
//!
//! Backends: none (memory only, the default), SQLite (a restart on one machine), NATS KV
//! (replicas share the tasks; see [`super::nats_kv`] and [`super::replicas`]).

use async_trait::async_trait;

use crate::stores::turn_writes::Pending;
use daedalus_contract::{Message, Part, Role, Task, TaskState, TaskStatus};
use serde::{Deserialize, Serialize};

use super::list::{Asked, Selection};
use crate::platform::identity::{Caller, Principal};

/// What a backend keeps of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTask {
    /// The task's id, beside the task, so a reader can tell which task an entry holds
    /// without reading the task.
    #[serde(default)]
    pub task_id: String,
    /// The task as it stood, in the contract dialect.
    pub task: Task,
    /// The replica that wrote it: the one running its turn, while it runs (`REPLICA_ID`).
    pub owner: String,
    /// When it was written (Unix milliseconds).
    pub updated_ms: i64,
    /// This write's own id, so a writer whose acknowledgement was lost can tell its write.
    #[serde(default)]
    pub write_id: String,
    /// The `messageId` the task as it stands answers (the contract binding's replay of a
    /// redelivered message, on any replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<String>,
    /// Who the task belongs to: only it (or an admin of its tenant) sees the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
}

impl StoredTask {
    /// `task` as `owner` writes it now.
    pub fn new(task: Task, owner: &str, answered: Option<String>) -> Self {
        Self {
            task_id: task.id.clone(),
            task,
            owner: owner.to_owned(),
            updated_ms: now_ms(),
            write_id: uuid::Uuid::new_v4().to_string(),
            answered,
            principal: None,
        }
    }

    /// Whether a turn of the task runs (by its owner): neither over nor waiting for input.
    pub fn is_running(&self) -> bool {
        running(self.task.status.state)
    }
}

/// A stored task and the revision it is stored under.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    pub stored: StoredTask,
    /// Grows with every write of the task (in a KV bucket, the bucket's sequence number of
    /// the write); `0` is never a stored revision.
    pub revision: u64,
}

pub use crate::stores::versioned::{BackendError, WriteError};

/// What became of a begin queued for later ([`TaskBackend::begin_later`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeganLater {
    /// Committed at this revision.
    Written(u64),
    /// Left out: the task's end reached the writer first, and holds it.
    LeftOut,
}

/// What a write of a task does to its turn's record besides (durable turns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStep<'a> {
    /// Nothing.
    Untouched,
    /// Keeps this record: the turn begins with the write.
    Keep(&'a str),
    /// Drops the record: the turn ends with the write.
    Drop,
}

/// Where tasks are kept beyond the process.
#[async_trait]
pub trait TaskBackend: Send + Sync + std::fmt::Debug + 'static {
    /// The task `task_id` and its revision, if kept.
    async fn load(&self, task_id: &str) -> Result<Option<Versioned>, BackendError>;
    /// Stores `stored` if the task's entry is still at revision `expected` (`0`: there is no
    /// entry yet); answers the new revision.
    async fn write(&self, stored: &StoredTask, expected: u64) -> Result<u64, WriteError>;
    /// [`TaskBackend::write`], and, if it lands, `step` for the task's turn record: in one
    /// step where the backend can (one transaction in SQLite), so a turn's record comes with
    /// the begin that starts it and goes with the end that ends it. A record that cannot be
    /// kept is logged: the turn goes on, and would resume from the record before.
    async fn write_with_turn(
        &self,
        stored: &StoredTask,
        expected: u64,
        step: TurnStep<'_>,
    ) -> Result<u64, WriteError> {
        let revision = self.write(stored, expected).await?;
        let record = match step {
            TurnStep::Untouched => return Ok(revision),
            TurnStep::Keep(record) => Some(record),
            TurnStep::Drop => None,
        };
        if let Err(e) = self.keep_turn(&stored.task.id, record).await {
            tracing::warn!(task_id = stored.task.id, error = %e, "the turn's record could not be kept");
        }
        Ok(revision)
    }
    /// A turn's begin (`stored` at revision `expected`, with the turn's `record`) that need
    /// not be committed before the turn goes on: on a backend no other process writes, it is
    /// queued to be committed with the next write of the task (its end, a checkpoint) or any
    /// write awaited, and left out altogether when the task's end reaches the writer first
    /// (the end then writes the task from revision `expected`). `None`: this backend writes
    /// every begin at once ([`TaskBackend::write_with_turn`]).
    fn begin_later(
        &self,
        stored: &StoredTask,
        expected: u64,
        record: Option<&str>,
    ) -> Option<Pending<Result<BeganLater, WriteError>>> {
        let _ = (stored, expected, record);
        None
    }
    /// The `limit` most recently written tasks, newest first.
    async fn recent(&self, limit: usize) -> Result<Vec<Versioned>, BackendError>;
    /// What a restart reads back into memory: the tasks `replica` left running, when this
    /// backend can find them alone (finished tasks are read when someone asks for them,
    /// [`TaskBackend::select`] lists them); `None`: it cannot, and the restart reads the
    /// `limit` most recent ([`TaskBackend::recent`]).
    async fn left_running(&self, replica: &str) -> Result<Option<Vec<Versioned>>, BackendError> {
        let _ = replica;
        Ok(None)
    }
    /// The page of `ListTasks` that `asked` selects among every task kept, when this backend
    /// selects on its own (`None`: memory selects among what it holds).
    async fn select(&self, asked: &Asked) -> Result<Option<Selection>, BackendError> {
        let _ = asked;
        Ok(None)
    }
    /// Whether some task of context `context_id` belongs to someone `caller` may not see,
    /// when this backend can tell (`None`: memory tells among what it holds).
    async fn context_closed_to(
        &self,
        context_id: &str,
        caller: &Caller,
    ) -> Result<Option<bool>, BackendError> {
        let _ = (context_id, caller);
        Ok(None)
    }
    /// Keeps `record` (`None`: drops it) as the record of task `task_id`'s running turn:
    /// what a restart needs to resume the turn (durable turns). Opaque to the store. A backend
    /// that keeps none keeps nothing, and its turns are not resumed.
    async fn keep_turn(&self, task_id: &str, record: Option<&str>) -> Result<(), BackendError> {
        let _ = (task_id, record);
        Ok(())
    }
    /// The record [`TaskBackend::keep_turn`] keeps for task `task_id`, if any.
    async fn turn(&self, task_id: &str) -> Result<Option<String>, BackendError> {
        let _ = task_id;
        Ok(None)
    }
}

/// Whether a task in `state` has a turn running: neither over nor waiting for input.
pub fn running(state: TaskState) -> bool {
    !state.is_terminal() && !state.is_interrupted()
}

/// The message of a task whose turn the restart cut.
pub const RESTARTED: &str = "the runtime restarted while this task ran; send the message again";

/// The message of a task whose replica was lost while its turn ran.
pub fn lost_message(replica: &str) -> String {
    format!(
        "the replica running this task ({replica}) was lost before it finished; send the message again"
    )
}

/// `task`, failed now, its status message saying `why` (also added to its history).
pub fn failed_now(task: &Task, why: &str) -> Task {
    let mut task = task.clone();
    let mut message = Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::Agent,
        vec![Part::text(why)],
    );
    message.task_id = Some(task.id.clone());
    message.context_id.clone_from(&task.context_id);
    task.status.state = TaskState::Failed;
    task.status.message = Some(message.clone());
    task.status.timestamp = Some(TaskStatus::timestamp_now());
    if let Some(history) = task.history.as_mut() {
        history.push(message);
    }
    task
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
