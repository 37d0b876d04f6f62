//! The contract face: `POST /`, `GET /health`, `GET /.well-known/agent-card.json` and the
//! runtime-contract manifest, as an axum router over shared [`AppState`].

mod discovery;
mod error;
mod health;
mod json;
pub(crate) mod send;
mod unread_body;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_schemas::container::{AGENT_CARD_PATH, HEALTH_PATH, MANIFEST_PATH, TASK_PATH};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub use discovery::{CONTRACT_BINDING, Discovery};
pub use error::ApiError;

use crate::agent::Agent;
use crate::agents::Fleet;
use crate::config::Limits;
use crate::lifecycle::{Lifecycle, Phase};
use crate::llm::preflight::Preflight;
use crate::metrics::Metrics;
use crate::tasks::TaskRegistry;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The agent the contract face serves.
    agent: Arc<dyn Agent>,
    fleet: Arc<Fleet>,
    metrics: Arc<Metrics>,
    discovery: Discovery,
    preflight: Arc<Preflight>,
    lifecycle: Arc<Lifecycle>,
    tasks: TaskRegistry,
    /// One turn at a time per conversation, for every face.
    conversations: Arc<crate::conversations::ConversationLocks>,
    /// One permit per running turn (`MAX_CONCURRENT_TASKS`).
    turns: Arc<tokio::sync::Semaphore>,
    limits: Limits,
    /// Every task being worked on; shutdown waits for it to empty.
    inflight: TaskTracker,
    /// Fired when the grace period is over: agents stop at their next safe point.
    cancel: CancellationToken,
}

impl AppState {
    /// State for `fleet`, whose agent `served` the contract face serves.
    ///
    /// # Panics
    /// If `served` is not one of the fleet's agents (configuration guarantees it is).
    pub fn new(
        served: &str,
        fleet: Fleet,
        discovery: Discovery,
        preflight: Arc<Preflight>,
        limits: Limits,
        max_tasks: usize,
    ) -> Self {
        let agent = Arc::clone(
            fleet
                .agents
                .get(served)
                .expect("the served agent is one of the deployment's agents"),
        );
        Self(Arc::new(Shared {
            agent,
            fleet: Arc::new(fleet),
            metrics: Arc::new(Metrics::new()),
            discovery,
            preflight,
            lifecycle: Arc::new(Lifecycle::default()),
            tasks: TaskRegistry::new(
                max_tasks,
                usize::try_from(limits.task_memory_bytes).unwrap_or(usize::MAX),
            ),
            turns: Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent_tasks)),
            conversations: Arc::default(),
            limits,
            inflight: TaskTracker::new(),
            cancel: CancellationToken::new(),
        }))
    }

    /// The LLM provider checks behind `/healthz`.
    pub fn preflight(&self) -> &Arc<Preflight> {
        &self.0.preflight
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// The per-conversation turn locks every face shares.
    pub fn conversations(&self) -> &crate::conversations::ConversationLocks {
        &self.0.conversations
    }

    /// A permit to run one turn, or `None` when `MAX_CONCURRENT_TASKS` turns are running.
    pub fn turn_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.0.turns).try_acquire_owned().ok()
    }

    fn discovery(&self) -> &Discovery {
        &self.0.discovery
    }

    /// The agent the contract face serves.
    pub fn agent(&self) -> &Arc<dyn Agent> {
        &self.0.agent
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// Every agent of the deployment, with its downstream servers.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.0.fleet
    }

    fn tasks(&self) -> &TaskRegistry {
        &self.0.tasks
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.0.lifecycle
    }

    /// The tracker of in-flight tasks (shutdown closes it and waits).
    pub fn inflight(&self) -> &TaskTracker {
        &self.0.inflight
    }

    /// The token that cancels running agents (fired when the grace period runs out).
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.0.cancel
    }
}

/// The contract face's routes.
pub fn router(state: AppState) -> Router {
    let tasks = Router::new()
        .route(TASK_PATH, post(send::send_message))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit));
    Router::new()
        .route(HEALTH_PATH, get(health::health))
        .route("/healthz", get(health::healthz))
        .route(AGENT_CARD_PATH, get(discovery::agent_card))
        .route(MANIFEST_PATH, get(discovery::manifest))
        .merge(tasks)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(middleware::from_fn(unread_body::close_if_body_unread))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::Internal("the handler panicked".to_owned()).into_response()
            },
        ))
}

/// Admission for task routes: 503 unless ready; otherwise the request counts as in flight
/// until its response is sent.
async fn admit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match state.lifecycle().phase() {
        Phase::Starting => ApiError::NotReady.into_response(),
        Phase::Draining => ApiError::ShuttingDown.into_response(),
        Phase::Ready => {
            let _inflight = state.inflight().token();
            next.run(req).await
        }
    }
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

#[cfg(test)]
mod tests;
