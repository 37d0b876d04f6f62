//! Verifying a card (A2A §8.4.3) against keys the verifier chose: at least one signature
//! must verify over the card's canonical bytes with a trusted key of its `kid`. A `jku` is
//! followed only to a key set the verifier configured; `none`, HMAC and any algorithm but
//! ES256, EdDSA and RS256 are refused, and so is a key whose type is not the header's `alg`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::canonical::{CanonicalError, signed_bytes};
use super::keys::{Algorithm, KeySet};
use super::sign::ProtectedHeader;

/// What the verifier trusts: its keys, and key sets by the URL a `jku` may name.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// Keys trusted whatever the signature's `jku` (pinned keys, a JWKS file).
    pub keys: KeySet,
    /// Key sets by their URL: a signature whose `jku` is one of them is checked against it.
    pub by_url: Vec<(String, KeySet)>,
}

impl Trust {
    /// The keys a signature with `jku` may be checked against: the configured set at that
    /// URL (and the pinned keys) when it is one, else none at all.
    fn keys_for(&self, jku: Option<&str>) -> Result<KeySet, SignatureProblem> {
        let all_urls = || {
            self.by_url
                .iter()
                .fold(self.keys.clone(), |all, (_, set)| all.with(set))
        };
        match jku {
            None => Ok(all_urls()),
            Some(url) => self
                .by_url
                .iter()
                .find(|(configured, _)| configured == url)
                .map(|(_, set)| self.keys.clone().with(set))
                .ok_or_else(|| SignatureProblem::UntrustedJku(url.to_owned())),
        }
    }
}

/// A card that verified: which key signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub kid: String,
    pub alg: Algorithm,
}

/// Why one signature did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureProblem {
    #[error("a signature that is not a JWS (protected header, signature)")]
    Malformed,
    #[error("a signature with `alg` {0}: only ES256, EdDSA and RS256 are accepted")]
    Algorithm(String),
    #[error("a signature with critical header extensions ({0})")]
    Critical(String),
    #[error("a signature with no `kid`")]
    NoKid,
    #[error("a signature whose `jku` ({0}) is not a key set this verifier trusts")]
    UntrustedJku(String),
    #[error("a signature by key {0}, which is not trusted")]
    UnknownKid(String),
    #[error("a signature by key {kid} that does not verify")]
    Invalid { kid: String },
}

/// Why a card is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the card is not signed")]
    Unsigned,
    #[error("the card has no canonical form: {0}")]
    Canonical(#[from] CanonicalError),
    #[error("no signature verifies: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoValidSignature { problems: Vec<SignatureProblem> },
}

/// The signatures of a card, as its JSON holds them.
#[derive(serde::Deserialize)]
struct CardSignature {
    protected: String,
    signature: String,
}

/// Whether `card` (its JSON as received) carries a signature that verifies against `trust`.
pub fn verify_card(card: &Value, trust: &Trust) -> Result<Verified, VerifyError> {
    let signatures = match card.get("signatures") {
        None | Some(Value::Null) => return Err(VerifyError::Unsigned),
        Some(Value::Array(items)) if items.is_empty() => return Err(VerifyError::Unsigned),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(VerifyError::NoValidSignature {
                problems: vec![SignatureProblem::Malformed],
            });
        }
    };
    let payload = URL_SAFE_NO_PAD.encode(signed_bytes(card)?);
    let mut problems = Vec::with_capacity(signatures.len());
    for signature in signatures {
        match verify_one(signature, &payload, trust) {
            Ok(verified) => return Ok(verified),
            Err(problem) => problems.push(problem),
        }
    }
    Err(VerifyError::NoValidSignature { problems })
}

/// Whether `card` is signed at all (a `signatures` array with at least one entry).
pub fn is_signed(card: &Value) -> bool {
    card.get("signatures")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

/// The protected header of each of `card`'s signatures that has one that reads.
pub fn headers(card: &Value) -> Vec<ProtectedHeader> {
    card.get("signatures")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| serde_json::from_value::<CardSignature>(s.clone()).ok())
        .filter_map(|s| header(&s.protected).ok())
        .collect()
}

fn header(protected: &str) -> Result<ProtectedHeader, SignatureProblem> {
    let bytes = URL_SAFE_NO_PAD
        .decode(protected.trim_end_matches('='))
        .map_err(|_| SignatureProblem::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| SignatureProblem::Malformed)
}

fn verify_one(
    signature: &Value,
    payload: &str,
    trust: &Trust,
) -> Result<Verified, SignatureProblem> {
    let signature: CardSignature =
        serde_json::from_value(signature.clone()).map_err(|_| SignatureProblem::Malformed)?;
    let header = header(&signature.protected)?;
    let alg = Algorithm::named(&header.alg)
        .filter(|alg| alg.name() == header.alg)
        .ok_or_else(|| SignatureProblem::Algorithm(header.alg.chars().take(20).collect()))?;
    if let Some(crit) = &header.crit {
        return Err(SignatureProblem::Critical(crit.join(", ")));
    }
    let kid = header.kid.ok_or(SignatureProblem::NoKid)?;
    let keys = trust.keys_for(header.jku.as_deref())?;
    let input = format!("{}.{payload}", signature.protected);
    let named: Vec<_> = keys.named(&kid).collect();
    if named.is_empty() {
        return Err(SignatureProblem::UnknownKid(kid));
    }
    // A key of another type is never tried with this header's algorithm.
    let verifies = named
        .iter()
        .filter(|key| key.algorithm() == alg)
        .any(|key| {
            jsonwebtoken::crypto::verify(
                &signature.signature,
                input.as_bytes(),
                key.decoding(),
                alg.jose(),
            ) == Ok(true)
        });
    if verifies {
        return Ok(Verified { kid, alg });
    }
    Err(SignatureProblem::Invalid { kid })
}
