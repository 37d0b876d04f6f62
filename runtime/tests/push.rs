//! Push notifications with real runtime processes, a real webhook server and real stores:
//! a webhook that was down when its task ended gets the end from the restarted runtime
//! (SQLite), on replicas sharing a NATS KV bucket a webhook hears its task from whichever
//! replica stores its state (the one running it, or the survivor that fails a lost one's), and
//! one webhook host that hangs costs no other webhook its ends, nor the runtime its memory.

use std::time::Duration;

use daedalus_test_kit::{A2aClient, NatsServer, Webhook, rss_bytes, wait_until};
use serde_json::Value;
use support::process::{Runtime, runtime};

mod support;

const COMPLETED: &str = "TASK_STATE_COMPLETED";
const FAILED: &str = "TASK_STATE_FAILED";

/// A runtime that may call webhooks on loopback, with more environment.
fn pushing_runtime(env: &[(&str, &str)]) -> (Runtime, A2aClient) {
    let mut builder = runtime()
        .env("PUSH_ALLOW_HOSTS", "127.0.0.1")
        .env("PUSH_RETRY_FOR", "1h");
    for (key, value) in env {
        builder = builder.env(key, value);
    }
    let process = builder.start();
    let client = A2aClient::new(process.url("/"));
    (process, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_down_when_its_task_ended_gets_the_end_after_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let tasks_db = dir.path().join("tasks.sqlite");
    let tasks_db = tasks_db.to_str().unwrap();
    // No REPLICA_ID: the restarted runtime, on another port, has another default name, and
    // still owes the webhook the end (it is alone on its store).
    let env = [("TASKS_DB", tasks_db)];
    let hook = Webhook::start().await;
    hook.set_down(true);

    let (mut first, client) = pushing_runtime(&env);
    let id = client
        .start_task_pushing_to("***SLEEP 200ms done", hook.url(), "s3cret")
        .await;
    wait_until("the task completes", Duration::from_secs(10), || async {
        client.state_of(&id).await == COMPLETED
    })
    .await;
    wait_until(
        "the webhook is asked for the end",
        Duration::from_secs(10),
        || async { hook.refused() >= 2 },
    )
    .await;
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    assert!(
        hook.taken().is_empty(),
        "the webhook took nothing while down"
    );

    hook.set_down(false);
    let (_second, _) = pushing_runtime(&env);
    assert!(
        hook.told(&id, COMPLETED, Duration::from_secs(15)).await,
        "the restarted runtime delivers the end the webhook had not taken: {:?}",
        hook.states_of(&id)
    );
    let end = hook
        .taken()
        .into_iter()
        .find(|n| n.state().as_deref() == Some(COMPLETED))
        .unwrap();
    assert_eq!(end.headers["authorization"], "Bearer s3cret");
    assert_eq!(end.body["task"]["artifacts"][0]["parts"][0]["text"], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_shared_kv_a_webhook_hears_its_task_from_whichever_replica_stores_it() {
    let nats = NatsServer::start();
    let tasks_db = format!("{}/push-tasks", nats.url());
    let replica = |name: &'static str| {
        pushing_runtime(&[
            ("TASKS_DB", tasks_db.as_str()),
            ("REPLICA_ID", name),
            ("REPLICA_LEASE", "2s"),
        ])
    };
    let (mut a, client_a) = replica("a");
    let (_b, client_b) = replica("b");
    let hook = Webhook::start().await;

    // A webhook set up through B for a task running on A: A stores the end, and delivers it.
    let id = client_a.start_task("***SLEEP 1500ms done").await;
    let created = client_b.push_to(&id, hook.url()).await;
    assert!(created.get("result").is_some(), "{created}");
    assert!(
        hook.told(&id, COMPLETED, Duration::from_secs(15)).await,
        "{:?}",
        hook.states_of(&id)
    );

    // A task whose replica is lost: the survivor resumes its turn (durable turns) and tells
    // its webhook each state it stores, to the end; never a failure.
    let lost = client_a
        .start_task_pushing_to("***SLEEP 2s resumed", hook.url(), "tok")
        .await;
    wait_until(
        "the webhook hears the task working",
        Duration::from_secs(10),
        || async { !hook.states_of(&lost).is_empty() },
    )
    .await;
    a.child.kill().expect("SIGKILL");
    assert!(
        hook.told(&lost, COMPLETED, Duration::from_secs(20)).await,
        "{:?}",
        hook.states_of(&lost)
    );
    assert!(
        !hook.states_of(&lost).iter().any(|s| s == FAILED),
        "{:?}",
        hook.states_of(&lost)
    );
    assert_eq!(client_b.state_of(&lost).await, COMPLETED);
}

/// The drill: 40 tasks, each with a webhook that keeps going down and coming back, and the
/// runtime killed (SIGKILL) once every task has ended and a quarter of the ends got through,
/// then started again on its SQLite file.
/// Every task's end reaches the webhook, and no webhook hears a task go back in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_flapping_webhook_and_a_crash_every_end_reaches_its_webhook_in_order() {
    const TASKS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let tasks_db = dir.path().join("tasks.sqlite");
    let tasks_db = tasks_db.to_str().unwrap();
    let env = [("TASKS_DB", tasks_db), ("REPLICA_ID", "r1")];
    let hook = std::sync::Arc::new(Webhook::start().await);
    let flapping = tokio_util::sync::CancellationToken::new();
    let flapper = {
        let (hook, stop) = (std::sync::Arc::clone(&hook), flapping.clone());
        tokio::spawn(async move {
            let mut down = false;
            while !stop.is_cancelled() {
                down = !down;
                hook.set_down(down);
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    let (mut first, client) = pushing_runtime(&env);
    let mut ids = Vec::new();
    for n in 0..TASKS {
        ids.push(
            client
                .start_task_pushing_to(
                    &format!("***SLEEP {}ms done {n}", n * 10),
                    hook.url(),
                    "tok",
                )
                .await,
        );
    }
    for id in &ids {
        wait_until("every task ends", Duration::from_secs(20), || async {
            client.state_of(id).await == COMPLETED
        })
        .await;
    }
    // Some ends get through the flapping before the crash; the others wait for the restart.
    let delivered = |hook: &Webhook| {
        ids.iter()
            .filter(|id| hook.states_of(id).iter().any(|s| s == COMPLETED))
            .count()
    };
    wait_until(
        "a quarter of the ends arrive through the flapping",
        Duration::from_secs(20),
        || async { delivered(&hook) >= TASKS / 4 },
    )
    .await;
    first.child.kill().expect("SIGKILL");
    first.child.wait().expect("reaped");
    let before_restart = ids
        .iter()
        .filter(|id| hook.states_of(id).iter().any(|s| s == COMPLETED))
        .count();
    let (_second, _) = pushing_runtime(&env);
    flapping.cancel();
    flapper.await.unwrap();
    hook.set_down(false);
    for id in &ids {
        assert!(
            hook.told(id, COMPLETED, Duration::from_secs(30)).await,
            "task {id}'s end was lost: {:?} ({before_restart} of {TASKS} ends had arrived before the crash)",
            hook.states_of(id)
        );
        let states = hook.states_of(id);
        let ended_at = states.iter().position(|s| s == COMPLETED).unwrap();
        assert!(
            states[ended_at..].iter().all(|s| s == COMPLETED),
            "task {id} went back in time: {states:?}"
        );
    }
    eprintln!(
        "push drill: {TASKS} of {TASKS} ends delivered ({before_restart} before the crash, the rest after the restart); {} refused while down, {} notifications taken",
        hook.refused(),
        hook.taken().len()
    );
}

/// The runtime's `/healthz`, its `push` object.
async fn push_health(process: &Runtime) -> Value {
    let health: Value = reqwest::get(process.url("/healthz"))
        .await
        .expect("/healthz answers")
        .json()
        .await
        .expect("/healthz is JSON");
    health["push"].clone()
}

/// Sends `tasks` tasks, each answered with `text` (the passthrough echoes it) and pushing to
/// `url`; answers their ids once each has completed.
async fn offer(client: &A2aClient, tasks: usize, text: &str, url: &str) -> Vec<String> {
    let mut ids = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        ids.push(client.start_task_pushing_to(text, url, "s3cret").await);
    }
    for id in &ids {
        wait_until("the task completes", Duration::from_secs(30), || async {
            client.state_of(id).await == COMPLETED
        })
        .await;
    }
    ids
}

/// The noisy neighbour, as a user with many tenants met it: with an 8 MiB push queue, one
/// webhook host that hangs and hundreds of tasks ending with 384 KiB answers pushed to it, the
/// runtime gave up 140 states, 67 webhooks never got their task's end, and a webhook on another
/// host got nothing while the first hung. Now: the other host's webhooks get their ends while
/// the first hangs, every webhook of the hanging host gets its end once it answers, nothing is
/// given up, and a second load as large as the first adds far less memory than it offers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hanging_webhook_host_costs_no_other_webhook_its_ends_and_memory_stays_bounded() {
    let hanging = Webhook::start().await;
    hanging.set_hanging(true);
    let other = Webhook::start().await;
    // Conversations in a SQLite file, as by default (in memory, they would grow with every
    // answer kept, by design).
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions.sqlite");
    let (process, client) = pushing_runtime(&[
        ("PUSH_QUEUE_BYTES", "8MiB"),
        ("TASK_MEMORY", "8MiB"),
        ("PUSH_TIMEOUT", "2s"),
        ("SESSIONS_DB", sessions.to_str().unwrap()),
    ]);
    let pid = process.child.id();
    let base = rss_bytes(pid);
    let answer = "x".repeat(384 << 10);
    let load = 200;
    let offered_mib = (load * answer.len()) >> 20;
    let mut ids = offer(&client, load, &answer, hanging.url()).await;
    let after_first = rss_bytes(pid);
    ids.extend(offer(&client, load, &answer, hanging.url()).await);
    let after_second = rss_bytes(pid);
    let grew_mib = after_second.saturating_sub(after_first) >> 20;
    eprintln!(
        "runtime RSS: {} MiB at the start, {} MiB after the first load, {} MiB after the second",
        base >> 20,
        after_first >> 20,
        after_second >> 20
    );
    assert!(
        grew_mib * 3 < offered_mib as u64,
        "the second load ({offered_mib} MiB of answers) grew the runtime by {grew_mib} MiB: \
         bounded by the queue and the deliveries in flight, not by what is offered"
    );
    let health = push_health(&process).await;
    assert!(
        health["waiting_bytes"].as_u64().unwrap() <= 8 << 20,
        "{health}"
    );
    assert!(health["owed"].as_u64().unwrap() > 0, "{health}");

    // Another host's webhooks, with the first one still hanging.
    let small = offer(&client, 3, "small", other.url()).await;
    for id in &small {
        assert!(
            other.told(id, COMPLETED, Duration::from_secs(10)).await,
            "a webhook on another host gets its end while the first hangs: {:?}",
            other.states_of(id)
        );
    }

    // The host answers again: every one of its webhooks gets its task's end.
    hanging.set_hanging(false);
    for id in &ids {
        assert!(
            hanging.told(id, COMPLETED, Duration::from_mins(2)).await,
            "task {id}'s webhook gets its end: {:?}",
            hanging.states_of(id)
        );
    }
    let health = push_health(&process).await;
    assert_eq!(
        (health["gave_up"].as_u64(), health["dropped"].as_u64()),
        (Some(0), Some(0)),
        "{health}"
    );
}
