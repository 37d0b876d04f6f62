//! The MCP face on 2026-07-28, with the official Python SDK (`mcp` 2.x in `.venv`) pinned to
//! that revision and in `auto` mode (which finds it by `server/discover`): tools, a conversation
//! continued by id with progress and history, the agent's question answered through the SDK's
//! elicitation callback (the multi-round trip), a task polled to completion, a task that asks
//! and is answered by `tasks/update`, and a task canceled mid-turn (the downstream tool's call
//! is abandoned), all without a session. The session is `support::modern` (the Python side is
//! `tests/py/modern_client.py`); `mcp_replicas.rs` runs it against two replicas, and legacy
//! clients on the same endpoint are `mcp_python.rs`.

mod support;

use daedalus_fake_llm::FakeLlm;
use daedalus_mcp_fixture::McpFixture;
use support::modern;
use support::runtime::Runtime;

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
