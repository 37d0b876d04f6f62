//! Time to the first text of an answer, hop by hop, in one run (contract level 3):
//!
//! 1. the strict fake LLM alone: `POST /v1/chat/completions` with `stream: true`, until the
//!    first chunk that carries text;
//! 2. through the runtime: `POST /` with `Accept: text/event-stream`, until the first
//!    `artifactUpdate`;
//! 3. through the proxy and NATS: a task published to `agent.tasks.<agent>`, until the first
//!    `artifactUpdate` relayed to `agent.events.<agent>.<task-token>`.
//!
//! Each hop's added time is its p50 less the p50 of the hop before it. Tasks run one at a
//! time. Run: `cargo bench -p daedalus-proxy --bench first_event` (needs `bash .ci/setup`).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

#[allow(dead_code, reason = "each benchmark uses a part of the shared module")]
mod common;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use common::proxy_config;
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::{NatsServer, Runtime, SseEvents};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-first-event";
/// Samples per hop.
const SAMPLES: usize = 300;
const ANSWER: &str = "The first words of a longer answer that keeps on streaming for a while.";

/// p50 and p90 of `samples`, in milliseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an index"
        )]
        let i = i as usize;
        samples[i].as_secs_f64() * 1e3
    };
    (at(0.5), at(0.9))
}

/// Time to the fake's first chunk with text, asked directly.
async fn fake_alone(http: &reqwest::Client, fake: &FakeLlm) -> Duration {
    let started = Instant::now();
    let response = http
        .post(format!("{}/chat/completions", fake.openai_base_url))
        .bearer_auth(KEY)
        .json(&json!({"model": "gpt-fake", "messages": [{"role": "user", "content": "go"}], "stream": true}))
        .send()
        .await
        .expect("the fake answers");
    assert_eq!(response.status(), 200);
    let mut events = SseEvents::of(response);
    while let Some(chunk) = events.next_json().await {
        if chunk["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
        {
            return started.elapsed();
        }
    }
    panic!("the fake's stream held no text");
}

/// Time to the runtime's first `artifactUpdate`.
async fn through_runtime(http: &reqwest::Client, runtime: &Runtime, i: usize) -> Duration {
    let body = json!({"message": {"messageId": format!("rt-{i}"), "role": "user", "parts": [{"text": "go"}]}});
    let started = Instant::now();
    let response = http
        .post(format!("{}/", runtime.url))
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .expect("the runtime answers");
    let mut events = SseEvents::of(response);
    let mut first = None;
    while let Some(event) = events.next_json().await {
        if first.is_none() && event.get("artifactUpdate").is_some() {
            first = Some(started.elapsed());
        }
    }
    first.expect("the stream held a chunk")
}

/// Time to the first `artifactUpdate` relayed by the proxy.
async fn through_proxy(
    client: &async_nats::Client,
    js: &jetstream::Context,
    results: &mut async_nats::Subscriber,
    i: usize,
) -> Duration {
    let id = format!("px-{i}");
    let mut events = client
        .subscribe(format!("agent.events.bench.{id}"))
        .await
        .expect("subscribe");
    client.flush().await.expect("flush");
    let body = json!({"message": {"messageId": id, "role": "user", "parts": [{"text": "go"}]}});
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", id.as_str());
    let started = Instant::now();
    js.publish_with_headers("agent.tasks.bench", headers, body.to_string().into())
        .await
        .expect("sent")
        .await
        .expect("stored");
    let first = loop {
        let message = events
            .next()
            .await
            .expect("the events subscription is open");
        let event: Value = serde_json::from_slice(&message.payload).expect("an event");
        if event.get("artifactUpdate").is_some() {
            break started.elapsed();
        }
    };
    // The task's result, before the next one starts (one task at a time).
    results.next().await.expect("a result");
    first
}

#[tokio::main]
async fn main() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script((0..SAMPLES * 3).map(|_| Reply::Text(ANSWER.to_owned())));
    let runtime = Runtime::start(&format!(
        "default_model: openai.gpt-fake\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         agents:\n  bench: {{ instruction: Answer. }}\n",
        fake.openai_base_url
    ))
    .await;
    let nats = NatsServer::start();
    let mut config = proxy_config("bench", &nats.url(), &runtime.url);
    config.log_level = "warn".into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let stop = CancellationToken::new();
    tokio::spawn(daedalus_proxy::run(
        listener,
        config,
        stop.clone().cancelled_owned(),
    ));
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = jetstream::new(client.clone());
    common::wait_for_consumer(&js, "agent-bench").await;
    let mut results = client
        .subscribe("agent.results.bench.>")
        .await
        .expect("subscribe");

    let mut alone = Vec::with_capacity(SAMPLES);
    let mut runtime_hop = Vec::with_capacity(SAMPLES);
    let mut proxy_hop = Vec::with_capacity(SAMPLES);
    // One client, its connections kept alive, as the proxy keeps its own.
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .expect("an HTTP client");
    for i in 0..SAMPLES {
        alone.push(fake_alone(&http, &fake).await);
        runtime_hop.push(through_runtime(&http, &runtime, i).await);
        proxy_hop.push(through_proxy(&client, &js, &mut results, i).await);
    }
    stop.cancel();
    let (alone50, alone90) = percentiles(alone);
    let (rt50, rt90) = percentiles(runtime_hop);
    let (px50, px90) = percentiles(proxy_hop);
    println!("\ntime to the first text of an answer ({SAMPLES} tasks, one at a time)\n");
    println!("| path | p50 ms | p90 ms | added at p50 by the last hop |");
    println!("|---|---|---|---|");
    println!("| fake LLM alone (first chunk with text) | {alone50:.3} | {alone90:.3} | |");
    println!(
        "| runtime (`POST /` as SSE, first artifactUpdate) | {rt50:.3} | {rt90:.3} | {:.3} ms |",
        rt50 - alone50
    );
    println!(
        "| proxy → NATS (`agent.events`, first artifactUpdate) | {px50:.3} | {px90:.3} | {:.3} ms |",
        px50 - rt50
    );
}
