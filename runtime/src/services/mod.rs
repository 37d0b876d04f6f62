//! The services every face calls, and the runtime-wide state they share. Faces translate;
//! these decide.
//!
//! - [`turns`]: the turn service: admission (by bytes), readiness, per-conversation
//!   serialization, a task's rules (its id, whether it exists, is finished, who owns it),
//!   replay, timeouts and cancellation, events, the drain.
//! - [`push`]: push notifications: a task's webhooks, kept beside it, and their deliveries.
//! - [`health`]: can an agent work: its downstream servers and provider, probed.
//! - [`state`]: [`state::Core`], what every face holds: the fleet, the turn service, metrics,
//!   provider preflight, the MCP session book, identity, push.
//!
//! May import: `agents`, `config`, `stores`, `platform`.

pub mod health;
pub mod push;
pub mod state;
pub mod turns;
