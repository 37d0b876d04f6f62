//! One step's request on one binding, and what came back, in the form assertions read: the
//! HTTP status (gRPC's mapped as A2A §5.4 maps it), the answer's body (a JSON-RPC result
//! unwrapped; the body as sent for a raw step) and, when it failed, the error as the wire
//! named it (a JSON-RPC code; an `ErrorInfo` reason on HTTP+JSON and gRPC). A stream is read
//! to its end, its deadline or one event past its bound.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::corpus::{Binding, Operation, Raw};
use super::wire::{self, AGENT_CARD_PATH};

/// Where the server under test answers: its base URL (the card) and the binding's interface.
#[derive(Debug, Clone)]
pub struct Target {
    pub binding: Binding,
    /// Where the card is (`{base}/.well-known/agent-card.json`).
    pub base: String,
    /// The binding's interface URL, as the card declares it.
    pub interface: String,
}

/// A failed call, as the wire said it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireError {
    /// The A2A error it names, when the wire named one.
    pub name: Option<&'static str>,
    /// The JSON-RPC code (JSON-RPC only).
    pub code: Option<i64>,
    pub message: String,
    pub data: Option<Value>,
    /// The `ErrorInfo` among its details.
    pub details: Option<Value>,
}

impl WireError {
    /// What an `expect_error` is evaluated against.
    pub fn observed(&self) -> Value {
        let mut out = Map::new();
        out.insert("message".into(), Value::String(self.message.clone()));
        if let Some(name) = self.name {
            out.insert("error_type".into(), Value::String(name.to_owned()));
        }
        if let Some(code) = self.code {
            out.insert("code".into(), json!(code));
        }
        if let Some(data) = &self.data {
            out.insert("data".into(), data.clone());
        }
        if let Some(details) = &self.details {
            out.insert("details".into(), details.clone());
        }
        Value::Object(out)
    }
}

/// What a unary call got.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub error: Option<WireError>,
    /// The media type of its `Content-Type` (no parameters), over HTTP.
    pub media_type: Option<String>,
}

/// What a stream got.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    pub status: u16,
    pub events: Vec<Value>,
    /// Still open at its deadline.
    pub timed_out: bool,
    /// The call was refused (or the stream ended with an error).
    pub error: Option<WireError>,
}

/// Why a request did not complete: a fact about the run, not about the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("the request did not complete: {0}")]
    Unreachable(String),
    #[error("{0}")]
    Unsupported(String),
}

/// Sends steps' requests, with the headers every request of the run carries (credentials).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    http: reqwest::Client,
    headers: Vec<(String, String)>,
}

/// What a streamed read may take: a deadline, and at most `limit` events.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub deadline: Duration,
    pub limit: Option<usize>,
}

fn unreachable(e: &reqwest::Error) -> DispatchError {
    DispatchError::Unreachable(e.to_string())
}

/// The body as JSON, or as a string when it is not.
fn json_or_text(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// A JSON-RPC error object as a wire error.
fn jsonrpc_error(error: &Value) -> WireError {
    let code = error.get("code").and_then(Value::as_i64);
    WireError {
        name: code.and_then(wire::error_by_code).map(|row| row.name),
        code,
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        data: error.get("data").cloned(),
        details: None,
    }
}

/// The `ErrorInfo` among `details`.
fn error_info(details: Option<&Value>) -> Option<Value> {
    details?
        .as_array()?
        .iter()
        .find(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.ErrorInfo"))
        })
        .cloned()
}

/// An HTTP+JSON error body (`google.rpc.Status` under `error`, or problem details).
fn rest_error(body: &Value) -> WireError {
    let status = body.get("error").unwrap_or(body);
    let details = status.get("details").cloned();
    let info = error_info(details.as_ref());
    let reason = info
        .as_ref()
        .and_then(|i| i.get("reason"))
        .and_then(Value::as_str);
    WireError {
        name: reason.and_then(wire::error_by_reason).map(|row| row.name),
        code: None,
        message: status
            .get("message")
            .or_else(|| status.get("title"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        data: details,
        details: info,
    }
}

/// The error a whole answer says, if it failed: a JSON-RPC error object (a JSON-RPC answer
/// is 200 either way), or an HTTP status of 400 or more with its body.
fn error_in(binding: Binding, status: u16, body: &Value) -> Option<WireError> {
    match (binding, body.get("error")) {
        (Binding::Jsonrpc, Some(error)) => Some(jsonrpc_error(error)),
        _ if status >= 400 => Some(rest_error(body)),
        _ => None,
    }
}

/// Sends `request` and reads its answer whole: the status and the body.
async fn send_whole(request: reqwest::RequestBuilder) -> Result<Answer, DispatchError> {
    let response = request.send().await.map_err(|e| unreachable(&e))?;
    let status = response.status().as_u16();
    let media_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase());
    let bytes = response.bytes().await.map_err(|e| unreachable(&e))?;
    Ok(Answer {
        status,
        body: json_or_text(&bytes),
        error: None,
        media_type,
    })
}

/// The `data` of each complete SSE event in `buffer`, leaving an incomplete one.
fn take_events(buffer: &mut String) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let normalized = buffer.replace("\r\n", "\n");
        let Some(end) = normalized.find("\n\n") else {
            *buffer = normalized;
            return out;
        };
        let block = &normalized[..end];
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if !data.is_empty() {
            out.push(data.join("\n"));
        }
        normalized[end + 2..].clone_into(buffer);
    }
}

impl Dispatcher {
    pub fn new(timeout: Duration, headers: Vec<(String, String)>) -> Result<Self, DispatchError> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| unreachable(&e))?;
        Ok(Self { http, headers })
    }

    fn request(&self, method: &str, url: &str) -> reqwest::RequestBuilder {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self.http.request(method, url);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
    }

    /// The agent card, over plain HTTP (every binding).
    pub async fn card(&self, base: &str, timeout: Duration) -> Result<Answer, DispatchError> {
        let url = format!("{}{AGENT_CARD_PATH}", base.trim_end_matches('/'));
        send_whole(self.request("GET", &url).timeout(timeout)).await
    }

    /// The request of `operation` with `params` (shaped already) on `target`'s binding.
    fn build(
        &self,
        target: &Target,
        operation: Operation,
        params: &Value,
        streaming: bool,
    ) -> Result<reqwest::RequestBuilder, DispatchError> {
        let route = wire::route(operation).ok_or_else(|| {
            DispatchError::Unsupported(format!("{operation:?} is not an RPC of any binding"))
        })?;
        // HTTP+JSON bodies are `application/a2a+json` (A2A §11.1), as the official runner
        // sends them; JSON-RPC's are `application/json` (§9.1).
        let media_type = if target.binding == Binding::Rest {
            "application/a2a+json"
        } else {
            "application/json"
        };
        let accept = if streaming {
            "text/event-stream"
        } else {
            media_type
        };
        let request = match target.binding {
            Binding::Jsonrpc => self
                .request("POST", &target.interface)
                .json(&json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": route.method, "params": params})),
            Binding::Rest => {
                let (path, rest) = wire::fill_path(&route, params).map_err(DispatchError::Unsupported)?;
                let url = format!("{}{path}", target.interface.trim_end_matches('/'));
                if route.http_method == "GET" || route.http_method == "DELETE" {
                    let query: Vec<String> = rest
                        .into_iter()
                        .map(|(k, v)| {
                            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                            format!("{}={}", wire::encode_segment(&k), wire::encode_segment(&v))
                        })
                        .collect();
                    let url = if query.is_empty() { url } else { format!("{url}?{}", query.join("&")) };
                    self.request(route.http_method, &url)
                } else {
                    self.request(route.http_method, &url)
                        .header("Content-Type", media_type)
                        .body(Value::Object(rest).to_string())
                }
            }
            Binding::Grpc => {
                return Err(DispatchError::Unsupported("gRPC is not dispatched over HTTP/1".into()));
            }
        };
        Ok(request
            .header("A2A-Version", "1.0")
            .header("Accept", accept))
    }

    /// One unary call.
    pub async fn call(
        &self,
        target: &Target,
        operation: Operation,
        params: &Value,
        timeout: Duration,
    ) -> Result<Answer, DispatchError> {
        if operation == Operation::GetAgentCard {
            return self.card(&target.base, timeout).await;
        }
        let request = self
            .build(target, operation, params, false)?
            .timeout(timeout);
        let Answer {
            status,
            body,
            media_type,
            ..
        } = send_whole(request).await?;
        let error = error_in(target.binding, status, &body);
        // A JSON-RPC answer's body is its result; an HTTP+JSON one's is itself.
        let body = match (target.binding, &error) {
            (Binding::Jsonrpc, Some(_)) => Value::Null,
            (Binding::Jsonrpc, None) => body.get("result").cloned().unwrap_or(Value::Null),
            _ => body,
        };
        Ok(Answer {
            status,
            body,
            error,
            media_type,
        })
    }

    /// A raw request, sent as written under the binding's interface URL; the whole body is
    /// the answer.
    pub async fn raw(
        &self,
        target: &Target,
        raw: &Raw,
        timeout: Duration,
    ) -> Result<Answer, DispatchError> {
        let mut answer = send_whole(self.raw_request(target, raw)?.timeout(timeout)).await?;
        answer.error = error_in(target.binding, answer.status, &answer.body);
        Ok(answer)
    }

    fn raw_request(
        &self,
        target: &Target,
        raw: &Raw,
    ) -> Result<reqwest::RequestBuilder, DispatchError> {
        if target.binding == Binding::Grpc {
            return Err(DispatchError::Unsupported(
                "a raw HTTP request has no gRPC form".into(),
            ));
        }
        // A well-known path is at the server's root (RFC 8615); any other is under the
        // binding's interface.
        let root = if raw.path.starts_with("/.well-known/") {
            &target.base
        } else {
            &target.interface
        };
        let url = format!("{}{}", root.trim_end_matches('/'), raw.path);
        // As written: never a version header, and the run's credentials only when the test
        // is not about credentials.
        let mut request = if raw.bare {
            let method =
                reqwest::Method::from_bytes(raw.method.as_bytes()).unwrap_or(reqwest::Method::GET);
            self.http.request(method, &url)
        } else {
            self.request(&raw.method, &url)
        };
        for (name, value) in &raw.headers {
            request = request.header(name, value);
        }
        Ok(match (&raw.body, &raw.body_raw) {
            (_, Some(text)) => request.body(text.clone()),
            (Some(body), None) => request.body(body.to_string()),
            (None, None) => request,
        })
    }

    /// A streamed call (or a raw request answered with a stream): its events, each a
    /// `StreamResponse` (a raw step's: the event as sent).
    pub async fn stream(
        &self,
        target: &Target,
        step: Streaming<'_>,
        bound: Bound,
    ) -> Result<Streamed, DispatchError> {
        let (request, unwrap) = match step {
            Streaming::Operation(operation, params) => {
                (self.build(target, operation, params, true)?, true)
            }
            Streaming::Raw(raw) => (self.raw_request(target, raw)?, false),
        };
        let mut response = request.send().await.map_err(|e| unreachable(&e))?;
        let status = response.status().as_u16();
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_stream {
            let bytes = response.bytes().await.map_err(|e| unreachable(&e))?;
            let body = json_or_text(&bytes);
            let error = error_in(target.binding, status, &body).unwrap_or_else(|| WireError {
                message: format!("answered {status} without a stream"),
                ..WireError::default()
            });
            let error = Some(error);
            return Ok(Streamed {
                status,
                events: Vec::new(),
                timed_out: false,
                error,
            });
        }
        let mut events = Vec::new();
        let mut error = None;
        let mut buffer = String::new();
        let read = async {
            while let Some(chunk) = response.chunk().await.map_err(|e| unreachable(&e))? {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                for data in take_events(&mut buffer) {
                    let value = json_or_text(data.as_bytes());
                    let event = match (unwrap, target.binding) {
                        (true, Binding::Jsonrpc) => {
                            if let Some(e) = value.get("error") {
                                error = Some(jsonrpc_error(e));
                                return Ok(());
                            }
                            value.get("result").cloned().unwrap_or(Value::Null)
                        }
                        _ => value,
                    };
                    events.push(event);
                    if bound.limit.is_some_and(|limit| events.len() >= limit) {
                        return Ok(());
                    }
                }
            }
            Ok::<(), DispatchError>(())
        };
        let timed_out = match tokio::time::timeout(bound.deadline, read).await {
            Ok(done) => {
                done?;
                false
            }
            Err(_) => true,
        };
        Ok(Streamed {
            status,
            events,
            timed_out,
            error,
        })
    }
}

/// What a streamed step sends.
#[derive(Debug, Clone, Copy)]
pub enum Streaming<'a> {
    Operation(Operation, &'a Value),
    Raw(&'a Raw),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_cut_at_blank_lines_and_joined_across_data_lines() {
        let mut buffer = String::from(
            ": keep-alive\n\ndata: {\"a\":1}\r\n\r\ndata: {\"b\":\ndata: 2}\n\ndata: {\"c\"",
        );
        assert_eq!(
            take_events(&mut buffer),
            vec!["{\"a\":1}".to_owned(), "{\"b\":\n2}".to_owned()]
        );
        assert_eq!(buffer, "data: {\"c\"");
    }

    #[test]
    fn errors_are_named_by_their_code_or_their_reason() {
        let jsonrpc = jsonrpc_error(&json!({"code": -32001, "message": "no such task"}));
        assert_eq!(jsonrpc.name, Some("TaskNotFoundError"));
        assert_eq!(jsonrpc.observed()["code"], -32001);
        let rest = rest_error(
            &json!({"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "finished",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org"}]}}),
        );
        assert_eq!(rest.name, Some("UnsupportedOperationError"));
        assert_eq!(
            rest.details.as_ref().and_then(|d| d.get("reason")),
            Some(&json!("UNSUPPORTED_OPERATION"))
        );
        assert_eq!(
            rest_error(&json!({"error": {"code": 400, "message": "x"}})).name,
            None,
            "nothing named, nothing guessed"
        );
    }
}
