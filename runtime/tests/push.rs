//! Push notifications with real runtime processes, a real webhook server and real stores:
//! a webhook that was down when its task ended gets the end from the restarted runtime
//! (SQLite), and on replicas sharing a NATS KV bucket a webhook hears its task from whichever
//! replica stores its state: the one running it, or the survivor that fails a lost one's.

use std::time::Duration;

use daedalus_test_kit::{A2aClient, NatsServer, Webhook, wait_until};
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
    let env = [("TASKS_DB", tasks_db), ("REPLICA_ID", "r1")];
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

    // A task whose replica is lost: the survivor fails it and tells its webhook.
    let lost = client_a
        .start_task_pushing_to("***SLEEP 60s never", hook.url(), "tok")
        .await;
    wait_until(
        "the webhook hears the task working",
        Duration::from_secs(10),
        || async { !hook.states_of(&lost).is_empty() },
    )
    .await;
    a.child.kill().expect("SIGKILL");
    assert!(
        hook.told(&lost, FAILED, Duration::from_secs(15)).await,
        "{:?}",
        hook.states_of(&lost)
    );
    assert_eq!(client_b.state_of(&lost).await, FAILED);
}
