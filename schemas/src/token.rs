//! Bounded, encoded forms of the ids publishers and clients choose (docs/design.md §5).
//!
//! A task id, a messageId or a contextId may hold anything JSON allows: dots, wildcards, CR/LF,
//! thousands of characters. Wherever such an id becomes a NATS subject token, a header value or
//! a store key, it goes through [`token`]:
//!
//! | the id | its token |
//! |---|---|
//! | matches `[A-Za-z0-9_-]{1,128}` and does not start with `b64-` or `h-` | the id itself |
//! | otherwise, when `b64-` + unpadded base64url of the id is at most 128 characters | that |
//! | otherwise | `h-` + unpadded base64url of the id's SHA-256 (45 characters) |
//!
//! Plain ids that start with one of the two prefixes are encoded too, so two different ids
//! never share a token. Every token matches `[A-Za-z0-9_-]{1,128}`.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// The longest token.
pub const MAX_TOKEN_LEN: usize = 128;

const ENCODED: &str = "b64-";
const HASHED: &str = "h-";

/// Whether `s` is a token of at most `max_len` characters: `[A-Za-z0-9_-]{1,max_len}`.
pub fn is_token(s: &str, max_len: usize) -> bool {
    !s.is_empty()
        && s.len() <= max_len
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The token of `id`: the id itself when it is a plain token, else its base64url encoding, else
/// a hash of it (see the module docs).
pub fn token(id: &str) -> Cow<'_, str> {
    if is_token(id, MAX_TOKEN_LEN) && !id.starts_with(ENCODED) && !id.starts_with(HASHED) {
        return Cow::Borrowed(id);
    }
    // base64 turns 3 bytes into 4 characters.
    if ENCODED.len() + id.len().div_ceil(3) * 4 <= MAX_TOKEN_LEN {
        let mut out = String::with_capacity(MAX_TOKEN_LEN);
        out.push_str(ENCODED);
        URL_SAFE_NO_PAD.encode_string(id.as_bytes(), &mut out);
        if out.len() <= MAX_TOKEN_LEN {
            return Cow::Owned(out);
        }
    }
    let mut out = String::with_capacity(HASHED.len() + 43);
    out.push_str(HASHED);
    URL_SAFE_NO_PAD.encode_string(Sha256::digest(id.as_bytes()), &mut out);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_are_their_own_token() {
        for id in ["task-001_A", "a", &"x".repeat(128)] {
            assert_eq!(token(id), id);
        }
    }

    #[test]
    fn other_ids_are_base64url() {
        assert_eq!(token("a.b"), "b64-YS5i");
        assert_eq!(token(""), "b64-");
        assert_eq!(
            token("a\nb"),
            format!("b64-{}", URL_SAFE_NO_PAD.encode("a\nb"))
        );
        // Plain, but longer than 128: too long for base64 too, so hashed.
        assert!(token(&"a".repeat(129)).starts_with("h-"));
    }

    #[test]
    fn ids_that_look_encoded_are_encoded_again() {
        assert_eq!(
            token("b64-YS5i"),
            format!("b64-{}", URL_SAFE_NO_PAD.encode("b64-YS5i"))
        );
        assert_ne!(token("h-abc"), "h-abc");
        assert!(token("h-abc").starts_with("b64-"));
    }

    #[test]
    fn long_ids_are_hashed_to_45_characters() {
        // 93 bytes encode to 124 characters: the longest id that is still encoded.
        assert!(token(&".".repeat(93)).starts_with("b64-"));
        assert_eq!(token(&".".repeat(93)).len(), 128);
        let dots = ".".repeat(94);
        let long = token(&dots);
        assert!(long.starts_with("h-"), "{long}");
        assert_eq!(long.len(), 45);
        let huge = "é".repeat(5_000);
        assert_eq!(token(&huge).len(), 45);
        assert_ne!(token(&".".repeat(94)), token(&".".repeat(95)));
    }

    #[test]
    fn every_token_is_a_bounded_subject_token() {
        for id in [
            "a.b",
            "*",
            ">",
            "ü",
            "",
            "a b",
            "\r\n",
            "b64-",
            "h-",
            &"z".repeat(10_000),
        ] {
            let t = token(id);
            assert!(is_token(&t, MAX_TOKEN_LEN), "{id:?} -> {t:?}");
        }
    }
}
