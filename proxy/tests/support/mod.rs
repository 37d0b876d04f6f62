//! Test support for the proxy: a real `nats-server` per test, a controllable fake runtime,
//! the real `daedalus-runtime`, and the proxy itself, each started by a small builder.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test file uses a different part of the support module"
)]
#![allow(unreachable_pub, reason = "shared between test files")]

pub mod fake_runtime;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use daedalus_contract::{Task, read};
use daedalus_proxy::ProxyError;
use daedalus_proxy::config::ProxyConfig;
use futures::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use daedalus_test_kit::NatsServer;
pub use fake_runtime::{FakeRuntime, Mode};

/// Starts the real `daedalus-runtime` in-process and waits until it is ready; returns its URL
/// and a stop token.
pub async fn real_runtime(agent: &str) -> (String, CancellationToken) {
    real_runtime_with(agent, |_| {}).await
}

/// [`real_runtime`] with its configuration changed by `tweak` first.
pub async fn real_runtime_with(
    agent: &str,
    tweak: impl FnOnce(&mut daedalus_runtime::config::Config),
) -> (String, CancellationToken) {
    daedalus_test_kit::Runtime::passthrough_with(agent, tweak)
        .await
        .detach()
}

/// A proxy started in-process.
pub struct Proxy {
    pub stop: CancellationToken,
    pub task: JoinHandle<Result<(), ProxyError>>,
    pub addr: SocketAddr,
}

/// A proxy configuration for tests: fast health polls, short pulls and retries.
pub fn proxy_config(agent: &str, nats_url: &str, runtime_url: &str) -> ProxyConfig {
    let mut c =
        ProxyConfig::for_agent(agent, nats_url, runtime_url).expect("a valid test configuration");
    c.health_interval = Duration::from_millis(100);
    c.pull_expires = Duration::from_secs(1);
    c.retry_base_delay = Duration::from_millis(100);
    c.retry_max_delay = Duration::from_millis(400);
    // A loaded 2-core machine can take tens of seconds to place a new R3 stream.
    c.startup_timeout = Duration::from_mins(1);
    c.termination_grace_period = Duration::from_secs(5);
    c
}

impl Proxy {
    pub async fn start(config: ProxyConfig) -> Proxy {
        let runtime = daedalus_proxy::forward::HttpRuntime::for_config(&config);
        Self::start_with(config, Arc::new(runtime)).await
    }

    /// A proxy whose task calls go through `forwarder` (health, card and manifest still come
    /// from the configured runtime URL).
    pub async fn start_with(
        config: ProxyConfig,
        forwarder: Arc<dyn daedalus_proxy::forward::Forwarder>,
    ) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("has an address");
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let runtime = daedalus_proxy::forward::HttpRuntime::for_config(&config);
        let task = tokio::spawn(daedalus_proxy::run_with(
            listener, config, forwarder, runtime, shutdown,
        ));
        let mut proxy = Proxy { stop, task, addr };
        proxy.wait_consuming().await;
        proxy
    }

    /// `/healthz` as JSON (whatever its status code).
    pub async fn healthz(&self) -> serde_json::Value {
        reqwest::get(format!("http://{}/healthz", self.addr))
            .await
            .expect("healthz answers")
            .json()
            .await
            .expect("healthz is JSON")
    }

    /// Waits until `/healthz` has `field` = `value`.
    pub async fn wait_healthz(&self, field: &str, value: serde_json::Value) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = self.healthz().await;
            if now[field] == value {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "healthz never had {field} = {value}: {now}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `/healthz` reports consuming; a proxy that stops first fails the test
    /// with what it returned.
    pub async fn wait_consuming(&mut self) {
        let client = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        while tokio::time::Instant::now() < deadline {
            if self.task.is_finished() {
                let returned = (&mut self.task).await;
                panic!("the proxy stopped during startup: {returned:?}");
            }
            let healthz = client
                .get(format!("http://{}/healthz", self.addr))
                .send()
                .await;
            if healthz.is_ok_and(|r| r.status() == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the proxy never reported consuming");
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.addr))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// Waits (a few seconds at most) until an integer metric reaches `expected`: counters move
    /// when an ack is confirmed, just after the result becomes visible.
    pub async fn wait_metric(&self, name: &str, expected: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let value = metric(&self.metrics().await, name);
            if value == expected {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} is {value}, expected {expected}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the proxy and waits for it.
    pub async fn shutdown(self) -> Result<(), ProxyError> {
        self.stop.cancel();
        self.task.await.expect("the proxy task does not panic")
    }
}

/// A NATS client for the test's own publishing and reading.
pub async fn client(nats: &NatsServer) -> (async_nats::Client, Context) {
    let client = async_nats::connect(nats.url())
        .await
        .expect("the test connects to NATS");
    let js = jetstream::new(client.clone());
    (client, js)
}

/// A task body for `text`, with ids.
pub fn task_body(message_id: &str, task_id: Option<&str>, text: &str) -> Vec<u8> {
    let mut message =
        serde_json::json!({"messageId": message_id, "role": "user", "parts": [{"text": text}]});
    if let Some(t) = task_id {
        message["taskId"] = serde_json::json!(t);
    }
    serde_json::to_vec(&serde_json::json!({ "message": message })).expect("serializes")
}

/// Publishes a task body with `Nats-Msg-Id` = `msg_id`; returns whether it was a duplicate.
pub async fn publish(js: &Context, agent: &str, msg_id: &str, body: Vec<u8>) -> bool {
    publish_with(js, agent, msg_id, body, HeaderMap::new()).await
}

pub async fn publish_with(
    js: &Context,
    agent: &str,
    msg_id: &str,
    body: Vec<u8>,
    mut headers: HeaderMap,
) -> bool {
    headers.insert("Nats-Msg-Id", msg_id);
    let ack = js
        .publish_with_headers(format!("agent.tasks.{agent}"), headers, body.into())
        .await
        .expect("publish sent")
        .await
        .expect("publish acknowledged");
    ack.duplicate
}

/// Every result message for `agent` now in the result stream, in order, as stored: (subject,
/// headers, payload).
pub async fn stored_results(js: &Context, agent: &str) -> Vec<(String, HeaderMap, bytes::Bytes)> {
    try_stored_results(js, agent)
        .await
        .expect("the results stream can be read")
}

/// [`stored_results`], or `None` while the stream cannot be read (no leader, say).
pub async fn try_stored_results(
    js: &Context,
    agent: &str,
) -> Option<Vec<(String, HeaderMap, bytes::Bytes)>> {
    let stream = js.get_stream("AGENT_RESULTS").await.ok()?;
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            filter_subject: format!("agent.results.{agent}.>"),
            ack_policy: jetstream::consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(5),
            // One replica in memory: on a cluster with a node down, a reader needs no
            // consumer election of its own.
            num_replicas: 1,
            memory_storage: true,
            ..Default::default()
        })
        .await
        .ok()?;
    let mut out = Vec::new();
    let mut batch = consumer
        .fetch()
        .max_messages(100_000)
        .expires(Duration::from_millis(500))
        .messages()
        .await
        .ok()?;
    while let Some(Ok(m)) = batch.next().await {
        out.push((
            m.subject.to_string(),
            m.headers.clone().unwrap_or_default(),
            m.payload.clone(),
        ));
    }
    Some(out)
}

/// Every stored result of `agent`, read as Tasks.
pub async fn results(js: &Context, agent: &str) -> Vec<(String, HeaderMap, Task)> {
    as_tasks(stored_results(js, agent).await)
}

fn as_tasks(stored: Vec<(String, HeaderMap, bytes::Bytes)>) -> Vec<(String, HeaderMap, Task)> {
    stored
        .into_iter()
        .map(|(subject, headers, payload)| {
            let task: Task = read::from_slice(&payload).expect("results are Tasks");
            (subject, headers, task)
        })
        .collect()
}

/// Waits until at least `n` results exist for `agent`, then returns them all.
pub async fn wait_results(
    js: &Context,
    agent: &str,
    n: usize,
    within: Duration,
) -> Vec<(String, HeaderMap, Task)> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = try_stored_results(js, agent).await.map(as_tasks);
        let past = tokio::time::Instant::now() > deadline;
        match found {
            Some(found) if found.len() >= n || past => return found,
            None if past => return Vec::new(),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Waits until the agent's consumer has `n` pull requests waiting on the server.
pub async fn wait_pulls_waiting(js: &Context, agent: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut consumer: jetstream::consumer::PullConsumer = js
            .get_consumer_from_stream(format!("agent-{agent}"), "AGENT_TASKS")
            .await
            .expect("the agent's consumer");
        let waiting = consumer.info().await.expect("consumer info").num_waiting;
        if waiting >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{waiting} pulls waiting, expected {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes a marker and reads `everything` (a `>` subscription) up to it: the subjects of
/// every Task published on `$` subjects or on `agent.` subjects other than `agent`'s own
/// results, in between. (Tasks on inboxes are the allowed reply-to and the test's own fetches.)
pub async fn misdirected_results(
    client: &async_nats::Client,
    everything: &mut async_nats::Subscriber,
    agent: &str,
) -> Vec<String> {
    client
        .publish("zz.marker", bytes::Bytes::new())
        .await
        .expect("marker");
    client.flush().await.expect("flush");
    let own = format!("agent.results.{agent}.");
    let mut stray = Vec::new();
    while let Some(m) = tokio::time::timeout(Duration::from_mins(1), everything.next())
        .await
        .expect("the marker arrives")
    {
        let subject = m.subject.to_string();
        if subject == "zz.marker" {
            break;
        }
        let is_task = read::from_slice::<Task>(&m.payload).is_ok();
        let misdirected = subject.starts_with('$')
            || (subject.starts_with("agent.") && !subject.starts_with(&own));
        if is_task && misdirected {
            stray.push(subject);
        }
    }
    stray
}

/// Whether `agent`'s consumer has nothing left to deliver, nothing awaiting an ack, and its
/// ack floor at `last` (the tasks stream's last sequence): every task up to `last` was acked
/// or terminated. (On a cluster, wait on this, not on an empty work queue: an election can
/// strand an acked task's copy until the server's interest check, nats-server #5270, #6673.)
pub async fn consumer_owes_nothing_up_to(js: &Context, agent: &str, last: u64) -> bool {
    let Ok(mut consumer) = js
        .get_consumer_from_stream::<jetstream::consumer::pull::Config, _, _>(
            format!("agent-{agent}"),
            "AGENT_TASKS",
        )
        .await
    else {
        return false;
    };
    let Ok(info) = consumer.info().await else {
        return false;
    };
    info.num_pending == 0 && info.num_ack_pending == 0 && info.ack_floor.stream_sequence >= last
}

/// Messages still in the task stream.
pub async fn tasks_left(js: &Context) -> u64 {
    let mut stream = js.get_stream("AGENT_TASKS").await.expect("tasks stream");
    stream.info().await.expect("stream info").state.messages
}

/// Waits until the tasks stream holds `n` messages (0: every task was acked or terminated, so
/// nothing is left to redeliver).
pub async fn wait_tasks_left(js: &Context, n: u64) {
    daedalus_test_kit::wait_until(
        &format!("{n} tasks left in the stream"),
        Duration::from_secs(10),
        || async { tasks_left(js).await == n },
    )
    .await;
}

/// Messages in the dead-letter stream.
pub async fn dead_letters(js: &Context) -> u64 {
    let mut stream = js
        .get_stream("AGENT_DEADLETTER")
        .await
        .expect("deadletter stream");
    stream.info().await.expect("stream info").state.messages
}

/// The value of an integer metric line `name value` in Prometheus text.
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

/// Shared state across `Arc` in fakes.
pub type Shared<T> = Arc<std::sync::Mutex<T>>;
