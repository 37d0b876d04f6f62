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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;

/// How often the thread looks for new commits.
const PAUSE: Duration = Duration::from_millis(100);
/// How many checkpoints run back to back before the thread pauses again.
const RUNS_AT_MOST: usize = 16;
/// WAL pages beyond which the last pages are copied with the writer held (16 MiB of 4 KiB
/// pages).
pub(super) const RESTART_PAGES: i64 = 4_096;

/// Pages few enough to copy with the writer held (2 MiB): with the two syncs, a millisecond
/// or two of a writer's time.
const FEW_PAGES: i64 = 512;

/// Runs the checkpoint it is given while no round of the writer runs.
pub(super) type WithWriterIdle = Box<dyn Fn(&mut dyn FnMut()) + Send>;

/// What the checkpoint thread reports.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Checkpoints run.
    pub(super) runs: AtomicU64,
    /// Of them, those run with the writer held idle.
    pub(super) with_writer_idle: AtomicU64,
}

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
}
