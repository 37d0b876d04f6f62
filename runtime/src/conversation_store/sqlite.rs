//! The embedded conversation store: one SQLite file (or `:memory:`), WAL mode, one table of message
//! rows with a unique (context, turn).
//!
//! One writer thread owns the connection and its prepared statements. Calls queue to it as
//! jobs; every job waiting when the thread comes round runs in one transaction (group commit),
//! each under its own savepoint, so one job's failure undoes only that job, and every caller
//! hears back only once the transaction is committed. A turn's few writes thus cost a share of
//! one commit instead of a commit each, and no call blocks a worker of the async runtime.
//!
//! With a retention (`SESSION_TTL`), contexts whose newest row is older than it are deleted:
//! swept by the writer at most once per sweep interval, so no other background task is needed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tokio::sync::oneshot;

use super::{ConversationStore, NewRow, Row, RowRole, RowStatus, StoreError};
use crate::llm::ToolCall;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    context      TEXT    NOT NULL,
    turn         INTEGER NOT NULL,
    role         TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    message_id   TEXT,
    tool_calls   TEXT    NOT NULL DEFAULT '[]',
    tool_call_id TEXT,
    is_error     INTEGER NOT NULL DEFAULT 0,
    status       TEXT    NOT NULL,
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (context, turn)
);
DROP INDEX IF EXISTS messages_status;
DROP INDEX IF EXISTS messages_context_created;
CREATE INDEX IF NOT EXISTS messages_pending ON messages (status) WHERE status = 'pending';
";

/// The next turn number's source: the highest turn of a context.
const TURN_LOOKUP: &str = "SELECT MAX(turn) FROM messages WHERE context = ?1";

const INSERT_ROW: &str = "INSERT INTO messages
    (context, turn, role, content, message_id, tool_calls, tool_call_id, is_error, status)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const UPDATE_STATUS: &str = "UPDATE messages SET status = ?1 WHERE id = ?2 AND context = ?3";

/// A context's last `?2` rows, oldest first.
const RECENT_ROWS: &str = "SELECT * FROM (
    SELECT id, turn, role, content, tool_calls, tool_call_id, is_error, status, message_id
    FROM messages WHERE context = ?1 ORDER BY turn DESC LIMIT ?2
) ORDER BY turn";

/// WAL pages written before a checkpoint copies them into the file: a page written many
/// times in between is copied once, so a larger WAL means fewer copies of the hot pages.
const WAL_CHECKPOINT_PAGES: u32 = 10_000;

/// The longest time between two retention sweeps.
const SWEEP_EVERY_AT_MOST: Duration = Duration::from_hours(1);

/// The most jobs one transaction takes; the rest wait for the next (so no caller waits behind
/// an unbounded batch).
const JOBS_PER_COMMIT: usize = 512;

/// Sessions in SQLite. Cheap to clone: clones share the writer thread, which ends when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    location: String,
    jobs: mpsc::Sender<Job>,
    /// Jobs sent and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    /// Transactions the writer has committed (or tried to).
    #[cfg_attr(not(test), expect(dead_code, reason = "the tests count commits by it"))]
    rounds: Arc<AtomicU64>,
}

/// A call waiting for the writer: given the round's transaction (or why there is none), it
/// does its work and hands back its [`Reply`].
type Job = Box<dyn FnOnce(Result<&Transaction<'_>, &rusqlite::Error>) -> Reply + Send>;

/// What a job leaves to do once its transaction is over: answer its caller, told whether the
/// commit held.
type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

fn status_str(s: RowStatus) -> &'static str {
    match s {
        RowStatus::Pending => "pending",
        RowStatus::Complete => "complete",
        RowStatus::Error => "error",
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`; `:memory:` for a private in-memory one.
    /// Conversations are kept forever.
    pub fn open(path: &str) -> Result<Self, StoreError> {
        Self::open_with_ttl(path, None)
    }

    /// [`SqliteStore::open`], deleting contexts idle for longer than `ttl`.
    pub fn open_with_ttl(path: &str, ttl: Option<Duration>) -> Result<Self, StoreError> {
        let fail = |e: rusqlite::Error| StoreError::Backend {
            location: path.to_owned(),
            message: e.to_string(),
        };
        if path != ":memory:"
            && let Some(dir) = Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Backend {
                location: path.to_owned(),
                message: e.to_string(),
            })?;
        }
        let conn = connect(path).map_err(fail)?;
        let ttl = ttl.filter(|t| !t.is_zero());
        if let Some(ttl) = ttl {
            let removed = delete_idle(&conn, ttl).map_err(fail)?;
            if removed > 0 {
                tracing::info!(
                    rows = removed,
                    "deleted conversations idle for longer than SESSION_TTL"
                );
            }
        }
        let (jobs, queue) = mpsc::channel();
        let (queued, rounds) = (Arc::default(), Arc::default());
        let writer = Writer {
            conn,
            ttl,
            swept: Instant::now(),
            queued: Arc::clone(&queued),
            rounds: Arc::clone(&rounds),
        };
        std::thread::Builder::new()
            .name("sessions-sqlite".to_owned())
            .spawn(move || writer.run(&queue))
            .map_err(|e| StoreError::Backend {
                location: path.to_owned(),
                message: format!("cannot start the store's writer: {e}"),
            })?;
        Ok(Self {
            location: path.to_owned(),
            jobs,
            queued,
            rounds,
        })
    }

    /// Deletes every context whose newest row is older than `idle`; returns how many rows went.
    pub async fn expire_idle(&self, idle: Duration) -> Result<u64, StoreError> {
        self.with(move |tx| delete_idle(tx, idle)).await
    }

    /// Runs `work` in the writer's next transaction and answers its result once that
    /// transaction is committed.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer, answered) = oneshot::channel::<Result<T, String>>();
        let job: Job = Box::new(move |tx| {
            let result = match tx {
                Ok(tx) => in_savepoint(tx, work).map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot begin a transaction: {e}")),
            };
            Box::new(move |committed: Result<(), String>| {
                let _ = answer.send(committed.and(result));
            })
        });
        let stopped = || StoreError::Backend {
            location: self.location.clone(),
            message: "the store's writer stopped".to_owned(),
        };
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.jobs.send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(stopped());
        }
        match answered.await {
            Ok(result) => result.map_err(|message| StoreError::Backend {
                location: self.location.clone(),
                message,
            }),
            Err(_) => Err(stopped()),
        }
    }
}

/// Opens the connection the writer owns, with its settings, schema and migrations.
fn connect(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
    // After a checkpoint, a WAL file grown past twice its usual size is cut back.
    conn.pragma_update(None, "journal_size_limit", 2 * 4096 * WAL_CHECKPOINT_PAGES)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // A plan fixed when a statement is prepared: otherwise SQLite prepares a cached statement
    // again whenever a bound value could pick another plan, and `messages_pending` (a
    // partial index) made that every run of the turn lookup.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(32);
    conn.execute_batch(SCHEMA)?;
    migrate(&conn)?;
    Ok(conn)
}

/// Runs `work` under a savepoint of `tx`: kept if it succeeds, undone if it fails.
fn in_savepoint<T>(
    tx: &Transaction<'_>,
    work: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    tx.prepare_cached("SAVEPOINT job")?.execute([])?;
    match work(tx) {
        Ok(value) => {
            tx.prepare_cached("RELEASE job")?.execute([])?;
            Ok(value)
        }
        Err(e) => {
            let _ = tx.execute_batch("ROLLBACK TO job; RELEASE job");
            Err(e)
        }
    }
}

/// The thread that owns the connection.
struct Writer {
    conn: Connection,
    ttl: Option<Duration>,
    /// When the last retention sweep ran.
    swept: Instant,
    queued: Arc<AtomicUsize>,
    rounds: Arc<AtomicU64>,
}

impl Writer {
    /// Takes jobs until every handle on the store is dropped: each round, every job waiting
    /// (up to [`JOBS_PER_COMMIT`]) in one transaction.
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
            self.sweep_if_due();
            // A panic in one round fails that round's callers (their answers are dropped),
            // not the store: the transaction rolls back as it unwinds.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit(batch)))
                .is_err()
            {
                tracing::error!("a session store round panicked; its calls failed");
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
            tracing::error!(error = %why, "the session store cannot commit");
        }
        for reply in replies {
            reply(committed.clone());
        }
    }

    /// Deletes idle contexts when a retention sweep is due.
    fn sweep_if_due(&mut self) {
        let Some(ttl) = self.ttl else { return };
        let interval = (ttl / 10).clamp(Duration::from_secs(1), SWEEP_EVERY_AT_MOST);
        if self.swept.elapsed() < interval {
            return;
        }
        self.swept = Instant::now();
        if let Err(e) = delete_idle(&self.conn, ttl) {
            tracing::error!(error = %e, "the session store cannot delete idle conversations");
        }
    }
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn append(&self, context: &str, rows: Vec<NewRow>) -> Result<Vec<i64>, StoreError> {
        let context = context.to_owned();
        self.with(move |tx| insert_rows(tx, &context, rows)).await
    }

    async fn set_status(
        &self,
        context: &str,
        ids: &[i64],
        status: RowStatus,
    ) -> Result<(), StoreError> {
        let (context, ids) = (context.to_owned(), ids.to_vec());
        self.with(move |tx| update_status(tx, &context, &ids, status))
            .await
    }

    async fn finish(
        &self,
        context: &str,
        ids: &[i64],
        rows: Vec<NewRow>,
        status: RowStatus,
    ) -> Result<Vec<i64>, StoreError> {
        let (context, ids) = (context.to_owned(), ids.to_vec());
        self.with(move |tx| {
            let appended = insert_rows(tx, &context, rows)?;
            update_status(tx, &context, &ids, status)?;
            Ok(appended)
        })
        .await
    }

    async fn rows(&self, context: &str, last: usize) -> Result<Vec<Row>, StoreError> {
        let context = context.to_owned();
        let last = i64::try_from(last).unwrap_or(i64::MAX);
        self.with(move |tx| recent_rows(tx, &context, last)).await
    }

    async fn compact(
        &self,
        context: &str,
        through: i64,
        summary: Option<String>,
    ) -> Result<u64, StoreError> {
        let context = context.to_owned();
        self.with(move |tx| {
            let removed = tx.execute(
                "DELETE FROM messages WHERE context = ?1 AND turn <= ?2",
                params![context, through],
            )?;
            if let Some(summary) = summary {
                tx.execute(
                    "INSERT INTO messages (context, turn, role, content, status)
                     VALUES (?1, ?2, 'summary', ?3, 'complete')",
                    params![context, through, summary],
                )?;
            }
            Ok(u64::try_from(removed).unwrap_or(u64::MAX))
        })
        .await
    }

    async fn recover(&self) -> Result<u64, StoreError> {
        self.with(|tx| {
            let changed = tx.execute(
                "UPDATE messages SET status = 'error' WHERE status = 'pending'",
                [],
            )?;
            Ok(u64::try_from(changed).unwrap_or(u64::MAX))
        })
        .await
    }
}

/// Appends `rows` to `context`, each with the next turn index; returns their ids.
fn insert_rows(
    tx: &Transaction<'_>,
    context: &str,
    rows: Vec<NewRow>,
) -> rusqlite::Result<Vec<i64>> {
    let first: i64 = tx
        .prepare_cached(TURN_LOOKUP)?
        .query_row(params![context], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten()
        .map_or(0, |t| t + 1);
    let mut insert = tx.prepare_cached(INSERT_ROW)?;
    let mut ids = Vec::with_capacity(rows.len());
    for (turn, row) in (first..).zip(rows) {
        let calls = serde_json::to_string(&row.tool_calls).unwrap_or_else(|_| "[]".to_owned());
        insert.execute(params![
            context,
            turn,
            row.role.as_str(),
            row.content,
            row.message_id,
            calls,
            row.tool_call_id,
            row.is_error,
            status_str(row.status)
        ])?;
        ids.push(tx.last_insert_rowid());
    }
    Ok(ids)
}

/// The last `last` rows of `context`, oldest first.
fn recent_rows(tx: &Transaction<'_>, context: &str, last: i64) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = tx.prepare_cached(RECENT_ROWS)?;
    let rows = stmt.query_map(params![context, last], |r| {
        let role: String = r.get(2)?;
        let calls: String = r.get(4)?;
        let status: String = r.get(7)?;
        Ok(Row {
            id: r.get(0)?,
            turn: r.get(1)?,
            role: match role.as_str() {
                "user" => RowRole::User,
                "tool" => RowRole::Tool,
                "summary" => RowRole::Summary,
                _ => RowRole::Assistant,
            },
            content: r.get(3)?,
            message_id: r.get(8)?,
            tool_calls: serde_json::from_str::<Vec<ToolCall>>(&calls).unwrap_or_default(),
            tool_call_id: r.get(5)?,
            is_error: r.get(6)?,
            status: match status.as_str() {
                "pending" => RowStatus::Pending,
                "complete" => RowStatus::Complete,
                _ => RowStatus::Error,
            },
        })
    })?;
    rows.collect()
}

/// Sets `status` on the rows of `context` with `ids`.
fn update_status(
    tx: &Transaction<'_>,
    context: &str,
    ids: &[i64],
    status: RowStatus,
) -> rusqlite::Result<()> {
    let mut update = tx.prepare_cached(UPDATE_STATUS)?;
    for id in ids {
        update.execute(params![status_str(status), id, context])?;
    }
    Ok(())
}

/// Brings a file written by an earlier version up to [`SCHEMA`]: the `message_id` column.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_message_id: bool = conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('messages') WHERE name = 'message_id'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has_message_id {
        conn.execute_batch("ALTER TABLE messages ADD COLUMN message_id TEXT")?;
    }
    Ok(())
}

/// Deletes the contexts whose newest row is older than `idle`.
///
/// Rows are written by one writer in order, so row ids grow with `created_at`: the first row
/// written since the cutoff (found by walking only the rows older than it) splits the
/// contexts, and those whose newest row id is below it go. The walk over contexts reads only
/// the (context, turn) index, which holds every row's id: no other index is kept for this.
fn delete_idle(conn: &Connection, idle: Duration) -> rusqlite::Result<u64> {
    let cutoff = format!("-{:.3} seconds", idle.as_secs_f64());
    let first_kept: Option<i64> = conn
        .query_row(
            "SELECT id FROM messages
             WHERE created_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)
             ORDER BY id LIMIT 1",
            params![cutoff],
            |r| r.get(0),
        )
        .optional()?;
    let removed = conn.execute(
        "DELETE FROM messages WHERE context IN (
            SELECT context FROM messages GROUP BY context HAVING MAX(id) < ?1
         )",
        params![first_kept.unwrap_or(i64::MAX)],
    )?;
    Ok(u64::try_from(removed).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;
