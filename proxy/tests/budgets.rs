//! Budgets through the pod: a real runtime whose `budgets:` block lets one turn run at a time
//! (`concurrent_turns: 1`), a slow scripted model, and two tasks published at once. The second
//! is refused for its budget (`429`, `Retry-After: 1`), waits in the stream without spending a
//! delivery, and completes once the first is done: two results, both `completed`.

mod support;

use std::time::Duration;

use daedalus_contract::TaskState;
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::{NatsServer, RuntimeProcess};
use support::*;

const KEY: &str = "sk-pod-budget";
const MODEL: &str = "gpt-pod-budget";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_refused_for_its_budget_waits_and_completes_when_there_is_room() {
    let agent = "budgeted";
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([
        Reply::Delayed(
            Duration::from_millis(2_500),
            Box::new(Reply::Text("first".into())),
        ),
        Reply::Text("second".into()),
    ]);
    let dir = tempfile::tempdir().expect("a dir");
    let yaml = dir.path().join("agents.yaml");
    std::fs::write(
        &yaml,
        format!(
            "default_model: openai.{MODEL}\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\nagents:\n  {agent}: {{ instruction: Answer. }}\nbudgets:\n  default: {{ concurrent_turns: 1 }}\n",
            fake.openai_base_url,
        ),
    )
    .expect("agents.yaml written");
    let nats = NatsServer::start();
    let runtime =
        RuntimeProcess::start_with(agent, &[("AGENTS_CONFIG", yaml.to_str().expect("utf-8"))])
            .await;
    let mut config = proxy_config(agent, &nats.url(), &runtime.url());
    config.max_deliver = 2;
    config.concurrency = 4;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(&js, agent, "m-1", task_body("m-1", Some("t-1"), "one")).await;
    publish(&js, agent, "m-2", task_body("m-2", Some("t-2"), "two")).await;

    let results = wait_results(&js, agent, 2, Duration::from_mins(1)).await;
    assert_eq!(results.len(), 2, "two results: {results:?}");
    for (_, _, task) in &results {
        assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
    }
    let metrics = proxy.metrics().await;
    assert!(
        metric(&metrics, "daedalus_proxy_tasks_budget_waits_total") >= 1,
        "the second task waited for its budget"
    );
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_retried_total"), 0);
    assert_eq!(fake.requests().len(), 2, "each task asked the model once");
    wait_tasks_left(&js, 0).await;
    proxy.shutdown().await.expect("a clean shutdown");
}
