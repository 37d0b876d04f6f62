//! The SQLite conversation store's tests: rows, restarts, retention, migration, and group commit
//! (calls queued behind a held writer share one commit; a failing call undoes only its own).

use serde_json::json;
use tokio::sync::oneshot;

use super::*;
use crate::platform::metrics::StoreFigures;
use crate::stores::sqlite_file::SqliteFile;
use crate::stores::sqlite_writer::in_savepoint;

fn new_row(role: RowRole, content: &str, status: RowStatus) -> NewRow {
    NewRow::new(role, content, status)
}

#[tokio::test]
async fn rows_keep_order_turns_and_tool_calls_per_context() {
    let store = SqliteStore::open(":memory:").unwrap();
    let mut assistant = new_row(RowRole::Assistant, "", RowStatus::Pending);
    assistant.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "s__t".into(),
        arguments: json!({"q": 1}),
    }];
    let ids = store
        .append(
            "ctx",
            vec![new_row(RowRole::User, "hi", RowStatus::Complete), assistant],
        )
        .await
        .unwrap();
    store
        .append(
            "other",
            vec![new_row(RowRole::User, "elsewhere", RowStatus::Complete)],
        )
        .await
        .unwrap();
    let mut tool = new_row(RowRole::Tool, "42", RowStatus::Complete);
    tool.tool_call_id = Some("c1".into());
    store.append("ctx", vec![tool]).await.unwrap();
    store
        .set_status("ctx", &ids[1..], RowStatus::Complete)
        .await
        .unwrap();

    let rows = store.rows("ctx", usize::MAX).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.turn).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(rows[1].tool_calls[0].arguments, json!({"q": 1}));
    assert_eq!(rows[1].status, RowStatus::Complete);
    assert_eq!(rows[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(store.rows("other", usize::MAX).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_restart_keeps_the_file_and_recovery_turns_pending_into_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join("sessions/db.sqlite")
        .to_string_lossy()
        .into_owned();
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .append(
                "ctx",
                vec![
                    new_row(RowRole::User, "before", RowStatus::Complete),
                    new_row(RowRole::Assistant, "half", RowStatus::Pending),
                ],
            )
            .await
            .unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.recover().await.unwrap(), 1);
    let rows = reopened.rows("ctx", usize::MAX).await.unwrap();
    assert_eq!(rows[0].content, "before");
    assert_eq!(rows[1].status, RowStatus::Error);
    assert_eq!(reopened.recover().await.unwrap(), 0);
}

/// Blocks the writer until the returned sender is dropped or sent to.
async fn hold_the_writer(store: &SqliteStore) -> std::sync::mpsc::Sender<()> {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = oneshot::channel();
    let blocker = store.clone();
    tokio::spawn(async move {
        blocker
            .with(move |_| {
                let _ = started.send(());
                let _ = held.recv();
                Ok(())
            })
            .await
    });
    running.await.unwrap();
    release
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_waiting_for_the_writer_share_one_commit() {
    let store = SqliteStore::open(":memory:").unwrap();
    let release = hold_the_writer(&store).await;
    let rounds_before = store.writer.rounds();
    let appends: Vec<_> = (0..100)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append(
                        &format!("ctx-{}", i % 10),
                        vec![new_row(RowRole::User, "hi", RowStatus::Pending)],
                    )
                    .await
            })
        })
        .collect();
    while store.writer.queued() < 100 {
        tokio::task::yield_now().await;
    }
    drop(release);
    for append in appends {
        assert_eq!(append.await.unwrap().unwrap().len(), 1);
    }
    assert_eq!(
        store.writer.rounds() - rounds_before,
        1,
        "the hundred appends queued behind one job committed together"
    );
    for i in 0..10 {
        let rows = store.rows(&format!("ctx-{i}"), usize::MAX).await.unwrap();
        assert_eq!(
            rows.iter().map(|r| r.turn).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
    }
}

/// Appends one complete user row saying `text` to `context`, on a task of its own.
fn spawn_append(
    store: &SqliteStore,
    context: &'static str,
    text: &'static str,
) -> tokio::task::JoinHandle<Result<Vec<i64>, StoreError>> {
    let store = store.clone();
    tokio::spawn(async move {
        store
            .append(
                context,
                vec![new_row(RowRole::User, text, RowStatus::Complete)],
            )
            .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_undoes_only_its_own_writes_in_a_shared_commit() {
    let store = SqliteStore::open(":memory:").unwrap();
    let release = hold_the_writer(&store).await;
    let before = spawn_append(&store, "ctx", "kept");
    let failing = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .with(|tx| {
                    tx.execute(
                        "INSERT INTO messages (context, turn, role, content, status)
                         VALUES ('ctx', 100, 'user', 'undone', 'complete')",
                        [],
                    )?;
                    tx.execute("INSERT INTO no_such_table VALUES (1)", [])
                })
                .await
        })
    };
    let after = spawn_append(&store, "other", "kept too");
    while store.writer.queued() < 3 {
        tokio::task::yield_now().await;
    }
    drop(release);
    assert!(before.await.unwrap().is_ok());
    assert!(matches!(
        failing.await.unwrap(),
        Err(StoreError::Backend { .. })
    ));
    assert!(after.await.unwrap().is_ok());
    let rows = store.rows("ctx", usize::MAX).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.content.as_str()).collect::<Vec<_>>(),
        ["kept"]
    );
    assert_eq!(store.rows("other", usize::MAX).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_read_takes_only_the_last_rows_it_asks_for() {
    let store = SqliteStore::open(":memory:").unwrap();
    let rows: Vec<NewRow> = (0..10)
        .map(|i| new_row(RowRole::User, &i.to_string(), RowStatus::Complete))
        .collect();
    store.append("ctx", rows).await.unwrap();
    let last = store.rows("ctx", 3).await.unwrap();
    assert_eq!(last.iter().map(|r| r.turn).collect::<Vec<_>>(), [7, 8, 9]);
}

#[tokio::test]
async fn idle_contexts_past_the_retention_are_deleted() {
    let hour = std::time::Duration::from_hours(1);
    let store = SqliteStore::open_with_ttl(":memory:", Some(hour)).unwrap();
    for context in ["old", "mixed", "new"] {
        store
            .append(
                context,
                vec![new_row(RowRole::User, "hi", RowStatus::Complete)],
            )
            .await
            .unwrap();
    }
    assert_eq!(store.expire_idle(hour).await.unwrap(), 0, "both are recent");
    store
        .with(|tx| {
            tx.execute(
                "UPDATE messages SET created_at = '2000-01-01T00:00:00.000Z' WHERE context <> 'new'",
                [],
            )
        })
        .await
        .unwrap();
    // A context with an old row and a new one is in use.
    store
        .append(
            "mixed",
            vec![new_row(RowRole::User, "again", RowStatus::Complete)],
        )
        .await
        .unwrap();
    assert_eq!(store.expire_idle(hour).await.unwrap(), 1);
    assert!(store.rows("old", usize::MAX).await.unwrap().is_empty());
    assert_eq!(store.rows("mixed", usize::MAX).await.unwrap().len(), 2);
    assert_eq!(store.rows("new", usize::MAX).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_file_from_before_message_ids_gets_the_column_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT, context TEXT NOT NULL,
                turn INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
                tool_calls TEXT NOT NULL DEFAULT '[]', tool_call_id TEXT,
                is_error INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL,
                created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                UNIQUE (context, turn));
             INSERT INTO messages (context, turn, role, content, status)
             VALUES ('ctx', 0, 'user', 'from before', 'complete');",
        )
        .unwrap();
    }
    let store = SqliteStore::open(path.to_str().unwrap()).unwrap();
    let mut sent = new_row(RowRole::User, "now", RowStatus::Complete);
    sent.message_id = Some("client-7".into());
    store.append("ctx", vec![sent]).await.unwrap();
    let rows = store.rows("ctx", usize::MAX).await.unwrap();
    assert_eq!(rows[0].content, "from before");
    assert_eq!(rows[0].message_id, None);
    assert_eq!(rows[1].message_id.as_deref(), Some("client-7"));
    assert!(rows[1].id > rows[0].id, "{rows:?}");
    // The table is rebuilt without AUTOINCREMENT (whose sqlite_sequence page every commit
    // adding a row wrote), its rows and their ids kept.
    let sql: String = store
        .writer
        .with(|tx| {
            tx.query_row(
                "SELECT sql FROM sqlite_schema WHERE name = 'messages'",
                [],
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert!(!sql.contains("AUTOINCREMENT"), "{sql}");
    assert!(sql.contains("UNIQUE (context, turn)"), "{sql}");
}

/// Every statement a turn runs is prepared once: a cached statement prepared again on each
/// run (as the turn lookup was, for the partial index) cost the pod a third of its tasks/s.
#[test]
fn a_turns_statements_are_prepared_once() {
    use rusqlite::StatementStatus;
    let mut conn = crate::stores::sqlite_writer::connect(":memory:").unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    migrate(&conn).unwrap();
    for round in 0..3 {
        let tx = conn.transaction().unwrap();
        for job in 0..3 {
            let context = format!("c{round}-{job}");
            in_savepoint(&tx, |tx| {
                let user = new_row(RowRole::User, "hi", RowStatus::Pending);
                let ids = insert_rows(
                    tx,
                    &context,
                    vec![user],
                    Some(i64::from(round * 3 + job) + 1),
                )?;
                update_status(tx, &context, &ids, RowStatus::Complete)?;
                recent_rows(tx, &context, 10)
            })
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let tx = conn.transaction().unwrap();
    for sql in [
        TURN_LOOKUP,
        INSERT_ROW,
        UPDATE_STATUS,
        RECENT_ROWS,
        "SAVEPOINT job",
        "RELEASE job",
    ] {
        let statement = tx.prepare_cached(sql).unwrap();
        assert_eq!(statement.get_status(StatementStatus::Run), 9, "{sql}");
        assert_eq!(statement.get_status(StatementStatus::RePrepare), 0, "{sql}");
    }
}

/// Conversations an earlier version kept in a file of their own are read into the task
/// store's file once, ids and all; a store that has rows of its own reads nothing.
#[tokio::test]
async fn an_earlier_versions_conversation_file_is_read_in_once_with_its_ids() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("daedalus-sessions.sqlite");
    let ids = {
        let old = SqliteStore::open(legacy.to_str().unwrap()).unwrap();
        let mut asked = new_row(RowRole::User, "from before", RowStatus::Complete);
        asked.message_id = Some("m-old".into());
        old.append(
            "ctx-old",
            vec![
                asked,
                new_row(RowRole::Assistant, "answered before", RowStatus::Complete),
            ],
        )
        .await
        .unwrap()
    };
    let path = dir.path().join("daedalus-tasks.sqlite");
    let store = SqliteStore::open(path.to_str().unwrap()).unwrap();
    assert_eq!(store.import(&legacy).unwrap(), 2);
    let rows = store.rows("ctx-old", usize::MAX).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    assert_eq!(rows[0].message_id.as_deref(), Some("m-old"));
    assert_eq!(rows[1].content, "answered before");
    // New rows follow the old ones.
    let next = store
        .append(
            "ctx-new",
            vec![new_row(RowRole::User, "now", RowStatus::Complete)],
        )
        .await
        .unwrap();
    assert!(next[0] > ids[1], "{next:?} after {ids:?}");
    assert_eq!(
        store.import(&legacy).unwrap(),
        0,
        "a store with rows reads none"
    );
}

/// Beside the tasks (a file no other process writes), the store hands out its rows' ids, so
/// rows queued for a turn's next awaited write answer their ids at once and commit with it.
/// On a file of its own, which replicas may share, two stores on the one file never hand out
/// one id twice (SQLite picks them).
#[tokio::test]
async fn ids_are_handed_out_beside_the_tasks_and_picked_by_sqlite_on_a_shared_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let file = SqliteFile::open(path.to_str().unwrap()).unwrap();
    let beside = SqliteStore::beside_tasks(&file, None).unwrap();
    let commits = file.stats();
    let before = commits.commits();
    let (ids, committed) = beside
        .append_later(
            "ctx",
            vec![new_row(RowRole::User, "held", RowStatus::Pending)],
        )
        .await;
    assert_eq!(ids.len(), 1, "answered at once");
    assert_eq!(commits.commits(), before, "nothing committed yet");
    beside
        .set_status("ctx", &ids, RowStatus::Complete)
        .await
        .unwrap();
    committed.await.unwrap();
    assert_eq!(commits.commits() - before, 1, "one commit for both");
    let rows = beside.rows("ctx", usize::MAX).await.unwrap();
    assert_eq!(rows[0].id, ids[0]);
    assert_eq!(rows[0].status, RowStatus::Complete);

    let shared = dir.path().join("shared.sqlite");
    let one = SqliteStore::open(shared.to_str().unwrap()).unwrap();
    let other = SqliteStore::open(shared.to_str().unwrap()).unwrap();
    let mut all = Vec::new();
    for n in 0..10 {
        let store = if n % 2 == 0 { &one } else { &other };
        let (ids, committed) = store
            .append_later(
                &format!("c{n}"),
                vec![new_row(RowRole::User, "hi", RowStatus::Complete)],
            )
            .await;
        committed.await.unwrap();
        all.extend(ids);
    }
    let mut unique = all.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 10, "{all:?}");
}
