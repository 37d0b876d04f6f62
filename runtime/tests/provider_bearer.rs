//! Bearer passthrough to the LLM provider (`forward_inbound_auth: true` on the provider block):
//! the inbound bearer is that call's provider credential, for HuggingFace-style
//! token-passthrough endpoints, with the same isolation as MCP forwarding: under 100 concurrent
//! requests with distinct tokens, each provider call carries its own; a call without a bearer
//! uses the configured key; a provider that did not opt in never sees a caller's token.

mod support;

use daedalus_fake_llm::{AutoReply, FakeLlm};
use serde_json::{Value, json};
use support::runtime::Runtime;

const KEY: &str = "sk-configured";

async fn post(client: &reqwest::Client, url: &str, bearer: Option<&str>, text: &str) -> Value {
    let mut request = client
        .post(format!("{url}/"))
        .json(&json!({"message": {"messageId": text, "role": "user", "parts": [{"text": text}]}}));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    request
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("a Task")
}

/// The text of the request's last user message.
fn asked(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other[0]["text"].as_str().unwrap_or_default().to_owned(),
        })
        .unwrap_or_default()
}

fn deployment(fake: &FakeLlm, provider: &str, forward: bool) -> String {
    let base = if provider == "openai" {
        &fake.openai_base_url
    } else {
        &fake.anthropic_base_url
    };
    let model = if provider == "openai" {
        "gpt-fake"
    } else {
        "claude-fake"
    };
    format!(
        "default_model: {provider}.{model}\n\
         {provider}: {{ api_key: {KEY}, base_url: \"{base}\", forward_inbound_auth: {forward} }}\n\
         agents:\n  a: {{ instruction: Answer. }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_carries_its_own_callers_token_to_the_provider() {
    for provider in ["openai", "anthropic"] {
        let fake = FakeLlm::start(KEY, &["gpt-fake", "claude-fake"]).await;
        fake.auto(AutoReply {
            tools: Vec::new(),
            text: "ok {n}".into(),
            ..Default::default()
        });
        for i in 0..100 {
            fake.accept_key(&format!("tok-{i}"));
        }
        let rt = Runtime::start(&deployment(&fake, provider, true)).await;
        let url = rt.url.clone();
        // One client for all: a hundred built in this task (tens of ms each in a debug
        // build) would keep the first connections silent past the header-read timeout.
        let client = reqwest::Client::new();
        let answers = futures::future::join_all((0..100).map(|i| {
            let (url, client) = (url.clone(), client.clone());
            async move {
                let token = format!("tok-{i}");
                post(&client, &url, Some(&token), &format!("q-{i}")).await
            }
        }))
        .await;
        assert!(
            answers.iter().all(|t| t["status"]["state"] == "completed"),
            "{provider}: {answers:?}"
        );
        let plain = post(&client, &url, None, "q-none").await;
        assert_eq!(plain["status"]["state"], "completed", "{plain}");

        let log = fake.requests();
        assert_eq!(log.len(), 101, "{provider}");
        for call in &log {
            let question = asked(&call.body);
            let expected = match question.strip_prefix("q-") {
                Some("none") => KEY.to_owned(),
                Some(i) => format!("tok-{i}"),
                None => panic!("{provider}: an unexpected request {question}"),
            };
            assert_eq!(
                call.credential.as_deref(),
                Some(expected.as_str()),
                "{provider}: the call for {question}"
            );
        }
    }
}

#[tokio::test]
async fn a_provider_that_did_not_opt_in_never_sees_the_callers_token() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.auto(AutoReply {
        tools: Vec::new(),
        text: "ok".into(),
        ..Default::default()
    });
    fake.accept_key("tok-secret");
    let rt = Runtime::start(&deployment(&fake, "openai", false)).await;
    let task = post(&reqwest::Client::new(), &rt.url, Some("tok-secret"), "q-1").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let log = fake.requests();
    assert_eq!(log[0].credential.as_deref(), Some(KEY));
    assert!(!format!("{:?}", log[0].body).contains("tok-secret"));
}
