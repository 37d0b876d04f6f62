//! Consuming tasks from the agent's durable consumer, one delivery at a time per worker.
//!
//! - [`worker`]: a slot's loop: pull one task when idle and the runtime is up, work it, repeat;
//! - [`job`]: one delivery worked to its end (answer, retry, hand back, give up);
//! - [`give_up`]: the one answer of a task given up, whichever path gives it up;
//! - [`intake`]: reading a task message (ids, or why it cannot be a task);
//! - [`disposition`]: what a runtime answer means (result, poison, retry);
//! - [`lease`]: the ack-wait lease kept by progress acks while a task is worked;
//! - [`inbox`]: a worker's one subscription for its pulls, acks and stores;
//! - [`durable`]: storing a result or dead letter until the stream acknowledges it;
//! - [`advisories`]: tasks the server stopped delivering, answered as given up;
//! - [`keeper`]: the agent's consumer kept in place (created again if deleted);
//! - [`shared`]: what every worker shares.

pub mod advisories;
pub(crate) mod budget_wait;
pub mod disposition;
pub(crate) mod durable;
pub mod give_up;
pub mod inbox;
pub mod intake;
pub(crate) mod job;
pub mod keeper;
pub mod lease;
pub mod shared;
pub mod worker;
