//! `ApiError`: the errors of the contract binding and of the face's own routing (404, 405, 503)
//! as HTTP, with the JSON body `{"error": {"code": <http>, "message": "..."}}`.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use daedalus_contract::container::format_duration;
use daedalus_contract::{ErrorBody, ReadError};

/// What `Retry-After` says when a limit refuses a request: try again in a second.
pub(super) const RETRY_AFTER_SECONDS: &str = "1";

/// The `Retry-After` of an A2A error on the HTTP bindings: the error's own (a budget's window),
/// else [`RETRY_AFTER_SECONDS`] for a server at a limit, else none.
fn retry_after(error: &daedalus_contract::A2aError) -> Option<axum::http::HeaderValue> {
    match (error.retry_after_secs, error.kind) {
        (Some(secs), _) => Some(axum::http::HeaderValue::from(secs)),
        (None, daedalus_contract::A2aErrorKind::Unavailable) => {
            Some(axum::http::HeaderValue::from_static(RETRY_AFTER_SECONDS))
        }
        (None, _) => None,
    }
}

/// An answer that cannot be written as JSON: an internal error, said as such, never a `null`
/// or an empty body in its place.
pub(super) fn unwritable(error: &serde_json::Error) -> daedalus_contract::A2aError {
    tracing::error!(%error, "an answer cannot be written as JSON");
    daedalus_contract::A2aError::new(
        daedalus_contract::A2aErrorKind::Internal,
        format!("the answer cannot be written: {error}"),
    )
}

/// Writes on `response` what A2A error `error` tells an HTTP client to wait on: its
/// `Retry-After` and, when a budget refused, where the caller stood then (the `RateLimit`
/// fields, taken with the refusal rather than asked for again).
pub(super) fn write_wait(error: &daedalus_contract::A2aError, response: &mut Response) {
    if let Some(after) = retry_after(error) {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, after);
    }
    if error.kind == daedalus_contract::A2aErrorKind::BudgetExceeded {
        super::rate_limit::write(response, &error.rate_limits);
    }
}

/// An error of the HTTP face. The message is written for the caller; it never holds secrets.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("unsupported content type {found}: send application/json")]
    UnsupportedMediaType { found: String },
    #[error("request body is larger than the {limit}-byte limit")]
    PayloadTooLarge { limit: u64 },
    #[error("request body not received within {}", format_duration(*.0))]
    BodyTimeout(Duration),
    #[error("could not read the request body")]
    BodyRead(#[source] axum::Error),
    #[error("not a SendMessageRequest: {0}")]
    Unreadable(#[source] ReadError),
    #[error("{0}")]
    BadRequest(String),
    #[error("runtime is starting; not ready for tasks yet")]
    NotReady,
    #[error("runtime is shutting down; send the task to another replica")]
    ShuttingDown,
    #[error("runtime is shutting down; the task was canceled before it finished")]
    CanceledByShutdown,
    /// The turn goes on from its last step elsewhere (`TurnError::HandedOff`).
    #[error("{0}")]
    HandedOff(String),
    #[error("runtime is running as many tasks as it may ({0}); retry in 1 s")]
    Busy(crate::services::turns::Limit),
    /// Nothing was done, and the same request may succeed soon (the task store).
    #[error("{0}")]
    RetryLater(String),
    /// The task would be larger than the task store keeps.
    #[error("{0}")]
    TaskTooLarge(String),
    /// A budget of the caller is spent for now (`429`, with `Retry-After` when a wait helps).
    #[error("{0}")]
    OverBudget(crate::services::turns::BudgetRefusal),
    #[error("no route for {method} {path}")]
    NotFound { method: String, path: String },
    #[error("method {method} not allowed on {path}")]
    MethodNotAllowed { method: String, path: String },
    #[error("internal error: {0}")]
    Internal(String),
    /// No task the caller may see has that id (it may be someone else's).
    #[error("{0}")]
    TaskNotFound(String),
    /// Who is calling is unknown, or may not.
    #[error("{0}")]
    Refused(crate::platform::identity::Refusal),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge { .. } | ApiError::TaskTooLarge(_) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::BodyRead(_) | ApiError::Unreadable(_) | ApiError::BadRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::NotReady
            | ApiError::ShuttingDown
            | ApiError::CanceledByShutdown
            | ApiError::HandedOff(_)
            | ApiError::Busy(_)
            | ApiError::RetryLater(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound { .. } | ApiError::TaskNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::OverBudget(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Refused(refusal) => refusal.status(),
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(error = %self, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), error = %self, "request refused");
        }
        let retry_after = match &self {
            ApiError::Busy(_) => Some(axum::http::HeaderValue::from_static(RETRY_AFTER_SECONDS)),
            ApiError::OverBudget(refusal) => refusal
                .retry_after
                .map(|after| axum::http::HeaderValue::from(after.as_secs())),
            _ => None,
        };
        let challenge = match &self {
            ApiError::Refused(refusal) => {
                axum::http::HeaderValue::from_str(&refusal.challenge(None)).ok()
            }
            _ => None,
        };
        let mut response = (
            status,
            Json(ErrorBody::new(status.as_u16(), self.to_string())),
        )
            .into_response();
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(after) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, after);
        }
        if let ApiError::OverBudget(refusal) = &self {
            super::rate_limit::write(&mut response, &refusal.rate_limits);
        }
        response
    }
}
