//! The OpenAI-compatible client against the strict fake LLM server.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::agents::llm::openai::OpenAiClient;
use daedalus_runtime::agents::llm::retry::RetryPolicy;
use daedalus_runtime::agents::llm::{
    ChatMessage, ChatRequest, Content, LlmError, LlmProvider, StopReason, ToolCall, ToolSpec,
};
use daedalus_runtime::config::deployment::ProviderSettings;
use serde_json::json;
use support::Events;

const KEY: &str = "sk-test-secret-123";
const MODEL: &str = "gpt-fake";

fn client(fake: &FakeLlm, key: &str) -> OpenAiClient {
    let settings = ProviderSettings {
        api_key: Some(key.to_owned()),
        base_url: Some(fake.openai_base_url.clone()),
        headers: BTreeMap::from([("X-Test".to_owned(), "1".to_owned())]),
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
    OpenAiClient::new(&settings, retry).expect("the client builds")
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
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
        }],
        sampling: daedalus_runtime::config::sampling::Sampling::default(),
        stream,
        caller: daedalus_runtime::platform::bearer::Bearer::default(),
        extra: serde_json::Map::new(),
    }
}

#[tokio::test]
async fn text_and_usage_with_and_without_streaming() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Text("The answer is four".into()),
        Reply::Text("Streamed answer in pieces".into()),
    ]);
    let c = client(&fake, KEY);

    let events = Events::default();
    let r = c.chat(&ask("2+2?", false), &events.sink()).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("The answer is four"));
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.usage.output_tokens, 4);
    assert!(r.usage.input_tokens > 0);
    assert!(events.deltas().is_empty());

    let events = Events::default();
    let r = c.chat(&ask("again", true), &events.sink()).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("Streamed answer in pieces"));
    assert_eq!(events.deltas().concat(), "Streamed answer in pieces");
    assert!(
        events.deltas().len() >= 2,
        "several deltas: {:?}",
        events.deltas()
    );
    assert_eq!(r.usage.output_tokens, 4);

    let log = fake.requests();
    assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
    assert_eq!(log[0].body["messages"][0]["role"], "system");
    assert_eq!(log[1].body["stream"], true);
}

#[tokio::test]
async fn tool_calls_round_trip_in_well_formed_messages() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::ToolCalls(vec![("fixture__add".into(), json!({"a": 2, "b": 3}))]),
        Reply::ToolCalls(vec![
            ("fixture__add".into(), json!({"a": 1, "b": 1})),
            ("fixture__add".into(), json!({"a": 5, "b": 5})),
        ]),
        Reply::Text("5, 2 and 10".into()),
    ]);
    let c = client(&fake, KEY);
    let events = Events::default();
    let mut request = ask("add things", false);
    let first = c.chat(&request, &events.sink()).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.tool_calls,
        vec![ToolCall {
            id: "call_0".into(),
            name: "fixture__add".into(),
            arguments: json!({"a": 2, "b": 3})
        }]
    );

    request.messages.push(ChatMessage::Assistant {
        text: None,
        tool_calls: first.tool_calls.clone(),
    });
    request.messages.push(ChatMessage::Tool {
        call_id: "call_0".into(),
        content: "5".into(),
        is_error: false,
    });
    request.stream = true;
    let second = c.chat(&request, &events.sink()).await.unwrap();
    assert_eq!(
        second.tool_calls.len(),
        2,
        "two calls reassembled from the stream"
    );
    assert_eq!(second.tool_calls[1].arguments, json!({"a": 5, "b": 5}));

    request.messages.push(ChatMessage::Assistant {
        text: None,
        tool_calls: second.tool_calls.clone(),
    });
    for call in &second.tool_calls {
        request.messages.push(ChatMessage::Tool {
            call_id: call.id.clone(),
            content: "ok".into(),
            is_error: false,
        });
    }
    let last = c.chat(&request, &events.sink()).await.unwrap();
    assert_eq!(last.text.as_deref(), Some("5, 2 and 10"));
    let log = fake.requests();
    assert_eq!(log.len(), 3);
    assert!(
        log.iter().all(|l| l.refused.is_none()),
        "the fake accepted every request: {log:?}"
    );
    assert_eq!(log[2].body["messages"][4]["role"], "assistant");
    assert_eq!(log[2].body["messages"][5]["role"], "tool");
    assert_eq!(log[2].body["messages"][6]["tool_call_id"], "call_1");
}

#[tokio::test]
async fn a_tool_result_without_its_call_is_refused_and_not_retried() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([Reply::Text("unused".into())]);
    let c = client(&fake, KEY);
    let mut request = ask("x", false);
    request.messages.push(ChatMessage::Tool {
        call_id: "call_zz".into(),
        content: "orphan".into(),
        is_error: false,
    });
    let err = c
        .chat(&request, &Events::default().sink())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err}");
    assert!(
        err.to_string()
            .contains("must be a response to a preceeding message"),
        "{err}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn throttling_is_retried_after_the_servers_retry_after() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Error {
            status: 429,
            retry_after: Some("0.3".into()),
        },
        Reply::Text("finally".into()),
    ]);
    let c = client(&fake, KEY);
    let events = Events::default();
    let r = c.chat(&ask("x", false), &events.sink()).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("finally"));
    assert_eq!(
        events.retry_delays(),
        [Duration::from_millis(300)],
        "waited for Retry-After"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_given_up_with_a_clear_error_and_no_secret() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Error {
            status: 500,
            retry_after: None,
        },
        Reply::Text("recovered".into()),
    ]);
    let c = client(&fake, KEY);
    assert_eq!(
        c.chat(&ask("x", true), &Events::default().sink())
            .await
            .unwrap()
            .text
            .as_deref(),
        Some("recovered")
    );

    fake.script((0..3).map(|_| Reply::Error {
        status: 503,
        retry_after: None,
    }));
    let err = c
        .chat(&ask("x", false), &Events::default().sink())
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Exhausted { attempts: 3, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("openai: gave up after 3 attempts: openai: 503"),
        "{text}"
    );
    assert!(!text.contains(KEY));
}

#[tokio::test]
async fn a_bad_key_is_a_401_that_is_not_retried_and_not_repeated() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let c = client(&fake, "sk-wrong-key");
    let err = c
        .chat(&ask("x", false), &Events::default().sink())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 401, .. }), "{err}");
    assert!(!err.to_string().contains("sk-wrong-key"));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_parameter_the_api_does_not_know_is_refused_by_the_fake() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let c = client(&fake, KEY);
    let mut request = ask("x", false);
    request.sampling.top_k = Some(40);
    let err = c
        .chat(&request, &Events::default().sink())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Unrecognized request argument supplied: top_k"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let settings = ProviderSettings {
        api_key: Some(KEY.into()),
        base_url: Some(url),
        headers: BTreeMap::new(),
        timeout_secs: Some(1.0),
        forward_inbound_auth: false,
        dialect: None,
        origins: daedalus_runtime::config::deployment::ProviderOrigins::default(),
    };
    let retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(10),
    };
    let c = OpenAiClient::new(&settings, retry).expect("the client builds");
    let err = c
        .chat(&ask("x", false), &Events::default().sink())
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Exhausted { attempts: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("cannot reach"), "{err}");
}
