//! `GET /.well-known/mcp/server.json`: the agents this runtime serves, as MCP registry entries
//! in the shape of `pallas-mcp-interface.txt` §1 (checked against `mcp-registry.schema.json`).
//!
//! Names are `{namespace}/{slug}` (the agent key, underscores as hyphens); each entry's one
//! remote is the agent's own port (`http://{host}:{port}/mcp`) when it has one, else its path on
//! the main port; `capabilities` come from `model_capabilities`. The document is built from the
//! faces actually mounted, once their ports are bound.

use daedalus_contract::model::registry::{
    EntryMeta, Icon, ModelInfo, Official, Personalities, PersonalityEntry, Remote,
    SERVER_SCHEMA_URL, ServerDetail, ServerEntry, ServerList,
};

use crate::config::deployment::{AgentDef, Deployment, ModelRef};

/// What the registry needs to know about where agents are reachable.
#[derive(Debug, Clone)]
pub struct Addresses {
    /// The main port's public base URL, without a trailing slash.
    pub main_base: String,
    /// The host name for agents' own ports (`host` in agents.yaml).
    pub host: String,
}

/// The registry name's namespace: `namespace`, else `local.<deployment name>`.
fn namespace(deployment: &Deployment) -> String {
    deployment.namespace.clone().unwrap_or_else(|| {
        let name: String = deployment
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        format!("local.{name}")
    })
}

/// The MCP endpoint Daedalus should use for `def`.
pub fn remote_url(def: &AgentDef, addresses: &Addresses) -> String {
    match def.port {
        Some(port) => format!("http://{}:{port}{}", addresses.host, super::OWN_PORT_PATH),
        None => format!(
            "{}{}",
            addresses.main_base,
            super::main_port_path(&def.name)
        ),
    }
}

fn model_name(model: &ModelRef) -> String {
    match model {
        ModelRef::Passthrough => "passthrough".to_owned(),
        ModelRef::Tck => "tck".to_owned(),
        ModelRef::OpenAi(m) | ModelRef::Anthropic(m) => m.clone(),
    }
}

/// The registry document for `served` agents of `deployment`.
pub fn document(
    deployment: &Deployment,
    served: &[&AgentDef],
    addresses: &Addresses,
    updated_at: &str,
) -> ServerList {
    let namespace = namespace(deployment);
    let caps = deployment.model_capabilities;
    let servers = served
        .iter()
        .map(|def| ServerEntry {
            server: ServerDetail {
                schema: Some(SERVER_SCHEMA_URL.to_owned()),
                name: format!("{namespace}/{}", def.name.replace('_', "-")),
                title: Some(def.title.clone()),
                description: Some(def.description.clone()).filter(|d| !d.is_empty()),
                version: Some(deployment.version.clone()),
                icons: def
                    .icon
                    .iter()
                    .map(|src| Icon {
                        src: src.clone(),
                        sizes: Some("any".to_owned()),
                    })
                    .collect(),
                remotes: vec![Remote {
                    transport: "streamable-http".to_owned(),
                    url: remote_url(def, addresses),
                }],
                capabilities: Some(ModelInfo {
                    model: model_name(&def.model),
                    vision: caps.vision,
                    context_window: caps.context_window,
                    max_output_tokens: caps.max_output_tokens,
                }),
            },
            meta: Some(EntryMeta {
                official: Official {
                    status: "active".to_owned(),
                    updated_at: updated_at.to_owned(),
                    is_latest: true,
                },
                personalities: (!def.personalities.is_empty()).then(|| Personalities {
                    default: def.default_personality.clone(),
                    available: def
                        .personalities
                        .iter()
                        .map(|(name, p)| PersonalityEntry {
                            name: name.clone(),
                            description: p.description.clone(),
                        })
                        .collect(),
                }),
                protocol_versions: super::served_revisions(),
            }),
        })
        .collect();
    ServerList { servers }
}
