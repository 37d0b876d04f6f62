//! mcpctl's per-call chat controls and Pallas-style personalities, through both faces (A2A
//! `metadata`, MCP `send_message` arguments), judged on the request the strict fake LLM got:
//! the system text, the tools offered, the sampling; and a tool the allowlist leaves out is
//! refused when called, never reaching its server.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::mcp_client::{call, connect};
use support::runtime::Runtime;
use support::{tool_names, tool_results};

const KEY: &str = "sk-controls";

async fn deployment(fake: &FakeLlm, fixture: &McpFixture) -> Runtime {
    let yaml = format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  a:\n    instruction: Base.\n    servers: [fx]\n\
         \x20   request_params: {{ temperature: 0.5, seed: 3 }}\n\
         \x20   default_personality: terse\n\
         \x20   personalities:\n\
         \x20     terse: {{ instruction: Be terse., description: Short answers, request_params: {{ temperature: 0.1 }} }}\n\
         \x20     warm: {{ instruction: Be warm., request_params: {{ temperature: 0.9 }} }}\n",
        fake.openai_base_url,
        fixture.url()
    );
    Runtime::start(&yaml).await
}

async fn post(rt: &Runtime, id: &str, metadata: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{}/", rt.url))
        .json(
            &json!({"message": {"messageId": id, "role": "user", "parts": [{"text": "hi"}]},
            "metadata": metadata}),
        )
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("a Task")
}

fn system(request: &daedalus_fake_llm::Logged) -> String {
    request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn personalities_and_instruction_controls_shape_the_request_on_both_faces() {
    let fixture = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script((0..5).map(|i| Reply::Text(format!("answer {i}"))));
    let rt = deployment(&fake, &fixture).await;

    assert_eq!(
        post(&rt, "p-1", json!({})).await["status"]["state"],
        "completed"
    );
    let warm = json!({"personality": "warm", "request_params": {"temperature": 0.3}});
    assert_eq!(post(&rt, "p-2", warm).await["status"]["state"], "completed");
    let rewritten = json!({"systemOverride": "New.", "systemAppend": "PS."});
    assert_eq!(
        post(&rt, "p-3", rewritten).await["status"]["state"],
        "completed"
    );
    let (client, _) = connect(&rt.mcp("a"), None).await;
    let answer = call(
        &client,
        "send_message",
        json!({"message": "hi", "personality": "warm"}),
    )
    .await;
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    // A top-level null over the call's own request_params clears the personality's and the
    // agent's value too.
    let cleared = json!({"message": "hi", "personality": "warm", "temperature": null,
        "request_params": {"seed": 9}});
    let answer = call(&client, "send_message", cleared).await;
    assert_ne!(answer.is_error, Some(true), "{answer:?}");

    let log = fake.requests();
    assert_eq!(log.len(), 5, "{log:?}");
    assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
    assert_eq!(
        system(&log[0]),
        "Base.\n\nBe terse.",
        "the default personality"
    );
    assert_eq!(
        log[0].body["temperature"], 0.1,
        "the personality's over the agent's"
    );
    assert_eq!(log[0].body["seed"], 3, "the agent's default stays");
    assert_eq!(system(&log[1]), "Base.\n\nBe warm.");
    assert_eq!(
        log[1].body["temperature"], 0.3,
        "the call's own sampling wins"
    );
    assert_eq!(system(&log[2]), "New.\n\nBe terse.\n\nPS.");
    assert_eq!(
        system(&log[3]),
        "Base.\n\nBe warm.",
        "MCP: the same control"
    );
    assert_eq!(log[3].body["temperature"], 0.9);
    assert!(
        log[4].body.get("temperature").is_none(),
        "{:?}",
        log[4].body
    );
    assert_eq!(log[4].body["seed"], 9);

    let unknown = post(&rt, "p-5", json!({"personality": "grumpy"})).await;
    assert_eq!(unknown["status"]["state"], "failed", "{unknown}");
    let why = unknown["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("grumpy") && why.contains("terse, warm"),
        "{why}"
    );
    assert_eq!(fake.requests().len(), 5, "never reached the model");

    let registry: Value = reqwest::get(format!("{}/.well-known/mcp/server.json", rt.url))
        .await
        .expect("registry")
        .json()
        .await
        .expect("JSON");
    let listed = &registry["servers"][0]["_meta"]["dev.daedalus.runtime/personalities"];
    assert_eq!(listed["default"], "terse", "{registry}");
    assert_eq!(
        listed["available"][0],
        json!({"name": "terse", "description": "Short answers"})
    );
    assert_eq!(listed["available"][1]["name"], "warm");
}

#[tokio::test]
async fn the_tools_allowlist_offers_only_its_tools_and_refuses_the_rest_when_called() {
    let fixture = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fx__add".into(), json!({"a": 1, "b": 2})),
            ("fx__echo".into(), json!({"text": "sneaky"})),
        ]),
        Reply::Text("done".into()),
    ]);
    let rt = deployment(&fake, &fixture).await;
    let task = post(&rt, "t-1", json!({"tools_allowlist": ["fx__add"]})).await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let log = fake.requests();
    let offered = tool_names(&log[0]);
    assert!(offered.contains(&"fx__add".to_owned()), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "fx__echo"),
        "only the allowlist: {offered:?}"
    );
    let results = tool_results(&fake, 1);
    assert!(
        results.iter().any(|r| r.contains("not allowed")),
        "{results:?}"
    );
    let called: Vec<String> = fixture.calls().into_iter().map(|c| c.tool).collect();
    assert_eq!(called, ["add"], "the refused call never reached the server");

    let (client, _) = connect(&rt.mcp("a"), None).await;
    let answer = call(
        &client,
        "send_message",
        json!({"message": "hi", "tools_allowlist": ["fx__nope"]}),
    )
    .await;
    assert_eq!(answer.is_error, Some(true), "{answer:?}");
    let text = format!("{answer:?}");
    assert!(text.contains("fx__nope"), "the error names it: {text}");
}

#[tokio::test]
async fn the_send_message_schema_lists_every_control() {
    let fixture = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let rt = deployment(&fake, &fixture).await;
    let (client, _) = connect(&rt.mcp("a"), None).await;
    let tools = client.list_all_tools().await.expect("tools");
    let send = tools
        .iter()
        .find(|t| t.name == "send_message")
        .expect("send_message");
    let properties = send.input_schema.get("properties").expect("properties");
    for key in [
        "personality",
        "tools_allowlist",
        "systemOverride",
        "systemAppend",
        "effort",
    ] {
        assert!(properties.get(key).is_some(), "{key} in {properties:?}");
    }
    // The schema stands on its own (no reference into definitions it does not carry), and
    // it says what the face accepts and refuses.
    let schema = Value::Object((*send.input_schema).clone());
    let validator = jsonschema::validator_for(&schema).expect("the input schema compiles");
    let accepted = json!({
        "message": "hi", "temperature": null, "top_p": 0.5, "stop": ["END"],
        "tool_choice": {"type": "function", "function": {"name": "fx__add"}}, "effort": "xhigh",
        "messages": [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}],
        "tools_allowlist": ["fx__add"], "extra": {"repetition_penalty": 1.1}
    });
    let errors: Vec<String> = validator
        .iter_errors(&accepted)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    for refused in [
        json!({"message": "hi", "messages": [{"role": "robot", "content": "x"}]}),
        json!({"message": "hi", "effort": "extreme"}),
        json!({"message": "hi", "tool_choice": "sometimes"}),
        json!({"message": "hi", "temperature": "hot"}),
    ] {
        assert!(!validator.is_valid(&refused), "{refused}");
    }
}

async fn post_in(rt: &Runtime, id: &str, context: &str, text: &str, metadata: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{}/", rt.url))
        .json(
            &json!({"message": {"messageId": id, "contextId": context, "role": "user",
            "parts": [{"text": text}]}, "metadata": metadata}),
        )
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("a Task")
}

#[tokio::test]
async fn a_messages_override_replaces_the_conversation_and_extra_keys_reach_the_provider() {
    let fixture = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script((0..3).map(|i| Reply::Text(format!("answer {i}"))));
    let rt = deployment(&fake, &fixture).await;
    let history = json!({"messages": [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ], "extra": {"logprobs": true}});
    let first = post_in(&rt, "h-1", "ctx-h", "now this", history).await;
    assert_eq!(first["status"]["state"], "completed", "{first}");
    let second = post_in(&rt, "h-2", "ctx-h", "and then", json!({})).await;
    assert_eq!(second["status"]["state"], "completed", "{second}");

    let log = fake.requests();
    let texts = |i: usize| -> Vec<String> {
        log[i].body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .skip(1)
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(texts(0), ["earlier question", "earlier answer", "now this"]);
    assert_eq!(log[0].body["logprobs"], true, "extra reached the provider");
    assert_eq!(
        texts(1),
        ["and then"],
        "the overridden turn was neither read from nor written to the conversation"
    );

    let clash = post_in(
        &rt,
        "h-3",
        "ctx-x",
        "hi",
        json!({"extra": {"temperature": 2}}),
    )
    .await;
    assert_eq!(clash["status"]["state"], "failed", "{clash}");
    let why = clash["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("extra.temperature"), "{why}");
}
