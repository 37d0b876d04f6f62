//! Signed agent cards (A2A §8.4) against the official A2A SDK as the other side: a runtime
//! with a key serves cards (the well-known document, the extended card of every binding to a
//! caller with an API key, the v0.3 form) that a2a-sdk's verifier accepts; cards a2a-sdk signs verify with ours, and every
//! tampered form is refused; keys rotate on SIGHUP with no moment where a verifier holding
//! either key fails; an A2A agent whose card its `trust: required` refuses offers no tool, is
//! never called, and `get_health` says why.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use daedalus_contract::card_signing::{KeySet, SignatureProblem, Trust, VerifyError, verify_card};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::wait_until;
use serde_json::{Value, json};
use support::mcp_client::{call, connect, text};
use support::process::runtime;
use support::python::a2a_steps;
use support::runtime::Runtime;

const KEY: &str = "sk-cards";

/// The API key a caller of the extended card holds (A2A §13.3: it is served behind
/// authentication only).
const READER: &str = "sk-card-reader";

/// A runtime whose extended card is served to `READER`, its key file in `dir`.
fn guarded_runtime(dir: &tempfile::TempDir) -> support::process::RuntimeBuilder {
    let keys = dir.path().join("keys.yaml");
    support::identity::api_key_file(&keys, &[(READER, "reader", "t")]);
    runtime().env("AUTH_API_KEYS_FILE", &keys.to_string_lossy())
}

fn key_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/tests/card_keys")
        .join(name)
}

fn key_path(name: &str) -> String {
    key_file(name).to_string_lossy().into_owned()
}

/// The public JWK of the test key `name` (`es256`, `ed25519`, `rs256`), named `kid`.
fn public_jwk(name: &str, kid: &str) -> Value {
    let mut jwk: Value = serde_json::from_slice(
        &std::fs::read(key_file(&format!("{name}.public.jwk"))).expect("a key"),
    )
    .expect("JSON");
    jwk["kid"] = json!(kid);
    jwk
}

/// The JSON a GET of `url` answers.
async fn get_json(url: impl reqwest::IntoUrl) -> Value {
    reqwest::get(url)
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON")
}

fn trusting(jwks: &[Value]) -> Trust {
    let (keys, skipped) =
        KeySet::read(json!({"keys": jwks}).to_string().as_bytes()).expect("a key set");
    assert_eq!(skipped, 0);
    Trust {
        keys,
        by_url: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_with_a_key_serves_cards_the_official_sdk_verifies_in_every_form() {
    for (file, kid) in [
        ("es256.pem", "es"),
        ("ed25519.jwk", "ed"),
        ("rs256.pem", "rs"),
    ] {
        let dir = tempfile::tempdir().expect("a dir");
        let served = guarded_runtime(&dir)
            .env("CARD_SIGNING_KEY", &key_path(file))
            .env("CARD_SIGNING_KID", kid)
            .start();
        let steps = a2a_steps("card_verify.py", &[&served.url(""), "--bearer", READER]).await;
        for form in ["well-known", "jsonrpc-extended", "rest-extended"] {
            assert_eq!(
                steps[form]["verified"], true,
                "{file} {form}: {}",
                steps[form]
            );
            assert_eq!(steps[form]["kids"], json!([kid]), "{file} {form}");
        }
        // The v0.3 form carries signatures of its own JSON, which ours verifies.
        let jwks: Value = get_json(served.url("/.well-known/jwks.json")).await;
        let (keys, _) = KeySet::read(jwks.to_string().as_bytes()).expect("a key set");
        let v03: Value = reqwest::Client::new()
            .post(served.url("/"))
            .bearer_auth(READER)
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}),
            )
            .send()
            .await
            .expect("answers")
            .json()
            .await
            .expect("JSON");
        let trust = Trust {
            keys,
            by_url: Vec::new(),
        };
        assert_eq!(
            verify_card(&v03["result"], &trust)
                .expect("the v0.3 card verifies")
                .kid,
            kid
        );
        assert!(v03["result"]["url"].is_string(), "{v03}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_runtime_serves_an_empty_key_set_and_cards_without_signatures() {
    let served = runtime().start();
    let card: Value = get_json(served.url("/.well-known/agent-card.json")).await;
    assert!(card.get("signatures").is_none(), "{card}");
    let jwks: Value = get_json(served.url("/.well-known/jwks.json")).await;
    assert_eq!(jwks, json!({"keys": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_the_official_sdk_signs_verify_with_ours_and_their_tampered_forms_do_not() {
    let keys = key_file("").to_string_lossy().into_owned();
    let signed = a2a_steps("card_sign.py", &[&keys]).await;
    let trust = trusting(&[
        public_jwk("es256", "sdk-es256"),
        public_jwk("ed25519", "sdk-ed25519"),
        public_jwk("rs256", "sdk-rs256"),
    ]);
    for (alg, kid) in [
        ("ES256", "sdk-es256"),
        ("EdDSA", "sdk-ed25519"),
        ("RS256", "sdk-rs256"),
    ] {
        let card = &signed[alg]["card"];
        let verified = verify_card(card, &trust).unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert_eq!(verified.kid, kid);

        let refused = |tampered: &Value| match verify_card(tampered, &trust) {
            Err(VerifyError::NoValidSignature { problems }) => problems,
            other => panic!("{alg}: a tampered card verified: {other:?}"),
        };
        let mut changed = card.clone();
        changed["supportedInterfaces"][0]["url"] = json!("http://evil.example/");
        assert_eq!(
            refused(&changed),
            vec![SignatureProblem::Invalid {
                kid: kid.to_owned()
            }]
        );
        let mut moved = signed["ES256"]["card"].clone();
        moved["name"] = json!("Another Agent");
        moved["signatures"] = card["signatures"].clone();
        assert_eq!(
            refused(&moved),
            vec![SignatureProblem::Invalid {
                kid: kid.to_owned()
            }]
        );
        let mut swapped = card.clone();
        let protected = swapped["signatures"][0]["protected"]
            .as_str()
            .expect("protected")
            .to_owned();
        let header = String::from_utf8(base64_url(&protected))
            .expect("UTF-8")
            .replace(kid, "someone-else");
        swapped["signatures"][0]["protected"] = json!(encode_url(header.as_bytes()));
        assert_eq!(
            refused(&swapped),
            vec![SignatureProblem::UnknownKid("someone-else".to_owned())]
        );
    }
    // HMAC: whoever verifies holds the key; no card is trusted that way.
    assert!(matches!(
        verify_card(&signed["HS256"]["card"], &trust),
        Err(VerifyError::NoValidSignature { problems }) if problems == vec![SignatureProblem::Algorithm("HS256".to_owned())]
    ));
}

fn base64_url(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .expect("base64url")
}

fn encode_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_on_sighup_and_a_verifier_holding_either_key_never_fails() {
    let dir = tempfile::tempdir().expect("a dir");
    let key = dir.path().join("card.key");
    std::fs::copy(key_file("es256.pem"), &key).expect("copied");
    let served = guarded_runtime(&dir)
        .env("CARD_SIGNING_KEY", &key.to_string_lossy())
        .start();
    let before = a2a_steps("card_verify.py", &[&served.url(""), "--bearer", READER]).await;
    let old_kid = before["well-known"]["kids"][0]
        .as_str()
        .expect("a kid")
        .to_owned();
    assert_eq!(before["well-known"]["verified"], true);

    std::fs::copy(key_file("ed25519.pem"), &key).expect("copied");
    served.signal("HUP");
    let base = served.url("");
    wait_until(
        "the card signed by both keys",
        Duration::from_secs(20),
        || {
            let base = base.clone();
            async move {
                let card: Value = get_json(format!("{base}/.well-known/agent-card.json")).await;
                card["signatures"].as_array().is_some_and(|s| s.len() == 2)
            }
        },
    )
    .await;
    let both = a2a_steps("card_verify.py", &[&base, "--bearer", READER]).await;
    let kids: Vec<String> = both["well-known"]["kids"]
        .as_array()
        .expect("kids")
        .iter()
        .map(|k| k.as_str().expect("a kid").to_owned())
        .collect();
    assert_eq!(kids.len(), 2);
    assert_eq!(
        kids[1], old_kid,
        "the new key signs first, the old one beside it"
    );
    for kid in &kids {
        let only = a2a_steps(
            "card_verify.py",
            &[&base, "--bearer", READER, "--only-kid", kid],
        )
        .await;
        for form in ["well-known", "jsonrpc-extended", "rest-extended"] {
            assert_eq!(
                only[form]["verified"], true,
                "holding only {kid}: {}",
                only[form]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_refuses_an_unusable_key_naming_the_variable_and_never_showing_it() {
    let dir = tempfile::tempdir().expect("a dir");
    let public = dir.path().join("public.jwk");
    std::fs::write(&public, public_jwk("es256", "k").to_string()).expect("written");
    let hmac = dir.path().join("hmac.jwk");
    let secret = "c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1zaG93bg";
    std::fs::write(&hmac, json!({"kty": "oct", "k": secret}).to_string()).expect("written");
    let private: Value =
        serde_json::from_slice(&std::fs::read(key_file("es256.jwk")).expect("a key"))
            .expect("JSON");
    for (path, why) in [(&public, "public key"), (&hmac, "cards are signed with")] {
        let out = std::process::Command::new(support::process::runtime_binary())
            .env_clear()
            .env("AGENT_NAME", "cards")
            .env("CARD_SIGNING_KEY", path)
            .arg("--check-config")
            .output()
            .expect("runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{said}");
        assert!(
            said.contains("CARD_SIGNING_KEY") && said.contains(why),
            "{said}"
        );
        assert!(!said.contains(secret), "{said}");
    }
    let out = std::process::Command::new(support::process::runtime_binary())
        .env_clear()
        .env("AGENT_NAME", "cards")
        .env("CARD_SIGNING_KEY", key_file("es256.jwk"))
        .arg("--check-config")
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("ES256"), "{said}");
    assert!(!said.contains(private["d"].as_str().expect("d")), "{said}");
}

/// The outer agent's deployment: `inner` as an A2A server under `trust`.
fn yaml(fake: &FakeLlm, inner: &str, trust: &str) -> String {
    format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    inner: {{ type: a2a, url: \"{inner}\", trust: {trust} }}\n\
         agents:\n  outer: {{ instruction: Ask., servers: [inner] }}\n",
        fake.openai_base_url,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_card_required_trust_refuses_is_never_offered_nor_called_and_health_says_why()
 {
    let inner = runtime()
        .env("AGENT_NAME", "inner")
        .env("CARD_SIGNING_KEY", &key_path("es256.pem"))
        .env("CARD_SIGNING_KID", "inner-key")
        .start();
    let inner_url = inner.url("");
    let card: Value = get_json(inner.url("/.well-known/agent-card.json")).await;
    let tool = format!(
        "inner__{}",
        card["skills"][0]["id"].as_str().expect("a skill")
    );

    // Trusted through its JWKS URL: the tool is offered and called.
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![(tool.clone(), json!({"message": "hello"}))]),
        Reply::Text("done".into()),
    ]);
    let trusted =
        format!("{{ policy: required, jwks_url: \"{inner_url}/.well-known/jwks.json\" }}");
    let outer = Runtime::start(&yaml(&fake, &inner_url, &trusted)).await;
    let answer = ask(&outer.url).await;
    assert_eq!(answer["status"]["state"], "completed", "{answer}");
    let log = fake.requests();
    assert!(
        log[0].body["tools"].to_string().contains(&tool),
        "{}",
        log[0].body
    );
    assert!(
        log[1].body["messages"].to_string().contains("hello"),
        "the inner agent answered"
    );
    let (client, _) = connect(&outer.mcp("outer"), None).await;
    let health: Value =
        serde_json::from_str(&text(&call(&client, "get_health", json!({})).await)).expect("JSON");
    assert_eq!(health["status"], "ok", "{health}");

    // Pinned to another key: no tool, no call, and get_health names the agent and why.
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![(tool.clone(), json!({"message": "sneak"}))]),
        Reply::Text("done".into()),
    ]);
    let pinned = format!(
        "{{ policy: required, keys: [{}] }}",
        public_jwk("ed25519", "inner-key")
    );
    let outer = Runtime::start(&yaml(&fake, &inner_url, &pinned)).await;
    let _ = ask(&outer.url).await;
    let log = fake.requests();
    assert!(
        !log[0].body["tools"].to_string().contains(&tool),
        "{}",
        log[0].body
    );
    let refused = log[1].body["messages"].to_string();
    assert!(
        refused.contains("not trusted"),
        "a call the model made anyway is refused: {refused}"
    );
    let listed: Value = reqwest::Client::new()
        .post(format!("{inner_url}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        listed["result"]["totalSize"], 1,
        "only the trusted call reached it: {listed}"
    );
    let (client, _) = connect(&outer.mcp("outer"), None).await;
    let health: Value =
        serde_json::from_str(&text(&call(&client, "get_health", json!({})).await)).expect("JSON");
    assert_eq!(health["status"], "degraded", "{health}");
    let message = health["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Untrusted") && message.contains("inner") && message.contains("inner-key"),
        "{message}"
    );
}

async fn ask(url: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{url}/"))
        .json(
            &json!({"message": {"messageId": uuid(), "role": "user", "parts": [{"text": "ask"}]}}),
        )
        .send()
        .await
        .expect("the call succeeds")
        .json::<Value>()
        .await
        .expect("JSON")
}

fn uuid() -> String {
    format!("m-{}", uuid::Uuid::new_v4())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_extended_card_carries_the_signatures_that_verify_its_json() {
    let dir = tempfile::tempdir().expect("a dir");
    let served = guarded_runtime(&dir)
        .env("CARD_SIGNING_KEY", &key_path("es256.pem"))
        .env("CARD_SIGNING_KID", "test-key")
        .start();
    let base = served.url("");
    let mut client = support::grpc::connect(&base).await;
    let mut request =
        support::grpc::call(daedalus_contract::grpc::v1::GetExtendedAgentCardRequest::default());
    let anonymous = client
        .get_extended_agent_card(support::grpc::call(
            daedalus_contract::grpc::v1::GetExtendedAgentCardRequest::default(),
        ))
        .await
        .expect_err("no card without credentials");
    assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {READER}").parse().expect("ASCII"),
    );
    let card = client
        .get_extended_agent_card(request)
        .await
        .expect("a card")
        .into_inner();
    assert_eq!(card.signatures.len(), 1, "{card:?}");
    // What a gRPC client canonicalizes: the message's ProtoJSON.
    let json = serde_json::to_value(&card).expect("ProtoJSON");
    let jwks: Value = get_json(format!("{base}/.well-known/jwks.json")).await;
    let (keys, _) = KeySet::read(jwks.to_string().as_bytes()).expect("a key set");
    let verified = verify_card(
        &json,
        &Trust {
            keys,
            by_url: Vec::new(),
        },
    )
    .expect("verifies");
    assert_eq!(verified.kid, "test-key");
}
