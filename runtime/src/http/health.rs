//! `GET /health`: 200 `{"status":"ok"}` when ready; 503 while starting or shutting down.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;
use super::error::ApiError;
use crate::lifecycle::Phase;

#[derive(Serialize)]
struct Healthy {
    status: &'static str,
}

pub(super) async fn health(State(state): State<AppState>) -> Response {
    match state.lifecycle().phase() {
        Phase::Ready => Json(Healthy { status: "ok" }).into_response(),
        Phase::Starting => ApiError::NotReady.into_response(),
        Phase::Draining => ApiError::ShuttingDown.into_response(),
    }
}
