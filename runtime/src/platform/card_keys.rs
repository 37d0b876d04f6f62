//! The keys that sign this runtime's agent cards (`CARD_SIGNING_KEY`, or the served agent's
//! `card_signing` in agents.yaml), and their rotation.
//!
//! A new key takes over on a reload (SIGHUP) that finds the key file changed; the key it
//! replaces keeps signing beside it, and stays published in the JWKS, for the overlap
//! (`CARD_SIGNING_OVERLAP`): a verifier that knows either key verifies every card served
//! meanwhile. Each change of the keys that sign (a rotation, an overlap's end) is a new
//! [`Signers::stamp`], so whoever keeps signed cards knows to sign them again.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use daedalus_contract::card_signing::{self, SigningKey};

/// The signing key as configured: the key read from its file, named and placed.
#[derive(Debug, Clone)]
pub struct SigningPlan {
    pub key: Arc<SigningKey>,
    /// How long a replaced key keeps signing and stays published.
    pub overlap: Duration,
}

impl PartialEq for SigningPlan {
    /// The same key (by its public half), named the same, with the same overlap.
    fn eq(&self, other: &Self) -> bool {
        self.key.kid() == other.key.kid()
            && self.key.jku() == other.key.jku()
            && self.key.public_jwk() == other.key.public_jwk()
            && self.overlap == other.overlap
    }
}

/// What signs cards now.
#[derive(Debug, Clone, Default)]
pub struct Signers {
    /// Changes whenever the keys below change.
    pub stamp: (u64, bool),
    /// The current key first, then a replaced key still in its overlap.
    pub keys: Vec<Arc<SigningKey>>,
}

impl Signers {
    /// The keys, borrowed, as the signing functions take them.
    pub fn keys(&self) -> Vec<&SigningKey> {
        self.keys.iter().map(AsRef::as_ref).collect()
    }
}

#[derive(Debug, Default)]
struct Ring {
    current: Option<Arc<SigningKey>>,
    /// A replaced key and when it stops signing.
    previous: Option<(Arc<SigningKey>, Instant)>,
    generation: u64,
}

/// The runtime's card signing keys. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct CardKeys {
    ring: RwLock<Ring>,
}

impl CardKeys {
    /// Keys as `plan` says (none: cards go unsigned).
    pub fn new(plan: Option<&SigningPlan>) -> Self {
        let keys = Self::default();
        keys.apply(plan);
        keys
    }

    /// Takes `plan` (a reload's): a key other than the current one becomes current, the
    /// current one signing beside it for the plan's overlap; no key stops signing at once.
    pub fn apply(&self, plan: Option<&SigningPlan>) {
        let mut ring = self.ring.write().unwrap_or_else(PoisonError::into_inner);
        let next = plan.map(|p| Arc::clone(&p.key));
        let same = match (&ring.current, &next) {
            (Some(a), Some(b)) => {
                a.kid() == b.kid() && a.public_jwk() == b.public_jwk() && a.jku() == b.jku()
            }
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        let overlap = plan.map_or(Duration::ZERO, |p| p.overlap);
        if let Some(replaced) = ring.current.take() {
            ring.previous = Some((replaced, Instant::now() + overlap));
        }
        ring.current = next;
        ring.generation += 1;
    }

    /// The keys that sign a card now.
    pub fn signers(&self) -> Signers {
        let ring = self.ring.read().unwrap_or_else(PoisonError::into_inner);
        let previous = ring
            .previous
            .as_ref()
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(key, _)| Arc::clone(key));
        let ended = ring.previous.is_some() && previous.is_none();
        Signers {
            stamp: (ring.generation, ended),
            keys: ring.current.iter().cloned().chain(previous).collect(),
        }
    }

    /// The public keys a verifier needs (`/.well-known/jwks.json`): every key that signs now.
    pub fn jwks(&self) -> jsonwebtoken::jwk::JwkSet {
        card_signing::jwks(&self.signers().keys())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(file: &str, kid: &str, overlap: Duration) -> SigningPlan {
        let path = format!(
            "{}/../schemas/tests/card_keys/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).expect("a test key");
        SigningPlan {
            key: Arc::new(SigningKey::read(&bytes, Some(kid), None).expect("reads")),
            overlap,
        }
    }

    fn kids(keys: &CardKeys) -> Vec<String> {
        keys.signers()
            .keys
            .iter()
            .map(|k| k.kid().to_owned())
            .collect()
    }

    #[test]
    fn a_new_key_signs_beside_the_old_one_for_the_overlap_then_alone() {
        let old = plan("es256.pem", "old", Duration::from_hours(1));
        let keys = CardKeys::new(Some(&old));
        let first = keys.signers().stamp;
        assert_eq!(kids(&keys), ["old"]);
        keys.apply(Some(&old));
        assert_eq!(keys.signers().stamp, first, "the same key changes nothing");

        keys.apply(Some(&plan("ed25519.pem", "new", Duration::from_hours(1))));
        assert_eq!(kids(&keys), ["new", "old"]);
        assert_eq!(keys.jwks().keys.len(), 2);
        assert_ne!(keys.signers().stamp, first);

        keys.apply(Some(&plan("rs256.pem", "newest", Duration::ZERO)));
        assert_eq!(kids(&keys), ["newest"], "an overlap of zero ends at once");
        assert_eq!(keys.jwks().keys.len(), 1);
    }

    #[test]
    fn without_a_key_nothing_signs() {
        let keys = CardKeys::new(None);
        assert!(keys.signers().keys.is_empty());
        assert!(keys.jwks().keys.is_empty());
    }
}
