//! One writer thread per SQLite file, with group commit: the thread owns the connection and
//! its prepared statements; calls queue to it as jobs, and every job waiting when the thread
//! comes round runs in one transaction, each under its own savepoint, so one job's failure
//! undoes only that job, and every caller hears back only once the transaction is committed.
//! A turn's few writes thus cost a share of one commit instead of a commit each, and no call
//! blocks a worker of the async runtime. The conversation store and the task store (with the
//! push records beside it) each have one.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, Transaction};
use tokio::sync::oneshot;

/// WAL pages written before a checkpoint copies them into the file: a page written many
/// times in between is copied once, so a larger WAL means fewer copies of the hot pages.
const WAL_CHECKPOINT_PAGES: u32 = 10_000;

/// Opens the SQLite file at `path` (or `:memory:`) as a writer thread's connection: WAL, a
/// commit synced at checkpoints rather than each time (`synchronous=NORMAL`: a crash of the
/// process loses nothing committed; a crash of the machine may lose the last commits), a
/// roomy WAL cut back after checkpoints, and plans fixed when a statement is prepared
/// (otherwise SQLite prepares a cached statement again whenever a bound value could pick
/// another plan: a partial index made that every run of the conversation store's turn lookup).
pub fn connect(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
    conn.pragma_update(None, "journal_size_limit", 2 * 4096 * WAL_CHECKPOINT_PAGES)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// The most jobs one transaction takes; the rest wait for the next (so no caller waits behind
/// an unbounded batch).
const JOBS_PER_COMMIT: usize = 512;

/// The handle on a writer thread. Cheap to clone: clones share the thread, which ends when
/// the last clone is dropped.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    jobs: mpsc::Sender<Job>,
    /// Jobs sent and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    /// Transactions the writer has committed (or tried to).
    rounds: Arc<AtomicU64>,
}

/// A call waiting for the writer: given the round's transaction (or why there is none), it
/// does its work and hands back its [`Reply`].
type Job = Box<dyn FnOnce(Result<&Transaction<'_>, &rusqlite::Error>) -> Reply + Send>;

/// What a job leaves to do once its transaction is over: answer its caller, told whether the
/// commit held.
type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Why a call got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriterError {
    /// The job itself failed (undone), or its transaction could not begin or commit.
    #[error("{0}")]
    Failed(String),
    /// The writer thread is gone.
    #[error("the store's writer stopped")]
    Stopped,
}

impl GroupCommit {
    /// Starts the thread `name`, owning `conn`; `before_round` runs on the connection before
    /// each round's transaction (a retention sweep that is due, say).
    pub fn start(
        name: &str,
        conn: Connection,
        before_round: impl FnMut(&Connection) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        let (queued, rounds) = (Arc::default(), Arc::default());
        let writer = Writer {
            conn,
            before_round: Box::new(before_round),
            queued: Arc::clone(&queued),
            rounds: Arc::clone(&rounds),
        };
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || writer.run(&queue))?;
        Ok(Self {
            jobs,
            queued,
            rounds,
        })
    }

    /// Runs `work` in the writer's next transaction, under a savepoint of its own (undone if
    /// it fails), and answers its result once that transaction is committed.
    pub async fn with<T: Send + 'static, E: Display + 'static>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, WriterError> {
        let (answer, answered) = oneshot::channel::<Result<T, String>>();
        let job: Job = Box::new(move |tx| {
            let result = match tx {
                Ok(tx) => in_savepoint(tx, work),
                Err(e) => Err(format!("cannot begin a transaction: {e}")),
            };
            Box::new(move |committed: Result<(), String>| {
                let _ = answer.send(committed.and(result));
            })
        });
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.jobs.send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(WriterError::Stopped);
        }
        match answered.await {
            Ok(result) => result.map_err(WriterError::Failed),
            Err(_) => Err(WriterError::Stopped),
        }
    }

    /// Jobs sent and not yet taken by the writer.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Transactions the writer has committed (or tried to).
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }
}

/// Runs `work` under a savepoint of `tx`: kept if it succeeds, undone if it fails.
pub(crate) fn in_savepoint<T, E: Display>(
    tx: &Transaction<'_>,
    work: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, String> {
    let savepoint = |sql: &str| {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(|e| e.to_string())
    };
    savepoint("SAVEPOINT job")?;
    match work(tx) {
        Ok(value) => {
            savepoint("RELEASE job")?;
            Ok(value)
        }
        Err(e) => {
            let _ = tx.execute_batch("ROLLBACK TO job; RELEASE job");
            Err(e.to_string())
        }
    }
}

/// The thread that owns the connection.
struct Writer {
    conn: Connection,
    before_round: Box<dyn FnMut(&Connection) + Send>,
    queued: Arc<AtomicUsize>,
    rounds: Arc<AtomicU64>,
}

impl Writer {
    /// Takes jobs until every handle is dropped: each round, every job waiting (up to
    /// [`JOBS_PER_COMMIT`]) in one transaction.
    fn run(mut self, queue: &mpsc::Receiver<Job>) {
        while let Ok(first) = queue.recv() {
            let mut batch = vec![first];
            while batch.len() < JOBS_PER_COMMIT {
                match queue.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            self.queued.fetch_sub(batch.len(), Ordering::Relaxed);
            self.rounds.fetch_add(1, Ordering::Relaxed);
            (self.before_round)(&self.conn);
            // A panic in one round fails that round's callers (their answers are dropped),
            // not the store: the transaction rolls back as it unwinds.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit(batch)))
                .is_err()
            {
                tracing::error!("a SQLite store's round panicked; its calls failed");
            }
        }
    }

    /// Runs `batch` in one transaction, then answers each job with whether it committed.
    fn commit(&mut self, batch: Vec<Job>) {
        let (replies, committed): (Vec<Reply>, _) = match self.conn.transaction() {
            Ok(tx) => {
                let replies = batch.into_iter().map(|job| job(Ok(&tx))).collect();
                (
                    replies,
                    tx.commit().map_err(|e| format!("cannot commit: {e}")),
                )
            }
            Err(e) => {
                let replies = batch.into_iter().map(|job| job(Err(&e))).collect();
                (replies, Ok(()))
            }
        };
        if let Err(why) = &committed {
            tracing::error!(error = %why, "a SQLite store cannot commit");
        }
        for reply in replies {
            reply(committed.clone());
        }
    }
}
