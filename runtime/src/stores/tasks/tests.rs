//! The store through its one write handle: memory's bounds and listing, the order of every
//! end (stored, then told), and compare-and-set against another writer, on a backend in
//! memory whose writes can be held at a gate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Message, Part, Role, StreamEvent, Task, TaskState, TaskStatus};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::platform::identity::Caller;
use crate::stores::tasks::turn::final_update;

fn limits(max_tasks: usize, max_bytes: usize) -> StoreLimits {
    StoreLimits {
        max_tasks,
        max_bytes,
        ttl: Duration::from_hours(1),
    }
}

fn task(id: &str, context: &str, state: TaskState, at: &str) -> Task {
    let mut status = TaskStatus::new(state);
    status.timestamp = Some(at.to_owned());
    Task {
        id: id.into(),
        context_id: Some(context.into()),
        status,
        artifacts: Vec::new(),
        history: Some(vec![Message::new(
            format!("{id}-m"),
            Role::User,
            vec![Part::text("hi")],
        )]),
        metadata: None,
    }
}

fn now_task(id: &str, state: TaskState) -> Task {
    task(id, "c", state, "2026-01-01T00:00:00Z")
}

/// Ends `task` through the store's write handle, as an idle end would.
async fn put(store: &TaskStore, task: Task) -> Ended {
    let closing = vec![final_update(&task)];
    store
        .open_turn(&task.id.clone())
        .await
        .end(task, closing)
        .await
}

/// Begins a turn of `id` (working): the handle, and the token that stops it.
async fn begin(store: &TaskStore, id: &str) -> (TaskTurn, TurnStop) {
    let mut turn = store.open_turn(id).await;
    let stop = TurnStop::new(CancellationToken::new());
    turn.begin(now_task(id, TaskState::Working), stop.clone())
        .await
        .expect("begun");
    (turn, stop)
}

/// Tasks in memory with revisions and compare-and-set, as a shared backend keeps them;
/// writes wait while the gate is shut.
#[derive(Debug)]
struct GateBackend {
    entries: std::sync::Mutex<HashMap<String, Versioned>>,
    revision: AtomicU64,
    open: watch::Sender<bool>,
    /// Writes waiting at the gate.
    waiting: AtomicUsize,
    /// The largest entry it takes, in bytes of JSON.
    limit: AtomicUsize,
}

impl GateBackend {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            entries: std::sync::Mutex::default(),
            revision: AtomicU64::new(0),
            open: watch::Sender::new(true),
            waiting: AtomicUsize::new(0),
            limit: AtomicUsize::new(usize::MAX),
        })
    }

    fn shut(&self) {
        self.open.send_replace(false);
    }

    fn reopen(&self) {
        self.open.send_replace(true);
    }

    fn state_of(&self, id: &str) -> Option<TaskState> {
        self.entries
            .lock()
            .unwrap()
            .get(id)
            .map(|v| v.stored.task.status.state)
    }

    /// Another replica writes `task` over whatever is stored.
    fn written_elsewhere(&self, task: Task) -> Versioned {
        let revision = self.revision.fetch_add(1, Ordering::SeqCst) + 1;
        let versioned = Versioned {
            stored: StoredTask::new(task, "replica-b", None),
            revision,
        };
        self.entries
            .lock()
            .unwrap()
            .insert(versioned.stored.task.id.clone(), versioned.clone());
        versioned
    }

    async fn wait_for_a_write_at_the_gate(&self) {
        while self.waiting.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[async_trait]
impl TaskBackend for GateBackend {
    async fn load(&self, task_id: &str) -> Result<Option<Versioned>, BackendError> {
        Ok(self.entries.lock().unwrap().get(task_id).cloned())
    }

    async fn write(&self, stored: &StoredTask, expected: u64) -> Result<u64, WriteError> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _ = self.open.subscribe().wait_for(|open| *open).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let (bytes, limit) = (
            serde_json::to_vec(stored).unwrap().len(),
            self.limit.load(Ordering::SeqCst),
        );
        if bytes > limit {
            return Err(WriteError::TooLarge { bytes, limit });
        }
        let mut entries = self.entries.lock().unwrap();
        let at = entries.get(&stored.task.id).map_or(0, |v| v.revision);
        if at != expected {
            return Err(WriteError::Conflict);
        }
        let revision = self.revision.fetch_add(1, Ordering::SeqCst) + 1;
        entries.insert(
            stored.task.id.clone(),
            Versioned {
                stored: stored.clone(),
                revision,
            },
        );
        Ok(revision)
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Versioned>, BackendError> {
        let mut all: Vec<Versioned> = self.entries.lock().unwrap().values().cloned().collect();
        all.sort_by_key(|v| std::cmp::Reverse(v.revision));
        all.truncate(limit);
        Ok(all)
    }
}

async fn gated_store() -> (TaskStore, Arc<GateBackend>) {
    let store = TaskStore::new(limits(100, usize::MAX));
    let backend = GateBackend::new();
    store
        .attach(Arc::clone(&backend) as Arc<dyn TaskBackend>, "replica-a")
        .await
        .expect("attached");
    (store, backend)
}

/// The next event a follower hears within a moment, if any.
async fn heard_soon(follow: &mut Follow) -> Option<StreamEvent> {
    tokio::time::timeout(Duration::from_millis(50), follow.next())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn every_end_is_stored_before_anyone_hears_it() {
    for state in [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
        TaskState::InputRequired,
    ] {
        let (store, backend) = gated_store().await;
        let (turn, _) = begin(&store, "t").await;
        let (_, mut follow) = store.follow("t", &Caller::Anyone).await.expect("running");
        backend.shut();
        let ended = now_task("t", state);
        let ending = tokio::spawn(turn.end(ended.clone(), vec![final_update(&ended)]));
        backend.wait_for_a_write_at_the_gate().await;
        assert_eq!(
            heard_soon(&mut follow).await,
            None,
            "{state}: told before stored"
        );
        assert_eq!(
            store.get("t", &Caller::Anyone).map(|t| t.status.state),
            Some(TaskState::Working),
            "{state}: shown before stored"
        );
        assert_eq!(backend.state_of("t"), Some(TaskState::Working));
        backend.reopen();
        let ended = ending.await.expect("ended");
        assert!(ended.won);
        assert_eq!(backend.state_of("t"), Some(state));
        let Some(StreamEvent::StatusUpdate(end)) = follow.next().await else {
            panic!("{state}: the end is told");
        };
        assert_eq!((end.status.state, end.r#final), (state, true));
        assert_eq!(
            store.get("t", &Caller::Anyone).map(|t| t.status.state),
            Some(state)
        );
    }
}

#[tokio::test]
async fn a_failure_for_a_gone_turn_is_stored_before_it_is_heard_and_only_over_a_running_task() {
    let (store, backend) = gated_store().await;
    backend.written_elsewhere(now_task("lost", TaskState::Working));
    backend.written_elsewhere(now_task("done", TaskState::Completed));
    let (_, mut follow) = store
        .follow("lost", &Caller::Anyone)
        .await
        .expect("running elsewhere");
    backend.shut();
    let failing = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .fail_task("lost", "the replica was lost", Some("replica-b"))
                .await
        }
    });
    backend.wait_for_a_write_at_the_gate().await;
    assert_eq!(heard_soon(&mut follow).await, None);
    backend.reopen();
    assert!(failing.await.expect("joined"), "this replica failed it");
    assert_eq!(backend.state_of("lost"), Some(TaskState::Failed));
    let Some(StreamEvent::StatusUpdate(end)) = follow.next().await else {
        panic!("the failure is told");
    };
    assert_eq!(end.status.state, TaskState::Failed);
    assert!(
        !store.fail_task("done", "lost", Some("replica-b")).await,
        "a task that ended is never failed over its end"
    );
    assert_eq!(backend.state_of("done"), Some(TaskState::Completed));
}

#[tokio::test]
async fn the_first_end_stored_wins_and_the_turn_that_lost_answers_from_it() {
    let (store, backend) = gated_store().await;
    let (turn, stop) = begin(&store, "t").await;
    let (_, mut follow) = store.follow("t", &Caller::Anyone).await.expect("running");
    // Another replica cancels the task in the store while the turn runs here.
    let canceled = backend.written_elsewhere(now_task("t", TaskState::Canceled));
    store.absorb(canceled);
    assert!(
        stop.requested() && stop.token().is_cancelled(),
        "the turn that lost is told to stop"
    );
    let done = now_task("t", TaskState::Completed);
    let ended = turn.end(done.clone(), vec![final_update(&done)]).await;
    assert!(!ended.won);
    assert_eq!(ended.task.status.state, TaskState::Canceled);
    assert_eq!(backend.state_of("t"), Some(TaskState::Canceled));
    assert_eq!(
        store.get("t", &Caller::Anyone).unwrap().status.state,
        TaskState::Canceled
    );
    let Some(StreamEvent::StatusUpdate(end)) = follow.next().await else {
        panic!("the end that won is told");
    };
    assert_eq!((end.status.state, end.r#final), (TaskState::Canceled, true));
}

/// Tries to begin a turn of task `t` (working), which must be refused: the task moved.
async fn assert_moved(turn: &mut TaskTurn) {
    let began = turn
        .begin(
            now_task("t", TaskState::Working),
            TurnStop::new(CancellationToken::new()),
        )
        .await;
    assert!(matches!(began, Err(BeginError::Moved(_))), "{began:?}");
}

#[tokio::test]
async fn a_turn_that_cannot_begin_over_a_moved_task_writes_nothing() {
    let (store, backend) = gated_store().await;
    put(&store, now_task("t", TaskState::InputRequired)).await;
    let mut turn = store.open_turn("t").await;
    // Another replica continues the task between the read and the write.
    backend.written_elsewhere(now_task("t", TaskState::Working));
    assert_moved(&mut turn).await;
    drop(turn);
    let stored = backend.entries.lock().unwrap()["t"].clone();
    assert_eq!(stored.stored.owner, "replica-b");
    assert_eq!(
        store.get("t", &Caller::Anyone).map(|t| t.status.state),
        Some(TaskState::Working),
        "memory took the task as it moved"
    );
}

#[tokio::test]
async fn a_turn_decided_on_what_it_read_cannot_begin_over_a_move_memory_heard_since() {
    let (store, backend) = gated_store().await;
    put(&store, now_task("t", TaskState::InputRequired)).await;
    let mut turn = store.open_turn("t").await;
    let standing = turn.task().expect("the task stands");
    assert_eq!(standing.status.state, TaskState::InputRequired);
    // Another replica continues the task, and the watch brings that to memory, after this
    // turn read the task as waiting and before it writes: it must not write over the move.
    let moved = backend.written_elsewhere(now_task("t", TaskState::Working));
    store.absorb(moved);
    assert_moved(&mut turn).await;
    drop(turn);
    assert_eq!(
        backend.entries.lock().unwrap()["t"].stored.owner,
        "replica-b",
        "the other replica's turn stands"
    );
}

#[tokio::test]
async fn a_failure_decided_on_a_running_task_is_not_stored_over_an_end_memory_heard_since() {
    let (store, backend) = gated_store().await;
    let running = backend.written_elsewhere(now_task("t", TaskState::Working));
    store.absorb(running);
    let turn = store.open_turn("t").await;
    assert_eq!(
        turn.task().map(|t| t.status.state),
        Some(TaskState::Working)
    );
    // The task ends elsewhere, and memory hears it, before this writer stores its failure.
    let done = backend.written_elsewhere(now_task("t", TaskState::Completed));
    store.absorb(done);
    let failed = backend::failed_now(&now_task("t", TaskState::Working), "lost");
    let ended = turn.end(failed.clone(), vec![final_update(&failed)]).await;
    assert!(!ended.won, "the end stored first stands");
    assert_eq!(backend.state_of("t"), Some(TaskState::Completed));
}

#[tokio::test]
async fn a_task_larger_than_the_store_takes_is_refused_at_its_beginning_and_failed_at_its_end() {
    let (store, backend) = gated_store().await;
    backend.limit.store(4_000, Ordering::SeqCst);
    let mut big = now_task("big", TaskState::Working);
    big.history = Some(vec![Message::new(
        "m",
        Role::User,
        vec![Part::text("x".repeat(8_000))],
    )]);
    let mut turn = store.open_turn("big").await;
    let began = turn
        .begin(big, TurnStop::new(CancellationToken::new()))
        .await;
    assert!(
        matches!(began, Err(BeginError::TooLarge { limit: 4_000, .. })),
        "{began:?}"
    );
    drop(turn);
    assert_eq!(backend.state_of("big"), None, "nothing was written");

    let (turn, _) = begin(&store, "t").await;
    let (_, mut follow) = store.follow("t", &Caller::Anyone).await.expect("running");
    let mut answer = now_task("t", TaskState::Completed);
    answer.artifacts = vec![daedalus_contract::Artifact::text("a", "y".repeat(8_000))];
    let ended = turn.end(answer.clone(), vec![final_update(&answer)]).await;
    assert_eq!(ended.task.status.state, TaskState::Failed);
    assert!(ended.task.artifacts.is_empty());
    let why = ended.task.status.message.as_ref().unwrap().parts[0]
        .as_text()
        .unwrap()
        .to_owned();
    assert!(why.contains("4000"), "the limit is named: {why}");
    assert_eq!(
        backend.state_of("t"),
        Some(TaskState::Failed),
        "the failure is stored"
    );
    let Some(StreamEvent::StatusUpdate(end)) = follow.next().await else {
        panic!("the failure is told");
    };
    assert_eq!(end.status.state, TaskState::Failed);
}

#[tokio::test]
async fn a_turn_dropped_without_its_end_is_failed_for_it() {
    let (store, backend) = gated_store().await;
    let (turn, _) = begin(&store, "t").await;
    drop(turn);
    for _ in 0..200 {
        if backend.state_of("t") == Some(TaskState::Failed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(backend.state_of("t"), Some(TaskState::Failed));
    let why = store
        .get("t", &Caller::Anyone)
        .unwrap()
        .status
        .message
        .unwrap()
        .parts[0]
        .as_text()
        .map(str::to_owned);
    assert_eq!(why.as_deref(), Some(turn::TURN_STOPPED));
}

#[tokio::test]
async fn attaching_fails_what_this_replica_left_running_and_keeps_the_rest() {
    let backend = GateBackend::new();
    let mut mine = backend.written_elsewhere(now_task("mine", TaskState::Working));
    mine.stored.owner = "replica-a".into();
    backend.entries.lock().unwrap().insert("mine".into(), mine);
    backend.written_elsewhere(now_task("theirs", TaskState::Working));
    backend.written_elsewhere(now_task("done", TaskState::Completed));
    let store = TaskStore::new(limits(100, usize::MAX));
    let failed = store
        .attach(Arc::clone(&backend) as Arc<dyn TaskBackend>, "replica-a")
        .await
        .expect("attached");
    assert_eq!(failed, 1);
    assert_eq!(backend.state_of("mine"), Some(TaskState::Failed));
    assert_eq!(backend.state_of("theirs"), Some(TaskState::Working));
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn the_same_id_gets_the_same_cell() {
    let store = TaskStore::new(limits(10, usize::MAX));
    let a = store.cell("t1");
    let b = store.cell("t1");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(store.len(), 1);
}

#[tokio::test]
async fn the_least_recently_changed_idle_tasks_go_first() {
    let store = TaskStore::new(limits(2, usize::MAX));
    put(
        &store,
        task("t1", "c", TaskState::Completed, "2026-01-01T00:00:01Z"),
    )
    .await;
    put(
        &store,
        task("t2", "c", TaskState::Completed, "2026-01-01T00:00:02Z"),
    )
    .await;
    // t1 changes again: t2 is now the oldest.
    put(
        &store,
        task("t1", "c", TaskState::Completed, "2026-01-01T00:00:03Z"),
    )
    .await;
    put(
        &store,
        task("t3", "c", TaskState::Completed, "2026-01-01T00:00:04Z"),
    )
    .await;
    assert_eq!(store.len(), 2);
    assert!(store.existing("t2").is_none());
    assert!(store.existing("t1").is_some() && store.existing("t3").is_some());
}

#[tokio::test]
async fn tasks_in_use_are_never_dropped() {
    let store = TaskStore::new(limits(1, usize::MAX));
    let (running, _) = begin(&store, "busy").await;
    put(&store, now_task("t2", TaskState::Completed)).await;
    put(&store, now_task("t3", TaskState::Completed)).await;
    assert!(
        store.existing("busy").is_some(),
        "a running task was dropped"
    );
    drop(running);
}

#[tokio::test]
async fn the_byte_budget_drops_the_oldest_idle_tasks() {
    let store = TaskStore::new(limits(100, 4_000));
    let mut big = task("a", "c", TaskState::Completed, "2026-01-01T00:00:01Z");
    big.history = Some(vec![Message::new(
        "m",
        Role::User,
        vec![Part::text("x".repeat(1_000))],
    )]);
    for id in ["a", "b", "c"] {
        let mut t = big.clone();
        t.id = id.into();
        put(&store, t).await;
    }
    assert_eq!(store.len(), 2, "a was dropped to fit 4,000 bytes");
    assert!(store.bytes() <= 4_000, "{}", store.bytes());
    assert!(store.existing("a").is_none());
}

#[tokio::test]
async fn tasks_older_than_the_ttl_are_dropped() {
    let store = TaskStore::new(StoreLimits {
        max_tasks: 100,
        max_bytes: usize::MAX,
        ttl: Duration::ZERO,
    });
    put(
        &store,
        task("old", "c", TaskState::Completed, "2026-01-01T00:00:01Z"),
    )
    .await;
    std::thread::sleep(Duration::from_millis(2));
    assert!(store.existing("old").is_none());
    assert!(store.is_empty());
}

fn query() -> ListQuery {
    ListQuery::default()
}

fn ids(page: ListPage) -> Vec<String> {
    page.tasks.into_iter().map(|t| t.id).collect()
}

#[tokio::test]
async fn a_list_is_newest_status_first_and_filters_by_context_state_and_time() {
    let store = TaskStore::new(limits(100, usize::MAX));
    put(
        &store,
        task("a", "c1", TaskState::Completed, "2026-01-01T00:00:01Z"),
    )
    .await;
    put(
        &store,
        task("b", "c1", TaskState::Failed, "2026-01-01T00:00:03Z"),
    )
    .await;
    put(
        &store,
        task("c", "c2", TaskState::Completed, "2026-01-01T00:00:02Z"),
    )
    .await;
    assert_eq!(ids(store.list(&query()).await.unwrap()), ["b", "c", "a"]);
    let by_context = ListQuery {
        context_id: Some("c1".into()),
        ..query()
    };
    assert_eq!(ids(store.list(&by_context).await.unwrap()), ["b", "a"]);
    let by_state = ListQuery {
        state: Some(TaskState::Completed),
        ..query()
    };
    assert_eq!(ids(store.list(&by_state).await.unwrap()), ["c", "a"]);
    let since = ListQuery {
        status_after: Some("2026-01-01T00:00:02Z".parse().unwrap()),
        ..query()
    };
    assert_eq!(
        ids(store.list(&since).await.unwrap()),
        ["b", "c"],
        "at or after"
    );
}

#[tokio::test]
async fn pages_follow_each_other_without_gap_or_repeat() {
    let store = TaskStore::new(limits(100, usize::MAX));
    for i in 0..7 {
        // Two tasks share each timestamp: the id breaks the tie.
        let at = format!("2026-01-01T00:00:0{}Z", i / 2);
        put(
            &store,
            task(&format!("t{i}"), "c", TaskState::Completed, &at),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = store
            .list(&ListQuery {
                page_size: Some(3),
                page_token: token.clone(),
                ..query()
            })
            .await
            .unwrap();
        assert_eq!(page.total_size, 7);
        assert_eq!(page.page_size, 3);
        assert!(page.tasks.len() <= 3);
        seen.extend(page.tasks.into_iter().map(|t| t.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = Some(page.next_page_token);
    }
    assert_eq!(seen, ["t6", "t4", "t5", "t2", "t3", "t0", "t1"]);
}

#[tokio::test]
async fn a_list_shows_artifacts_only_when_asked_and_leaves_history_to_the_turn_service() {
    let store = TaskStore::new(limits(100, usize::MAX));
    let mut t = task("a", "c", TaskState::Completed, "2026-01-01T00:00:01Z");
    t.artifacts = vec![daedalus_contract::Artifact::text("x", "answer")];
    let stored = t.history.as_ref().map(Vec::len);
    put(&store, t).await;
    let bare = &store.list(&query()).await.unwrap().tasks[0];
    assert!(bare.artifacts.is_empty());
    assert_eq!(
        bare.history.as_ref().map(Vec::len),
        stored,
        "whole: shaped above"
    );
    let full = &store
        .list(&ListQuery {
            include_artifacts: true,
            ..query()
        })
        .await
        .unwrap()
        .tasks[0];
    assert_eq!(full.artifacts.len(), 1);
}

#[tokio::test]
async fn bad_page_sizes_and_tokens_are_refused() {
    let store = TaskStore::new(limits(100, usize::MAX));
    for size in [0, 101] {
        let asked = ListQuery {
            page_size: Some(size),
            ..query()
        };
        assert_eq!(
            store.list(&asked).await.err(),
            Some(ListError::PageSize(size))
        );
    }
    let forged = ListQuery {
        page_token: Some("not a token!".into()),
        ..query()
    };
    assert_eq!(store.list(&forged).await.err(), Some(ListError::PageToken));
}

/// A turn this replica's previous run left running with its record (a restart under the same
/// `REPLICA_ID` on a shared store): the sweep of the tasks it owns but runs no turn of leaves
/// it to the resume the restart queued, instead of failing it first.
#[tokio::test]
async fn the_sweep_leaves_a_turn_left_with_its_record_to_its_resume() {
    let dir = tempfile::tempdir().expect("a dir");
    let file = dir.path().join("tasks.sqlite");
    let backend = Arc::new(
        super::SqliteTasks::open(file.to_str().expect("utf-8"), Duration::from_hours(1), 100)
            .expect("opens"),
    );
    let left = StoredTask::new(now_task("left", TaskState::Working), "replica-a", None);
    backend.write(&left, 0).await.expect("written");
    backend
        .keep_turn("left", Some("{\"version\":1}"))
        .await
        .expect("kept");
    let store = TaskStore::new(limits(100, usize::MAX));
    let failed = store
        .attach(Arc::clone(&backend) as Arc<dyn TaskBackend>, "replica-a")
        .await
        .expect("attached");
    assert_eq!(failed, 0, "a turn with its record is resumed, not failed");
    store.settle_leftover("left").await;
    let stored = backend.load("left").await.expect("read").expect("kept");
    assert_eq!(stored.stored.task.status.state, TaskState::Working);
    assert_eq!(store.next_resumable().await.len(), 1, "queued to resume");
}
