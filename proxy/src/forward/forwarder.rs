//! The seam between a worker and the runtime: "send this task", and what came back. The
//! worker only needs [`Forwarder`]; tests put a scripted runtime behind it.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::wire::trace::TraceContext;

/// What the runtime answered to a task.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

/// Why a task never got an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("runtime did not answer within {0:?}")]
    Timeout(Duration),
    /// The request never reached the runtime: the connection was refused, timed out, or
    /// closed before the request was sent. The runtime is down; the task was not seen.
    #[error("cannot reach the runtime: {0}")]
    Unreached(String),
    /// The connection failed after the request may have been sent: the runtime may have
    /// received the task.
    #[error("runtime connection failed: {0}")]
    Io(String),
}

/// Sends tasks to a runtime.
#[async_trait]
pub trait Forwarder: Send + Sync + std::fmt::Debug + 'static {
    /// `POST /` with the task body and the proxy span's trace headers.
    async fn send(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError>;
}
