//! Our MCP client against a server we did not write: the agent loop over a reference server
//! built on the official Python `mcp` SDK (`tests/py/reference_mcp_server.py`, served over
//! Streamable HTTP from the `.venv` that `.ci/setup` installs). Its tools are offered to the
//! model with their typed schemas; plain, structured, progress-reporting, failing and slow
//! tools each bring back what the model needs to read.

mod support;

use daedalus_fake_llm::{FakeLlm, Logged, Reply};
use serde_json::{Value, json};
use support::python::PythonServer;
use support::runtime::Runtime;

const KEY: &str = "sk-reference";

/// The reference server on a port of its own choosing, killed on drop.
async fn reference_server() -> PythonServer {
    PythonServer::start("reference_mcp_server.py", &[]).await
}

/// An agent `a` on the OpenAI-compatible fake whose one server is `py` (with `extra` keys).
fn deployment(fake: &FakeLlm, server: &PythonServer, extra: &str) -> String {
    format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    py: {{ url: \"{}\"{extra} }}\n\
         agents:\n  a: {{ instruction: Use the tools., servers: [py] }}\n",
        fake.openai_base_url,
        server.mcp_url()
    )
}

/// Sends one task through `POST /` and returns the Task.
async fn ask(rt: &Runtime, text: &str) -> Value {
    let body = json!({"message": {"messageId": "m-1", "role": "user", "parts": [{"text": text}]}});
    reqwest::Client::new()
        .post(format!("{}/", rt.url))
        .json(&body)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON")
}

/// The tool messages of the model request `index`, in order.
fn tool_results(log: &[Logged], index: usize) -> Vec<String> {
    log[index].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().expect("text content").to_owned())
        .collect()
}

fn assert_all_accepted(log: &[Logged]) {
    let refused: Vec<_> = log.iter().filter_map(|r| r.refused.as_ref()).collect();
    assert!(refused.is_empty(), "the strict fake refused: {refused:?}");
}

#[tokio::test]
async fn the_loop_offers_the_python_servers_tools_with_their_schemas_and_uses_them() {
    let server = reference_server().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("py__add".into(), json!({"a": 2, "b": 3})),
            ("py__echo".into(), json!({"message": "hello there"})),
        ]),
        Reply::Text("2 + 3 = 5".into()),
    ]);
    let rt = Runtime::start(&deployment(&fake, &server, "")).await;

    let task = ask(&rt, "what is 2 + 3?").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "2 + 3 = 5");

    let log = fake.requests();
    assert_all_accepted(&log);
    let tools = log[0].body["tools"].as_array().expect("tools offered");
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in [
        "py__add",
        "py__echo",
        "py__divide",
        "py__count",
        "py__sleep",
    ] {
        assert!(names.contains(&tool), "{tool} is offered: {names:?}");
    }
    let add = tools
        .iter()
        .find(|t| t["function"]["name"] == "py__add")
        .expect("add");
    let parameters = &add["function"]["parameters"];
    assert_eq!(parameters["properties"]["a"]["type"], "integer", "{add}");
    assert_eq!(parameters["required"], json!(["a", "b"]), "{add}");
    assert_eq!(
        add["function"]["description"], "Adds two integers.",
        "the docstring is the description"
    );
    assert_eq!(
        tool_results(&log, 1),
        ["5", "Echo: hello there"],
        "each result answers its call, in order"
    );
}

#[tokio::test]
async fn structured_output_and_a_tool_error_reach_the_model_and_the_turn_goes_on() {
    let server = reference_server().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("py__divide".into(), json!({"dividend": 17, "divisor": 5})),
            ("py__divide".into(), json!({"dividend": 1, "divisor": 0})),
        ]),
        Reply::Text("17 / 5 = 3 remainder 2; 1 / 0 is undefined".into()),
    ]);
    let rt = Runtime::start(&deployment(&fake, &server, "")).await;

    let task = ask(&rt, "divide").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");

    let log = fake.requests();
    assert_all_accepted(&log);
    let results = tool_results(&log, 1);
    let division: Value = serde_json::from_str(&results[0]).expect("the structured result");
    assert_eq!(division, json!({"quotient": 3, "remainder": 2}));
    assert!(
        results[1].contains("cannot divide by zero"),
        "the server's reason reaches the model: {results:?}"
    );
}

#[tokio::test]
async fn the_anthropic_provider_marks_a_python_tool_error_as_an_error() {
    let server = reference_server().await;
    let fake = FakeLlm::start(KEY, &["claude-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![(
            "py__divide".into(),
            json!({"dividend": 1, "divisor": 0}),
        )]),
        Reply::Text("undefined".into()),
    ]);
    let yaml = format!(
        "default_model: anthropic.claude-fake\nanthropic: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    py: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Divide., servers: [py] }}\n",
        fake.anthropic_base_url,
        server.mcp_url()
    );
    let rt = Runtime::start(&yaml).await;

    let task = ask(&rt, "1 / 0?").await;
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "undefined",
        "{task}"
    );
    let log = fake.requests();
    assert_all_accepted(&log);
    let result = &log[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result.to_string().contains("cannot divide by zero"),
        "{result}"
    );
}

#[tokio::test]
async fn a_tool_that_reports_progress_answers_through_its_notifications() {
    let server = reference_server().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("py__count".into(), json!({"to": 5}))]),
        Reply::Text("counted".into()),
    ]);
    let rt = Runtime::start(&deployment(&fake, &server, "")).await;

    let task = ask(&rt, "count to five").await;
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let log = fake.requests();
    assert_all_accepted(&log);
    assert_eq!(
        tool_results(&log, 1),
        ["counted to 5 with 5 progress notifications"],
        "the client asked for progress, the server sent five notifications, the answer came after them"
    );
}

#[tokio::test]
async fn a_slow_tool_past_its_read_timeout_is_abandoned_and_the_server_still_answers() {
    let server = reference_server().await;
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::ToolCalls(vec![("py__sleep".into(), json!({"seconds": 30}))]),
        Reply::ToolCalls(vec![("py__sleep".into(), json!({"seconds": 0.01}))]),
        Reply::Text("done".into()),
    ]);
    let rt = Runtime::start(&deployment(&fake, &server, ", read_timeout_seconds: 0.5")).await;

    let task = ask(&rt, "sleep").await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "done", "{task}");
    let log = fake.requests();
    assert_all_accepted(&log);
    let abandoned = &tool_results(&log, 1)[0];
    assert!(
        abandoned.contains("read_timeout_seconds"),
        "the model reads why the call gave no answer: {abandoned}"
    );
    assert_eq!(
        tool_results(&log, 2).last().map(String::as_str),
        Some("slept 0.01 s"),
        "the next call on the same server is answered"
    );
}
