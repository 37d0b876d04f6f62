//! `PROXY_PORT` endpoints: `/healthz` (NATS connected, runtime healthy, consuming with every
//! worker alive) and
//! `/metrics` (Prometheus text).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// What `/healthz` reports on.
#[derive(Debug)]
pub struct Status {
    pub metrics: Arc<Metrics>,
    /// Set once connected.
    pub client: OnceLock<async_nats::Client>,
    pub runtime_healthy: watch::Sender<bool>,
    pub consuming: AtomicBool,
    /// Workers running now, and how many there should be: a dead worker is never "consuming".
    pub workers_alive: AtomicUsize,
    pub workers_wanted: AtomicUsize,
}

/// Counts a running worker for as long as it lives (dropped when it ends or panics).
#[derive(Debug)]
pub struct Alive(Arc<Status>);

impl Alive {
    pub fn new(status: &Arc<Status>) -> Self {
        status.workers_alive.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(status))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.workers_alive.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Status {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            metrics,
            client: OnceLock::new(),
            runtime_healthy: watch::Sender::new(false),
            consuming: AtomicBool::new(false),
            workers_alive: AtomicUsize::new(0),
            workers_wanted: AtomicUsize::new(0),
        }
    }
}

#[derive(Serialize)]
struct Healthz {
    status: &'static str,
    nats: &'static str,
    runtime: &'static str,
    consuming: bool,
}

pub fn router(status: Arc<Status>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(status)
}

async fn healthz(State(status): State<Arc<Status>>) -> Response {
    let nats = match status
        .client
        .get()
        .map(async_nats::Client::connection_state)
    {
        Some(async_nats::connection::State::Connected) => "connected",
        Some(_) => "disconnected",
        None => "connecting",
    };
    let runtime = if *status.runtime_healthy.borrow() {
        "healthy"
    } else {
        "unhealthy"
    };
    let consuming = status.consuming.load(Ordering::Acquire)
        && status.workers_alive.load(Ordering::Acquire)
            >= status.workers_wanted.load(Ordering::Acquire);
    let ok = nats == "connected" && runtime == "healthy" && consuming;
    let body = Healthz {
        status: if ok { "ok" } else { "unavailable" },
        nats,
        runtime,
        consuming,
    };
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body)).into_response()
}

async fn metrics(State(status): State<Arc<Status>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        status.metrics.encode(),
    )
        .into_response()
}
