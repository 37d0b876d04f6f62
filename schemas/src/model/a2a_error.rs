//! The errors of the standard A2A bindings (spec §3.3.2, §5.4, §9.5, §11.6): one typed kind per
//! error of the table, each with its JSON-RPC code, its HTTP status and `google.rpc` status
//! name, and the `ErrorInfo` reason the official SDK sends; the JSON-RPC error object and the
//! HTTP+JSON `google.rpc.Status` body are written from it.

use serde::{Deserialize, Serialize};

/// The domain of the `ErrorInfo` of an error the A2A specification defines (§5.4, §9.5).
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// The domain of the `ErrorInfo` of an error this runtime adds to the specification's
/// (`UNAUTHENTICATED`, `PERMISSION_DENIED`, `UNAVAILABLE`, `BUDGET_EXCEEDED`): a reason is
/// unique within its domain, and these are not A2A's to define.
pub const OWN_ERROR_DOMAIN: &str = "runtime.daedalus.dev";
/// The ProtoJSON `@type` of `google.rpc.ErrorInfo`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// One error of the A2A table, or one of JSON-RPC's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2aErrorKind {
    /// The body is not JSON (`-32700`).
    ParseError,
    /// The body is JSON but not a JSON-RPC request (`-32600`).
    InvalidRequest,
    /// No such method (`-32601`).
    MethodNotFound,
    /// The method's parameters are not what it takes (`-32602`).
    InvalidParams,
    /// The server failed (`-32603`).
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    /// No valid credential (HTTP `401`; JSON-RPC `-31401`, outside the spec's codes).
    Unauthenticated,
    /// A valid credential that may not (HTTP `403`; JSON-RPC `-31403`).
    PermissionDenied,
    /// The server is at a limit and the same request may succeed shortly (HTTP `503` with
    /// `Retry-After` on every binding; JSON-RPC `-31503`, outside the spec's codes).
    Unavailable,
    /// The caller's budget (or its tenant's, or the agent's) is spent for now (HTTP `429`
    /// with `Retry-After`, `RESOURCE_EXHAUSTED`, `ErrorInfo` reason `BUDGET_EXCEEDED` naming
    /// the scope and the limit; JSON-RPC `-31429`, outside the spec's codes).
    BudgetExceeded,
}

impl A2aErrorKind {
    /// The JSON-RPC error code (§5.4, §9.5).
    pub fn jsonrpc_code(self) -> i32 {
        match self {
            A2aErrorKind::ParseError => -32700,
            A2aErrorKind::InvalidRequest => -32600,
            A2aErrorKind::MethodNotFound => -32601,
            A2aErrorKind::InvalidParams => -32602,
            A2aErrorKind::Internal => -32603,
            A2aErrorKind::TaskNotFound => -32001,
            A2aErrorKind::TaskNotCancelable => -32002,
            A2aErrorKind::PushNotificationNotSupported => -32003,
            A2aErrorKind::UnsupportedOperation => -32004,
            A2aErrorKind::ContentTypeNotSupported => -32005,
            A2aErrorKind::InvalidAgentResponse => -32006,
            A2aErrorKind::ExtendedAgentCardNotConfigured => -32007,
            A2aErrorKind::ExtensionSupportRequired => -32008,
            A2aErrorKind::VersionNotSupported => -32009,
            A2aErrorKind::Unauthenticated => -31401,
            A2aErrorKind::PermissionDenied => -31403,
            A2aErrorKind::Unavailable => -31503,
            A2aErrorKind::BudgetExceeded => -31429,
        }
    }

    /// The HTTP status of the HTTP+JSON binding (§5.4).
    pub fn http_status(self) -> u16 {
        match self {
            A2aErrorKind::TaskNotFound | A2aErrorKind::MethodNotFound => 404,
            A2aErrorKind::Unauthenticated => 401,
            A2aErrorKind::PermissionDenied => 403,
            A2aErrorKind::Internal | A2aErrorKind::InvalidAgentResponse => 500,
            A2aErrorKind::Unavailable => 503,
            A2aErrorKind::BudgetExceeded => 429,
            _ => 400,
        }
    }

    /// The `google.rpc.Code` name beside the HTTP status.
    pub fn rpc_status(self) -> &'static str {
        match self {
            A2aErrorKind::TaskNotFound | A2aErrorKind::MethodNotFound => "NOT_FOUND",
            A2aErrorKind::Internal | A2aErrorKind::InvalidAgentResponse => "INTERNAL",
            A2aErrorKind::Unauthenticated => "UNAUTHENTICATED",
            A2aErrorKind::PermissionDenied => "PERMISSION_DENIED",
            A2aErrorKind::Unavailable => "UNAVAILABLE",
            A2aErrorKind::BudgetExceeded => "RESOURCE_EXHAUSTED",
            A2aErrorKind::ParseError
            | A2aErrorKind::InvalidRequest
            | A2aErrorKind::InvalidParams
            | A2aErrorKind::ContentTypeNotSupported => "INVALID_ARGUMENT",
            _ => "FAILED_PRECONDITION",
        }
    }

    /// The `ErrorInfo.domain` of the reason: the specification's for its errors, ours for
    /// the ones we add.
    pub fn domain(self) -> &'static str {
        match self {
            A2aErrorKind::Unauthenticated
            | A2aErrorKind::PermissionDenied
            | A2aErrorKind::Unavailable
            | A2aErrorKind::BudgetExceeded => OWN_ERROR_DOMAIN,
            _ => ERROR_DOMAIN,
        }
    }

    /// The `ErrorInfo.reason` (`TASK_NOT_FOUND`, as the official SDK spells it).
    pub fn reason(self) -> &'static str {
        match self {
            A2aErrorKind::ParseError => "PARSE_ERROR",
            A2aErrorKind::InvalidRequest => "INVALID_REQUEST",
            A2aErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
            A2aErrorKind::InvalidParams => "INVALID_PARAMS",
            A2aErrorKind::Internal => "INTERNAL_ERROR",
            A2aErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            A2aErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            A2aErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            A2aErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aErrorKind::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            A2aErrorKind::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2aErrorKind::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            A2aErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            A2aErrorKind::Unauthenticated => "UNAUTHENTICATED",
            A2aErrorKind::PermissionDenied => "PERMISSION_DENIED",
            A2aErrorKind::Unavailable => "UNAVAILABLE",
            A2aErrorKind::BudgetExceeded => "BUDGET_EXCEEDED",
        }
    }
}

/// An A2A error: its kind and a message for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct A2aError {
    pub kind: A2aErrorKind,
    pub message: String,
    /// The `ErrorInfo.metadata` (what a client may act on: a budget's scope and limit).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// When the same request may succeed, in seconds (the HTTP bindings' `Retry-After`).
    pub retry_after_secs: Option<u64>,
    /// Where the caller stood against its budgets' windowed limits when refused (the HTTP
    /// bindings' `RateLimit-Policy` and `RateLimit` fields); empty for any other error.
    pub rate_limits: Vec<super::RateLimit>,
}

impl A2aError {
    pub fn new(kind: A2aErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            metadata: serde_json::Map::new(),
            retry_after_secs: None,
            rate_limits: Vec::new(),
        }
    }

    /// This error, telling where the caller stood against its budgets' limits.
    #[must_use]
    pub fn with_rate_limits(mut self, limits: Vec<super::RateLimit>) -> Self {
        self.rate_limits = limits;
        self
    }

    /// This error, to be tried again after `secs` seconds.
    #[must_use]
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// This error with `key` set to `value` in its `ErrorInfo.metadata`.
    #[must_use]
    pub fn with_metadata(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata
            .insert(key.to_owned(), serde_json::Value::String(value.into()));
        self
    }

    /// The error's details: one `google.rpc.ErrorInfo`.
    pub fn details(&self) -> Vec<ErrorInfo> {
        vec![ErrorInfo {
            type_url: ERROR_INFO_TYPE.to_owned(),
            reason: self.kind.reason().to_owned(),
            domain: self.kind.domain().to_owned(),
            metadata: self.metadata.clone(),
        }]
    }

    /// The JSON-RPC error object (§9.5).
    pub fn to_jsonrpc(&self) -> JsonRpcError {
        JsonRpcError {
            code: self.kind.jsonrpc_code(),
            message: self.message.clone(),
            data: Some(self.details()),
        }
    }

    /// The HTTP+JSON error body (§11.6): a `google.rpc.Status`.
    pub fn to_status_body(&self) -> StatusBody {
        StatusBody {
            error: StatusError {
                code: self.kind.http_status(),
                status: self.kind.rpc_status().to_owned(),
                message: self.message.clone(),
                details: self.details(),
            },
        }
    }
}

/// `google.rpc.ErrorInfo` in ProtoJSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    #[serde(rename = "@type")]
    pub type_url: String,
    pub reason: String,
    pub domain: String,
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// A JSON-RPC 2.0 error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonRpcError {
    pub code: i32,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<ErrorInfo>>,
}

/// The HTTP+JSON binding's error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusBody {
    pub error: StatusError,
}

/// A `google.rpc.Status` as the HTTP+JSON binding writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusError {
    pub code: u16,
    pub status: String,
    pub message: String,
    pub details: Vec<ErrorInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = "../../shared/specs/a2a/golden-a2a-sdk-1.3.0";

    fn golden(name: &str) -> Option<String> {
        std::fs::read_to_string(format!("{}/{GOLDEN}/{name}", env!("CARGO_MANIFEST_DIR"))).ok()
    }

    #[test]
    fn the_table_of_the_spec() {
        use A2aErrorKind as K;
        for (kind, code, http) in [
            (K::TaskNotFound, -32001, 404),
            (K::TaskNotCancelable, -32002, 400),
            (K::PushNotificationNotSupported, -32003, 400),
            (K::UnsupportedOperation, -32004, 400),
            (K::ContentTypeNotSupported, -32005, 400),
            (K::InvalidAgentResponse, -32006, 500),
            (K::ExtendedAgentCardNotConfigured, -32007, 400),
            (K::ExtensionSupportRequired, -32008, 400),
            (K::VersionNotSupported, -32009, 400),
            (K::MethodNotFound, -32601, 404),
        ] {
            assert_eq!(
                (kind.jsonrpc_code(), kind.http_status()),
                (code, http),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn errors_are_written_as_the_official_sdk_writes_them() {
        let not_found = A2aError::new(A2aErrorKind::TaskNotFound, "Task task-001 not found");
        let written = serde_json::to_value(not_found.to_jsonrpc()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"code": -32001, "message": "Task task-001 not found", "data": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org", "metadata": {}}]})
        );
        // Beside the captures of a2a-sdk 1.3.0, where this checkout has them.
        if let Some(capture) = golden("v1-jsonrpc-error-unknown-taskId.json") {
            let capture: serde_json::Value = serde_json::from_str(&capture).unwrap();
            assert_eq!(capture["error"], written);
        }
        let rest = serde_json::to_value(
            A2aError::new(A2aErrorKind::TaskNotFound, "Task not found").to_status_body(),
        )
        .unwrap();
        assert_eq!(rest["error"]["code"], 404);
        assert_eq!(rest["error"]["status"], "NOT_FOUND");
        assert_eq!(rest["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        if let Some(capture) = golden("v1-rest-error-task-not-found.http.txt") {
            let body = capture
                .split("\n\n")
                .nth(1)
                .or_else(|| capture.split("\r\n\r\n").nth(1));
            let body: serde_json::Value = serde_json::from_str(body.unwrap().trim()).unwrap();
            assert_eq!(body, rest);
        }
    }
}
