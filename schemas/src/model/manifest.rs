//! `RuntimeContract`: the manifest at `GET /.well-known/runtime-contract.json`.

use serde::{Deserialize, Serialize};

/// A runtime's declaration of the contract version, level and capabilities it implements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContract {
    /// `v1`, `v1.1`, ...
    #[serde(alias = "contract_version")]
    pub contract_version: String,
    pub runtime: ManifestRuntime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ManifestServer>,
    #[serde(default)]
    pub capabilities: ManifestCapabilities,
    #[serde(alias = "conformance_level")]
    pub conformance_level: u8,
}

/// Which runtime this is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestRuntime {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where the runtime serves the contract's endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_card_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_path: Option<String>,
}

/// Optional features of the contract the runtime implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[expect(
    clippy::struct_excessive_bools,
    reason = "mirrors the manifest's JSON, one flag each"
)]
pub struct ManifestCapabilities {
    #[serde(default)]
    pub streaming: bool,
    #[serde(default)]
    pub trace_context: bool,
    #[serde(default)]
    pub graceful_shutdown: bool,
    #[serde(default)]
    pub context_compaction: bool,
}

impl RuntimeContract {
    /// The major version of `contractVersion` (`v1.2` ⇒ 1), if it is well formed.
    pub fn major_version(&self) -> Option<u32> {
        let rest = self.contract_version.strip_prefix('v')?;
        rest.split('.').next()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(version: &str) -> RuntimeContract {
        RuntimeContract {
            contract_version: version.into(),
            runtime: ManifestRuntime {
                name: "x".into(),
                version: "1".into(),
                description: None,
            },
            server: None,
            capabilities: ManifestCapabilities::default(),
            conformance_level: 1,
        }
    }

    #[test]
    fn major_version_reads_v_prefixed_versions() {
        assert_eq!(manifest("v1").major_version(), Some(1));
        assert_eq!(manifest("v1.3").major_version(), Some(1));
        assert_eq!(manifest("v2").major_version(), Some(2));
        assert_eq!(manifest("1").major_version(), None);
        assert_eq!(manifest("vx").major_version(), None);
    }
}
