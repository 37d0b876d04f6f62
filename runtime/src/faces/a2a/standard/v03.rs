//! A2A v0.3 over JSON-RPC, for the many clients that still speak it (as the official SDK's
//! compat mode serves them): `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`,
//! `tasks/resubscribe` and `agent/getAuthenticatedExtendedCard`; the push-notification methods
//! answer `PushNotificationNotSupportedError`.
//!
//! The operations are [`crate::faces::a2a::operations`]'s; only the wire differs. Requests are read by the
//! lenient reader (it takes `kind`-tagged parts), and `configuration.blocking: false` means
//! return at once. Answers are v0.3 JSON: `kind` on every object and part, lowercase states,
//! `final` on status updates, a `message/send` result that is the Task itself, and stream
//! results that are the bare events. A v0.3 method is known by its name, so it needs no
//! `A2A-Version` (v0.3 had none).

use axum::http::HeaderMap;
use daedalus_contract::write::a2a_v03;
use daedalus_contract::{
    A2aError, A2aErrorKind, GetTaskRequest, JsonRpcId, JsonRpcRequest, JsonRpcResponse,
    SendMessageRequest, SendMessageResponse, TaskIdRequest,
};
use serde::Deserialize;

use super::method::{Answer, read, result_of, sse_data};
use crate::faces::a2a::{A2aFace, operations, sse};
use crate::platform::identity::Caller;

/// `message/send`'s v0.3 configuration: only what v1 spells differently.
#[derive(Debug, Default, Deserialize)]
struct SendParams {
    #[serde(default)]
    configuration: Option<Blocking>,
}

#[derive(Debug, Default, Deserialize)]
struct Blocking {
    #[serde(default)]
    blocking: Option<bool>,
}

/// The protocol version this module speaks, as the card names it.
pub(in crate::faces::a2a) const VERSION: &str = "0.3";

/// The card as v0.3 has it: the v1 card's fields, plus the main URL, its transport and the
/// protocol version at the top.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct V03Card<'a> {
    #[serde(flatten)]
    card: &'a daedalus_contract::AgentCard,
    url: String,
    preferred_transport: &'static str,
    protocol_version: &'static str,
    /// v0.3's place for v1's `capabilities.extendedAgentCard`.
    supports_authenticated_extended_card: bool,
}

impl<'a> V03Card<'a> {
    /// `card` for a v0.3 client: its URL is the v0.3 JSON-RPC interface's.
    fn of(card: &'a daedalus_contract::AgentCard) -> Self {
        let url = card
            .supported_interfaces
            .iter()
            .find(|i| i.protocol_binding == "JSONRPC" && i.protocol_version == VERSION)
            .map(|i| i.url.clone())
            .unwrap_or_default();
        Self {
            card,
            url,
            preferred_transport: "JSONRPC",
            protocol_version: "0.3.0",
            supports_authenticated_extended_card: card.capabilities.extended_agent_card
                == Some(true),
        }
    }
}

/// The v0.3 form of `card`, as JSON (signed by the discovery documents when cards are).
pub(in crate::faces::a2a) fn card_json(card: &daedalus_contract::AgentCard) -> serde_json::Value {
    serde_json::to_value(V03Card::of(card)).expect("the card serializes")
}

/// Whether `method` is a v0.3 method name.
pub(super) fn is_v03(method: &str) -> bool {
    method.contains('/')
}

/// Answers a v0.3 request.
pub(super) async fn dispatch(
    state: &A2aFace,
    headers: &HeaderMap,
    caller: &Caller,
    request: &JsonRpcRequest,
    id: &JsonRpcId,
) -> Result<Answer, A2aError> {
    let params = request.params.as_deref();
    match request.method.as_str() {
        "message/send" => {
            let send = send_request(params)?;
            // v0.3 answers the Task or the Message itself, told apart by its `kind`.
            match operations::send_message(state, headers, caller, send).await? {
                SendMessageResponse::Task(task) => result_of(&a2a_v03::of(&task)),
                SendMessageResponse::Message(message) => result_of(&a2a_v03::of(&message)),
            }
        }
        "message/stream" => {
            let send = send_request(params)?;
            let (handle, inflight) = operations::start_stream(state, headers, caller, send).await?;
            let id = id.clone();
            Ok(Answer::Stream(sse::respond_with(
                handle,
                inflight,
                move |event| v03_response(&id, event),
            )))
        }
        "tasks/get" => {
            let params: GetTaskRequest = read(params)?;
            let task = operations::get_task(state, caller, &params).await?;
            result_of(&a2a_v03::of(&task))
        }
        "tasks/cancel" => {
            let params: TaskIdRequest = read(params)?;
            let task = operations::cancel_task(state, caller, &params.id).await?;
            result_of(&a2a_v03::of(&task))
        }
        "tasks/resubscribe" => {
            let params: TaskIdRequest = read(params)?;
            let (task, subscription, inflight) =
                operations::subscribe(state, caller, &params.id).await?;
            let id = id.clone();
            Ok(Answer::Stream(sse::respond_to_subscription(
                task,
                subscription,
                inflight,
                move |event| v03_response(&id, event),
            )))
        }
        "agent/getAuthenticatedExtendedCard" => result_of(&*operations::extended_v03_card(state)?),
        method if method.starts_with("tasks/pushNotificationConfig/") => Err(A2aError::new(
            A2aErrorKind::PushNotificationNotSupported,
            "push notifications are served over A2A v1.0 (A2A-Version: 1.0), not v0.3",
        )),
        other => Err(A2aError::new(
            A2aErrorKind::MethodNotFound,
            format!("Method not found: {other}"),
        )),
    }
}

/// One SSE `data`: a JSON-RPC response whose result is the bare v0.3 event.
fn v03_response(id: &JsonRpcId, event: &daedalus_contract::StreamResponse) -> String {
    sse_data(&JsonRpcResponse::result(id.clone(), a2a_v03::of(event)), id)
}

/// A v0.3 `MessageSendParams` as the v1 request it means (`blocking: false` is
/// `returnImmediately`).
fn send_request(
    params: Option<&serde_json::value::RawValue>,
) -> Result<SendMessageRequest, A2aError> {
    let mut request: SendMessageRequest = read(params)?;
    let v03: SendParams = read(params)?;
    if let Some(blocking) = v03.configuration.and_then(|c| c.blocking) {
        request
            .configuration
            .get_or_insert_with(Default::default)
            .return_immediately = Some(!blocking);
    }
    Ok(request)
}
