//! `AgentCard`: what `GET /.well-known/agent-card.json` returns.
//!
//! The contract needs name, description, version and at least one skill with id, name,
//! description and tags; A2A v1 also needs `supportedInterfaces`, `capabilities` and the default
//! modes. The reader also takes a v0.3 card (`url` + `preferredTransport` +
//! `additionalInterfaces`) and turns it into `supportedInterfaces`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Metadata;

/// A self-describing manifest for an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "AgentCardIn")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    pub capabilities: AgentCapabilities,
    /// Opaque security scheme definitions, carried through untouched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_requirements: Option<Vec<Value>>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// JWS signatures of the card (A2A §8.4); see `card_signing` for what they cover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<AgentCardSignature>,
}

/// One JWS signature of a card (A2A §4.4.7): the base64url protected header and signature;
/// the payload, the card's canonical form, is detached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCardSignature {
    pub protected: String,
    pub signature: String,
    /// The JWS unprotected header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Metadata>,
}

/// A URL, binding and protocol version at which the agent can be reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    #[serde(alias = "protocol_binding", alias = "transport")]
    pub protocol_binding: String,
    #[serde(default, alias = "protocol_version")]
    pub protocol_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// Who provides the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

/// Optional capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(
        default,
        alias = "push_notifications",
        skip_serializing_if = "Option::is_none"
    )]
    pub push_notifications: Option<bool>,
    #[serde(
        default,
        alias = "extended_agent_card",
        skip_serializing_if = "Option::is_none"
    )]
    pub extended_agent_card: Option<bool>,
    /// Opaque extension declarations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<Value>>,
}

/// A distinct thing the agent can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<String>>,
    #[serde(
        default,
        alias = "input_modes",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_modes: Option<Vec<String>>,
    #[serde(
        default,
        alias = "output_modes",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_modes: Option<Vec<String>>,
}

impl AgentCard {
    /// Whether at least one skill has a non-empty id, name, description and tag: the
    /// contract's card requirement.
    pub fn has_complete_skill(&self) -> bool {
        self.skills.iter().any(|s| {
            !s.id.is_empty()
                && !s.name.is_empty()
                && !s.description.is_empty()
                && s.tags.iter().any(|t| !t.is_empty())
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentCardIn {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default, alias = "supported_interfaces")]
    supported_interfaces: Vec<AgentInterface>,
    #[serde(default)]
    provider: Option<AgentProvider>,
    #[serde(default)]
    version: String,
    #[serde(default, alias = "documentation_url")]
    documentation_url: Option<String>,
    #[serde(default)]
    capabilities: AgentCapabilities,
    #[serde(default, alias = "security_schemes")]
    security_schemes: Option<Metadata>,
    #[serde(default, alias = "security_requirements", alias = "security")]
    security_requirements: Option<Vec<Value>>,
    #[serde(default, alias = "default_input_modes")]
    default_input_modes: Vec<String>,
    #[serde(default, alias = "default_output_modes")]
    default_output_modes: Vec<String>,
    #[serde(default)]
    skills: Vec<AgentSkill>,
    #[serde(default, alias = "icon_url")]
    icon_url: Option<String>,
    #[serde(default)]
    signatures: Vec<AgentCardSignature>,
    // v0.3 interface fields.
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    preferred_transport: Option<String>,
    #[serde(default)]
    protocol_version: Option<String>,
    #[serde(default)]
    additional_interfaces: Vec<AgentInterface>,
}

impl From<AgentCardIn> for AgentCard {
    fn from(c: AgentCardIn) -> Self {
        let mut supported_interfaces = c.supported_interfaces;
        if supported_interfaces.is_empty() {
            let version = c.protocol_version.unwrap_or_else(|| "0.3".to_owned());
            if let Some(url) = c.url {
                supported_interfaces.push(AgentInterface {
                    url,
                    protocol_binding: c.preferred_transport.unwrap_or_else(|| "JSONRPC".into()),
                    protocol_version: version.clone(),
                    tenant: None,
                });
            }
            for mut extra in c.additional_interfaces {
                if extra.protocol_version.is_empty() {
                    extra.protocol_version.clone_from(&version);
                }
                if !supported_interfaces.contains(&extra) {
                    supported_interfaces.push(extra);
                }
            }
        }
        Self {
            name: c.name,
            description: c.description,
            supported_interfaces,
            provider: c.provider,
            version: c.version,
            documentation_url: c.documentation_url,
            capabilities: c.capabilities,
            security_schemes: c.security_schemes,
            security_requirements: c.security_requirements,
            default_input_modes: c.default_input_modes,
            default_output_modes: c.default_output_modes,
            skills: c.skills,
            icon_url: c.icon_url,
            signatures: c.signatures,
        }
    }
}
