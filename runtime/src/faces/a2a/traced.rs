//! The A2A face's spans: every A2A request, on every binding, runs under a SERVER span
//! `{a2a.method.name}` of the A2A conventions ([`crate::platform::telemetry::a2a`]) in the
//! caller's trace, carrying our card's name, description and version. HTTP+JSON and gRPC name
//! the operation in the path, so their span is opened around the whole request, refusals
//! included ([`by_path`]); `POST /` names it in its body, so the JSON-RPC and contract
//! bindings open theirs once the body is read ([`server_span`]).
//!
//! The operations ([`super::operations`]) record the message, task and state they see; a
//! streamed answer's span is held by its stream ([`super::events`]); the binding records how a
//! request failed, as its wire says it: the JSON-RPC code, the HTTP status, the gRPC status.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;

use super::A2aFace;
use super::operations::VERSION;
use super::standard::{grpc, rest};
use crate::platform::telemetry::a2a::{self, A2aMethod, Side};
use crate::platform::telemetry::{TraceHeaders, continue_trace, record_error};

/// The SERVER span of a `method` request with `headers`, in protocol `version`.
pub(super) fn server_span(
    state: &A2aFace,
    method: A2aMethod,
    version: Option<&str>,
    headers: &HeaderMap,
) -> tracing::Span {
    let card = state.card();
    let span = a2a::span(Side::Server, method, version, Some(&card));
    continue_trace(&span, &TraceHeaders::from_headers(headers));
    span
}

/// HTTP+JSON and gRPC: the request runs under the span of the operation its path names (a
/// path that names none runs as it is); a refusal records its status as `error.type`.
pub(super) async fn by_path(State(state): State<A2aFace>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let is_grpc = grpc::is_grpc(req.headers());
    let method = if is_grpc {
        grpc::operation(path)
    } else {
        rest::operation(req.method(), path)
    };
    let Some(method) = method else {
        return next.run(req).await;
    };
    let span = server_span(&state, method, Some(VERSION), req.headers());
    if !is_grpc {
        a2a::record_tenant(&span, rest::path_tenant(path));
    }
    let response = next.run(req).instrument(span.clone()).await;
    let failed = if is_grpc {
        response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .filter(|code| *code != "0")
            .map(str::to_owned)
    } else {
        let status = response.status();
        (status.is_client_error() || status.is_server_error()).then(|| status.as_u16().to_string())
    };
    if let Some(error_type) = failed {
        record_error(&span, &error_type);
    }
    response
}
