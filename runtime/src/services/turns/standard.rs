//! A send of the standard A2A bindings (JSON-RPC, HTTP+JSON, gRPC), under the spec's task
//! rules, whichever binding read it:
//!
//! - a new task's id is the server's;
//! - a `taskId` must name a task the caller can see (`TaskNotFound` otherwise, never a new
//!   task of the client's naming: that is the contract binding's rule, for the proxy), and
//!   one that takes more messages (`TaskFinished` for one that ended);
//! - a webhook of the send (`configuration.taskPushNotificationConfig`) is set up before the
//!   turn begins, so it hears every state, and dropped again when a new task's turn does not
//!   begin. The task is checked before the webhook is added, so a refused send never adds
//!   one to a task that exists.

use daedalus_contract::TaskPushNotificationConfig;

use super::{TaskHandle, TurnError, TurnRequest, TurnService};
use crate::services::push::{Push, PushError};

/// Why a standard send did not start its turn.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The turn service refused it (a task rule, admission, the store).
    #[error(transparent)]
    Turn(#[from] TurnError),
    /// Its webhook could not be set up.
    #[error(transparent)]
    Push(#[from] PushError),
}

impl TurnService {
    /// Starts the turn of a standard send (`turn`, made by [`TurnRequest::standard`]), with
    /// its webhook, if it has one, set up on `push` first.
    pub async fn send_standard(
        &self,
        push: &Push,
        turn: TurnRequest,
        webhook: Option<TaskPushNotificationConfig>,
    ) -> Result<TaskHandle, SendError> {
        // Time-ordered (UUID v7): a new task's row and index entries go at the end of the
        // store's b-trees, where turns committed together share pages.
        let fresh = uuid::Uuid::now_v7().to_string();
        Box::pin(self.send_standard_as(push, turn, webhook, fresh)).await
    }

    /// As [`Self::send_standard`], a new task named `fresh`.
    pub(super) async fn send_standard_as(
        &self,
        push: &Push,
        mut turn: TurnRequest,
        webhook: Option<TaskPushNotificationConfig>,
        fresh: String,
    ) -> Result<TaskHandle, SendError> {
        let named = turn.message.task_id.clone().filter(|id| !id.is_empty());
        let new_task = named.is_none();
        let task_id = if let Some(task_id) = named {
            self.takes_more_messages(&task_id, &turn).await?;
            task_id
        } else {
            turn.message.task_id = Some(fresh.clone());
            turn.names_a_new_task = true;
            fresh
        };
        let pushed = if let Some(config) = webhook {
            push.set_up(&turn.caller, &task_id, config).await?;
            new_task
        } else {
            false
        };
        match Box::pin(self.start(turn)).await {
            Ok(handle) => Ok(handle),
            Err(refused) => {
                if pushed {
                    push.forget(&task_id).await;
                }
                Err(refused.into())
            }
        }
    }

    /// Task `task_id` exists for the caller of `turn` and has not ended. The turn checks it
    /// again as it begins (another message may end the task in between); this check is the
    /// one a webhook waits for.
    async fn takes_more_messages(
        &self,
        task_id: &str,
        turn: &TurnRequest,
    ) -> Result<(), TurnError> {
        match self.find_task(task_id, &turn.caller).await {
            None => Err(TurnError::TaskNotFound(task_id.to_owned())),
            Some(task) if task.status.state.is_terminal() => Err(TurnError::TaskFinished {
                task_id: task_id.to_owned(),
                state: task.status.state,
            }),
            Some(_) => Ok(()),
        }
    }
}
