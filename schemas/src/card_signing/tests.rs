//! Signing and verifying with each algorithm and key form, and the tampered cards a verifier
//! must refuse.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::*;

const ES256_PEM: &[u8] = include_bytes!("../../tests/card_keys/es256.pem");
const ES256_JWK: &[u8] = include_bytes!("../../tests/card_keys/es256.jwk");
const ED25519_PEM: &[u8] = include_bytes!("../../tests/card_keys/ed25519.pem");
const ED25519_JWK: &[u8] = include_bytes!("../../tests/card_keys/ed25519.jwk");
const RS256_PEM: &[u8] = include_bytes!("../../tests/card_keys/rs256.pem");
const RS256_JWK: &[u8] = include_bytes!("../../tests/card_keys/rs256.jwk");
const ES256_SEC1: &[u8] = include_bytes!("../../tests/card_keys/es256-sec1.pem");
const P384_PEM: &[u8] = include_bytes!("../../tests/card_keys/p384.pem");
const ES256_PUBLIC: &[u8] = include_bytes!("../../tests/card_keys/es256.public.jwk");

fn card() -> Value {
    json!({
        "name": "Signed Agent",
        "description": "Réponses signées — 署名",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true, "extensions": [{"uri": "urn:x", "params": {"ratio": 1.0, "big": 1e21, "zero": -0.0, "ö": "\u{1f600}"}}]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["echo"]}],
        "unknownField": {"kept": [1, 2, 3]},
    })
}

fn key(bytes: &[u8]) -> SigningKey {
    SigningKey::read(bytes, Some("key-1"), None).expect("the key reads")
}

fn trusting(keys: &[&SigningKey]) -> Trust {
    Trust {
        keys: KeySet::of_signing(keys),
        by_url: Vec::new(),
    }
}

/// `card` signed by `key`, its first signature's protected header replaced by `header`
/// (re-signed, as an attacker holding `key` would).
fn with_header(card: &Value, key: &SigningKey, header: &Value) -> Value {
    let protected = URL_SAFE_NO_PAD.encode(header.to_string());
    let payload = URL_SAFE_NO_PAD.encode(signed_bytes(card).expect("canonical"));
    let signature = jsonwebtoken::crypto::sign(
        format!("{protected}.{payload}").as_bytes(),
        key.private(),
        key.algorithm().jose(),
    )
    .expect("signs");
    let mut signed = card.clone();
    signed["signatures"] = json!([{"protected": protected, "signature": signature}]);
    signed
}

#[test]
fn every_algorithm_and_key_form_signs_a_card_that_verifies() {
    for (bytes, alg) in [
        (ES256_PEM, Algorithm::Es256),
        (ES256_JWK, Algorithm::Es256),
        (ED25519_PEM, Algorithm::EdDsa),
        (ED25519_JWK, Algorithm::EdDsa),
        (RS256_PEM, Algorithm::Rs256),
        (RS256_JWK, Algorithm::Rs256),
    ] {
        let key = key(bytes);
        assert_eq!(key.algorithm(), alg);
        let signed = sign_card(&card(), &[&key]).expect("signs");
        let verified = verify_card(&signed, &trusting(&[&key])).expect("verifies");
        assert_eq!(
            verified,
            Verified {
                kid: "key-1".to_owned(),
                alg
            }
        );
        let header = &verify::headers(&signed)[0];
        assert_eq!(
            (header.alg.as_str(), header.typ.as_deref()),
            (alg.name(), Some("JOSE"))
        );
    }
}

#[test]
fn the_pem_and_the_jwk_of_one_key_have_one_public_key_and_thumbprint() {
    let pem = SigningKey::read(ES256_PEM, None, None).expect("reads");
    let jwk = SigningKey::read(ES256_JWK, None, None).expect("reads");
    assert_eq!(
        pem.kid(),
        jwk.kid(),
        "the kid defaults to the RFC 7638 thumbprint"
    );
    let signed = sign_card(&card(), &[&jwk]).expect("signs");
    let (published, skipped) = KeySet::read(ES256_PUBLIC).expect("a public JWK");
    assert_eq!(skipped, 0);
    let mut public: Value = serde_json::from_slice(ES256_PUBLIC).expect("JSON");
    public["kid"] = json!(pem.kid());
    let (pinned, _) = KeySet::read(public.to_string().as_bytes()).expect("a public JWK");
    assert_eq!(published.len(), 1);
    verify_card(
        &signed,
        &Trust {
            keys: pinned,
            by_url: Vec::new(),
        },
    )
    .expect("verifies");
}

#[test]
fn keys_that_cannot_sign_cards_are_refused_by_name() {
    assert_eq!(
        SigningKey::read(b"not a key", None, None).unwrap_err(),
        KeyError::NotAKey
    );
    assert_eq!(
        SigningKey::read(ES256_PUBLIC, None, None).unwrap_err(),
        KeyError::PublicOnly
    );
    assert!(matches!(
        SigningKey::read(ES256_SEC1, None, None),
        Err(KeyError::Unsupported(_))
    ));
    assert!(matches!(
        SigningKey::read(P384_PEM, None, None),
        Err(KeyError::Unsupported(_))
    ));
    let hmac = br#"{"kty":"oct","k":"c2VjcmV0"}"#;
    assert!(matches!(
        SigningKey::read(hmac, None, None),
        Err(KeyError::Unsupported(_))
    ));
    let mut stated: Value = serde_json::from_slice(ES256_JWK).expect("JSON");
    stated["alg"] = json!("RS256");
    assert!(matches!(
        SigningKey::read(stated.to_string().as_bytes(), None, None),
        Err(KeyError::AlgorithmMismatch { .. })
    ));
}

#[test]
fn a_signing_keys_debug_never_shows_the_key() {
    let shown = format!("{:?}", key(ES256_JWK));
    let d: Value = serde_json::from_slice(ES256_JWK).expect("JSON");
    assert!(!shown.contains(d["d"].as_str().expect("d")), "{shown}");
    assert!(shown.contains("key-1"));
}

#[test]
fn a_changed_field_an_added_field_or_a_moved_signature_does_not_verify() {
    let key = key(ES256_PEM);
    let trust = trusting(&[&key]);
    let signed = sign_card(&card(), &[&key]).expect("signs");

    let mut changed = signed.clone();
    changed["supportedInterfaces"][0]["url"] = json!("http://evil.example/");
    let mut added = signed.clone();
    added["unknownField"]["kept"] = json!([1, 2, 3, 4]);
    let mut moved = sign_card(&json!({"name": "Other", "version": "1"}), &[&key]).expect("signs");
    moved["signatures"] = signed["signatures"].clone();
    for tampered in [changed, added, moved] {
        assert_eq!(
            verify_card(&tampered, &trust),
            Err(VerifyError::NoValidSignature {
                problems: vec![SignatureProblem::Invalid {
                    kid: "key-1".to_owned()
                }]
            })
        );
    }
    // What protobuf's JSON leaves out does not change the signed bytes.
    let mut emptied = signed.clone();
    emptied["documentationUrl"] = json!("");
    emptied["skills"][0]["examples"] = json!([]);
    verify_card(&emptied, &trust).expect("empty values are not signed");
}

#[test]
fn alg_none_hmac_a_swapped_kid_and_a_foreign_jku_are_refused() {
    let key = key(ES256_PEM);
    let trust = trusting(&[&key]);
    let card = card();

    let none = with_header(&card, &key, &json!({"alg": "none", "kid": "key-1"}));
    let hmac = with_header(&card, &key, &json!({"alg": "HS256", "kid": "key-1"}));
    let swapped = with_header(&card, &key, &json!({"alg": "ES256", "kid": "key-2"}));
    let elsewhere = with_header(
        &card,
        &key,
        &json!({"alg": "ES256", "kid": "key-1", "jku": "https://evil.example/jwks.json"}),
    );
    let critical = with_header(
        &card,
        &key,
        &json!({"alg": "ES256", "kid": "key-1", "crit": ["exp"]}),
    );
    let no_kid = with_header(&card, &key, &json!({"alg": "ES256"}));
    let problem = |signed: &Value| match verify_card(signed, &trust) {
        Err(VerifyError::NoValidSignature { problems }) => problems,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(
        problem(&none),
        vec![SignatureProblem::Algorithm("none".to_owned())]
    );
    assert_eq!(
        problem(&hmac),
        vec![SignatureProblem::Algorithm("HS256".to_owned())]
    );
    assert_eq!(
        problem(&swapped),
        vec![SignatureProblem::UnknownKid("key-2".to_owned())]
    );
    assert_eq!(
        problem(&elsewhere),
        vec![SignatureProblem::UntrustedJku(
            "https://evil.example/jwks.json".to_owned()
        )]
    );
    assert_eq!(
        problem(&critical),
        vec![SignatureProblem::Critical("exp".to_owned())]
    );
    assert_eq!(problem(&no_kid), vec![SignatureProblem::NoKid]);
}

#[test]
fn a_key_of_another_type_under_the_same_kid_is_never_used_with_the_headers_alg() {
    // An RSA key published as key-1, a signature claiming ES256 by key-1 made with the ES256
    // key: the RSA key is not tried with ES256, and the ES256 key is not trusted.
    let es = key(ES256_PEM);
    let rsa = key(RS256_PEM);
    let signed = sign_card(&card(), &[&es]).expect("signs");
    assert_eq!(
        verify_card(&signed, &trusting(&[&rsa])),
        Err(VerifyError::NoValidSignature {
            problems: vec![SignatureProblem::Invalid {
                kid: "key-1".to_owned()
            }]
        })
    );
}

#[test]
fn a_jku_is_followed_only_to_a_configured_key_set() {
    let key = SigningKey::read(
        ED25519_PEM,
        Some("k"),
        Some("https://keys.example/jwks.json"),
    )
    .expect("reads");
    let signed = sign_card(&card(), &[&key]).expect("signs");
    let set = KeySet::of_signing(&[&key]);
    let configured = Trust {
        keys: KeySet::default(),
        by_url: vec![("https://keys.example/jwks.json".to_owned(), set.clone())],
    };
    verify_card(&signed, &configured).expect("the configured set verifies");
    let other_url = Trust {
        keys: KeySet::default(),
        by_url: vec![("https://other.example/jwks.json".to_owned(), set)],
    };
    assert!(matches!(
        verify_card(&signed, &other_url),
        Err(VerifyError::NoValidSignature { problems }) if problems == vec![SignatureProblem::UntrustedJku("https://keys.example/jwks.json".to_owned())]
    ));
}

#[test]
fn one_good_signature_among_several_verifies_and_none_at_all_is_unsigned() {
    let old = key(ES256_PEM);
    let new = SigningKey::read(ED25519_PEM, Some("key-2"), None).expect("reads");
    let signed = sign_card(&card(), &[&new, &old]).expect("signs");
    // A verifier holding either key alone verifies the card signed by both.
    assert_eq!(
        verify_card(&signed, &trusting(&[&old])).expect("old").kid,
        "key-1"
    );
    assert_eq!(
        verify_card(&signed, &trusting(&[&new])).expect("new").kid,
        "key-2"
    );
    assert_eq!(
        verify_card(&card(), &trusting(&[&old])),
        Err(VerifyError::Unsigned)
    );
    let mut empty = card();
    empty["signatures"] = json!([]);
    assert_eq!(
        verify_card(&empty, &trusting(&[&old])),
        Err(VerifyError::Unsigned)
    );
}

#[test]
fn the_reference_implementations_test_data_canonicalizes_byte_for_byte() {
    for name in [
        "arrays",
        "french",
        "structures",
        "unicode",
        "values",
        "weird",
    ] {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/jcs");
        let input = std::fs::read(format!("{dir}/input/{name}.json")).expect("input");
        let output = std::fs::read(format!("{dir}/output/{name}.json")).expect("output");
        let value: Value = serde_json::from_slice(&input).expect("JSON");
        let canonical = canonical::canonical(&value).expect("canonical");
        assert_eq!(
            String::from_utf8_lossy(&canonical),
            String::from_utf8_lossy(&output).trim_end(),
            "{name}"
        );
    }
}
