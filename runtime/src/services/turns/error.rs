//! Why a turn did not run ([`TurnError`]), and what kind of refusal that is
//! ([`TurnErrorKind`]): the faces match the kind, once each, to their wire's refusal, and read
//! what a refusal carries (the limit, the budget, the task) through the error's accessors.

use super::Limit;
use crate::agents::budgets::BudgetRefusal;

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
    #[error("runtime is running as many tasks as it may ({0}); retry later")]
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
    StoreUnavailable(String),
    #[error("{0}")]
    TaskTooLarge(String),
    /// No task of that id the caller may see (it may be someone else's).
    #[error("task {0} not found")]
    TaskNotFound(String),
    /// The context belongs to someone else.
    #[error("context {0} not found")]
    ContextNotFound(String),
}

/// What kind of refusal a [`TurnError`] is, as a caller acts on it. Each variant of the error
/// has exactly one kind ([`TurnError::kind`]); a face maps kinds, never variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnErrorKind {
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
    /// Shutdown's grace ran out on a durable turn: it goes on from its last step elsewhere.
    HandedOff,
    /// A turn limit has no room now ([`TurnError::limit`]).
    Busy,
    /// A budget is spent for now ([`TurnError::budget_refusal`]).
    OverBudget,
    /// The task store cannot record tasks now.
    StoreUnavailable,
    /// The runtime failed: an agent that is gone, a worker that stopped.
    Internal,
}

impl TurnError {
    /// The kind of refusal this is.
    pub fn kind(&self) -> TurnErrorKind {
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
            Self::HandedOff(_) => TurnErrorKind::HandedOff,
            Self::Busy(_) => TurnErrorKind::Busy,
            Self::OverBudget(_) => TurnErrorKind::OverBudget,
            Self::StoreUnavailable(_) => TurnErrorKind::StoreUnavailable,
            Self::UnknownAgent(_) | Self::WorkerStopped(_) => TurnErrorKind::Internal,
        }
    }

    /// The limit that had no room ([`TurnErrorKind::Busy`]).
    pub fn limit(&self) -> Option<Limit> {
        match self {
            Self::Busy(limit) => Some(*limit),
            _ => None,
        }
    }

    /// The budget that is spent ([`TurnErrorKind::OverBudget`]).
    pub fn budget_refusal(&self) -> Option<&BudgetRefusal> {
        match self {
            Self::OverBudget(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// The task the refusal is about, where it names one.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::ContextMismatch { task_id, .. } | Self::TaskFinished { task_id, .. } => {
                Some(task_id)
            }
            Self::HandedOff(id)
            | Self::TaskMoved(id)
            | Self::TaskBusy(id)
            | Self::TaskNotFound(id) => Some(id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::agents::budgets::{LimitKind, ScopeKind};

    fn every_variant() -> Vec<(TurnError, TurnErrorKind)> {
        let refusal = BudgetRefusal {
            scope: ScopeKind::Tenant,
            name: "acme".into(),
            limit: LimitKind::TokensPerDay,
            value: 10,
            retry_after: Some(Duration::from_secs(5)),
        };
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
            (TurnError::Busy(Limit::Memory), TurnErrorKind::Busy),
            (TurnError::OverBudget(refusal), TurnErrorKind::OverBudget),
            (
                TurnError::CanceledByShutdown,
                TurnErrorKind::CanceledByShutdown,
            ),
            (TurnError::HandedOff("t".into()), TurnErrorKind::HandedOff),
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
                TurnError::StoreUnavailable("down".into()),
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
    fn each_refusal_has_its_kind_and_carries_what_the_faces_read() {
        for (error, kind) in every_variant() {
            assert_eq!(error.kind(), kind, "{error:?}");
            assert_eq!(error.limit().is_some(), kind == TurnErrorKind::Busy);
            assert_eq!(
                error.budget_refusal().is_some(),
                kind == TurnErrorKind::OverBudget
            );
            if kind == TurnErrorKind::HandedOff {
                assert_eq!(error.task_id(), Some("t"), "a hand-off names its task");
            }
        }
        assert_eq!(TurnError::Busy(Limit::Memory).limit(), Some(Limit::Memory));
    }
}
