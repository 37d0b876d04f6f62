//! The plain-HTTP companions of the MCP face: the registry document and `/metrics`, served on
//! the main port, the registry port and each agent's own port; and the readiness wait that
//! orders startup by `depends_on`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Routes;
use crate::platform::identity::{Identity, Refusal};
use crate::platform::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The registry path.
pub const REGISTRY_PATH: &str = "/.well-known/mcp/server.json";
/// How long an agent waits for each of its `depends_on` agents to answer.
pub const DEPENDENCY_WAIT: Duration = Duration::from_mins(1);

async fn registry(
    State((routes, identity)): State<(Arc<Routes>, Identity)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = identity.authenticate(&headers).await {
        return refused(&refusal);
    }
    let table = routes.table();
    axum::Json(table.registry().as_ref()).into_response()
}

async fn metrics_text(
    State((m, identity)): State<(Arc<Metrics>, Identity)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = identity.may_read_metrics(&headers).await {
        return refused(&refusal);
    }
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let (kind, text) = m.render_for(accept);
    ([(CONTENT_TYPE, kind)], text).into_response()
}

/// A refusal of a plain-HTTP companion: the status, the `Bearer` challenge, the reason.
fn refused(refusal: &Refusal) -> Response {
    let mut response = (refusal.status(), format!("{refusal}\n")).into_response();
    if let Ok(challenge) = HeaderValue::from_str(&refusal.challenge(None)) {
        response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
    }
    response
}

/// `GET /.well-known/mcp/server.json`: the agents served as of this request, to callers
/// `identity` accepts.
pub fn registry_routes(routes: Arc<Routes>, identity: Identity) -> Router {
    Router::new()
        .route(REGISTRY_PATH, get(registry))
        .with_state((routes, identity))
}

/// `GET /metrics`, to whom `METRICS_AUTH` allows.
pub fn metrics_routes(m: Arc<Metrics>, identity: Identity) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .with_state((m, identity))
}

/// Why an agent could not start.
#[derive(Debug, thiserror::Error)]
#[error(
    "agent {agent} depends on {dependency}, whose MCP endpoint {url} did not answer within {waited:?}"
)]
pub struct DependencyNotReady {
    pub agent: String,
    pub dependency: String,
    pub url: String,
    pub waited: Duration,
}

/// Waits until `url` answers HTTP at all (any status: the MCP endpoint is listening).
pub async fn wait_ready(
    client: &reqwest::Client,
    agent: &str,
    dependency: &str,
    url: &str,
    limit: Duration,
) -> Result<(), DependencyNotReady> {
    let started = Instant::now();
    loop {
        let attempt = client
            .get(url)
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        if attempt.is_ok() {
            return Ok(());
        }
        if started.elapsed() >= limit {
            return Err(DependencyNotReady {
                agent: agent.to_owned(),
                dependency: dependency.to_owned(),
                url: url.to_owned(),
                waited: limit,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dependency_that_never_answers_is_a_clear_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", closed.local_addr().unwrap());
        drop(closed);
        let e = wait_ready(
            &reqwest::Client::new(),
            "coordinator",
            "researcher",
            &url,
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("coordinator") && text.contains("researcher") && text.contains(&url),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_listening_endpoint_is_ready_whatever_it_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app = Router::new().route(
            "/mcp",
            get(|| async { (axum::http::StatusCode::METHOD_NOT_ALLOWED, "") }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        wait_ready(
            &reqwest::Client::new(),
            "a",
            "b",
            &url,
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    }
}
