//! Why a downstream MCP server could not be used. Every text is shown as is (logs, `/healthz`,
//! tool results the model reads), so URLs in it are already redacted.

use std::time::Duration;

/// A failure talking to a downstream MCP server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// `initialize` failed (refused, 401, not MCP, ...).
    #[error("cannot initialize a session with {url}: {reason}")]
    Initialize { url: String, reason: String },
    /// `initialize` gave no answer in time.
    #[error("{url} did not answer initialize within {after:?}")]
    InitializeTimeout { url: String, after: Duration },
    /// `tools/list` failed.
    #[error("tools/list failed: {0}")]
    ListTools(String),
    /// `tools/list` (every page) gave no answer in time.
    #[error("tools/list gave no answer within {0:?}")]
    ListTimeout(Duration),
    /// `tools/call` failed.
    #[error("{0}")]
    Call(String),
    /// A call whose connection was gone, tried once more on a new one, failed again.
    #[error("{first}; retried: {then}")]
    Retried { first: String, then: Box<McpError> },
    /// A call whose connection was gone could not be tried again: reconnecting failed.
    #[error("{first}; reconnecting: {then}")]
    Reconnect { first: String, then: Box<McpError> },
    /// The runtime has no token for the server now (its token endpoint failed, or there is
    /// no caller token to exchange).
    #[error("no credential for the server: {0}")]
    Credential(String),
    /// No answer within the server's `read_timeout_seconds`.
    #[error("no answer within {0:?} (read_timeout_seconds); the call was abandoned")]
    CallTimeout(Duration),
}

impl From<crate::agents::downstream_auth::CredentialError> for McpError {
    fn from(e: crate::agents::downstream_auth::CredentialError) -> Self {
        McpError::Credential(e.0)
    }
}
