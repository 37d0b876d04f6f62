//! What a face holds while a turn runs: the task's ids, its live events, and its finished
//! Task. Dropping the handle (a client that went away) does not stop the turn.

use daedalus_contract::Task;
use tokio::task::JoinHandle;

use super::TurnError;
use super::stream::EventReceiver;

/// A started turn.
#[derive(Debug)]
pub struct TaskHandle {
    task_id: String,
    context_id: String,
    events: Option<EventReceiver>,
    done: JoinHandle<Result<Task, TurnError>>,
}

impl TaskHandle {
    pub(super) fn new(
        task_id: String,
        context_id: String,
        events: Option<EventReceiver>,
        done: JoinHandle<Result<Task, TurnError>>,
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
    pub async fn finish(mut self) -> Result<Task, TurnError> {
        drop(self.events.take());
        self.done
            .await
            .map_err(|join| TurnError::WorkerStopped(join.to_string()))?
    }
}
