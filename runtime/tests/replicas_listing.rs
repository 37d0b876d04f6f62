//! Replicas on one NATS KV bucket, as their callers see them: `ListTasks` through any replica
//! selects from every task of the bucket, not only those its memory keeps whole; and of two
//! replicas continuing one waiting task at once, one wins and the other hears why.

use std::time::Duration;

use daedalus_test_kit::a2a_client::{id_of, state_of};
use daedalus_test_kit::wait_until;
use serde_json::Value;
use support::kv_store::Store;

mod support;

const COMPLETED: &str = "TASK_STATE_COMPLETED";
const INPUT_REQUIRED: &str = "TASK_STATE_INPUT_REQUIRED";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_lists_every_task_of_the_bucket_not_only_those_its_memory_keeps() {
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    // B keeps at most 5 tasks whole in memory.
    let (_b, on_b) = store.replica_with("replica-b", &[("MAX_TASKS", "5")]);
    let mut ids = Vec::new();
    for n in 0..30 {
        ids.push(id_of(&on_a.run_task(&format!("task {n}")).await));
    }
    ids.sort();
    // Every page, walked to its end through B (100 a page, and 7 a page).
    let listed: Vec<String> = on_b.list_states().await.into_keys().collect();
    assert_eq!(listed, ids, "B lists every task of the bucket");
    let mut walked = Vec::new();
    let mut token = String::new();
    loop {
        let page = on_b
            .call(
                "ListTasks",
                serde_json::json!({"pageSize": 7, "pageToken": token, "includeArtifacts": true}),
            )
            .await["result"]
            .clone();
        assert_eq!(page["totalSize"], 30, "{page}");
        for task in page["tasks"].as_array().unwrap() {
            assert_eq!(state_of(task), COMPLETED);
            assert!(
                task["artifacts"][0]["parts"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("task ")),
                "read whole from the bucket when memory lacks it: {task}"
            );
            walked.push(id_of(task));
        }
        token = page["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    walked.sort();
    assert_eq!(walked, ids, "no task twice, none missing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_continuing_one_waiting_task_at_once_one_wins_and_the_other_hears_why() {
    let store = Store::start();
    let (a, on_a) = store.replica("replica-a");
    let (b, on_b) = store.replica("replica-b");
    for round in 0..6 {
        let id = id_of(&on_a.run_task("***INPUT which one?").await);
        wait_until("B sees the task wait", Duration::from_secs(5), || async {
            on_b.state_of(&id).await == INPUT_REQUIRED
        })
        .await;
        let (first, second) = tokio::join!(
            on_a.send_to_task(&id, "***SLEEP 300ms from a"),
            on_b.send_to_task(&id, "***SLEEP 300ms from b"),
        );
        let answers = [&first, &second];
        let won: Vec<&&Value> = answers
            .iter()
            .filter(|a| a.get("result").is_some())
            .collect();
        let lost: Vec<&&Value> = answers
            .iter()
            .filter(|a| a["error"]["code"] == -32004)
            .collect();
        if (won.len(), lost.len()) != (1, 1) {
            let logs = |r: &support::process::Runtime| {
                r.drain_logs()
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "round {round}: one wins, the other is UnsupportedOperationError: {first} {second}\n\
                 A's log:\n{}\nB's log:\n{}",
                logs(&a),
                logs(&b)
            );
        }
        let winner = &won[0]["result"]["task"];
        assert_eq!(state_of(winner), COMPLETED);
        let said = winner["artifacts"][0]["parts"][0]["text"].clone();
        // One story: both replicas and the store hold the winner's end.
        for via in [&on_a, &on_b] {
            wait_until("both replicas agree", Duration::from_secs(5), || async {
                via.get(&id).await.is_some_and(|t| {
                    state_of(&t) == COMPLETED && t["artifacts"][0]["parts"][0]["text"] == said
                })
            })
            .await;
        }
        assert_eq!(store.stored_state(&id).await.as_deref(), Some("completed"));
    }
}
