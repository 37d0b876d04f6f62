//! The task store with the real binary: `TASKS_DB` as a SQLite file keeps tasks across a
//! restart, and a task the crash cut is resumed, or with `TURN_MAX_RESUMES=0` reported failed,
//! never left working by a turn that is gone; two replicas on
//! one NATS KV bucket read, follow and cancel each other's tasks; on one replica in memory, a
//! cancel racing a turn's end gets one answer, the one the task keeps. A restart on SQLite
//! reads back only the tasks left running; the others are read when asked for.

use std::time::Duration;

use daedalus_test_kit::a2a_client::{id_of, state_of, state_told};
use daedalus_test_kit::{A2aClient, Canceled, SseEvents};
use serde_json::{Value, json};
use support::process::runtime;

mod support;

/// A stream's results until it ends (within a minute).
async fn heard(mut stream: SseEvents) -> Vec<Value> {
    tokio::time::timeout(Duration::from_mins(1), async {
        let mut results = Vec::new();
        while let Some(event) = stream.next_json().await {
            results.push(event["result"].clone());
        }
        results
    })
    .await
    .expect("the stream ends")
}

fn last_state(results: &[Value]) -> String {
    results
        .last()
        .and_then(state_told)
        .expect("at least one event")
}

#[tokio::test]
async fn a_sqlite_task_store_keeps_tasks_across_a_crash_and_fails_the_one_it_cut_when_it_may_not_resume()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.sqlite");
    let start = || {
        runtime()
            .env("TASKS_DB", db.to_str().unwrap())
            .env("REPLICA_ID", "replica-a")
            .env("TURN_MAX_RESUMES", "0")
            .start()
    };
    let mut first = start();
    let on_first = A2aClient::new(first.url("/"));
    let done = on_first.run_task("kept").await;
    assert_eq!(state_of(&done), "TASK_STATE_COMPLETED");
    let running_id = on_first.start_task("***SLEEP 600s never").await;
    assert_eq!(on_first.state_of(&running_id).await, "TASK_STATE_WORKING");
    first.child.kill().expect("killed");
    first.wait_exit(Duration::from_secs(10));

    let second = start();
    let on_second = A2aClient::new(second.url("/"));
    let kept = on_second.get(&id_of(&done)).await.expect("kept");
    assert_eq!(state_of(&kept), "TASK_STATE_COMPLETED", "{kept}");
    assert_eq!(kept["artifacts"][0]["parts"][0]["text"], "kept");
    let cut = on_second.get(&running_id).await.expect("kept");
    assert_eq!(state_of(&cut), "TASK_STATE_FAILED", "{cut}");
    let why = cut["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("restarted"), "{why}");
    let subscribe = on_second
        .call("SubscribeToTask", json!({"id": running_id}))
        .await;
    assert_eq!(
        subscribe["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION",
        "a subscriber learns it is over: {subscribe}"
    );
    assert_eq!(on_second.list_states().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_nats_kv_store_share_tasks_their_events_and_cancels() {
    let nats = daedalus_test_kit::NatsServer::start();
    let tasks_db = format!("{}/shared-tasks", nats.url());
    let start = |replica: &str| {
        runtime()
            .env("TASKS_DB", &tasks_db)
            .env("REPLICA_ID", replica)
            .start()
    };
    let mut a = start("replica-a");
    let b = start("replica-b");
    let (on_a, on_b) = (A2aClient::new(a.url("/")), A2aClient::new(b.url("/")));

    // A task started on A is read, and followed to its end, through B.
    let id = on_a.start_task("***SLEEP 1500ms across replicas").await;
    assert_eq!(on_b.state_of(&id).await, "TASK_STATE_WORKING");
    let told = heard(on_b.subscribe(&id).await).await;
    assert_eq!(
        told[0]["task"]["id"],
        id.as_str(),
        "the Task first: {told:?}"
    );
    assert_eq!(last_state(&told), "TASK_STATE_COMPLETED", "{told:?}");
    let text: String = told
        .iter()
        .filter_map(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "across replicas", "no chunk lost: {told:?}");
    assert_eq!(on_b.state_of(&id).await, "TASK_STATE_COMPLETED");

    // A cancel sent to B reaches the turn running on A.
    let slow = on_a.start_task("***SLEEP 600s never").await;
    let Canceled::Task(canceled) = on_b.cancel(&slow).await else {
        panic!("canceled through B");
    };
    assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(on_a.state_of(&slow).await, "TASK_STATE_CANCELED");

    // A crashes mid-task: B resumes the turn once A's lease runs out. B's subscriber hears it
    // go on to its end, never a failure, and so does A once restarted.
    let cut = on_a.start_task("***SLEEP 2s resumed").await;
    let mut following = on_b.subscribe(&cut).await;
    following.next_json().await.expect("the task first");
    let listening = tokio::spawn(heard(following));
    a.child.kill().expect("killed");
    a.wait_exit(Duration::from_secs(10));
    let told = listening.await.expect("joined");
    assert_eq!(last_state(&told), "TASK_STATE_COMPLETED", "{told:?}");
    assert!(
        told.iter()
            .all(|r| state_told(r).as_deref() != Some("TASK_STATE_FAILED")),
        "no failure in between: {told:?}"
    );
    let a = start("replica-a");
    assert_eq!(
        A2aClient::new(a.url("/")).state_of(&cut).await,
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(on_b.state_of(&cut).await, "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_replica_a_cancel_racing_the_end_is_canceled_only_when_it_won() {
    use futures::StreamExt;

    let replica = runtime().start();
    let client = A2aClient::new(replica.url("/"));
    let raced: Vec<(String, Canceled)> = futures::stream::iter(0..200_u64)
        .map(|i| {
            let client = client.clone();
            async move {
                let started = tokio::time::Instant::now();
                let id = client.start_task(&format!("***SLEEP 40ms raced {i}")).await;
                // From 20 ms before the turn's end to 20 ms after it.
                tokio::time::sleep_until(started + Duration::from_millis(20 + i * 40 / 200)).await;
                (id.clone(), client.cancel(&id).await)
            }
        })
        .buffer_unordered(10)
        .collect()
        .await;
    let (mut canceled, mut completed) = (0, 0);
    for (id, answer) in raced {
        let kept = client.state_of(&id).await;
        match answer {
            Canceled::Task(task) => {
                canceled += 1;
                assert_eq!(state_of(&task), "TASK_STATE_CANCELED", "{task}");
                assert_eq!(kept, "TASK_STATE_CANCELED");
            }
            Canceled::Refused { reason, message } => {
                completed += 1;
                assert_eq!(reason, "TASK_NOT_CANCELABLE", "{message}");
                assert_eq!(kept, "TASK_STATE_COMPLETED");
            }
        }
    }
    println!("200 cancels raced on one replica: {canceled} canceled, {completed} completed first");
    assert!(canceled > 0 && completed > 0, "the drill raced both ways");
}

#[tokio::test]
async fn a_task_the_crash_cut_is_resumed_on_a_sqlite_store_once_and_in_its_own_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.sqlite");
    let start = || {
        runtime()
            .env("TASKS_DB", db.to_str().unwrap())
            .env("REPLICA_ID", "replica-a")
            .start()
    };
    let mut first = start();
    let on_first = A2aClient::new(first.url("/"));
    let id = on_first.start_task("***SLEEP 3s resumed").await;
    assert_eq!(on_first.state_of(&id).await, "TASK_STATE_WORKING");
    first.child.kill().expect("killed");
    first.wait_exit(Duration::from_secs(10));

    let second = start();
    let on_second = A2aClient::new(second.url("/"));
    let mut task = on_second.get(&id).await.expect("kept");
    for _ in 0..200 {
        if state_of(&task) != "TASK_STATE_WORKING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        task = on_second.get(&id).await.expect("kept");
    }
    assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{task}");
    let history = task["history"].as_array().cloned().unwrap_or_default();
    let users = history.iter().filter(|m| m["role"] == "ROLE_USER").count();
    assert_eq!(users, 1, "the message is not added twice: {task}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_sqlite_reads_back_the_running_tasks_and_the_others_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.sqlite");
    let start = || {
        runtime()
            .env("TASKS_DB", db.to_str().unwrap())
            .env("TURN_MAX_RESUMES", "0")
            .start()
    };
    let mut first = start();
    let on_first = A2aClient::new(first.url("/"));
    let mut finished = Vec::new();
    for n in 0..40 {
        finished.push(id_of(&on_first.run_task(&format!("finished {n}")).await));
    }
    let cut = on_first.start_task("***SLEEP 600s never").await;
    assert_eq!(on_first.state_of(&cut).await, "TASK_STATE_WORKING");
    assert_eq!(first.metric("daedalus_runtime_tasks_in_memory").await, 41);
    first.child.kill().expect("killed");
    first.wait_exit(Duration::from_secs(10));

    let second = start();
    let in_memory = || second.metric("daedalus_runtime_tasks_in_memory");
    assert_eq!(
        in_memory().await,
        1,
        "only the task the crash cut is read back"
    );
    let on_second = A2aClient::new(second.url("/"));
    // Listed from the file, each task once, none read into memory for it.
    let listed = on_second.list_states().await;
    assert_eq!(listed.len(), 41, "{listed:?}");
    assert!(
        finished
            .iter()
            .all(|id| listed[id] == "TASK_STATE_COMPLETED")
    );
    assert_eq!(listed[&cut], "TASK_STATE_FAILED");
    assert_eq!(in_memory().await, 1);
    // Asked for, a finished task is read, and kept.
    let old = on_second.get(&finished[7]).await.expect("found");
    assert_eq!(old["artifacts"][0]["parts"][0]["text"], "finished 7");
    assert_eq!(in_memory().await, 2);
}
