//! Reading a runtime's SSE answer (contract level 3): frames cut into events as bytes arrive,
//! each event's `data` handed on as the runtime wrote it, and the Task the stream describes
//! rebuilt with the contract's one rebuilder ([`daedalus_contract::TaskRebuilder`]).

use bytes::{Bytes, BytesMut};
use daedalus_contract::write::contract;
use daedalus_contract::{RETRY_ELSEWHERE, StreamEvent, TaskRebuilder, read};

use crate::forward::forwarder::Reply;

/// Longest event the proxy takes from a runtime: an event past it is a broken stream.
const MAX_EVENT_BYTES: usize = 16 << 20;

/// Why a runtime's stream cannot be read to a Task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamReadError {
    #[error("the runtime's stream ended before its final event")]
    Unfinished,
    #[error("the runtime's stream sent an event that is not a stream event: {0}")]
    NotAnEvent(String),
    #[error("the runtime's stream does not describe one task: {0}")]
    NotATask(String),
    #[error("the runtime's stream sent an event larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
}

/// Cuts SSE bytes into events' data, and rebuilds the Task they describe.
#[derive(Debug, Default)]
pub struct EventStreamReader {
    buffer: BytesMut,
    rebuilt: TaskRebuilder,
    /// The final status update says the runtime cut the turn ([`RETRY_ELSEWHERE`]).
    retry_elsewhere: bool,
}

impl EventStreamReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the body; returns the data of every event they complete, in
    /// order, each already applied to the rebuilt Task.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Bytes>, StreamReadError> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some((end, separator)) = frame_end(&self.buffer) {
            let frame = self.buffer.split_to(end + separator).freeze();
            if let Some(data) = frame_data(&frame[..end]) {
                let event: StreamEvent = read::from_slice(&data)
                    .map_err(|e| StreamReadError::NotAnEvent(e.to_string()))?;
                self.rebuilt
                    .apply(&event)
                    .map_err(|e| StreamReadError::NotATask(e.to_string()))?;
                if let StreamEvent::StatusUpdate(update) = &event
                    && update.r#final
                {
                    self.retry_elsewhere = update
                        .metadata
                        .as_ref()
                        .and_then(|m| m.get(RETRY_ELSEWHERE))
                        .is_some_and(|v| v == true);
                }
                events.push(data);
            }
        }
        if self.buffer.len() > MAX_EVENT_BYTES {
            return Err(StreamReadError::TooLarge);
        }
        Ok(events)
    }

    /// Whether the final event has been read.
    pub fn is_final(&self) -> bool {
        self.rebuilt.is_final()
    }

    /// The rebuilt Task as the runtime's answer (status 200, the Task in the contract
    /// dialect), once the final event has been read. A stream the runtime cut
    /// ([`RETRY_ELSEWHERE`]) answers as a 503 would: the task belongs on another replica.
    pub fn into_reply(self) -> Result<Reply, StreamReadError> {
        if !self.rebuilt.is_final() {
            return Err(StreamReadError::Unfinished);
        }
        let task = self
            .rebuilt
            .into_task()
            .ok_or(StreamReadError::Unfinished)?;
        if self.retry_elsewhere {
            let why = task
                .status
                .message
                .as_ref()
                .map(daedalus_contract::Message::text)
                .unwrap_or_default();
            let body = serde_json::json!({"error": {"code": 503, "message": why}});
            return Ok(Reply {
                status: 503,
                body: Bytes::from(body.to_string()),
                retry_after: None,
            });
        }
        Ok(Reply {
            status: 200,
            body: Bytes::from(contract::to_vec(&task)),
            retry_after: None,
        })
    }
}

/// Where the first complete frame of `buffer` ends, and the length of its blank-line separator.
fn frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buffer.len() {
        match (buffer[i], buffer[i + 1]) {
            (b'\n', b'\n') => return Some((i, 2)),
            (b'\r', b'\n') if buffer[i + 2..].starts_with(b"\r\n") => return Some((i, 4)),
            _ => i += 1,
        }
    }
    None
}

/// The `data` of one frame (its `data:` lines joined by newlines); `None` for a frame without
/// data (a comment, a keep-alive).
fn frame_data(frame: &[u8]) -> Option<Bytes> {
    let mut data = Vec::new();
    let mut any = false;
    for line in frame.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(rest) = line.strip_prefix(b"data:") {
            if any {
                data.push(b'\n');
            }
            any = true;
            data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
        }
    }
    any.then(|| Bytes::from(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = r#"{"task":{"id":"t","contextId":"c","status":{"state":"submitted"}}}"#;
    const CHUNK: &str = r#"{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"Hello"}]},"append":false,"lastChunk":false}}"#;
    const MORE: &str = r#"{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":", world"}]},"append":true,"lastChunk":true}}"#;
    const FINAL: &str = r#"{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"completed"},"final":true}}"#;

    #[test]
    fn events_cut_anywhere_are_read_whole_and_rebuild_the_task() {
        let body = format!(
            ": hello\n\ndata: {TASK}\n\ndata: {CHUNK}\r\n\r\ndata: {MORE}\n\ndata: {FINAL}\n\n"
        );
        for cut in [1, 7, 64] {
            let mut reader = EventStreamReader::new();
            let mut seen = Vec::new();
            for piece in body.as_bytes().chunks(cut) {
                seen.extend(reader.push(piece).expect("a valid stream"));
            }
            assert_eq!(seen.len(), 4, "cut every {cut} bytes");
            assert_eq!(seen[1], Bytes::from(CHUNK));
            let reply = reader.into_reply().expect("final");
            let task: daedalus_contract::Task = read::from_slice(&reply.body).expect("a Task");
            assert_eq!(task.artifacts[0].parts[0].as_text(), Some("Hello, world"));
            assert_eq!(task.status.state, daedalus_contract::TaskState::Completed);
        }
    }

    #[test]
    fn a_stream_cut_before_its_final_event_is_unfinished() {
        let mut reader = EventStreamReader::new();
        reader
            .push(format!("data: {TASK}\n\ndata: {CHUNK}\n\n").as_bytes())
            .expect("valid so far");
        assert_eq!(reader.into_reply().err(), Some(StreamReadError::Unfinished));
    }

    #[test]
    fn a_stream_the_runtime_cut_answers_as_a_503() {
        let cut = r#"{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"failed","message":{"messageId":"x","role":"agent","parts":[{"text":"runtime is shutting down"}]}},"final":true,"metadata":{"retryElsewhere":true}}}"#;
        let mut reader = EventStreamReader::new();
        reader
            .push(format!("data: {TASK}\n\ndata: {cut}\n\n").as_bytes())
            .expect("a valid stream");
        let reply = reader.into_reply().expect("final");
        assert_eq!(reply.status, 503);
        assert!(String::from_utf8_lossy(&reply.body).contains("shutting down"));
    }

    #[test]
    fn an_event_that_is_not_one_is_refused() {
        let mut reader = EventStreamReader::new();
        let out = reader.push(b"data: {\"nope\": 1}\n\n");
        assert!(
            matches!(out, Err(StreamReadError::NotAnEvent(_))),
            "{out:?}"
        );
    }
}
