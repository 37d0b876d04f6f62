//! The Daedalus agent runtime.
//!
//! [`run`] serves the runtime contract on a bound listener until a shutdown future resolves,
//! then drains: new tasks get 503, in-flight ones get the grace period to finish, and whatever
//! is left is canceled. `main` only parses the configuration, sets up logging and calls it.
//!
//! Who owns what:
//!
//! - [`faces`]: the wires. [`faces::a2a`] (`POST /` and discovery) and [`faces::mcp`]
//!   (the MCP server per agent Daedalus talks to) translate requests into turn requests and
//!   answers back; neither imports the other.
//! - [`turns`]: the turn service every face calls: admission, per-conversation serialization,
//!   task memory and replay, timeouts and cancellation, events and the metrics of a turn.
//! - [`core`]: the runtime-wide state the faces share (fleet, turn service, metrics,
//!   preflight, lifecycle).
//! - [`agent_loop`]: one agent's turn: the LLM tool loop ([`agent_loop::LlmAgent`]), the
//!   passthrough model, sub-agents and the toolbox; [`fleet`] builds every agent of the
//!   deployment.
//! - [`mcp_client`]: the client of downstream MCP servers the agent loop calls tools on.
//! - [`mcp_sessions`]: the MCP sessions every agent's MCP face holds, runtime-wide, bounded in
//!   count and bytes, with their handshake and idle timeouts.
//! - [`llm`]: the OpenAI and Anthropic providers; [`sampling`]: typed sampling parameters and
//!   what each provider takes; [`sessions`]: the conversation stores; [`config`]: the typed,
//!   validated configuration.
//! - [`run`](mod@run): serving until shutdown, then draining; [`startup`]: the named steps it
//!   takes, and shutdown; [`reload`]: a new deployment
//!   swapped in whole on SIGHUP, or refused.

pub mod a2a_tools;
pub mod agent_health;
pub mod agent_loop;
pub mod bearer;
pub mod config;
pub mod core;
pub mod downstream_auth;
pub mod faces;
pub mod fleet;
pub mod identity;
pub mod kv_bucket;
pub mod lifecycle;
pub mod llm;
pub mod mcp_client;
pub mod mcp_sessions;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod push;
pub mod sampling;
pub mod sessions;
pub mod task_store;
pub mod telemetry;
pub mod tool_schema;
pub mod turns;

pub use lifecycle::{PREFLIGHT_TTL, RunError, run, run_core, run_reloading};
