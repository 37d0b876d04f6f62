//! The A2A face: every A2A binding of the agent on the main port, as one axum router over
//! [`A2aFace`] (the runtime's core, the agent served and its discovery documents).
//!
//! - [`contract`]: the runtime contract's binding, `POST /` in the contract dialect (a Task,
//!   or SSE), which the proxy speaks;
//! - [`standard`]: the standard A2A bindings, JSON-RPC on `POST /` (v1.0 and v0.3), HTTP+JSON
//!   under `/a2a/rest`, and gRPC at `/lf.a2a.v1.A2AService/*` (HTTP/2);
//! - beside them, what they share: [`operations`] (the spec's task rules around the turn
//!   service), [`events`] and [`sse`] (streamed answers), [`body`] (the body rules of `POST /`),
//!   [`auth`] and the admission below, [`controls`], [`error`], [`discovery`] (the card and
//!   the manifest), [`health`].
//!
//! Handlers translate the wire into calls of the turn service and back; they decide nothing
//! about turns. `POST /` is shared: a JSON-RPC body goes to the JSON-RPC binding, any other
//! to the contract binding.

mod auth;
mod body;
mod contract;
mod controls;
mod discovery;
mod error;
mod events;
mod health;
mod operations;
mod rate_limit;
mod sse;
mod standard;
mod traced;
mod unread_body;
pub mod wiring;

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use daedalus_contract::container::{AGENT_CARD_PATH, HEALTH_PATH, MANIFEST_PATH, TASK_PATH};
use daedalus_contract::{A2aError, A2aErrorKind};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub use discovery::{CONTRACT_BINDING, Discovery};
pub use error::ApiError;

use crate::config::Limits;
use crate::platform::identity::Caller;
use crate::platform::telemetry::a2a::A2aMethod;
use crate::platform::telemetry::record_error;
use crate::services::state::Core;
use crate::services::turns::Phase;
use body::TaskPost;
use standard::{grpc, jsonrpc, rest};
use tracing::Instrument as _;

/// The A2A face's state: the runtime's core, the agent it serves, and its discovery
/// documents (both replaced when the deployment is reloaded).
#[derive(Debug, Clone)]
pub struct A2aFace(Arc<Shared>);

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

impl A2aFace {
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

    /// The name of the agent the A2A face serves.
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

    /// The agent card served now, signed when cards are.
    fn card(&self) -> Arc<daedalus_contract::AgentCard> {
        self.cards().card.clone()
    }

    /// Every form of the card served now.
    fn cards(&self) -> Arc<discovery::SignedCards> {
        self.served().discovery.cards(self.core().card_keys())
    }

    fn served(&self) -> Arc<Served> {
        self.0.served.load_full()
    }
}

/// The A2A face's routes.
pub fn router(state: A2aFace) -> Router {
    let tasks = Router::new()
        .route(TASK_PATH, post(post_task))
        .merge(rest::routes())
        // Inside authentication: it reads the caller authentication found.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rate_limit::add_fields,
        ))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            traced::by_path,
        ));
    // The gRPC binding: the same admission and authentication, refusals as gRPC statuses.
    let grpc = grpc::routes(&state)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            traced::by_path,
        ));
    Router::new()
        .route(HEALTH_PATH, get(health::health))
        .route("/healthz", get(health::healthz))
        .route(AGENT_CARD_PATH, get(discovery::agent_card))
        .route(discovery::JWKS_PATH, get(discovery::jwks))
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

/// `POST /`: the contract binding, or the JSON-RPC binding for a JSON-RPC body.
async fn post_task(
    State(state): State<A2aFace>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    uri: Uri,
    body: TaskPost,
) -> Result<Response, ApiError> {
    match body {
        TaskPost::Contract(request) => {
            let method = if sse::wants_stream(&headers) {
                A2aMethod::SendStreamingMessage
            } else {
                A2aMethod::SendMessage
            };
            // The contract's binding has no A2A protocol version of its own.
            let span = traced::server_span(&state, method, None, &headers);
            let answer = contract::send(&state, &headers, caller, *request)
                .instrument(span.clone())
                .await;
            if let Err(refused) = &answer {
                record_error(&span, refused.status().as_str());
            }
            answer
        }
        TaskPost::JsonRpc(request) => {
            Ok(jsonrpc::answer(&state, &headers, &uri, &caller, request).await)
        }
        TaskPost::BadJsonRpc(why) => Ok(jsonrpc::invalid_request(&why)),
        TaskPost::NotJson(why) => Ok(jsonrpc::parse_error(&why)),
        TaskPost::JsonRpcMediaType { id, found } => Ok(jsonrpc::wrong_media_type(id, &found)),
    }
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
async fn admit(State(state): State<A2aFace>, req: Request, next: Next) -> Response {
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
mod push_tests;
#[cfg(test)]
mod shapes_tests;
#[cfg(test)]
mod tests;
