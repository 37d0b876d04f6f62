//! Shared test support for the runtime's integration tests.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

pub mod grpc;
pub mod identity;
pub mod kv_store;
pub mod mcp_client;
pub mod modern;
pub mod process;
pub mod python;
pub mod runtime;

use std::sync::Mutex;

use daedalus_runtime::agents::llm::LlmEvent;

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
    /// The delays the client waited before each retry.
    pub fn retry_delays(&self) -> Vec<std::time::Duration> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|e| match e {
                LlmEvent::Retrying { delay, .. } => Some(*delay),
                LlmEvent::TextDelta(_) => None,
            })
            .collect()
    }

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

/// `POST /` of a task whose text is "add please", with an optional bearer; the Task.
pub async fn post(url: &str, bearer: Option<&str>, id: &str) -> serde_json::Value {
    post_text(url, bearer, id, "add please").await
}

/// `POST /` of a task with `text`, with an optional bearer; the Task (the answer must be 200).
pub async fn post_text(url: &str, bearer: Option<&str>, id: &str, text: &str) -> serde_json::Value {
    post_text_with(&reqwest::Client::new(), url, bearer, id, text).await
}

/// [`post_text`] through `client` (many requests at once share one: a client takes tens of
/// milliseconds to build in a debug build).
pub async fn post_text_with(
    client: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    id: &str,
    text: &str,
) -> serde_json::Value {
    let body = serde_json::json!({"message": {"messageId": id, "role": "user", "parts": [{"text": text}]}});
    let mut req = client.post(format!("{url}/")).json(&body);
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let r = req.send().await.expect("sent");
    assert_eq!(r.status(), 200);
    r.json().await.expect("JSON")
}

/// The tool names offered to the model in a logged request.
pub fn tool_names(request: &daedalus_fake_llm::Logged) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// A deployment of agent `a` on the OpenAI-compatible fake (`key`), whose one server `fx` is
/// at `url` (with `extra` keys).
pub fn one_server_yaml(
    fake: &daedalus_fake_llm::FakeLlm,
    key: &str,
    url: &str,
    extra: &str,
) -> String {
    format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {key}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{url}\"{extra} }}\n\
         agents:\n  a: {{ instruction: Work., servers: [fx] }}\n",
        fake.openai_base_url
    )
}

/// The contents of the tool messages in model request `n`.
pub fn tool_results(fake: &daedalus_fake_llm::FakeLlm, n: usize) -> Vec<String> {
    fake.requests()[n].body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}
