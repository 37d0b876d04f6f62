//! Trace context and export: the contract crate's [`daedalus_contract::telemetry`], which the
//! proxy shares. The runtime's spans: `invoke_agent <agent>` per turn (the turn service),
//! `chat <model>` per model call and `execute_tool <tool>` per tool call (the agent loop),
//! `get_health` (the MCP face).

pub use daedalus_contract::telemetry::*;
