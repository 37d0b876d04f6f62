//! Replicas on one NATS KV task store tell one story about every task: the drills an operator
//! runs with two (and three) real runtime processes on a real JetStream KV bucket, one test
//! per fault of issue 33:
//!
//! 1. and 8. every replica lists every task as it ended, followed from elsewhere or not;
//! 2. and 3. a cancel racing a turn's end gets one answer, the same on every replica, and is
//!    `canceled` only when the cancel won;
//! 4. reading a task never ends a subscription to it;
//! 5. a subscriber to a task waiting for input hears a cancel or an answer from any replica;
//! 6. and 7. a lost replica's running tasks fail in the store within its lease, counted from
//!    the crash, for every replica and a replacement of another name;
//!
//! and the order of every end: a subscriber that hears a task end finds the store holding it;
//! a storm of subscribers coming and going through either replica and either binding hears
//! every streamed answer once, whole;
//! a task larger than the store takes gets a precise error and loses nothing; and turns that
//! end while NATS is down are stored once it is back, and nobody is failed for the outage.
//!
//! `DAEDALUS_RUNTIME_UNDER_TEST=<binary>` runs the drills against another build.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use daedalus_test_kit::a2a_client::{ends_stream, id_of, state_of, state_told};
use daedalus_test_kit::{A2aClient, Canceled, SseEvents, wait_until};
use futures::StreamExt;
use serde_json::Value;
use support::kv_store::Store;

mod support;

/// The replicas' lease in these drills (renewed every 400 ms).
const LEASE: Duration = Duration::from_secs(2);
/// From a crash to the lost replica's tasks failed in the store, by `docs/stores.md`: the lease
/// and one renewal period; and time for a loaded machine on top.
const LOST_WITHIN: Duration = Duration::from_millis(2_400 + 3_000);

const COMPLETED: &str = "TASK_STATE_COMPLETED";
const CANCELED: &str = "TASK_STATE_CANCELED";
const FAILED: &str = "TASK_STATE_FAILED";
const WORKING: &str = "TASK_STATE_WORKING";
const INPUT_REQUIRED: &str = "TASK_STATE_INPUT_REQUIRED";

/// The stream's results until it ends, or what came within `within` if it does not.
async fn heard_until_end(stream: &mut SseEvents, within: Duration) -> Vec<Value> {
    let mut heard = Vec::new();
    let _ = tokio::time::timeout(within, async {
        while let Some(event) = stream.next_json().await {
            heard.push(event["result"].clone());
        }
    })
    .await;
    heard
}

/// The state the last result of a stream told.
fn last_told(heard: &[Value]) -> String {
    heard.last().and_then(state_told).unwrap_or_default()
}

/// Whether the stream tells anything more within a short while (it should not).
async fn tells_more_soon(stream: &mut SseEvents) -> bool {
    tokio::time::timeout(Duration::from_millis(300), stream.next_json())
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_1_and_8_every_replica_lists_every_task_as_it_ended() {
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(on_a.start_task(&format!("***SLEEP 700ms task {i}")).await);
    }
    // B follows half of them to their end: it reads them from the store to do so.
    let followers: Vec<_> = ids[..6]
        .iter()
        .map(|id| {
            let (on_b, id) = (on_b.clone(), id.clone());
            tokio::spawn(async move {
                let mut stream = on_b.subscribe(&id).await;
                heard_until_end(&mut stream, Duration::from_secs(30)).await
            })
        })
        .collect();
    for follower in followers {
        let heard = follower.await.expect("joined");
        assert_eq!(last_told(&heard), COMPLETED, "{heard:?}");
    }
    for id in &ids {
        wait_until("the task ends", Duration::from_secs(30), || {
            let (on_a, id) = (on_a.clone(), id.clone());
            async move { on_a.state_of(&id).await == COMPLETED }
        })
        .await;
    }
    for (name, replica) in [("A", &on_a), ("B", &on_b)] {
        let listed = replica.list_states().await;
        let shown: BTreeMap<&String, Option<&String>> =
            ids.iter().map(|id| (id, listed.get(id))).collect();
        assert!(
            shown.values().all(|s| s.is_some_and(|s| s == COMPLETED)),
            "ListTasks on {name} shows every task completed: {shown:?}"
        );
        for id in &ids {
            assert_eq!(replica.state_of(id).await, COMPLETED, "GetTask on {name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_2_and_3_a_cancel_racing_the_end_gets_one_answer_on_every_replica() {
    const TASKS: i64 = 240;
    const TURN_MS: i64 = 60;
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    // Each cancel lands somewhere from 25 ms before the turn's end to 25 ms after it; most
    // go through the other replica, every fourth through the one running the task.
    let raced: Vec<(String, Canceled)> = futures::stream::iter(0..TASKS)
        .map(|i| {
            let (on_a, on_b) = (on_a.clone(), on_b.clone());
            async move {
                let started = tokio::time::Instant::now();
                let id = on_a
                    .start_task(&format!("***SLEEP {TURN_MS}ms raced {i}"))
                    .await;
                let offset = TURN_MS - 25 + (i * 50 / TASKS);
                let at = started + Duration::from_millis(u64::try_from(offset).unwrap());
                tokio::time::sleep_until(at).await;
                let through = if i % 4 == 0 { &on_a } else { &on_b };
                (id.clone(), through.cancel(&id).await)
            }
        })
        .buffer_unordered(12)
        .collect()
        .await;
    let listed_on_a = on_a.list_states().await;
    let listed_on_b = on_b.list_states().await;
    let (mut canceled, mut finished) = (0, 0);
    for (id, answer) in &raced {
        let ended_as = match answer {
            Canceled::Task(task) => {
                canceled += 1;
                assert_eq!(
                    state_of(task),
                    CANCELED,
                    "a cancel answers with a canceled task only (fault 3): {task}"
                );
                CANCELED
            }
            Canceled::Refused { reason, message } => {
                finished += 1;
                assert_eq!(reason, "TASK_NOT_CANCELABLE", "{message}");
                COMPLETED
            }
        };
        let told = [
            on_a.state_of(id).await,
            on_b.state_of(id).await,
            listed_on_a.get(id).cloned().unwrap_or_default(),
            listed_on_b.get(id).cloned().unwrap_or_default(),
        ];
        assert!(
            told.iter().all(|s| s == ended_as),
            "task {id}: the cancel said {ended_as}, GetTask on A and B and ListTasks on A and B say {told:?} (fault 2)"
        );
    }
    println!("{TASKS} cancels raced: {canceled} canceled, {finished} had completed first");
    assert!(
        canceled > 0 && finished > 0,
        "the drill raced both ways: {canceled} canceled, {finished} completed first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4_reading_a_task_never_ends_a_subscription_to_it() {
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    let asked = on_a.run_task("***INPUT which one?").await;
    assert_eq!(state_of(&asked), INPUT_REQUIRED);
    let id = id_of(&asked);
    let mut streams = Vec::new();
    for via in [&on_a, &on_b] {
        let mut stream = via.subscribe(&id).await;
        let first = stream.next_json().await.expect("the task first");
        assert_eq!(
            state_told(&first["result"]).as_deref(),
            Some(INPUT_REQUIRED)
        );
        streams.push(stream);
    }
    for _ in 0..5 {
        for via in [&on_a, &on_b] {
            assert_eq!(via.state_of(&id).await, INPUT_REQUIRED);
            via.list_states().await;
        }
    }
    for stream in &mut streams {
        assert!(
            !tells_more_soon(stream).await,
            "nothing changed, so nothing is told and the stream stays open"
        );
    }
    assert!(matches!(on_b.cancel(&id).await, Canceled::Task(_)));
    for stream in &mut streams {
        let heard = heard_until_end(stream, Duration::from_secs(20)).await;
        assert_eq!(last_told(&heard), CANCELED, "{heard:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_5_a_subscriber_to_a_waiting_task_hears_a_cancel_or_an_answer_from_any_replica() {
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    // Canceled through the other replica, each way round.
    for (subscribed, canceling) in [(&on_a, &on_b), (&on_b, &on_a)] {
        let id = id_of(&on_a.run_task("***INPUT which one?").await);
        let mut stream = subscribed.subscribe(&id).await;
        stream.next_json().await.expect("the task first");
        assert!(matches!(canceling.cancel(&id).await, Canceled::Task(_)));
        let heard = heard_until_end(&mut stream, Duration::from_secs(20)).await;
        assert_eq!(last_told(&heard), CANCELED, "{heard:?}");
    }
    // Answered through the other replica: the subscriber hears the turn through to its end.
    let id = id_of(&on_a.run_task("***INPUT which one?").await);
    let mut stream = on_a.subscribe(&id).await;
    stream.next_json().await.expect("the task first");
    let answered = on_b.continue_task(&id, "the blue one").await;
    assert_eq!(state_of(&answered), COMPLETED);
    let heard = heard_until_end(&mut stream, Duration::from_secs(20)).await;
    assert_eq!(last_told(&heard), COMPLETED, "{heard:?}");
    let told: String = heard
        .iter()
        .filter_map(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert!(
        told.ends_with("the blue one"),
        "the answer is told: {heard:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_6_and_7_a_lost_replicas_running_tasks_fail_in_the_store_within_its_lease_when_turns_are_not_resumed()
 {
    // With TURN_MAX_RESUMES=0 a lost replica's turns are failed, not resumed (durable turns,
    // the default, are tested in `durable_turns.rs`).
    let store = Store::start();
    let no_resume = [("TURN_MAX_RESUMES", "0")];
    let (mut a, on_a) = store.replica_with("replica-a", &no_resume);
    let (_b, on_b) = store.replica_with("replica-b", &no_resume);
    let mut ids = Vec::new();
    for i in 0..40 {
        ids.push(on_a.start_task(&format!("***SLEEP 600s cut {i}")).await);
    }
    let mut followers = Vec::new();
    for id in &ids[..20] {
        let mut stream = on_b.subscribe(id).await;
        stream.next_json().await.expect("the task first");
        followers.push(stream);
    }
    a.child.kill().expect("SIGKILL");
    let crashed = Instant::now();
    a.wait_exit(Duration::from_secs(10));
    for id in &ids {
        wait_until("B says the lost replica's task failed", LOST_WITHIN, || {
            let (on_b, id) = (on_b.clone(), id.clone());
            async move { on_b.state_of(&id).await == FAILED }
        })
        .await;
    }
    println!(
        "every task of the lost replica failed in the store {} ms after the crash (lease {LEASE:?})",
        crashed.elapsed().as_millis()
    );
    for mut stream in followers {
        let heard = heard_until_end(&mut stream, Duration::from_secs(2)).await;
        assert_eq!(
            last_told(&heard),
            FAILED,
            "the follower heard it: {heard:?}"
        );
    }
    let listed = on_b.list_states().await;
    for id in &ids {
        assert_eq!(
            listed.get(id).map(String::as_str),
            Some(FAILED),
            "ListTasks on B"
        );
        assert_eq!(store.stored_state(id).await.as_deref(), Some("failed"));
    }
    let why = on_b.get(&ids[0]).await.expect("kept")["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(why.contains("replica-a") && why.contains("lost"), "{why}");
    // A replacement of another name agrees.
    let (_c, on_c) = store.replica_with("replica-c", &no_resume);
    let listed = on_c.list_states().await;
    for id in &ids {
        assert_eq!(on_c.state_of(id).await, FAILED);
        assert_eq!(listed.get(id).map(String::as_str), Some(FAILED));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_a_subscriber_hears_is_in_the_store_already() {
    let store = Store::start();
    let (_a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    let cases = [
        ("***SLEEP 300ms done", None, COMPLETED, "completed"),
        ("***SLEEP 300ms ***FAIL no", None, FAILED, "failed"),
        (
            "***SLEEP 300ms ***INPUT which one?",
            None,
            INPUT_REQUIRED,
            "input-required",
        ),
        ("***SLEEP 600s never", Some(&on_a), CANCELED, "canceled"),
        ("***SLEEP 600s never", Some(&on_b), CANCELED, "canceled"),
    ];
    for (text, canceled_by, told, stored) in cases {
        let id = on_a.start_task(text).await;
        let mut streams = Vec::new();
        for via in [&on_a, &on_b] {
            let mut stream = via.subscribe(&id).await;
            stream.next_json().await.expect("the task first");
            streams.push(stream);
        }
        if let Some(canceling) = canceled_by {
            assert!(matches!(canceling.cancel(&id).await, Canceled::Task(_)));
        }
        for stream in &mut streams {
            let mut end = None;
            while let Some(event) = stream.next_json().await {
                if ends_stream(&event["result"]) {
                    end = Some(event["result"].clone());
                    // Heard: the store must hold it already.
                    assert_eq!(
                        store.stored_state(&id).await.as_deref(),
                        Some(stored),
                        "{text}: heard {told} before the store held it"
                    );
                    break;
                }
            }
            assert_eq!(end.as_ref().and_then(state_told).as_deref(), Some(told));
        }
    }
}

/// A message of `n` bytes of text.
fn text_of(n: usize) -> String {
    "x".repeat(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_larger_than_the_store_takes_gets_a_precise_error_and_loses_nothing() {
    let store = Store::start();
    let (a, on_a) = store.replica("replica-a");
    let (_b, on_b) = store.replica("replica-b");
    // 1.5 MB: no entry of the bucket (1 MB, NATS's max_payload) can hold it.
    let huge = text_of(1_500_000);
    let refused = on_a
        .call(
            "SendMessage",
            serde_json::json!({"message": {"messageId": "huge", "role": "ROLE_USER",
                "parts": [{"text": huge}]}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{}", refused["error"]);
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("at most"), "the limit is named: {said}");
    let contract = reqwest::Client::new()
        .post(a.url("/"))
        .json(
            &serde_json::json!({"message": {"messageId": "huge-2", "taskId": "huge-2",
            "role": "user", "parts": [{"text": huge}]}}),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(
        contract.status(),
        413,
        "the contract binding says why, and the proxy does not retry"
    );
    // 600 KB fits when the turn begins; its echo makes the task too large to end so.
    let echoed = on_a.run_task(&text_of(600_000)).await;
    assert_eq!(state_of(&echoed), FAILED, "{}", echoed["status"]);
    let id = id_of(&echoed);
    let why = echoed["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("more than the task store takes"), "{why}");
    assert_eq!(on_b.state_of(&id).await, FAILED, "every replica agrees");
    assert_eq!(store.stored_state(&id).await.as_deref(), Some("failed"));
    // Both replicas go on as before.
    for via in [&on_a, &on_b] {
        assert_eq!(state_of(&via.run_task("after").await), COMPLETED);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_that_end_while_nats_is_down_are_stored_once_it_is_back_and_nobody_is_failed() {
    let mut store = Store::start();
    let (a, on_a) = store.replica("replica-a");
    let (b, on_b) = store.replica("replica-b");
    let ids = [
        on_a.start_task("***SLEEP 1s through the outage").await,
        on_a.start_task("***SLEEP 1s ***FAIL in the outage").await,
    ];
    store.nats.kill();
    // Longer than an end keeps trying (10 s from the turn's end, 1 s in) and than any lease:
    // the ends are in memory only, and every replica was cut off.
    tokio::time::sleep(Duration::from_secs(13)).await;
    for id in &ids {
        assert_ne!(on_a.state_of(id).await, WORKING, "the turn ended on A");
    }
    store.nats.restart();
    for (id, ended) in ids.iter().zip([COMPLETED, FAILED]) {
        for via in [&on_a, &on_b] {
            wait_until(
                "the end is stored and told",
                Duration::from_secs(20),
                || {
                    let (via, id) = (via.clone(), id.clone());
                    async move { via.state_of(&id).await == ended }
                },
            )
            .await;
        }
        let listed = on_b.list_states().await;
        assert_eq!(
            listed.get(id).map(String::as_str),
            Some(ended),
            "ListTasks on B"
        );
    }
    assert_eq!(
        store.stored_state(&ids[0]).await.as_deref(),
        Some("completed")
    );
    for replica in [&a, &b] {
        wait_until(
            "/healthz: lease held, watch live",
            Duration::from_secs(20),
            || {
                let url = replica.url("/healthz");
                async move {
                    let health: Value = reqwest::get(&url)
                        .await
                        .expect("up")
                        .json()
                        .await
                        .expect("JSON");
                    health["tasks"]["lease_held"] == true && health["tasks"]["watch_live"] == true
                }
            },
        )
        .await;
    }
    assert_eq!(
        state_of(&on_b.run_task("after the outage").await),
        COMPLETED
    );
}

/// The text a stream rebuilds to so far, and whether it has ended: results read with
/// `daedalus_contract`'s rebuilder, as a client would.
fn rebuilt(results: &[Value]) -> (String, Option<String>) {
    use daedalus_contract::{StreamEvent, TaskRebuilder};
    let mut rebuilder = TaskRebuilder::new();
    for result in results {
        let bytes = serde_json::to_vec(result).expect("JSON");
        let event: StreamEvent =
            daedalus_contract::read::from_slice(&bytes).expect("a stream response");
        rebuilder
            .apply(&event)
            .unwrap_or_else(|e| panic!("{e}: {results:?}"));
    }
    let task = rebuilder.task().cloned();
    let text = task
        .as_ref()
        .and_then(|t| t.artifacts.first())
        .map(|a| a.parts.iter().filter_map(|p| p.as_text()).collect())
        .unwrap_or_default();
    let ended = rebuilder
        .is_final()
        .then(|| task.map(|t| t.status.state.to_string()).unwrap_or_default());
    (text, ended)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_subscribers_coming_and_going_hears_every_answer_once_and_whole() {
    use daedalus_fake_llm::{FakeLlm, Reply};
    use rand::{Rng, SeedableRng};

    const TASKS: usize = 40;
    let answer = (0..40)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let fake = FakeLlm::start("sk-storm", &["gpt-storm"]).await;
    fake.script((0..TASKS).map(|_| Reply::Trickled {
        text: answer.clone(),
        every: Duration::from_millis(20),
    }));
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("agents.yaml");
    std::fs::write(
        &config,
        daedalus_test_kit::AgentsYaml::on_openai(&fake.openai_base_url, "sk-storm", "gpt-storm")
            .agent("storm", "{ instruction: Answer. }")
            .build(),
    )
    .expect("written");
    let config = config.to_string_lossy().into_owned();
    let env = [("AGENTS_CONFIG", config.as_str()), ("AGENT_NAME", "storm")];
    let store = Store::start();
    let (a, _) = store.replica_with("replica-a", &env);
    let (b, _) = store.replica_with("replica-b", &env);
    let urls = [a.url(""), b.url("")];
    let seed: u64 = rand::rng().random();
    println!("storm seed {seed}");
    let http = reqwest::Client::new();
    let storms: Vec<_> = (0..TASKS)
        .map(|i| {
            let (http, urls, answer) = (http.clone(), urls.clone(), answer.clone());
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed + i as u64);
            tokio::spawn(async move {
                // Sent as a stream through either replica, then the sender goes away.
                let base = &urls[i % 2];
                let started = http
                    .post(format!("{base}/"))
                    .header("A2A-Version", "1.0")
                    .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1,
                        "method": "SendStreamingMessage", "params": {"message": {
                        "messageId": format!("storm-{i}"), "role": "ROLE_USER",
                        "parts": [{"text": "tell me"}]}}}))
                    .send()
                    .await
                    .expect("sent");
                let mut opening = SseEvents::of(started);
                let first = opening.next_json().await.expect("the task first");
                let id = id_of(&first["result"]["task"]);
                drop(opening);
                let mut subscriptions = 0;
                loop {
                    subscriptions += 1;
                    let base = &urls[rng.random_range(0..2)];
                    let rest = rng.random_bool(0.5);
                    let response = if rest {
                        http.get(format!("{base}/a2a/rest/tasks/{id}:subscribe"))
                            .header("A2A-Version", "1.0")
                            .send()
                            .await
                    } else {
                        http.post(format!("{base}/"))
                            .header("A2A-Version", "1.0")
                            .json(&serde_json::json!({"jsonrpc": "2.0", "id": 2,
                                "method": "SubscribeToTask", "params": {"id": id}}))
                            .send()
                            .await
                    }
                    .expect("subscribed");
                    if !response.status().is_success() {
                        // The task ended between two subscriptions: nothing more to follow.
                        return (id, subscriptions, None);
                    }
                    let mut stream = SseEvents::of(response);
                    let keep = rng.random_range(1..6);
                    let mut results = Vec::new();
                    while results.len() < keep || keep == 5 {
                        let Some(event) = stream.next_json().await else {
                            break;
                        };
                        results.push(if rest { event } else { event["result"].clone() });
                    }
                    let (text, ended) = rebuilt(&results);
                    if ended.is_some() {
                        return (id, subscriptions, Some(text));
                    }
                    assert!(
                        answer.starts_with(&text),
                        "task {id}: a subscription told {text:?}, not a start of the answer"
                    );
                }
            })
        })
        .collect();
    let mut heard_whole = 0;
    let mut total_subscriptions = 0;
    for storm in storms {
        let (id, subscriptions, whole) = storm.await.expect("joined");
        total_subscriptions += subscriptions;
        if let Some(text) = whole {
            assert_eq!(text, answer, "task {id}: no text lost or doubled");
            heard_whole += 1;
        }
        for url in &urls {
            let task = A2aClient::new(format!("{url}/"))
                .get(&id)
                .await
                .expect("kept");
            assert_eq!(state_of(&task), COMPLETED);
            assert_eq!(
                task["artifacts"][0]["parts"][0]["text"].as_str(),
                Some(answer.as_str())
            );
        }
    }
    println!(
        "{TASKS} streamed tasks, {total_subscriptions} subscriptions, {heard_whole} followed to the end"
    );
    assert!(
        heard_whole >= TASKS / 4,
        "the storms reached ends: {heard_whole}"
    );
}
