//! The Anthropic Messages client against the strict fake LLM server.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::agents::llm::anthropic::AnthropicClient;
use daedalus_runtime::agents::llm::retry::RetryPolicy;
use daedalus_runtime::agents::llm::{
    ChatMessage, ChatRequest, Content, LlmError, LlmProvider, StopReason, ToolSpec,
};
use daedalus_runtime::config::deployment::ProviderSettings;
use serde_json::json;
use support::Events;

const KEY: &str = "sk-ant-test-secret";
const MODEL: &str = "claude-fake";

fn client(fake: &FakeLlm, key: &str) -> AnthropicClient {
    let settings = ProviderSettings {
        api_key: Some(key.to_owned()),
        base_url: Some(fake.anthropic_base_url.clone()),
        headers: BTreeMap::new(),
        timeout_secs: Some(5.0),
        forward_inbound_auth: false,
        dialect: None,
        origins: daedalus_runtime::config::deployment::ProviderOrigins::default(),
    };
    let retry = RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(2),
    };
    AnthropicClient::new(&settings, retry).expect("the client builds")
}

fn ask(text: &str, stream: bool) -> ChatRequest {
    ChatRequest {
        model: MODEL.into(),
        system: Some("You are terse.".into()),
        messages: vec![ChatMessage::User {
            content: vec![Content::Text { text: text.into() }],
        }],
        tools: vec![ToolSpec {
            name: "fixture__add".into(),
            description: "adds".into(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}}}),
        }],
        sampling: daedalus_runtime::config::sampling::Sampling::default(),
        stream,
        caller: daedalus_runtime::platform::bearer::Bearer::default(),
        extra: serde_json::Map::new(),
    }
}

#[tokio::test]
async fn text_and_usage_with_cache_tokens_streaming_and_not() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Text("Four, obviously".into()),
        Reply::Text("A streamed reply in parts".into()),
    ]);
    let c = client(&fake, KEY);
    let r = c
        .chat(&ask("2+2?", false), &Events::default().sink())
        .await
        .unwrap();
    assert_eq!(r.text.as_deref(), Some("Four, obviously"));
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.usage.output_tokens, 2);
    assert_eq!(r.usage.cache_read_tokens, 0, "nothing cached yet");
    assert!(r.usage.cache_write_tokens > 0, "the prompt is cached");

    let events = Events::default();
    let r = c.chat(&ask("again", true), &events.sink()).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("A streamed reply in parts"));
    assert_eq!(events.deltas().concat(), "A streamed reply in parts");
    assert!(r.usage.input_tokens > 0);
    assert!(
        r.usage.cache_read_tokens > 0,
        "the tools and the system prompt are read from the cache"
    );
    let log = fake.requests();
    assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
    let first = &log[0].body;
    assert_eq!(first["system"][0]["text"], "You are terse.");
    let breakpoint = json!({"type": "ephemeral"});
    assert_eq!(first["system"][0]["cache_control"], breakpoint);
    assert_eq!(
        first["tools"][0]["cache_control"], breakpoint,
        "after the tools"
    );
    assert_eq!(
        first["messages"][0]["content"][0]["cache_control"], breakpoint,
        "after the newest message"
    );
}

#[tokio::test]
async fn tool_use_and_tool_result_blocks_translate_both_ways() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fixture__add".into(), json!({"a": 2})),
            ("fixture__add".into(), json!({"a": 3})),
        ]),
        Reply::Text("5".into()),
    ]);
    let c = client(&fake, KEY);
    let events = Events::default();
    let mut request = ask("add", true);
    let first = c.chat(&request, &events.sink()).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(first.tool_calls.len(), 2);
    assert_eq!(first.tool_calls[1].arguments, json!({"a": 3}));
    request.messages.push(ChatMessage::Assistant {
        text: None,
        tool_calls: first.tool_calls.clone(),
    });
    request.messages.push(ChatMessage::Tool {
        call_id: first.tool_calls[0].id.clone(),
        content: "2".into(),
        is_error: false,
    });
    request.messages.push(ChatMessage::Tool {
        call_id: first.tool_calls[1].id.clone(),
        content: "no such tool".into(),
        is_error: true,
    });
    request.stream = false;
    let last = c.chat(&request, &events.sink()).await.unwrap();
    assert_eq!(last.text.as_deref(), Some("5"));
    let log = fake.requests();
    assert!(
        log.iter().all(|l| l.refused.is_none()),
        "the strict fake accepted both: {log:?}"
    );
    let sent = &log[1].body["messages"];
    assert_eq!(
        sent.as_array().unwrap().len(),
        3,
        "the two results share one user turn"
    );
    assert_eq!(sent[2]["content"][1]["is_error"], true);
}

#[tokio::test]
async fn an_orphan_tool_result_is_refused_as_the_api_would() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let c = client(&fake, KEY);
    let mut request = ask("x", false);
    request.messages.push(ChatMessage::Assistant {
        text: Some("ok".into()),
        tool_calls: vec![],
    });
    request.messages.push(ChatMessage::Tool {
        call_id: "toolu_9".into(),
        content: "orphan".into(),
        is_error: false,
    });
    let err = c
        .chat(&request, &Events::default().sink())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err}");
    assert!(
        err.to_string().contains("corresponding `tool_use` block"),
        "{err}"
    );
}

#[tokio::test]
async fn overloaded_is_retried_after_retry_after_and_exhaustion_names_the_provider() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Error {
            status: 529,
            retry_after: Some("0.2".into()),
        },
        Reply::Text("back".into()),
    ]);
    let c = client(&fake, KEY);
    let events = Events::default();
    let started = Instant::now();
    assert_eq!(
        c.chat(&ask("x", false), &events.sink())
            .await
            .unwrap()
            .text
            .as_deref(),
        Some("back")
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(events.retries(), 1);

    fake.script((0..3).map(|_| Reply::Error {
        status: 500,
        retry_after: None,
    }));
    let err = c
        .chat(&ask("x", true), &Events::default().sink())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("anthropic: gave up after 3 attempts: anthropic: 500"),
        "{text}"
    );
    assert!(!text.contains(KEY));
}

#[tokio::test]
async fn a_bad_key_and_an_unknown_parameter_are_refused_without_retry_or_leak() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let err = client(&fake, "sk-ant-wrong")
        .chat(&ask("x", false), &Events::default().sink())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 401, .. }), "{err}");
    assert!(!err.to_string().contains("sk-ant-wrong"));
    let mut request = ask("x", false);
    request.extra.insert("presence_penalty".into(), json!(0.5));
    let err = client(&fake, KEY)
        .chat(&request, &Events::default().sink())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("presence_penalty: Extra inputs are not permitted"),
        "{err}"
    );
    assert_eq!(fake.requests().len(), 2, "neither was retried");
}
