//! The runtime's faces: each turns one wire into calls of the turn service
//! ([`crate::turns`]) and the results back. Faces never import each other.
//!
//! - [`contract`]: the runtime contract's HTTP face (`POST /`, `/health`, the agent card and
//!   manifest);
//! - [`mcp`]: the MCP face Daedalus talks to, one MCP server per agent.

pub mod contract;
pub mod mcp;
