//! The identity service on a JWKS file and an API key file: real signed tokens (Ed25519, the
//! RFC 8037 key), and the forgeries a hostile caller tries.

use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use super::plan::AuthSettings;
use super::*;

/// RFC 8037 A.1: the Ed25519 key.
const SEED_HEX: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
const ISSUER: &str = "https://idp.example/realm";
const AUDIENCE: &str = "daedalus";

fn signing_key() -> EncodingKey {
    // PKCS#8 v1 around the seed.
    let mut der = hex("302e020100300506032b657004220420");
    der.extend(hex(SEED_HEX));
    EncodingKey::from_ed_der(&der)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims(sub: &str) -> serde_json::Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 300, "scope": "a2a chat"})
}

fn sign(claims: &serde_json::Value, kid: &str) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &signing_key()).unwrap()
}

/// A token whose header and claims are whatever the forger likes, and whose signature is
/// `signature` over them.
fn forged(header: &serde_json::Value, claims: &serde_json::Value, signature: &[u8]) -> String {
    let part = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
    format!(
        "{}.{}.{}",
        part(header),
        part(claims),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

struct Fixture {
    identity: Identity,
    _dir: tempfile::TempDir,
}

async fn fixture(tweak: impl FnOnce(&mut AuthSettings)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "use": "sig", "x": PUBLIC_X}]})
            .to_string(),
    )
    .unwrap();
    let keys = dir.path().join("keys.yaml");
    let mut file = std::fs::File::create(&keys).unwrap();
    writeln!(
        file,
        "keys:\n  - sha256: {}\n    principal: ci-bot\n    tenant: acme\n    scopes: [a2a, admin]",
        api_keys::hash_hex("the-key")
    )
    .unwrap();
    let mut settings = AuthSettings {
        issuer: Some(ISSUER.to_owned()),
        audience: Some(AUDIENCE.to_owned()),
        jwks_file: Some(jwks),
        api_keys_file: Some(keys),
        admin_scope: Some("admin".to_owned()),
        tenant_claim: Some("tenant".to_owned()),
        ..AuthSettings::default()
    };
    tweak(&mut settings);
    let identity = Identity::start(&settings.plan().unwrap()).await.unwrap();
    Fixture {
        identity,
        _dir: dir,
    }
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    headers
}

#[tokio::test]
async fn a_valid_token_names_its_principal_tenant_and_scopes() {
    let f = fixture(|_| {}).await;
    let mut c = claims("alice");
    c["tenant"] = json!("acme");
    let caller = f
        .identity
        .authenticate(&bearer(&sign(&c, "k1")))
        .await
        .unwrap();
    let principal = caller.principal().unwrap();
    assert_eq!(principal.subject, "alice");
    assert_eq!(principal.issuer.as_deref(), Some(ISSUER));
    assert_eq!(caller.tenant(), Some("acme"));
    let Caller::Known(known) = &caller else {
        panic!("known")
    };
    assert!(known.scopes.contains("chat"));
    assert!(!known.admin);
}

#[tokio::test]
async fn a_signed_token_over_16_kib_is_refused_and_one_under_it_is_taken() {
    let f = fixture(|_| {}).await;
    let padded = |bytes: usize| {
        let mut c = claims("big");
        c["pad"] = json!("x".repeat(bytes));
        sign(&c, "k1")
    };
    let under = padded(10_000);
    assert!(under.len() < 16 * 1024, "{}", under.len());
    assert!(f.identity.authenticate(&bearer(&under)).await.is_ok());
    let over = padded(13_000);
    assert!(over.len() > 16 * 1024, "{}", over.len());
    assert_eq!(
        f.identity.authenticate(&bearer(&over)).await.unwrap_err(),
        Refusal::Token(TokenRefusal::Malformed)
    );
}

#[tokio::test]
async fn every_forgery_and_every_wrong_claim_is_refused_for_its_reason() {
    let f = fixture(|_| {}).await;
    let mut expired = claims("a");
    expired["exp"] = json!(now() - 120);
    let mut early = claims("a");
    early["nbf"] = json!(now() + 120);
    let mut issuer = claims("a");
    issuer["iss"] = json!("https://evil.example");
    let mut audience = claims("a");
    audience["aud"] = json!("someone-else");
    let mut no_exp = claims("a");
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut tenant = claims("a");
    tenant["tenant"] = json!(["acme"]);
    let valid = sign(&claims("a"), "k1");
    let (head, rest) = valid.split_once('.').unwrap();
    let (body, _) = rest.split_once('.').unwrap();
    let swapped_body = {
        let mut c = claims("root");
        c["scope"] = json!("admin");
        format!(
            "{head}.{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap()),
            valid.rsplit('.').next().unwrap()
        )
    };
    // HMAC keyed with the published public key (alg confusion).
    let hmac_header = json!({"alg": "HS256", "kid": "k1", "typ": "JWT"});
    let hmac = jsonwebtoken::encode(
        &Header {
            kid: Some("k1".to_owned()),
            ..Header::new(Algorithm::HS256)
        },
        &claims("a"),
        &EncodingKey::from_secret(&URL_SAFE_NO_PAD.decode(PUBLIC_X).unwrap()),
    )
    .unwrap();
    let cases: Vec<(String, Refusal)> = vec![
        (sign(&expired, "k1"), Refusal::Token(TokenRefusal::Expired)),
        (
            sign(&early, "k1"),
            Refusal::Token(TokenRefusal::NotYetValid),
        ),
        (sign(&issuer, "k1"), Refusal::Token(TokenRefusal::Issuer)),
        (
            sign(&audience, "k1"),
            Refusal::Token(TokenRefusal::Audience),
        ),
        (
            sign(&no_exp, "k1"),
            Refusal::Token(TokenRefusal::MissingClaim),
        ),
        (sign(&tenant, "k1"), Refusal::Token(TokenRefusal::Tenant)),
        (
            sign(&claims("a"), "k-unknown"),
            Refusal::Token(TokenRefusal::UnknownKey),
        ),
        (
            forged(&json!({"alg": "none", "kid": "k1"}), &claims("a"), b""),
            Refusal::Token(TokenRefusal::Algorithm),
        ),
        (hmac, Refusal::Token(TokenRefusal::Algorithm)),
        (
            forged(&hmac_header, &claims("a"), b"whatever"),
            Refusal::Token(TokenRefusal::Algorithm),
        ),
        (swapped_body, Refusal::Token(TokenRefusal::Signature)),
        (
            format!("{head}.{body}.AAAA"),
            Refusal::Token(TokenRefusal::Signature),
        ),
        ("a.b.c".to_owned(), Refusal::Token(TokenRefusal::Malformed)),
        ("not-a-key".to_owned(), Refusal::UnknownApiKey),
        ("x".repeat(100_000), Refusal::UnknownApiKey),
        (
            format!("{}.{}.{}", "x".repeat(9000), "y".repeat(9000), "z"),
            Refusal::Token(TokenRefusal::Malformed),
        ),
    ];
    for (token, refusal) in cases {
        let got = f.identity.authenticate(&bearer(&token)).await;
        assert_eq!(got.unwrap_err(), refusal, "{token:.60}");
    }
    assert_eq!(
        f.identity
            .authenticate(&HeaderMap::new())
            .await
            .unwrap_err(),
        Refusal::NoCredentials
    );
    let mut basic = HeaderMap::new();
    basic.insert(http::header::AUTHORIZATION, "Basic YTpi".parse().unwrap());
    assert_eq!(
        f.identity.authenticate(&basic).await.unwrap_err(),
        Refusal::NoCredentials
    );
}

#[tokio::test]
async fn an_api_key_in_its_header_or_as_the_bearer_names_its_holder() {
    let f = fixture(|_| {}).await;
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", "the-key".parse().unwrap());
    for headers in [headers, bearer("the-key")] {
        let caller = f.identity.authenticate(&headers).await.unwrap();
        let principal = caller.principal().unwrap();
        assert_eq!(principal.subject, "ci-bot");
        assert_eq!(principal.issuer, None);
        assert_eq!(caller.tenant(), Some("acme"));
        let Caller::Known(known) = &caller else {
            panic!("known")
        };
        assert!(known.admin);
        assert_eq!(known.via, Via::ApiKey);
    }
    let mut wrong = HeaderMap::new();
    wrong.insert("x-api-key", "the-key2".parse().unwrap());
    assert_eq!(
        f.identity.authenticate(&wrong).await.unwrap_err(),
        Refusal::UnknownApiKey
    );
}

#[tokio::test]
async fn a_missing_required_scope_is_forbidden_not_unauthorized() {
    let f =
        fixture(|s| s.required_scopes = Some(vec!["a2a".to_owned(), "deploy".to_owned()])).await;
    let refusal = f
        .identity
        .authenticate(&bearer(&sign(&claims("a"), "k1")))
        .await
        .unwrap_err();
    assert_eq!(refusal, Refusal::MissingScope("deploy".to_owned()));
    assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
    let challenge = refusal.challenge(None);
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"deploy\""), "{challenge}");
}

#[tokio::test]
async fn challenges_follow_rfc_6750_and_never_echo_the_token() {
    let f = fixture(|_| {}).await;
    let mut expired = claims("a");
    expired["exp"] = json!(now() - 120);
    let token = sign(&expired, "k1");
    let refusal = f.identity.authenticate(&bearer(&token)).await.unwrap_err();
    assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED);
    let challenge = refusal.challenge(Some(
        "https://rt.example/.well-known/oauth-protected-resource",
    ));
    assert!(
        challenge.starts_with("Bearer realm=\"daedalus\""),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(
        challenge.contains("resource_metadata=\"https://rt.example/"),
        "{challenge}"
    );
    assert!(!challenge.contains(&token[..20]), "{challenge}");
    assert_eq!(
        Refusal::NoCredentials.challenge(None),
        "Bearer realm=\"daedalus\""
    );
}

#[tokio::test]
async fn off_everyone_is_anyone() {
    let identity = Identity::off();
    assert!(!identity.is_on());
    let caller = identity.authenticate(&bearer("garbage")).await.unwrap();
    assert!(matches!(caller, Caller::Anyone));
}

#[tokio::test]
async fn a_reload_reads_the_key_file_again_and_a_broken_one_changes_nothing() {
    let f = fixture(|_| {}).await;
    let plan = f.identity.plan();
    let file = plan.api_keys.as_ref().unwrap().file.clone();
    std::fs::write(
        &file,
        format!(
            "keys:\n  - sha256: {}\n    principal: rotated\n",
            api_keys::hash_hex("new-key")
        ),
    )
    .unwrap();
    f.identity.reload(&plan).await.unwrap();
    assert_eq!(
        f.identity
            .authenticate(&bearer("new-key"))
            .await
            .unwrap()
            .principal()
            .unwrap()
            .subject,
        "rotated"
    );
    assert_eq!(
        f.identity
            .authenticate(&bearer("the-key"))
            .await
            .unwrap_err(),
        Refusal::UnknownApiKey
    );
    std::fs::write(&file, "keys: [ {").unwrap();
    assert!(f.identity.reload(&plan).await.is_err());
    assert!(
        f.identity.authenticate(&bearer("new-key")).await.is_ok(),
        "the keys loaded stay"
    );
}

#[tokio::test]
async fn metrics_follow_their_own_setting() {
    let open = fixture(|_| {}).await;
    assert!(
        open.identity
            .may_read_metrics(&HeaderMap::new())
            .await
            .is_ok()
    );
    let scoped = fixture(|s| s.metrics = Some("scope:metrics".to_owned())).await;
    assert_eq!(
        scoped
            .identity
            .may_read_metrics(&HeaderMap::new())
            .await
            .unwrap_err(),
        Refusal::NoCredentials
    );
    assert_eq!(
        scoped
            .identity
            .may_read_metrics(&bearer(&sign(&claims("a"), "k1")))
            .await
            .unwrap_err(),
        Refusal::MissingScope("metrics".to_owned())
    );
    let mut c = claims("a");
    c["scope"] = json!("metrics");
    assert!(
        scoped
            .identity
            .may_read_metrics(&bearer(&sign(&c, "k1")))
            .await
            .is_ok()
    );
}
