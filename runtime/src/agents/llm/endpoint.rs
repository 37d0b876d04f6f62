//! What the provider clients share: one endpoint URL with its headers (the configured extra
//! headers plus the provider's credentials, marked sensitive), a timeout, a POST that turns a
//! non-200 answer into an [`LlmError`] carrying the server's `Retry-After` and the message of
//! the provider's error body, and [`Endpoint::chat`], one call under the retry policy with
//! its answer read whole or streamed. A provider brings only its wire: the request body and
//! how its [`Answer`] reads.

use daedalus_contract::error_chain::error_chain;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde::Deserialize;
use serde_json::Value;

use super::retry::{Failure, RetryPolicy, parse_retry_after};
use super::{ChatRequest, ChatResponse, LlmError, LlmEvent, sse};
use crate::config::deployment::ProviderSettings;
use crate::platform::bearer::Bearer;

/// Default request timeout when the provider block sets none.
const DEFAULT_TIMEOUT_SECS: f64 = 600.0;

/// A provider's chat endpoint.
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    provider: &'static str,
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    timeout: Duration,
    /// When the provider forwards the caller's bearer: the header it goes in, and the prefix
    /// before the token (`authorization`, `Bearer `).
    caller_credential: Option<(HeaderName, &'static str)>,
}

impl Endpoint {
    /// `credentials` are added after the configured headers, and marked sensitive. When the
    /// settings forward the caller's bearer, it goes in `caller_header` (after its prefix),
    /// replacing the configured credential for that call only.
    pub(super) fn new(
        provider: &'static str,
        url: String,
        settings: &ProviderSettings,
        credentials: &[(&'static str, String)],
        caller_header: (&'static str, &'static str),
    ) -> Result<Self, LlmError> {
        let invalid = |message: String| LlmError::Decode { provider, message };
        let mut headers = HeaderMap::new();
        for (name, value) in &settings.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("header name {name:?} is invalid")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| invalid(format!("header {name} has an invalid value")))?;
            headers.insert(name, value);
        }
        for (name, value) in credentials {
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| invalid("the API key is not a valid header value".into()))?;
            value.set_sensitive(true);
            headers.insert(*name, value);
        }
        let http = super::http_client()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
        let timeout =
            Duration::from_secs_f64(settings.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS));
        let caller_credential = settings
            .forward_inbound_auth
            .then(|| (HeaderName::from_static(caller_header.0), caller_header.1));
        Ok(Self {
            provider,
            http,
            url,
            headers,
            timeout,
            caller_credential,
        })
    }

    /// The headers of one call: the configured ones, with the caller's bearer as the
    /// credential when this provider forwards it and the call has one. Built per call, from
    /// the call's own bearer: nothing shared ever holds a caller's token.
    fn headers_for(&self, caller: &Bearer) -> Result<HeaderMap, Failure> {
        let mut headers = self.headers.clone();
        if let (Some((name, prefix)), Some(token)) = (&self.caller_credential, caller.expose()) {
            let mut value = HeaderValue::from_str(&format!("{prefix}{token}")).map_err(|_| {
                Failure::from(LlmError::Decode {
                    provider: self.provider,
                    message: "the caller's bearer is not a valid header value".to_owned(),
                })
            })?;
            value.set_sensitive(true);
            headers.insert(name.clone(), value);
        }
        Ok(headers)
    }

    /// POSTs `body` for `caller`; a 200 answer is returned for the caller to read.
    pub(super) async fn post(
        &self,
        body: &Value,
        caller: &Bearer,
    ) -> Result<reqwest::Response, Failure> {
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers_for(caller)?)
            .headers(crate::platform::telemetry::current_headers())
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        if status == 200 {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = response.text().await.unwrap_or_default();
        let error = LlmError::Http {
            provider: self.provider,
            status,
            message: error_message(&text),
        };
        Err(Failure { error, retry_after })
    }

    /// One chat call: `body` (with the request's `extra` merged in) POSTed under `retry`, its
    /// answer read as `A`, whole or, when the request streams, event by event with each text
    /// delta passed to `events`.
    pub(super) async fn chat<A: Answer>(
        &self,
        retry: &RetryPolicy,
        mut body: Value,
        request: &ChatRequest,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        super::merge_extra(self.provider, &mut body, &request.extra)?;
        retry
            .run(self.provider, events, |_| {
                self.attempt::<A>(&body, &request.caller, request.stream, events)
            })
            .await
    }

    async fn attempt<A: Answer>(
        &self,
        body: &Value,
        caller: &Bearer,
        stream: bool,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, Failure> {
        let response = self.post(body, caller).await?;
        if !stream {
            let bytes = response.bytes().await.map_err(|e| self.transport(&e))?;
            return A::whole(&bytes).map_err(Failure::from);
        }
        let mut answer = A::default();
        let mut stream = Box::pin(sse::events(response.bytes_stream()));
        while let Some(event) = stream.next().await {
            let event = event.map_err(|e| self.transport(&e))?;
            match answer.add(&event.data)? {
                Step::Delta(text) => events(LlmEvent::TextDelta(text)),
                Step::Stop => break,
                Step::Continue => {}
            }
        }
        answer.finish().map_err(Failure::from)
    }

    /// A failure to talk to the endpoint at all.
    pub(super) fn transport(&self, e: &reqwest::Error) -> Failure {
        let error = if e.is_timeout() {
            LlmError::Timeout {
                provider: self.provider,
                timeout: self.timeout,
            }
        } else {
            LlmError::Transport {
                provider: self.provider,
                url: crate::config::redact_url(&self.url),
                message: crate::config::redact_text(&error_chain(e)),
            }
        };
        Failure::from(error)
    }
}

/// How a provider's answer reads: whole, or assembled from the events of its stream.
pub(super) trait Answer: Default + Send {
    /// A whole (non-streamed) answer's body.
    fn whole(body: &[u8]) -> Result<ChatResponse, LlmError>;
    /// One streamed event's `data`, added to the answer so far.
    fn add(&mut self, data: &str) -> Result<Step, LlmError>;
    /// The answer the stream assembled, once it ended.
    fn finish(self) -> Result<ChatResponse, LlmError>;
}

/// What one streamed event meant.
pub(super) enum Step {
    /// Text to pass on as it comes.
    Delta(String),
    /// Nothing to pass on yet.
    Continue,
    /// The end of the answer: read no further.
    Stop,
}

/// The `error.message` of a provider's error body (OpenAI's and Anthropic's share the shape),
/// else the start of the body.
fn error_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct ErrorWire {
        error: ErrorDetail,
    }
    #[derive(Deserialize)]
    struct ErrorDetail {
        message: String,
    }
    serde_json::from_str::<ErrorWire>(body)
        .map_or_else(|_| body.chars().take(300).collect(), |e| e.error.message)
}
