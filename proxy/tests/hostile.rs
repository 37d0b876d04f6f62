//! What a publisher can send cannot crash, stall or misdirect the proxy: ids with CR/LF or
//! thousands of characters, results over the server's max_payload, reused messageIds,
//! hostile `reply-to` values, a worker that dies, and tasks that run out of deliveries on
//! every path. Real nats-server; the real runtime or the fake where a fault is needed.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::HeaderMap;
use async_trait::async_trait;
use bytes::Bytes;
use daedalus_contract::TaskState;
use daedalus_proxy::forward::{ForwardError, Forwarder, HttpRuntime, Reply};
use daedalus_proxy::wire::trace::TraceContext;
use futures::StreamExt;
use serde_json::json;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(async_nats::HeaderValue::as_str)
}

/// Publishes a raw body with no `Nats-Msg-Id` (a raw id could not be a header).
async fn publish_raw(js: &async_nats::jetstream::Context, agent: &str, body: Vec<u8>) {
    publish_raw_with(js, agent, body, HeaderMap::new()).await;
}

async fn publish_raw_with(
    js: &async_nats::jetstream::Context,
    agent: &str,
    body: Vec<u8>,
    headers: HeaderMap,
) {
    js.publish_with_headers(format!("agent.tasks.{agent}"), headers, body.into())
        .await
        .expect("publish sent")
        .await
        .expect("publish acknowledged");
}

fn status_text(task: &daedalus_contract::Task) -> String {
    task.status
        .message
        .as_ref()
        .map(daedalus_contract::Message::text)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_crlf_in_message_id_and_task_id_does_not_stop_the_worker() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("crlf").await;
    let proxy = Proxy::start(proxy_config("crlf", &nats.url(), &runtime)).await;
    let (_client, js) = client(&nats).await;
    publish_raw(
        &js,
        "crlf",
        serde_json::to_vec(&json!({"message": {"messageId": "a\nb", "role": "user",
                                                "parts": [{"text": "x"}]}}))
        .expect("JSON"),
    )
    .await;
    publish_raw(
        &js,
        "crlf",
        serde_json::to_vec(
            &json!({"message": {"messageId": "m\r\n", "taskId": "t\r\nPUB x 1",
                                                "role": "user", "parts": [{"text": "y"}]}}),
        )
        .expect("JSON"),
    )
    .await;
    publish(
        &js,
        "crlf",
        "m-ok",
        task_body("m-ok", Some("t-ok"), "ordinary"),
    )
    .await;

    let found = wait_results(&js, "crlf", 3, WAIT).await;
    assert_eq!(found.len(), 3, "every task got its result");
    for (subject, headers, task) in &found {
        assert_eq!(task.status.state, TaskState::Completed, "{task:?}");
        let token = daedalus_contract::token::token(&task.id);
        assert_eq!(subject, &format!("agent.results.crlf.{token}"));
        assert_eq!(header(headers, "Task-Id"), Some(token.as_ref()));
    }
    let ids: Vec<&str> = found.iter().map(|(_, _, t)| t.id.as_str()).collect();
    assert!(
        ids.contains(&"a\nb"),
        "the raw id stays in the body: {ids:?}"
    );
    assert!(ids.contains(&"t\r\nPUB x 1"), "{ids:?}");
    assert_eq!(proxy.healthz().await["consuming"], true);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_five_thousand_character_task_id_gets_its_result_on_a_hashed_subject() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("long").await;
    let proxy = Proxy::start(proxy_config("long", &nats.url(), &runtime)).await;
    let (_client, js) = client(&nats).await;
    let long = "t".repeat(5_000);
    publish(&js, "long", "m-long", task_body("m-long", Some(&long), "x")).await;
    publish(
        &js,
        "long",
        "m-next",
        task_body("m-next", Some("t-next"), "y"),
    )
    .await;

    let found = wait_results(&js, "long", 2, WAIT).await;
    assert_eq!(found.len(), 2);
    let (subject, headers, task) = found
        .iter()
        .find(|(_, _, t)| t.id == long)
        .expect("the long task's result");
    assert_eq!(task.status.state, TaskState::Completed);
    let token = subject.rsplit('.').next().expect("a last token");
    assert!(token.starts_with("h-") && token.len() == 45, "{subject}");
    assert_eq!(header(headers, "Task-Id"), Some(token));
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_result_over_max_payload_becomes_a_failed_result_that_says_why() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("big").await;
    let proxy = Proxy::start(proxy_config("big", &nats.url(), &runtime)).await;
    let (_client, js) = client(&nats).await;
    // ~1000 KiB in (under the server's 1 MiB); with historyLength the result carries the echo
    // and the history (the conversation keeps 64 KiB of the message): over 1 MiB.
    let text = "x".repeat(1000 * 1024);
    let body = serde_json::to_vec(&json!({
        "message": {"messageId": "m-big", "taskId": "t-big", "role": "user", "parts": [{"text": text}]},
        "configuration": {"historyLength": 10}
    }))
    .expect("JSON");
    publish(&js, "big", "m-big", body).await;
    publish(
        &js,
        "big",
        "m-after",
        task_body("m-after", Some("t-after"), "next"),
    )
    .await;

    let found = wait_results(&js, "big", 2, WAIT).await;
    let big = found
        .iter()
        .find(|(_, _, t)| t.id == "t-big")
        .map(|(_, _, t)| t)
        .expect("the big task has a result");
    assert_eq!(big.status.state, TaskState::Failed);
    let why = status_text(big);
    assert!(why.contains("max_payload"), "{why}");
    assert!(
        why.contains("1048576 bytes"),
        "the server's limit is named: {why}"
    );
    assert!(
        found
            .iter()
            .any(|(_, _, t)| t.id == "t-after" && t.status.state == TaskState::Completed),
        "the worker went on to the next task"
    );
    proxy
        .wait_metric("daedalus_proxy_tasks_failed_total", 1)
        .await;
    assert_eq!(
        tasks_left(&js).await,
        0,
        "the big task was termed, not retried"
    );
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_reused_message_id_never_dedupes_another_task_s_or_agent_s_result() {
    let nats = NatsServer::start();
    let (runtime_a, _stop_a) = real_runtime("alpha").await;
    let (runtime_b, _stop_b) = real_runtime("beta").await;
    let alpha = Proxy::start(proxy_config("alpha", &nats.url(), &runtime_a)).await;
    let beta = Proxy::start(proxy_config("beta", &nats.url(), &runtime_b)).await;
    let (_client, js) = client(&nats).await;
    // Two publishers chose the same messageId (with their own Nats-Msg-Ids on the tasks).
    publish(&js, "alpha", "p1", task_body("same", Some("t-1"), "one")).await;
    publish(&js, "alpha", "p2", task_body("same", Some("t-2"), "two")).await;
    publish(&js, "beta", "p3", task_body("same", Some("t-1"), "three")).await;

    let a = wait_results(&js, "alpha", 2, WAIT).await;
    let b = wait_results(&js, "beta", 1, WAIT).await;
    assert_eq!(a.len(), 2, "both of alpha's tasks kept their result");
    assert_eq!(b.len(), 1, "beta's result was not taken for alpha's");
    let mut ids: Vec<&str> = a
        .iter()
        .chain(&b)
        .filter_map(|(_, h, _)| header(h, "Nats-Msg-Id"))
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "result:alpha:t-1:same",
            "result:alpha:t-2:same",
            "result:beta:t-1:same"
        ]
    );
    alpha.shutdown().await.unwrap();
    beta.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_reply_to_values_are_refused_and_the_result_is_still_published() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("rt").await;
    let proxy = Proxy::start(proxy_config("rt", &nats.url(), &runtime)).await;
    let (client, js) = client(&nats).await;
    // Everything the proxy publishes anywhere but its own result subject shows up here.
    let mut everything = client.subscribe(">").await.expect("subscribes");
    let hostile = [
        "agent.results.victim.stolen".to_owned(),
        "agent.tasks.rt".to_owned(),
        "agent.deadletter.rt".to_owned(),
        "$JS.API.STREAM.INFO.AGENT_TASKS".to_owned(),
        ">".to_owned(),
        "_INBOX.>".to_owned(),
        format!("_INBOX.{}", "a".repeat(5_000)),
    ];
    for (i, reply_to) in hostile.iter().enumerate() {
        let mut headers = HeaderMap::new();
        headers.insert("reply-to", reply_to.as_str());
        let id = format!("m-{i}");
        publish_with(&js, "rt", &id, task_body(&id, None, "x"), headers).await;
    }
    let allowed = client.new_inbox();
    let mut inbox = client.subscribe(allowed.clone()).await.expect("subscribes");
    let mut headers = HeaderMap::new();
    headers.insert("reply-to", allowed.as_str());
    publish_with(&js, "rt", "m-ok", task_body("m-ok", None, "ok"), headers).await;

    let n = hostile.len() + 1;
    let found = wait_results(&js, "rt", n, WAIT).await;
    assert_eq!(found.len(), n, "every task has its result");
    let reply = tokio::time::timeout(WAIT, inbox.next())
        .await
        .expect("the allowed reply-to got the result")
        .expect("a message");
    assert!(String::from_utf8_lossy(&reply.payload).contains("m-ok"));
    proxy
        .wait_metric("daedalus_proxy_tasks_completed_total", n as u64)
        .await;
    assert_eq!(
        metric(
            &proxy.metrics().await,
            "daedalus_proxy_reply_to_refused_total"
        ),
        hostile.len() as u64
    );
    assert_eq!(
        tasks_left(&js).await,
        0,
        "nothing was re-injected as a task"
    );
    assert_eq!(dead_letters(&js).await, 0);
    let stray = misdirected_results(&client, &mut everything, "rt").await;
    assert!(
        stray.is_empty(),
        "published outside the allowed subjects: {stray:?}"
    );
    assert_eq!(results(&js, "victim").await.len(), 0);
    proxy.shutdown().await.unwrap();
}

/// A forwarder that panics on the first task whose body says `PANIC`, then behaves.
#[derive(Debug)]
struct PanicsOnce {
    inner: HttpRuntime,
    panics: AtomicUsize,
}

#[async_trait]
impl Forwarder for PanicsOnce {
    async fn send(
        &self,
        body: Bytes,
        trace: &TraceContext,
        timeout: Duration,
    ) -> Result<Reply, ForwardError> {
        if String::from_utf8_lossy(&body).contains("PANIC")
            && self.panics.fetch_add(1, Ordering::SeqCst) == 0
        {
            panic!("a bug in the worker");
        }
        self.inner.send(body, trace, timeout).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_panics_is_started_again_and_its_task_is_redelivered() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("boom").await;
    let mut config = proxy_config("boom", &nats.url(), &runtime);
    config.ack_wait = Duration::from_secs(1);
    let forwarder = Arc::new(PanicsOnce {
        inner: HttpRuntime::new(&runtime),
        panics: AtomicUsize::new(0),
    });
    let proxy = Proxy::start_with(config, forwarder).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "boom", "m-1", task_body("m-1", Some("t-1"), "PANIC")).await;
    publish(&js, "boom", "m-2", task_body("m-2", Some("t-2"), "after")).await;

    let found = wait_results(&js, "boom", 2, WAIT).await;
    assert_eq!(
        found.len(),
        2,
        "the worker came back and both tasks got results"
    );
    assert!(
        found
            .iter()
            .all(|(_, _, t)| t.status.state == TaskState::Completed)
    );
    proxy
        .wait_metric("daedalus_proxy_worker_restarts_total", 1)
        .await;
    assert_eq!(proxy.healthz().await["consuming"], true);
    assert_eq!(tasks_left(&js).await, 0);
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_on_the_last_delivery_still_gets_a_failed_result_from_the_advisory() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("last").await;
    let mut config = proxy_config("last", &nats.url(), &runtime);
    config.ack_wait = Duration::from_secs(1);
    config.max_deliver = 1;
    let forwarder = Arc::new(PanicsOnce {
        inner: HttpRuntime::new(&runtime),
        panics: AtomicUsize::new(0),
    });
    let proxy = Proxy::start_with(config, forwarder).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "last", "m-1", task_body("m-1", Some("t-1"), "PANIC")).await;

    let found = wait_results(&js, "last", 1, WAIT).await;
    assert_eq!(
        found.len(),
        1,
        "the task the server gave up on has a result"
    );
    let task = &found[0].2;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        status_text(task).contains("gave up after 1 deliveries"),
        "{task:?}"
    );
    proxy
        .wait_metric("daedalus_proxy_tasks_given_up_by_server_total", 1)
        .await;
    assert_eq!(
        tasks_left(&js).await,
        0,
        "the given-up task left the work queue"
    );
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_arrives_while_the_runtime_is_down_is_held_and_never_failed() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("flap", &nats.url(), &fake.url);
    config.max_deliver = 2;
    config.concurrency = 2;
    config.runtime_down_limit = Duration::from_mins(10);
    // Pulls stay open while the runtime turns unhealthy, so the task arrives on them.
    config.pull_expires = Duration::from_secs(30);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    wait_pulls_waiting(&js, "flap", 2).await;
    fake.set_healthy(false);
    proxy.wait_healthz("runtime", json!("unhealthy")).await;
    publish(&js, "flap", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    proxy
        .wait_metric("daedalus_proxy_tasks_held_total", 1)
        .await;
    // Counted, not timed: more health probes than deliveries allowed, each answered unhealthy.
    fake.wait_health_probes(5).await;
    assert!(results(&js, "flap").await.is_empty(), "nothing was failed");
    assert_eq!(fake.calls().len(), 0, "nothing was sent to a down runtime");

    fake.set_healthy(true);
    let found = wait_results(&js, "flap", 1, WAIT).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    assert_eq!(fake.calls_for("t-1"), 1);
    let metrics = proxy.metrics().await;
    assert_eq!(
        metric(&metrics, "daedalus_proxy_redeliveries_total"),
        0,
        "held, not handed back"
    );
    wait_tasks_left(&js, 0).await;
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_grace_period_running_out_on_the_last_delivery_gives_a_failed_result() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Hang).await;
    let mut config = proxy_config("grace", &nats.url(), &fake.url);
    config.max_deliver = 1;
    config.termination_grace_period = Duration::from_millis(200);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "grace", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while fake.calls().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runtime never got the task"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.shutdown().await.unwrap();

    let found = wait_results(&js, "grace", 1, WAIT).await;
    assert_eq!(found.len(), 1);
    let why = status_text(&found[0].2);
    assert!(
        why.contains("gave up after 1 deliveries: the grace period ran out"),
        "{why}"
    );
    assert_eq!(tasks_left(&js).await, 0);
}

#[tokio::test]
async fn an_idle_proxy_stops_without_waiting_out_its_pull() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("idle", &nats.url(), &fake.url);
    // If shutdown waited for the outstanding pull, it would take a minute.
    config.pull_expires = Duration::from_mins(1);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    wait_pulls_waiting(&js, "idle", 1).await;
    tokio::time::timeout(Duration::from_secs(5), proxy.shutdown())
        .await
        .expect("an idle proxy stops at once")
        .unwrap();
}
