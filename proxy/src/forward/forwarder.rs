//! The seam between a worker and the runtime: "send this task", and what came back. The
//! worker only needs [`Forwarder`]; tests put a scripted runtime behind it.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::wire::trace::TraceContext;

/// What the runtime answered to a task.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
    /// The answer's `Retry-After`, in seconds (`None` without one, or with a date).
    pub retry_after: Option<Duration>,
}

/// The longest `Retry-After` taken: a day; a longer one is read as a day.
const LONGEST_RETRY_AFTER: Duration = Duration::from_hours(24);

/// A `Retry-After` header's delay, when it gives one in seconds.
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(LONGEST_RETRY_AFTER))
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
    /// The proxy has no token to present to the runtime now (its token endpoint or file
    /// failed): the task was not sent.
    #[error("no credential for the runtime: {0}")]
    Credential(String),
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

    /// `POST /` asking for the task's event stream (`Accept: text/event-stream`, contract
    /// level 3): each event's data, as the runtime wrote it, goes to `events` as it arrives,
    /// and the answer is the Task the stream rebuilds (status 200, contract dialect). An
    /// answer that is not a stream (an error, plain JSON) is the answer as [`send`] reads it.
    /// A forwarder that cannot stream sends the task as [`send`] does.
    ///
    /// [`send`]: Forwarder::send
    async fn stream(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
        events: mpsc::Sender<Bytes>,
    ) -> Result<Reply, ForwardError> {
        drop(events);
        self.send(body, trace, timeout).await
    }
}
