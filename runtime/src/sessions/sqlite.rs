//! The embedded session store: one SQLite file (or `:memory:`), WAL mode, one table of message
//! rows with a unique (context, turn). Calls run on the blocking pool.
//!
//! With a retention (`SESSION_TTL`), contexts whose newest row is older than it are deleted:
//! swept on the write path at most once per sweep interval, so no background task is needed.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{NewRow, Row, RowRole, RowStatus, SessionStore, StoreError};
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
CREATE INDEX IF NOT EXISTS messages_status ON messages (status);
CREATE INDEX IF NOT EXISTS messages_context_created ON messages (context, created_at);
";

/// The longest time between two retention sweeps.
const SWEEP_EVERY_AT_MOST: std::time::Duration = std::time::Duration::from_hours(1);

/// Sessions in SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    location: String,
    db: Arc<Mutex<Connection>>,
    /// Contexts idle for longer are deleted.
    ttl: Option<std::time::Duration>,
    /// When the last retention sweep ran.
    swept: Arc<Mutex<std::time::Instant>>,
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
    pub fn open_with_ttl(path: &str, ttl: Option<std::time::Duration>) -> Result<Self, StoreError> {
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
        let conn = Connection::open(path).map_err(fail)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(fail)?;
        conn.execute_batch(SCHEMA).map_err(fail)?;
        migrate(&conn).map_err(fail)?;
        let store = Self {
            location: path.to_owned(),
            db: Arc::new(Mutex::new(conn)),
            ttl: ttl.filter(|t| !t.is_zero()),
            swept: Arc::new(Mutex::new(std::time::Instant::now())),
        };
        if let Some(ttl) = store.ttl {
            let mut conn = store
                .db
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let removed = delete_idle(&mut conn, ttl).map_err(fail)?;
            if removed > 0 {
                tracing::info!(
                    rows = removed,
                    "deleted conversations idle for longer than SESSION_TTL"
                );
            }
        }
        Ok(store)
    }

    /// Deletes every context whose newest row is older than `idle`; returns how many rows went.
    pub async fn expire_idle(&self, idle: std::time::Duration) -> Result<u64, StoreError> {
        self.with(move |conn| delete_idle(conn, idle)).await
    }

    /// Whether a retention sweep is due now (and, if so, marks it done).
    fn sweep_due(&self) -> Option<std::time::Duration> {
        let ttl = self.ttl?;
        let interval = (ttl / 10).clamp(std::time::Duration::from_secs(1), SWEEP_EVERY_AT_MOST);
        let mut swept = self
            .swept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (swept.elapsed() >= interval).then(|| {
            *swept = std::time::Instant::now();
            ttl
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = Arc::clone(&self.db);
        let location = self.location.clone();
        let fail = move |message: String| StoreError::Backend {
            location: location.clone(),
            message,
        };
        let joined = tokio::task::spawn_blocking(move || {
            let mut conn = db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            work(&mut conn)
        })
        .await;
        match joined {
            Ok(result) => result.map_err(|e| fail(e.to_string())),
            Err(e) => Err(fail(format!("the store's worker stopped: {e}"))),
        }
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn append(&self, context: &str, rows: Vec<NewRow>) -> Result<Vec<i64>, StoreError> {
        let context = context.to_owned();
        let sweep = self.sweep_due();
        self.with(move |conn| {
            if let Some(ttl) = sweep {
                delete_idle(conn, ttl)?;
            }
            let tx = conn.transaction()?;
            let first: i64 = tx
                .query_row("SELECT MAX(turn) FROM messages WHERE context = ?1", params![context], |r| r.get::<_, Option<i64>>(0))
                .optional()?
                .flatten()
                .map_or(0, |t| t + 1);
            let mut ids = Vec::with_capacity(rows.len());
            for (turn, row) in (first..).zip(rows) {
                let calls = serde_json::to_string(&row.tool_calls).unwrap_or_else(|_| "[]".to_owned());
                tx.execute(
                    "INSERT INTO messages (context, turn, role, content, message_id, tool_calls, tool_call_id, is_error, status)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![context, turn, row.role.as_str(), row.content, row.message_id, calls, row.tool_call_id, row.is_error, status_str(row.status)],
                )?;
                ids.push(tx.last_insert_rowid());
            }
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    async fn set_status(
        &self,
        context: &str,
        ids: &[i64],
        status: RowStatus,
    ) -> Result<(), StoreError> {
        let (context, ids) = (context.to_owned(), ids.to_vec());
        self.with(move |conn| {
            let tx = conn.transaction()?;
            for id in ids {
                tx.execute(
                    "UPDATE messages SET status = ?1 WHERE id = ?2 AND context = ?3",
                    params![status_str(status), id, context],
                )?;
            }
            tx.commit()
        })
        .await
    }

    async fn rows(&self, context: &str, last: usize) -> Result<Vec<Row>, StoreError> {
        let context = context.to_owned();
        let last = i64::try_from(last).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT * FROM (
                    SELECT id, turn, role, content, tool_calls, tool_call_id, is_error, status, message_id
                    FROM messages WHERE context = ?1 ORDER BY turn DESC LIMIT ?2
                 ) ORDER BY turn",
            )?;
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
        })
        .await
    }

    async fn compact(
        &self,
        context: &str,
        through: i64,
        summary: Option<String>,
    ) -> Result<u64, StoreError> {
        let context = context.to_owned();
        self.with(move |conn| {
            let tx = conn.transaction()?;
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
            tx.commit()?;
            Ok(u64::try_from(removed).unwrap_or(u64::MAX))
        })
        .await
    }

    async fn recover(&self) -> Result<u64, StoreError> {
        self.with(|conn| {
            let changed = conn.execute(
                "UPDATE messages SET status = 'error' WHERE status = 'pending'",
                [],
            )?;
            Ok(u64::try_from(changed).unwrap_or(u64::MAX))
        })
        .await
    }
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
fn delete_idle(conn: &mut Connection, idle: std::time::Duration) -> rusqlite::Result<u64> {
    let cutoff = format!("-{:.3} seconds", idle.as_secs_f64());
    let removed = conn.execute(
        "DELETE FROM messages WHERE context IN (
            SELECT context FROM messages GROUP BY context
            HAVING MAX(created_at) < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)
         )",
        params![cutoff],
    )?;
    Ok(u64::try_from(removed).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let store =
            SqliteStore::open_with_ttl(":memory:", Some(std::time::Duration::from_hours(1)))
                .unwrap();
        for context in ["old", "new"] {
            store
                .append(
                    context,
                    vec![new_row(RowRole::User, "hi", RowStatus::Complete)],
                )
                .await
                .unwrap();
        }
        assert_eq!(
            store
                .expire_idle(std::time::Duration::from_hours(1))
                .await
                .unwrap(),
            0,
            "both are recent"
        );
        store
            .db
            .lock()
            .unwrap()
            .execute(
                "UPDATE messages SET created_at = '2000-01-01T00:00:00.000Z' WHERE context = 'old'",
                [],
            )
            .unwrap();
        assert_eq!(
            store
                .expire_idle(std::time::Duration::from_hours(1))
                .await
                .unwrap(),
            1
        );
        assert!(store.rows("old", usize::MAX).await.unwrap().is_empty());
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
    }
}
