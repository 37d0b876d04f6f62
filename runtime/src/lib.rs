//! The Daedalus agent runtime.
//!
//! [`run()`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.
//!
//! The top-level modules are rooms in layers: a room imports only rooms below it, never one
//! that imports it back, directly or around a circle (`test-kit/tests/architecture.rs`
//! enforces it). From the top:
//!
//! - [`lifecycle`]: the process's life: [`run`](fn@lifecycle::run), the named steps of
//!   [`startup`](lifecycle::startup) and shutdown, [`reload`](lifecycle::reload) (a new
//!   deployment swapped in whole on SIGHUP, or refused), [`serve`](lifecycle::serve) (the
//!   accept loop of every port).
//! - [`faces`]: the wires. [`faces::a2a`] (the contract binding on `POST /` and the standard
//!   A2A bindings: JSON-RPC, HTTP+JSON, gRPC) and [`faces::mcp`] (the MCP server per agent
//!   Daedalus talks to) translate requests into typed calls of the services and answers back;
//!   neither imports the other.
//! - [`agent_health`]: can an agent work (its downstream servers and provider, probed).
//! - [`core`]: the runtime-wide state the faces share: fleet, turn service, metrics,
//!   preflight, the MCP session book, identity, push.
//! - [`turns`]: the turn service every face calls: admission, readiness, per-conversation
//!   serialization, task memory and replay, timeouts and cancellation, events.
//! - [`push`]: push notifications, a task's webhooks and their deliveries.
//! - [`fleet`]: every agent of the deployment, built; [`agent_loop`]: one agent's turn (the
//!   LLM tool loop [`agent_loop::LlmAgent`], the passthrough model, sub-agents, the toolbox);
//!   [`a2a_tools`]: other A2A agents as tools; [`mcp_client`]: the client of downstream MCP
//!   servers; [`downstream_auth`]: the runtime's own credential for them.
//! - [`budgets`]: what each principal, tenant and agent may spend (`budgets:`), held at a
//!   turn's admission and before each of its model calls.
//! - [`llm`]: the OpenAI and Anthropic providers; [`sampling`]: typed sampling parameters and
//!   what each provider takes.
//! - [`config`]: the typed, validated configuration.
//! - The three stores, told apart by what they hold: [`conversation_store`] (a conversation's
//!   message rows, across tasks and restarts), [`task_store`] (A2A tasks, their event logs and
//!   replicas), [`mcp_session_book`] (the live MCP sessions of every agent's MCP face, bounded
//!   in count and bytes).
//! - [`metrics`], [`identity`] (who is calling), and the leaves: [`bearer`], [`kv_bucket`],
//!   [`sqlite_writer`] (the SQLite stores' one writer thread and group commit),
//!   [`memory`], [`telemetry`], [`tool_schema`]; [`migrate`] (`migrate-module`) stands apart.

pub mod a2a_tools;
pub mod agent_health;
pub mod agent_loop;
pub mod bearer;
pub mod budgets;
pub mod config;
pub mod conversation_store;
pub mod core;
pub mod downstream_auth;
pub mod faces;
pub mod fleet;
pub mod identity;
pub mod kv_bucket;
pub mod lifecycle;
pub mod llm;
pub mod mcp_client;
pub mod mcp_session_book;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod push;
pub mod sampling;
pub mod sqlite_writer;
pub mod task_store;
pub mod telemetry;
pub mod tool_schema;
pub mod turns;

pub use lifecycle::{PREFLIGHT_TTL, RunError, run, run_core, run_reloading};
