//! Tasks in SQLite (`TASKS_DB=<file>`): one row per task, its JSON as it stands and its
//! revision, so a restart on one machine keeps them. A write is compare-and-set on the
//! revision (`UPDATE … WHERE revision = ?`). Rows older than `TASK_TTL`, and all but the
//! `MAX_TASKS` newest, are deleted when the file is opened and then after every [`SWEEP_EVERY`]
//! writes, at most once every [`SWEEP_PAUSE`]. A sweep costs what it deletes, not what the
//! table holds (the rows are counted once at open, then as they come and go): it runs
//! between two commits, and a whole-table sweep there stalled every request behind it. The
//! file's [`GroupCommit`] writer commits: the writes of turns running at once share a commit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::backend::{
    BackendError, BeganLater, StoredTask, TaskBackend, TurnStep, Versioned, WriteError, now_ms,
};
use super::list::{Asked, Selection, status_micros};
use super::sqlite_select::{Visible, select_rows, state_code};
use crate::platform::identity::{Caller, Principal};
use crate::stores::sqlite_file::SqliteFile;
use crate::stores::sqlite_writer::{GroupCommit, JobError};
use crate::stores::turn_writes::Pending;

/// One row a task: what `ListTasks`, a context's owners and a restart select on, in small
/// columns before the task's body (so a scan reads no body), the body last.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS a2a_tasks (
    id          TEXT    PRIMARY KEY,
    owner       TEXT    NOT NULL,
    updated_ms  INTEGER NOT NULL,
    revision    INTEGER NOT NULL DEFAULT 1,
    context     TEXT,
    state       INTEGER NOT NULL DEFAULT 0,
    status_us   INTEGER NOT NULL DEFAULT 0,
    principal   TEXT,
    running     INTEGER NOT NULL DEFAULT 0,
    body        TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS a2a_turns (
    id          TEXT    PRIMARY KEY,
    updated_ms  INTEGER NOT NULL,
    body        TEXT    NOT NULL
);
";

/// The indexes, made once the table has its columns: `ListTasks` by status time, and by
/// context; the tasks left running (a partial index: a task answered at once never enters it).
const INDEXES: &str = "
DROP INDEX IF EXISTS a2a_tasks_updated;
CREATE INDEX IF NOT EXISTS a2a_tasks_status ON a2a_tasks (status_us);
CREATE INDEX IF NOT EXISTS a2a_tasks_context ON a2a_tasks (context, status_us);
CREATE INDEX IF NOT EXISTS a2a_tasks_running ON a2a_tasks (running) WHERE running = 1;
";

/// A task as it stands, by id.
const LOAD: &str = "SELECT body, revision FROM a2a_tasks WHERE id = ?1";
/// A new task at revision `?5`, unless one with its id is there already.
const INSERT: &str = "INSERT INTO a2a_tasks \
                      (id, owner, updated_ms, body, revision, context, state, status_us, \
                       principal, running) \
                      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (id) DO NOTHING";
/// A task at revision `?6`, if it still stands at `?5`, the one the writer read.
const UPDATE_AT: &str = "UPDATE a2a_tasks SET owner = ?2, updated_ms = ?3, body = ?4, \
                         revision = ?6, context = ?7, state = ?8, status_us = ?9, \
                         principal = ?10, running = ?11 WHERE id = ?1 AND revision = ?5";
/// The tasks whose status changed last.
const RECENT: &str = "SELECT body, revision FROM a2a_tasks ORDER BY status_us DESC LIMIT ?1";
/// The tasks with a turn running (any replica name's: alone on its file, a replica answers
/// for every task in it).
const LEFT_RUNNING: &str = "SELECT body, revision FROM a2a_tasks WHERE running = 1";

/// A running turn's record, kept or replaced.
const KEEP_TURN: &str = "INSERT INTO a2a_turns (id, updated_ms, body) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (id) DO UPDATE SET updated_ms = ?2, body = ?3";
/// A turn's record, dropped when the turn ends.
const DROP_TURN: &str = "DELETE FROM a2a_turns WHERE id = ?1";
/// A turn's record.
const LOAD_TURN: &str = "SELECT body FROM a2a_turns WHERE id = ?1";

/// Writes between two retention sweeps.
const SWEEP_EVERY: u64 = 1_000;
/// The shortest time between two retention sweeps.
const SWEEP_PAUSE: Duration = Duration::from_secs(1);

/// Tasks in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteTasks {
    location: String,
    file: SqliteFile,
    writer: GroupCommit,
    /// Writes since the last retention sweep.
    writes: Arc<AtomicU64>,
    /// Rows in `a2a_tasks`, counted at open, then as they come and go.
    rows: Arc<AtomicU64>,
    /// Begins queued for later, by task, until the task's next write takes them.
    later: Arc<Mutex<HashMap<String, Arc<LaterBegin>>>>,
}

/// A begin queued for later ([`TaskBackend::begin_later`]), as its job and the task's next
/// write see it. Both run on the writer's thread, the begin's first (queued first).
#[derive(Debug)]
struct LaterBegin {
    /// The revision the task stood at before the begin.
    before: u64,
    /// The task's next write is queued: a begin job that has not run yet leaves the task to
    /// it (the write holds the begin).
    overtaken: AtomicBool,
    /// The begin's job wrote the task (and the next write expects the begin's revision).
    written: AtomicBool,
}

impl SqliteTasks {
    /// Opens (creating if needed) the file at `path` with tasks alone in it, and drops what
    /// the limits no longer allow.
    pub fn open(path: &str, ttl: Duration, max_tasks: usize) -> Result<Self, BackendError> {
        let file = SqliteFile::open(path).map_err(|e| BackendError::new(path, e))?;
        Self::on(&file, ttl, max_tasks)
    }

    /// The tasks in `file` (their tables made if absent), and drops what the limits no longer
    /// allow; from then on, after every [`SWEEP_EVERY`] writes, between two rounds.
    pub fn on(file: &SqliteFile, ttl: Duration, max_tasks: usize) -> Result<Self, BackendError> {
        let path = file.path();
        let fail =
            |source: Box<dyn std::error::Error + Send + Sync>| BackendError::new(path, source);
        let writer = file.writer().clone();
        let rows = writer
            .setup(|conn| -> rusqlite::Result<Arc<AtomicU64>> {
                conn.execute_batch(SCHEMA)?;
                if !has_column(conn, "status_us")? {
                    with_facts_in_columns(conn)?;
                }
                conn.execute_batch(INDEXES)?;
                let count: i64 =
                    conn.query_row("SELECT COUNT(*) FROM a2a_tasks", [], |row| row.get(0))?;
                let rows = Arc::new(AtomicU64::new(u64::try_from(count).unwrap_or(0)));
                sweep(conn, ttl, max_tasks, &rows)?;
                Ok(rows)
            })
            .map_err(|e| fail(e.into()))?;
        let written = Arc::new(AtomicU64::new(0));
        let (counted, sweep_rows) = (Arc::clone(&written), Arc::clone(&rows));
        let mut swept = Instant::now();
        writer.add_sweep(move |conn: &Connection| {
            if counted.load(Ordering::Relaxed) < SWEEP_EVERY || swept.elapsed() < SWEEP_PAUSE {
                return;
            }
            counted.store(0, Ordering::Relaxed);
            swept = Instant::now();
            if let Err(e) = sweep(conn, ttl, max_tasks, &sweep_rows) {
                tracing::error!(error = %e, "the task store cannot drop old tasks");
            }
        });
        Ok(Self {
            location: path.to_owned(),
            file: file.clone(),
            writer,
            writes: written,
            rows,
            later: Arc::default(),
        })
    }

    /// Runs `work` on the file's connection, in the writer's next transaction (the push
    /// records share it: one connection per file); answers once it is committed.
    pub(crate) async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, JobError> + Send + 'static,
    ) -> Result<T, BackendError> {
        self.writer
            .with(move |tx| work(tx))
            .await
            .map_err(|e| BackendError::new(self.location.clone(), e))
    }

    /// Runs `read` on the file as the commits so far left it (never through the writer: see
    /// [`SqliteFile::read`]).
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, JobError> + Send + 'static,
    ) -> Result<T, BackendError> {
        self.file
            .read(read)
            .await
            .map_err(|e| BackendError::new(self.location.clone(), e))
    }
}

/// Deletes the tasks whose status is older than `ttl`, and all but the `max_tasks` newest;
/// never one whose turn runs.
fn sweep(
    conn: &Connection,
    ttl: Duration,
    max_tasks: usize,
    rows: &AtomicU64,
) -> rusqlite::Result<()> {
    let oldest = now_ms()
        .saturating_mul(1000)
        .saturating_sub(i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX));
    let mut deleted = conn.execute(
        "DELETE FROM a2a_tasks WHERE status_us < ?1 AND running = 0",
        params![oldest],
    )?;
    let left = rows
        .load(Ordering::Relaxed)
        .saturating_sub(u64::try_from(deleted).unwrap_or(u64::MAX));
    let excess = left.saturating_sub(u64::try_from(max_tasks).unwrap_or(u64::MAX));
    if excess > 0 {
        deleted += conn.execute(
            "DELETE FROM a2a_tasks WHERE rowid IN \
             (SELECT rowid FROM a2a_tasks WHERE running = 0 ORDER BY status_us LIMIT ?1)",
            params![i64::try_from(excess).unwrap_or(i64::MAX)],
        )?;
    }
    if deleted > 0 {
        rows.fetch_sub(
            u64::try_from(deleted)
                .unwrap_or(0)
                .min(rows.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        conn.execute(
            "DELETE FROM a2a_turns WHERE id NOT IN (SELECT id FROM a2a_tasks)",
            [],
        )?;
    }
    Ok(())
}

/// Keeps `record` (`None`: drops it) as task `id`'s turn record.
fn keep_record(conn: &Connection, id: &str, record: Option<&str>) -> rusqlite::Result<()> {
    match record {
        Some(body) => conn
            .prepare_cached(KEEP_TURN)
            .and_then(|mut keep| keep.execute(params![id, now_ms(), body])),
        None => conn
            .prepare_cached(DROP_TURN)
            .and_then(|mut drop| drop.execute(params![id])),
    }
    .map(|_| ())
}

/// Whether the tasks' table has column `name` (a file an earlier version wrote may not).
fn has_column(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('a2a_tasks') WHERE name = ?1",
        params![name],
        |row| row.get::<_, i64>(0).map(|n| n > 0),
    )
}

/// Rebuilds the tasks' table an earlier version wrote (each task's facts only in its body,
/// the body before them, perhaps no revision) as [`SCHEMA`] has it, in one transaction: every
/// task kept at its revision, its facts read from its body.
fn with_facts_in_columns(conn: &Connection) -> rusqlite::Result<()> {
    let tx = conn.unchecked_transaction()?;
    let revision = if has_column(&tx, "revision")? {
        "revision"
    } else {
        "1"
    };
    tx.execute_batch(
        "DROP INDEX IF EXISTS a2a_tasks_updated;
         ALTER TABLE a2a_tasks RENAME TO a2a_tasks_before;",
    )?;
    tx.execute_batch(SCHEMA)?;
    let mut moved = 0_u64;
    {
        let mut read = tx.prepare(&format!(
            "SELECT id, owner, updated_ms, body, {revision} FROM a2a_tasks_before"
        ))?;
        let mut insert = tx.prepare(INSERT)?;
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let (id, owner, updated, body, revision): (String, String, i64, String, i64) = (
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            );
            let facts = decode(&body, revision)
                .map(|v| RowFacts::of(&v.stored))
                .unwrap_or_default();
            insert.execute(params![
                id,
                owner,
                updated,
                body,
                revision,
                facts.context,
                facts.state,
                facts.status_us,
                facts.principal,
                facts.running
            ])?;
            moved += 1;
        }
    }
    tx.execute_batch("DROP TABLE a2a_tasks_before")?;
    tx.commit()?;
    tracing::info!(
        tasks = moved,
        "the task store's table was rebuilt once with each task's facts in columns"
    );
    Ok(())
}

/// What a task's row says beside its body: what queries select on without reading it.
#[derive(Debug, Default, Clone, PartialEq)]
struct RowFacts {
    context: Option<String>,
    /// The state's place in [`TaskState::ALL`].
    state: i64,
    /// When its status last changed, in microseconds.
    status_us: i64,
    /// Its principal's key ([`crate::platform::identity::Principal::key`]).
    principal: Option<String>,
    running: bool,
}

impl RowFacts {
    fn of(stored: &StoredTask) -> Self {
        Self {
            context: stored.task.context_id.clone(),
            state: state_code(stored.task.status.state),
            // A status without a time (none this runtime writes) sorts by the write.
            status_us: match status_micros(&stored.task) {
                0 => stored.updated_ms.saturating_mul(1000),
                micros => micros,
            },
            principal: stored.principal.as_ref().map(Principal::key),
            running: stored.is_running(),
        }
    }
}

/// A task's row as a write makes it.
struct TaskRow {
    id: String,
    owner: String,
    updated: i64,
    body: String,
    facts: RowFacts,
}

impl TaskRow {
    fn of(stored: &StoredTask) -> Result<Self, serde_json::Error> {
        Ok(Self {
            id: stored.task.id.clone(),
            owner: stored.owner.clone(),
            updated: stored.updated_ms,
            body: serde_json::to_string(stored)?,
            facts: RowFacts::of(stored),
        })
    }
}

fn decode(body: &str, revision: i64) -> Result<Versioned, daedalus_contract::ReadError> {
    let stored = daedalus_contract::read::from_slice(body.as_bytes())?;
    Ok(Versioned {
        stored,
        revision: u64::try_from(revision).unwrap_or(0),
    })
}

/// The tasks `sql` selects (each row its body and revision), with `params`; a row that does
/// not read is logged and skipped.
fn tasks_of(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Versioned>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
    })?;
    let mut tasks = Vec::new();
    for row in rows {
        let (body, revision) = row?;
        match decode(&body, revision) {
            Ok(versioned) => tasks.push(versioned),
            Err(e) => tracing::warn!(error = %e, "a stored task is unreadable; skipped"),
        }
    }
    Ok(tasks)
}

/// What a compare-and-set write found.
enum Written {
    At(u64),
    Conflict,
    /// A begin queued for later, which the task's next write holds.
    LeftOut,
}

/// Writes `row` at `revision` if its task stands at `from` (`0`: a new task); answers
/// whether it did.
fn write_row(conn: &Connection, row: &TaskRow, from: u64, revision: u64) -> rusqlite::Result<bool> {
    let (from, revision) = (
        i64::try_from(from).unwrap_or(i64::MAX),
        i64::try_from(revision).unwrap_or(i64::MAX),
    );
    let facts = &row.facts;
    let changed = if from == 0 {
        conn.prepare_cached(INSERT).and_then(|mut insert| {
            insert.execute(params![
                row.id,
                row.owner,
                row.updated,
                row.body,
                revision,
                facts.context,
                facts.state,
                facts.status_us,
                facts.principal,
                facts.running
            ])
        })
    } else {
        conn.prepare_cached(UPDATE_AT).and_then(|mut update| {
            update.execute(params![
                row.id,
                row.owner,
                row.updated,
                row.body,
                from,
                revision,
                facts.context,
                facts.state,
                facts.status_us,
                facts.principal,
                facts.running
            ])
        })
    }?;
    Ok(changed == 1)
}

/// Drops `begin` from the begins waiting for later, if it is still the one there for `id`.
fn forget_later(
    waiting: &Mutex<HashMap<String, Arc<LaterBegin>>>,
    id: &str,
    begin: &Arc<LaterBegin>,
) {
    let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
    if waiting.get(id).is_some_and(|held| Arc::ptr_eq(held, begin)) {
        waiting.remove(id);
    }
}

impl SqliteTasks {
    /// The begin of task `id` queued for later, if one waits, told it is overtaken: the
    /// write about to be queued holds it, unless its job ran already.
    fn take_later(&self, id: &str) -> Option<Arc<LaterBegin>> {
        let begin = self
            .later
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)?;
        begin.overtaken.store(true, Ordering::Release);
        Some(begin)
    }
}

#[async_trait]
impl TaskBackend for SqliteTasks {
    async fn load(&self, task_id: &str) -> Result<Option<Versioned>, BackendError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            let row: Option<(String, i64)> = conn.prepare_cached(LOAD).and_then(|mut load| {
                load.query_row(params![id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })?;
            row.map(|(body, revision)| decode(&body, revision))
                .transpose()
                .map_err(Into::into)
        })
        .await
    }

    async fn write(&self, stored: &StoredTask, expected: u64) -> Result<u64, WriteError> {
        self.write_with_turn(stored, expected, TurnStep::Untouched)
            .await
    }

    /// The task and its turn's record in one job: the record changes only if the write lands.
    /// A begin of the task queued for later and left out is held by this write: it writes the
    /// task from the revision before that begin.
    async fn write_with_turn(
        &self,
        stored: &StoredTask,
        expected: u64,
        step: TurnStep<'_>,
    ) -> Result<u64, WriteError> {
        let row = TaskRow::of(stored).map_err(|e| BackendError::new(self.location.clone(), e))?;
        let id = row.id.clone();
        let record = match step {
            TurnStep::Untouched => None,
            TurnStep::Keep(record) => Some(Some(record.to_owned())),
            TurnStep::Drop => Some(None),
        };
        let later = self.take_later(&id);
        self.writes.fetch_add(1, Ordering::Relaxed);
        let rows = Arc::clone(&self.rows);
        let revision = expected + 1;
        let written = self
            .with(move |conn| {
                let from = match &later {
                    Some(begin) if !begin.written.load(Ordering::Acquire) => begin.before,
                    _ => expected,
                };
                if !write_row(conn, &row, from, revision)? {
                    return Ok(Written::Conflict);
                }
                if let Some(record) = record {
                    keep_record(conn, &id, record.as_deref())?;
                }
                if from == 0 {
                    // Counted once the job holds (a round that then fails to commit leaves
                    // the count one high until the next open: a sweep then keeps one less).
                    rows.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Written::At(revision))
            })
            .await?;
        match written {
            Written::At(revision) => Ok(revision),
            Written::Conflict | Written::LeftOut => Err(WriteError::Conflict),
        }
    }

    fn begin_later(
        &self,
        stored: &StoredTask,
        expected: u64,
        record: Option<&str>,
    ) -> Option<Pending<Result<BeganLater, WriteError>>> {
        // Written out only if the begin is written at all (its end may hold it).
        let stored = stored.clone();
        let id = stored.task.id.clone();
        let record = record.map(str::to_owned);
        let begin = Arc::new(LaterBegin {
            before: expected,
            overtaken: AtomicBool::new(false),
            written: AtomicBool::new(false),
        });
        self.later
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), Arc::clone(&begin));
        self.writes.fetch_add(1, Ordering::Relaxed);
        let (rows, waiting) = (Arc::clone(&self.rows), Arc::clone(&self.later));
        let revision = expected + 1;
        let later = self.writer.later(move |conn| {
            let left_out = begin.overtaken.load(Ordering::Acquire);
            // Nothing else of the task will look for this begin now (a write queued before
            // this job ran took it already).
            forget_later(&waiting, &id, &begin);
            if left_out {
                return Ok(Written::LeftOut);
            }
            if !write_row(conn, &TaskRow::of(&stored)?, expected, revision)? {
                return Ok(Written::Conflict);
            }
            if let Some(record) = &record {
                keep_record(conn, &id, Some(record))?;
            }
            begin.written.store(true, Ordering::Release);
            if expected == 0 {
                rows.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, JobError>(Written::At(revision))
        });
        let location = self.location.clone();
        Some(Box::pin(async move {
            match later.committed().await {
                Ok(Written::At(revision)) => Ok(BeganLater::Written(revision)),
                Ok(Written::LeftOut) => Ok(BeganLater::LeftOut),
                Ok(Written::Conflict) => Err(WriteError::Conflict),
                Err(e) => Err(WriteError::Unavailable(BackendError::new(location, e))),
            }
        }))
    }

    async fn left_running(&self, _replica: &str) -> Result<Option<Vec<Versioned>>, BackendError> {
        self.read(move |conn| Ok(Some(tasks_of(conn, LEFT_RUNNING, [])?)))
            .await
    }

    async fn select(&self, asked: &Asked) -> Result<Option<Selection>, BackendError> {
        let asked = asked.clone();
        self.read(move |conn| select_rows(conn, &asked).map(Some).map_err(Into::into))
            .await
    }

    async fn context_closed_to(
        &self,
        context_id: &str,
        caller: &Caller,
    ) -> Result<Option<bool>, BackendError> {
        let Some(visible) = Visible::to(caller) else {
            return Ok(Some(false));
        };
        let context = context_id.to_owned();
        self.read(move |conn| {
            let sql = format!(
                "SELECT EXISTS (SELECT 1 FROM a2a_tasks WHERE context = ?1 AND NOT ({}))",
                visible.clause(2)
            );
            let mut statement = conn.prepare_cached(&sql)?;
            let closed: bool =
                statement.query_row(params![context, visible.value], |row| row.get(0))?;
            Ok(Some(closed))
        })
        .await
    }

    async fn recent(&self, limit: usize) -> Result<Vec<Versioned>, BackendError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| Ok(tasks_of(conn, RECENT, params![limit])?))
            .await
    }

    async fn keep_turn(&self, task_id: &str, record: Option<&str>) -> Result<(), BackendError> {
        let id = task_id.to_owned();
        let record = record.map(str::to_owned);
        self.with(move |conn| keep_record(conn, &id, record.as_deref()).map_err(Into::into))
            .await
    }

    async fn turn(&self, task_id: &str) -> Result<Option<String>, BackendError> {
        let id = task_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(LOAD_TURN)
                .and_then(|mut load| load.query_row(params![id], |row| row.get(0)).optional())
                .map_err(Into::into)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Task, TaskState, TaskStatus};
    use rusqlite::StatementStatus;

    use super::*;

    /// A file that cannot be opened is an error that keeps what SQLite (or the file system)
    /// said as its source, not only as words.
    #[test]
    fn an_error_opening_the_file_keeps_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "not a directory").unwrap();
        let path = blocker.join("tasks.sqlite");
        let Err(error) = SqliteTasks::open(path.to_str().unwrap(), Duration::from_mins(1), 10)
        else {
            panic!("a path under a file does not open");
        };
        assert_eq!(error.location, path.to_str().unwrap());
        let source = std::error::Error::source(&error).expect("a source");
        let opening = source
            .downcast_ref::<crate::stores::sqlite_file::OpenError>()
            .expect("the file's opening failed");
        let underneath = std::error::Error::source(opening).expect("its source");
        assert!(
            underneath.downcast_ref::<std::io::Error>().is_some(),
            "the file system's error: {underneath:?}"
        );
    }

    fn stored(id: &str) -> StoredTask {
        let task = Task {
            id: id.into(),
            context_id: Some("c".into()),
            status: TaskStatus::new(TaskState::Working),
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        StoredTask::new(task, "replica-a", None)
    }

    /// The sweep keeps the `MAX_TASKS` newest and the rows' count with them, at open and
    /// between commits, deleting only what is past the limits, and never a running task.
    #[tokio::test]
    async fn a_sweep_keeps_the_newest_and_counts_what_it_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join("tasks.sqlite")
            .to_string_lossy()
            .into_owned();
        let tasks = SqliteTasks::open(&path, Duration::from_hours(1), 100).unwrap();
        // A turn that runs is never swept, however old its status.
        let mut running = stored("running");
        running.updated_ms = 1;
        tasks.write(&running, 0).await.unwrap();
        for i in 0..12 {
            let mut task = stored(&format!("t{i:02}"));
            task.task.status = TaskStatus::new(TaskState::Completed);
            task.updated_ms = 1_000_000_000_000_000 + i;
            tasks.write(&task, 0).await.unwrap();
        }
        assert_eq!(tasks.rows.load(Ordering::Relaxed), 13);
        let rows = Arc::clone(&tasks.rows);
        tasks
            .with(move |conn| sweep(conn, Duration::from_hours(1), 5, &rows).map_err(Into::into))
            .await
            .unwrap();
        assert_eq!(tasks.rows.load(Ordering::Relaxed), 5);
        let ids = |tasks: SqliteTasks| async move {
            let mut ids: Vec<String> = tasks
                .recent(100)
                .await
                .unwrap()
                .into_iter()
                .map(|v| v.stored.task.id)
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(
            ids(tasks.clone()).await,
            ["running", "t08", "t09", "t10", "t11"]
        );
        drop(tasks);
        let reopened = SqliteTasks::open(&path, Duration::from_hours(1), 3).unwrap();
        assert_eq!(reopened.rows.load(Ordering::Relaxed), 3);
        assert_eq!(ids(reopened).await, ["running", "t10", "t11"]);
    }

    /// Writes of one task queued behind a held writer commit together, and compare-and-set
    /// still holds among them: of two writes at one revision, one lands, the other conflicts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_sharing_a_commit_still_compare_and_set() {
        let tasks = SqliteTasks::open(":memory:", Duration::from_hours(1), 100).unwrap();
        assert_eq!(tasks.write(&stored("t"), 0).await.unwrap(), 1);
        let (release, held) = std::sync::mpsc::channel::<()>();
        let holder = tasks.clone();
        let holding = tokio::spawn(async move {
            holder
                .with(move |_| {
                    let _ = held.recv();
                    Ok(())
                })
                .await
        });
        while tasks.writer.rounds() == 1 || tasks.writer.queued() > 0 {
            tokio::task::yield_now().await;
        }
        let rounds_before = tasks.writer.rounds();
        let writes: Vec<_> = (0..2)
            .map(|_| {
                let tasks = tasks.clone();
                tokio::spawn(async move { tasks.write(&stored("t"), 1).await })
            })
            .collect();
        while tasks.writer.queued() < 2 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        holding.await.unwrap().unwrap();
        let mut landed = 0;
        for write in writes {
            match write.await.unwrap() {
                Ok(revision) => {
                    assert_eq!(revision, 2);
                    landed += 1;
                }
                Err(e) => assert!(matches!(e, WriteError::Conflict), "{e:?}"),
            }
        }
        assert_eq!(landed, 1, "one write at revision 1 lands");
        assert_eq!(tasks.writer.rounds() - rounds_before, 1, "in one commit");
        assert_eq!(tasks.load("t").await.unwrap().unwrap().revision, 2);
    }

    /// A turn's record is kept with the write that begins the turn and dropped with the one
    /// that ends it, in the same transaction: a write that conflicts changes no record.
    #[tokio::test]
    async fn a_turns_record_comes_and_goes_with_the_tasks_writes_that_land() {
        let tasks = SqliteTasks::open(":memory:", Duration::from_hours(1), 100).unwrap();
        let begun = tasks
            .write_with_turn(&stored("t"), 0, TurnStep::Keep("{\"step\":0}"))
            .await
            .unwrap();
        assert_eq!(
            tasks.turn("t").await.unwrap().as_deref(),
            Some("{\"step\":0}")
        );
        let stale = tasks
            .write_with_turn(&stored("t"), 0, TurnStep::Keep("{\"other\":1}"))
            .await;
        assert!(matches!(stale, Err(WriteError::Conflict)), "{stale:?}");
        assert_eq!(
            tasks.turn("t").await.unwrap().as_deref(),
            Some("{\"step\":0}"),
            "the write that lost kept no record"
        );
        assert!(matches!(
            tasks.write_with_turn(&stored("t"), 0, TurnStep::Drop).await,
            Err(WriteError::Conflict)
        ));
        assert!(tasks.turn("t").await.unwrap().is_some(), "nor dropped one");
        tasks
            .write_with_turn(&stored("t"), begun, TurnStep::Drop)
            .await
            .unwrap();
        assert_eq!(tasks.turn("t").await.unwrap(), None, "the end dropped it");
    }

    /// Counts, for each statement a task's life runs, how often its cached statement ran and
    /// was prepared again: each is prepared once and runs from the cache after.
    #[tokio::test]
    async fn a_tasks_statements_are_prepared_once() {
        // A file, so reads run on the readers' connection and writes on the writer's.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.sqlite");
        let tasks =
            SqliteTasks::open(path.to_str().unwrap(), Duration::from_hours(1), 100).unwrap();
        for i in 0..3 {
            let id = format!("t{i}");
            assert_eq!(tasks.write(&stored(&id), 0).await.unwrap(), 1);
            assert_eq!(tasks.write(&stored(&id), 1).await.unwrap(), 2);
            assert!(matches!(
                tasks.write(&stored(&id), 1).await,
                Err(WriteError::Conflict)
            ));
            assert_eq!(tasks.load(&id).await.unwrap().unwrap().revision, 2);
            assert_eq!(tasks.recent(10).await.unwrap().len(), i + 1);
            tasks.keep_turn(&id, Some("{\"step\":1}")).await.unwrap();
            tasks.keep_turn(&id, Some("{\"step\":2}")).await.unwrap();
            assert_eq!(
                tasks.turn(&id).await.unwrap().as_deref(),
                Some("{\"step\":2}")
            );
            tasks.keep_turn(&id, None).await.unwrap();
            assert_eq!(tasks.turn(&id).await.unwrap(), None);
        }
        let counted = |statements: &[(&'static str, i32)], conn: &Connection| {
            statements
                .iter()
                .map(|(sql, runs)| {
                    let statement = conn.prepare_cached(sql).unwrap();
                    (
                        *sql,
                        *runs,
                        statement.get_status(StatementStatus::Run),
                        statement.get_status(StatementStatus::RePrepare),
                    )
                })
                .collect::<Vec<_>>()
        };
        let writes = [(INSERT, 3), (UPDATE_AT, 6), (KEEP_TURN, 6), (DROP_TURN, 3)];
        let reads = [(LOAD, 3), (RECENT, 3), (LOAD_TURN, 6)];
        let mut counts = tasks
            .with(move |conn| Ok(counted(&writes, conn)))
            .await
            .unwrap();
        counts.extend(
            tasks
                .read(move |conn| Ok(counted(&reads, conn)))
                .await
                .unwrap(),
        );
        for (sql, runs, ran, reprepared) in counts {
            assert_eq!((ran, reprepared), (runs, 0), "{sql}");
        }
    }
}
