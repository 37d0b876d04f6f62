//! A real OpenID provider for the identity tests (`test-kit/py/oidc_provider.py`, on joserfc,
//! from `.venv`): discovery, a JWKS with RS256, ES256 and EdDSA keys, client credentials and
//! RFC 8693 token exchange. Tokens are signed by it, not by the runtime's JOSE library; the
//! test-only admin routes mint and forge tokens, rotate keys, register clients and pause it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::free_port;

/// The provider, killed when dropped.
#[derive(Debug)]
pub struct OidcProvider {
    child: Child,
    issuer: String,
    http: reqwest::Client,
}

/// The audience the identity tests give the runtime.
pub const AUDIENCE: &str = "daedalus";

/// How a token is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Es256,
    EdDsa,
}

impl Alg {
    fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }
}

impl OidcProvider {
    /// Starts the provider on a free port and waits until it serves.
    pub fn start() -> Self {
        let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
        assert!(
            python.is_file(),
            "{} is missing: run .ci/setup",
            python.display()
        );
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/oidc_provider.py");
        let port = free_port();
        let mut child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the OpenID provider starts");
        let stdout = child.stdout.take().expect("piped");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the provider says it is ready");
        let ready: Value = serde_json::from_str(&first).expect("a JSON line");
        Self {
            child,
            issuer: ready["issuer"].as_str().expect("an issuer").to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("a client"),
        }
    }

    /// `http://127.0.0.1:<port>`: the `iss` of its tokens and the base of its discovery.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Its token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// The runtime's environment for tokens of this provider, for audience [`AUDIENCE`].
    pub fn runtime_env(&self) -> Vec<(String, String)> {
        vec![
            ("AUTH_ISSUER".to_owned(), self.issuer.clone()),
            ("AUTH_AUDIENCE".to_owned(), AUDIENCE.to_owned()),
        ]
    }

    async fn admin(&self, what: &str, body: Value) -> Value {
        self.http
            .post(format!("{}/admin/{what}", self.issuer))
            .json(&body)
            .send()
            .await
            .expect("the provider answers")
            .json()
            .await
            .expect("JSON")
    }

    /// A token with exactly `claims`, signed with the current `alg` key (or naming `kid`).
    pub async fn mint(&self, claims: Value, alg: Alg, kid: Option<&str>) -> String {
        let answer = self
            .admin(
                "mint",
                json!({"claims": claims, "alg": alg.name(), "kid": kid}),
            )
            .await;
        answer["token"].as_str().expect("a token").to_owned()
    }

    /// The claims of a good token for `subject`: this issuer, [`AUDIENCE`], valid for five
    /// minutes, `scope` as given.
    pub fn claims(&self, subject: &str, scope: &str) -> Value {
        let now = now();
        json!({
            "iss": self.issuer,
            "sub": subject,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "scope": scope,
        })
    }

    /// A good RS256 token for `subject`.
    pub async fn token_for(&self, subject: &str) -> String {
        self.mint(self.claims(subject, "a2a"), Alg::Rs256, None)
            .await
    }

    /// A good token for `subject` in tenant `tenant` (claim `tenant`).
    pub async fn token_in_tenant(&self, subject: &str, tenant: &str) -> String {
        let mut claims = self.claims(subject, "a2a");
        claims["tenant"] = json!(tenant);
        self.mint(claims, Alg::Rs256, None).await
    }

    /// A forged token: `how` is `none` (alg none) or `hmac` (HS256 keyed with a published key).
    pub async fn forge(&self, claims: Value, how: &str) -> String {
        let answer = self
            .admin("forge", json!({"claims": claims, "how": how}))
            .await;
        answer["token"].as_str().expect("a token").to_owned()
    }

    /// New keys (new `kid`s); the old ones stay published when `keep_previous`.
    pub async fn rotate(&self, keep_previous: bool) {
        self.admin("rotate", json!({"keep_previous": keep_previous}))
            .await;
    }

    /// Registers an OAuth2 client: its secret, its tokens' audience and scope, their lifetime,
    /// and how long the token endpoint takes to answer it.
    pub async fn register_client(&self, client: &OidcClient<'_>) {
        self.admin(
            "client",
            json!({
                "client_id": client.id,
                "secret": client.secret,
                "audience": client.audience,
                "scope": client.scope,
                "ttl": client.ttl_secs,
                "delay": client.delay_secs,
            }),
        )
        .await;
    }

    /// Every public route answers 503 until [`OidcProvider::resume`].
    pub async fn pause(&self) {
        self.admin("pause", json!({})).await;
    }

    pub async fn resume(&self) {
        self.admin("resume", json!({})).await;
    }

    /// How many discovery, JWKS, client-credentials and exchange requests it served.
    pub async fn stats(&self) -> Value {
        self.http
            .get(format!("{}/admin/stats", self.issuer))
            .send()
            .await
            .expect("the provider answers")
            .json()
            .await
            .expect("JSON")
    }
}

/// An OAuth2 client of the provider.
#[derive(Debug, Clone)]
pub struct OidcClient<'a> {
    pub id: &'a str,
    pub secret: &'a str,
    pub audience: &'a str,
    pub scope: &'a str,
    pub ttl_secs: u64,
    pub delay_secs: f64,
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs(),
    )
    .expect("fits")
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
