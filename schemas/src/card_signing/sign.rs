//! Signing a card (A2A §8.4.2): a JWS with a detached payload, the card's canonical bytes,
//! under a protected header naming `alg`, `typ: JOSE`, `kid` and, when the key has one, `jku`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::canonical::{CanonicalError, signed_bytes};
use super::keys::SigningKey;
use crate::model::AgentCardSignature;

/// A signature's protected header (RFC 7515 §4.1), as this runtime writes and reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProtectedHeader {
    pub alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jku: Option<String>,
    /// Extensions the verifier must understand (RFC 7515 §4.1.11): none are, so a header
    /// with any is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crit: Option<Vec<String>>,
}

/// Why a card was not signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error("the card has no canonical form: {0}")]
    Canonical(#[from] CanonicalError),
    #[error("the key {kid} did not sign")]
    Key { kid: String },
}

/// `card` (its JSON, as it will be served) with a signature by each of `keys` in place of
/// any it had.
pub fn sign_card(card: &Value, keys: &[&SigningKey]) -> Result<Value, SignError> {
    let payload = URL_SAFE_NO_PAD.encode(signed_bytes(card)?);
    let mut signatures = Vec::with_capacity(keys.len());
    for key in keys {
        signatures.push(signature(&payload, key)?);
    }
    let mut signed = card.clone();
    if let Value::Object(fields) = &mut signed {
        fields.remove("signatures");
        if !signatures.is_empty() {
            let signatures = signatures
                .into_iter()
                .map(|s| serde_json::json!({"protected": s.protected, "signature": s.signature}))
                .collect();
            fields.insert("signatures".to_owned(), Value::Array(signatures));
        }
    }
    Ok(signed)
}

/// The signature by `key` of the base64url `payload`.
fn signature(payload: &str, key: &SigningKey) -> Result<AgentCardSignature, SignError> {
    let header = ProtectedHeader {
        alg: key.algorithm().name().to_owned(),
        typ: Some("JOSE".to_owned()),
        kid: Some(key.kid().to_owned()),
        jku: key.jku().map(str::to_owned),
        crit: None,
    };
    let refused = || SignError::Key {
        kid: key.kid().to_owned(),
    };
    let protected = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).map_err(|_| refused())?);
    let input = format!("{protected}.{payload}");
    let signature =
        jsonwebtoken::crypto::sign(input.as_bytes(), key.private(), key.algorithm().jose())
            .map_err(|_| refused())?;
    Ok(AgentCardSignature {
        protected,
        signature,
        header: None,
    })
}
