//! Broken variants of our runtime for the ACTS runner to catch: the real runtime (the `tck`
//! model) behind a proxy that breaks one rule of A2A on the way in or out. The runtime's card
//! names the proxy (`PUBLIC_URL`), so the runner only ever talks to the broken variant, over
//! JSON-RPC and HTTP+JSON (the proxy speaks HTTP/1.1, not gRPC).
//!
//! A stream is passed on once it has ended (the proxy rewrites whole answers), which the tests
//! a mutant is run on do not mind.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use daedalus_test_kit::RuntimeProcess;
use serde_json::Value;

/// One rule of A2A broken, and the ACTS test named for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActsDefect {
    /// No defect: the proxy passes everything on as it came.
    None,
    /// Task states in v0.3's words (`completed`), not v1's (`TASK_STATE_COMPLETED`).
    StatesInOldWords,
    /// An unknown task is an internal error (-32603), not `TaskNotFoundError` (-32001).
    NotFoundIsInternal,
    /// A stream's first event (the task as it stands) is left out.
    StreamsSkipTheTask,
    /// Any `A2A-Version` is served as 1.0.
    AnyVersionAccepted,
    /// `historyLength` is ignored: the whole history comes back.
    HistoryLengthIgnored,
    /// HTTP+JSON answers are `application/json`, not `application/a2a+json`.
    PlainJsonContentType,
    /// A push config's credentials are dropped: notifications go out without them.
    PushWithoutCredentials,
    /// The extended card is served without credentials (the auth pass).
    ExtendedCardToAnyone,
}

impl ActsDefect {
    pub(crate) const MUTANTS: [ActsDefect; 8] = [
        ActsDefect::StatesInOldWords,
        ActsDefect::NotFoundIsInternal,
        ActsDefect::StreamsSkipTheTask,
        ActsDefect::AnyVersionAccepted,
        ActsDefect::HistoryLengthIgnored,
        ActsDefect::PlainJsonContentType,
        ActsDefect::PushWithoutCredentials,
        ActsDefect::ExtendedCardToAnyone,
    ];

    /// The ACTS test named for the defect, and the binding it is run on.
    pub(crate) fn caught_by(self) -> (&'static str, &'static str) {
        match self {
            Self::None => unreachable!("the baseline breaks nothing"),
            Self::StatesInOldWords => ("CORE-SEND-001", "jsonrpc"),
            Self::NotFoundIsInternal => ("CORE-ERR-001", "jsonrpc"),
            Self::StreamsSkipTheTask => ("STREAM-SSE-004", "jsonrpc"),
            Self::AnyVersionAccepted => ("VER-NEG-001", "jsonrpc"),
            Self::HistoryLengthIgnored => ("CORE-GET-002", "jsonrpc"),
            Self::PlainJsonContentType => ("REST-CT-001", "rest"),
            Self::PushWithoutCredentials => ("SEC-PUSH-001", "jsonrpc"),
            Self::ExtendedCardToAnyone => ("SEC-EXTCARD-001", "rest"),
        }
    }

    /// Whether the runtime behind it enforces credentials (the auth pass).
    pub(crate) fn needs_auth(self) -> bool {
        self == Self::ExtendedCardToAnyone
    }
}

/// A broken variant running: the runtime and the proxy in front of it.
pub(crate) struct Mutant {
    pub(crate) url: String,
    _runtime: RuntimeProcess,
    _proxy: tokio::task::JoinHandle<()>,
}

struct Proxy {
    defect: ActsDefect,
    upstream: String,
    client: reqwest::Client,
}

/// Starts our runtime with `env`, behind a proxy that breaks it as `defect` says.
pub(crate) async fn acts_mutant(defect: ActsDefect, env: &[(&str, &str)]) -> Mutant {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("a port for the proxy");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let mut env = env.to_vec();
    env.extend([
        ("DEFAULT_MODEL", "tck"),
        ("PUSH_ALLOW_HOSTS", "127.0.0.1,localhost"),
        ("PUBLIC_URL", url.as_str()),
    ]);
    let runtime = RuntimeProcess::start_with("agent", &env).await;
    let proxy = Arc::new(Proxy {
        defect,
        upstream: runtime.url(),
        client: reqwest::Client::new(),
    });
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the proxy serves");
    });
    Mutant {
        url,
        _runtime: runtime,
        _proxy: server,
    }
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let defect = proxy.defect;
    let body = broken_request(defect, &mut parts, body);
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut upstream = proxy
        .client
        .request(parts.method.clone(), format!("{}{path}", proxy.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.send().await {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let bytes = answer.bytes().await.unwrap_or_default();
    let streamed = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let bytes = if streamed {
        broken_stream(defect, &bytes)
    } else {
        broken_json(defect, &bytes)
    };
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            response.headers_mut().insert(name.clone(), value.clone());
        }
    }
    if defect == ActsDefect::PlainJsonContentType
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/a2a+json"))
    {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    response
}

/// The request as the defect breaks it on the way in.
fn broken_request(
    defect: ActsDefect,
    parts: &mut axum::http::request::Parts,
    body: Bytes,
) -> Bytes {
    let version = HeaderName::from_static("a2a-version");
    match defect {
        ActsDefect::AnyVersionAccepted if parts.headers.contains_key(&version) => {
            parts
                .headers
                .insert(version, HeaderValue::from_static("1.0"));
            body
        }
        ActsDefect::ExtendedCardToAnyone
            if parts.uri.path().ends_with("/extendedAgentCard")
                && !parts.headers.contains_key(header::AUTHORIZATION) =>
        {
            parts.headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_static("Bearer itk-valid-token"),
            );
            body
        }
        ActsDefect::HistoryLengthIgnored | ActsDefect::PushWithoutCredentials => {
            let Ok(mut json) = serde_json::from_slice::<Value>(&body) else {
                return body;
            };
            let dropped = if defect == ActsDefect::HistoryLengthIgnored {
                "historyLength"
            } else {
                "authentication"
            };
            drop_key(&mut json, dropped);
            Bytes::from(serde_json::to_vec(&json).expect("JSON"))
        }
        _ => body,
    }
}

/// Removes every `key`, at any depth.
fn drop_key(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            map.remove(key);
            map.values_mut().for_each(|v| drop_key(v, key));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| drop_key(v, key)),
        _ => {}
    }
}

/// A JSON answer as the defect breaks it on the way out.
fn broken_json(defect: ActsDefect, bytes: &Bytes) -> Bytes {
    let Ok(mut json) = serde_json::from_slice::<Value>(bytes) else {
        return bytes.clone();
    };
    if !break_answer(defect, &mut json) {
        return bytes.clone();
    }
    Bytes::from(serde_json::to_vec(&json).expect("JSON"))
}

/// Breaks one answer (or stream event); whether it changed anything.
fn break_answer(defect: ActsDefect, json: &mut Value) -> bool {
    match defect {
        ActsDefect::StatesInOldWords => {
            let text = json.to_string();
            let old = text.replace("\"TASK_STATE_COMPLETED\"", "\"completed\"");
            *json = serde_json::from_str(&old).expect("JSON");
            old != text
        }
        ActsDefect::NotFoundIsInternal => match json.pointer_mut("/error/code") {
            Some(code) if code.as_i64() == Some(-32001) => {
                *code = Value::from(-32603);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// An SSE answer as the defect breaks it on the way out.
fn broken_stream(defect: ActsDefect, bytes: &Bytes) -> Bytes {
    let text = String::from_utf8_lossy(bytes);
    let mut events: Vec<String> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if defect == ActsDefect::StreamsSkipTheTask
        && let Some(first) = events.iter().position(|e| e.starts_with("data:"))
    {
        events.remove(first);
    }
    let events: Vec<String> = events
        .into_iter()
        .map(|event| {
            let Some(data) = event.strip_prefix("data:") else {
                return event;
            };
            let Ok(mut json) = serde_json::from_str::<Value>(data.trim()) else {
                return event;
            };
            if break_answer(defect, &mut json) {
                format!("data: {json}")
            } else {
                event
            }
        })
        .collect();
    Bytes::from(events.join("\n\n") + "\n\n")
}
