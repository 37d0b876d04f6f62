//! Reading a `text/event-stream` response as it arrives: each event's `data` as JSON, and the
//! comments (keep-alives) counted.

use futures::StreamExt;
use serde_json::Value;

/// The events of an SSE response, read one at a time.
pub struct SseEvents {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// Comment lines (`: …`) seen so far.
    pub comments: usize,
}

impl std::fmt::Debug for SseEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseEvents")
            .field("comments", &self.comments)
            .finish_non_exhaustive()
    }
}

impl SseEvents {
    /// Reads `response`'s body as SSE.
    pub fn of(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
            comments: 0,
        }
    }

    /// The next event's `data`, parsed as JSON; `None` when the stream has ended.
    pub async fn next_json(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(rest) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                    } else if line.starts_with(':') {
                        self.comments += 1;
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(&data).expect("each SSE data line is JSON"));
            }
            let chunk = self.body.next().await?.expect("the stream reads");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Every remaining event, until the stream ends.
    pub async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(event) = self.next_json().await {
            out.push(event);
        }
        out
    }
}
