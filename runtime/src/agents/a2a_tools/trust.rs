//! An A2A agent's card checked against the trust its entry configures (`trust:`, else
//! `mcp.trust`): the card as received (its JSON, not our model of it) must carry a signature
//! by a trusted key (`required`), or verify if it is signed (`if_signed`). Trusted keys are
//! pinned JWKs, a JWKS file (read at each check) and a JWKS URL (fetched, kept, and fetched
//! again when a signature names a key it lacks); a signature's `jku` is followed only when it
//! is that URL.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use daedalus_contract::card_signing::{
    self, KeySet, SignatureProblem, Trust, Verified, VerifyError,
};
use serde_json::Value;

use crate::config::deployment::{CardTrust, TrustPolicy};

/// How long a JWKS read from its URL is kept.
const JWKS_TTL: Duration = Duration::from_mins(5);
/// A JWKS URL is read again for an unknown `kid` at most this often.
const JWKS_REFETCH: Duration = Duration::from_secs(30);
/// How long reading a JWKS may take.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS read.
const JWKS_MAX_BYTES: usize = 256 << 10;

/// Why a card is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardRefused {
    #[error("its card is not signed, and its trust policy requires a signature")]
    Unsigned,
    #[error("its card's signature is not trusted: {0}")]
    Untrusted(#[source] VerifyError),
    #[error("its trusted keys cannot be read: {0}")]
    Keys(String),
}

/// The check of one A2A agent's cards, with the key set its JWKS URL served last.
#[derive(Debug)]
pub struct TrustCheck {
    trust: CardTrust,
    pinned: KeySet,
    fetched: Mutex<Option<(Instant, KeySet)>>,
}

impl TrustCheck {
    pub fn new(trust: &CardTrust) -> Self {
        let pinned = trust
            .keys
            .iter()
            .filter_map(|jwk| KeySet::read(jwk.as_bytes()).ok())
            .fold(KeySet::default(), |all, (set, _)| all.with(&set));
        Self {
            trust: trust.clone(),
            pinned,
            fetched: Mutex::new(None),
        }
    }

    pub fn policy(&self) -> TrustPolicy {
        self.trust.policy
    }

    /// Whether `card` may be used: `Some` names the key that signed it, `None` when it was
    /// not asked to be signed (or, under `if_signed`, is not).
    pub async fn check(
        &self,
        http: &reqwest::Client,
        card: &Value,
    ) -> Result<Option<Verified>, CardRefused> {
        match self.trust.policy {
            TrustPolicy::Off => return Ok(None),
            TrustPolicy::IfSigned if !card_signing::is_signed(card) => return Ok(None),
            TrustPolicy::Required if !card_signing::is_signed(card) => {
                return Err(CardRefused::Unsigned);
            }
            _ => {}
        }
        let trust = self.trust_now(http, false).await?;
        match card_signing::verify_card(card, &trust) {
            Ok(verified) => Ok(Some(verified)),
            Err(VerifyError::NoValidSignature { problems })
                if self.trust.jwks_url.is_some()
                    && problems
                        .iter()
                        .any(|p| matches!(p, SignatureProblem::UnknownKid(_)))
                    && self.may_refetch() =>
            {
                // A key the URL's set lacked: it may have been published since.
                let trust = self.trust_now(http, true).await?;
                card_signing::verify_card(card, &trust)
                    .map(Some)
                    .map_err(CardRefused::Untrusted)
            }
            Err(e) => Err(CardRefused::Untrusted(e)),
        }
    }

    fn may_refetch(&self) -> bool {
        self.fetched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= JWKS_REFETCH)
    }

    /// The keys trusted now: the pinned ones, the file's, and the URL's (read again when
    /// `refetch`, or when what was read is older than [`JWKS_TTL`]).
    async fn trust_now(&self, http: &reqwest::Client, refetch: bool) -> Result<Trust, CardRefused> {
        let mut keys = self.pinned.clone();
        if let Some(path) = &self.trust.jwks_file {
            let bytes = std::fs::read(path)
                .map_err(|e| CardRefused::Keys(format!("{}: {}", path.display(), e.kind())))?;
            let (set, _) = KeySet::read(&bytes)
                .map_err(|e| CardRefused::Keys(format!("{}: {e}", path.display())))?;
            keys = keys.with(&set);
        }
        let mut by_url = Vec::new();
        if let Some(url) = &self.trust.jwks_url {
            let kept = self
                .fetched
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .filter(|(at, _)| !refetch && at.elapsed() < JWKS_TTL)
                .map(|(_, set)| set.clone());
            let set = if let Some(set) = kept {
                set
            } else {
                let set = fetch_jwks(http, url).await?;
                *self.fetched.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((Instant::now(), set.clone()));
                set
            };
            by_url.push((url.clone(), set));
        }
        Ok(Trust { keys, by_url })
    }
}

/// The key set at `url`, bounded in time and bytes; the error never shows the URL's
/// credentials.
async fn fetch_jwks(http: &reqwest::Client, url: &str) -> Result<KeySet, CardRefused> {
    let shown = crate::config::redact_url(url);
    let failed = |why: String| CardRefused::Keys(format!("the JWKS at {shown} {why}"));
    let mut response = http
        .get(url)
        .timeout(JWKS_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(format!("cannot be read ({})", e.without_url())))?;
    if !response.status().is_success() {
        return Err(failed(format!("answered {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("cannot be read ({})", e.without_url())))?
    {
        if body.len() + chunk.len() > JWKS_MAX_BYTES {
            return Err(failed(format!("is larger than {JWKS_MAX_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    KeySet::read(&body)
        .map(|(set, _)| set)
        .map_err(|e| failed(format!("is not a key set: {e}")))
}
