//! One load tool for the benchmarks that drive a server over HTTP: `in_flight` lanes take
//! request numbers from one counter, each timing every one of its round trips (none sampled,
//! none dropped), and the figures are the requests per second over the whole run and the round
//! trip's percentiles, its slowest, and how many took over [`STALL`]; and the one request
//! shape of the JSON-RPC benchmarks, sent over plain HTTP/1.1 connections (hyper's, one per
//! request in flight, kept open) so that the client costs the machine little.

use std::future::Future;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;

/// A round trip slower than this is a stall.
pub(crate) const STALL: Duration = Duration::from_millis(10);

/// What one load run measured.
#[derive(Debug, Clone, Copy)]
#[allow(
    dead_code,
    reason = "each benchmark prints the figures it compares, not all of them"
)]
pub(crate) struct Figures {
    pub(crate) rate: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) p999_ms: f64,
    pub(crate) max_ms: f64,
    /// Round trips over [`STALL`].
    pub(crate) stalls: usize,
    /// Round trips timed.
    pub(crate) requests: usize,
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
    let at = |per_mille: usize| {
        samples
            .get((samples.len() * per_mille / 1000).min(samples.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let rate = samples.len() as f64 / elapsed;
    Figures {
        rate,
        p50_ms: at(500),
        p99_ms: at(990),
        p999_ms: at(999),
        max_ms: samples.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        stalls: samples.iter().filter(|d| **d > STALL).count(),
        requests: samples.len(),
    }
}

/// Open HTTP/1.1 connections to one server, as many as requests in flight: each request takes
/// an idle one and gives it back.
pub(crate) struct Connections {
    uri: hyper::Uri,
    bearer: Option<String>,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Connections {
    /// `count` connections to `url` (`http://host:port/path`), presenting `bearer` if given.
    pub(crate) async fn open(url: &str, count: usize, bearer: Option<&str>) -> Self {
        let uri: hyper::Uri = url.parse().expect("a URL");
        let authority = uri
            .authority()
            .expect("a host and port")
            .as_str()
            .to_owned();
        let mut idle = Vec::with_capacity(count);
        for _ in 0..count {
            let tcp = tokio::net::TcpStream::connect(&authority)
                .await
                .expect("the server listens");
            tcp.set_nodelay(true).expect("TCP_NODELAY");
            let (sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                    .await
                    .expect("an HTTP/1.1 connection");
            tokio::spawn(connection);
            idle.push(sender);
        }
        Self {
            uri,
            bearer: bearer.map(|t| format!("Bearer {t}")),
            idle: Mutex::new(idle),
        }
    }

    /// POSTs `body` as JSON; answers the status and the whole body.
    pub(crate) async fn post(&self, body: Vec<u8>) -> (hyper::StatusCode, Bytes) {
        let mut sender = self
            .idle
            .lock()
            .expect("not poisoned")
            .pop()
            .expect("a connection per request in flight");
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = hyper::Request::post(path)
            .header(
                hyper::header::HOST,
                self.uri.authority().expect("a host").as_str(),
            )
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header("A2A-Version", "1.0");
        if let Some(bearer) = &self.bearer {
            request = request.header(hyper::header::AUTHORIZATION, bearer);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .expect("a request");
        // The connection's task may not have run yet (a multi-threaded client).
        sender.ready().await.expect("the connection is open");
        let response = sender.send_request(request).await.expect("answered");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        self.idle.lock().expect("not poisoned").push(sender);
        (status, bytes)
    }

    /// Sends `SendMessage` number `i` and checks the task completed.
    pub(crate) async fn send_message(&self, i: usize) {
        let (status, bytes) = self.post(send_message_body(i)).await;
        assert!(status.is_success(), "{status}");
        assert!(completed(&bytes), "{}", String::from_utf8_lossy(&bytes));
    }
}

/// Whether an answer holds a completed task.
fn completed(bytes: &[u8]) -> bool {
    bytes.windows(20).any(|w| w == b"TASK_STATE_COMPLETED")
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
#[allow(
    dead_code,
    reason = "a benchmark on its own connections does not use it"
)]
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
    assert!(completed(&bytes), "{}", String::from_utf8_lossy(&bytes));
}

/// `requests` JSON-RPC `SendMessage`s to `url` after `warm_up` more, `in_flight` at a time over
/// as many HTTP/1.1 connections, presenting `bearer` if given. Each run's message ids are new
/// (`first` on), so runs against one server never repeat one.
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
    static FIRST: AtomicUsize = AtomicUsize::new(0);
    let first = FIRST.fetch_add(warm_up + requests, Ordering::Relaxed);
    let connections = Connections::open(url, in_flight, bearer).await;
    for i in first..first + warm_up {
        connections.send_message(i).await;
    }
    let timed = first + warm_up..first + warm_up + requests;
    run(in_flight, timed, |i| connections.send_message(i)).await
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
