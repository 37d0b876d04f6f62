//! The keys bearer tokens are signed with: a JWKS from the issuer's OIDC discovery document,
//! a JWKS URL or a file, kept in memory. A token naming a key the set lacks fetches the set
//! again (one fetch at a time for every caller, at most one per [`REFETCH_EVERY`]); the set
//! is also fetched again in the background once it is [`STALE_AFTER`] old. A fetch that fails
//! keeps the keys already held: a provider that is down does not stop the runtime, tokens
//! signed with known keys keep working, and new keys fail closed.
//!
//! Only asymmetric signing keys are kept: a JWKS `oct` key (which would let a public key
//! serve as an HMAC secret) or an encryption key is never used to verify a token.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use super::plan::KeySource;
use daedalus_contract::redact::{redact_text, redact_url};

/// A token naming an unknown key fetches the set again at most this often.
pub const REFETCH_EVERY: Duration = Duration::from_secs(1);
/// The set is fetched again in the background once it is this old.
pub const STALE_AFTER: Duration = Duration::from_mins(5);
/// One fetch (discovery and JWKS together) gets this long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or JWKS read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// The algorithms an RSA key verifies.
const RSA: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// The signing algorithms tokens may use: asymmetric only.
pub const ALGORITHMS: [Algorithm; 9] = [
    RSA[0],
    RSA[1],
    RSA[2],
    RSA[3],
    RSA[4],
    RSA[5],
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// One verification key.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: Option<String>,
    /// The algorithm the JWKS pins the key to, if it does.
    pub alg: Option<Algorithm>,
    /// The algorithms the key's type and curve can verify.
    pub verifies: &'static [Algorithm],
    pub key: DecodingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Whether this key may verify a token signed with `alg`.
    pub fn takes(&self, alg: Algorithm) -> bool {
        self.verifies.contains(&alg) && self.alg.is_none_or(|pinned| pinned == alg)
    }
}

/// The keys held now, and when they were fetched.
#[derive(Debug, Default)]
struct KeySet {
    keys: Vec<SigningKey>,
    fetched: Option<Instant>,
}

/// The token signing keys of one source.
#[derive(Debug)]
pub struct TokenKeys {
    source: KeySource,
    issuer: String,
    http: reqwest::Client,
    set: ArcSwap<KeySet>,
    /// Held while a fetch runs: concurrent callers wait for it instead of fetching again.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    fetches: AtomicU64,
    failures: AtomicU64,
}

/// Why a fetch of the keys failed (the keys held stay).
#[derive(Debug, thiserror::Error)]
#[error("cannot fetch the token signing keys from {from}: {why}")]
pub struct FetchError {
    from: String,
    why: String,
}

/// The keys' state, for `/healthz`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeysHealth {
    pub keys: usize,
    pub fetched_secs_ago: Option<u64>,
    pub fetches: u64,
    pub failed_fetches: u64,
}

#[derive(Debug, Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

impl TokenKeys {
    /// The keys of `source` for tokens of `issuer`, none fetched yet.
    pub fn new(source: KeySource, issuer: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        Self {
            source,
            issuer: issuer.to_owned(),
            http,
            set: ArcSwap::from_pointee(KeySet::default()),
            fetching: tokio::sync::Mutex::new(None),
            fetches: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    pub fn source(&self) -> &KeySource {
        &self.source
    }

    /// The keys that may verify a token signed with `alg` naming `kid`: fetched again first
    /// when none does and the last fetch is old enough.
    pub async fn candidates(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Vec<SigningKey> {
        let found = self.matching(kid, alg);
        let set = self.set.load();
        if set.fetched.is_some_and(|at| at.elapsed() > STALE_AFTER) {
            let keys = Arc::clone(self);
            tokio::spawn(async move {
                keys.refetch(STALE_AFTER).await;
            });
        }
        if !found.is_empty() {
            return found;
        }
        self.refetch(REFETCH_EVERY).await;
        self.matching(kid, alg)
    }

    fn matching(&self, kid: Option<&str>, alg: Algorithm) -> Vec<SigningKey> {
        self.set
            .load()
            .keys
            .iter()
            .filter(|k| match kid {
                Some(kid) => k.kid.as_deref() == Some(kid),
                None => true,
            })
            .filter(|k| k.takes(alg))
            .cloned()
            .collect()
    }

    /// Fetches the set again unless a fetch began less than `every` ago (concurrent callers
    /// share one fetch).
    pub async fn refetch(&self, every: Duration) {
        let mut last = self.fetching.lock().await;
        if last.is_some_and(|at| at.elapsed() < every) {
            return;
        }
        *last = Some(Instant::now());
        if let Err(e) = self.fetch().await {
            tracing::warn!(error = %e, "keeping the token signing keys held");
        }
    }

    /// Fetches the set now; on failure the keys held stay.
    pub async fn fetch(&self) -> Result<usize, FetchError> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fetched = tokio::time::timeout(FETCH_TIMEOUT * 2, self.read_set())
            .await
            .unwrap_or_else(|_| {
                Err(FetchError {
                    from: self.source_label(),
                    why: format!("no answer within {:?}", FETCH_TIMEOUT * 2),
                })
            });
        match fetched {
            Ok(set) => {
                let keys = usable_keys(&set);
                let count = keys.len();
                self.set.store(Arc::new(KeySet {
                    keys,
                    fetched: Some(Instant::now()),
                }));
                tracing::debug!(keys = count, "token signing keys fetched");
                Ok(count)
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    pub fn health(&self) -> KeysHealth {
        let set = self.set.load();
        KeysHealth {
            keys: set.keys.len(),
            fetched_secs_ago: set.fetched.map(|at| at.elapsed().as_secs()),
            fetches: self.fetches.load(Ordering::Relaxed),
            failed_fetches: self.failures.load(Ordering::Relaxed),
        }
    }

    fn source_label(&self) -> String {
        match &self.source {
            KeySource::Discovery(url) | KeySource::Url(url) => redact_url(url),
            KeySource::File(path) => path.display().to_string(),
        }
    }

    async fn read_set(&self) -> Result<JwkSet, FetchError> {
        match &self.source {
            KeySource::File(path) => read_file(path),
            KeySource::Url(url) => self.get_json(url).await,
            KeySource::Discovery(url) => {
                let discovery: Discovery = self.get_json(url).await?;
                if discovery.issuer.trim_end_matches('/') != self.issuer.trim_end_matches('/') {
                    return Err(FetchError {
                        from: redact_url(url),
                        why: format!(
                            "the document is for issuer {}, not {}",
                            redact_url(&discovery.issuer),
                            redact_url(&self.issuer)
                        ),
                    });
                }
                self.get_json(&discovery.jwks_uri).await
            }
        }
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, FetchError> {
        let failed = |why: String| FetchError {
            from: redact_url(url),
            why: redact_text(&why),
        };
        let response = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(failed(format!("answered {}", response.status())));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(failed("the document is too large".to_owned()));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(failed("the document is too large".to_owned()));
        }
        serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))
    }
}

fn read_file(path: &Path) -> Result<JwkSet, FetchError> {
    let failed = |why: String| FetchError {
        from: path.display().to_string(),
        why,
    };
    let text = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    serde_json::from_slice(&text).map_err(|e| failed(e.to_string()))
}

/// The signing keys of `set` this runtime will verify with.
fn usable_keys(set: &JwkSet) -> Vec<SigningKey> {
    set.keys.iter().filter_map(usable_key).collect()
}

fn usable_key(jwk: &Jwk) -> Option<SigningKey> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let verifies: &'static [Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &RSA,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            &[Algorithm::EdDSA]
        }
        // Symmetric keys never verify a token: HMAC with a published key is forgery.
        _ => return None,
    };
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(pinned) => Some(
            Algorithm::try_from(pinned)
                .ok()
                .filter(|a| verifies.contains(a))?,
        ),
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(SigningKey {
        kid: jwk.common.key_id.clone(),
        alg,
        verifies,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(json: &str) -> Vec<SigningKey> {
        usable_keys(&serde_json::from_str(json).unwrap())
    }

    const RSA_N: &str = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        let keys = set(&format!(
            r#"{{"keys":[
                {{"kty":"RSA","kid":"rsa","use":"sig","alg":"RS256","n":"{RSA_N}","e":"AQAB"}},
                {{"kty":"RSA","kid":"enc","use":"enc","n":"{RSA_N}","e":"AQAB"}},
                {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}},
                {{"kty":"OKP","kid":"ed","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}},
                {{"kty":"RSA","kid":"mislabelled","alg":"HS256","n":"{RSA_N}","e":"AQAB"}}
            ]}}"#
        ));
        let kids: Vec<_> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
        assert_eq!(kids, ["rsa", "ed"]);
        let rsa = &keys[0];
        assert!(rsa.takes(Algorithm::RS256));
        assert!(!rsa.takes(Algorithm::PS256), "pinned to RS256");
        assert!(!rsa.takes(Algorithm::HS256));
        assert!(keys[1].takes(Algorithm::EdDSA));
        assert!(!keys[1].takes(Algorithm::ES256));
    }

    #[tokio::test]
    async fn a_source_that_does_not_answer_keeps_what_is_held_and_says_so_without_secrets() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://user:pw@{}/jwks?token=abc",
            closed.local_addr().unwrap()
        );
        drop(closed);
        let keys = TokenKeys::new(KeySource::Url(url), "https://idp");
        let e = keys.fetch().await.unwrap_err().to_string();
        assert!(!e.contains("pw") && !e.contains("abc"), "{e}");
        assert_eq!(keys.health().keys, 0);
        assert_eq!(keys.health().failed_fetches, 1);
    }
}
