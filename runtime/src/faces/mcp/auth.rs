//! The MCP face's side of authentication, as the MCP authorization spec (2025-06-18 and
//! later) prescribes for Streamable HTTP: every request to an agent's endpoint asks the
//! runtime's identity service who is calling; a refusal is `401` (or `403` for a missing
//! scope) with a `Bearer` challenge naming the endpoint's protected resource metadata
//! (RFC 9728), served at `/.well-known/oauth-protected-resource` + the endpoint's path.
//! A session belongs to the principal that opened it: anyone else's use of its id is `404`,
//! as for a session that does not exist.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

use super::{OWN_PORT_PATH, Routes, main_port_path};
use crate::platform::identity::{Identity, Refusal};

/// Where an endpoint's protected resource metadata is: this prefix, then the endpoint's path.
pub const RESOURCE_METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// RFC 9728 protected resource metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    pub bearer_methods_supported: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
}

/// The metadata of the endpoint at `resource`, as `identity` checks callers.
pub fn metadata(identity: &Identity, resource: &str) -> ResourceMetadata {
    let plan = identity.plan();
    ResourceMetadata {
        resource: resource.to_owned(),
        authorization_servers: plan.tokens.iter().map(|t| t.issuer.clone()).collect(),
        bearer_methods_supported: vec!["header"],
        scopes_supported: plan.required_scopes,
    }
}

/// The URL of the metadata of the endpoint at `resource` (`<origin>/.well-known/...<path>`).
pub fn metadata_url(resource: &str) -> String {
    match resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(path_at) => format!(
            "{}{RESOURCE_METADATA_PREFIX}{}",
            &resource[..path_at],
            &resource[path_at..]
        ),
        None => format!("{resource}{RESOURCE_METADATA_PREFIX}"),
    }
}

/// `refusal`, as Streamable HTTP answers it: the status, the challenge naming the metadata
/// of the endpoint at `resource`, and an OAuth error body.
pub fn refused(refusal: &Refusal, resource: &str) -> Response {
    #[derive(Serialize)]
    struct Body {
        error: &'static str,
        error_description: String,
    }
    let error = match refusal {
        Refusal::NoCredentials | Refusal::Token(_) | Refusal::UnknownApiKey => "invalid_token",
        Refusal::MissingScope(_) | Refusal::Tenant => "insufficient_scope",
    };
    let mut response = (
        refusal.status(),
        axum::Json(Body {
            error,
            error_description: refusal.to_string(),
        }),
    )
        .into_response();
    if let Ok(challenge) = HeaderValue::from_str(&refusal.challenge(Some(&metadata_url(resource))))
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// A session id the caller may not use: as if it did not exist.
pub fn no_such_session() -> Response {
    (StatusCode::NOT_FOUND, "no such MCP session\n").into_response()
}

/// The main port's metadata documents: one per agent endpoint.
pub fn main_port_routes(routes: Arc<Routes>) -> Router {
    Router::new()
        .route(
            &format!("{RESOURCE_METADATA_PREFIX}/agents/{{agent}}/mcp"),
            get(for_agent),
        )
        .with_state(routes)
}

/// An agent's own port's metadata document (its endpoint is `/mcp`).
pub fn own_port_routes(routes: Arc<Routes>, port: u16) -> Router {
    Router::new()
        .route(
            &format!("{RESOURCE_METADATA_PREFIX}{OWN_PORT_PATH}"),
            get(for_port),
        )
        .route(RESOURCE_METADATA_PREFIX, get(for_port))
        .with_state((routes, port))
}

async fn for_agent(State(routes): State<Arc<Routes>>, Path(agent): Path<String>) -> Response {
    let table = routes.table();
    match table.agent(&agent) {
        Some(endpoint) => {
            let resource = table.resource_of(&main_port_path(&agent));
            axum::Json(metadata(endpoint.face().core.identity(), &resource)).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn for_port(State((routes, port)): State<(Arc<Routes>, u16)>) -> Response {
    let table = routes.table();
    match table.on_port(port) {
        Some(endpoint) => {
            let resource = table.own_port_resource(port);
            axum::Json(metadata(endpoint.face().core.identity(), &resource)).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_sits_under_the_origin_before_the_endpoint_path() {
        assert_eq!(
            metadata_url("https://rt.example:8443/agents/a/mcp"),
            "https://rt.example:8443/.well-known/oauth-protected-resource/agents/a/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:9000/mcp"),
            "http://127.0.0.1:9000/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn a_refusal_names_the_metadata_and_the_oauth_error() {
        let response = refused(
            &Refusal::NoCredentials,
            "http://127.0.0.1:9000/agents/a/mcp",
        );
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.contains(
                "resource_metadata=\"http://127.0.0.1:9000/.well-known/oauth-protected-resource/agents/a/mcp\""
            ),
            "{challenge}"
        );
    }
}
