//! Durable turns through the pod: a task published on NATS, its runtime (a real process on a
//! SQLite task store) SIGKILLed in the middle of the turn's model calls and started again on
//! the same port. The proxy retries the task; the restarted runtime resumes the turn from its
//! last checkpoint and answers the redelivery from it: one result, `completed`, and the model
//! is not asked again for the steps completed before the kill (a scripted LLM and a real MCP
//! server count them).

mod support;

use std::time::Duration;

use daedalus_contract::TaskState;
use daedalus_fake_llm::{FakeLlm, Gate};
use daedalus_mcp_fixture::McpFixture;
use daedalus_test_kit::{
    NatsServer, RuntimeProcess, SUMS, script_a_turn_cut_at_step_three, wait_until,
};
use support::*;

const KEY: &str = "sk-pod";
const MODEL: &str = "gpt-pod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_runtime_is_killed_mid_turn_completes_once_without_repeating_a_step() {
    let agent = "durable";
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    let never = Gate::new();
    script_a_turn_cut_at_step_three(&fake, "fx", &never);
    let dir = tempfile::tempdir().expect("a dir");
    let yaml = dir.path().join("agents.yaml");
    std::fs::write(
        &yaml,
        format!(
            "default_model: openai.{MODEL}\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\nmcp:\n  servers:\n    fx: {{ url: \"{}\" }}\nagents:\n  {agent}: {{ instruction: Add., servers: [fx] }}\n",
            fake.openai_base_url,
            fx.url()
        ),
    )
    .expect("agents.yaml written");
    let nats = NatsServer::start();
    // The task store in the runtime's working directory, which its restart keeps.
    let mut runtime = RuntimeProcess::start_with(
        agent,
        &[
            ("AGENTS_CONFIG", yaml.to_str().expect("utf-8")),
            ("TASKS_DB", "tasks.sqlite"),
        ],
    )
    .await;
    let mut config = proxy_config(agent, &nats.url(), &runtime.url());
    config.max_deliver = 10;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        agent,
        "m-1",
        task_body("m-1", Some("t-1"), "add 1+1, 2+2, 3+3"),
    )
    .await;

    wait_until("the third model call", Duration::from_secs(30), || {
        let asked = fake.requests().len();
        async move { asked >= 3 }
    })
    .await;
    runtime.kill();
    runtime.launch().await;

    let results = wait_results(&js, agent, 1, Duration::from_mins(1)).await;
    assert_eq!(results.len(), 1, "one result: {results:?}");
    let (_, _, task) = &results[0];
    assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    assert_eq!(task.artifacts[0].parts[0].as_text(), Some(SUMS));
    assert_eq!(
        fake.requests().len(),
        5,
        "steps 1 and 2 once, step 3 twice (it was in flight), step 4 once"
    );
    let adds = fx.calls().iter().filter(|c| c.tool == "add").count();
    assert_eq!(adds, 3, "each tool call was made once");
    never.open();
    proxy.shutdown().await.expect("a clean shutdown");
}
