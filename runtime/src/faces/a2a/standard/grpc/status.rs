//! Errors on the gRPC binding (spec §10.6): each A2A error as a status code (§5.4) with one
//! `google.rpc.ErrorInfo` (`reason` such as `TASK_NOT_FOUND`, `domain` `a2a-protocol.org`, or
//! `runtime.daedalus.dev` for a reason the specification does not define) in
//! its details; and a refusal made before the service ran (authentication, admission, the
//! request's size and time) as a trailers-only gRPC response.

use axum::body::Body;
use axum::response::Response;
use daedalus_contract::{A2aError, A2aErrorKind};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The status code of an A2A error.
///
/// §5.4 of v1.0.1 and the official SDK answer `FAILED_PRECONDITION` for the errors of a state
/// or a capability. `VersionNotSupportedError` is the one code v1.0.0 (and the A2A kit, which
/// tests it) spell otherwise, `UNIMPLEMENTED`, which is also what gRPC itself answers for a
/// service it does not serve: a client of another version meets that code either way. Its
/// `ErrorInfo` says which error it is.
fn code(kind: A2aErrorKind) -> Code {
    match kind {
        A2aErrorKind::TaskNotFound => Code::NotFound,
        A2aErrorKind::TaskNotCancelable
        | A2aErrorKind::PushNotificationNotSupported
        | A2aErrorKind::UnsupportedOperation
        | A2aErrorKind::ExtendedAgentCardNotConfigured
        | A2aErrorKind::ExtensionSupportRequired => Code::FailedPrecondition,
        A2aErrorKind::VersionNotSupported | A2aErrorKind::MethodNotFound => Code::Unimplemented,
        A2aErrorKind::ParseError
        | A2aErrorKind::InvalidRequest
        | A2aErrorKind::InvalidParams
        | A2aErrorKind::ContentTypeNotSupported => Code::InvalidArgument,
        A2aErrorKind::Internal | A2aErrorKind::InvalidAgentResponse => Code::Internal,
        A2aErrorKind::Unauthenticated => Code::Unauthenticated,
        A2aErrorKind::PermissionDenied => Code::PermissionDenied,
        A2aErrorKind::Unavailable => Code::Unavailable,
        A2aErrorKind::BudgetExceeded => Code::ResourceExhausted,
    }
}

/// `error` as a gRPC status with its `ErrorInfo`.
pub(in crate::faces::a2a) fn status(error: &A2aError) -> Status {
    let metadata: std::collections::HashMap<String, String> = error
        .metadata
        .iter()
        .map(|(key, value)| {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            (key.clone(), value)
        })
        .collect();
    let details = ErrorDetails::with_error_info(error.kind.reason(), error.kind.domain(), metadata);
    Status::with_error_details(code(error.kind), error.message.clone(), details)
}

/// A status as a whole gRPC response (trailers-only: `grpc-status` in the headers).
pub(in crate::faces::a2a) fn respond(status: Status) -> Response {
    status.into_http::<Body>()
}

/// An A2A error answered before the service ran.
pub(in crate::faces::a2a) fn refuse(error: &A2aError) -> Response {
    respond(status(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_a2a_error_carries_its_code_and_error_info() {
        let status = status(&A2aError::new(
            A2aErrorKind::TaskNotFound,
            "Task t-1 not found",
        ));
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "Task t-1 not found");
        let info = status
            .get_details_error_info()
            .expect("an ErrorInfo in the details");
        assert_eq!(info.reason, "TASK_NOT_FOUND");
        assert_eq!(info.domain, "a2a-protocol.org");
    }

    #[test]
    fn a_spent_budget_is_resource_exhausted_naming_its_scope_and_limit() {
        let refusal = crate::services::turns::BudgetRefusal {
            scope: crate::services::turns::ScopeKind::Tenant,
            name: "acme".to_owned(),
            limit: crate::services::turns::LimitKind::TokensPerMinute,
            value: 1,
            retry_after: Some(std::time::Duration::from_secs(12)),
            rate_limits: Vec::new(),
        };
        let status = status(&crate::faces::a2a::operations::over_budget(&refusal));
        assert_eq!(status.code(), Code::ResourceExhausted);
        let info = status
            .get_details_error_info()
            .expect("an ErrorInfo in the details");
        assert_eq!(info.reason, "BUDGET_EXCEEDED");
        assert_eq!(
            info.domain, "runtime.daedalus.dev",
            "a reason A2A does not define is in our own domain"
        );
        assert_eq!(info.metadata["scope"], "tenant");
        assert_eq!(info.metadata["limit"], "tokens_per_minute");
        assert!(
            status.message().contains("retry in 12 s"),
            "{}",
            status.message()
        );
    }

    #[test]
    fn a_refusal_is_a_trailers_only_grpc_response() {
        let response = refuse(&A2aError::new(A2aErrorKind::Unauthenticated, "who?"));
        assert_eq!(response.status(), axum::http::StatusCode::OK);
        let headers = response.headers();
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!(headers["grpc-status"], "16");
        assert!(headers.contains_key("grpc-status-details-bin"));
    }
}
