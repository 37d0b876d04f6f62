//! The consume loop against a real nats-server, with the real runtime where no fault is needed
//! and a controllable fake where one is.

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use daedalus_contract::TaskState;
use futures::StreamExt;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_tasks_give_two_hundred_results_and_an_empty_stream() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime("echo").await;
    let mut config = proxy_config("echo", &nats.url(), &runtime);
    config.concurrency = 8;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    for i in 0..200 {
        let body = task_body(
            &format!("m-{i}"),
            Some(&format!("t-{i}")),
            &format!("hello {i}"),
        );
        publish(&js, "echo", &format!("m-{i}"), body).await;
    }
    let found = wait_results(&js, "echo", 200, WAIT).await;
    assert_eq!(found.len(), 200);
    let mut ids: Vec<String> = found.iter().map(|(_, _, t)| t.id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "every task once");
    for (subject, headers, task) in &found {
        assert_eq!(subject, &format!("agent.results.echo.{}", task.id));
        assert_eq!(task.status.state, TaskState::Completed);
        let n = task.id.trim_start_matches("t-");
        assert_eq!(
            task.artifacts[0].parts[0].as_text(),
            Some(format!("hello {n}").as_str())
        );
        assert_eq!(
            headers.get("Task-Id").map(async_nats::HeaderValue::as_str),
            Some(task.id.as_str())
        );
        assert_eq!(
            headers
                .get("Task-State")
                .map(async_nats::HeaderValue::as_str),
            Some("completed")
        );
        assert_eq!(
            headers
                .get("Nats-Msg-Id")
                .map(async_nats::HeaderValue::as_str),
            Some(format!("result:echo:t-{n}:m-{n}").as_str())
        );
    }
    proxy
        .wait_metric("daedalus_proxy_tasks_completed_total", 200)
        .await;
    assert_eq!(tasks_left(&js).await, 0, "the work queue is empty");
    let metrics = proxy.metrics().await;
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_received_total"), 200);
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_in_flight"), 0);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_duplicate_publish_is_processed_once() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let proxy = Proxy::start(proxy_config("dup", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    assert!(!publish(&js, "dup", "m-1", task_body("m-1", Some("t-1"), "once")).await);
    assert!(
        publish(&js, "dup", "m-1", task_body("m-1", Some("t-1"), "once")).await,
        "the server flags the duplicate"
    );
    wait_results(&js, "dup", 1, WAIT).await;
    // The one message stored is acked: nothing is left that could run again.
    wait_tasks_left(&js, 0).await;
    assert_eq!(results(&js, "dup").await.len(), 1);
    assert_eq!(fake.calls_for("t-1"), 1);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn trace_context_flows_from_nats_to_the_runtime_and_the_result() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let proxy = Proxy::start(proxy_config("traced", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut headers = HeaderMap::new();
    headers.insert("TraceParent", parent);
    headers.insert("tracestate", "vendor=abc");
    publish_with(&js, "traced", "m-1", task_body("m-1", None, "x"), headers).await;
    let found = wait_results(&js, "traced", 1, WAIT).await;
    let call = &fake.calls()[0];
    let sent = call
        .traceparent
        .as_deref()
        .expect("the runtime got a traceparent");
    assert!(
        sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "same trace: {sent}"
    );
    assert!(
        !sent.contains("00f067aa0ba902b7"),
        "a new proxy span: {sent}"
    );
    assert_eq!(call.tracestate.as_deref(), Some("vendor=abc"));
    let result_trace = found[0].1.get("traceparent").map(|v| v.as_str().to_owned());
    assert_eq!(
        result_trace.as_deref(),
        Some(sent),
        "the result carries the proxy span"
    );

    // Without a traceparent a new trace starts, and still reaches both.
    publish(&js, "traced", "m-2", task_body("m-2", None, "y")).await;
    let found = wait_results(&js, "traced", 2, WAIT).await;
    let fresh = fake.calls()[1].traceparent.clone().expect("a new trace");
    assert_eq!(
        found[1]
            .1
            .get("traceparent")
            .map(async_nats::HeaderValue::as_str),
        Some(fresh.as_str())
    );
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn reply_to_under_a_configured_prefix_gets_the_result_too() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("replies", &nats.url(), &fake.url);
    config.reply_to_prefixes = vec!["_INBOX.".into(), "my.".into()];
    let proxy = Proxy::start(config).await;
    let (client, js) = client(&nats).await;
    let mut inbox = client.subscribe("my.inbox").await.unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("reply-to", "my.inbox");
    publish_with(
        &js,
        "replies",
        "m-1",
        task_body("m-1", Some("t-r"), "hi"),
        headers,
    )
    .await;
    let m = tokio::time::timeout(WAIT, inbox.next())
        .await
        .unwrap()
        .unwrap();
    let task: daedalus_contract::Task = daedalus_contract::read::from_slice(&m.payload).unwrap();
    assert_eq!(task.id, "t-r");
    assert_eq!(
        wait_results(&js, "replies", 1, WAIT).await.len(),
        1,
        "and the stream has it"
    );
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_400_gives_one_failed_result_and_no_redelivery() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Status(400)).await;
    let proxy = Proxy::start(proxy_config("bad", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "bad", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    let found = wait_results(&js, "bad", 1, WAIT).await;
    let task = &found[0].2;
    assert_eq!(task.status.state, TaskState::Failed);
    let why = task.status.message.as_ref().unwrap().text();
    assert!(why.contains("(400): fake says 400"), "{why}");
    // Terminated, not nacked: once it leaves the stream it can never be redelivered.
    wait_tasks_left(&js, 0).await;
    assert_eq!(fake.calls_for("t-1"), 1, "poison is never retried");
    assert_eq!(results(&js, "bad").await.len(), 1);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn transient_failures_are_retried_until_the_runtime_answers() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::FailFirst(2, 500)).await;
    let proxy = Proxy::start(proxy_config("flaky", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "flaky",
        "m-1",
        task_body("m-1", Some("t-1"), "eventually"),
    )
    .await;
    let found = wait_results(&js, "flaky", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    let calls = fake.calls();
    assert_eq!(calls.len(), 3, "two failures, then success");
    let gap = calls[1].started - calls[0].ended.unwrap();
    assert!(
        gap >= Duration::from_millis(80),
        "the retry waited: {gap:?}"
    );
    let gap2 = calls[2].started - calls[1].ended.unwrap();
    assert!(
        gap2 >= Duration::from_millis(160),
        "the delay doubled: {gap2:?}"
    );
    let metrics = proxy.metrics().await;
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_retried_total"), 2);
    assert_eq!(metric(&metrics, "daedalus_proxy_redeliveries_total"), 2);
    proxy.shutdown().await.unwrap();
}

/// A task the runtime refuses for a spent budget three times, under `MAX_DELIVER=2`: it waits
/// in the stream each time (published again, the delivery acked), spends none of its
/// deliveries, and completes once the budget has room.
#[tokio::test]
async fn a_task_refused_for_budget_waits_in_the_stream_without_spending_deliveries() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::OverBudgetFirst(3)).await;
    let mut config = proxy_config("budget", &nats.url(), &fake.url);
    config.max_deliver = 2;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "budget",
        "m-1",
        task_body("m-1", Some("t-1"), "patient"),
    )
    .await;
    let found = wait_results(&js, "budget", 1, WAIT).await;
    assert_eq!(
        found[0].2.status.state,
        TaskState::Completed,
        "{:?}",
        found[0].2
    );
    let calls = fake.calls();
    assert_eq!(calls.len(), 4, "three refusals, then the answer");
    for pair in calls.windows(2) {
        let gap = pair[1].started - pair[0].ended.unwrap();
        assert!(
            gap >= Duration::from_millis(900),
            "each try waited Retry-After: {gap:?}"
        );
    }
    let metrics = proxy.metrics().await;
    assert_eq!(
        metric(&metrics, "daedalus_proxy_tasks_budget_waits_total"),
        3
    );
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_retried_total"), 0);
    assert_eq!(results(&js, "budget").await.len(), 1, "one result");
    wait_tasks_left(&js, 0).await;
    proxy.shutdown().await.unwrap();
}

/// A task whose budget stays spent fails once its next try would come after `BUDGET_WAIT`,
/// saying why; nothing is left in the stream.
#[tokio::test]
async fn a_task_that_waits_past_budget_wait_fails_saying_why() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::OverBudgetFirst(usize::MAX)).await;
    let mut config = proxy_config("broke", &nats.url(), &fake.url);
    config.budget_wait = Duration::from_secs(2);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "broke", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    let found = wait_results(&js, "broke", 1, WAIT).await;
    let task = &found[0].2;
    assert_eq!(task.status.state, TaskState::Failed);
    let why = task.status.message.as_ref().unwrap().text();
    assert!(
        why.contains("BUDGET_WAIT (2s)") && why.contains("tokens_per_minute"),
        "{why}"
    );
    let tries = fake.calls_for("t-1");
    assert!(
        (2..=4).contains(&tries),
        "about one try a second for 2 s: {tries}"
    );
    let metrics = proxy.metrics().await;
    assert_eq!(
        metric(&metrics, "daedalus_proxy_tasks_budget_waits_given_up_total"),
        1
    );
    wait_tasks_left(&js, 0).await;
    proxy.shutdown().await.unwrap();
}

/// A publisher's own `Daedalus-Budget-Retry-At`, ten days ahead, holds the task no longer than
/// `BUDGET_WAIT`.
#[tokio::test]
async fn a_forged_budget_wait_is_held_no_longer_than_budget_wait() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("forged", &nats.url(), &fake.url);
    config.budget_wait = Duration::from_secs(1);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    let ten_days_ahead = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
        + 10 * 86_400_000;
    let mut headers = HeaderMap::new();
    headers.insert(
        "Daedalus-Budget-Retry-At",
        ten_days_ahead.to_string().as_str(),
    );
    publish_with(
        &js,
        "forged",
        "m-1",
        task_body("m-1", Some("t-1"), "soon"),
        headers,
    )
    .await;
    let found = wait_results(&js, "forged", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_runtime_that_is_down_then_back_completes_the_task() {
    let nats = NatsServer::start();
    let mut fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("downup", &nats.url(), &fake.url);
    config.max_deliver = 20;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    fake.go_away();
    publish(
        &js,
        "downup",
        "m-1",
        task_body("m-1", Some("t-1"), "patience"),
    )
    .await;
    proxy
        .wait_healthz("runtime", serde_json::json!("unhealthy"))
        .await;
    assert!(results(&js, "downup").await.is_empty());
    fake.come_back().await;
    let found = wait_results(&js, "downup", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_runtime_that_never_recovers_gets_a_failed_result_after_max_deliver() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Status(503)).await;
    fake.set_healthy(true);
    let mut config = proxy_config("doomed", &nats.url(), &fake.url);
    config.max_deliver = 3;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "doomed", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    let found = wait_results(&js, "doomed", 1, WAIT).await;
    let task = &found[0].2;
    assert_eq!(task.status.state, TaskState::Failed);
    let why = task.status.message.as_ref().unwrap().text();
    assert!(
        why.starts_with("gave up after 3 deliveries: runtime answered 503"),
        "{why}"
    );
    assert_eq!(fake.calls_for("t-1"), 3);
    // The task is terminated, not left behind.
    wait_tasks_left(&js, 0).await;
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_task_running_three_ack_waits_completes_without_redelivery() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("long", &nats.url(), &fake.url);
    config.ack_wait = Duration::from_secs(2);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    publish(
        &js,
        "long",
        "m-1",
        task_body("m-1", Some("t-1"), "sleep:6500 long"),
    )
    .await;
    let found = wait_results(&js, "long", 1, WAIT).await;
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    // Acked: it can no longer be redelivered, so one call is the final count.
    wait_tasks_left(&js, 0).await;
    assert_eq!(fake.calls_for("t-1"), 1, "progress acks kept the lease");
    let metrics = proxy.metrics().await;
    assert_eq!(metric(&metrics, "daedalus_proxy_redeliveries_total"), 0);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unhealthy_runtime_gets_no_pulls_until_it_recovers() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("sick", &nats.url(), &fake.url);
    // Not ready as soon as the runtime is down.
    config.runtime_down_limit = Duration::ZERO;
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    fake.set_healthy(false);
    proxy
        .wait_healthz("runtime", serde_json::json!("unhealthy"))
        .await;
    publish(&js, "sick", "m-1", task_body("m-1", Some("t-1"), "x")).await;
    // Counted, not timed: five more probes, each answered unhealthy, and still no pull.
    fake.wait_health_probes(5).await;
    assert_eq!(fake.calls().len(), 0, "nothing was pulled while unhealthy");
    assert_eq!(tasks_left(&js).await, 1);
    let healthz = reqwest::get(format!("http://{}/healthz", proxy.addr))
        .await
        .unwrap();
    assert_eq!(healthz.status(), 503);
    fake.set_healthy(true);
    let found = wait_results(&js, "sick", 1, WAIT).await;
    assert_eq!(found.len(), 1);
    proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn poison_bodies_never_loop() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let proxy = Proxy::start(proxy_config("poison", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "poison", "p-1", b"this is not json".to_vec()).await;
    publish(&js, "poison", "p-2", br#"{"hello":"world"}"#.to_vec()).await;
    publish(&js, "poison", "p-3", vec![0, 159, 146, 150, 255, 0, 1]).await;
    publish(
        &js,
        "poison",
        "p-4",
        br#"{"message":{"messageId":"m-4","taskId":"t-4","role":"robot"}}"#.to_vec(),
    )
    .await;
    proxy
        .wait_metric("daedalus_proxy_tasks_deadlettered_total", 3)
        .await;
    wait_results(&js, "poison", 1, WAIT).await;
    // Every message is resolved now: the counts below are final.
    wait_tasks_left(&js, 0).await;
    let found = results(&js, "poison").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2.id, "t-4");
    assert_eq!(found[0].2.status.state, TaskState::Failed);
    assert_eq!(dead_letters(&js).await, 3);
    assert_eq!(tasks_left(&js).await, 0);
    assert!(fake.calls().is_empty(), "poison never reaches the runtime");
    let metrics = proxy.metrics().await;
    assert_eq!(metric(&metrics, "daedalus_proxy_redeliveries_total"), 0);
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_share_the_work_and_never_run_a_task_twice_at_once() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config("shared", &nats.url(), &fake.url);
    config.concurrency = 2;
    let a = Proxy::start(config.clone()).await;
    let b = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    for i in 0..40 {
        publish(
            &js,
            "shared",
            &format!("m-{i}"),
            task_body(&format!("m-{i}"), None, "sleep:50 x"),
        )
        .await;
    }
    let found = wait_results(&js, "shared", 40, WAIT).await;
    assert_eq!(found.len(), 40);
    assert_eq!(
        fake.state
            .overlaps
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(fake.calls().len(), 40, "each task ran once");
    let completed = || async {
        let ma = metric(&a.metrics().await, "daedalus_proxy_tasks_completed_total");
        let mb = metric(&b.metrics().await, "daedalus_proxy_tasks_completed_total");
        (ma, mb)
    };
    daedalus_test_kit::wait_until("40 completions counted", WAIT, || async {
        let (ma, mb) = completed().await;
        ma + mb == 40
    })
    .await;
    let (ma, mb) = completed().await;
    assert!(ma > 0 && mb > 0, "both proxies worked: {ma} + {mb}");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// A runtime's Task in the contract dialect, spaced and ordered its own way.
const CONTRACT_TASK: &str = r#"{ "status": {"state": "completed"},
  "id": "{task_id}", "artifacts": [{"parts": [{"text": "caf\u00e9"}], "artifactId": "a"}] }"#;
/// The same kind of answer in A2A v1 spellings, with a v0.3 `kind`.
const V1_TASK: &str = r#"{"id": "{task_id}", "kind": "task", "status": {"state": "TASK_STATE_FAILED",
  "message": {"message_id": "m", "role": "ROLE_AGENT", "parts": [{"text": "no"}]}}}"#;

#[tokio::test]
async fn a_contract_task_is_stored_byte_for_byte_and_other_spellings_are_rewritten() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Body(CONTRACT_TASK)).await;
    let _proxy = Proxy::start(proxy_config("dialects", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    publish(&js, "dialects", "m-1", task_body("m-1", Some("t-1"), "hi")).await;
    wait_results(&js, "dialects", 1, WAIT).await;
    fake.set_mode(Mode::Body(V1_TASK));
    publish(&js, "dialects", "m-2", task_body("m-2", Some("t-2"), "hi")).await;
    wait_results(&js, "dialects", 2, WAIT).await;

    let stored = stored_results(&js, "dialects").await;
    let payload = |task: &str| {
        stored
            .iter()
            .find(|(subject, _, _)| subject.ends_with(&format!(".{task}")))
            .map_or_else(
                || panic!("{task} has a result"),
                |(_, headers, payload)| (headers.clone(), payload.clone()),
            )
    };
    let (headers, as_sent) = payload("t-1");
    assert_eq!(
        as_sent,
        CONTRACT_TASK.replace("{task_id}", "t-1").as_bytes()
    );
    assert_eq!(header_of(&headers, "Task-State"), Some("completed"));
    let (headers, rewritten) = payload("t-2");
    let rewritten: serde_json::Value = serde_json::from_slice(&rewritten).expect("JSON");
    assert_eq!(
        rewritten,
        serde_json::json!({"id": "t-2", "status": {"state": "failed",
            "message": {"messageId": "m", "role": "agent", "parts": [{"text": "no"}]}}})
    );
    assert_eq!(header_of(&headers, "Task-State"), Some("failed"));
    daedalus_contract::Schema::Task
        .validate(&rewritten)
        .expect("the contract's Task");
}

fn header_of<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(async_nats::HeaderValue::as_str)
}

/// Every shape an agent answers with travels through the proxy to NATS as the contract's Task
/// (the runtime on the `tck` model plays them): file parts by bytes and URL with their names
/// and media types, a data part, a rejected task with its reason, and a Message reply as the
/// completed task holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_shape_reaches_nats_whole() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime_with("shapes", |config| {
        for agent in &mut config.deployment.agents {
            agent.model = daedalus_runtime::config::deployment::ModelRef::Tck;
        }
        config.agent.model = daedalus_runtime::config::deployment::ModelRef::Tck;
    })
    .await;
    let proxy = Proxy::start(proxy_config("shapes", &nats.url(), &runtime)).await;
    let (_client, js) = client(&nats).await;
    let scenarios = [
        "tck-artifact-file-1",
        "tck-artifact-file-url-1",
        "tck-artifact-data-1",
        "tck-reject-task-1",
        "tck-message-response-1",
    ];
    for id in scenarios {
        publish(&js, "shapes", id, task_body(id, None, "shapes")).await;
    }
    let found = wait_results(&js, "shapes", scenarios.len(), WAIT).await;
    let task = |id: &str| {
        found
            .iter()
            .map(|(_, _, t)| t)
            .find(|t| t.id == id)
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    let part = |id: &str| serde_json::to_value(&task(id).artifacts[0].parts[0]).unwrap();
    assert_eq!(
        part("tck-artifact-file-1"),
        serde_json::json!({"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"})
    );
    assert_eq!(
        part("tck-artifact-file-url-1"),
        serde_json::json!({"url": "https://example.com/output.txt", "mediaType": "text/plain",
            "filename": "output.txt"})
    );
    assert_eq!(
        part("tck-artifact-data-1"),
        serde_json::json!({"data": {"key": "value", "count": 42}})
    );
    let rejected = task("tck-reject-task-1");
    assert_eq!(rejected.status.state, TaskState::Rejected);
    assert_eq!(
        rejected
            .status
            .message
            .as_ref()
            .map(daedalus_contract::Message::text),
        Some("rejected".to_owned())
    );
    let replied = task("tck-message-response-1");
    assert_eq!(replied.status.state, TaskState::Completed);
    assert_eq!(
        replied.artifacts[0].parts[0].as_text(),
        Some("Direct message response")
    );
    proxy.shutdown().await.unwrap();
}
