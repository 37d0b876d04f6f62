//! Push notifications against a real webhook server on loopback: what a webhook gets, in what
//! order, with which credentials; a webhook that is down, slow, refusing or not allowed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::push::AllowList;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use daedalus_contract::{
    AuthenticationInfo, ListPushConfigsRequest, Message, Part, Role, Schema, Task, TaskState,
    TaskStatus,
};
use serde_json::Value;

use super::*;
use crate::stores::tasks::{StoreLimits, TaskStore, TurnStop};

/// What a webhook server was sent, and how it answers.
#[derive(Debug, Default)]
struct Hook {
    /// (headers, body) of each request, in arrival order.
    got: Mutex<Vec<(HeaderMap, Value)>>,
    /// Answer 503 to this many requests first.
    fail_first: Mutex<usize>,
    /// Answer every request with this status instead of 200.
    status: Mutex<Option<StatusCode>>,
    /// Wait this long before answering.
    delay: Mutex<Duration>,
}

impl Hook {
    fn states(&self) -> Vec<String> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .map(|(_, body)| {
                body["task"]["status"]["state"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect()
    }

    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }
}

async fn hooked(State(hook): State<Arc<Hook>>, headers: HeaderMap, body: String) -> StatusCode {
    let delay = *hook.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    {
        let mut fail = hook.fail_first.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return StatusCode::SERVICE_UNAVAILABLE;
        }
    }
    hook.got
        .lock()
        .unwrap()
        .push((headers, serde_json::from_str(&body).unwrap_or(Value::Null)));
    hook.status.lock().unwrap().unwrap_or(StatusCode::OK)
}

/// A webhook server on 127.0.0.1: its state and its URL.
async fn webhook() -> (Arc<Hook>, String) {
    let hook = Arc::new(Hook::default());
    let app = axum::Router::new()
        .route("/hook", post(hooked))
        .with_state(Arc::clone(&hook));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook?secret=q", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (hook, url)
}

fn settings(retry_for: Duration) -> PushSettings {
    PushSettings {
        allow: AllowList::parse(&["127.0.0.1".to_owned()]).unwrap(),
        timeout: Duration::from_secs(5),
        retry_for,
        ..PushSettings::default()
    }
}

fn store() -> TaskStore {
    TaskStore::new(StoreLimits {
        max_tasks: 100,
        max_bytes: 1 << 20,
        ttl: Duration::from_mins(10),
    })
}

fn push_over(store: &TaskStore, retry_for: Duration) -> Push {
    Push::new(settings(retry_for), store, Arc::new(Metrics::new()))
}

fn config(url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: None,
        id: String::new(),
        task_id: String::new(),
        url: url.to_owned(),
        token: Some("tok-1".to_owned()),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".to_owned(),
            credentials: "s3cret".to_owned(),
        }),
    }
}

fn task(id: &str, state: TaskState) -> Task {
    Task {
        id: id.to_owned(),
        context_id: Some("ctx".to_owned()),
        status: TaskStatus::new(state),
        artifacts: Vec::new(),
        history: Some(vec![Message::new("m", Role::User, vec![Part::text("hi")])]),
        metadata: None,
    }
}

/// One turn of task `id` through the store's write handle: stored working, then `end`.
async fn turn(store: &TaskStore, id: &str, end: TaskState) {
    let mut turn = store.open_turn(id).await;
    turn.begin(
        task(id, TaskState::Working),
        TurnStop::new(CancellationToken::new()),
    )
    .await
    .unwrap();
    turn.end(task(id, end), Vec::new()).await;
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..400 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn every_stored_state_reaches_the_webhook_in_order_with_its_credentials() {
    let store = store();
    let push = push_over(&store, Duration::from_secs(30));
    let (hook, url) = webhook().await;
    let caller = Caller::Anyone;
    let kept = push.set_up(&caller, "t-1", config(&url)).await.unwrap();
    assert!(
        !kept.id.is_empty(),
        "the server names a config without an id"
    );
    assert_eq!(kept.task_id, "t-1");
    turn(&store, "t-1", TaskState::InputRequired).await;
    turn(&store, "t-1", TaskState::Completed).await;
    until("four states", || hook.count() == 4).await;
    assert_eq!(
        hook.states(),
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    for (headers, body) in hook.got.lock().unwrap().iter() {
        assert_eq!(headers["authorization"], "Bearer s3cret");
        assert_eq!(headers[send::TOKEN_HEADER], "tok-1");
        assert_eq!(headers["content-type"], "application/json");
        Schema::A2aV1StreamResponse.validate(body).unwrap();
        assert!(body["task"].get("history").is_none(), "{body}");
    }
    let health = push.health();
    assert_eq!((health.delivered, health.waiting), (4, 0));
    // A task without webhooks sends nothing.
    turn(&store, "t-2", TaskState::Completed).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(hook.count(), 4);
}

#[tokio::test]
async fn a_webhook_that_is_down_gets_every_state_in_order_once_it_is_back() {
    let store = store();
    let push = push_over(&store, Duration::from_mins(1));
    let (hook, url) = webhook().await;
    *hook.fail_first.lock().unwrap() = 3;
    push.set_up(&Caller::Anyone, "t-1", config(&url))
        .await
        .unwrap();
    turn(&store, "t-1", TaskState::Completed).await;
    until("both states", || hook.count() == 2).await;
    assert_eq!(
        hook.states(),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    );
    assert_eq!(push.health().retried, 3);
    assert_eq!(push.health().gave_up, 0);
}

#[tokio::test]
async fn a_slow_webhook_holds_up_neither_a_turn_nor_another_webhook() {
    let store = store();
    let push = push_over(&store, Duration::from_mins(1));
    let (slow, slow_url) = webhook().await;
    *slow.delay.lock().unwrap() = Duration::from_secs(3);
    let (fast, fast_url) = webhook().await;
    push.set_up(&Caller::Anyone, "slow", config(&slow_url))
        .await
        .unwrap();
    push.set_up(&Caller::Anyone, "fast", config(&fast_url))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    turn(&store, "slow", TaskState::Completed).await;
    turn(&store, "fast", TaskState::Completed).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the turns only queued their states"
    );
    until("the fast webhook's states", || fast.count() == 2).await;
    assert_eq!(slow.count(), 0, "the slow one is still on its first");
}

#[tokio::test]
async fn a_webhook_that_refuses_is_given_up_at_once_counted_and_shown_without_secrets() {
    let store = store();
    let push = push_over(&store, Duration::from_mins(1));
    let (hook, url) = webhook().await;
    *hook.status.lock().unwrap() = Some(StatusCode::FORBIDDEN);
    push.set_up(&Caller::Anyone, "t-1", config(&url))
        .await
        .unwrap();
    turn(&store, "t-1", TaskState::Completed).await;
    until("two give-ups", || push.health().gave_up == 2).await;
    let health = push.health();
    assert_eq!(health.retried, 0, "a refusal is not asked again");
    let failure = health.last_failure.unwrap();
    assert!(failure.why.contains("403"), "{}", failure.why);
    let shown = serde_json::to_string(&push.health()).unwrap();
    assert!(
        !shown.contains("secret=q") && !shown.contains("s3cret"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_webhook_down_past_the_retry_bound_is_given_up() {
    let store = store();
    let push = push_over(&store, Duration::from_secs(1));
    let (hook, url) = webhook().await;
    *hook.fail_first.lock().unwrap() = usize::MAX;
    push.set_up(&Caller::Anyone, "t-1", config(&url))
        .await
        .unwrap();
    turn(&store, "t-1", TaskState::Completed).await;
    until("both given up", || push.health().gave_up == 2).await;
    assert!(push.health().retried >= 2);
}

#[tokio::test]
async fn private_webhooks_are_refused_unless_allowed_and_names_are_checked_where_they_resolve() {
    let store = store();
    let strict = Push::new(PushSettings::default(), &store, Arc::new(Metrics::new()));
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "ftp://example.com/",
    ] {
        assert!(
            matches!(
                strict.set_up(&Caller::Anyone, "t", config(url)).await,
                Err(PushError::Invalid(_))
            ),
            "{url}"
        );
    }
    // A name passes when set up, and is refused where it resolves (to loopback here), as a
    // name rebound to a private address would be: given up at once, never connected to.
    let (hook, url) = webhook().await;
    let by_name = url.replace("127.0.0.1", "localhost");
    strict
        .set_up(&Caller::Anyone, "t-1", config(&by_name))
        .await
        .unwrap();
    turn(&store, "t-1", TaskState::Completed).await;
    until("a refusal", || strict.health().gave_up >= 1).await;
    let failure = strict.health().last_failure.unwrap();
    assert!(failure.why.contains("loopback"), "{}", failure.why);
    assert_eq!(hook.count(), 0);
}

#[tokio::test]
async fn configs_are_listed_got_replaced_and_deleted_idempotently_for_their_task_only() {
    let store = store();
    let push = push_over(&store, Duration::from_secs(30));
    turn(&store, "t-1", TaskState::Completed).await;
    let anyone = Caller::Anyone;
    let mut named = config("https://hooks.example.com/a");
    named.id = "c-1".to_owned();
    push.create(&anyone, "t-1", named.clone()).await.unwrap();
    let other = push
        .create(&anyone, "t-1", config("https://hooks.example.com/b"))
        .await
        .unwrap();
    assert!(matches!(
        push.create(&anyone, "nobody", config("https://hooks.example.com/a"))
            .await,
        Err(PushError::TaskNotFound(_))
    ));
    let got = push.get(&anyone, "t-1", "c-1").await.unwrap();
    assert_eq!(got.url, "https://hooks.example.com/a");
    named.url = "https://hooks.example.com/a2".to_owned();
    push.create(&anyone, "t-1", named).await.unwrap();
    let list = |size| ListPushConfigsRequest {
        task_id: "t-1".to_owned(),
        page_size: size,
        ..ListPushConfigsRequest::default()
    };
    let all = push.list(&anyone, &list(None)).await.unwrap();
    assert_eq!(all.configs.len(), 2, "c-1 was replaced, not added");
    assert_eq!(all.configs[0].url, "https://hooks.example.com/a2");
    let page = push.list(&anyone, &list(Some(1))).await.unwrap();
    assert_eq!(
        (page.configs.len(), page.next_page_token.as_str()),
        (1, "1")
    );
    push.delete(&anyone, "t-1", "c-1").await.unwrap();
    push.delete(&anyone, "t-1", "c-1").await.unwrap();
    assert!(matches!(
        push.get(&anyone, "t-1", "c-1").await,
        Err(PushError::ConfigNotFound { .. })
    ));
    assert!(push.get(&anyone, "t-1", &other.id).await.is_ok());
}

#[tokio::test]
async fn with_push_off_every_operation_says_so() {
    let store = store();
    let off = Push::new(
        PushSettings {
            enabled: false,
            ..PushSettings::default()
        },
        &store,
        Arc::new(Metrics::new()),
    );
    turn(&store, "t-1", TaskState::Completed).await;
    assert!(matches!(
        off.create(&Caller::Anyone, "t-1", config("https://h.example/"))
            .await,
        Err(PushError::NotSupported)
    ));
    assert!(matches!(
        off.set_up(&Caller::Anyone, "t-1", config("https://h.example/"))
            .await,
        Err(PushError::NotSupported)
    ));
}

#[tokio::test]
async fn retries_are_counted_while_the_webhook_is_down_not_when_the_delivery_ends() {
    let store = store();
    let push = push_over(&store, Duration::from_mins(5));
    let (hook, url) = webhook().await;
    *hook.fail_first.lock().unwrap() = usize::MAX;
    push.set_up(&Caller::Anyone, "t-1", config(&url))
        .await
        .unwrap();
    turn(&store, "t-1", TaskState::Completed).await;
    until("two retries made", || push.health().retried >= 2).await;
    let health = push.health();
    assert_eq!(
        (health.delivered, health.gave_up),
        (0, 0),
        "the delivery is still under way"
    );
    *hook.fail_first.lock().unwrap() = 0;
    until("both states", || hook.count() == 2).await;
}

/// The defect found from outside: a webhook that hangs while many tasks end with large
/// answers, the queue's bytes far below what they hold. Each webhook must end up with its
/// task's end (the newest state is kept, as a body or as the task as it stands), never left
/// on `WORKING`; nothing is given up.
#[tokio::test]
async fn at_the_queue_bound_every_webhook_still_gets_its_tasks_end() {
    let store = TaskStore::new(StoreLimits {
        max_tasks: 1000,
        max_bytes: 64 << 20,
        ttl: Duration::from_mins(10),
    });
    let push = Push::new(
        PushSettings {
            allow: AllowList::parse(&["127.0.0.1".to_owned()]).unwrap(),
            timeout: Duration::from_millis(300),
            retry_for: Duration::from_mins(2),
            queue_bytes: 256 << 10,
            ..PushSettings::default()
        },
        &store,
        Arc::new(Metrics::new()),
    );
    let (hook, url) = webhook().await;
    // Every POST outlives the delivery timeout while the tasks end.
    *hook.delay.lock().unwrap() = Duration::from_secs(5);
    let tasks = 40;
    let answer = "x".repeat(48 << 10);
    for t in 0..tasks {
        let id = format!("t-{t}");
        let mut webhook = config(&url);
        webhook.id = "w".to_owned();
        push.set_up(&Caller::Anyone, &id, webhook).await.unwrap();
        let mut turn = store.open_turn(&id).await;
        turn.begin(
            task(&id, TaskState::Working),
            TurnStop::new(CancellationToken::new()),
        )
        .await
        .unwrap();
        let mut done = task(&id, TaskState::Completed);
        done.artifacts = vec![daedalus_contract::Artifact::text("a", answer.clone())];
        turn.end(done, Vec::new()).await;
    }
    assert!(
        push.health().waiting_bytes <= 256 << 10,
        "{:?}",
        push.health()
    );
    *hook.delay.lock().unwrap() = Duration::ZERO;
    let ended = |id: &str| {
        hook.got.lock().unwrap().iter().any(|(_, body)| {
            body["task"]["id"] == id
                && body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                && body["task"]["artifacts"][0]["parts"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.len() == answer.len())
        })
    };
    for t in 0..tasks {
        let id = format!("t-{t}");
        until(&format!("{id}'s end"), || ended(&id)).await;
    }
    // The last state each webhook got is its task's end.
    let got = hook.got.lock().unwrap();
    for t in 0..tasks {
        let id = format!("t-{t}");
        let last = got
            .iter()
            .rev()
            .find(|(_, body)| body["task"]["id"] == id.as_str())
            .unwrap();
        assert_eq!(last.1["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    }
    drop(got);
    let health = push.health();
    assert_eq!((health.gave_up, health.dropped), (0, 0), "{health:?}");
}

/// Ends `tasks` tasks whose webhook is `url`, each with an answer of `answer_bytes`.
async fn end_tasks_with_webhooks(
    store: &TaskStore,
    push: &Push,
    prefix: &str,
    tasks: usize,
    url: &str,
    answer_bytes: usize,
) {
    for t in 0..tasks {
        let id = format!("{prefix}-{t}");
        let mut webhook = config(url);
        webhook.id = "w".to_owned();
        push.set_up(&Caller::Anyone, &id, webhook).await.unwrap();
        let mut turn = store.open_turn(&id).await;
        turn.begin(
            task(&id, TaskState::Working),
            TurnStop::new(CancellationToken::new()),
        )
        .await
        .unwrap();
        let mut done = task(&id, TaskState::Completed);
        done.artifacts = vec![daedalus_contract::Artifact::text(
            "a",
            "x".repeat(answer_bytes),
        )];
        turn.end(done, Vec::new()).await;
    }
}

/// Whether `hook` got task `id` completed.
fn got_end(hook: &Hook, id: &str) -> bool {
    hook.got.lock().unwrap().iter().any(|(_, body)| {
        body["task"]["id"] == id && body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    })
}

/// The noisy neighbour found from outside: one host that hangs, its webhooks' bodies holding
/// the whole queue, and a webhook on another host got nothing while it hung. The hanging
/// host's waiting bodies become markers: the other host's webhooks get their ends while it
/// still hangs, and once it answers every one of its own webhooks gets its task's end too.
#[tokio::test]
async fn a_hanging_host_leaves_another_hosts_webhooks_their_ends_and_loses_none_of_its_own() {
    let store = TaskStore::new(StoreLimits {
        max_tasks: 1000,
        max_bytes: 64 << 20,
        ttl: Duration::from_mins(10),
    });
    let queue_bytes = 256 << 10;
    let push = Push::new(
        PushSettings {
            allow: AllowList::parse(&["127.0.0.1".to_owned()]).unwrap(),
            timeout: Duration::from_millis(300),
            retry_for: Duration::from_mins(2),
            queue_bytes,
            ..PushSettings::default()
        },
        &store,
        Arc::new(Metrics::new()),
    );
    let (hanging, hanging_url) = webhook().await;
    let (other, other_url) = webhook().await;
    *hanging.delay.lock().unwrap() = Duration::from_mins(10);
    // 200 ends of 48 KiB each: about 40 times what the queue may hold.
    end_tasks_with_webhooks(&store, &push, "h", 200, &hanging_url, 48 << 10).await;
    let health = push.health();
    assert!(health.waiting_bytes <= queue_bytes, "{health:?}");
    assert!(
        health.owed > 100,
        "the waiting bodies became markers: {health:?}"
    );
    assert_eq!((health.gave_up, health.dropped), (0, 0), "{health:?}");
    // Another host's webhooks, with the first one still hanging.
    end_tasks_with_webhooks(&store, &push, "o", 3, &other_url, 48 << 10).await;
    for t in 0..3 {
        let id = format!("o-{t}");
        until(&format!("{id}'s end, the other host hanging"), || {
            got_end(&other, &id)
        })
        .await;
    }
    assert_eq!(hanging.count(), 0, "the first host still hangs");
    // The host answers again: each of its webhooks gets its task's end.
    *hanging.delay.lock().unwrap() = Duration::ZERO;
    for t in 0..200 {
        let id = format!("h-{t}");
        until(&format!("{id}'s end"), || got_end(&hanging, &id)).await;
    }
    let health = push.health();
    assert_eq!((health.gave_up, health.dropped), (0, 0), "{health:?}");
    until("nothing waits or is in delivery", || {
        let h = push.health();
        (h.waiting, h.waiting_bytes, h.delivering, h.delivering_bytes) == (0, 0, 0, 0)
    })
    .await;
}
