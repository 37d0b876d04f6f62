//! Downstream MCP servers (Streamable HTTP, via rmcp) as a [`ToolSource`](crate::agents::agent_loop::ToolSource).

mod client;
mod error;
pub mod files;
mod traced_http;

pub use client::{McpServers, McpStatus};
pub use error::McpError;
