//! WAL checkpoints off the writer's path. The writer's connection never checkpoints on its
//! own (`wal_autocheckpoint=0`): a checkpoint copies the WAL's pages into the file and syncs
//! both, milliseconds that the commit crossing the threshold would otherwise wait for, and
//! every caller queued behind it. A thread of its own, on a connection of its own, runs
//! `PASSIVE` checkpoints instead (they never block a writer in WAL mode) whenever the writer
//! committed since the last one, back to back while the writer keeps adding pages, so that the
//! WAL is wholly copied and the writer's next transaction starts it again from the beginning.
//!
//! Under a steady stream of commits the WAL is never wholly copied (the writer adds pages
//! while a checkpoint copies), so it would never start again and would grow without bound.
//! Once it holds more than [`RESTART_PAGES`], the thread copies pass after pass until one
//! finds few new pages, then copies those while it holds the writer's connection idle (no
//! round runs meanwhile): a millisecond or two, after which the writer's next transaction
//! starts the WAL again.
//!
//! That thread can fall behind: starved of CPU, or its syncs slow on a busy disk. So the
//! writer's own commits hold a hard cap ([`cap`]): a commit that leaves the WAL past
//! [`CAP_PAGES`] checkpoints it there and then, on the writer's thread, and the round's callers
//! wait for it. The WAL's size is bounded by the cap and one round, whatever the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;

/// How often the thread looks for new commits.
const PAUSE: Duration = Duration::from_millis(100);
/// How many checkpoints run back to back before the thread pauses again.
const RUNS_AT_MOST: usize = 16;
/// WAL pages beyond which the last pages are copied with the writer held: 16 MiB of the
/// store's pages ([`super::PAGE_BYTES`]; a file an earlier version made, whose rewrite with
/// them failed, holds 4 KiB pages, and four times the bytes).
pub(super) const RESTART_PAGES: i64 = (16 << 20) / super::PAGE_BYTES;

/// WAL pages past which the writer's own commit checkpoints (24 MiB): the thread fell behind.
pub(super) const CAP_PAGES: i64 = (24 << 20) / super::PAGE_BYTES;

/// Pages few enough to copy with the writer held (2 MiB): with the two syncs, a millisecond
/// or two of a writer's time.
const FEW_PAGES: i64 = (2 << 20) / super::PAGE_BYTES;

/// Runs the checkpoint it is given while no round of the writer runs.
pub(super) type WithWriterIdle = Box<dyn Fn(&mut dyn FnMut()) + Send>;

/// What the checkpoint thread reports.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Checkpoints run.
    pub(super) runs: AtomicU64,
    /// Of them, those run with the writer held idle.
    pub(super) with_writer_idle: AtomicU64,
    /// Checkpoints the writer's own commits ran at [`CAP_PAGES`].
    pub(super) by_the_writer: AtomicU64,
}

/// Holds the writer's connection to [`CAP_PAGES`]: each commit that leaves more pages in the
/// WAL checkpoints it at once, so the writer's next transaction starts the WAL again. A
/// checkpoint the thread is running holds SQLite's checkpoint lock (a second one is refused
/// `SQLITE_BUSY` at once, whatever its mode): the commit waits for it to end, then runs its
/// own, at most [`CAP_WAIT`] in all. A checkpoint that fails is logged, never reported as the
/// commit's failure (the commit holds).
pub(super) fn cap(conn: &mut Connection, counts: Arc<Counts>) -> rusqlite::Result<()> {
    conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
        if i64::from(pages) <= CAP_PAGES {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + CAP_WAIT;
        loop {
            match wal.checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE) {
                Ok(_) => {
                    counts.by_the_writer.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => {
                    tracing::warn!(error = %e, pages, "a SQLite store's capped checkpoint failed");
                    break;
                }
            }
        }
        Ok(())
    }))
}

/// The longest a commit at the cap waits for the thread's checkpoint to end.
const CAP_WAIT: Duration = Duration::from_secs(5);

/// Starts the checkpoint thread on `conn` (a connection of its own to the writer's file),
/// watching `rounds` (the writer's committed transactions); it ends when `stop`'s sender is
/// dropped (the writer ended). A checkpoint that fails or panics is logged and tried again at
/// the next pause: the thread outlives it, since without it the WAL would only grow.
pub(super) fn start(
    name: &str,
    conn: Connection,
    rounds: Arc<AtomicU64>,
    counts: Arc<Counts>,
    with_writer_idle: WithWriterIdle,
    stop: mpsc::Receiver<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("{name}-checkpoints"))
        .spawn(move || {
            let mut seen = u64::MAX;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(PAUSE) {
                let now = rounds.load(Ordering::Relaxed);
                if now == seen {
                    continue;
                }
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    catch_up(&conn, &counts, &with_writer_idle)
                }));
                match caught {
                    Ok(Ok(true)) => seen = now,
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "a SQLite store's checkpoint failed"),
                    Err(_) => tracing::error!("a SQLite store's checkpoint panicked"),
                }
            }
        })?;
    Ok(())
}

/// Checkpoints until the WAL is wholly copied or [`RUNS_AT_MOST`] ran; answers whether it is.
/// A WAL past [`RESTART_PAGES`] (it has not started again since) is copied pass after pass,
/// each with fewer new pages than the last, until a pass had at most [`FEW_PAGES`] to copy;
/// the last few are then copied with the writer held idle. (A pass that copied every page it
/// found says little under steady commits: pages came in while it copied.) When the passes
/// never get there (a writer that outpaces them, a thread starved of CPU), the WAL is copied
/// with the writer held all the same after the last pass: a longer hold, but a WAL whose size
/// stays bounded under any load.
fn catch_up(
    conn: &Connection,
    counts: &Counts,
    with_writer_idle: &WithWriterIdle,
) -> rusqlite::Result<bool> {
    let mut copied_before = 0;
    let mut log = 0;
    for _ in 0..RUNS_AT_MOST {
        let copied;
        (log, copied) = passive(conn)?;
        counts.runs.fetch_add(1, Ordering::Relaxed);
        let fresh = log - copied_before;
        copied_before = copied;
        if log <= RESTART_PAGES {
            if copied >= log {
                return Ok(true);
            }
        } else if fresh <= FEW_PAGES {
            return with_the_writer_idle(conn, counts, with_writer_idle);
        }
    }
    if log > RESTART_PAGES {
        return with_the_writer_idle(conn, counts, with_writer_idle);
    }
    Ok(false)
}

/// One checkpoint with no round of the writer running: it copies every page, and the
/// writer's next transaction starts the WAL again. Answers whether it copied them all.
fn with_the_writer_idle(
    conn: &Connection,
    counts: &Counts,
    with_writer_idle: &WithWriterIdle,
) -> rusqlite::Result<bool> {
    let mut finished = Ok((0, 0));
    with_writer_idle(&mut || finished = passive(conn));
    let (log, copied) = finished?;
    counts.runs.fetch_add(1, Ordering::Relaxed);
    counts.with_writer_idle.fetch_add(1, Ordering::Relaxed);
    Ok(copied >= log)
}

/// One `PASSIVE` checkpoint: the pages in the WAL and how many of them are copied.
pub(super) fn passive(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((row.get(1)?, row.get(2)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WAL past [`RESTART_PAGES`] whose pages no pass can copy: a reader holds a snapshot
    /// from before them (as a writer that outpaces every pass would leave pages uncopied).
    #[test]
    fn passes_that_never_catch_up_end_with_a_checkpoint_that_holds_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pinned.sqlite");
        let writer = super::super::connect(path.to_str().unwrap()).unwrap();
        writer
            .execute_batch("CREATE TABLE rows (body TEXT NOT NULL)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM rows;")
            .unwrap();
        let body = "x".repeat(4_000);
        let tx = writer.unchecked_transaction().unwrap();
        for _ in 0..5_000 {
            tx.execute("INSERT INTO rows (body) VALUES (?1)", [&body])
                .unwrap();
        }
        tx.commit().unwrap();
        let checkpoints = Connection::open(&path).unwrap();
        assert!(passive(&checkpoints).unwrap().0 > RESTART_PAGES);

        let counts = Counts::default();
        let held = Arc::new(AtomicU64::new(0));
        let holds = Arc::clone(&held);
        let with_writer_idle: WithWriterIdle = Box::new(move |checkpoint| {
            holds.fetch_add(1, Ordering::Relaxed);
            checkpoint();
        });
        let copied_all = catch_up(&checkpoints, &counts, &with_writer_idle).unwrap();

        assert!(!copied_all, "the reader's snapshot keeps the pages");
        assert_eq!(held.load(Ordering::Relaxed), 1, "the writer was held once");
        assert_eq!(counts.with_writer_idle.load(Ordering::Relaxed), 1);
        assert_eq!(
            counts.runs.load(Ordering::Relaxed),
            u64::try_from(RUNS_AT_MOST).unwrap() + 1,
            "every pass, then the one with the writer held"
        );
    }

    /// With no checkpoint thread at all (as good as one starved), the writer's own commits
    /// keep the WAL under its cap.
    #[test]
    fn the_writers_commits_keep_the_wal_under_its_cap_when_no_thread_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capped.sqlite");
        let mut writer = super::super::connect(path.to_str().unwrap()).unwrap();
        let counts = Arc::new(Counts::default());
        cap(&mut writer, Arc::clone(&counts)).unwrap();
        writer
            .execute_batch("CREATE TABLE rows (body TEXT NOT NULL)")
            .unwrap();
        let body = "x".repeat(4_000);
        // About 60 MiB through the WAL, in commits of 400 KB.
        for _ in 0..150 {
            let tx = writer.unchecked_transaction().unwrap();
            for _ in 0..100 {
                tx.execute("INSERT INTO rows (body) VALUES (?1)", [&body])
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        let wal = std::fs::metadata(dir.path().join("capped.sqlite-wal"))
            .unwrap()
            .len();
        assert!(wal < 32 << 20, "the WAL grew to {wal} bytes");
        assert!(counts.by_the_writer.load(Ordering::Relaxed) >= 2);
        let rows: i64 = writer
            .query_row("SELECT count(*) FROM rows", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 15_000, "every commit held");
    }
}
