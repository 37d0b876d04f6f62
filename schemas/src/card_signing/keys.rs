//! Keys: the private key that signs a card (from a PEM file or a JWK: ES256 on P-256,
//! EdDSA on Ed25519, RS256), its public half as a JWK, and the public keys a verifier trusts
//! (a JWKS, pinned JWKs). A private key is never shown: not by `Debug`, not in an error.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse, ThumbprintHash,
};
use jsonwebtoken::{DecodingKey, EncodingKey};

/// The signature algorithms a card may be signed with: asymmetric only (an HMAC "signature"
/// proves nothing to a reader holding the key, and `none` nothing at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl Algorithm {
    /// Its JOSE name (`alg`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Es256 => "ES256",
            Self::EdDsa => "EdDSA",
            Self::Rs256 => "RS256",
        }
    }

    /// The algorithm a JOSE `alg` names, if it is one cards may be signed with.
    pub fn named(alg: &str) -> Option<Self> {
        match alg {
            "ES256" => Some(Self::Es256),
            "EdDSA" | "Ed25519" => Some(Self::EdDsa),
            "RS256" => Some(Self::Rs256),
            _ => None,
        }
    }

    pub(super) fn jose(self) -> jsonwebtoken::Algorithm {
        match self {
            Self::Es256 => jsonwebtoken::Algorithm::ES256,
            Self::EdDsa => jsonwebtoken::Algorithm::EdDSA,
            Self::Rs256 => jsonwebtoken::Algorithm::RS256,
        }
    }

    /// The algorithm a public key is for, by its type and curve.
    fn of_key(params: &AlgorithmParameters) -> Option<Self> {
        match params {
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                Some(Self::Es256)
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Some(Self::EdDsa)
            }
            AlgorithmParameters::RSA(_) => Some(Self::Rs256),
            _ => None,
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a key cannot be used. Never carries the key's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("neither a PEM private key nor a private JWK")]
    NotAKey,
    #[error("a public key, where a private key is needed")]
    PublicOnly,
    #[error("a {0} key: cards are signed with ES256 (P-256), EdDSA (Ed25519) or RS256")]
    Unsupported(String),
    #[error("the key does not read as a {0} key")]
    Unusable(&'static str),
    #[error("the key's `alg` is {stated}, its type is for {actual}")]
    AlgorithmMismatch { stated: String, actual: Algorithm },
    #[error("not a JWK set (`{{\"keys\": [...]}}`), a JWK or a list of JWKs")]
    NotAKeySet,
}

/// A key that signs cards, with the `kid` (and the optional `jku`) its signatures name.
#[derive(Clone)]
pub struct SigningKey {
    alg: Algorithm,
    kid: String,
    jku: Option<String>,
    private: EncodingKey,
    public: Jwk,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .field("jku", &self.jku)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key in `bytes` (a PEM private key, or a private JWK), named `kid` (else the JWK's
    /// own `kid`, else its RFC 7638 thumbprint), with the `jku` its signatures carry.
    pub fn read(bytes: &[u8], kid: Option<&str>, jku: Option<&str>) -> Result<Self, KeyError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| KeyError::NotAKey)?
            .trim();
        let (alg, private, stated_kid) = if text.starts_with('{') {
            let jwk: PrivateJwk = serde_json::from_str(text).map_err(|_| KeyError::NotAKey)?;
            let (alg, private) = jwk.encoding_key()?;
            (alg, private, jwk.kid)
        } else if text.contains("-----BEGIN") {
            let (alg, private) = pem_key(text)?;
            (alg, private, None)
        } else {
            return Err(KeyError::NotAKey);
        };
        let mut public = Jwk::from_encoding_key(&private, alg.jose())
            .map_err(|_| KeyError::Unusable(alg.name()))?;
        // Proves the key signs: a key that reads but cannot sign is refused now, not at the
        // first card.
        jsonwebtoken::crypto::sign(b"probe", &private, alg.jose())
            .map_err(|_| KeyError::Unusable(alg.name()))?;
        let kid = match kid.map(str::to_owned).or(stated_kid) {
            Some(kid) => kid,
            None => public
                .thumbprint(ThumbprintHash::SHA256)
                .map_err(|_| KeyError::Unusable(alg.name()))?,
        };
        public.common.key_id = Some(kid.clone());
        public.common.public_key_use = Some(PublicKeyUse::Signature);
        Ok(Self {
            alg,
            kid,
            jku: jku.map(str::to_owned),
            private,
            public,
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    pub fn jku(&self) -> Option<&str> {
        self.jku.as_deref()
    }

    /// Its public half, as a JWK with its `kid`, `alg` and `use: sig`.
    pub fn public_jwk(&self) -> &Jwk {
        &self.public
    }

    pub(super) fn private(&self) -> &EncodingKey {
        &self.private
    }
}

/// The key of a PEM file: PKCS#8 (EC P-256, Ed25519 or RSA) or PKCS#1 (RSA).
fn pem_key(text: &str) -> Result<(Algorithm, EncodingKey), KeyError> {
    if text.contains("PUBLIC KEY-----") {
        return Err(KeyError::PublicOnly);
    }
    let bytes = text.as_bytes();
    if text.contains("-----BEGIN RSA PRIVATE KEY-----") {
        return EncodingKey::from_rsa_pem(bytes)
            .map(|k| (Algorithm::Rs256, k))
            .map_err(|_| KeyError::Unusable("RS256"));
    }
    if text.contains("-----BEGIN EC PRIVATE KEY-----") {
        return Err(KeyError::Unsupported(
            "SEC1 EC (convert it to PKCS#8: openssl pkcs8 -topk8 -nocrypt)".to_owned(),
        ));
    }
    let signs = |alg: Algorithm, key: EncodingKey| {
        jsonwebtoken::crypto::sign(b"probe", &key, alg.jose())
            .ok()
            .map(|_| (alg, key))
    };
    EncodingKey::from_ec_pem(bytes)
        .ok()
        .and_then(|k| signs(Algorithm::Es256, k))
        .or_else(|| {
            EncodingKey::from_ed_pem(bytes)
                .ok()
                .and_then(|k| signs(Algorithm::EdDsa, k))
        })
        .or_else(|| {
            EncodingKey::from_rsa_pem(bytes)
                .ok()
                .and_then(|k| signs(Algorithm::Rs256, k))
        })
        .ok_or_else(|| KeyError::Unsupported("PEM".to_owned()))
}

/// A private JWK (RFC 7518 §6): the members a signing key needs.
#[derive(serde::Deserialize)]
struct PrivateJwk {
    kty: String,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    d: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    p: Option<String>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    dp: Option<String>,
    #[serde(default)]
    dq: Option<String>,
    #[serde(default)]
    qi: Option<String>,
}

impl PrivateJwk {
    fn encoding_key(&self) -> Result<(Algorithm, EncodingKey), KeyError> {
        let (alg, key) = match (self.kty.as_str(), self.crv.as_deref()) {
            ("EC", Some("P-256")) => (Algorithm::Es256, self.p256()?),
            ("OKP", Some("Ed25519")) => (Algorithm::EdDsa, self.ed25519()?),
            ("RSA", _) => (Algorithm::Rs256, self.rsa()?),
            (kty, crv) => {
                return Err(KeyError::Unsupported(match crv {
                    Some(crv) => format!("{kty} {crv}"),
                    None => kty.to_owned(),
                }));
            }
        };
        if let Some(stated) = &self.alg
            && Algorithm::named(stated) != Some(alg)
        {
            return Err(KeyError::AlgorithmMismatch {
                stated: stated.clone(),
                actual: alg,
            });
        }
        Ok((alg, key))
    }

    fn member(
        &self,
        value: Option<&String>,
        len: Option<usize>,
        alg: &'static str,
    ) -> Result<Vec<u8>, KeyError> {
        let Some(value) = value else {
            return Err(if self.d.is_none() {
                KeyError::PublicOnly
            } else {
                KeyError::Unusable(alg)
            });
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(value)
            .map_err(|_| KeyError::Unusable(alg))?;
        match len {
            Some(len) if bytes.len() != len => Err(KeyError::Unusable(alg)),
            _ => Ok(bytes),
        }
    }

    /// PKCS#8 of a P-256 key: the fixed prefix, `d`, and the public point.
    fn p256(&self) -> Result<EncodingKey, KeyError> {
        let d = self.member(self.d.as_ref(), Some(32), "ES256")?;
        let x = self.member(self.x.as_ref(), Some(32), "ES256")?;
        let y = self.member(self.y.as_ref(), Some(32), "ES256")?;
        let mut der = vec![
            0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce,
            0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04,
            0x6d, 0x30, 0x6b, 0x02, 0x01, 0x01, 0x04, 0x20,
        ];
        der.extend_from_slice(&d);
        der.extend_from_slice(&[0xa1, 0x44, 0x03, 0x42, 0x00, 0x04]);
        der.extend_from_slice(&x);
        der.extend_from_slice(&y);
        Ok(EncodingKey::from_ec_der(&der))
    }

    /// PKCS#8 of an Ed25519 key: the fixed prefix and the 32-byte seed `d`.
    fn ed25519(&self) -> Result<EncodingKey, KeyError> {
        let d = self.member(self.d.as_ref(), Some(32), "EdDSA")?;
        let mut der = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        der.extend_from_slice(&d);
        Ok(EncodingKey::from_ed_der(&der))
    }

    /// PKCS#1 `RSAPrivateKey` of an RSA key's members.
    fn rsa(&self) -> Result<EncodingKey, KeyError> {
        let mut body = der_integer(&[0]);
        for member in [
            &self.n, &self.e, &self.d, &self.p, &self.q, &self.dp, &self.dq, &self.qi,
        ] {
            body.extend(der_integer(&self.member(member.as_ref(), None, "RS256")?));
        }
        let mut der = vec![0x30];
        der.extend(der_length(body.len()));
        der.extend(body);
        Ok(EncodingKey::from_rsa_der(&der))
    }
}

/// A DER INTEGER of the unsigned big-endian `bytes`.
fn der_integer(bytes: &[u8]) -> Vec<u8> {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    let mut value = bytes[first..].to_vec();
    if value.first().is_none_or(|b| b & 0x80 != 0) {
        value.insert(0, 0);
    }
    let mut der = vec![0x02];
    der.extend(der_length(value.len()));
    der.extend(value);
    der
}

fn der_length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![u8::try_from(len).unwrap_or(0)];
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    let mut der = vec![0x80 | u8::try_from(bytes.len()).unwrap_or(0)];
    der.extend(bytes);
    der
}

/// A public key a verifier trusts: its `kid`, its algorithm, and the key.
#[derive(Clone)]
pub struct TrustedKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl TrustedKey {
    /// The key of `jwk`, if it is a public key of an algorithm cards are signed with (and its
    /// own `alg`, when it states one, agrees).
    pub fn of(jwk: &Jwk) -> Result<Self, KeyError> {
        let alg = Algorithm::of_key(&jwk.algorithm).ok_or_else(|| {
            KeyError::Unsupported(format!("{:?}", jwk.algorithm).chars().take(40).collect())
        })?;
        if let Some(stated) = jwk.common.key_algorithm {
            let agrees = matches!(
                (stated, alg),
                (KeyAlgorithm::ES256, Algorithm::Es256)
                    | (KeyAlgorithm::EdDSA, Algorithm::EdDsa)
                    | (KeyAlgorithm::RS256, Algorithm::Rs256)
            );
            if !agrees {
                return Err(KeyError::AlgorithmMismatch {
                    stated: format!("{stated:?}"),
                    actual: alg,
                });
            }
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|_| KeyError::Unusable(alg.name()))?;
        Ok(Self {
            kid: jwk.common.key_id.clone(),
            alg,
            key,
        })
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    pub(super) fn decoding(&self) -> &DecodingKey {
        &self.key
    }
}

/// Public keys a verifier trusts, by `kid`.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<TrustedKey>,
}

impl KeySet {
    /// The keys of a JWKS document (`{"keys": [...]}`), a single JWK, or a list of JWKs. Keys
    /// of other algorithms (an HMAC secret, P-384) are left out; `skipped` says how many.
    pub fn read(json: &[u8]) -> Result<(Self, usize), KeyError> {
        let value: serde_json::Value =
            serde_json::from_slice(json).map_err(|_| KeyError::NotAKeySet)?;
        let jwks: Vec<serde_json::Value> = match value {
            serde_json::Value::Object(ref o) if o.contains_key("keys") => {
                serde_json::from_value::<Vec<serde_json::Value>>(o["keys"].clone())
                    .map_err(|_| KeyError::NotAKeySet)?
            }
            serde_json::Value::Object(_) => vec![value],
            serde_json::Value::Array(items) => items,
            _ => return Err(KeyError::NotAKeySet),
        };
        let mut keys = Vec::new();
        let mut skipped = 0;
        for jwk in jwks {
            match serde_json::from_value::<Jwk>(jwk)
                .map_err(|_| KeyError::NotAKeySet)
                .and_then(|jwk| TrustedKey::of(&jwk))
            {
                Ok(key) => keys.push(key),
                Err(_) => skipped += 1,
            }
        }
        Ok((Self { keys }, skipped))
    }

    /// The public halves of signing keys (what a signer publishes).
    pub fn of_signing(keys: &[&SigningKey]) -> Self {
        Self {
            keys: keys
                .iter()
                .filter_map(|k| TrustedKey::of(k.public_jwk()).ok())
                .collect(),
        }
    }

    /// Both sets' keys.
    #[must_use]
    pub fn with(mut self, other: &Self) -> Self {
        self.keys.extend(other.keys.iter().cloned());
        self
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys named `kid`.
    pub fn named<'a>(&'a self, kid: &'a str) -> impl Iterator<Item = &'a TrustedKey> + 'a {
        self.keys
            .iter()
            .filter(move |k| k.kid.as_deref() == Some(kid))
    }
}

/// A JWKS document of `keys`' public halves (`/.well-known/jwks.json`).
pub fn jwks(keys: &[&SigningKey]) -> JwkSet {
    JwkSet {
        keys: keys.iter().map(|k| k.public.clone()).collect(),
    }
}
