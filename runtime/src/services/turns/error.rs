//! Why a turn did not run ([`TurnError`]), and what kind of refusal that is
//! ([`TurnErrorKind`]): the faces match the kind, once each, to their wire's refusal; a kind
//! carries what its refusal needs (the limit, the budget, the task handed off), so no face
//! reaches back into the error for it.

use super::Limit;
use crate::agents::budgets::BudgetRefusal;
use crate::stores::tasks::{BackendError, BeginError};

/// Why a turn did not run (a turn that ran and failed is a `failed` task, not an error).
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("message.{field} {why}")]
    InvalidMessage {
        field: &'static str,
        why: &'static str,
    },
    #[error("task {task_id} belongs to context {known}, not {given}")]
    ContextMismatch {
        task_id: String,
        known: String,
        given: String,
    },
    #[error("no agent named {0} in this deployment")]
    UnknownAgent(String),
    #[error("runtime is starting; not ready for tasks yet")]
    NotReady,
    #[error("runtime is shutting down; send the task to another replica")]
    ShuttingDown,
    /// A turn limit has no room for the turn now.
    #[error("runtime is running as many tasks as it may ({0}); retry in 1 s")]
    Busy(Limit),
    /// A budget of the caller (its own, its tenant's, or the agent's) is spent for now.
    #[error("{0}")]
    OverBudget(BudgetRefusal),
    #[error("runtime is shutting down; the task was canceled before it finished")]
    CanceledByShutdown,
    /// Shutdown's grace ran out on a durable turn: it stays running in the task store from
    /// its last checkpoint, for another replica (or this one, restarted) to resume.
    #[error(
        "runtime is shutting down; task {0} goes on from its last step on another replica (or on this one after its restart): poll it"
    )]
    HandedOff(String),
    #[error("the task's worker stopped: {0}")]
    WorkerStopped(String),
    #[error("task {0} changed on another replica as this turn began; send the message again")]
    TaskMoved(String),
    /// A turn of the task runs (here or on another replica): it takes a message again when
    /// it asks for input.
    #[error(
        "task {0} is working: a turn of it runs (another message continued it); it takes a message again when it asks for input"
    )]
    TaskBusy(String),
    /// A standard binding's message for a task that ended (the contract binding's starts a
    /// new turn of it).
    #[error("task {task_id} is {state}, and a finished task takes no more messages")]
    TaskFinished {
        task_id: String,
        state: daedalus_contract::TaskState,
    },
    #[error("the task store cannot record tasks now ({0}); retry later")]
    StoreUnavailable(#[source] BackendError),
    #[error("{0}")]
    TaskTooLarge(String),
    /// No task of that id the caller may see (it may be someone else's).
    #[error("task {0} not found")]
    TaskNotFound(String),
    /// The context belongs to someone else.
    #[error("context {0} not found")]
    ContextNotFound(String),
}

/// A turn that could not begin in the task store.
impl From<BeginError> for TurnError {
    fn from(error: BeginError) -> Self {
        match error {
            BeginError::Moved(task_id) => Self::TaskMoved(task_id),
            e @ BeginError::TooLarge { .. } => Self::TaskTooLarge(e.to_string()),
            BeginError::Unavailable(e) => Self::StoreUnavailable(e),
        }
    }
}

/// What kind of refusal a [`TurnError`] is, as a caller acts on it. Each variant of the error
/// has exactly one kind ([`TurnError::kind`]); a face maps kinds, never variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnErrorKind<'e> {
    /// The message is not one a turn can take (a field, a context that contradicts its task).
    InvalidMessage,
    /// The task would be larger than the task store takes.
    TooLarge,
    /// No task or context of that id that the caller may see.
    NotFound,
    /// The task moved on first: another message of it, a turn of it running, or its end.
    TaskConflict,
    /// The runtime is still starting.
    NotReady,
    /// The runtime is shutting down and takes no new turn.
    ShuttingDown,
    /// Shutdown's grace ran out before the turn finished: it was canceled.
    CanceledByShutdown,
    /// Shutdown's grace ran out on a durable turn: the task (its id) goes on from its last
    /// step elsewhere.
    HandedOff(&'e str),
    /// This turn limit has no room now.
    Busy(Limit),
    /// This budget is spent for now.
    OverBudget(&'e BudgetRefusal),
    /// The task store cannot record tasks now.
    StoreUnavailable,
    /// The runtime failed: an agent that is gone, a worker that stopped.
    Internal,
}

impl TurnError {
    /// The kind of refusal this is.
    pub fn kind(&self) -> TurnErrorKind<'_> {
        match self {
            Self::InvalidMessage { .. } | Self::ContextMismatch { .. } => {
                TurnErrorKind::InvalidMessage
            }
            Self::TaskTooLarge(_) => TurnErrorKind::TooLarge,
            Self::TaskNotFound(_) | Self::ContextNotFound(_) => TurnErrorKind::NotFound,
            Self::TaskMoved(_) | Self::TaskBusy(_) | Self::TaskFinished { .. } => {
                TurnErrorKind::TaskConflict
            }
            Self::NotReady => TurnErrorKind::NotReady,
            Self::ShuttingDown => TurnErrorKind::ShuttingDown,
            Self::CanceledByShutdown => TurnErrorKind::CanceledByShutdown,
            Self::HandedOff(task_id) => TurnErrorKind::HandedOff(task_id),
            Self::Busy(limit) => TurnErrorKind::Busy(*limit),
            Self::OverBudget(refusal) => TurnErrorKind::OverBudget(refusal),
            Self::StoreUnavailable(_) => TurnErrorKind::StoreUnavailable,
            Self::UnknownAgent(_) | Self::WorkerStopped(_) => TurnErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::agents::budgets::{LimitKind, ScopeKind};

    fn spent() -> BudgetRefusal {
        BudgetRefusal {
            scope: ScopeKind::Tenant,
            name: "acme".into(),
            limit: LimitKind::TokensPerDay,
            value: 10,
            retry_after: Some(Duration::from_secs(5)),
            rate_limits: Vec::new(),
        }
    }

    /// Each variant, and the kind it is (`refusal` is the one an `OverBudget` carries).
    fn every_variant(refusal: &BudgetRefusal) -> Vec<(TurnError, TurnErrorKind<'_>)> {
        vec![
            (
                TurnError::InvalidMessage {
                    field: "parts",
                    why: "is empty",
                },
                TurnErrorKind::InvalidMessage,
            ),
            (
                TurnError::ContextMismatch {
                    task_id: "t".into(),
                    known: "a".into(),
                    given: "b".into(),
                },
                TurnErrorKind::InvalidMessage,
            ),
            (TurnError::UnknownAgent("x".into()), TurnErrorKind::Internal),
            (TurnError::NotReady, TurnErrorKind::NotReady),
            (TurnError::ShuttingDown, TurnErrorKind::ShuttingDown),
            (
                TurnError::Busy(Limit::Memory),
                TurnErrorKind::Busy(Limit::Memory),
            ),
            (
                TurnError::OverBudget(refusal.clone()),
                TurnErrorKind::OverBudget(refusal),
            ),
            (
                TurnError::CanceledByShutdown,
                TurnErrorKind::CanceledByShutdown,
            ),
            (
                TurnError::HandedOff("t".into()),
                TurnErrorKind::HandedOff("t"),
            ),
            (
                TurnError::WorkerStopped("x".into()),
                TurnErrorKind::Internal,
            ),
            (
                TurnError::TaskMoved("t".into()),
                TurnErrorKind::TaskConflict,
            ),
            (TurnError::TaskBusy("t".into()), TurnErrorKind::TaskConflict),
            (
                TurnError::TaskFinished {
                    task_id: "t".into(),
                    state: daedalus_contract::TaskState::Completed,
                },
                TurnErrorKind::TaskConflict,
            ),
            (
                TurnError::StoreUnavailable(BackendError::new("sqlite", "down")),
                TurnErrorKind::StoreUnavailable,
            ),
            (
                TurnError::TaskTooLarge("big".into()),
                TurnErrorKind::TooLarge,
            ),
            (TurnError::TaskNotFound("t".into()), TurnErrorKind::NotFound),
            (
                TurnError::ContextNotFound("c".into()),
                TurnErrorKind::NotFound,
            ),
        ]
    }

    #[test]
    fn each_refusal_has_its_kind_and_the_kind_carries_what_the_faces_read() {
        let refusal = spent();
        for (error, kind) in every_variant(&refusal) {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
        assert_ne!(
            TurnError::Busy(Limit::Memory).kind(),
            TurnError::Busy(Limit::Turns).kind(),
            "a busy refusal names its limit"
        );
    }
}
