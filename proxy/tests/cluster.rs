//! A 3-node JetStream cluster with R3 streams: 1,000 tasks flow through two proxies while the
//! tasks stream's leader node is killed (SIGKILL) and later brought back. Every task gets
//! exactly one stored result; none is lost, none is left in the work queue (a task whose ack
//! was lost in the election comes back after ACK_WAIT, and its second result is deduplicated).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};
use daedalus_test_kit::NatsCluster;
use support::*;

const AGENT: &str = "clustered";
const TASKS: usize = 1_000;
/// Short, so that a task whose ack the cluster lost during the election is delivered again
/// (and its result deduplicated) within the test.
const ACK_WAIT: Duration = Duration::from_secs(3);
/// How long one publish may keep retrying through a leader election.
const PUBLISH_DEADLINE: Duration = Duration::from_mins(1);

/// Publishes task `i` until the cluster acknowledges it (the same `Nats-Msg-Id` each time, so
/// a retry of a publish that did land is a duplicate, not a second task).
async fn publish_surely(js: &Context, i: usize) {
    let id = format!("task-{i:04}");
    let deadline = tokio::time::Instant::now() + PUBLISH_DEADLINE;
    loop {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let body = task_body(&id, Some(&id), &format!("payload {i}"));
        let acked = match js
            .publish_with_headers(format!("agent.tasks.{AGENT}"), headers, body.into())
            .await
        {
            Ok(ack) => ack.await.is_ok(),
            Err(_) => false,
        };
        if acked {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} was not acknowledged within {PUBLISH_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server name of the tasks stream's leader, once the stream has one.
async fn tasks_leader(js: &Context) -> String {
    daedalus_test_kit::wait_until_some(
        "the tasks stream has a leader",
        Duration::from_secs(30),
        || async {
            let mut stream = js.get_stream("AGENT_TASKS").await.ok()?;
            let info = stream.info().await.ok()?;
            info.cluster
                .clone()
                .and_then(|c| c.leader)
                .filter(|l| !l.is_empty())
        },
    )
    .await
}

/// Results stored for each task id, read until `expected` distinct tasks have one.
async fn results_by_task(js: &Context, expected: usize) -> BTreeMap<String, usize> {
    daedalus_test_kit::wait_until_some(
        "every task has a stored result",
        Duration::from_mins(3),
        || async {
            let found = tokio::time::timeout(Duration::from_secs(20), results(js, AGENT))
                .await
                .ok()?;
            let mut by_task = BTreeMap::new();
            for (_, _, task) in found {
                *by_task.entry(task.id.clone()).or_insert(0) += 1;
            }
            (by_task.len() >= expected).then_some(by_task)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_tasks_survive_the_stream_leader_being_killed_and_brought_back() {
    let mut cluster = NatsCluster::start(3);
    let urls = cluster.urls();
    let runtime = FakeRuntime::start(Mode::Echo).await;
    let mut proxies = [
        Proxy::start({
            let mut c = proxy_config(AGENT, &urls, &runtime.url);
            c.streams.replicas = 3;
            c.ack_wait = ACK_WAIT;
            c
        })
        .await,
        Proxy::start({
            let mut c = proxy_config(AGENT, &urls, &runtime.url);
            c.streams.replicas = 3;
            c.ack_wait = ACK_WAIT;
            c
        })
        .await,
    ];
    for proxy in &mut proxies {
        proxy.wait_consuming().await;
    }
    let servers: Vec<async_nats::ServerAddr> = urls
        .split(',')
        .map(|u| u.parse().expect("a server address"))
        .collect();
    let client = async_nats::connect(servers)
        .await
        .expect("the test connects to the cluster");
    let js = jetstream::new(client);
    let mut stream = js.get_stream("AGENT_TASKS").await.expect("tasks stream");
    let replicas = stream.info().await.expect("info").config.num_replicas;
    assert_eq!(replicas, 3, "the proxies made R3 streams");

    for i in 0..TASKS / 3 {
        publish_surely(&js, i).await;
    }
    let leader = tasks_leader(&js).await;
    let killed = cluster
        .index_of(&leader)
        .unwrap_or_else(|| panic!("{leader} is a node of the cluster"));
    cluster.kill(killed);
    let successor = daedalus_test_kit::wait_until_some(
        "another node leads the tasks stream",
        Duration::from_secs(30),
        || async { Some(tasks_leader(&js).await).filter(|l| *l != leader) },
    )
    .await;
    assert_ne!(successor, leader);
    for i in TASKS / 3..2 * TASKS / 3 {
        publish_surely(&js, i).await;
    }
    cluster.restart(killed);
    for i in 2 * TASKS / 3..TASKS {
        publish_surely(&js, i).await;
    }

    let by_task = results_by_task(&js, TASKS).await;
    assert_eq!(by_task.len(), TASKS, "every task has a result");
    let doubled: Vec<_> = by_task.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        doubled.is_empty(),
        "exactly one stored result each: {doubled:?}"
    );
    // An ack lost in the election leaves its task pending until ACK_WAIT passes and it is
    // delivered again: its result is a duplicate (same Nats-Msg-Id), and this ack lands. The
    // consumer then owes nothing: every task up to the last was acked or terminated. (The
    // stream's own copy of an acked task can outlive the election for a while: a clustered
    // work queue removes it by a proposal of the consumer's leader, which an election can
    // strand until the server's periodic interest check — nats-server #5270, #6673. That is
    // the server's bookkeeping, not a task left to deliver.)
    let last_task = stream.info().await.expect("info").state.last_sequence;
    daedalus_test_kit::wait_until(
        "every task is acked or terminated",
        Duration::from_mins(1),
        || async { consumer_owes_nothing_up_to(&js, AGENT, last_task).await },
    )
    .await;
    let by_task = results_by_task(&js, TASKS).await;
    assert!(
        by_task.values().all(|n| *n == 1),
        "redeliveries stored no second result"
    );
    assert_eq!(dead_letters(&js).await, 0);
    for proxy in proxies {
        proxy.shutdown().await.expect("the proxy stops cleanly");
    }
}
