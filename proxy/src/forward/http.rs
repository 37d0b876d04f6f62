//! The runtime behind the proxy, over the contract's HTTP endpoints: its health, card and
//! manifest, and the [`Forwarder`] that sends it tasks. Tasks to an `http://` runtime take a
//! lean path ([`PlainHttp`]: HTTP/1 connections driven inline by the sending worker, the URI
//! parsed once, no pool task, no redirect or retry layers); the rest, and `https://` runtimes,
//! go through reqwest.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::container::{AGENT_CARD_PATH, HEALTH_PATH, MANIFEST_PATH, TASK_PATH};
use daedalus_contract::credentials::Credentials;
use daedalus_contract::error_chain::error_chain;
use daedalus_contract::{AgentCard, RuntimeContract, Schema, read};
use tokio::sync::mpsc;

use crate::forward::event_stream::EventStreamReader;
use crate::forward::forwarder::{ForwardError, Forwarder, Reply};
use crate::forward::plain_http::{PlainHttp, Reading};
use crate::wire::trace::TraceContext;

/// Whether `card` carries a signature by a key of the JWKS file at `path`.
fn verify_card_against(
    card: &serde_json::Value,
    path: &std::path::Path,
) -> Result<(), RuntimeCheckError> {
    use daedalus_contract::card_signing::{KeySet, Trust, verify_card};
    let untrusted = RuntimeCheckError::CardUntrusted;
    let bytes = std::fs::read(path)
        .map_err(|e| untrusted(format!("cannot read {}: {}", path.display(), e.kind())))?;
    let (keys, _) =
        KeySet::read(&bytes).map_err(|e| untrusted(format!("{}: {e}", path.display())))?;
    verify_card(
        card,
        &Trust {
            keys,
            by_url: Vec::new(),
        },
    )
    .map(drop)
    .map_err(|e| untrusted(e.to_string()))
}

/// The runtime over HTTP.
#[derive(Debug, Clone)]
pub struct HttpRuntime {
    base: String,
    /// Health, card and manifest reads (rare; any scheme), and tasks to an `https://` runtime.
    http: reqwest::Client,
    /// Tasks to an `http://` runtime (the pod's loopback, the usual case).
    tasks: Option<Arc<PlainHttp>>,
    /// The proxy's own credential, when the runtime requires a caller.
    credential: Option<Arc<Credentials>>,
    /// The keys that must sign the runtime's card (`RUNTIME_CARD_KEYS`), as a file.
    card_keys: Option<std::path::PathBuf>,
}

/// Why the runtime cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeCheckError {
    #[error("the runtime is not healthy: {0}")]
    Unhealthy(String),
    #[error("cannot read the agent card at {url}: {reason}")]
    CardUnreadable { url: String, reason: String },
    #[error("the agent card is invalid: {0}")]
    CardInvalid(String),
    /// `RUNTIME_CARD_KEYS` is set and the card carries no signature by one of its keys.
    #[error("the agent card is not signed by a key of RUNTIME_CARD_KEYS: {0}")]
    CardUntrusted(String),
    #[error(
        "the agent card lists no skill with id, name, description and tags; the contract requires one"
    )]
    CardWithoutSkills,
    #[error("cannot read the runtime-contract manifest: {0}")]
    ManifestUnreadable(String),
    #[error("runtime implements contract {found}; this proxy speaks v{supported}")]
    ManifestIncompatible { found: String, supported: u32 },
}

/// Why the runtime does not take the proxy as a caller.
#[derive(Debug, thiserror::Error)]
pub enum CredentialCheckError {
    #[error("the proxy has no token for the runtime: {0}")]
    NoToken(#[source] daedalus_contract::credentials::CredentialError),
    #[error("cannot reach the runtime: {0}")]
    Unreached(String),
    #[error("the runtime refuses the proxy ({status}){}", if *presented { ": it rejects the proxy's credential" } else { ": it requires a caller; give the proxy a credential (RUNTIME_TOKEN_FILE, or RUNTIME_TOKEN_URL with RUNTIME_CLIENT_ID and RUNTIME_CLIENT_SECRET)" })]
    Refused { status: u16, presented: bool },
}

/// Longest wait for a TCP connection to the runtime.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The contract major version this proxy speaks.
pub const SUPPORTED_MAJOR: u32 = 1;

impl HttpRuntime {
    pub fn new(base: &str) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .expect("the HTTP client builds");
        let base = base.trim_end_matches('/').to_owned();
        let tasks = format!("{base}{TASK_PATH}")
            .parse::<http::Uri>()
            .ok()
            .and_then(|uri| PlainHttp::new(&uri))
            .map(Arc::new);
        Self {
            base,
            http,
            tasks,
            credential: None,
            card_keys: None,
        }
    }

    /// The runtime `config` names, presenting the proxy's credential if it has one.
    pub fn for_config(config: &crate::config::ProxyConfig) -> Self {
        Self::new(&config.runtime_url)
            .with_credential(
                config
                    .runtime_credential
                    .clone()
                    .map(|source| Arc::new(Credentials::new(source))),
            )
            .with_card_keys(config.runtime_card_keys.clone())
    }

    /// The same runtime, presenting `credential` as its bearer on every task.
    #[must_use]
    pub fn with_credential(mut self, credential: Option<Arc<Credentials>>) -> Self {
        self.credential = credential;
        self
    }

    /// Whether the runtime takes the proxy as a caller: a `POST /` with an empty object (no
    /// task: the contract answers `400`) and the proxy's credential, if it has one. `401` or
    /// `403` is a refusal; any other answer (and a runtime that requires nobody) passes.
    pub async fn check_credential(&self) -> Result<(), CredentialCheckError> {
        let mut request = self
            .http
            .post(self.url(TASK_PATH))
            .timeout(Duration::from_secs(10))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body("{}");
        if let Some(credential) = &self.credential {
            let token = credential
                .bearer()
                .await
                .map_err(CredentialCheckError::NoToken)?;
            request = request.bearer_auth(token.expose());
        }
        let response = request
            .send()
            .await
            .map_err(|e| CredentialCheckError::Unreached(error_chain(&e.without_url())))?;
        match response.status().as_u16() {
            status @ (401 | 403) => Err(CredentialCheckError::Refused {
                status,
                presented: self.credential.is_some(),
            }),
            _ => Ok(()),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /health`: `Ok` for 200, else why not (no URL in it: it may hold credentials).
    pub async fn health(&self) -> Result<(), RuntimeCheckError> {
        let response = self
            .http
            .get(self.url(HEALTH_PATH))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        match response {
            Ok(r) if r.status() == reqwest::StatusCode::OK => Ok(()),
            Ok(r) => Err(RuntimeCheckError::Unhealthy(format!(
                "GET /health answered {}",
                r.status().as_u16()
            ))),
            Err(e) => Err(RuntimeCheckError::Unhealthy(format!(
                "GET /health: {}",
                error_chain(&e.without_url())
            ))),
        }
    }

    /// Reads and checks the agent card: valid against the contract schema, with a skill.
    pub async fn agent_card(&self) -> Result<AgentCard, RuntimeCheckError> {
        let url = self.url(AGENT_CARD_PATH);
        let unreadable = |reason: String| RuntimeCheckError::CardUnreadable {
            url: url.clone(),
            reason,
        };
        let response = self
            .http
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| unreadable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unreadable(format!("status {}", response.status())));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| unreadable(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| unreadable(e.to_string()))?;
        let card: AgentCard = read::from_value(json.clone())
            .map_err(|e| RuntimeCheckError::CardInvalid(e.to_string()))?;
        if !card.has_complete_skill() {
            return Err(RuntimeCheckError::CardWithoutSkills);
        }
        if let Err(e) = Schema::AgentCard.validate(&json) {
            return Err(RuntimeCheckError::CardInvalid(e.to_string()));
        }
        if let Some(path) = &self.card_keys {
            verify_card_against(&json, path)?;
        }
        Ok(card)
    }

    /// Checks the card's signatures against the keys of the JWKS file at `path` (read now:
    /// a rotated file is read at the next startup check).
    #[must_use]
    pub fn with_card_keys(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.card_keys = path;
        self
    }

    /// Reads the manifest if the runtime serves one and checks its major version.
    pub async fn check_manifest(&self) -> Result<Option<RuntimeContract>, RuntimeCheckError> {
        let response = self
            .http
            .get(self.url(MANIFEST_PATH))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| RuntimeCheckError::ManifestUnreadable(e.to_string()))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(RuntimeCheckError::ManifestUnreadable(format!(
                "status {}",
                response.status()
            )));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| RuntimeCheckError::ManifestUnreadable(e.to_string()))?;
        let manifest: RuntimeContract = read::from_slice(&body)
            .map_err(|e| RuntimeCheckError::ManifestUnreadable(e.to_string()))?;
        match manifest.major_version() {
            Some(SUPPORTED_MAJOR) => Ok(Some(manifest)),
            _ => Err(RuntimeCheckError::ManifestIncompatible {
                found: manifest.contract_version,
                supported: SUPPORTED_MAJOR,
            }),
        }
    }
}

#[async_trait]
impl Forwarder for HttpRuntime {
    async fn send(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError> {
        self.post(body, trace, timeout, None).await
    }

    async fn stream(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
        events: mpsc::Sender<Bytes>,
    ) -> Result<Reply, ForwardError> {
        self.post(body, trace, timeout, Some(&events)).await
    }
}

impl HttpRuntime {
    /// `POST /` of a task under `timeout`; with `events`, asking for its stream. With a
    /// credential, a `401` (the token expired or was revoked early) fetches a new token and
    /// sends the task once more.
    async fn post<'a>(
        &'a self,
        body: Bytes,
        trace: &'a TraceContext,
        timeout: Duration,
        events: Option<&'a mpsc::Sender<Bytes>>,
    ) -> Result<Reply, ForwardError> {
        let Some(credential) = self.credential.clone() else {
            return self.post_once(body, trace, timeout, events, None).await;
        };
        let authorization = authorization_of(&credential).await?;
        let reply = self
            .post_once(body.clone(), trace, timeout, events, Some(authorization))
            .await?;
        if reply.status != 401 {
            return Ok(reply);
        }
        credential.invalidate();
        let authorization = authorization_of(&credential).await?;
        self.post_once(body, trace, timeout, events, Some(authorization))
            .await
    }

    async fn post_once<'a>(
        &'a self,
        body: Bytes,
        trace: &'a TraceContext,
        timeout: Duration,
        events: Option<&'a mpsc::Sender<Bytes>>,
        authorization: Option<http::HeaderValue>,
    ) -> Result<Reply, ForwardError> {
        let mut headers = trace_headers(trace);
        if let Some(value) = authorization {
            headers.insert(http::header::AUTHORIZATION, value);
        }
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        if events.is_some() {
            headers.insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("text/event-stream"),
            );
        }
        let exchange = async {
            match (&self.tasks, events) {
                (Some(plain), None) => plain.send(body, headers, Reading::Whole).await,
                (Some(plain), Some(events)) => {
                    plain.send(body, headers, Reading::Events(events)).await
                }
                (None, events) => self.post_with_reqwest(body, headers, timeout, events).await,
            }
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ForwardError::Timeout(timeout))?
    }
}

/// The `Authorization` header of `credential`'s token now (marked sensitive).
async fn authorization_of(credential: &Credentials) -> Result<http::HeaderValue, ForwardError> {
    let token = credential
        .bearer()
        .await
        .map_err(|e| ForwardError::Credential(e.to_string()))?;
    let mut value = http::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| ForwardError::Credential("the token is not a header value".to_owned()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// The trace headers of a runtime call: the runtime-call span's context when telemetry is on
/// (the turn is its child), else the task's.
fn trace_headers(trace: &TraceContext) -> http::HeaderMap {
    let mut headers = daedalus_contract::telemetry::current_headers();
    if !headers.contains_key("traceparent") {
        if let Ok(value) = http::HeaderValue::from_str(trace.traceparent()) {
            headers.insert("traceparent", value);
        }
        if let Some(state) = trace
            .tracestate
            .as_deref()
            .and_then(|s| http::HeaderValue::from_str(s).ok())
        {
            headers.insert("tracestate", state);
        }
    }
    headers
}

impl HttpRuntime {
    /// `POST /` through reqwest (an `https://` runtime); an event stream is read as it
    /// arrives when `events` asks for it.
    async fn post_with_reqwest(
        &self,
        body: Bytes,
        headers: http::HeaderMap,
        timeout: Duration,
        events: Option<&mpsc::Sender<Bytes>>,
    ) -> Result<Reply, ForwardError> {
        let mut response = self
            .http
            .post(self.url(TASK_PATH))
            .timeout(timeout)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| classify(&e, timeout))?;
        let status = response.status().as_u16();
        let retry_after = super::forwarder::retry_after(response.headers());
        let is_event_stream = status == 200
            && response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
        let Some(events) = events.filter(|_| is_event_stream) else {
            let body = response.bytes().await.map_err(|e| classify(&e, timeout))?;
            return Ok(Reply {
                status,
                body,
                retry_after,
            });
        };
        let mut reader = EventStreamReader::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| classify(&e, timeout))? {
            let complete = reader
                .push(&chunk)
                .map_err(|e| ForwardError::Io(e.to_string()))?;
            for event in complete {
                let _ = events.send(event).await;
            }
        }
        reader
            .into_reply()
            .map_err(|e| ForwardError::Io(e.to_string()))
    }
}

fn classify(e: &reqwest::Error, timeout: Duration) -> ForwardError {
    if e.is_timeout() {
        ForwardError::Timeout(timeout)
    } else if e.is_connect() || never_sent(e) {
        ForwardError::Unreached(error_chain(e))
    } else {
        ForwardError::Io(error_chain(e))
    }
}

/// Whether hyper says the request was canceled before it was sent (its connection closed
/// first): the runtime cannot have seen it.
fn never_sent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        source = s.source();
    }
    false
}
