//! Shared test support for the runtime's integration tests.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

pub mod mcp_client;
pub mod process;
pub mod runtime;

use std::sync::Mutex;

use daedalus_runtime::llm::LlmEvent;

/// Collects the events of an LLM turn for assertions.
#[derive(Default)]
pub struct Events(Mutex<Vec<LlmEvent>>);

impl Events {
    /// The callback to hand to `LlmProvider::chat`.
    pub fn sink(&self) -> impl Fn(LlmEvent) + Send + Sync + '_ {
        move |e| self.0.lock().expect("lock").push(e)
    }

    /// The streamed text deltas, in order.
    pub fn deltas(&self) -> Vec<String> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|e| match e {
                LlmEvent::TextDelta(t) => Some(t.clone()),
                LlmEvent::Retrying { .. } => None,
            })
            .collect()
    }

    /// How many retries were reported.
    pub fn retries(&self) -> usize {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|e| matches!(e, LlmEvent::Retrying { .. }))
            .count()
    }
}

/// The model's side of a turn in which `harper` calls `fx__add`, `fx__echo` and the sub-agent
/// `helper` at once (helper answers "checked"), then answers "5, 7 and checked".
pub fn two_tools_and_a_sub_agent() -> Vec<daedalus_fake_llm::Reply> {
    use daedalus_fake_llm::Reply;
    use serde_json::json;
    vec![
        Reply::ToolCalls(vec![
            ("fx__add".into(), json!({"a": 2, "b": 3})),
            ("fx__echo".into(), json!({"n": 7})),
            ("helper__send_message".into(), json!({"message": "check"})),
        ]),
        Reply::Text("checked".into()),
        Reply::Text("5, 7 and checked".into()),
    ]
}
