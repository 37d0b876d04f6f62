//! Reading a task message: a `SendMessageRequest`, or a body that is not one — with a usable
//! task id (it gets a failed result) or without (it goes to the dead-letter subject).

use daedalus_contract::{SendMessageRequest, read};
use serde::Deserialize;

use crate::wire::ids::Ids;

/// What a task message turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Intake {
    Task {
        request: Box<SendMessageRequest>,
        ids: Ids,
    },
    /// Not a usable request, but its ids are known: answer with a failed Task.
    Refused { ids: Ids, reason: String },
    /// Nothing to answer to: dead-letter it.
    Unaddressable { reason: String },
}

/// The ids of a body that may be far from a valid request.
#[derive(Deserialize)]
struct Loose {
    message: Option<LooseMessage>,
}

#[derive(Deserialize)]
struct LooseMessage {
    #[serde(alias = "message_id", rename = "messageId")]
    message_id: Option<serde_json::Value>,
    #[serde(alias = "task_id", rename = "taskId")]
    task_id: Option<serde_json::Value>,
    #[serde(alias = "context_id", rename = "contextId")]
    context_id: Option<serde_json::Value>,
}

fn non_empty_string(v: Option<serde_json::Value>) -> Option<String> {
    match v {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Some(s),
        _ => None,
    }
}

/// Reads a task body.
pub fn read_task(body: &[u8]) -> Intake {
    match read::from_slice::<SendMessageRequest>(body) {
        Ok(request) => {
            let message = &request.message;
            if message.message_id.trim().is_empty() {
                return Intake::Unaddressable {
                    reason: "message.messageId is empty".to_owned(),
                };
            }
            let ids = Ids {
                task_id: message.effective_task_id().to_owned(),
                message_id: message.message_id.clone(),
                context_id: message.context_id.clone(),
            };
            Intake::Task {
                request: Box::new(request),
                ids,
            }
        }
        Err(e) => {
            let reason = format!("not a SendMessageRequest: {e}");
            let loose = serde_json::from_slice::<Loose>(body)
                .ok()
                .and_then(|l| l.message);
            let Some(m) = loose else {
                return Intake::Unaddressable { reason };
            };
            let message_id = non_empty_string(m.message_id);
            let task_id = non_empty_string(m.task_id).or_else(|| message_id.clone());
            match (task_id, message_id) {
                (Some(task_id), Some(message_id)) => Intake::Refused {
                    ids: Ids {
                        task_id,
                        message_id,
                        context_id: non_empty_string(m.context_id),
                    },
                    reason,
                },
                _ => Intake::Unaddressable { reason },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(body: &[u8]) -> &'static str {
        match read_task(body) {
            Intake::Task { .. } => "task",
            Intake::Refused { .. } => "refused",
            Intake::Unaddressable { .. } => "deadletter",
        }
    }

    #[test]
    fn bodies_sort_into_three_kinds() {
        let cases: [(&[u8], &str); 9] = [
            (br#"{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}"#, "task"),
            (br#"{"message":{"messageId":"m","role":"user","parts":[]}}"#, "task"),
            (br#"{"message":{"messageId":"m","taskId":"t","role":"robot","parts":[{"text":"x"}]}}"#, "refused"),
            (br#"{"message":{"messageId":"m"}}"#, "refused"),
            (br#"{"message":{"parts":[{"text":"x"}]}}"#, "deadletter"),
            (br#"{"message":{"messageId":""}}"#, "deadletter"),
            (b"not json", "deadletter"),
            (b"\x00\x01\x02\xff", "deadletter"),
            (br#"{"hello":"world"}"#, "deadletter"),
        ];
        for (body, expected) in cases {
            assert_eq!(kind(body), expected, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn refused_bodies_keep_their_ids() {
        match read_task(br#"{"message":{"messageId":"m","taskId":"t","contextId":"c"}}"#) {
            Intake::Refused { ids, .. } => {
                assert_eq!(
                    ids,
                    Ids {
                        task_id: "t".into(),
                        message_id: "m".into(),
                        context_id: Some("c".into())
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
