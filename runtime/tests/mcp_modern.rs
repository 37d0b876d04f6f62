//! The MCP face on 2026-07-28, with the official Python SDK (`mcp` 2.x in `.venv`) pinned to
//! that revision and in `auto` mode (which finds it by `server/discover`): tools, a conversation
//! continued by id with progress and history, the agent's question answered through the SDK's
//! elicitation callback (the multi-round trip), a task polled to completion, a task that asks
//! and is answered by `tasks/update`, and a task canceled mid-turn (the downstream tool's call
//! is abandoned), all without a session. The session is `support::modern` (the Python side is
//! `tests/py/modern_client.py`); `mcp_replicas.rs` runs it against two replicas, and legacy
//! clients on the same endpoint are `mcp_python.rs`. Beside it, with rmcp's client: a question
//! as a legacy session and a 2026-07-28 client each get it, what each revision is offered, and
//! a request whose `Mcp-*` headers disagree with its body.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::json;
use support::mcp_client::{call, connect, text};
use support::modern;
use support::runtime::Runtime;

const KEY: &str = "sk-face";

/// rmcp's client, without a session: it finds 2026-07-28 by `server/discover`.
async fn connect_2026_07_28(url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let discover = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    ().serve_with_lifecycle(
        rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned()),
        discover,
    )
    .await
    .expect("connected statelessly")
}

fn deployment(fake: &FakeLlm, servers: &str, agents: &str) -> String {
    support::runtime::on_fake_openai(&fake.openai_base_url, KEY, "gpt-face", servers, agents)
}

async fn check_modern_session(mode: &str) {
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(modern::KEY, &[modern::MODEL]).await;
    fake.script(modern::script());
    let rt = Runtime::start(&modern::deployment(&fake, &fx)).await;
    let result = modern::drive(mode, &rt.mcp(modern::AGENT), &fx).await;
    modern::check(&result, &fx, &fake).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pinned_to_2026_07_28_does_what_a_session_does_and_more() {
    check_modern_session("2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_in_auto_mode_finds_2026_07_28_by_discovery() {
    check_modern_session("auto").await;
}

/// The agent asks the user (`request_user_input`): a legacy session gets the question as the
/// tool's text, as Daedalus always did; a 2026-07-28 client gets an `InputRequiredResult`
/// (one form elicitation with the question, `requestState` naming the task), and its retry
/// with the answer continues that task, the question and the answer in one conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_text_to_a_session_and_a_round_trip_on_2026_07_28() {
    use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses};
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let ask = || {
        Reply::ToolCalls(vec![(
            "request_user_input".into(),
            json!({"question": "Which city?"}),
        )])
    };
    fake.script([ask(), ask(), Reply::Text("booked Lisbon".into())]);
    let rt = Runtime::start(&deployment(&fake, "{}", "  asker: { instruction: Ask. }\n")).await;
    let url = rt.mcp("asker");

    let (legacy, _) = connect(&url, None).await;
    let asked = call(&legacy, "send_message", json!({"message": "book a trip"})).await;
    assert_ne!(asked.is_error, Some(true));
    assert_eq!(text(&asked), "Which city?");

    let modern = connect_2026_07_28(&url).await;
    let call_params = || {
        CallToolRequestParams::new("send_message").with_arguments(
            json!({"message": "book a trip"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    };
    let CallToolResponse::InputRequired(question) = modern
        .call_tool_once(call_params())
        .await
        .expect("answered")
    else {
        panic!("a question comes back as InputRequiredResult");
    };
    let wire = serde_json::to_value(&question).expect("serializes");
    let (key, form) = wire["inputRequests"]
        .as_object()
        .and_then(|requests| requests.iter().next())
        .expect("one input request");
    assert_eq!(form["method"], "elicitation/create", "{wire}");
    assert_eq!(form["params"]["message"], "Which city?", "{wire}");
    let task_id = question.request_state.clone().expect("requestState");

    let mut retry = call_params();
    retry.request_state = Some(task_id);
    retry.input_responses = Some(InputResponses::from([(
        key.clone(),
        json!({"action": "accept", "content": {"answer": "Lisbon"}}),
    )]));
    let CallToolResponse::Complete(answered) =
        modern.call_tool_once(retry).await.expect("answered")
    else {
        panic!("the retry completes the task");
    };
    assert_eq!(text(&answered), "booked Lisbon");
    let last = &fake.requests()[2].body;
    assert!(
        last.to_string().contains("Which city?") && last.to_string().contains("Lisbon"),
        "the answer continued the task's conversation: {last}"
    );
}

/// What each kind of revision is offered: a legacy session, whose agent never changes under it
/// and whose calls answer when the turn ends, is told neither of tool changes nor of tasks; a
/// 2026-07-28 client (`server/discover`) is told of both.
#[tokio::test]
async fn each_revision_is_offered_what_it_gets() {
    use rmcp::model::{ProtocolVersion, TASKS_EXTENSION_ID};
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let rt = Runtime::start(&deployment(
        &fake,
        "{}",
        "  plain: { instruction: Answer. }\n",
    ))
    .await;
    let url = rt.mcp("plain");
    let (legacy, _) = connect(&url, None).await;
    let offered = legacy.peer_info().expect("initialized");
    assert_eq!(offered.protocol_version, ProtocolVersion::V_2025_11_25);
    let tools = offered.capabilities.tools.clone().expect("tools");
    assert_eq!(tools.list_changed, None);
    assert!(!offered.capabilities.supports_tasks());

    let modern = connect_2026_07_28(&url).await;
    let offered = modern.peer_info().expect("discovered");
    assert_eq!(offered.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        offered
            .capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed),
        Some(true)
    );
    assert!(
        offered
            .capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION_ID))
    );
}

/// On 2026-07-28 the `Mcp-Method` and `Mcp-Name` headers must say what the body says: a
/// request whose headers disagree with it is refused, and runs nothing.
#[tokio::test]
async fn a_2026_07_28_request_whose_headers_disagree_with_its_body_is_refused() {
    let fake = FakeLlm::start(KEY, &["gpt-face"]).await;
    let rt = Runtime::start(&deployment(
        &fake,
        "{}",
        "  plain: { instruction: Answer. }\n",
    ))
    .await;
    let send = |method: &'static str, name: &'static str| {
        let url = rt.mcp("plain");
        async move {
            let response = reqwest::Client::new()
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", method)
                .header("mcp-name", name)
                .json(
                    &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                    "name": "send_message", "arguments": {"message": "hi"},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {}
                    }}}),
                )
                .send()
                .await
                .expect("answered");
            let status = response.status().as_u16();
            (status, response.text().await.expect("a body"))
        }
    };
    let (status, body) = send("tools/call", "get_health").await;
    assert!(status >= 400 && body.contains("error"), "{status} {body}");
    let (status, body) = send("tools/list", "send_message").await;
    assert!(status >= 400 && body.contains("error"), "{status} {body}");
    assert!(fake.requests().is_empty(), "nothing ran");
    let (status, body) = send("tools/call", "send_message").await;
    assert_eq!(status, 200, "{body}");
}
