//! The A2A face's side of authentication: every task route asks the runtime's identity
//! service who is calling before its handler runs, and either hands the [`Caller`] to the
//! handler (which passes it to the services) or answers the refusal in the binding's shape:
//! `401` with a `Bearer` challenge, `403` for a missing scope or another tenant; a
//! `google.rpc.Status` on HTTP+JSON, a gRPC status (`UNAUTHENTICATED`, `PERMISSION_DENIED`) on
//! gRPC, a JSON-RPC error when the request speaks A2A
//! (`A2A-Version`), the contract's error body otherwise.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use daedalus_contract::{A2aError, A2aErrorKind, JsonRpcId, JsonRpcResponse};

use super::A2aFace;
use super::error::ApiError;
use super::operations::VERSION_PARAM;
use super::standard::rest::{REST_PATH, path_tenant};
use crate::platform::identity::{Caller, Refusal};

/// Authenticates a task route's request (see the module).
pub(super) async fn authenticate(
    State(state): State<A2aFace>,
    mut req: Request,
    next: Next,
) -> Response {
    let identity = state.core().identity();
    let decided = match identity.authenticate(req.headers()).await {
        Ok(caller) => caller
            .in_tenant(path_tenant(req.uri().path()))
            .map_err(Refusal::from),
        Err(refusal) => Err(refusal),
    };
    match decided {
        Ok(caller) => {
            req.extensions_mut().insert::<Caller>(caller);
            next.run(req).await
        }
        Err(refusal) => {
            tracing::info!(path = req.uri().path(), %refusal, "request refused");
            refused(&req, &refusal)
        }
    }
}

/// The refusal in the shape of the binding `req` came on.
fn refused(req: &Request, refusal: &Refusal) -> Response {
    let status = refusal.status();
    let kind = if status == axum::http::StatusCode::FORBIDDEN {
        A2aErrorKind::PermissionDenied
    } else {
        A2aErrorKind::Unauthenticated
    };
    let error = A2aError::new(kind, refusal.to_string());
    if super::standard::grpc::is_grpc(req.headers()) {
        return super::standard::grpc::status::refuse(&error);
    }
    let mut response = if req.uri().path().starts_with(REST_PATH) {
        (
            status,
            [(
                header::CONTENT_TYPE,
                super::standard::rest::media_type(req.headers()),
            )],
            serde_json::to_vec(&error.to_status_body()).unwrap_or_else(|_| {
                br#"{"error":{"code":401,"status":"UNAUTHENTICATED","message":"authentication failed"}}"#.to_vec()
            }),
        )
            .into_response()
    } else if req.headers().contains_key(VERSION_PARAM) {
        (
            status,
            axum::Json(JsonRpcResponse::<()>::error(
                JsonRpcId::Null,
                error.to_jsonrpc(),
            )),
        )
            .into_response()
    } else {
        return ApiError::Refused(refusal.clone()).into_response();
    };
    if let Ok(challenge) = HeaderValue::from_str(&refusal.challenge(None)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_is_the_segment_before_an_operation() {
        assert_eq!(path_tenant("/a2a/rest/acme/tasks/t-1"), Some("acme"));
        assert_eq!(path_tenant("/a2a/rest/acme/message:send"), Some("acme"));
        assert_eq!(path_tenant("/a2a/rest/tasks/t-1"), None);
        assert_eq!(path_tenant("/a2a/rest/tasks"), None);
        assert_eq!(path_tenant("/a2a/rest/message:send"), None);
        assert_eq!(path_tenant("/a2a/rest/extendedAgentCard"), None);
        assert_eq!(path_tenant("/"), None);
    }
}
