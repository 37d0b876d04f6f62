//! The runtime behind the proxy, over the contract's HTTP endpoints. [`Forwarder`] is the seam:
//! the worker only needs "send this task" and "are you healthy". Tasks to an `http://` runtime
//! take a lean path (hyper's pooled client, the URI parsed once, no redirect or retry layers);
//! the rest, and `https://` runtimes, go through reqwest.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::container::{AGENT_CARD_PATH, HEALTH_PATH, MANIFEST_PATH, TASK_PATH};
use daedalus_contract::{AgentCard, RuntimeContract, Schema, read};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::trace::TraceContext;

/// What the runtime answered to a task.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

/// Why a task never got an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("runtime did not answer within {0:?}")]
    Timeout(Duration),
    /// The request never reached the runtime: the connection was refused, timed out, or
    /// closed before the request was sent. The runtime is down; the task was not seen.
    #[error("cannot reach the runtime: {0}")]
    Unreached(String),
    /// The connection failed after the request may have been sent: the runtime may have
    /// received the task.
    #[error("runtime connection failed: {0}")]
    Io(String),
}

/// Sends tasks to a runtime.
#[async_trait]
pub trait Forwarder: Send + Sync + std::fmt::Debug + 'static {
    /// `POST /` with the task body and the proxy span's trace headers.
    async fn send(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError>;
}

/// The runtime over HTTP.
#[derive(Debug, Clone)]
pub struct HttpRuntime {
    base: String,
    /// Health, card and manifest reads (rare; any scheme), and tasks to an `https://` runtime.
    http: reqwest::Client,
    /// Tasks to an `http://` runtime (the pod's loopback, the usual case).
    tasks: Option<PlainTasks>,
}

/// The task path to an `http://` runtime: `POST /` over hyper's pooled HTTP/1 client to a URI
/// parsed once, with no redirect or retry layers (the worker's disposition decides retries).
#[derive(Debug, Clone)]
struct PlainTasks {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: http::Uri,
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
    #[error(
        "the agent card lists no skill with id, name, description and tags; the contract requires one"
    )]
    CardWithoutSkills,
    #[error("cannot read the runtime-contract manifest: {0}")]
    ManifestUnreadable(String),
    #[error("runtime implements contract {found}; this proxy speaks v{supported}")]
    ManifestIncompatible { found: String, supported: u32 },
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
            .filter(|uri| uri.scheme() == Some(&http::uri::Scheme::HTTP))
            .map(|uri| {
                let mut connector = HttpConnector::new();
                connector.set_nodelay(true);
                connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
                let client = Client::builder(TokioExecutor::new())
                    .pool_max_idle_per_host(64)
                    .build(connector);
                PlainTasks { client, uri }
            });
        Self { base, http, tasks }
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
                chain(&e.without_url())
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
        Ok(card)
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
        match &self.tasks {
            Some(plain) => plain.send(body, trace, timeout).await,
            None => self.send_with_reqwest(body, trace, timeout).await,
        }
    }
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

impl PlainTasks {
    async fn send(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError> {
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        headers.extend(trace_headers(trace));
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                if e.is_connect() || never_sent(&e) {
                    ForwardError::Unreached(chain(&e))
                } else {
                    ForwardError::Io(chain(&e))
                }
            })?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| ForwardError::Io(chain(&e)))?
                .to_bytes();
            Ok(Reply { status, body })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ForwardError::Timeout(timeout))?
    }
}

impl HttpRuntime {
    async fn send_with_reqwest(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError> {
        let response = self
            .http
            .post(self.url(TASK_PATH))
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .headers(trace_headers(trace))
            .body(body)
            .send()
            .await
            .map_err(|e| classify(&e, timeout))?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| classify(&e, timeout))?;
        Ok(Reply { status, body })
    }
}

fn classify(e: &reqwest::Error, timeout: Duration) -> ForwardError {
    if e.is_timeout() {
        ForwardError::Timeout(timeout)
    } else if e.is_connect() || never_sent(e) {
        ForwardError::Unreached(chain(e))
    } else {
        ForwardError::Io(chain(e))
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

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
