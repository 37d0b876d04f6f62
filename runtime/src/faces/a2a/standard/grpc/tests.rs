//! The gRPC route as the router answers it, without a socket: refusals before the service runs
//! (starting, draining, a full turn memory) are `UNAVAILABLE` with their `ErrorInfo`, as the
//! other bindings answer 503.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use daedalus_contract::grpc::v1;
use http_body_util::BodyExt;
use prost::Message as _;
use tonic::Code;
use tower::ServiceExt;

use crate::agents::agent_loop::Passthrough;
use crate::faces::a2a::tests::state_with;
use crate::faces::a2a::{A2aFace, router};
use crate::services::turns::admission::HELD_TURN_BYTES;

/// A gRPC `SendMessage` of a text, framed.
fn send(id: &str, text: &str) -> Request<Body> {
    let message = v1::SendMessageRequest::text(id, text).encode_to_vec();
    let mut framed = vec![0];
    framed.extend(u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend(message);
    Request::post("/lf.a2a.v1.A2AService/SendMessage")
        .header("content-type", "application/grpc")
        .header("a2a-version", "1.0")
        .body(Body::from(framed))
        .unwrap()
}

/// The status a call ended with: from the headers of a trailers-only answer, or the trailers.
async fn status_of(state: &A2aFace, request: Request<Body>) -> tonic::Status {
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    if let Some(status) = tonic::Status::from_header_map(&parts.headers) {
        return status;
    }
    let trailers: HeaderMap = body.collect().await.unwrap().trailers().cloned().unwrap();
    tonic::Status::from_header_map(&trailers).expect("a grpc-status")
}

fn reason(status: &tonic::Status) -> String {
    use tonic_types::StatusExt;
    status
        .get_details_error_info()
        .expect("an ErrorInfo")
        .reason
}

#[tokio::test]
async fn while_starting_or_draining_a_call_is_unavailable() {
    let state = state_with(Arc::new(Passthrough), |_| {});
    state.core().readiness().set_draining();
    let status = status_of(&state, send("d-1", "hi")).await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(reason(&status), "UNAVAILABLE");
    assert!(status.message().contains("shutting down"), "{status:?}");
}

#[tokio::test]
async fn with_the_turn_memory_full_a_call_is_unavailable_naming_the_limit() {
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.turn_memory_bytes = u64::try_from(HELD_TURN_BYTES + 2048).unwrap();
    });
    let slow = {
        let state = state.clone();
        tokio::spawn(async move { status_of(&state, send("slow", "***SLEEP 30s late")).await })
    };
    for _ in 0..2_000 {
        if state.core().turns().free_permits() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        state.core().turns().free_permits(),
        0,
        "the slow turn took the room"
    );
    let status = status_of(&state, send("full-1", "x")).await;
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(reason(&status), "UNAVAILABLE");
    assert!(status.message().contains("TURN_MEMORY"), "{status:?}");
    slow.abort();
}
