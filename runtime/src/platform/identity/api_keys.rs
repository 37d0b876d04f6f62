//! API keys, as `AUTH_API_KEYS_FILE` lists them: each key only as its SHA-256 (the file holds
//! no secret), with the principal it stands for, a tenant and scopes. A presented key is
//! hashed and compared with every entry in constant time. The file is read at startup and
//! again on SIGHUP; a file that does not read keeps the keys already loaded.
//!
//! ```yaml
//! keys:
//!   - sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
//!     principal: ci-bot
//!     tenant: acme
//!     scopes: [a2a]
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The longest key accepted (anything longer is not one of ours).
const MAX_KEY_BYTES: usize = 512;
/// The most keys one file may hold.
const MAX_KEYS: usize = 10_000;

/// The keys of one file, as loaded.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    hash: [u8; 32],
    holder: KeyHolder,
}

/// Whom a key stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHolder {
    pub principal: String,
    pub tenant: Option<String>,
    pub scopes: BTreeSet<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    keys: Vec<EntryFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    sha256: String,
    principal: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

/// Why a key file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeysError {
    #[error("cannot read the API key file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the API key file {path} is not a list of keys: {why}")]
    Shape { path: PathBuf, why: String },
    #[error("the API key file {path}, key {index} ({principal}): {why}")]
    Entry {
        path: PathBuf,
        index: usize,
        principal: String,
        why: &'static str,
    },
}

impl ApiKeys {
    /// The keys of `path`.
    pub fn load(path: &Path) -> Result<Self, ApiKeysError> {
        let text = std::fs::read_to_string(path).map_err(|source| ApiKeysError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, ApiKeysError> {
        let shape = |why: String| ApiKeysError::Shape {
            path: path.to_owned(),
            why,
        };
        let file: KeysFile = if text.trim().is_empty() {
            KeysFile { keys: Vec::new() }
        } else {
            serde_saphyr::from_str(text).map_err(|e| shape(e.to_string()))?
        };
        if file.keys.len() > MAX_KEYS {
            return Err(shape(format!("more than {MAX_KEYS} keys")));
        }
        let mut entries = Vec::with_capacity(file.keys.len());
        for (index, key) in file.keys.into_iter().enumerate() {
            let wrong = |why: &'static str| ApiKeysError::Entry {
                path: path.to_owned(),
                index,
                principal: key.principal.clone(),
                why,
            };
            let principal = key.principal.trim().to_owned();
            if principal.is_empty() || principal.len() > 256 {
                return Err(wrong("the principal must be 1 to 256 bytes"));
            }
            if key
                .tenant
                .as_deref()
                .is_some_and(|t| t.len() > super::caller::MAX_TENANT_BYTES)
            {
                return Err(wrong("the tenant must be at most 256 bytes"));
            }
            let hash = parse_hash(&key.sha256)
                .ok_or_else(|| wrong("sha256 must be 64 hex digits (the key's SHA-256)"))?;
            if entries.iter().any(|e: &Entry| e.hash == hash) {
                return Err(wrong("the same key is listed twice"));
            }
            entries.push(Entry {
                hash,
                holder: KeyHolder {
                    principal,
                    tenant: key
                        .tenant
                        .map(|t| t.trim().to_owned())
                        .filter(|t| !t.is_empty()),
                    scopes: key
                        .scopes
                        .into_iter()
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect(),
                },
            });
        }
        Ok(Self { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whom `presented` stands for, if it is one of the keys. Every entry is compared, in
    /// constant time, whichever matches.
    pub fn holder(&self, presented: &str) -> Option<&KeyHolder> {
        if presented.is_empty() || presented.len() > MAX_KEY_BYTES {
            return None;
        }
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.hash.ct_eq(&hash)) {
                found = Some(&entry.holder);
            }
        }
        found
    }
}

/// The hex SHA-256 of `key`: what the key file lists for it.
pub fn hash_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .fold(String::new(), |mut hex, b| {
            use std::fmt::Write;
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Result<ApiKeys, ApiKeysError> {
        ApiKeys::parse(text, Path::new("keys.yaml"))
    }

    #[test]
    fn a_listed_key_names_its_holder_and_nothing_else_does() {
        let text = format!(
            "keys:\n  - sha256: {}\n    principal: ci-bot\n    tenant: acme\n    scopes: [a2a, admin]\n  - sha256: {}\n    principal: other\n",
            hash_hex("k-1"),
            hash_hex("k-2").to_uppercase()
        );
        let keys = keys(&text).unwrap();
        assert_eq!(keys.len(), 2);
        let holder = keys.holder("k-1").unwrap();
        assert_eq!(holder.principal, "ci-bot");
        assert_eq!(holder.tenant.as_deref(), Some("acme"));
        assert!(holder.scopes.contains("admin"));
        assert_eq!(keys.holder("k-2").unwrap().principal, "other");
        for wrong in ["", "k-3", "k-1 ", &"k".repeat(10_000)] {
            assert!(keys.holder(wrong).is_none(), "{wrong:.10}");
        }
    }

    #[test]
    fn a_wrong_entry_is_named_and_loads_nothing() {
        let cases = [
            ("keys:\n  - sha256: abc\n    principal: a\n", "64 hex"),
            (
                &format!("keys:\n  - sha256: {}\n    principal: ''\n", hash_hex("x")) as &str,
                "principal",
            ),
            (
                &format!(
                    "keys:\n  - sha256: {h}\n    principal: a\n  - sha256: {h}\n    principal: b\n",
                    h = hash_hex("x")
                ),
                "twice",
            ),
            ("keys:\n  - key: plain\n    principal: a\n", "not a list"),
        ];
        for (text, says) in cases {
            let e = keys(text).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("keys.yaml"), "{e}");
        }
    }

    #[test]
    fn an_empty_file_has_no_keys() {
        assert!(keys("").unwrap().is_empty());
        assert!(keys("keys: []").unwrap().is_empty());
    }
}
