//! What both proxy benchmarks share: the task body, the JetStream floor worker, and a batch of
//! tasks published pipelined and waited for.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::context::PublishAckFuture;
use daedalus_proxy::config::ProxyConfig;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// The proxy's configuration for `agent`, every setting but the addresses at its default.
pub(crate) fn proxy_config(agent: &str, nats_url: &str, runtime_url: &str) -> ProxyConfig {
    ProxyConfig::for_agent(agent, nats_url, runtime_url).expect("a valid benchmark configuration")
}

/// Task `i` for `agent`: a small `SendMessageRequest`.
pub(crate) fn body(i: usize, agent: &str) -> Vec<u8> {
    format!(r#"{{"message":{{"messageId":"{agent}-m{i}","taskId":"{agent}-t{i}","role":"user","parts":[{{"text":"benchmark payload {i}"}}]}}}}"#).into_bytes()
}

/// The floor of the proxy's pattern without HTTP: pull one, publish a result (its ack
/// awaited), confirmed ack; until `stop`.
pub(crate) async fn floor_worker(js: Context, agent: String, stop: CancellationToken) {
    let stream = js.get_stream("AGENT_TASKS").await.expect("stream");
    let consumer = stream
        .get_or_create_consumer::<pull::Config>(
            &format!("floor-{agent}"),
            pull::Config {
                durable_name: Some(format!("floor-{agent}")),
                filter_subject: format!("agent.tasks.{agent}"),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            },
        )
        .await
        .expect("consumer");
    while !stop.is_cancelled() {
        let mut batch = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(1))
            .messages()
            .await
            .expect("pull");
        if let Some(Ok(m)) = batch.next().await {
            let subject = m.subject.replace("agent.tasks.", "agent.results.") + ".r";
            let mut headers = HeaderMap::new();
            headers.insert(
                "Nats-Msg-Id",
                format!("result:{}", m.info().expect("info").stream_sequence).as_str(),
            );
            js.publish_with_headers(subject, headers, m.payload.clone())
                .await
                .expect("publish")
                .await
                .expect("ack");
            m.double_ack().await.expect("confirmed ack");
        }
    }
}

/// Publishes `count` tasks for `agent`, pipelined: at most
/// `ACKS_IN_FLIGHT` publish acks outstanding (async-nats stops publishing at its own limit), every
/// one awaited.
pub(crate) async fn publish_tasks(js: &Context, agent: &str, count: usize) {
    const ACKS_IN_FLIGHT: usize = 1_000;
    let mut acks: VecDeque<PublishAckFuture> = VecDeque::with_capacity(ACKS_IN_FLIGHT);
    for i in 0..count {
        if acks.len() == ACKS_IN_FLIGHT
            && let Some(ack) = acks.pop_front()
        {
            ack.await.expect("ack");
        }
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{agent}-m{i}").as_str());
        acks.push_back(
            js.publish_with_headers(
                format!("agent.tasks.{agent}"),
                headers,
                body(i, agent).into(),
            )
            .await
            .expect("publish"),
        );
    }
    for ack in acks {
        ack.await.expect("ack");
    }
}

/// Waits for `count` messages on `results`.
pub(crate) async fn await_results(results: &mut async_nats::Subscriber, count: usize) {
    for _ in 0..count {
        tokio::time::timeout(Duration::from_mins(2), results.next())
            .await
            .expect("a result within two minutes")
            .expect("subscription open");
    }
}

/// Publishes `count` tasks pipelined and waits for all their results; how long that took.
pub(crate) async fn run_batch(
    client: &async_nats::Client,
    js: &Context,
    agent: &str,
    count: usize,
) -> Duration {
    let mut results = client
        .subscribe(format!("agent.results.{agent}.>"))
        .await
        .expect("subscribe");
    client.flush().await.expect("flush");
    let started = Instant::now();
    publish_tasks(js, agent, count).await;
    await_results(&mut results, count).await;
    started.elapsed()
}

/// Waits until the durable consumer `name` exists on the task stream.
pub(crate) async fn wait_for_consumer(js: &Context, name: &str) {
    for _ in 0..400 {
        if let Ok(s) = js.get_stream("AGENT_TASKS").await
            && s.consumer_info(name).await.is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("consumer {name} never appeared");
}
