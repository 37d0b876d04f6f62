//! One load tool for the benchmarks that drive a server over HTTP: `in_flight` lanes take
//! request numbers from one counter, each timing its own round trips, and the figures are the
//! requests per second over the whole run and the round trip's percentiles; and the one
//! request shape of the JSON-RPC benchmarks.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What one load run measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    pub(crate) rate: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
}

/// Sends requests `numbers` through `send` (which asserts each answer), `in_flight` at a time.
pub(crate) async fn run<F, Fut>(in_flight: usize, numbers: Range<usize>, send: F) -> Figures
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let next = AtomicUsize::new(numbers.start);
    let started = Instant::now();
    let lanes = (0..in_flight).map(|_| {
        let (next, send, end) = (&next, &send, numbers.end);
        async move {
            let mut samples = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    return samples;
                }
                let began = Instant::now();
                send(i).await;
                samples.push(began.elapsed());
            }
        }
    });
    let mut samples: Vec<Duration> = futures::future::join_all(lanes)
        .await
        .into_iter()
        .flatten()
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    samples.sort();
    let at = |p: usize| {
        samples
            .get((samples.len() * p / 100).min(samples.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let rate = samples.len() as f64 / elapsed;
    Figures {
        rate,
        p50_ms: at(50),
        p99_ms: at(99),
    }
}

/// JSON-RPC `SendMessage` number `i`: a new task with one text part.
fn send_message_body(i: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": i,
        "method": "SendMessage",
        "params": {"message": {"messageId": format!("bench-{i}"), "role": "ROLE_USER",
            "parts": [{"text": "hello"}]}},
    }))
    .expect("serializes")
}

/// Sends `SendMessage` number `i` to `url` and checks the task completed.
pub(crate) async fn send_message(client: &reqwest::Client, url: &str, i: usize) {
    let response = client
        .post(url)
        .header("A2A-Version", "1.0")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(send_message_body(i))
        .send()
        .await
        .expect("answered");
    assert!(response.status().is_success(), "{}", response.status());
    let bytes = response.bytes().await.expect("a body");
    assert!(
        bytes.windows(20).any(|w| w == b"TASK_STATE_COMPLETED"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
}

/// `requests` JSON-RPC `SendMessage`s to `url` after `warm_up` more, `in_flight` at a time over
/// as many HTTP/1.1 connections, presenting `bearer` if given.
#[allow(
    dead_code,
    reason = "a benchmark with ranges of its own does not use it"
)]
pub(crate) async fn jsonrpc(
    url: &str,
    in_flight: usize,
    bearer: Option<&str>,
    warm_up: usize,
    requests: usize,
) -> Figures {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = bearer {
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("a header value"),
        );
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(in_flight)
        .default_headers(headers)
        .build()
        .expect("a client");
    for i in 0..warm_up {
        send_message(&client, url, i).await;
    }
    run(in_flight, warm_up..warm_up + requests, |i| {
        send_message(&client, url, i)
    })
    .await
}

/// The better of `rounds` (the one with more turns per second): noise only slows a run.
#[allow(dead_code, reason = "a benchmark that measures once does not use it")]
pub(crate) fn best(rounds: &[Figures]) -> Figures {
    rounds
        .iter()
        .copied()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .expect("at least one round")
}
