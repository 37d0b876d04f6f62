//! Proxy overhead against its floors, in one run on one machine and one nats-server.
//!
//! (a) direct `POST /` to the runtime (passthrough), one at a time;
//! (b) the raw JetStream floor of the proxy's pattern without HTTP: pull one, publish the
//!     result and await its ack, confirmed ack — one at a time, and with 1/8/32 workers;
//! (c) publish → result through the proxy, one at a time;
//! (d) proxy throughput with CONCURRENCY 1, 8 and 32;
//! (e) the same at 32 against a runtime that keeps no conversation (`SESSIONS_DB=off`): what
//!     the conversation store, on the pod's path since it is on by default, costs the pod.
//!
//! Targets: (c) ≤ (a)+(b) + 1 ms at p50 and + 5 ms at p99; (d) at 32 ≥ half the floor at 32.
//! Run: `cargo bench -p daedalus-proxy --bench throughput` (needs `bash .ci/setup` once).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

mod common;

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use common::proxy_config;
use daedalus_test_kit::{NatsServer, Runtime};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

const ROUND_TRIPS: usize = 400;
/// Tasks per throughput run: long enough (a second or more at 32 in flight) that one slow
/// moment of a 2-core machine moves the ratio by a few hundredths, not a tenth.
const BATCH: usize = 10_000;

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

/// The runtime of (e): no conversation store.
async fn start_runtime_keeping_no_conversation() -> Runtime {
    Runtime::passthrough_with("bench", |config| {
        config.log_level = "warn".into();
        config.sessions_db = None;
    })
    .await
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
            .body(common::body(i, "direct"))
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
            common::body(i, agent).into(),
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
    BATCH as f64
        / common::run_batch(client, js, agent, BATCH)
            .await
            .as_secs_f64()
}

async fn with_floor_workers(js: &Context, agent: &str, n: usize) -> CancellationToken {
    let stop = CancellationToken::new();
    for _ in 0..n {
        tokio::spawn(common::floor_worker(
            js.clone(),
            agent.to_owned(),
            stop.clone(),
        ));
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
    let client = async_nats::connect(nats.url()).await.expect("connect");
    common::wait_for_consumer(&jetstream::new(client), &format!("agent-{agent}")).await;
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
    let unkept = start_runtime_keeping_no_conversation().await;
    let stop = with_floor_workers(&js, "floortp32e", 32).await;
    let floor_e = throughput(&client, &js, "floortp32e").await;
    stop.cancel();
    let stop = with_proxy(&nats, &unkept.url, "tp32e", 32).await;
    let proxied_e = throughput(&client, &js, "tp32e").await;
    stop.cancel();

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
    println!(
        "| 32, runtime with SESSIONS_DB=off (e) | {floor_e:.0} | {proxied_e:.0} | {:.2} |",
        proxied_e / floor_e
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "\n(c) p50 target {}; p99 target {}; (d) at 32 >= 0.5 x floor: {}",
        verdict(c.p50 <= budget50),
        verdict(c.p99 <= budget99),
        verdict(proxied[2] >= 0.5 * floor[2])
    );
}
