//! One turn at a time per conversation, whichever face it comes through, and each face's
//! conversations out of the others' reach: concurrent tool-calling turns on one `contextId`
//! leave a history the strict fake LLM accepts, and an A2A client naming `mcp/<agent>` gets a
//! conversation of its own, not the MCP face's.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::mcp_client::{call, connect};
use support::runtime::Runtime;

const KEY: &str = "sk-conv";

async fn post(url: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{url}/"))
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

fn message(id: &str, task: &str, context: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "taskId": task, "contextId": context, "role": "user",
                       "parts": [{"text": text}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tool_calling_turns_on_one_context_never_interleave() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-conv"]).await;
    // Served in arrival order: correct only if each turn's two requests come together.
    fake.script([
        Reply::ToolCalls(vec![("fx__slow".into(), json!({"ms": 300}))]),
        Reply::Text("first done".into()),
        Reply::ToolCalls(vec![("fx__slow".into(), json!({"ms": 300}))]),
        Reply::Text("second done".into()),
        Reply::Text("third done".into()),
    ]);
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-conv",
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  a: { instruction: Work., servers: [fx] }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let (one, two) = tokio::join!(
        post(&rt.url, message("m-1", "t-1", "shared-ctx", "one")),
        post(&rt.url, message("m-2", "t-2", "shared-ctx", "two")),
    );
    for task in [&one, &two] {
        assert_eq!(task["status"]["state"], "completed", "{task}");
    }
    let third = post(&rt.url, message("m-3", "t-3", "shared-ctx", "three")).await;
    assert_eq!(
        third["artifacts"][0]["parts"][0]["text"], "third done",
        "{third}"
    );
    let log = fake.requests();
    let refused: Vec<_> = log.iter().filter_map(|r| r.refused.as_ref()).collect();
    assert!(refused.is_empty(), "the strict fake refused: {refused:?}");
    // The third turn saw both earlier turns whole: each call right before its result.
    let messages = log[4].body["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system")
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_context_named_mcp_agent_cannot_see_the_mcp_face_s_conversation() {
    let fake = FakeLlm::start(KEY, &["gpt-conv"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: Vec::new(),
        text: "noted".into(),
        ..Default::default()
    });
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-conv",
        "{}",
        "  common: { instruction: Listen., instance_scope: shared }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("common"), None).await;
    call(
        &client,
        "send_message",
        json!({"message": "the vault code is 4711"}),
    )
    .await;

    let mut request = message("m-x", "t-x", "mcp/common", "what did they say?");
    request["configuration"] = json!({"historyLength": 10});
    let task = post(&rt.url, request).await;
    assert_eq!(
        task["contextId"], "mcp/common",
        "the client's id comes back"
    );
    assert!(
        !task.to_string().contains("4711"),
        "the MCP conversation leaked into the A2A task: {task}"
    );
    let history = task["history"].as_array().expect("history");
    assert_eq!(
        history.len(),
        2,
        "only this conversation's own turn: {task}"
    );
    assert!(history.iter().all(|m| m["contextId"] == "mcp/common"));
    assert_eq!(
        history[0]["messageId"], "m-x",
        "the user's message keeps the id it was sent with"
    );
    let last = fake.requests().last().cloned().expect("a model request");
    assert!(
        !last.body.to_string().contains("4711"),
        "the model saw the MCP conversation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_and_an_mcp_call_at_once_each_keep_their_conversation_whole() {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &["gpt-conv"]).await;
    // Every turn calls a tool, then answers: two requests per turn, from any conversation.
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: vec!["fx__slow".into()],
        text: "done {n}".into(),
        ..Default::default()
    });
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-conv",
        &format!("    fx: {{ url: \"{}\" }}", fx.url()),
        "  a: { instruction: Work., servers: [fx], instance_scope: shared }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let (client, _) = connect(&rt.mcp("a"), None).await;
    for round in 1..=2 {
        let (task, result) = tokio::join!(
            post(
                &rt.url,
                message(
                    &format!("m-{round}"),
                    &format!("t-{round}"),
                    "ctx-1",
                    &format!("post {round}")
                )
            ),
            call(
                &client,
                "send_message",
                json!({"message": format!("mcp {round}")})
            ),
        );
        assert_eq!(task["status"]["state"], "completed", "{task}");
        assert_eq!(result.is_error, Some(false), "{result:?}");
    }
    let log = fake.requests();
    assert_eq!(log.len(), 8, "two requests per turn, four turns");
    let refused: Vec<_> = log.iter().filter_map(|r| r.refused.as_ref()).collect();
    assert!(refused.is_empty(), "the strict fake refused: {refused:?}");
    // Each request carries one face's conversation only, every tool call next to its result.
    for request in &log {
        let users: Vec<String> = request.body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .collect();
        let from_post = users.iter().filter(|u| u.contains("post")).count();
        assert!(
            from_post == 0 || from_post == users.len(),
            "one request mixes both faces' turns: {users:?}"
        );
    }
    // And each conversation went on: its second turn saw its first.
    for face in ["post", "mcp"] {
        let continued = log.iter().any(|r| {
            let text = r.body["messages"].to_string();
            text.contains(&format!("{face} 1")) && text.contains(&format!("{face} 2"))
        });
        assert!(continued, "the {face} conversation went on");
    }
}

#[tokio::test]
async fn a_per_call_sampling_value_of_the_wrong_type_never_reaches_the_provider() {
    let fake = FakeLlm::start(KEY, &["gpt-conv"]).await;
    fake.script([Reply::Text("cool".into())]);
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-conv",
        "{}",
        "  a: { instruction: Answer. }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let mut request = message("m-1", "t-1", "c-1", "hello");
    request["metadata"] = json!({"request_params": {"temperature": "hot"}});
    let task = post(&rt.url, request).await;
    assert_eq!(task["status"]["state"], "failed", "{task}");
    assert!(
        task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("request_params.temperature")),
        "{task}"
    );
    assert!(fake.requests().is_empty(), "nothing reached the provider");

    let (client, _) = connect(&rt.mcp("a"), None).await;
    let result = call(
        &client,
        "send_message",
        json!({"message": "hi", "temperature": "hot"}),
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    assert!(support::mcp_client::text(&result).contains("temperature"));
    assert!(fake.requests().is_empty(), "nothing reached the provider");
}
