//! Server-sent events: turns a byte stream into `(event, data)` records.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

/// One event of an SSE stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// Incremental SSE parser: feed bytes, take complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: BytesMut,
}

impl SseParser {
    /// Adds bytes and returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, sep)) = find_boundary(&self.buffer) {
            let block = self.buffer.split_to(end + sep);
            let text = String::from_utf8_lossy(&block[..end]);
            if let Some(event) = parse_block(&text) {
                events.push(event);
            }
        }
        events
    }
}

/// The end of the first complete event block and the length of its separator.
fn find_boundary(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = None;
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event = Some(value.to_owned()),
            "data" => data.push(value),
            _ => {}
        }
    }
    if data.is_empty() && event.is_none() {
        return None;
    }
    Some(SseEvent {
        event,
        data: data.join("\n"),
    })
}

/// The events of a byte stream, in order; a transport error ends it with that error.
pub fn events<S, E>(stream: S) -> impl Stream<Item = Result<SseEvent, E>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    let mut parser = SseParser::default();
    stream.flat_map(move |chunk| {
        let items: Vec<Result<SseEvent, E>> = match chunk {
            Ok(bytes) => parser.feed(&bytes).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(items)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let mut p = SseParser::default();
        assert!(p.feed(b"data: {\"a\":").is_empty());
        let got = p.feed(
            b"1}\n\nevent: message_stop\r\ndata: {}\r\n\r\n: comment\n\ndata: x\ndata: y\n\n",
        );
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: None,
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: Some("message_stop".into()),
                    data: "{}".into()
                },
                SseEvent {
                    event: None,
                    data: "x\ny".into()
                },
            ]
        );
    }
}
