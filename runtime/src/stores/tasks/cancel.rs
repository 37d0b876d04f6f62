//! Canceling a task, wherever it runs, with one answer on every replica: `canceled` only when
//! the cancel's end is the one stored; a task that stored another end first (completed,
//! failed) is not cancelable, and says how it ended.
//!
//! - A turn running here is stopped at its next safe point; the cancel waits until the turn
//!   has stored its end, and answers from that end.
//! - A task waiting for input is ended `canceled` by compare-and-set on the revision read.
//! - A turn running on another replica is that replica's to stop: it is asked (by name, so a
//!   replica that is gone answers at once that nobody listens). A replica that is finishing
//!   the task answers with the end it stored. When its replica does not answer (gone, or
//!   the task is not running there), the cancel stores `canceled` itself, by compare-and-set
//!   on the revision it read: if the turn stored its end first, that end stands.
//!
//! Every step that finds the task moved on (a write came first) looks again, a few times.

use std::time::Duration;

use daedalus_contract::{Message, Part, Task, TaskState, TaskStatus};

use super::TaskStore;
use super::backend::running;
use super::replicas::Stopped;
use super::turn::final_update;
use crate::platform::identity::Caller;

/// How long a cancel waits for a turn here to stop and store its end (a turn stops within
/// `CANCEL_SETTLE` of being told).
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(7);

/// How many times a cancel looks again at a task that moved on while it was being canceled.
const ATTEMPTS: usize = 4;

/// Why a task could not be canceled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CancelError {
    #[error("no task {0} is known")]
    NotFound(String),
    #[error("task {task_id} is {state} and cannot be canceled")]
    NotCancelable { task_id: String, state: TaskState },
    /// The turn did not stop in time, or the task kept changing, or the store could not be
    /// reached: nothing is known to have changed.
    #[error("task {task_id} could not be canceled now ({why}); try again")]
    Unsettled { task_id: String, why: &'static str },
}

/// What one look at the task decided.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once; a box would only add an allocation"
)]
enum Step {
    Done(Result<Task, CancelError>),
    LookAgain,
}

impl TaskStore {
    /// Cancels task `task_id` (see the module): the task as it ended, `canceled`.
    /// `caller` must be allowed to see the task: to anyone else it is not found.
    pub(crate) async fn cancel(&self, task_id: &str, caller: &Caller) -> Result<Task, CancelError> {
        if self.find_for(task_id, caller).await.is_none() {
            return Err(CancelError::NotFound(task_id.to_owned()));
        }
        for _ in 0..ATTEMPTS {
            if let Step::Done(answer) = self.try_cancel(task_id).await {
                return answer;
            }
        }
        Err(CancelError::Unsettled {
            task_id: task_id.to_owned(),
            why: "it kept changing",
        })
    }

    async fn try_cancel(&self, task_id: &str) -> Step {
        if let Some(stopped) = self.stop_here(task_id).await {
            return match stopped {
                Stopped::Ended { task } => answer(task_id, task),
                Stopped::TooSlow => Step::Done(Err(CancelError::Unsettled {
                    task_id: task_id.to_owned(),
                    why: "its turn did not stop in time",
                })),
                Stopped::NotRunning => Step::LookAgain,
            };
        }
        let Some(cell) = self.find_cell(task_id).await else {
            return Step::Done(Err(CancelError::NotFound(task_id.to_owned())));
        };
        let Some(task) = cell.task() else {
            return Step::Done(Err(CancelError::NotFound(task_id.to_owned())));
        };
        let (revision, owner) = cell.revision();
        let state = task.status.state;
        if state.is_terminal() {
            return not_cancelable(task_id, state);
        }
        if running(state)
            && let (Some(relay), Some(owner)) = (self.relay(), owner.as_deref())
            && Some(owner) != self.replica()
        {
            match relay.ask_cancel(owner, task_id).await {
                Ok(Stopped::Ended { task }) => return answer(task_id, task),
                Ok(Stopped::TooSlow) => {
                    // Its replica could not stop it in time: the store settles it below.
                }
                Ok(Stopped::NotRunning) | Err(_) => {
                    tracing::info!(
                        task_id,
                        owner,
                        "the replica that ran the task does not answer for it; canceling it in the store"
                    );
                }
            }
        }
        self.end_canceled(task_id, revision).await
    }

    /// If a turn of `task_id` runs here: tells it to stop, and waits until it has stored its
    /// end. `None` when none runs here.
    pub(super) async fn stop_here(&self, task_id: &str) -> Option<Stopped> {
        let cell = self.existing(task_id)?;
        let running = cell.running_here()?;
        running.stop.request();
        let mut ended = running.ended;
        if tokio::time::timeout(STOP_WAIT, ended.wait_for(|ended| *ended))
            .await
            .is_err()
        {
            tracing::warn!(task_id, "a canceled turn did not stop in time");
            return Some(Stopped::TooSlow);
        }
        Some(match cell.task() {
            Some(task) => Stopped::Ended { task },
            None => Stopped::NotRunning,
        })
    }

    /// Ends `task_id` `canceled` if it still stands at `revision` and no turn runs it here.
    async fn end_canceled(&self, task_id: &str, revision: u64) -> Step {
        let turn = self.open_turn(task_id).await;
        let Some(task) = turn.task() else {
            return Step::Done(Err(CancelError::NotFound(task_id.to_owned())));
        };
        if turn.revision() != revision || self.is_running_here(task_id) {
            return Step::LookAgain;
        }
        let canceled = canceled(&task);
        let closing = vec![final_update(&canceled)];
        let ended = turn.end(canceled, closing).await;
        if ended.won {
            Step::Done(Ok(ended.task))
        } else {
            Step::LookAgain
        }
    }
}

/// The answer for a task whose turn stopped as `task`: canceled if that is how it ended; a
/// task waiting for input is canceled next; any other end is not cancelable.
fn answer(task_id: &str, task: Task) -> Step {
    match task.status.state {
        TaskState::Canceled => Step::Done(Ok(task)),
        state if state.is_terminal() => not_cancelable(task_id, state),
        _ => Step::LookAgain,
    }
}

fn not_cancelable(task_id: &str, state: TaskState) -> Step {
    Step::Done(Err(CancelError::NotCancelable {
        task_id: task_id.to_owned(),
        state,
    }))
}

/// `task`, canceled now.
fn canceled(task: &Task) -> Task {
    let message = Message::from_agent(vec![Part::text("the task was canceled")])
        .in_task(&task.id, task.context_id.as_deref());
    let mut canceled = task.clone();
    canceled.status = TaskStatus::now_with(TaskState::Canceled, message);
    canceled
}
