//! One writer per SQLite file, with group commit: one connection and its prepared
//! statements; calls queue as jobs, and every job waiting when a round begins runs in one
//! transaction, each under its own savepoint, so one job's failure undoes only that job, and
//! every caller hears back only once the transaction is committed. A turn's few writes thus
//! cost a share of one commit instead of a commit each. The conversation store and the task
//! store (with the push records beside it) each have one.
//!
//! Every store kept in one file shares its one writer ([`crate::stores::sqlite_file`]), so the
//! writes of one turn (its task, its conversation, what push and budgets keep) share rounds.
//!
//! **Who commits.** The writer's own thread: it commits every waiting job in each round, so
//! no worker of the async runtime is held by SQLite. (Committing a lone call on its caller's
//! thread, to spare the two thread switches, was measured: no gain at one request in flight,
//! where the SQLite work, not the switches, is the cost.) A round is CPU and page-cache work
//! only: commits are not synced (`synchronous=NORMAL`), and WAL checkpoints, which are, run
//! on a thread of their own ([`checkpoints`]); the retention sweeps run between rounds and
//! cost what they delete.

mod checkpoints;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, Transaction};
use tokio::sync::oneshot;

/// The WAL file is cut back to this size when it starts again from the beginning.
const WAL_BYTES_KEPT: i64 = 16 << 20;

/// Opens the SQLite file at `path` (or `:memory:`) as a writer thread's connection: WAL, a
/// commit synced at checkpoints rather than each time (`synchronous=NORMAL`: a crash of the
/// process loses nothing committed; a crash of the machine may lose the last commits), no
/// checkpoint on a commit's path (the writer's [`checkpoints`] thread runs them), and plans
/// fixed when a statement is prepared (otherwise SQLite prepares a cached statement again
/// whenever a bound value could pick another plan: a partial index made that every run of
/// the conversation store's turn lookup).
pub fn connect(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    small_pages(&conn, path);
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.pragma_update(None, "journal_size_limit", WAL_BYTES_KEPT)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// The page size of a store's file. A commit writes each page it touches whole to the WAL
/// (and again at the next checkpoint), and a turn touches about four (the task's row and its
/// id's index, the conversation's rows and their index), whatever the size of what changed:
/// at 1 KiB a passthrough turn writes about a third of what it wrote at SQLite's default
/// 4 KiB. Bigger values spill to overflow pages, written only when they change.
pub const PAGE_BYTES: i64 = 1024;

/// Gives the file at `path` pages of [`PAGE_BYTES`]: a new file is made with them; a file an
/// earlier version made with other pages is rewritten once (`VACUUM`, out of WAL: the file
/// must not be open elsewhere, as no other process writes it). A file that cannot be rewritten
/// (no room on its disk, say) keeps its pages, and says so.
fn small_pages(conn: &Connection, path: &str) {
    let page: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap_or(PAGE_BYTES);
    if page == PAGE_BYTES {
        return;
    }
    let tables: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_schema", [], |r| r.get(0))
        .unwrap_or(0);
    if tables == 0 || path == ":memory:" {
        // Takes effect when the first table is made.
        let _ = conn.pragma_update(None, "page_size", PAGE_BYTES);
        return;
    }
    let started = std::time::Instant::now();
    let rewritten = conn
        .pragma_update(None, "journal_mode", "DELETE")
        .and_then(|()| conn.pragma_update(None, "page_size", PAGE_BYTES))
        .and_then(|()| conn.execute_batch("VACUUM"));
    match rewritten {
        Ok(()) => tracing::info!(
            from = page,
            to = PAGE_BYTES,
            took_ms = started.elapsed().as_millis(),
            "the store's file was rewritten once with smaller pages"
        ),
        Err(e) => tracing::warn!(
            error = %e,
            page,
            "the store's file keeps its pages: it could not be rewritten with smaller ones"
        ),
    }
}

/// The most jobs one transaction takes; the rest wait for the next (so no caller waits behind
/// an unbounded batch).
const JOBS_PER_COMMIT: usize = 512;

/// How often the writer's thread wakes on its own (for the due sweeps, and the shutdown).
const WRITER_TICK: Duration = Duration::from_secs(1);

/// The handle on a writer. Cheap to clone: clones share it; its thread ends, and its
/// connection closes, when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    handle: Arc<Handle>,
}

/// Shared by the clones of a [`GroupCommit`]: the last one dropped stops the writer's thread.
#[derive(Debug)]
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake_writer();
    }
}

/// What every caller and the writer's thread share.
struct Shared {
    /// Jobs waiting for a round, and when the oldest of them was queued.
    queue: Mutex<Queued>,
    /// A caller woke the writer since it last looked (a call awaited, a later one awaited).
    woken: AtomicBool,
    /// The connection, held by whoever commits a round.
    writer: Mutex<Writer>,
    /// Transactions committed (or tried).
    rounds: Arc<AtomicU64>,
    /// What the checkpoint thread reports.
    checkpoints: Arc<checkpoints::Counts>,
    /// Set when the last handle is dropped.
    closed: AtomicBool,
    /// The writer's thread, once started.
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// The file's write-ahead log (none for `:memory:`).
    wal: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("rounds", &self.rounds)
            .finish_non_exhaustive()
    }
}

/// A call waiting for a round: given the round's transaction (or why there is none), it
/// does its work and hands back its [`Reply`].
type Job = Box<dyn FnOnce(Result<&Transaction<'_>, &Arc<rusqlite::Error>>) -> Reply + Send>;

/// What a job leaves to do once its transaction is over: answer its caller, told whether the
/// commit held.
type Reply = Box<dyn FnOnce(Result<(), Arc<rusqlite::Error>>) + Send>;

/// What a job may fail with: any error (a SQLite error, a record that does not read), kept
/// whole for the caller's `source()`.
pub type JobError = Box<dyn std::error::Error + Send + Sync>;

/// Why a call got no result; each failure keeps the error underneath as its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The job itself failed; its savepoint was undone, the round's other jobs stand.
    #[error(transparent)]
    Job(JobError),
    /// The job's savepoint could not be set or released.
    #[error("cannot keep the job apart in its transaction: {0}")]
    Savepoint(#[source] rusqlite::Error),
    /// The round's transaction could not begin: no job of it ran.
    #[error("cannot begin a transaction: {0}")]
    Begin(#[source] Arc<rusqlite::Error>),
    /// The round's transaction could not commit: no job of it was kept.
    #[error("cannot commit: {0}")]
    Commit(#[source] Arc<rusqlite::Error>),
    /// The writer stopped.
    #[error("the store's writer stopped")]
    Stopped,
}

impl GroupCommit {
    /// Starts the writer `name` on `conn` (from [`connect`]): its thread, and the thread that
    /// checkpoints its file; each sweep added ([`GroupCommit::add_sweep`]) runs on the
    /// connection when the writer's thread wakes (a retention sweep that is due, say).
    pub fn start(name: &str, mut conn: Connection) -> std::io::Result<Self> {
        // The checkpoints' own connection, opened here so that a file the writer can open
        // but the checkpoints cannot is an error at startup, not a WAL that only grows.
        let checkpointing = match conn.path().filter(|p| !p.is_empty()) {
            Some(path) => Some(Connection::open(path).map_err(std::io::Error::other)?),
            None => None,
        };
        let counts = Arc::<checkpoints::Counts>::default();
        if checkpointing.is_some() {
            checkpoints::cap(&mut conn, Arc::clone(&counts)).map_err(std::io::Error::other)?;
        }
        let wal = conn
            .path()
            .filter(|p| !p.is_empty())
            .map(|p| std::path::PathBuf::from(format!("{p}-wal")));
        let shared = Arc::new(Shared {
            wal,
            queue: Mutex::new(Queued::default()),
            woken: AtomicBool::new(false),
            writer: Mutex::new(Writer {
                conn,
                sweeps: Vec::new(),
            }),
            rounds: Arc::new(AtomicU64::new(0)),
            checkpoints: counts,
            closed: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
        });
        // The checkpoint thread ends when the writer's does: that one holds `stop`'s sender.
        let (stop, stopped) = mpsc::channel::<()>();
        if let Some(checkpointing) = checkpointing {
            let idle = Arc::downgrade(&shared);
            checkpoints::start(
                name,
                checkpointing,
                Arc::clone(&shared.rounds),
                Arc::clone(&shared.checkpoints),
                Box::new(move |checkpoint| {
                    if let Some(shared) = idle.upgrade() {
                        shared.with_writer_idle(checkpoint);
                    }
                }),
                stopped,
            )?;
        }
        let on_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _stop = stop;
                on_thread.run_thread();
            })?
            .thread()
            .clone();
        let _ = shared.thread.set(thread);
        Ok(Self {
            handle: Arc::new(Handle { shared }),
        })
    }

    /// Runs `work` in the writer's next round, under a savepoint of its own (undone if it
    /// fails), and answers its result once that round's transaction is committed.
    pub async fn with<T: Send + 'static, E>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, WriterError>
    where
        E: Into<JobError> + 'static,
    {
        self.queue(work).committed().await
    }

    /// Queues `work` without waking the writer: it joins the next round a call that is awaited
    /// wakes (or the writer's own, within [`WRITER_TICK`]), so the writes of a turn share the
    /// commit of its end. What it answers is there once that round is committed; awaiting it
    /// ([`Later::committed`]) commits it now, with whatever else waits.
    pub fn later<T: Send + 'static, E>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    ) -> Later<T>
    where
        E: Into<JobError> + 'static,
    {
        self.queue(work)
    }

    fn queue<T: Send + 'static, E>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    ) -> Later<T>
    where
        E: Into<JobError> + 'static,
    {
        let (answer, answered) = oneshot::channel::<Result<T, WriterError>>();
        let job: Job = Box::new(move |tx| {
            let result = match tx {
                Ok(tx) => in_savepoint(tx, work),
                Err(e) => Err(WriterError::Begin(Arc::clone(e))),
            };
            Box::new(move |committed: Result<(), Arc<rusqlite::Error>>| {
                let _ = answer.send(committed.map_err(WriterError::Commit).and(result));
            })
        });
        self.handle.shared.push(job);
        Later {
            answered,
            shared: Arc::downgrade(&self.handle.shared),
        }
    }

    /// Runs `sweep` on the connection each time the writer's thread wakes, before its round
    /// (a store's retention: it decides itself whether it is due).
    pub fn add_sweep(&self, sweep: impl FnMut(&Connection) + Send + 'static) {
        self.handle
            .shared
            .lock_writer()
            .sweeps
            .push(Box::new(sweep));
    }

    /// Runs `setup` on the connection now, outside any round, while no round runs (a store
    /// making its tables, counting its rows, sweeping at open).
    pub fn setup<T>(&self, setup: impl FnOnce(&Connection) -> T) -> T {
        setup(&self.handle.shared.lock_writer().conn)
    }

    /// What the writer has done so far, read at any time (the metrics' store figures).
    pub fn stats(&self) -> WriterStats {
        let shared = &self.handle.shared;
        WriterStats {
            rounds: Arc::clone(&shared.rounds),
            checkpoints: Arc::clone(&shared.checkpoints),
            wal: shared.wal.clone(),
        }
    }

    /// Jobs queued and not yet taken into a round.
    pub fn queued(&self) -> usize {
        self.handle.shared.lock_queue().jobs.len()
    }

    /// Transactions committed (or tried).
    pub fn rounds(&self) -> u64 {
        self.handle.shared.rounds.load(Ordering::Relaxed)
    }

    /// WAL checkpoints run on the file.
    pub fn checkpoints(&self) -> u64 {
        self.handle.shared.checkpoints.runs.load(Ordering::Relaxed)
    }

    /// Of them, those that held the writer idle to let the WAL start again.
    pub fn checkpoints_with_writer_idle(&self) -> u64 {
        self.handle
            .shared
            .checkpoints
            .with_writer_idle
            .load(Ordering::Relaxed)
    }

    /// Checkpoints the writer's own commits ran, the WAL past its cap (the checkpoint thread
    /// had fallen behind).
    pub fn checkpoints_by_the_writer(&self) -> u64 {
        self.handle
            .shared
            .checkpoints
            .by_the_writer
            .load(Ordering::Relaxed)
    }
}

impl Shared {
    fn push(&self, job: Job) {
        let mut queue = self.lock_queue();
        if queue.jobs.is_empty() {
            queue.since = Some(std::time::Instant::now());
        }
        queue.jobs.push(job);
    }

    /// Wakes the writer's thread (a wake before it parks is kept: it does not park then).
    fn wake_writer(&self) {
        self.woken.store(true, Ordering::Release);
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queued> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the writer should commit what waits now: a caller woke it, or what waits was
    /// queued for later at least a [`WRITER_TICK`] ago and nobody awaited it (a later call
    /// that its turn waits for is never committed alone by the tick that happens to fall
    /// between it and the turn's end).
    fn due(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
            || self
                .lock_queue()
                .since
                .is_some_and(|since| since.elapsed() >= WRITER_TICK)
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Up to [`JOBS_PER_COMMIT`] waiting jobs, oldest first.
    fn take_batch(&self) -> Vec<Job> {
        let mut queue = self.lock_queue();
        let batch: Vec<Job> = if queue.jobs.len() <= JOBS_PER_COMMIT {
            std::mem::take(&mut queue.jobs)
        } else {
            queue.jobs.drain(..JOBS_PER_COMMIT).collect()
        };
        queue.since = (!queue.jobs.is_empty()).then(std::time::Instant::now);
        batch
    }

    fn is_idle(&self) -> bool {
        self.lock_queue().jobs.is_empty()
    }

    /// Commits rounds while jobs wait and are due (all of them when `closing`). No job is
    /// left behind: a job is queued before the thread is unparked, and the thread looks at
    /// the queue after every round.
    fn commit_rounds(&self, closing: bool) {
        while (closing || self.due()) && !self.is_idle() {
            let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let batch = self.take_batch();
            if !batch.is_empty() {
                self.rounds.fetch_add(1, Ordering::Relaxed);
                writer.commit_caught(batch);
            }
        }
    }

    /// Runs `checkpoint` while it holds the connection, so no round runs meanwhile; then
    /// has the writer's thread take what queued.
    fn with_writer_idle(&self, checkpoint: &mut dyn FnMut()) {
        {
            let _idle = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            checkpoint();
        }
        self.wake_writer();
    }

    /// The writer's thread: wakes when a caller hands it a queue, when the last handle goes,
    /// and every [`WRITER_TICK`]; each time it runs the due sweeps and every waiting job.
    fn run_thread(&self) {
        loop {
            std::thread::park_timeout(WRITER_TICK);
            {
                let mut guard = self.lock_writer();
                let writer = &mut *guard;
                for sweep in &mut writer.sweeps {
                    // A sweep that panics is skipped, not the writer: its thread serves every
                    // call.
                    let swept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        sweep(&writer.conn);
                    }));
                    if swept.is_err() {
                        tracing::error!("a SQLite store's sweep panicked; the writer goes on");
                    }
                }
            }
            let closing = self.closed.load(Ordering::Acquire);
            self.commit_rounds(closing);
            if closing && self.is_idle() {
                return;
            }
        }
    }
}

/// Runs `work` under a savepoint of `tx`: kept if it succeeds, undone if it fails.
pub(crate) fn in_savepoint<T, E>(
    tx: &Transaction<'_>,
    work: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, WriterError>
where
    E: Into<JobError>,
{
    let savepoint = |sql: &str| {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(WriterError::Savepoint)
    };
    savepoint("SAVEPOINT job")?;
    match work(tx) {
        Ok(value) => {
            savepoint("RELEASE job")?;
            Ok(value)
        }
        Err(e) => {
            let _ = tx.execute_batch("ROLLBACK TO job; RELEASE job");
            Err(WriterError::Job(e.into()))
        }
    }
}

/// The jobs waiting for a round.
#[derive(Default)]
struct Queued {
    jobs: Vec<Job>,
    /// When the oldest of them was queued.
    since: Option<std::time::Instant>,
}

/// A call queued to join a later round ([`GroupCommit::later`]).
#[must_use = "a write queued for later is committed by the next round, and answers there"]
pub struct Later<T> {
    answered: oneshot::Receiver<Result<T, WriterError>>,
    shared: std::sync::Weak<Shared>,
}

impl<T> std::fmt::Debug for Later<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Later")
    }
}

impl<T> Later<T> {
    /// Its result, once committed: the writer is woken for it, and the round takes what else
    /// waits with it. One already committed (with the turn's end, say) wakes nothing: a
    /// wake-up left over would commit the next turn's begin alone.
    pub async fn committed(mut self) -> Result<T, WriterError> {
        match self.answered.try_recv() {
            Ok(answer) => return answer,
            Err(oneshot::error::TryRecvError::Closed) => return Err(WriterError::Stopped),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        if let Some(shared) = self.shared.upgrade() {
            shared.wake_writer();
        }
        self.answered.await.unwrap_or(Err(WriterError::Stopped))
    }
}

/// What runs on the connection between rounds: a store's retention sweep.
type Sweep = Box<dyn FnMut(&Connection) + Send>;

/// The connection and what runs on it between rounds.
struct Writer {
    conn: Connection,
    sweeps: Vec<Sweep>,
}

/// What a writer has done so far: its rounds (each a commit), its checkpoints, and its WAL.
#[derive(Debug, Clone)]
pub struct WriterStats {
    rounds: Arc<AtomicU64>,
    checkpoints: Arc<checkpoints::Counts>,
    wal: Option<std::path::PathBuf>,
}

impl crate::platform::metrics::StoreFigures for WriterStats {
    /// Transactions committed (or tried).
    fn commits(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// WAL checkpoints run on the file.
    fn checkpoints(&self) -> u64 {
        self.checkpoints.runs.load(Ordering::Relaxed)
    }

    /// The WAL's size now, in bytes (`0` for a file in memory, or a WAL not there).
    fn wal_bytes(&self) -> u64 {
        self.wal
            .as_ref()
            .and_then(|wal| std::fs::metadata(wal).ok())
            .map_or(0, |m| m.len())
    }
}

impl Writer {
    /// Commits `batch`; a panic in it fails that round's callers (their answers are
    /// dropped), not the store: the transaction rolls back as it unwinds.
    fn commit_caught(&mut self, batch: Vec<Job>) {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit(batch))).is_err() {
            tracing::error!("a SQLite store's round panicked; its calls failed");
        }
    }

    /// Runs `batch` in one transaction, then answers each job with whether it committed.
    fn commit(&mut self, batch: Vec<Job>) {
        let (replies, committed): (Vec<Reply>, _) = match self.conn.transaction() {
            Ok(tx) => {
                let replies = batch.into_iter().map(|job| job(Ok(&tx))).collect();
                (replies, tx.commit().map_err(Arc::new))
            }
            Err(e) => {
                let e = Arc::new(e);
                let replies = batch.into_iter().map(|job| job(Err(&e))).collect();
                (replies, Ok(()))
            }
        };
        if let Err(e) = &committed {
            tracing::error!(error = %e, "a SQLite store cannot commit");
        }
        for reply in replies {
            reply(committed.clone());
        }
    }
}

#[cfg(test)]
mod tests;
