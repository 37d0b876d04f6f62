//! `trust:` (an A2A agent's, or `mcp.trust` for all): how its card must be signed, and the
//! keys trusted to sign it, checked when the file is loaded.

use super::{CardTrust, DeploymentError, TrustPolicy};

/// A `trust:` block at `path`, checked: a policy, and for any policy but `off` at least one
/// key that reads (a JWKS file, a JWKS URL, pinned JWKs).
pub(super) fn card_trust(
    file: &str,
    path: &str,
    block: super::file::TrustFile,
) -> Result<CardTrust, DeploymentError> {
    let wrong = |key: &str, message: String| DeploymentError::Shape {
        file: file.to_owned(),
        path: format!("{path}.{key}"),
        message,
    };
    let policy = match block.policy.as_deref() {
        None | Some("off") => TrustPolicy::Off,
        Some("required") => TrustPolicy::Required,
        Some("if_signed") => TrustPolicy::IfSigned,
        Some(other) => {
            return Err(wrong(
                "policy",
                format!("{other:?} is not a policy: use required, if_signed or off"),
            ));
        }
    };
    if let Some(why) = block
        .jwks_url
        .as_deref()
        .and_then(crate::config::not_an_http_url)
    {
        return Err(wrong("jwks_url", why));
    }
    if let Some(jwks) = &block.jwks_file {
        let bytes = std::fs::read(jwks).map_err(|e| {
            wrong(
                "jwks_file",
                format!("cannot read {}: {}", jwks.display(), e.kind()),
            )
        })?;
        let (keys, _) = daedalus_contract::card_signing::KeySet::read(&bytes)
            .map_err(|e| wrong("jwks_file", format!("{}: {e}", jwks.display())))?;
        if keys.is_empty() {
            return Err(wrong(
                "jwks_file",
                format!(
                    "{} holds no ES256, EdDSA or RS256 public key",
                    jwks.display()
                ),
            ));
        }
    }
    let mut keys = Vec::with_capacity(block.keys.len());
    for (i, jwk) in block.keys.iter().enumerate() {
        let text = jwk.to_string();
        let (set, _) = daedalus_contract::card_signing::KeySet::read(text.as_bytes())
            .map_err(|e| wrong(&format!("keys[{i}]"), e.to_string()))?;
        let named = jwk.get("kid").and_then(serde_json::Value::as_str).is_some();
        if set.len() != 1 || !named {
            return Err(wrong(
                &format!("keys[{i}]"),
                "is not an ES256, EdDSA or RS256 public JWK with a kid".to_owned(),
            ));
        }
        keys.push(text);
    }
    let trusts_some = block.jwks_file.is_some() || block.jwks_url.is_some() || !keys.is_empty();
    if policy != TrustPolicy::Off && !trusts_some {
        return Err(wrong(
            "policy",
            "trusts no key: give jwks_file, jwks_url or keys".to_owned(),
        ));
    }
    Ok(CardTrust {
        policy,
        jwks_file: block.jwks_file,
        jwks_url: block.jwks_url,
        keys,
    })
}
