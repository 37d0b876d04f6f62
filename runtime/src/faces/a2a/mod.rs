//! The A2A face: the runtime contract's binding — `POST /` (a Task, or SSE), `GET /health`,
//! `GET /.well-known/agent-card.json` and the runtime-contract manifest — as an axum router over
//! [`ContractState`]. Handlers translate the wire into calls of the turn service and back; they
//! decide nothing about turns. The standard A2A bindings join it here on the same port, sharing
//! its admission, authentication and operations: JSON-RPC on `POST /` (v1.0 and v0.3),
//! HTTP+JSON under `/a2a/rest`, and gRPC at `/lf.a2a.v1.A2AService/*` (HTTP/2).

mod auth;
mod controls;
mod discovery;
mod error;
mod events;
mod grpc;
mod health;
mod json;
mod jsonrpc;
mod method;
mod operations;
mod rest;
pub(crate) mod send;
mod sse;
mod unread_body;
mod v03;
pub mod wiring;

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_contract::container::{AGENT_CARD_PATH, HEALTH_PATH, MANIFEST_PATH, TASK_PATH};
use daedalus_contract::{A2aError, A2aErrorKind};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub use discovery::{CONTRACT_BINDING, Discovery};
pub use error::ApiError;

use crate::config::Limits;
use crate::core::Core;
use crate::turns::Phase;

/// The contract face's state: the runtime's core, the agent it serves, and its discovery
/// documents (both replaced when the deployment is reloaded).
#[derive(Debug, Clone)]
pub struct ContractState(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    core: Core,
    served: ArcSwap<Served>,
    /// Body size and read timeouts of `POST /`.
    limits: Limits,
}

/// The agent `POST /` runs, and the documents that describe it.
#[derive(Debug)]
struct Served {
    agent: String,
    discovery: Discovery,
}

impl ContractState {
    /// The face of `core` serving `agent`.
    pub fn new(core: Core, agent: &str, discovery: Discovery, limits: Limits) -> Self {
        Self(Arc::new(Shared {
            core,
            served: ArcSwap::from_pointee(Served {
                agent: agent.to_owned(),
                discovery,
            }),
            limits,
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn core(&self) -> &Core {
        &self.0.core
    }

    /// The name of the agent the contract face serves.
    pub fn agent(&self) -> String {
        self.0.served.load().agent.clone()
    }

    /// From the next request on, `POST /` runs `agent`, described by `discovery`.
    pub fn redeploy(&self, agent: &str, discovery: Discovery) {
        self.0.served.store(Arc::new(Served {
            agent: agent.to_owned(),
            discovery,
        }));
    }

    /// The agent card served now.
    fn card(&self) -> daedalus_contract::AgentCard {
        self.served().discovery.card().clone()
    }

    fn served(&self) -> Arc<Served> {
        self.0.served.load_full()
    }
}

/// The contract face's routes.
pub fn router(state: ContractState) -> Router {
    let tasks = Router::new()
        .route(TASK_PATH, post(send::post))
        .merge(rest::routes())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit));
    // The gRPC binding: the same admission and authentication, refusals as gRPC statuses.
    let grpc = grpc::routes(&state)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit));
    Router::new()
        .route(HEALTH_PATH, get(health::health))
        .route("/healthz", get(health::healthz))
        .route(AGENT_CARD_PATH, get(discovery::agent_card))
        .route(MANIFEST_PATH, get(discovery::manifest))
        .merge(tasks)
        .merge(grpc)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(middleware::from_fn(unread_body::close_if_body_unread))
        .layer(TraceLayer::new_for_http().on_failure(log_failure))
        .layer(CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::Internal("the handler panicked".to_owned()).into_response()
            },
        ))
}

/// A 5xx is an error worth a line at ERROR, except the 503s the runtime sends on purpose (not
/// ready yet, draining, busy): those are its normal answers while starting and stopping.
fn log_failure(
    failure: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    use tower_http::classify::ServerErrorsFailureClass;
    match failure {
        ServerErrorsFailureClass::StatusCode(StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::debug!(?latency, "answered 503");
        }
        failure => tracing::error!(%failure, ?latency, "response failed"),
    }
}

/// Admission for task routes: 503 unless ready, before the body is read; otherwise the request
/// counts as in flight until its response is sent.
async fn admit(State(state): State<ContractState>, req: Request, next: Next) -> Response {
    let core = state.core();
    let refuse = |error: ApiError| {
        if grpc::is_grpc(req.headers()) {
            let why = A2aError::new(A2aErrorKind::Unavailable, error.to_string());
            grpc::status::refuse(&why)
        } else {
            error.into_response()
        }
    };
    match core.readiness().phase() {
        Phase::Starting => refuse(ApiError::NotReady),
        Phase::Draining => refuse(ApiError::ShuttingDown),
        Phase::Ready => {
            let _inflight = core.turns().hold();
            next.run(req).await
        }
    }
}

/// No route: a gRPC call of another service (or another version's) is `UNIMPLEMENTED`.
async fn not_found(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let error = ApiError::NotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    };
    if grpc::is_grpc(&headers) {
        let why = A2aError::new(A2aErrorKind::MethodNotFound, error.to_string());
        return grpc::status::refuse(&why);
    }
    error.into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

#[cfg(test)]
mod admission_tests;
#[cfg(test)]
mod jsonrpc_tests;
#[cfg(test)]
mod push_tests;
#[cfg(test)]
mod rest_tests;
#[cfg(test)]
mod shapes_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod v03_tests;
