//! Proxy overhead against its floors, in one run on one machine and one nats-server.
//!
//! (a) direct `POST /` to the runtime (passthrough), one at a time;
//! (b) the raw JetStream floor of the proxy's pattern without HTTP: pull one, publish the
//!     result and await its ack, confirmed ack — one at a time, and with 1/8/32 workers;
//! (c) publish → result through the proxy, one at a time;
//! (d) proxy throughput with CONCURRENCY 1, 8 and 32.
//!
//! Targets: (c) ≤ (a)+(b) + 1 ms at p50 and + 5 ms at p99; (d) at 32 ≥ half the floor at 32.
//! Run: `cargo bench -p daedalus-proxy --bench throughput` (needs `bash .ci/setup` once).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{self, Context};
use daedalus_test_kit::{NatsServer, Runtime, proxy_config};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

const ROUND_TRIPS: usize = 400;
const BATCH: usize = 2000;

fn body(i: usize, agent: &str) -> Vec<u8> {
    format!(r#"{{"message":{{"messageId":"{agent}-m{i}","taskId":"{agent}-t{i}","role":"user","parts":[{{"text":"benchmark payload {i}"}}]}}}}"#).into_bytes()
}

struct Stats {
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |percent: usize| samples[(samples.len() - 1) * percent / 100];
    Stats {
        p50: at(50),
        p99: at(99),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

async fn start_runtime() -> Runtime {
    Runtime::passthrough_with("bench", |config| config.log_level = "warn".into()).await
}

/// (a) `POST /` one at a time.
async fn direct_http(url: &str) -> Stats {
    let client = reqwest::Client::new();
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS + 50 {
        let started = Instant::now();
        let r = client
            .post(format!("{url}/"))
            .header("content-type", "application/json")
            .body(body(i, "direct"))
            .send()
            .await
            .expect("sent");
        assert_eq!(r.status(), 200);
        r.bytes().await.expect("body");
        if i >= 50 {
            samples.push(started.elapsed());
        }
    }
    stats(samples)
}

/// A floor worker: pull one, publish a result (ack awaited), confirmed ack; forever.
async fn floor_worker(js: Context, agent: String, stop: CancellationToken) {
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

/// One-at-a-time round trips: publish a task, wait for its result.
async fn round_trips(client: &async_nats::Client, js: &Context, agent: &str) -> Stats {
    let mut results = client
        .subscribe(format!("agent.results.{agent}.>"))
        .await
        .expect("subscribe");
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS + 50 {
        let started = Instant::now();
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{agent}-m{i}").as_str());
        js.publish_with_headers(
            format!("agent.tasks.{agent}"),
            headers,
            body(i, agent).into(),
        )
        .await
        .expect("publish")
        .await
        .expect("ack");
        tokio::time::timeout(Duration::from_secs(30), results.next())
            .await
            .expect("a result")
            .expect("subscription open");
        if i >= 50 {
            samples.push(started.elapsed());
        }
    }
    stats(samples)
}

/// Publishes `BATCH` tasks pipelined and waits for all results; tasks per second.
async fn throughput(client: &async_nats::Client, js: &Context, agent: &str) -> f64 {
    let mut results = client
        .subscribe(format!("agent.results.{agent}.>"))
        .await
        .expect("subscribe");
    client.flush().await.expect("flush");
    let started = Instant::now();
    let mut acks = Vec::with_capacity(BATCH);
    for i in 0..BATCH {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{agent}-m{i}").as_str());
        acks.push(
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
    for _ in 0..BATCH {
        tokio::time::timeout(Duration::from_mins(1), results.next())
            .await
            .expect("a result")
            .expect("open");
    }
    BATCH as f64 / started.elapsed().as_secs_f64()
}

async fn with_floor_workers(js: &Context, agent: &str, n: usize) -> CancellationToken {
    let stop = CancellationToken::new();
    for _ in 0..n {
        tokio::spawn(floor_worker(js.clone(), agent.to_owned(), stop.clone()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop
}

async fn with_proxy(
    nats: &NatsServer,
    runtime: &str,
    agent: &str,
    concurrency: usize,
) -> CancellationToken {
    let mut config = proxy_config(agent, &nats.url(), runtime);
    config.concurrency = concurrency;
    config.log_level = "warn".into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    tokio::spawn(daedalus_proxy::run(listener, config, shutdown));
    // Wait for the consumer to exist.
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = jetstream::new(client);
    for _ in 0..200 {
        if let Ok(s) = js.get_stream("AGENT_TASKS").await
            && s.consumer_info(format!("agent-{agent}")).await.is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop
}

#[tokio::main]
async fn main() {
    let nats = NatsServer::start();
    let serving = start_runtime().await;
    let runtime = serving.url.clone();
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let js = jetstream::new(client.clone());
    daedalus_proxy::nats::ensure_streams(&js, &proxy_config("x", &nats.url(), &runtime).streams)
        .await
        .expect("streams");

    let a = direct_http(&runtime).await;
    let floor_stop = with_floor_workers(&js, "floor1", 1).await;
    let b = round_trips(&client, &js, "floor1").await;
    floor_stop.cancel();
    let proxy_stop = with_proxy(&nats, &runtime, "bench", 1).await;
    let c = round_trips(&client, &js, "bench").await;
    proxy_stop.cancel();

    let mut floor = Vec::new();
    let mut proxied = Vec::new();
    for n in [1usize, 8, 32] {
        let stop = with_floor_workers(&js, &format!("floortp{n}"), n).await;
        floor.push(throughput(&client, &js, &format!("floortp{n}")).await);
        stop.cancel();
        let stop = with_proxy(&nats, &runtime, &format!("tp{n}"), n).await;
        proxied.push(throughput(&client, &js, &format!("tp{n}")).await);
        stop.cancel();
    }

    println!(
        "\nproxy benchmark ({ROUND_TRIPS} round trips, {BATCH}-task batches; one nats-server, file storage)\n"
    );
    println!("| measure | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| (a) direct POST / to the runtime | {} | {} |",
        ms(a.p50),
        ms(a.p99)
    );
    println!(
        "| (b) JetStream floor: pull one, publish result, confirmed ack | {} | {} |",
        ms(b.p50),
        ms(b.p99)
    );
    println!(
        "| (c) publish -> result through the proxy | {} | {} |",
        ms(c.p50),
        ms(c.p99)
    );
    let budget50 = a.p50 + b.p50 + Duration::from_millis(1);
    let budget99 = a.p99 + b.p99 + Duration::from_millis(5);
    println!(
        "| target (a)+(b)+1ms / +5ms | {} | {} |",
        ms(budget50),
        ms(budget99)
    );
    println!(
        "| (c) overhead over (a)+(b) | {} | {} |",
        ms(c.p50.saturating_sub(a.p50 + b.p50)),
        ms(c.p99.saturating_sub(a.p99 + b.p99))
    );
    println!("\n| in flight | JetStream floor (tasks/s) | proxy (tasks/s) | proxy / floor |");
    println!("|---|---|---|---|");
    for (i, n) in [1, 8, 32].iter().enumerate() {
        println!(
            "| {n} | {:.0} | {:.0} | {:.2} |",
            floor[i],
            proxied[i],
            proxied[i] / floor[i]
        );
    }
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "\n(c) p50 target {}; p99 target {}; (d) at 32 >= 0.5 x floor: {}",
        verdict(c.p50 <= budget50),
        verdict(c.p99 <= budget99),
        verdict(proxied[2] >= 0.5 * floor[2])
    );
}
