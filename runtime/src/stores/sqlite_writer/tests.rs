//! The writer's rounds: who commits them, and the checkpoints beside them.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{GroupCommit, WriterError, connect};
use crate::platform::metrics::StoreFigures;

/// A writer on a fresh file `name` in `dir`, with one table.
fn writer_on(dir: &tempfile::TempDir, name: &str) -> (GroupCommit, String) {
    let path = dir.path().join(name).to_string_lossy().into_owned();
    let conn = connect(&path).unwrap();
    conn.execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .unwrap();
    (GroupCommit::start("test-writer", conn).unwrap(), path)
}

/// Inserts one row of `bytes` bytes; answers the name of the thread the job ran on.
async fn insert(writer: &GroupCommit, bytes: usize) -> Option<String> {
    writer
        .with(move |tx| {
            tx.execute("INSERT INTO rows (body) VALUES (?1)", ["x".repeat(bytes)])?;
            Ok::<_, rusqlite::Error>(std::thread::current().name().map(str::to_owned))
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_call_commits_on_the_writers_thread_not_a_worker_of_the_async_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = writer_on(&dir, "thread.sqlite");
    assert_eq!(insert(&writer, 10).await.as_deref(), Some("test-writer"));
}

#[tokio::test]
async fn a_failed_job_is_undone_alone_and_its_caller_gets_the_sqlite_error_underneath() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = writer_on(&dir, "jobs.db");
    let kept = writer.with(|tx| tx.execute("INSERT INTO rows (body) VALUES ('kept')", []));
    let undone = writer.with(|tx| {
        tx.execute("INSERT INTO rows (body) VALUES ('undone')", [])?;
        tx.execute("INSERT INTO nowhere VALUES (1)", [])
    });
    let (kept, undone) = tokio::join!(kept, undone);
    assert_eq!(kept.unwrap(), 1);
    let Err(WriterError::Job(source)) = undone else {
        panic!("a job that failed is the job's error: {undone:?}");
    };
    assert!(
        source.downcast_ref::<rusqlite::Error>().is_some(),
        "the SQLite error is kept, not its words: {source:?}"
    );
    let bodies = writer
        .with(|tx| {
            let mut rows = tx.prepare("SELECT body FROM rows ORDER BY id")?;
            rows.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .await
        .unwrap();
    assert_eq!(bodies, ["kept"], "the failed job's own insert is undone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_queued_behind_a_round_share_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = writer_on(&dir, "queued.sqlite");
    let (release, held) = mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let holder = writer.clone();
    let holding = tokio::spawn(async move {
        holder
            .with(move |_| {
                let _ = started.send(());
                let _ = held.recv();
                Ok::<_, rusqlite::Error>(())
            })
            .await
    });
    running.await.unwrap();
    let queued: Vec<_> = (0..3)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move { insert(&writer, 10).await })
        })
        .collect();
    while writer.queued() < 3 {
        tokio::task::yield_now().await;
    }
    release.send(()).unwrap();
    holding.await.unwrap().unwrap();
    for call in queued {
        call.await.unwrap();
    }
    assert_eq!(writer.rounds(), 2, "the held round, then one for the three");
}

#[test]
fn the_writers_connection_never_checkpoints_on_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let conn = connect(&dir.path().join("db.sqlite").to_string_lossy()).unwrap();
    let pages: i64 = conn
        .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pages, 0);
}

#[tokio::test]
async fn the_checkpoint_thread_copies_the_wal_into_the_file_and_the_wal_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = writer_on(&dir, "checkpointed.sqlite");
    let file_size = || std::fs::metadata(&path).unwrap().len();
    let before = file_size();
    for _ in 0..200 {
        insert(&writer, 4000).await;
    }
    assert_eq!(writer.checkpoints(), 0, "no commit checkpointed");
    let deadline = Instant::now() + Duration::from_secs(20);
    while file_size() < before + 200 * 4000 || writer.checkpoints() == 0 {
        assert!(Instant::now() < deadline, "the rows never reached the file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Wholly copied: the next commit starts the WAL from its beginning.
    let wal = format!("{path}-wal");
    let grown = std::fs::metadata(&wal).unwrap().len();
    insert(&writer, 10).await;
    let frames_at_start = {
        let check = rusqlite::Connection::open(&path).unwrap();
        check
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1))
            .unwrap()
    };
    assert!(
        frames_at_start < 10,
        "{frames_at_start} frames in a WAL of {grown} bytes: it did not start again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_steady_commits_the_wal_still_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, path) = writer_on(&dir, "steady.sqlite");
    let wal = format!("{path}-wal");
    // About 80 MiB through the WAL with never a pause: five times what starts it again.
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move {
                for _ in 0..5_000 {
                    insert(&writer, 4000).await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let wal_bytes = std::fs::metadata(&wal).unwrap().len();
    assert!(
        wal_bytes < 32 << 20,
        "the WAL grew to {wal_bytes} bytes ({} checkpoints, {} with the writer held, {} by the writer at the cap)",
        writer.checkpoints(),
        writer.checkpoints_with_writer_idle(),
        writer.checkpoints_by_the_writer()
    );
}

#[tokio::test]
async fn a_sweep_that_panics_does_not_stop_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join("panics.sqlite")
        .to_string_lossy()
        .into_owned();
    let conn = connect(&path).unwrap();
    conn.execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .unwrap();
    let writer = GroupCommit::start("test-writer", conn).unwrap();
    writer.add_sweep(|_| panic!("a broken sweep"));
    // A second sweep still runs after the first panicked.
    let (ran, swept) = mpsc::channel();
    writer.add_sweep(move |_| {
        let _ = ran.send(());
    });
    for _ in 0..3 {
        // A writer that died would leave the call waiting: bounded, so the test fails instead.
        let answered = tokio::time::timeout(Duration::from_secs(10), insert(&writer, 10)).await;
        assert_eq!(answered.unwrap().as_deref(), Some("test-writer"));
    }
    swept
        .recv_timeout(Duration::from_secs(10))
        .expect("the sweep after the broken one ran");
}

/// Each round is one commit, counted where the metrics read it.
#[tokio::test]
async fn the_writers_commits_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = writer_on(&dir, "counted.sqlite");
    let stats = writer.stats();
    let before = stats.commits();
    for _ in 0..3 {
        insert(&writer, 10).await;
    }
    assert_eq!(stats.commits() - before, 3);
    assert!(stats.wal_bytes() > 0, "the file's WAL holds the commits");
}

/// A call queued for later joins the round of the next call awaited: the two commit together.
/// Nobody awaiting it, the writer's own tick commits it.
#[tokio::test]
async fn a_call_queued_for_later_shares_the_next_awaited_calls_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, _) = writer_on(&dir, "later.sqlite");
    let stats = writer.stats();
    let before = stats.commits();
    let later = writer.later(|tx| {
        tx.execute("INSERT INTO rows (body) VALUES ('later')", [])?;
        Ok::<_, rusqlite::Error>(tx.last_insert_rowid())
    });
    insert(&writer, 10).await;
    assert_eq!(stats.commits() - before, 1, "one commit for both");
    let id = tokio::time::timeout(Duration::from_secs(1), later.committed())
        .await
        .expect("answered already")
        .unwrap();
    assert_eq!(id, 1, "queued first, written first");
    assert_eq!(stats.commits() - before, 1, "and no commit of its own");
    // Asking for a result already committed leaves no wake-up behind: one left would commit
    // the next call queued for later (the next turn's begin) alone, before its end.
    assert!(
        !writer.handle.shared.woken.load(Ordering::Acquire),
        "a committed call's result wakes no writer"
    );

    let alone = writer.later(|tx| tx.execute("INSERT INTO rows (body) VALUES ('alone')", []));
    drop(alone);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats.commits() - before < 2 {
        assert!(Instant::now() < deadline, "the writer's tick commits it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rows = writer
        .with(|tx| tx.query_row("SELECT COUNT(*) FROM rows", [], |r| r.get::<_, i64>(0)))
        .await
        .unwrap();
    assert_eq!(rows, 3);
}

/// A new file has small pages, and one an earlier version made with SQLite's default 4 KiB
/// pages is rewritten with them once, rows kept and back in WAL.
#[test]
fn a_store_file_has_small_pages_new_or_from_before() {
    let dir = tempfile::tempdir().unwrap();
    let page = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap()
    };
    let fresh = dir.path().join("fresh.sqlite");
    let conn = connect(fresh.to_str().unwrap()).unwrap();
    conn.execute_batch("CREATE TABLE rows (body TEXT)").unwrap();
    assert_eq!(page(&conn), super::PAGE_BYTES);

    let old = dir.path().join("old.sqlite");
    {
        let conn = rusqlite::Connection::open(&old).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;
             CREATE TABLE rows (body TEXT);
             INSERT INTO rows VALUES ('kept'), ('also kept');",
        )
        .unwrap();
        assert_eq!(page(&conn), 4096);
    }
    let conn = connect(old.to_str().unwrap()).unwrap();
    assert_eq!(page(&conn), super::PAGE_BYTES);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM rows", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2);
}
