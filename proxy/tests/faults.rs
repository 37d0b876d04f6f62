//! Faults the proxy rides out without failing a task the runtime never saw, and without dying:
//! - a runtime SIGKILLed again and again under a queue of tasks (a crash loop);
//! - a proxy started while the tasks stream has no leader (a 3-node cluster, R3 streams);
//! - a result stored while the results stream has no leader;
//! - the agent's consumer deleted under a running proxy.
//!
//! The crash loop's size comes from `CRASHLOOP_TASKS`, `CRASHLOOP_KILLS`, `CRASHLOOP_DOWN_MS`
//! and `CRASHLOOP_UP_MS` (small by default), so the same test runs the full drill:
//! `CRASHLOOP_TASKS=3000 CRASHLOOP_KILLS=7 CRASHLOOP_DOWN_MS=2000 CRASHLOOP_UP_MS=3000 cargo
//! test --release -p daedalus-proxy --test faults crash`.

mod support;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use daedalus_contract::TaskState;
use daedalus_test_kit::{NatsCluster, RuntimeProcess, wait_until, wait_until_some};
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// One JetStream cluster at a time: three nodes each, two at once on a 2-core machine would make
/// elections slow for reasons of their own.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many results each task id has, read until `expected` tasks have one.
async fn results_by_task(
    js: &Context,
    agent: &str,
    expected: usize,
) -> BTreeMap<String, Vec<String>> {
    wait_until_some(
        "every task has a stored result",
        Duration::from_mins(5),
        || async {
            let mut by_task: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (_, _, task) in results(js, agent).await {
                let why = task
                    .status
                    .message
                    .as_ref()
                    .map(daedalus_contract::Message::text)
                    .unwrap_or_default();
                by_task
                    .entry(task.id.clone())
                    .or_default()
                    .push(format!("{}: {why}", task.status.state));
            }
            (by_task.len() >= expected).then_some(by_task)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_runtime_fails_no_task_and_every_task_completes_once() {
    let tasks = knob("CRASHLOOP_TASKS", 600);
    let kills = knob("CRASHLOOP_KILLS", 4);
    let down = Duration::from_millis(knob("CRASHLOOP_DOWN_MS", 1_000) as u64);
    let up = Duration::from_millis(knob("CRASHLOOP_UP_MS", 1_500) as u64);
    let agent = "crashloop";

    let nats = NatsServer::start();
    let mut runtime = RuntimeProcess::start(agent).await;
    let mut config = proxy_config(agent, &nats.url(), &runtime.url());
    config.concurrency = 2;
    // A small delivery budget: the outages must cost none of it. (A task in flight at a kill
    // was received by the runtime and spends one, legitimately.)
    config.max_deliver = 3;
    config.health_interval = Duration::from_secs(2);
    config.retry_base_delay = Duration::from_secs(1);
    config.retry_max_delay = Duration::from_mins(1);
    let proxy = Proxy::start(config).await;
    let (_client, js) = client(&nats).await;
    for i in 0..tasks {
        let id = format!("t-{i:05}");
        publish(
            &js,
            agent,
            &id,
            task_body(&id, Some(&id), &format!("***SLEEP 10ms {id}")),
        )
        .await;
    }

    for _ in 0..kills {
        tokio::time::sleep(up).await;
        runtime.kill();
        tokio::time::sleep(down).await;
        runtime.launch().await;
    }

    let by_task = results_by_task(&js, agent, tasks).await;
    assert_eq!(by_task.len(), tasks);
    let not_once_completed: Vec<_> = by_task
        .iter()
        .filter(|(_, outcomes)| outcomes.len() != 1 || !outcomes[0].starts_with("completed"))
        .collect();
    assert!(
        not_once_completed.is_empty(),
        "every task completes exactly once: {} did not, e.g. {:?}",
        not_once_completed.len(),
        not_once_completed.first()
    );
    let unreached = by_task
        .values()
        .flatten()
        .filter(|o| o.contains("cannot reach the runtime"))
        .count();
    assert_eq!(
        unreached, 0,
        "no result says the runtime could not be reached"
    );
    let last = {
        let mut stream = js.get_stream("AGENT_TASKS").await.expect("tasks stream");
        stream.info().await.expect("info").state.last_sequence
    };
    wait_until("every task is acked", Duration::from_mins(1), || {
        consumer_owes_nothing_up_to(&js, agent, last)
    })
    .await;
    let metrics = proxy.metrics().await;
    assert!(
        metric(&metrics, "daedalus_proxy_runtime_unreached_total") > 0,
        "the drill did hit a down runtime:\n{metrics}"
    );
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_failed_total"), 0);
    eprintln!(
        "crash loop: {tasks} tasks, {kills} kills: outages {}, requests that never reached the runtime {}, tasks held {}, redeliveries {}",
        metric(&metrics, "daedalus_proxy_runtime_outages_total"),
        metric(&metrics, "daedalus_proxy_runtime_unreached_total"),
        metric(&metrics, "daedalus_proxy_tasks_held_total"),
        metric(&metrics, "daedalus_proxy_redeliveries_total"),
    );
    proxy.shutdown().await.expect("the proxy stops cleanly");
}

#[tokio::test]
async fn a_deleted_consumer_is_created_again_and_tasks_flow_on() {
    let nats = NatsServer::start();
    let fake = FakeRuntime::start(Mode::Echo).await;
    let proxy = Proxy::start(proxy_config("keep", &nats.url(), &fake.url)).await;
    let (_client, js) = client(&nats).await;
    let stream = js.get_stream("AGENT_TASKS").await.expect("tasks stream");
    wait_pulls_waiting(&js, "keep", 1).await;
    stream
        .delete_consumer("agent-keep")
        .await
        .expect("the test deletes the consumer");
    proxy
        .wait_metric("daedalus_proxy_consumer_recreated_total", 1)
        .await;
    publish(
        &js,
        "keep",
        "m-1",
        task_body("m-1", Some("t-1"), "still here"),
    )
    .await;
    let found = wait_results(&js, "keep", 1, Duration::from_secs(30)).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    assert_eq!(proxy.healthz().await["consumer"], "ready");
    proxy.shutdown().await.expect("the proxy stops cleanly");
}

/// The name of the node leading `stream` (or, with `consumer`, that consumer), once it has one.
async fn leader_of(js: &Context, stream: &str, consumer: Option<&str>) -> String {
    wait_until_some(
        &format!("{stream} {consumer:?} has a leader"),
        Duration::from_mins(1),
        || async {
            let cluster = match consumer {
                None => js
                    .get_stream(stream)
                    .await
                    .ok()?
                    .info()
                    .await
                    .ok()?
                    .cluster
                    .clone(),
                Some(name) => {
                    let mut c: jetstream::consumer::PullConsumer =
                        js.get_consumer_from_stream(name, stream).await.ok()?;
                    c.info().await.ok()?.cluster.clone()
                }
            };
            cluster.and_then(|c| c.leader).filter(|l| !l.is_empty())
        },
    )
    .await
}

async fn connect_cluster(cluster: &NatsCluster) -> (async_nats::Client, Context) {
    let servers: Vec<async_nats::ServerAddr> = cluster
        .urls()
        .split(',')
        .map(|u| u.parse().expect("a server address"))
        .collect();
    let client = async_nats::connect(servers)
        .await
        .expect("the test connects to the cluster");
    let js = jetstream::new(client.clone());
    (client, js)
}

/// Publishes a task until the cluster acknowledges it (an election may be under way).
async fn publish_surely(js: &Context, agent: &str, id: &str, text: &str) {
    wait_until(
        &format!("{id} is stored"),
        Duration::from_mins(1),
        || async {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", id);
            let body = task_body(id, Some(id), text);
            match js
                .publish_with_headers(format!("agent.tasks.{agent}"), headers, body.into())
                .await
            {
                Ok(ack) => ack.await.is_ok(),
                Err(_) => false,
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_while_the_tasks_stream_has_no_leader_becomes_healthy() {
    let _one = ONE_CLUSTER.lock().await;
    let mut cluster = NatsCluster::start(3);
    let runtime = FakeRuntime::start(Mode::Echo).await;
    let (_client, js) = connect_cluster(&cluster).await;
    // The streams exist (R3), made by the proxy's own setup, as a first pod would.
    let mut setup = proxy_config("elected", &cluster.urls(), &runtime.url);
    setup.streams.replicas = 3;
    daedalus_proxy::nats::ensure_streams(&js, &setup.streams)
        .await
        .expect("streams");
    let leader = leader_of(&js, "AGENT_TASKS", None).await;
    cluster.kill(cluster.index_of(&leader).expect("a node"));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut proxy = tokio::process::Command::new(env!("CARGO_BIN_EXE_daedalus-proxy"))
        .env_clear()
        .env("AGENT_NAME", "elected")
        .env("NATS_URL", cluster.urls())
        .env("RUNTIME_URL", &runtime.url)
        .env("STREAM_REPLICAS", "3")
        .env("PROXY_PORT", "0")
        .env("PROXY_HOST", "127.0.0.1")
        .env("HEALTH_INTERVAL", "100ms")
        .env("PULL_EXPIRES", "1s")
        .env("STARTUP_TIMEOUT", "60s")
        .env("LOG_LEVEL", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the proxy starts");
    let mut lines = BufReader::new(proxy.stdout.take().expect("piped")).lines();
    let consuming = tokio::time::timeout(Duration::from_secs(90), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("consuming tasks") {
                return Ok(());
            }
        }
        Err("the proxy's output ended")
    })
    .await;
    assert_eq!(
        consuming,
        Ok(Ok(())),
        "the proxy consumed once another node led; exit: {:?}",
        proxy.try_wait()
    );
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    tokio::spawn({
        let log = std::sync::Arc::clone(&log);
        async move {
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().expect("log").push(line);
            }
        }
    });
    assert_ne!(leader_of(&js, "AGENT_TASKS", None).await, leader);
    publish_surely(&js, "elected", "t-1", "after the election").await;
    let found = wait_results(&js, "elected", 1, Duration::from_mins(1)).await;
    assert_eq!(
        found.len(),
        1,
        "the proxy's log: {:#?}",
        log.lock().expect("log")
    );
    assert_eq!(found[0].2.status.state, TaskState::Completed);
    assert_eq!(
        proxy.try_wait().expect("waits"),
        None,
        "the proxy still runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_published_while_the_results_stream_has_no_leader_is_stored_once() {
    const AGENT: &str = "reselected";
    let _one = ONE_CLUSTER.lock().await;
    let mut cluster = NatsCluster::start(3);
    let runtime = FakeRuntime::start(Mode::Echo).await;
    let mut config = proxy_config(AGENT, &cluster.urls(), &runtime.url);
    config.streams.replicas = 3;
    // Short, as in the drill that found the fault: storing the result outlasts it.
    config.ack_wait = Duration::from_secs(3);
    config.startup_timeout = Duration::from_mins(1);
    let proxy = Proxy::start(config).await;
    let (client, js) = connect_cluster(&cluster).await;

    // The node to kill leads the results stream only: the task's lease and acks stay served.
    let results_leader = wait_until_some(
        "the results stream is led by a node leading nothing else of the agent",
        Duration::from_mins(1),
        || async {
            let tasks = leader_of(&js, "AGENT_TASKS", None).await;
            let consumer = leader_of(&js, "AGENT_TASKS", Some(&format!("agent-{AGENT}"))).await;
            let results = leader_of(&js, "AGENT_RESULTS", None).await;
            if results != tasks && results != consumer {
                return Some(results);
            }
            let _ = client
                .request("$JS.API.STREAM.LEADER.STEPDOWN.AGENT_RESULTS", "".into())
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            None
        },
    )
    .await;

    publish_surely(&js, AGENT, "t-1", "sleep:1500 stored through an election").await;
    wait_until(
        "the runtime has the task",
        Duration::from_secs(30),
        || async { runtime.calls_for("t-1") == 1 },
    )
    .await;
    let killed = cluster.index_of(&results_leader).expect("a node");
    cluster.kill(killed);

    // Elections take seconds; the old proxy gave up after ACK_WAIT and naked the task,
    // which ran it again. Counted: one call, at least one publish retried, one result. The
    // result is read by a direct get (any replica answers it): a reader's consumer could be
    // placed on the dead node.
    let stored = wait_until_some("the result is stored", Duration::from_secs(45), || async {
        let stream = js.get_stream("AGENT_RESULTS").await.ok()?;
        stream
            .direct_get_last_for_subject(format!("agent.results.{AGENT}.t-1"))
            .await
            .ok()
    })
    .await;
    let task: daedalus_contract::Task =
        daedalus_contract::read::from_slice(&stored.payload).expect("a Task");
    assert_eq!(task.status.state, TaskState::Completed);
    let metrics = proxy.metrics().await;
    assert!(
        metric(&metrics, "daedalus_proxy_publish_retries_total") >= 1,
        "the result's first publish met the election:\n{metrics}"
    );
    wait_until("the task is acked", Duration::from_secs(30), || {
        consumer_owes_nothing_up_to(&js, AGENT, 1)
    })
    .await;
    assert_eq!(runtime.calls_for("t-1"), 1, "no nak, no second run");
    // Counting every stored result takes a reading consumer: with the node back (a reader
    // placed on its replica may see nothing until it has caught up, never more).
    cluster.restart(killed);
    let count = wait_until_some(
        "the results can be counted",
        Duration::from_secs(30),
        || async {
            let n = try_stored_results(&js, AGENT).await?.len();
            (n >= 1).then_some(n)
        },
    )
    .await;
    assert_eq!(count, 1, "exactly one result");
    assert_eq!(metric(&metrics, "daedalus_proxy_tasks_retried_total"), 0);
    proxy.shutdown().await.expect("the proxy stops cleanly");
}
