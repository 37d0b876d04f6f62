//! The MCP registry document Daedalus reads at `GET /.well-known/mcp/server.json`: every agent
//! served, as an MCP server entry (`pallas-mcp-interface.txt` §1).

use serde::{Deserialize, Serialize};

/// The `$schema` every entry names.
pub const SERVER_SCHEMA_URL: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";
/// The `_meta` key of the registry's own metadata.
pub const OFFICIAL_META_KEY: &str = "io.modelcontextprotocol.registry/official";

/// The registry response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerList {
    pub servers: Vec<ServerEntry>,
}

/// One agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerEntry {
    pub server: ServerDetail,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<EntryMeta>,
}

/// The server entry proper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerDetail {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// `{namespace}/{slug}`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    pub remotes: Vec<Remote>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ModelInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Icon {
    pub src: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<String>,
}

/// An endpoint: `{"type": "streamable-http", "url": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    #[serde(rename = "type")]
    pub transport: String,
    pub url: String,
}

/// The model behind the agent, from `model_capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub model: String,
    pub vision: bool,
    pub context_window: u32,
    pub max_output_tokens: u32,
}

/// The `_meta` key under which an agent's personalities are listed.
pub const PERSONALITIES_META_KEY: &str = "dev.daedalus.runtime/personalities";

/// `_meta`: the registry's own status of the entry, and what the runtime adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    #[serde(rename = "io.modelcontextprotocol.registry/official")]
    pub official: Official,
    /// The agent's personalities (a call picks one with `personality`).
    #[serde(
        rename = "dev.daedalus.runtime/personalities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub personalities: Option<Personalities>,
    /// The MCP revisions the endpoint serves, newest first (2026-07-28 statelessly, the older
    /// ones with `initialize` and a session).
    #[serde(
        rename = "dev.daedalus.runtime/protocolVersions",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub protocol_versions: Vec<String>,
}

/// An agent's personalities, as the registry lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Personalities {
    /// The one a call that names none gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    pub available: Vec<PersonalityEntry>,
}

/// One personality.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonalityEntry {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Official {
    pub status: String,
    pub updated_at: String,
    pub is_latest: bool,
}
