//! Downstream MCP servers (Streamable HTTP, via rmcp) as a [`ToolSource`](crate::agent::ToolSource).

mod client;

pub use client::{McpServers, McpStatus};
