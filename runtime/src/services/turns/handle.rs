//! What a face holds while a turn runs: the task's ids, its live events, and its finished
//! Task. Dropping the handle (a client that went away) does not stop the turn.

use daedalus_contract::{SendMessageResponse, Task};
use tokio::task::JoinHandle;

use super::TurnError;
use super::stream::EventReceiver;

/// A finished turn: its Task, and whether the agent answered with a message instead (the
/// Task's status message), which the A2A bindings then answer.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) task: Task,
    pub(crate) replied: bool,
}

impl Finished {
    /// A turn that ended in a Task.
    pub(crate) fn task(task: Task) -> Self {
        Self {
            task,
            replied: false,
        }
    }
}

/// A started turn.
#[derive(Debug)]
pub struct TaskHandle {
    task_id: String,
    context_id: String,
    events: Option<EventReceiver>,
    done: JoinHandle<Result<Finished, TurnError>>,
}

impl TaskHandle {
    pub(super) fn new(
        task_id: String,
        context_id: String,
        events: Option<EventReceiver>,
        done: JoinHandle<Result<Finished, TurnError>>,
    ) -> Self {
        Self {
            task_id,
            context_id,
            events,
            done,
        }
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's context id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The task's live events, in order (`task` first, the final status update last), for
    /// one listener; `None` once taken, or when the turn was run without listening.
    pub fn take_events(&mut self) -> Option<EventReceiver> {
        self.events.take()
    }

    /// Waits for the turn's finished Task (its events are no longer listened to).
    pub async fn finish(self) -> Result<Task, TurnError> {
        self.finished().await.map(|f| f.task)
    }

    /// Waits for the turn's answer as A2A's `SendMessage` gives it: the agent's message when
    /// it replied with one, else the finished Task.
    pub async fn answer(self) -> Result<SendMessageResponse, TurnError> {
        let Finished { task, replied } = self.finished().await?;
        Ok(match task.status.message {
            Some(message) if replied => SendMessageResponse::Message(message),
            _ => SendMessageResponse::Task(task),
        })
    }

    async fn finished(mut self) -> Result<Finished, TurnError> {
        drop(self.events.take());
        self.done
            .await
            .map_err(|join| TurnError::WorkerStopped(join.to_string()))?
    }
}
