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

#[derive(Serialize)]
struct Healthz {
    status: &'static str,
    providers: Vec<crate::agents::llm::preflight::ProviderCheck>,
    downstream: Vec<crate::agents::fleet::DownstreamState>,
    /// Live MCP sessions against their bound; `full` while a new one ends an idle one.
    mcp_sessions: crate::stores::mcp_sessions::SessionsStatus,
    /// This replica in a shared task store: its lease renewed, its watch live.
    #[serde(skip_serializing_if = "Option::is_none")]
    tasks: Option<crate::stores::tasks::ReplicaHealth>,
    /// Whether callers must authenticate, and the keys their credentials are checked with.
    auth: crate::platform::identity::IdentityHealth,
    /// Push notifications: what waits for webhooks, what was delivered, retried, given up
    /// and dropped, and the last delivery given up.
    push: crate::services::push::PushHealth,
    /// Budgets (`budgets:`): how many are configured and refusing now, never whose.
    #[serde(skip_serializing_if = "Option::is_none")]
    budgets: Option<crate::agents::budgets::BudgetsHealth>,
}

/// 200 `{"status":"ok"}` when the active provider passed its last check, every downstream
/// MCP server was reachable at its last attempt, the MCP sessions are below their bound and
/// (with a shared task store) this replica's lease is renewed and its watch live, else 503 `{"status":"degraded"}`; `providers`
/// lists every provider checked and `downstream` every agent's servers. Not a liveness probe:
/// a wrong API key makes it 503 without anything a restart would fix.
pub(super) async fn healthz(State(state): State<A2aFace>) -> Response {
    let providers = state.core().preflight().current().await;
    let downstream = state.core().fleet().downstream_states();
    let mcp_sessions = state.core().mcp_session_book().status();
    let tasks = state.core().turns().replica_health();
    let healthy = providers.iter().filter(|p| p.active).all(|p| p.ok)
        && downstream.iter().all(|d| d.ok)
        && !mcp_sessions.full
        && tasks
            .as_ref()
            .is_none_or(crate::stores::tasks::ReplicaHealth::ok);
    let code = if healthy {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        Json(Healthz {
            status: if healthy { "ok" } else { "degraded" },
            providers,
            downstream,
            mcp_sessions,
            tasks,
            auth: state.core().identity().health(),
            push: state.core().push().health(),
            budgets: state.core().turns().budgets_health(),
        }),
    )
        .into_response()
}
