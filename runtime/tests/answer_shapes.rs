//! Every shape a real agent (the LLM loop on the strict fake LLM, its tools on a real MCP
//! server) answers with, through the A2A JSON-RPC binding and the contract binding: files an
//! MCP tool returned (an embedded resource, a resource link), a JSON answer as a data part, a
//! Message reply, and a refusal as a rejected task.

mod support;

use daedalus_contract::Schema;
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::A2aClient;
use serde_json::{Value, json};
use support::runtime::{Runtime, on_fake_openai};

const KEY: &str = "sk-shapes";

/// A runtime serving one agent defined by `agent` (YAML of its keys), on the fake LLM, with
/// the MCP fixture as server `fixture`.
async fn serving(fake: &FakeLlm, fixture: &McpFixture, agent: &str) -> (Runtime, A2aClient) {
    let yaml = on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-fake",
        &format!("    fixture: {{ url: \"{}\" }}\n", fixture.url()),
        &format!("  shaper: {{ instruction: Answer., {agent} }}\n"),
    );
    let rt = Runtime::start(&yaml).await;
    let client = A2aClient::new(format!("{}/", rt.url));
    (rt, client)
}

fn send(text: &str) -> Value {
    json!({"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER",
        "parts": [{"text": text}]}})
}

#[tokio::test]
async fn files_an_mcp_tool_returns_reach_the_caller_as_file_parts() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let fixture = McpFixture::start().await;
    fake.script([
        Reply::ToolCalls(vec![("fixture__report".into(), json!({}))]),
        Reply::Text("The report is attached.".into()),
    ]);
    let (_rt, client) = serving(&fake, &fixture, "servers: [fixture]").await;
    let answer = client.call("SendMessage", send("report please")).await;
    let task = &answer["result"]["task"];
    Schema::A2aV1Task.validate(task).unwrap();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"text": "The report is attached."}])
    );
    let files = &task["artifacts"][1];
    assert_eq!(files["name"], "fixture__report");
    assert_eq!(
        files["parts"],
        json!([
            // "all good", embedded as a text resource.
            {"raw": "YWxsIGdvb2Q=", "mediaType": "text/plain", "filename": "summary.txt"},
            {"url": "https://example.com/data.csv", "mediaType": "text/csv", "filename": "data.csv"},
        ])
    );
    // The model read a line about each file, not its bytes.
    let second = fake.requests()[1].body["messages"].to_string();
    assert!(
        second.contains("[file summary.txt (text/plain, 8 bytes), attached to the answer]")
            && second.contains("[a link to data.csv (https://example.com/data.csv)"),
        "{second}"
    );
}

#[tokio::test]
async fn an_agent_asked_for_json_answers_with_a_data_part_and_fails_on_anything_else() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let fixture = McpFixture::start().await;
    fake.script([
        Reply::Text(r#"{"city": "Lyon", "population": 522250}"#.into()),
        Reply::Text("Lyon has about half a million people.".into()),
    ]);
    let format = "request_params: { response_format: { type: json_schema, json_schema: { name: city, \
                  schema: { type: object, properties: { city: { type: string }, \
                  population: { type: integer } } } } } }";
    let (rt, client) = serving(&fake, &fixture, format).await;
    let answer = client.call("SendMessage", send("Lyon?")).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"data": {"city": "Lyon", "population": 522_250}, "mediaType": "application/json"}])
    );
    assert_eq!(
        fake.requests()[0].body["response_format"]["type"],
        "json_schema",
        "the model was asked for JSON"
    );
    // The contract binding carries it too; a model that answers prose fails, saying why.
    let task = support::post_text(&rt.url, None, "m-prose", "Lyon again?").await;
    assert_eq!(task["status"]["state"], "failed", "{task}");
    assert!(
        task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("asked for JSON"),
        "{task}"
    );
}

#[tokio::test]
async fn an_agent_that_replies_with_messages_answers_a_message_and_the_contract_a_task() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let fixture = McpFixture::start().await;
    fake.script([
        Reply::Text("Hello there.".into()),
        Reply::Text("Hello again.".into()),
    ]);
    let (rt, client) = serving(&fake, &fixture, "reply_as: message").await;
    let answer = client.call("SendMessage", send("hi")).await;
    let reply = &answer["result"]["message"];
    Schema::A2aV1Message.validate(reply).unwrap();
    assert_eq!(reply["role"], "ROLE_AGENT");
    assert_eq!(reply["parts"], json!([{"text": "Hello there."}]));
    let task = support::post_text(&rt.url, None, "m-contract", "hi").await;
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello again.");
}

#[tokio::test]
async fn an_agent_that_may_decline_ends_a_refused_request_rejected() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let fixture = McpFixture::start().await;
    fake.script([Reply::ToolCalls(vec![(
        "decline_request".into(),
        json!({"reason": "I only answer questions about the weather."}),
    )])]);
    let (_rt, client) = serving(&fake, &fixture, "may_decline: true").await;
    let answer = client.call("SendMessage", send("write my essay")).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{answer}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "I only answer questions about the weather."
    );
    let offered = fake.requests()[0].body["tools"].to_string();
    assert!(offered.contains("decline_request"), "{offered}");
}
