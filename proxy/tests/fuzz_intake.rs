//! A seeded, bounded black-box fuzz run of the proxy's NATS intake: mutated bodies (ids with
//! CR/LF, thousands of characters, broken JSON, directives), hostile `traceparent`,
//! `tracestate` and `reply-to` values, with ordinary tasks interleaved. Real nats-server, the
//! real runtime.
//!
//! Oracles: the proxy keeps running and consuming; every ordinary task gets exactly one,
//! right result; every hostile message leaves the work queue (a result or a dead letter);
//! no Task is published anywhere but the agent's own result subjects and the allowed reply
//! subject. `FUZZ_SEED` and `FUZZ_ROUNDS` replay or deepen a run.

mod support;

use std::time::Duration;

use async_nats::HeaderMap;
use daedalus_contract::{Task, TaskState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use support::*;

const AGENT: &str = "fz";
const WAIT: Duration = Duration::from_mins(1);

fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x05EE_D001)
}

fn rounds() -> usize {
    std::env::var("FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

fn hostile_id(rng: &mut StdRng, round: usize) -> String {
    match rng.random_range(0..6) {
        0 => format!("id-{round}"),
        1 => format!("a\nb-{round}"),
        2 => format!("t\r\nPUB x 1-{round}"),
        3 => format!("{}-{round}", "x".repeat(rng.random_range(100..6000))),
        4 => format!("*.>-{round} ü"),
        _ => format!("b64-{round}"),
    }
}

fn body(rng: &mut StdRng, round: usize) -> Vec<u8> {
    let text = [
        "hello",
        "***SLEEP 5ms x",
        "***FAIL on purpose",
        "***INPUT which?",
        "***SLEEP 153722867280912929m1hrs6148914691236517205333ms1281023894007607h",
    ][rng.random_range(0..5)];
    let mut message =
        json!({"messageId": hostile_id(rng, round), "role": "user", "parts": [{"text": text}]});
    if rng.random_bool(0.5) {
        message["taskId"] = json!(hostile_id(rng, round));
    }
    if rng.random_bool(0.2) {
        message["contextId"] = json!(hostile_id(rng, round));
    }
    let mut bytes = serde_json::to_vec(&json!({"message": message})).expect("JSON");
    if rng.random_bool(0.4) {
        for _ in 0..rng.random_range(1..5) {
            if bytes.is_empty() {
                break;
            }
            let at = rng.random_range(0..bytes.len());
            match rng.random_range(0..3) {
                0 => bytes[at] = rng.random(),
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
        }
    }
    bytes
}

fn headers(rng: &mut StdRng, inbox: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let visible = |rng: &mut StdRng, max: usize| -> String {
        let len = rng.random_range(0..max);
        (0..len)
            .map(|_| char::from(rng.random_range(0x20u8..0x7f)))
            .collect()
    };
    if rng.random_bool(0.5) {
        let value = if rng.random_bool(0.5) {
            format!(
                "00-{:032x}-{:016x}-01",
                rng.random::<u128>(),
                rng.random::<u64>()
            )
        } else {
            visible(rng, 80)
        };
        headers.insert("traceparent", value.as_str());
    }
    if rng.random_bool(0.3) {
        let value = visible(rng, 700);
        headers.insert("tracestate", value.as_str());
    }
    if rng.random_bool(0.6) {
        let reply_to = match rng.random_range(0..9) {
            0 => format!("agent.results.{AGENT}.stolen"),
            1 => format!("agent.tasks.{AGENT}"),
            2 => format!("agent.deadletter.{AGENT}"),
            3 => "$JS.API.STREAM.INFO.AGENT_TASKS".to_owned(),
            4 => ">".to_owned(),
            5 => "_INBOX.>".to_owned(),
            6 => format!("_INBOX.{}", "a".repeat(5_000)),
            7 => inbox.to_owned(),
            _ => visible(rng, 40),
        };
        headers.insert("reply-to", reply_to.as_str());
    }
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_task_messages_never_stop_misdirect_or_lose_work() {
    let nats = NatsServer::start();
    let (runtime, _stop) = real_runtime_with(AGENT, |c| {
        c.limits.request_timeout = Duration::from_secs(2);
    })
    .await;
    let mut config = proxy_config(AGENT, &nats.url(), &runtime);
    config.concurrency = 4;
    let proxy = Proxy::start(config).await;
    let (client, js) = client(&nats).await;
    let mut everything = client.subscribe(">").await.expect("subscribes");
    let inbox = client.new_inbox();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut ordinary = Vec::new();
    for round in 0..rounds() {
        if round % 10 == 0 {
            let id = format!("ordinary-{round}");
            publish(
                &js,
                AGENT,
                &id,
                task_body(&id, Some(&id), &format!("text {round}")),
            )
            .await;
            ordinary.push(id);
            continue;
        }
        let body = body(&mut rng, round);
        let headers = headers(&mut rng, &inbox);
        js.publish_with_headers(format!("agent.tasks.{AGENT}"), headers, body.into())
            .await
            .expect("publish sent")
            .await
            .expect("publish acknowledged");
    }

    // Every message leaves the work queue.
    let deadline = tokio::time::Instant::now() + WAIT;
    while tasks_left(&js).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {}: {} tasks never left the queue",
            seed(),
            tasks_left(&js).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !proxy.task.is_finished(),
        "seed {}: the proxy stopped",
        seed()
    );
    assert_eq!(proxy.healthz().await["consuming"], true);

    // Every ordinary task has exactly one result, and the right one.
    let found = results(&js, AGENT).await;
    for id in &ordinary {
        let theirs: Vec<&Task> = found
            .iter()
            .filter(|(_, _, t)| &t.id == id)
            .map(|(_, _, t)| t)
            .collect();
        assert_eq!(
            theirs.len(),
            1,
            "seed {}: {id} has {} results",
            seed(),
            theirs.len()
        );
        assert_eq!(theirs[0].status.state, TaskState::Completed);
        let n = id.trim_start_matches("ordinary-");
        assert_eq!(
            theirs[0].artifacts[0].parts[0].as_text(),
            Some(format!("text {n}").as_str())
        );
    }

    // Nothing went anywhere else.
    let stray = misdirected_results(&client, &mut everything, AGENT).await;
    assert!(
        stray.is_empty(),
        "seed {}: results published outside the allowed subjects: {stray:?}",
        seed()
    );
    proxy.shutdown().await.expect("the proxy stops cleanly");
}
