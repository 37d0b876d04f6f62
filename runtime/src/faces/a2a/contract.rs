//! The runtime contract's binding: a `POST /` request in the contract dialect is one turn of an
//! A2A task through the turn service, answered with the `Task`, or,
//! with `Accept: text/event-stream`, with its stream ([`super::sse`]).
//!
//! The task, context, continuation and replay rules are the turn service's
//! ([`crate::services::turns::Memory::Task`]); this handler reads the request, passes the caller's bearer
//! token and `metadata.request_params`, and maps refusals to HTTP statuses.
//!
//! `history` is returned only when `configuration.historyLength` asks for it, so a result
//! never grows by the size of its own input.

use axum::Json;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use daedalus_contract::{SendMessageRequest, Task};

use super::A2aFace;
use super::error::ApiError;
use super::sse;
use crate::platform::bearer::Bearer;
use crate::platform::identity::Caller;
use crate::platform::telemetry::TraceHeaders;
use crate::services::turns::TurnControls;
use crate::services::turns::{Origin, TurnError, TurnErrorKind, TurnRequest};

/// One contract request: the turn it starts, answered with its `Task` or its SSE stream.
pub(super) async fn send(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: Caller,
    request: SendMessageRequest,
) -> Result<Response, ApiError> {
    let streaming = sse::wants_stream(headers);
    let history_length = request.history_length();
    let metadata = request.metadata.as_ref();
    let (sampling, controls) = match super::controls::controls(metadata) {
        Ok(controls) => (super::controls::sampling(metadata), controls),
        // The turn fails naming the key, as for a sampling value of the wrong type.
        Err(e) => (Err(e), TurnControls::default()),
    };
    crate::platform::telemetry::a2a::record_message(&tracing::Span::current(), &request.message);
    let origin = Origin {
        bearer: Bearer::of(&caller, headers),
        // The request's span ([`super::traced`]), so the turn's is its child.
        trace: TraceHeaders::current_or(TraceHeaders::from_headers(headers)),
        caller,
    };
    let mut turn =
        TurnRequest::contract(state.agent(), request.message, origin).asking(sampling, controls);
    turn.history_length = history_length;
    turn.stream = streaming;
    let turns = state.core().turns();
    if streaming {
        let handle = turns.start(turn).await.map_err(|e| refusal(&e))?;
        let span = tracing::Span::current();
        crate::platform::telemetry::a2a::record_ids(
            &span,
            Some(handle.task_id()),
            Some(handle.context_id()),
        );
        return Ok(sse::respond(handle, turns.hold()));
    }
    let task: Task = turns
        .run(turn.answered_when_it_ends())
        .await
        .map_err(|e| refusal(&e))?;
    crate::platform::telemetry::a2a::record_task(&tracing::Span::current(), &task);
    Ok(Json(task).into_response())
}

fn refusal(error: &TurnError) -> ApiError {
    let said = || error.to_string();
    match error.kind() {
        TurnErrorKind::InvalidMessage => ApiError::BadRequest(said()),
        TurnErrorKind::NotReady => ApiError::NotReady,
        TurnErrorKind::ShuttingDown => ApiError::ShuttingDown,
        TurnErrorKind::Busy(limit) => ApiError::Busy(limit),
        TurnErrorKind::OverBudget(refusal) => ApiError::OverBudget(refusal.clone()),
        TurnErrorKind::CanceledByShutdown => ApiError::CanceledByShutdown,
        TurnErrorKind::HandedOff(_) => ApiError::HandedOff(said()),
        TurnErrorKind::TaskConflict | TurnErrorKind::StoreUnavailable => {
            ApiError::RetryLater(said())
        }
        TurnErrorKind::TooLarge => ApiError::TaskTooLarge(said()),
        TurnErrorKind::NotFound => ApiError::TaskNotFound(said()),
        TurnErrorKind::Internal => ApiError::Internal(said()),
    }
}
