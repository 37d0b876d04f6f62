use std::time::Duration;

use daedalus_contract::{Message, Part, Role, Task, TaskState, TaskStatus};

use super::*;

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

/// Puts `task` in `store` as a finished turn would.
fn put(store: &TaskStore, task: Task) {
    let id = task.id.clone();
    store.cell(&id).finish(task);
    store.touch(&id);
}

#[test]
fn the_same_id_gets_the_same_cell() {
    let store = TaskStore::new(limits(10, usize::MAX));
    let a = store.cell("t1");
    let b = store.cell("t1");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(store.len(), 1);
}

#[test]
fn the_least_recently_changed_idle_tasks_go_first() {
    let store = TaskStore::new(limits(2, usize::MAX));
    put(
        &store,
        task("t1", "c", TaskState::Completed, "2026-01-01T00:00:01Z"),
    );
    put(
        &store,
        task("t2", "c", TaskState::Completed, "2026-01-01T00:00:02Z"),
    );
    // t1 changes again: t2 is now the oldest.
    put(
        &store,
        task("t1", "c", TaskState::Completed, "2026-01-01T00:00:03Z"),
    );
    put(
        &store,
        task("t3", "c", TaskState::Completed, "2026-01-01T00:00:04Z"),
    );
    assert_eq!(store.len(), 2);
    assert!(store.existing("t2").is_none());
    assert!(store.existing("t1").is_some() && store.existing("t3").is_some());
}

#[test]
fn tasks_in_use_are_never_dropped() {
    let store = TaskStore::new(limits(1, usize::MAX));
    let held = store.cell("busy");
    drop(store.cell("t2"));
    drop(store.cell("t3"));
    assert!(
        Arc::ptr_eq(&held, &store.cell("busy")),
        "a held task was dropped"
    );
}

#[test]
fn the_byte_budget_drops_the_oldest_idle_tasks() {
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
        put(&store, t);
    }
    assert_eq!(store.len(), 2, "a was dropped to fit 4,000 bytes");
    assert!(store.bytes() <= 4_000, "{}", store.bytes());
    assert!(store.existing("a").is_none());
}

#[test]
fn tasks_older_than_the_ttl_are_dropped() {
    let store = TaskStore::new(StoreLimits {
        max_tasks: 100,
        max_bytes: usize::MAX,
        ttl: Duration::ZERO,
    });
    put(
        &store,
        task("old", "c", TaskState::Completed, "2026-01-01T00:00:01Z"),
    );
    std::thread::sleep(Duration::from_millis(2));
    assert!(store.existing("old").is_none());
    assert!(store.is_empty());
}

fn query() -> ListQuery {
    ListQuery::default()
}

#[test]
fn a_list_is_newest_status_first_and_filters_by_context_state_and_time() {
    let store = TaskStore::new(limits(100, usize::MAX));
    put(
        &store,
        task("a", "c1", TaskState::Completed, "2026-01-01T00:00:01Z"),
    );
    put(
        &store,
        task("b", "c1", TaskState::Failed, "2026-01-01T00:00:03Z"),
    );
    put(
        &store,
        task("c", "c2", TaskState::Completed, "2026-01-01T00:00:02Z"),
    );
    let ids = |page: ListPage| page.tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list(&query()).unwrap()), ["b", "c", "a"]);
    let by_context = ListQuery {
        context_id: Some("c1".into()),
        ..query()
    };
    assert_eq!(ids(store.list(&by_context).unwrap()), ["b", "a"]);
    let by_state = ListQuery {
        state: Some(TaskState::Completed),
        ..query()
    };
    assert_eq!(ids(store.list(&by_state).unwrap()), ["c", "a"]);
    let since = ListQuery {
        status_after: Some("2026-01-01T00:00:02Z".parse().unwrap()),
        ..query()
    };
    assert_eq!(ids(store.list(&since).unwrap()), ["b", "c"], "at or after");
}

#[test]
fn pages_follow_each_other_without_gap_or_repeat() {
    let store = TaskStore::new(limits(100, usize::MAX));
    for i in 0..7 {
        // Two tasks share each timestamp: the id breaks the tie.
        let at = format!("2026-01-01T00:00:0{}Z", i / 2);
        put(
            &store,
            task(&format!("t{i}"), "c", TaskState::Completed, &at),
        );
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

#[test]
fn a_list_shows_artifacts_and_history_only_when_asked() {
    let store = TaskStore::new(limits(100, usize::MAX));
    let mut t = task("a", "c", TaskState::Completed, "2026-01-01T00:00:01Z");
    t.artifacts = vec![daedalus_contract::Artifact {
        artifact_id: "x".into(),
        name: None,
        description: None,
        parts: vec![Part::text("answer")],
        extensions: None,
        metadata: None,
    }];
    put(&store, t);
    let bare = &store.list(&query()).unwrap().tasks[0];
    assert!(bare.artifacts.is_empty() && bare.history.is_none());
    let full = &store
        .list(&ListQuery {
            include_artifacts: true,
            history_length: Some(1),
            ..query()
        })
        .unwrap()
        .tasks[0];
    assert_eq!(full.artifacts.len(), 1);
    assert_eq!(full.history.as_ref().map(Vec::len), Some(1));
}

#[test]
fn bad_page_sizes_and_tokens_are_refused() {
    let store = TaskStore::new(limits(100, usize::MAX));
    for size in [0, 101] {
        let asked = ListQuery {
            page_size: Some(size),
            ..query()
        };
        assert_eq!(store.list(&asked).err(), Some(ListError::PageSize(size)));
    }
    let forged = ListQuery {
        page_token: Some("not a token!".into()),
        ..query()
    };
    assert_eq!(store.list(&forged).err(), Some(ListError::PageToken));
}
