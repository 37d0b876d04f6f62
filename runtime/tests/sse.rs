//! `POST /` with `Accept: text/event-stream` (contract level 3) on the real runtime, its model
//! the strict fake LLM streaming for real, one downstream MCP server giving it a tool.
//!
//! What arrives before the model has finished is told by the fake's gate, not by time: the
//! fake sends the first words, then waits until the test opens the gate.

mod support;

use std::time::Duration;

use daedalus_contract::{Schema, StreamEvent, Task, TaskRebuilder, read};
use daedalus_fake_llm::{FakeLlm, Gate, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::SseEvents;
use serde_json::{Value, json};
use support::runtime::Runtime;

const KEY: &str = "sk-sse";

fn deployment(fake: &FakeLlm, tools: &McpFixture) -> String {
    deployment_on(Provider::OpenAi, fake, tools)
}

#[derive(Clone, Copy)]
enum Provider {
    OpenAi,
    Anthropic,
}

/// Agent `a` on `provider`'s face of the fake, with the fixture's tools as `f`.
fn deployment_on(provider: Provider, fake: &FakeLlm, tools: &McpFixture) -> String {
    let (model, block) = match provider {
        Provider::OpenAi => (
            "openai.gpt-fake",
            format!(
                "openai: {{ api_key: {KEY}, base_url: \"{}\" }}",
                fake.openai_base_url
            ),
        ),
        Provider::Anthropic => (
            "anthropic.claude-fake",
            format!(
                "anthropic: {{ api_key: {KEY}, base_url: \"{}\" }}",
                fake.anthropic_base_url
            ),
        ),
    };
    format!(
        "default_model: {model}\n{block}\n\
         mcp:\n  servers:\n    f: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Add., servers: [f] }}\n",
        tools.url()
    )
}

fn task_body(id: &str) -> Value {
    json!({"message": {"messageId": id, "role": "user", "parts": [{"text": "add 2 and 3"}]}})
}

/// Opens the stream of task `id`.
async fn stream(url: &str, id: &str) -> SseEvents {
    let response = reqwest::Client::new()
        .post(format!("{url}/"))
        .header("accept", "text/event-stream")
        .json(&task_body(id))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    SseEvents::of(response)
}

/// The same task without streaming (a replay, once it has been answered).
async fn plain(url: &str, id: &str) -> Task {
    let response = reqwest::Client::new()
        .post(format!("{url}/"))
        .json(&task_body(id))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    read::from_slice(&response.bytes().await.expect("body")).expect("a Task")
}

/// Reads the stream up to its first artifact chunk (the model has started answering).
async fn read_to_first_chunk(events: &mut SseEvents) {
    while let Some(event) = events.next_json().await {
        if kind(&event) == "artifact" {
            return;
        }
    }
    panic!("the stream ended before any chunk");
}

fn kind(event: &Value) -> &'static str {
    if event.get("task").is_some() {
        "task"
    } else if event.get("statusUpdate").is_some() {
        "status"
    } else if event.get("artifactUpdate").is_some() {
        "artifact"
    } else {
        "?"
    }
}

fn step_text(event: &Value) -> Option<&str> {
    event["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str()
}

#[tokio::test]
async fn the_stream_carries_the_models_text_before_it_finishes_and_ends_with_the_final_task() {
    streams_before_the_model_finishes(Provider::OpenAi).await;
}

#[tokio::test]
async fn an_anthropic_model_streams_before_it_finishes_too() {
    streams_before_the_model_finishes(Provider::Anthropic).await;
}

/// The model, held at the fake's gate after its first words, has those words on the stream
/// already; the tool steps came before them; the rest and the one final event come after.
async fn streams_before_the_model_finishes(provider: Provider) {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake", "claude-fake"]).await;
    let gate = Gate::new();
    fake.script([
        Reply::ToolCalls(vec![("f__add".into(), json!({"a": 2, "b": 3}))]),
        Reply::Paused {
            before: "The sum of 2 and 3 ".into(),
            after: "is 5.".into(),
            gate: gate.clone(),
        },
    ]);
    let rt = Runtime::start(&deployment_on(provider, &fake, &tools)).await;
    let mut events = stream(&rt.url, "m-1").await;

    // Everything up to the first words of the answer, while the model is held at the gate.
    let mut before_gate = Vec::new();
    loop {
        let event = events.next_json().await.expect("the stream goes on");
        let first_words = event["artifactUpdate"]["artifact"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("The sum"));
        before_gate.push(event);
        if first_words {
            break;
        }
    }
    assert_eq!(kind(&before_gate[0]), "task", "{before_gate:#?}");
    assert_eq!(before_gate[1]["statusUpdate"]["status"]["state"], "working");
    let steps: Vec<&str> = before_gate.iter().filter_map(step_text).collect();
    assert!(
        steps.contains(&"f/add: started") && steps.contains(&"f/add: completed"),
        "{steps:?}"
    );
    assert!(
        before_gate
            .iter()
            .all(|e| e["statusUpdate"]["final"] != true),
        "nothing final before the model finished"
    );

    gate.open();
    let after_gate = events.rest().await;
    let all: Vec<Value> = before_gate.into_iter().chain(after_gate).collect();
    let last = all.last().expect("events");
    assert_eq!(last["statusUpdate"]["final"], true, "{all:#?}");
    assert_eq!(last["statusUpdate"]["status"]["state"], "completed");
    assert_eq!(
        all.iter()
            .filter(|e| e["statusUpdate"]["final"] == true)
            .count(),
        1
    );

    let mut rebuilt = TaskRebuilder::new();
    for event in &all {
        Schema::StreamEvent
            .validate(event)
            .unwrap_or_else(|e| panic!("{event} is a valid stream event: {e}"));
        let event: StreamEvent = read::from_value(event.clone()).expect("a stream event");
        rebuilt.apply(&event).expect("the stream rebuilds");
    }
    let rebuilt = rebuilt.into_task().expect("a task");
    let answered = plain(&rt.url, "m-1").await;
    assert_eq!(rebuilt.artifacts, answered.artifacts);
    assert_eq!(rebuilt.status.state, answered.status.state);
    assert_eq!(
        answered.artifacts[0].parts[0].as_text(),
        Some("The sum of 2 and 3 is 5.")
    );
    let asked: Vec<bool> = fake
        .requests()
        .iter()
        .map(|r| r.body["stream"] == true)
        .collect();
    assert_eq!(asked, [true, true], "the model streamed both steps");
}

#[tokio::test]
async fn without_a_listener_the_model_is_not_asked_to_stream() {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::Text("5".into())]);
    let rt = Runtime::start(&deployment(&fake, &tools)).await;
    let task = plain(&rt.url, "m-plain").await;
    assert_eq!(task.artifacts[0].parts[0].as_text(), Some("5"));
    assert_eq!(fake.requests()[0].body.get("stream"), None);
}

#[tokio::test]
async fn a_client_that_goes_away_mid_stream_does_not_stop_the_task() {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let gate = Gate::new();
    fake.script([Reply::Paused {
        before: "Half ".into(),
        after: "and whole.".into(),
        gate: gate.clone(),
    }]);
    let rt = Runtime::start(&deployment(&fake, &tools)).await;
    let mut events = stream(&rt.url, "m-gone").await;
    read_to_first_chunk(&mut events).await;
    drop(events);
    gate.open();
    // The replay waits for the turn, then answers with what it stored.
    let task = plain(&rt.url, "m-gone").await;
    assert_eq!(task.status.state.to_string(), "completed");
    assert_eq!(
        task.artifacts[0].parts[0].as_text(),
        Some("Half and whole.")
    );
}

#[tokio::test]
async fn a_stream_cut_by_shutdown_still_ends_with_its_final_event() {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let gate = Gate::new();
    fake.script([Reply::Paused {
        before: "Never ".into(),
        after: "finished.".into(),
        gate,
    }]);
    let rt = Runtime::serving_with(&deployment(&fake, &tools), None, |config| {
        config.termination_grace_period = Duration::from_millis(300);
    })
    .await;
    let mut events = stream(&rt.url, "m-cut").await;
    read_to_first_chunk(&mut events).await;
    rt.stop();
    let rest = events.rest().await;
    let last = rest.last().expect("a final event");
    assert_eq!(last["statusUpdate"]["final"], true, "{rest:#?}");
    assert_eq!(last["statusUpdate"]["status"]["state"], "failed");
    assert_eq!(last["statusUpdate"]["metadata"]["retryElsewhere"], true);
    Schema::StreamEvent.validate(last).expect("valid");
}

#[tokio::test]
async fn the_card_says_it_streams() {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let rt = Runtime::start(&deployment(&fake, &tools)).await;
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", rt.url))
        .await
        .expect("card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(card["capabilities"]["streaming"], true);
    let manifest: Value = reqwest::get(format!("{}/.well-known/runtime-contract.json", rt.url))
        .await
        .expect("manifest")
        .json()
        .await
        .expect("JSON");
    assert_eq!(manifest["capabilities"]["streaming"], true);
}
