//! The runtime contract's binding: a `POST /` request in the contract dialect is one turn of an
//! A2A task through the turn service, answered with the `Task`, or,
//! with `Accept: text/event-stream`, with its stream ([`super::sse`]).
//!
//! The task, context, continuation and replay rules are the turn service's
//! ([`crate::turns::Memory::Task`]); this handler reads the request, passes the caller's bearer
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
use crate::agent_loop::Bearer;
use crate::identity::Caller;
use crate::telemetry::TraceHeaders;
use crate::turns::{Memory, TurnError, TurnRequest};

/// One contract request: the turn it starts, answered with its `Task` or its SSE stream.
pub(super) async fn send(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: Caller,
    request: SendMessageRequest,
) -> Result<Response, ApiError> {
    let streaming = sse::wants_stream(headers);
    let history_length = request.history_length();
    let mut turn = TurnRequest::new(state.agent(), request.message, Memory::Task);
    let metadata = request.metadata.as_ref();
    turn.sampling = super::controls::sampling(metadata);
    match super::controls::controls(metadata) {
        Ok(controls) => turn.controls = controls,
        // The turn fails naming the key, as for a sampling value of the wrong type.
        Err(e) => turn.sampling = Err(e),
    }
    turn.bearer = Bearer::of(&caller, headers);
    turn.history_length = history_length;
    turn.trace = TraceHeaders::from_headers(headers);
    turn.stream = streaming;
    turn.caller = caller;
    let turns = state.core().turns();
    if streaming {
        let handle = turns.start(turn).await.map_err(|e| refusal(&e))?;
        return Ok(sse::respond(handle, turns.hold()));
    }
    let task: Task = turns.run(turn).await.map_err(|e| refusal(&e))?;
    Ok(Json(task).into_response())
}

fn refusal(error: &TurnError) -> ApiError {
    match error {
        TurnError::InvalidMessage { .. } | TurnError::ContextMismatch { .. } => {
            ApiError::BadRequest(error.to_string())
        }
        TurnError::NotReady => ApiError::NotReady,
        TurnError::ShuttingDown => ApiError::ShuttingDown,
        TurnError::Busy(limit) => ApiError::Busy(*limit),
        TurnError::OverBudget(refusal) => ApiError::OverBudget(refusal.clone()),
        TurnError::CanceledByShutdown => ApiError::CanceledByShutdown,
        TurnError::HandedOff(_) => ApiError::HandedOff(error.to_string()),
        TurnError::TaskMoved(_)
        | TurnError::TaskBusy(_)
        | TurnError::TaskFinished { .. }
        | TurnError::StoreUnavailable(_) => ApiError::RetryLater(error.to_string()),
        TurnError::TaskTooLarge(why) => ApiError::TaskTooLarge(why.clone()),
        TurnError::TaskNotFound(_) | TurnError::ContextNotFound(_) => {
            ApiError::TaskNotFound(error.to_string())
        }
        TurnError::UnknownAgent(_) | TurnError::WorkerStopped(_) => {
            ApiError::Internal(error.to_string())
        }
    }
}
