//! Signed agent cards (A2A §8.4): the canonical bytes a signature covers ([`canonical`]),
//! the keys that sign and the keys a verifier trusts ([`keys`]), signing ([`sign`]) and
//! verifying ([`verify`]). Shared by the runtime (signs its cards, verifies the cards of the
//! A2A agents it calls), the proxy (verifies its runtime's card) and the conformance suite.

pub mod canonical;
pub mod keys;
pub mod sign;
pub mod verify;

pub use canonical::{CanonicalError, signed_bytes};
pub use keys::{Algorithm, KeyError, KeySet, SigningKey, TrustedKey, jwks};
pub use sign::{ProtectedHeader, SignError, sign_card};
pub use verify::{SignatureProblem, Trust, Verified, VerifyError, is_signed, verify_card};

#[cfg(test)]
mod tests;
