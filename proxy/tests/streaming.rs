//! A runtime whose card says it streams (contract level 3): the proxy asks for each task's
//! event stream and relays every event, as it arrives, to `agent.events.<agent>.<task-token>`,
//! then publishes the Task the stream rebuilds as the result, with the usual guarantees.
//!
//! The runtime is the real one, its model the strict fake LLM held at a gate mid-answer: what
//! a subscriber sees before the model finished is told by the gate, not by time.

mod support;

use std::time::Duration;

use daedalus_contract::{StreamEvent, TaskRebuilder, TaskState, read};
use daedalus_fake_llm::{FakeLlm, Gate, Reply};
use daedalus_test_kit::Runtime;
use futures::StreamExt;
use support::{NatsServer, Proxy, client, proxy_config, publish, results, task_body};

const KEY: &str = "sk-proxy-stream";

/// The real runtime serving agent `agent` on the fake LLM.
async fn streaming_runtime(agent: &str, fake: &FakeLlm) -> Runtime {
    Runtime::start(&format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         agents:\n  {agent}: {{ instruction: Answer. }}\n",
        fake.openai_base_url
    ))
    .await
}

#[tokio::test]
async fn a_subscriber_sees_the_answer_stream_before_the_result_which_equals_the_plain_answer() {
    let nats = NatsServer::start();
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let gate = Gate::new();
    fake.script([Reply::Paused {
        before: "Streams ".into(),
        after: "flow to NATS.".into(),
        gate: gate.clone(),
    }]);
    let runtime = streaming_runtime("streamer", &fake).await;
    let proxy = Proxy::start(proxy_config("streamer", &nats.url(), &runtime.url)).await;
    let (nats_client, js) = client(&nats).await;
    let mut events = nats_client
        .subscribe("agent.events.streamer.>")
        .await
        .expect("subscribe");
    nats_client.flush().await.expect("flush");

    let duplicate = publish(
        &js,
        "streamer",
        "m-s1",
        task_body("m-s1", None, "tell me about streams"),
    )
    .await;
    assert!(!duplicate);
    // Events up to the first words, while the model is held at its gate.
    let mut seen = Vec::new();
    let mut subjects = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("an event within 20 s")
            .expect("the subscription is open");
        subjects.push(message.subject.to_string());
        let event: StreamEvent = read::from_slice(&message.payload).expect("a stream event");
        let first_words = matches!(&event, StreamEvent::ArtifactUpdate(u)
            if u.artifact.parts[0].as_text().is_some_and(|t| t.contains("Streams")));
        seen.push(event);
        if first_words {
            break;
        }
    }
    assert!(
        subjects.iter().all(|s| s == "agent.events.streamer.m-s1"),
        "{subjects:?}"
    );
    assert!(matches!(seen[0], StreamEvent::Task(_)), "{seen:?}");
    assert!(
        results(&js, "streamer").await.is_empty(),
        "no result before the model finished"
    );

    gate.open();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the rest of the stream")
            .expect("open");
        let event: StreamEvent = read::from_slice(&message.payload).expect("a stream event");
        let last = matches!(&event, StreamEvent::StatusUpdate(u) if u.r#final);
        seen.push(event);
        if last {
            break;
        }
    }
    let mut rebuilt = TaskRebuilder::new();
    for event in &seen {
        rebuilt.apply(event).expect("the relayed stream rebuilds");
    }
    let rebuilt = rebuilt.into_task().expect("a task");

    let stored = loop {
        let now = results(&js, "streamer").await;
        if let Some((_, _, task)) = now.into_iter().next() {
            break task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stored.status.state, TaskState::Completed);
    assert_eq!(stored.artifacts, rebuilt.artifacts);
    // The runtime's own answer without streaming (a replay of the same message).
    let plain: daedalus_contract::Task = read::from_slice(
        &reqwest::Client::new()
            .post(format!("{}/", runtime.url))
            .body(task_body("m-s1", None, "tell me about streams"))
            .header("content-type", "application/json")
            .send()
            .await
            .expect("sent")
            .bytes()
            .await
            .expect("body"),
    )
    .expect("a Task");
    assert_eq!(stored.artifacts, plain.artifacts);
    assert_eq!(
        stored.artifacts[0].parts[0].as_text(),
        Some("Streams flow to NATS.")
    );
    assert!(proxy.metrics().await.contains("events_relayed_total"));
    proxy.shutdown().await.expect("clean stop");
}

#[tokio::test]
async fn with_stream_tasks_never_nothing_is_relayed_and_the_result_is_the_same() {
    let nats = NatsServer::start();
    let (runtime, _stop) = support::real_runtime("quiet").await;
    let mut config = proxy_config("quiet", &nats.url(), &runtime);
    config.stream_tasks = daedalus_proxy::config::StreamTasks::Never;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "quiet", "m-q1", task_body("m-q1", None, "no stream")).await;
    let found = support::wait_results(&js, "quiet", 1, Duration::from_secs(20)).await;
    let (_, _, task) = &found[0];
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.artifacts[0].parts[0].as_text(), Some("no stream"));
    let metrics = proxy.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("daedalus_proxy_events_relayed_total 0")),
        "{metrics}"
    );
    proxy.shutdown().await.expect("clean stop");
}
