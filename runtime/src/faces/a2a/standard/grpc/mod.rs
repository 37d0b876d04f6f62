//! The A2A gRPC binding (spec §10): the normative proto's `lf.a2a.v1.A2AService`, generated in
//! the contract crate ([`daedalus_contract::grpc`]), served on the same port as the HTTP
//! bindings. An HTTP/2 request to `/lf.a2a.v1.A2AService/{method}` is a gRPC call; it passes
//! admission and authentication like every task route (their refusals answered as gRPC
//! statuses), its one request message is read whole within the body size and time limits of
//! `POST /`, and [`service`] turns it into the operations every A2A binding shares.

mod service;
pub(in crate::faces::a2a) mod status;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::{self, Next};
use axum::response::Response;
use daedalus_contract::grpc::SERVICE;
use daedalus_contract::grpc::v1::a2a_service_server::A2aServiceServer;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tonic::Status;

use crate::faces::a2a::A2aFace;
use crate::platform::telemetry::a2a::A2aMethod;

/// The gRPC frame header before each message: a compression flag and a 4-byte length.
const FRAME_HEADER_BYTES: u64 = 5;

/// The binding's one route, every method of the service.
pub(in crate::faces::a2a) fn routes(state: &A2aFace) -> Router<A2aFace> {
    let limit = usize::try_from(state.limits().max_body_bytes).unwrap_or(usize::MAX);
    let server = A2aServiceServer::new(service::GrpcFace::new(state.clone()))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX);
    Router::new()
        .route_service(&format!("/{SERVICE}/{{method}}"), server)
        .route_layer(middleware::from_fn_with_state(state.clone(), read_whole))
}

/// Whether a request is a gRPC call (`application/grpc`, with or without `+proto`).
pub(in crate::faces::a2a) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// The operation a call's path names (`/lf.a2a.v1.A2AService/{method}`), for its span.
pub(in crate::faces::a2a) fn operation(path: &str) -> Option<A2aMethod> {
    let method = path
        .strip_prefix('/')?
        .strip_prefix(SERVICE)?
        .strip_prefix('/')?;
    A2aMethod::ALL.into_iter().find(|m| m.name() == method)
}

/// The length the first frame of `body` declares for its message.
fn declared_length(body: &[u8]) -> Option<u32> {
    let header: [u8; 4] = body.get(1..5)?.try_into().ok()?;
    Some(u32::from_be_bytes(header))
}

/// Reads the call's request (each A2A method takes one message) within `POST /`'s limits: a
/// bigger one (or one whose frame says it is bigger) is `RESOURCE_EXHAUSTED`, one that does not arrive in time `DEADLINE_EXCEEDED`;
/// neither reaches the service.
async fn read_whole(State(state): State<A2aFace>, req: Request, next: Next) -> Response {
    let limits = state.limits();
    let (parts, body) = req.into_parts();
    let most = usize::try_from(limits.max_body_bytes.saturating_add(FRAME_HEADER_BYTES))
        .unwrap_or(usize::MAX);
    let read = tokio::time::timeout(limits.body_read_timeout, Limited::new(body, most).collect());
    let too_large = || {
        status::respond(Status::resource_exhausted(format!(
            "the request message is larger than the {}-byte limit",
            limits.max_body_bytes
        )))
    };
    match read.await {
        Ok(Ok(whole)) => {
            let whole = whole.to_bytes();
            // A frame that says it is longer than the limit is refused as one that is.
            match declared_length(&whole) {
                Some(length) if u64::from(length) > limits.max_body_bytes => too_large(),
                _ => {
                    next.run(Request::from_parts(parts, Body::from(whole)))
                        .await
                }
            }
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => too_large(),
        Ok(Err(_)) => status::respond(Status::cancelled("the request ended before its message")),
        Err(_) => status::respond(Status::deadline_exceeded(format!(
            "the request message did not arrive within {}",
            daedalus_contract::container::format_duration(limits.body_read_timeout)
        ))),
    }
}

#[cfg(test)]
mod tests;
