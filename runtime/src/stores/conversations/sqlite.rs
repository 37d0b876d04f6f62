//! The embedded conversation store: one SQLite file (or `:memory:`), WAL mode, one table of message
//! rows with a unique (context, turn).
//!
//! One writer thread owns the connection ([`GroupCommit`]): a turn's few writes share a
//! commit, and no call blocks a worker of the async runtime.
//!
//! With a retention (`SESSION_TTL`), contexts whose newest row is older than it are deleted:
//! swept by the writer at most once per sweep interval, so no other background task is needed.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::message::ToolCall;
use super::{ConversationStore, NewRow, Row, RowRole, RowStatus, StoreError};
use crate::stores::sqlite_file::SqliteFile;
use crate::stores::sqlite_writer::GroupCommit;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    id           INTEGER PRIMARY KEY,
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

/// A row, its id handed out by the store ([`SqliteStore::ids`]).
const INSERT_ROW: &str = "INSERT INTO messages
    (id, context, turn, role, content, message_id, tool_calls, tool_call_id, is_error, status)
    VALUES (?10, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const UPDATE_STATUS: &str = "UPDATE messages SET status = ?1 WHERE id = ?2 AND context = ?3";

/// A context's last `?2` rows, oldest first.
const RECENT_ROWS: &str = "SELECT * FROM (
    SELECT id, turn, role, content, tool_calls, tool_call_id, is_error, status, message_id
    FROM messages WHERE context = ?1 ORDER BY turn DESC LIMIT ?2
) ORDER BY turn";

/// The longest time between two retention sweeps.
const SWEEP_EVERY_AT_MOST: Duration = Duration::from_hours(1);

/// Sessions in SQLite. Cheap to clone: clones share the writer thread, which ends when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    location: String,
    file: SqliteFile,
    pub(super) writer: GroupCommit,
    /// The next row id to hand out, on a file only this process writes (the task store's,
    /// [`SqliteStore::beside_tasks`]): every row this store writes takes its id here when its
    /// write is queued, so a write queued for later answers its ids at once. On a file other
    /// processes may write too (a conversation file of its own, which replicas can share),
    /// SQLite picks each id when the row is written, and nothing is queued for later.
    ids: Option<Arc<AtomicI64>>,
}

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
        let file = SqliteFile::open(path).map_err(|e| StoreError::Backend {
            location: path.to_owned(),
            source: e.into(),
        })?;
        Self::on(&file, ttl)
    }

    /// [`SqliteStore::on`] the task store's file, which no other process writes: the store
    /// hands out its rows' ids itself, so a turn's rows can wait for its next awaited write
    /// ([`ConversationStore::append_later`]).
    pub fn beside_tasks(file: &SqliteFile, ttl: Option<Duration>) -> Result<Self, StoreError> {
        let mut store = Self::on(file, ttl)?;
        let next = store
            .writer
            .setup(next_id)
            .map_err(|e| StoreError::Backend {
                location: store.location.clone(),
                source: e.into(),
            })?;
        store.ids = Some(Arc::new(AtomicI64::new(next)));
        Ok(store)
    }

    /// The conversations in `file` (their table made, or migrated, if needed), deleting
    /// contexts idle for longer than `ttl`: at once, then swept between two rounds. Other
    /// processes may write the file too.
    pub fn on(file: &SqliteFile, ttl: Option<Duration>) -> Result<Self, StoreError> {
        let path = file.path();
        let fail = |e: rusqlite::Error| StoreError::Backend {
            location: path.to_owned(),
            source: e.into(),
        };
        let writer = file.writer().clone();
        let ttl = ttl.filter(|t| !t.is_zero());
        let removed = writer
            .setup(|conn| -> rusqlite::Result<u64> {
                conn.execute_batch(SCHEMA)?;
                migrate(conn)?;
                ttl.map_or(Ok(0), |ttl| delete_idle(conn, ttl))
            })
            .map_err(fail)?;
        if removed > 0 {
            tracing::info!(
                rows = removed,
                "deleted conversations idle for longer than SESSION_TTL"
            );
        }
        if let Some(ttl) = ttl {
            let mut swept = Instant::now();
            writer.add_sweep(move |conn: &Connection| {
                let interval = (ttl / 10).clamp(Duration::from_secs(1), SWEEP_EVERY_AT_MOST);
                if swept.elapsed() < interval {
                    return;
                }
                swept = Instant::now();
                if let Err(e) = delete_idle(conn, ttl) {
                    tracing::error!(error = %e, "the session store cannot delete idle conversations");
                }
            });
        }
        Ok(Self {
            location: path.to_owned(),
            file: file.clone(),
            writer,
            ids: None,
        })
    }

    /// `n` row ids, the first of them answered, when this store hands them out.
    fn take_ids(&self, n: usize) -> Option<i64> {
        let ids = self.ids.as_ref()?;
        Some(ids.fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed))
    }

    /// Reads every row of the conversation file at `legacy` (one an earlier version kept apart
    /// from the tasks) into this store, ids and all, when this store holds no row yet; answers
    /// how many rows came (`0`: this store had rows of its own, and nothing was read).
    pub fn import(&self, legacy: &std::path::Path) -> Result<u64, StoreError> {
        let fail = |e: rusqlite::Error| StoreError::Backend {
            location: legacy.display().to_string(),
            source: e.into(),
        };
        // The old file's schema brought up to this version's first, by a connection of its own.
        let old = Connection::open(legacy).map_err(fail)?;
        old.execute_batch(SCHEMA).map_err(fail)?;
        migrate(&old).map_err(fail)?;
        drop(old);
        let path = legacy.to_string_lossy().into_owned();
        self.writer
            .setup(|conn| -> rusqlite::Result<u64> {
                let empty: bool =
                    conn.query_row("SELECT NOT EXISTS (SELECT 1 FROM messages)", [], |r| {
                        r.get(0)
                    })?;
                if !empty {
                    return Ok(0);
                }
                conn.execute("ATTACH DATABASE ?1 AS legacy", params![path])?;
                let copied = conn.execute_batch("BEGIN").and_then(|()| {
                    let copied = conn.execute(
                        "INSERT INTO messages (id, context, turn, role, content, message_id,
                             tool_calls, tool_call_id, is_error, status, created_at)
                         SELECT id, context, turn, role, content, message_id,
                             tool_calls, tool_call_id, is_error, status, created_at
                         FROM legacy.messages",
                        [],
                    )?;
                    conn.execute_batch("COMMIT")?;
                    Ok(copied)
                });
                if copied.is_err() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                let detached = conn.execute_batch("DETACH DATABASE legacy");
                let copied = copied?;
                detached?;
                if let Some(ids) = &self.ids {
                    ids.store(next_id(conn)?, Ordering::Relaxed);
                }
                Ok(u64::try_from(copied).unwrap_or(0))
            })
            .map_err(fail)
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
        self.writer
            .with(work)
            .await
            .map_err(|e| StoreError::Backend {
                location: self.location.clone(),
                source: e.into(),
            })
    }
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn append(&self, context: &str, rows: Vec<NewRow>) -> Result<Vec<i64>, StoreError> {
        let context = context.to_owned();
        let first = self.take_ids(rows.len());
        self.with(move |tx| insert_rows(tx, &context, rows, first))
            .await
    }

    async fn append_later(
        &self,
        context: &str,
        rows: Vec<NewRow>,
    ) -> (
        Vec<i64>,
        crate::stores::turn_writes::Pending<Result<(), StoreError>>,
    ) {
        let Some(first) = self.take_ids(rows.len()) else {
            return super::appended_now(self.append(context, rows).await);
        };
        let context = context.to_owned();
        let ids = (first..).take(rows.len()).collect();
        let later = self
            .writer
            .later(move |tx| insert_rows(tx, &context, rows, Some(first)).map(drop));
        let location = self.location.clone();
        let committed = Box::pin(async move {
            later.committed().await.map_err(|e| StoreError::Backend {
                location,
                source: e.into(),
            })
        });
        (ids, committed)
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
        let first = self.take_ids(rows.len());
        self.with(move |tx| {
            let appended = insert_rows(tx, &context, rows, first)?;
            update_status(tx, &context, &ids, status)?;
            Ok(appended)
        })
        .await
    }

    async fn finish_later(
        &self,
        context: &str,
        ids: &[i64],
        rows: Vec<NewRow>,
        status: RowStatus,
    ) -> crate::stores::turn_writes::Pending<Result<Vec<i64>, StoreError>> {
        let (context, ids) = (context.to_owned(), ids.to_vec());
        let first = self.take_ids(rows.len());
        let later = self.writer.later(move |tx| {
            let appended = insert_rows(tx, &context, rows, first)?;
            update_status(tx, &context, &ids, status)?;
            Ok::<_, rusqlite::Error>(appended)
        });
        let location = self.location.clone();
        Box::pin(async move {
            later.committed().await.map_err(|e| StoreError::Backend {
                location,
                source: e.into(),
            })
        })
    }

    async fn rows(&self, context: &str, last: usize) -> Result<Vec<Row>, StoreError> {
        let context = context.to_owned();
        let last = i64::try_from(last).unwrap_or(i64::MAX);
        self.file
            .read(move |conn| recent_rows(conn, &context, last).map_err(Into::into))
            .await
            .map_err(|e| StoreError::Backend {
                location: self.location.clone(),
                source: e.into(),
            })
    }

    async fn compact(
        &self,
        context: &str,
        through: i64,
        summary: Option<String>,
    ) -> Result<u64, StoreError> {
        let context = context.to_owned();
        let id = self.take_ids(1);
        self.with(move |tx| {
            let removed = tx.execute(
                "DELETE FROM messages WHERE context = ?1 AND turn <= ?2",
                params![context, through],
            )?;
            if let Some(summary) = summary {
                tx.execute(
                    "INSERT INTO messages (id, context, turn, role, content, status)
                     VALUES (?4, ?1, ?2, 'summary', ?3, 'complete')",
                    params![context, through, summary, id],
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

/// The next row id of the file's conversations: past every row, and past every id an
/// `AUTOINCREMENT` table handed out before (rows deleted since included).
fn next_id(conn: &Connection) -> rusqlite::Result<i64> {
    let newest: i64 = conn.query_row("SELECT COALESCE(MAX(id), 0) FROM messages", [], |r| {
        r.get(0)
    })?;
    let handed: i64 = conn
        .query_row(
            "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0)",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    Ok(newest.max(handed) + 1)
}

/// Appends `rows` to `context`, each with the next turn index, with the ids from `first` on
/// (handed out by the store), or (`None`) those SQLite picks; answers their ids.
fn insert_rows(
    tx: &Transaction<'_>,
    context: &str,
    rows: Vec<NewRow>,
    first: Option<i64>,
) -> rusqlite::Result<Vec<i64>> {
    let next_turn: i64 = tx
        .prepare_cached(TURN_LOOKUP)?
        .query_row(params![context], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten()
        .map_or(0, |t| t + 1);
    let mut insert = tx.prepare_cached(INSERT_ROW)?;
    let mut ids = Vec::with_capacity(rows.len());
    for (n, (turn, row)) in (0..).zip((next_turn..).zip(rows)) {
        let id = first.map(|first| first + n);
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
            status_str(row.status),
            id
        ])?;
        ids.push(id.unwrap_or_else(|| tx.last_insert_rowid()));
    }
    Ok(ids)
}

/// The last `last` rows of `context`, oldest first.
fn recent_rows(tx: &Connection, context: &str, last: i64) -> rusqlite::Result<Vec<Row>> {
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

/// Brings a file written by an earlier version up to [`SCHEMA`]: the `message_id` column, and
/// no `AUTOINCREMENT`.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_message_id: bool = conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('messages') WHERE name = 'message_id'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has_message_id {
        conn.execute_batch("ALTER TABLE messages ADD COLUMN message_id TEXT")?;
    }
    let autoincrement: bool = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'messages' AND sql LIKE '%AUTOINCREMENT%'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if autoincrement {
        without_autoincrement(conn)?;
    }
    Ok(())
}

/// Rebuilds the table an earlier version made with `AUTOINCREMENT`, which wrote
/// `sqlite_sequence`'s page in every commit that added a row (ids are the store's own now,
/// [`SqliteStore::ids`]): rows, ids and indexes kept, in one transaction.
fn without_autoincrement(conn: &Connection) -> rusqlite::Result<()> {
    let next = next_id(conn)?;
    let rebuilt = SCHEMA.replace(
        "CREATE TABLE IF NOT EXISTS messages (",
        "CREATE TABLE messages_rebuilt (",
    );
    let rebuilt = rebuilt
        .split_once("DROP INDEX")
        .map_or(rebuilt.as_str(), |(table, _)| table);
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(&format!(
        "{rebuilt}
         INSERT INTO messages_rebuilt
            (id, context, turn, role, content, message_id, tool_calls, tool_call_id, is_error,
             status, created_at)
            SELECT id, context, turn, role, content, message_id, tool_calls, tool_call_id,
                   is_error, status, created_at FROM messages;
         DROP TABLE messages;
         ALTER TABLE messages_rebuilt RENAME TO messages;
         CREATE INDEX IF NOT EXISTS messages_pending ON messages (status) WHERE status = 'pending';"
    ))?;
    tx.commit()?;
    tracing::info!(
        next_id = next,
        "the conversations' table no longer uses AUTOINCREMENT (rebuilt once)"
    );
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
    // Only contexts with a row before the first kept one are candidates: the sweep reads the
    // old rows, not the whole table (it runs between two commits).
    let removed = conn.execute(
        "DELETE FROM messages WHERE context IN (
            SELECT old.context FROM (SELECT DISTINCT context FROM messages WHERE id < ?1) AS old
            WHERE NOT EXISTS (
                SELECT 1 FROM messages AS m WHERE m.context = old.context AND m.id >= ?1
            )
         )",
        params![first_kept.unwrap_or(i64::MAX)],
    )?;
    Ok(u64::try_from(removed).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;
