//! The Daedalus agent runtime.
//!
//! [`run()`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.
//!
//! The crate is seven areas in layers, each a folder whose `//!` says what it owns and what
//! it may import; an area imports only areas below it (`test-kit/tests/architecture.rs` holds
//! them to it, and holds the rooms inside each area to layers of their own). From the top:
//!
//! - [`lifecycle`]: the process's life: [`run`](fn@lifecycle::run), the named steps of
//!   [`startup`](lifecycle::startup) and shutdown, [`reload`](lifecycle::reload) (a new
//!   deployment swapped in whole on SIGHUP, or refused), [`serve`](lifecycle::serve).
//! - [`faces`]: the wires. [`faces::a2a`] (the contract binding on `POST /` and the standard
//!   A2A bindings: JSON-RPC, HTTP+JSON, gRPC) and [`faces::mcp`] (the MCP server per agent
//!   Daedalus talks to) translate requests into typed calls of the services and answers
//!   back; neither imports the other.
//! - [`services`]: what the faces call, and decide nothing without: the turn service, push,
//!   agent health, and the runtime-wide state they share.
//! - [`agents`]: the deployment's agents and one agent's turn: the fleet, the LLM tool loop,
//!   the model providers, downstream MCP servers and A2A agents as tools, budgets.
//! - [`config`]: the typed configuration, validated once before anything binds.
//! - [`stores`]: what is kept: tasks, conversations, MCP sessions; the KV bucket and the
//!   SQLite writer they share.
//! - [`platform`]: identity, metrics, telemetry, and the small leaves everything uses.

pub mod agents;
pub mod config;
pub mod faces;
pub mod lifecycle;
pub mod platform;
pub mod services;
pub mod stores;

pub use lifecycle::{PREFLIGHT_TTL, RunError, run, run_core, run_reloading};
