//! Budget usage kept in the default store's SQLite file (`TASKS_DB`, one replica), through its
//! one writer, so a restart does
//! not hand every scope a fresh day: the book's windows that are still on are read back at
//! startup, and the windows that changed are written every [`SAVE_EVERY`] (and at shutdown),
//! off the turns' path. A crash of the process loses at most the last [`SAVE_EVERY`] of
//! spending. One row per scope and limit (`budget_usage`); rows of windows two days over go.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::params;

use super::shared::UsageError;
use super::usage::{SavedWindow, Window};
use super::{DAY_MS, LimitKind, ScopeKind, window_start};
use crate::stores::sqlite_file::SqliteFile;
use crate::stores::sqlite_writer::GroupCommit;

/// How often the windows that changed are written.
pub const SAVE_EVERY: Duration = Duration::from_secs(1);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS budget_usage (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    lim TEXT NOT NULL,
    start INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (scope, name, lim)
) WITHOUT ROWID;
";

/// The `budget_usage` table of one SQLite file, written through its writer.
#[derive(Debug)]
pub struct SavedUsage {
    location: String,
    writer: GroupCommit,
}

impl SavedUsage {
    /// The table in `file` (created if absent).
    pub fn on(file: &SqliteFile) -> Result<Self, UsageError> {
        let location = format!("sqlite file {}", file.path());
        let writer = file.writer().clone();
        writer
            .setup(|conn| conn.execute_batch(SCHEMA))
            .map_err(|e| UsageError::new(&location, e))?;
        Ok(Self { location, writer })
    }

    fn fail(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> UsageError {
        UsageError::new(&self.location, e)
    }

    /// The windows still on at `now`.
    pub(super) fn load(&self, now: u64) -> Result<Vec<SavedWindow>, UsageError> {
        self.writer.setup(|conn| self.read(conn, now))
    }

    fn read(&self, conn: &rusqlite::Connection, now: u64) -> Result<Vec<SavedWindow>, UsageError> {
        let mut select = conn
            .prepare("SELECT scope, name, lim, start, used FROM budget_usage")
            .map_err(|e| self.fail(e))?;
        let rows = select
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })
            .map_err(|e| self.fail(e))?;
        let mut windows = Vec::new();
        for row in rows {
            let (scope, name, limit, start, used) = row.map_err(|e| self.fail(e))?;
            let (Some(scope), Some(limit)) =
                (ScopeKind::named(&scope), LimitKind::from_key(&limit))
            else {
                continue;
            };
            let (Ok(start), Ok(used)) = (u64::try_from(start), u64::try_from(used)) else {
                continue;
            };
            if limit.window_ms().is_some() && start == window_start(limit, now) {
                windows.push((scope, Arc::from(name), limit, Window { start, used }));
            }
        }
        Ok(windows)
    }

    /// Writes `windows` in one of the writer's rounds, and drops the rows of windows two days
    /// over.
    pub(super) async fn save(&self, windows: Vec<SavedWindow>, now: u64) -> Result<(), UsageError> {
        self.writer
            .with(move |tx| -> rusqlite::Result<()> {
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO budget_usage (scope, name, lim, start, used) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (scope, name, lim) DO UPDATE SET start = excluded.start, used = excluded.used",
                )?;
                for (scope, name, limit, window) in &windows {
                    let start = i64::try_from(window.start).unwrap_or(i64::MAX);
                    let used = i64::try_from(window.used).unwrap_or(i64::MAX);
                    upsert.execute(params![scope.as_str(), &**name, limit.key(), start, used])?;
                }
                let over = i64::try_from(now.saturating_sub(2 * DAY_MS)).unwrap_or(0);
                tx.prepare_cached("DELETE FROM budget_usage WHERE start < ?1")?
                    .execute(params![over])?;
                Ok(())
            })
            .await
            .map_err(|e| self.fail(e))
    }
}
