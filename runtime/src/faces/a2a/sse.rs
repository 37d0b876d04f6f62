//! `POST /` with `Accept: text/event-stream` (contract level 3): the task's stream events as
//! SSE, each `data:` line one event in the contract dialect, `task` first and the final
//! status update last; then the stream closes.
//!
//! The events are [`super::events::Events`]; this module only writes them. A client that goes
//! away stops nothing: the turn finishes and is stored (a replay of its `messageId` answers with
//! it). An idle stream gets an SSE comment every [`KEEP_ALIVE`].

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use daedalus_contract::Task;
use daedalus_contract::write::{Dialect, InDialect, contract};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::events::Events;
use crate::services::turns::{Following, TaskHandle};

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

/// The SSE response of a started turn, each event in the contract dialect (the contract's
/// stream is the task's, whatever its agent answers with).
pub(super) fn respond(handle: TaskHandle, inflight: TaskTrackerToken) -> Response {
    let Some(events) = Events::of_turn(handle) else {
        return taken();
    };
    respond_to(events, inflight, |item| {
        String::from_utf8_lossy(&contract::to_vec(&InDialect(item, Dialect::Contract))).into_owned()
    })
}

/// A standard binding's SSE response of a started turn (its reply alone, when its agent
/// replied with a message), each item's `data` written by `write` (the JSON-RPC binding wraps
/// each in a JSON-RPC response, in A2A v1 JSON).
pub(super) fn respond_with(
    handle: TaskHandle,
    inflight: TaskTrackerToken,
    write: impl Fn(&daedalus_contract::StreamResponse) -> String + Send + 'static,
) -> Response {
    let Some(events) = Events::answering(handle) else {
        return taken();
    };
    respond_to(events, inflight, write)
}

/// Started with events by the caller; nothing else can have taken them.
fn taken() -> Response {
    super::error::ApiError::Internal("the turn's events were taken".to_owned()).into_response()
}

/// The SSE response of a subscription: `task` as it stands, then every later event, until
/// the turn ends.
pub(super) fn respond_to_subscription(
    task: Task,
    subscription: Following,
    inflight: TaskTrackerToken,
    write: impl Fn(&daedalus_contract::StreamResponse) -> String + Send + 'static,
) -> Response {
    respond_to(Events::of_task(task, subscription), inflight, write)
}

fn respond_to(
    events: Events,
    inflight: TaskTrackerToken,
    write: impl Fn(&daedalus_contract::StreamResponse) -> String + Send + 'static,
) -> Response {
    let events = events.until_final(inflight, move |item| {
        Ok::<_, Infallible>(Event::default().data(write(item)))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}
