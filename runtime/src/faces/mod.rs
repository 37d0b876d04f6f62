//! The runtime's faces: each turns one wire into calls of the turn service
//! ([`crate::services::turns`]) and the results back. Faces never import each other.
//!
//! - [`a2a`]: the A2A face: the runtime contract's binding (`POST /`, `/health`, the agent card
//!   and manifest, SSE) and, beside it, the standard A2A bindings;
//! - [`mcp`]: the MCP face Daedalus talks to, one MCP server per agent.
//!
//! May import: `services`, `config`, `platform`.

pub mod a2a;
pub mod mcp;
