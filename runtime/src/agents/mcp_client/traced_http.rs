//! The HTTP client under every MCP connection: rmcp's reqwest client, plus the caller's trace
//! and, for a server with a client-credentials grant, the runtime's token as it stands at each
//! request (a shared connection outlives any one token).
//!
//! One connection serves many turns, each in its own trace, and rmcp sends requests from its
//! own task; so a tool call carries its trace in the request itself, as MCP's `_meta`
//! (`traceparent`, `tracestate`), and this client also sends those as HTTP headers. A
//! downstream server sees the trace either way.
//!
//! What only the wire knows of a call, the JSON-RPC id rmcp gave it and the session it went
//! in, is recorded on the call's span ([`CallSpans`]), found by the `traceparent` it carries.

use std::collections::HashMap;
use std::sync::Arc;

use daedalus_contract::credentials::Credentials;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

/// The `_meta` keys (and HTTP headers) of W3C trace context.
pub(super) const TRACE_KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// rmcp's reqwest client, sending a tool call's `_meta` trace context as HTTP headers, and the
/// runtime's current token when the server has a credential of its own.
#[derive(Debug, Clone, Default)]
pub(super) struct TracedHttp {
    http: reqwest::Client,
    credential: Option<Arc<Credentials>>,
    calls: Arc<CallSpans>,
}

/// The spans of a connection's tool calls in flight, by the `traceparent` each carries: the
/// transport records on a call's span `jsonrpc.request.id` and `mcp.session.id`. A call is
/// watched only while its [`Watching`] lives, so the map holds at most the calls in flight.
#[derive(Debug, Default)]
pub(super) struct CallSpans(std::sync::Mutex<HashMap<String, tracing::Span>>);

/// A call watched by [`CallSpans`]; dropping it stops the watch.
pub(super) struct Watching {
    calls: Arc<CallSpans>,
    traceparent: String,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.calls.spans().remove(&self.traceparent);
    }
}

impl CallSpans {
    fn spans(&self) -> std::sync::MutexGuard<'_, HashMap<String, tracing::Span>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Watches `span`, the call that sends `traceparent`, until the guard is dropped.
    pub(super) fn watch(self: &Arc<Self>, traceparent: &str, span: tracing::Span) -> Watching {
        self.spans().insert(traceparent.to_owned(), span);
        Watching {
            calls: Arc::clone(self),
            traceparent: traceparent.to_owned(),
        }
    }

    /// `message` is on its way in `session`: its call's span, if watched, learns its id and
    /// the session.
    fn sent(&self, message: &ClientJsonRpcMessage, session: Option<&str>) {
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return;
        };
        let Some(traceparent) = call
            .params
            .meta
            .as_ref()
            .and_then(|meta| meta.0.get(TRACE_KEYS[0])?.as_str())
        else {
            return;
        };
        if let Some(span) = self.spans().get(traceparent) {
            let id = request.id.to_string();
            crate::platform::telemetry::mcp::record_sent(span, Some(&id), session);
        }
    }
}

impl TracedHttp {
    /// A client presenting `credential`'s token on every request, recording on the spans of
    /// `calls` what it sends.
    pub(super) fn presenting(credential: Option<Arc<Credentials>>, calls: Arc<CallSpans>) -> Self {
        Self {
            http: reqwest::Client::default(),
            credential,
            calls,
        }
    }

    /// The `Authorization` to send: the credential's token now, else what rmcp was given.
    async fn authorization(
        &self,
        given: Option<String>,
    ) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        let Some(credential) = &self.credential else {
            return Ok(given);
        };
        match credential.bearer().await {
            Ok(token) => Ok(Some(token.expose().to_owned())),
            Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(
                format!("no token for the server: {e}").into(),
            )),
        }
    }
}

/// The trace headers a message carries in its `_meta`.
fn trace_headers(message: &ClientJsonRpcMessage) -> Vec<(HeaderName, HeaderValue)> {
    let JsonRpcMessage::Request(request) = message else {
        return Vec::new();
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return Vec::new();
    };
    let Some(meta) = &call.params.meta else {
        return Vec::new();
    };
    TRACE_KEYS
        .iter()
        .filter_map(|key| {
            let value = meta.0.get(*key)?.as_str()?;
            Some((
                HeaderName::from_static(key),
                HeaderValue::from_str(value).ok()?,
            ))
        })
        .collect()
}

impl StreamableHttpClient for TracedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        mut custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        custom_headers.extend(trace_headers(&message));
        self.calls.sent(&message, session_id.as_deref());
        let auth_header = self.authorization(auth_header).await?;
        self.http
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        mut custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        custom_headers.extend(trace_headers(&message));
        self.calls.sent(&message, session_id.as_deref());
        let auth_header = self.authorization(auth_header).await?;
        self.http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let auth_header = self.authorization(auth_header).await?;
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth_header = self.authorization(auth_header).await?;
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth_header = self.authorization(auth_header).await?;
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
