//! `PROXY_PORT` endpoints: `/healthz` and `/metrics` (Prometheus text).
//!
//! `/healthz` is 200 while NATS is connected, the agent's consumer is in place, every worker is
//! alive and consuming, and the runtime is up or has been down for less than
//! `RUNTIME_DOWN_LIMIT` (a restart or a crash loop is not a reason to take the pod out). Else
//! 503, with `reason` saying why.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::consume::keeper::ConsumerState;
use crate::forward::availability::RuntimeAvailability;
use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

/// What `/healthz` reports on.
#[derive(Debug)]
pub struct Status {
    pub metrics: Arc<Metrics>,
    /// Set once connected.
    pub client: OnceLock<async_nats::Client>,
    pub runtime: Arc<RuntimeAvailability>,
    pub consumer: Arc<ConsumerState>,
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
    pub fn new(
        metrics: Arc<Metrics>,
        runtime: Arc<RuntimeAvailability>,
        consumer: Arc<ConsumerState>,
    ) -> Self {
        Self {
            metrics,
            client: OnceLock::new(),
            runtime,
            consumer,
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
    /// `healthy` or `unhealthy` (down: unreachable, or `/health` not 200).
    runtime: &'static str,
    /// `ready`, or `missing` while the consumer is being created again.
    consumer: &'static str,
    consuming: bool,
    /// Why the status is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
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
    let runtime = if status.runtime.is_up() {
        "healthy"
    } else {
        "unhealthy"
    };
    let consumer = if status.consumer.is_missing() {
        "missing"
    } else {
        "ready"
    };
    let consuming = status.consuming.load(Ordering::Acquire)
        && status.workers_alive.load(Ordering::Acquire)
            >= status.workers_wanted.load(Ordering::Acquire);
    let reason = if nats != "connected" {
        Some(format!("NATS is {nats}"))
    } else if consumer == "missing" {
        Some("the agent's consumer is missing; it is being created again".to_owned())
    } else if let Some(why) = status.runtime.not_ready_because() {
        Some(why)
    } else if !consuming {
        Some("not consuming: starting, stopping, or a worker is being restarted".to_owned())
    } else {
        None
    };
    let ok = reason.is_none();
    let body = Healthz {
        status: if ok { "ok" } else { "unavailable" },
        nats,
        runtime,
        consumer,
        consuming,
        reason,
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
