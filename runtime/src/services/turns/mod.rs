//! The turn service: the one way a turn runs, whichever face asked for it.
//!
//! A face (the contract's `POST /` and its SSE, the standard A2A bindings, the MCP face) turns its
//! wire into a [`TurnRequest`] and the [`Task`](daedalus_contract::Task) it gets back into its wire; everything in
//! between is decided here:
//!
//! - admission: 503-class refusals while starting or draining, and by bytes, against the
//!   process's and the agent's turn memory with a count rail ([`admission`],
//!   [`TurnError::Busy`]);
//! - one turn at a time per conversation, shared by every face ([`conversation_locks`]);
//! - for A2A tasks: the task id and context rules, continuation of an `input-required` task,
//!   replay of a redelivered `messageId`, and every event of the turn in the task's log, all
//!   written through the turn's one handle on the [`crate::stores::tasks`] (which also cancels
//!   by id, wherever the turn runs);
//! - the turn runs on the runtime's task tracker, so a caller that goes away does not stop
//!   it; under `REQUEST_TIMEOUT`, and canceled when shutdown's grace period ends ([`drain`]);
//! - events: every turn's loop events feed the metrics, then the face's own listener
//!   (progress, SSE);
//! - the metrics of a turn: `daedalus_runtime_tasks_total{state}` and its duration.
//!
//! Files: [`service`] (admission, starting a turn, its handle), [`begin`] (a task's turn
//! opened: replay, the context rules, its record, its begin), [`execute`] (a turn's run and
//! end: the agent under timeout and cancellation), [`drain`] (shutdown),
//! [`stream`] (the one translator from loop events to stream events), [`handle`] (what a face
//! holds while a turn runs).
//!
//! [`drain`]: TurnService::drain

pub mod admission;
mod begin;
pub mod conversation_locks;
mod drain;
mod error;
mod execute;
mod following;
pub mod handle;
pub mod history;
mod opening;
pub mod readiness;
pub mod record;
mod request;
mod service;
mod standard;
pub mod stream;
mod task;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use admission::{Budgets, Limit};
pub use conversation_locks::ConversationKey;
pub use error::{TurnError, TurnErrorKind};
pub use following::{FollowError, Following};
pub use handle::{EndedStream, TaskHandle};
pub use readiness::{Phase, Readiness};
pub use request::{Memory, Origin, TurnRequest};
pub use service::TurnService;
pub use standard::SendError;
pub use stream::EventReceiver;

/// How long a turn canceled by the request timeout or shutdown gets to reach a safe point.
pub(super) const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// The limits the service runs turns under.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// Longest a turn may run (`REQUEST_TIMEOUT`); past it the turn fails.
    pub request_timeout: Duration,
    /// What running turns may hold (`TURN_MEMORY`, `AGENT_TURN_MEMORY`,
    /// `MAX_CONCURRENT_TASKS`).
    pub budgets: Budgets,
    /// Tasks kept (`MAX_TASKS`).
    pub max_tasks: usize,
    /// Bytes they may hold (`TASK_MEMORY`).
    pub task_memory_bytes: usize,
    /// How long a task is kept after it last changed (`TASK_TTL`).
    pub task_ttl: Duration,
    /// Resumes of one turn before it is failed (`TURN_MAX_RESUMES`).
    pub max_resumes: u32,
}

pub use crate::stores::tasks::CancelError;

// The vocabulary a face speaks to the turn service, wherever its type is defined: what a
// request may ask of its turn, the budgets' refusals and rate-limit items, a list's query, and
// why a subscription is refused.
pub use crate::agents::agent_loop::TurnControls;
pub use crate::agents::budgets::{BudgetRefusal, LimitKind, ScopeKind};
pub use crate::stores::tasks::{ListError, ListQuery, SubscribeRefusal};
