//! `POST /` with `Accept: text/event-stream` (contract level 3): the task's stream events as
//! SSE, each `data:` line one event in the contract dialect, `task` first and the final
//! status update last; then the stream closes.
//!
//! The events are the turn service's ([`crate::turns::stream`]); this module only writes them.
//! The response holds its place among in-flight requests until the stream closes, so a
//! SIGTERM drain waits for it. A client that goes away stops nothing: the turn finishes and
//! is stored (a replay of its `messageId` answers with it). An idle stream gets an SSE
//! comment every [`KEEP_ALIVE`].

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use daedalus_contract::write::contract;
use daedalus_contract::{StreamEvent, Task};
use futures::Stream;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::turns::{EventReceiver, Following, TaskHandle};

/// How often an idle stream sends a comment, so proxies and clients keep it open.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Whether the client asked for the stream (`Accept` names `text/event-stream`).
pub(super) fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// The SSE response of a started turn, each event in the contract dialect.
pub(super) fn respond(handle: TaskHandle, inflight: TaskTrackerToken) -> Response {
    respond_with(handle, inflight, |event| {
        String::from_utf8(contract::to_vec(event)).unwrap_or_default()
    })
}

/// The SSE response of a started turn, each event's `data` written by `write` (the JSON-RPC
/// binding wraps each in a JSON-RPC response, in A2A v1 JSON).
pub(super) fn respond_with(
    mut handle: TaskHandle,
    inflight: TaskTrackerToken,
    write: impl Fn(&StreamEvent) -> String + Send + 'static,
) -> Response {
    let Some(events) = handle.take_events() else {
        // Started with events by the caller; nothing else can have taken them.
        return super::error::ApiError::Internal("the turn's events were taken".to_owned())
            .into_response();
    };
    respond_to(Events::Turn(events), inflight, write)
}

/// The SSE response of a subscription: `task` as it stands, then every later event, until
/// the turn ends.
pub(super) fn respond_to_subscription(
    task: Task,
    subscription: Following,
    inflight: TaskTrackerToken,
    write: impl Fn(&StreamEvent) -> String + Send + 'static,
) -> Response {
    respond_to(
        Events::Task(Some(Box::new(task)), subscription),
        inflight,
        write,
    )
}

fn respond_to(
    events: Events,
    inflight: TaskTrackerToken,
    write: impl Fn(&StreamEvent) -> String + Send + 'static,
) -> Response {
    Sse::new(sse_events(events, inflight, write))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Where a stream's events come from: the turn a request started, or a task's log.
enum Events {
    Turn(EventReceiver),
    Task(Option<Box<Task>>, Following),
}

impl Events {
    async fn next(&mut self) -> Option<StreamEvent> {
        match self {
            Events::Turn(events) => events.recv().await,
            Events::Task(first, subscription) => match first.take() {
                Some(task) => Some(StreamEvent::Task(*task)),
                // Boxed: its future is kilobytes, and a held turn's stream never waits on it.
                None => Box::pin(subscription.next()).await,
            },
        }
    }
}

/// The events as SSE, until the final one.
fn sse_events(
    events: Events,
    inflight: TaskTrackerToken,
    write: impl Fn(&StreamEvent) -> String + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    futures::stream::unfold(Some((events, inflight, write)), |state| async move {
        let (mut events, inflight, write) = state?;
        let event = events.next().await?;
        let last = matches!(&event, StreamEvent::StatusUpdate(u) if u.r#final);
        let data = write(&event);
        let next = (!last).then_some((events, inflight, write));
        Some((Ok(Event::default().data(data)), next))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held turn's SSE stream is allocated once per turn and lives as long as the turn: it
    /// must not carry the room of a subscription's (kilobytes) it never waits on.
    #[tokio::test]
    async fn a_turns_event_stream_is_a_fraction_of_a_kib() {
        let tracker = tokio_util::task::TaskTracker::new();
        let (_out, events) = crate::turns::stream::queue();
        let stream = sse_events(Events::Turn(events), tracker.token(), |_| String::new());
        let bytes = std::mem::size_of_val(&stream);
        assert!(bytes <= 512, "a turn's event stream takes {bytes} bytes");
    }
}
