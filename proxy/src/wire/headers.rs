//! The NATS headers the proxy reads from a task and writes on a result or dead letter: every
//! value one bounded line of visible ASCII, whatever the task carried.

use async_nats::{HeaderMap, HeaderName};
use bytes::Bytes;
use daedalus_contract::Dialect;

use super::ids::Ids;
use crate::wire::subjects;
use crate::wire::trace::TraceContext;
use daedalus_contract::TaskState;

/// The longest a `Deadletter-Reason` header gets.
const REASON_HEADER_MAX: usize = 256;

pub(crate) fn header<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    let headers = headers?;
    headers
        .iter()
        .find(|(k, _)| AsRef::<str>::as_ref(k).eq_ignore_ascii_case(name))
        .and_then(|(_, values)| values.first())
        .map(async_nats::HeaderValue::as_str)
}

/// `text` as a header value: control characters become spaces, at most `max` bytes.
pub(crate) fn header_text(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// The headers of a dead letter: the task message's own, a dedupe id naming its place in the
/// task stream, and why (one bounded line).
pub(crate) fn deadletter_headers(
    mut headers: HeaderMap,
    tasks_stream: &str,
    sequence: u64,
    reason: &str,
) -> HeaderMap {
    headers.insert(
        subjects::MSG_ID_HEADER,
        format!("deadletter:{tasks_stream}:{sequence}").as_str(),
    );
    headers.insert(
        subjects::DEADLETTER_REASON_HEADER,
        header_text(reason, REASON_HEADER_MAX).as_str(),
    );
    headers
}

/// The headers of a result in `state` for the task `ids` names (a runtime's Task is published
/// only if its id is the task's): tokens and visible ASCII only, whatever the ids hold.
pub(crate) fn result_headers(
    agent: &str,
    ids: &Ids,
    state: TaskState,
    trace: &TraceContext,
) -> HeaderMap {
    // Names made at compile time and values moved in: every result pays for these.
    const MSG_ID: HeaderName = HeaderName::from_static(subjects::MSG_ID_HEADER);
    const TASK_ID: HeaderName = HeaderName::from_static(subjects::TASK_ID_HEADER);
    const TASK_STATE: HeaderName = HeaderName::from_static(subjects::TASK_STATE_HEADER);
    const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
    const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
    let mut headers = HeaderMap::new();
    headers.insert(
        MSG_ID,
        subjects::result_msg_id(agent, &ids.task_id, &ids.message_id),
    );
    headers.insert(TASK_ID, subjects::token(&ids.task_id).into_owned());
    headers.insert(TASK_STATE, state.as_str(Dialect::Contract));
    headers.insert(TRACEPARENT, trace.traceparent());
    if let Some(state) = &trace.tracestate {
        headers.insert(TRACESTATE, header_text(state, 512));
    }
    headers
}

/// The bytes a message takes against `max_payload`: its payload and its headers.
pub(crate) fn message_size(headers: &HeaderMap, payload: &Bytes) -> usize {
    let header_bytes: usize = headers
        .iter()
        .map(|(k, values)| {
            values
                .iter()
                .map(|v| AsRef::<str>::as_ref(k).len() + v.as_str().len() + 4)
                .sum::<usize>()
        })
        .sum();
    payload.len() + header_bytes + 12
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Ids, TraceContext, header_text, result_headers, subjects};
    use crate::consume::intake::{self, Intake};

    /// Header values a publisher can send (the NATS wire keeps CR and LF out of them).
    fn header_value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ -~]{0,80}",
            "00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]",
            "_INBOX\\.[A-Za-z0-9.*>]{0,40}",
            "(agent|\\$JS|_INBOX)\\.[a-z.>*]{0,20}",
            "[^\\r\\n]{0,300}",
        ]
    }

    /// Bodies: anything, or a request whose ids are anything.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            (
                ".{0,200}",
                proptest::option::of(".{0,6000}"),
                proptest::option::of(".{0,200}")
            )
                .prop_map(|(message_id, task_id, context_id)| {
                    let mut message = serde_json::json!({
                        "messageId": message_id, "role": "user", "parts": [{"text": "x"}]
                    });
                    if let Some(t) = task_id {
                        message["taskId"] = t.into();
                    }
                    if let Some(c) = context_id {
                        message["contextId"] = c.into();
                    }
                    serde_json::to_vec(&serde_json::json!({"message": message})).unwrap_or_default()
                }),
        ]
    }

    proptest! {

        /// A raw task message, headers included, always comes to a disposition, and whatever it
        /// carries, the result's headers are one bounded line each.
        #[test]
        fn any_task_message_comes_to_a_disposition_with_safe_headers(
            body in body(),
            traceparent in proptest::option::of(header_value()),
            tracestate in proptest::option::of(header_value()),
            reply_to in header_value(),
        ) {
            let trace = TraceContext::child_of(traceparent.as_deref(), tracestate.as_deref());
            let prefixes = vec![subjects::REPLY_TO_PREFIXES_DEFAULT.to_owned()];
            if subjects::check_reply_to(&reply_to, &prefixes).is_ok() {
                prop_assert!(reply_to.starts_with("_INBOX.") && !reply_to.contains(['*', '>']));
            }
            let ids: Option<Ids> = match intake::read_task(&body) {
                Intake::Task { ids, .. } | Intake::Refused { ids, .. } => Some(ids),
                Intake::Unaddressable { reason } => {
                    prop_assert!(!header_text(&reason, 256).contains(['\r', '\n']));
                    None
                }
            };
            if let Some(ids) = ids {
                let headers = result_headers("agent-1", &ids, daedalus_contract::TaskState::Failed, &trace);
                for (name, values) in headers.iter() {
                    for value in values {
                        let value = value.as_str();
                        prop_assert!(
                            value.bytes().all(|b| (0x20..0x7f).contains(&b)),
                            "{}: {value:?}", AsRef::<str>::as_ref(name)
                        );
                        prop_assert!(value.len() <= 512, "{}", value.len());
                    }
                }
                let subject = subjects::result("agent-1", &ids.task_id);
                prop_assert!(subject.len() <= "agent.results.agent-1.".len() + 128);
            }
        }
    }

    #[test]
    fn header_text_is_one_bounded_line() {
        assert_eq!(header_text("a\r\nb\tc", 100), "a  b c");
        assert_eq!(header_text(&"x".repeat(1_000), 10).len(), 10);
        assert_eq!(header_text("ééé", 5), "éé");
    }
}
