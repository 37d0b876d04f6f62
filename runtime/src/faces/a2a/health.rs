//! `GET /health`: 200 `{"status":"ok"}` when ready; 503 while starting or shutting down.
//! `GET /healthz`: the LLM provider preflight, per provider (re-probed when stale).

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::A2aFace;
use super::error::ApiError;
use crate::services::turns::Phase;

#[derive(Serialize)]
struct Healthy {
    status: &'static str,
}

pub(super) async fn health(State(state): State<A2aFace>) -> Response {
    match state.core().readiness().phase() {
        Phase::Ready => Json(Healthy { status: "ok" }).into_response(),
        Phase::Starting => ApiError::NotReady.into_response(),
        Phase::Draining => ApiError::ShuttingDown.into_response(),
    }
}

/// The runtime's health ([`crate::services::health::runtime_health`]): 200 when `ok`, else 503
/// `degraded`; `providers` lists every provider checked and `downstream` every agent's servers.
pub(super) async fn healthz(State(state): State<A2aFace>) -> Response {
    let health = crate::services::health::runtime_health(state.core()).await;
    let code = if health.healthy() {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(health)).into_response()
}
