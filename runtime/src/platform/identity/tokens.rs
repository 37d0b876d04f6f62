//! Bearer tokens (JWT) checked with `jsonwebtoken`: an asymmetric algorithm (RS, PS, ES,
//! EdDSA; never `none` or HMAC), a key of the issuer's set (by `kid`), the signature, `iss`,
//! `aud`, `exp` and `nbf` (with the configured clock skew) and a `sub`. The key a token
//! embeds or points to (`jwk`, `jku`, `x5u`) is never used.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::plan::TokenPlan;
use super::token_keys::{ALGORITHMS, TokenKeys};

/// The longest token read.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a token is refused; each says what is wrong, never what the token holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token's signing algorithm is not accepted (asymmetric algorithms only)")]
    Algorithm,
    #[error("the token is signed with a key the issuer does not publish")]
    UnknownKey,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is from another issuer")]
    Issuer,
    #[error("the token is for another audience")]
    Audience,
    #[error("the token lacks a required claim (sub, exp, iss, aud)")]
    MissingClaim,
    #[error("the token's tenant claim is not a string")]
    Tenant,
}

/// What a verified token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    pub issuer: String,
    pub subject: String,
    pub scopes: BTreeSet<String>,
    pub tenant: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Scopes>,
    #[serde(flatten)]
    rest: HashMap<String, serde_json::Value>,
}

/// `scp` is a list in some providers' tokens and a space-separated string in others'.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scopes {
    List(Vec<String>),
    Text(String),
}

/// The verifier of one issuer's tokens.
#[derive(Debug)]
pub struct TokenVerifier {
    plan: TokenPlan,
    keys: Arc<TokenKeys>,
    tenant_claim: Option<String>,
}

impl TokenVerifier {
    pub fn new(plan: TokenPlan, keys: Arc<TokenKeys>, tenant_claim: Option<String>) -> Self {
        Self {
            plan,
            keys,
            tenant_claim,
        }
    }

    pub fn plan(&self) -> &TokenPlan {
        &self.plan
    }

    pub fn keys(&self) -> &Arc<TokenKeys> {
        &self.keys
    }

    /// Who `token` was issued to, if it verifies.
    pub async fn verify(&self, token: &str) -> Result<TokenClaims, TokenRefusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenRefusal::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
            ErrorKind::InvalidAlgorithmName | ErrorKind::UnsupportedAlgorithm => {
                TokenRefusal::Algorithm
            }
            // `none` and other names `jsonwebtoken` does not know fail as JSON: say which.
            _ if named_algorithm(token).is_some() => TokenRefusal::Algorithm,
            _ => TokenRefusal::Malformed,
        })?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenRefusal::Algorithm);
        }
        let candidates = self
            .keys
            .candidates(header.kid.as_deref(), header.alg)
            .await;
        if candidates.is_empty() {
            return Err(TokenRefusal::UnknownKey);
        }
        let validation = self.validation(header.alg);
        let mut refusal = TokenRefusal::Signature;
        for key in &candidates {
            match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => return self.claims(data.claims),
                Err(e) => {
                    refusal = refusal_of(e.kind());
                    if refusal != TokenRefusal::Signature {
                        // The signature verified and a claim is wrong: no other key helps.
                        return Err(refusal);
                    }
                }
            }
        }
        Err(refusal)
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[self.plan.issuer.as_str()]);
        validation.set_audience(&[self.plan.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.plan.clock_skew.as_secs();
        validation
    }

    fn claims(&self, claims: Claims) -> Result<TokenClaims, TokenRefusal> {
        if claims.sub.is_empty() {
            return Err(TokenRefusal::MissingClaim);
        }
        let mut scopes: BTreeSet<String> = claims
            .scope
            .iter()
            .flat_map(|s| s.split_whitespace())
            .map(str::to_owned)
            .collect();
        match claims.scp {
            Some(Scopes::List(list)) => scopes.extend(list),
            Some(Scopes::Text(text)) => scopes.extend(text.split_whitespace().map(str::to_owned)),
            None => {}
        }
        let tenant = match self
            .tenant_claim
            .as_deref()
            .and_then(|name| claims.rest.get(name))
        {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(t))
                if !t.is_empty() && t.len() <= super::caller::MAX_TENANT_BYTES =>
            {
                Some(t.clone())
            }
            Some(_) => return Err(TokenRefusal::Tenant),
        };
        Ok(TokenClaims {
            issuer: claims.iss,
            subject: claims.sub,
            scopes,
            tenant,
        })
    }
}

/// The `alg` a token's header names, when the header is JSON with a string `alg`.
fn named_algorithm(token: &str) -> Option<String> {
    use base64::Engine;
    #[derive(Deserialize)]
    struct RawHeader {
        alg: String,
    }
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()?;
    serde_json::from_slice::<RawHeader>(&bytes)
        .ok()
        .map(|h| h.alg)
}

fn refusal_of(kind: &ErrorKind) -> TokenRefusal {
    match kind {
        ErrorKind::ExpiredSignature => TokenRefusal::Expired,
        ErrorKind::ImmatureSignature => TokenRefusal::NotYetValid,
        ErrorKind::InvalidIssuer => TokenRefusal::Issuer,
        ErrorKind::InvalidAudience => TokenRefusal::Audience,
        ErrorKind::MissingRequiredClaim(_) => TokenRefusal::MissingClaim,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => TokenRefusal::Algorithm,
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => TokenRefusal::Signature,
        _ => TokenRefusal::Malformed,
    }
}
