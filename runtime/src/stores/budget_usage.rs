//! Budget usage kept in the default store's SQLite file (`TASKS_DB`, one replica), through its
//! one writer: one row per scope and limit (`budget_usage`), the window it counts (its start)
//! and what was used in it. The budgets ([`crate::agents::budgets`]) decide what the rows
//! mean: which windows are still on, how often they are written (off the turns' path).

use rusqlite::params;

use crate::stores::sqlite_file::SqliteFile;
use crate::stores::sqlite_writer::GroupCommit;
use crate::stores::versioned::BackendError;

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

/// One row: a scope's kind and name, a limit's key, the start of the window it counts (Unix
/// milliseconds) and what was used in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub scope: String,
    pub name: String,
    pub limit: String,
    pub start: u64,
    pub used: u64,
}

/// The `budget_usage` table of one SQLite file, written through its writer.
#[derive(Debug)]
pub struct SavedUsage {
    location: String,
    writer: GroupCommit,
}

impl SavedUsage {
    /// The table in `file` (created if absent).
    pub fn on(file: &SqliteFile) -> Result<Self, BackendError> {
        let location = format!("budget usage in sqlite file {}", file.path());
        let writer = file.writer().clone();
        writer
            .setup(|conn| conn.execute_batch(SCHEMA))
            .map_err(|e| BackendError::new(location.clone(), e))?;
        Ok(Self { location, writer })
    }

    fn fail(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> BackendError {
        BackendError::new(self.location.clone(), e)
    }

    /// Every row (read at startup, before any round).
    pub fn load(&self) -> Result<Vec<UsageRow>, BackendError> {
        self.writer.setup(|conn| {
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
            let mut read = Vec::new();
            for row in rows {
                let (scope, name, limit, start, used) = row.map_err(|e| self.fail(e))?;
                let (Ok(start), Ok(used)) = (u64::try_from(start), u64::try_from(used)) else {
                    continue;
                };
                read.push(UsageRow {
                    scope,
                    name,
                    limit,
                    start,
                    used,
                });
            }
            Ok(read)
        })
    }

    /// Writes `rows` (each replacing its scope's and limit's) in one of the writer's rounds,
    /// and drops the rows of windows that started before `drop_before`.
    pub async fn save(&self, rows: Vec<UsageRow>, drop_before: u64) -> Result<(), BackendError> {
        self.writer
            .with(move |tx| -> rusqlite::Result<()> {
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO budget_usage (scope, name, lim, start, used) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (scope, name, lim) DO UPDATE SET start = excluded.start, used = excluded.used",
                )?;
                for row in &rows {
                    let start = i64::try_from(row.start).unwrap_or(i64::MAX);
                    let used = i64::try_from(row.used).unwrap_or(i64::MAX);
                    upsert.execute(params![row.scope, row.name, row.limit, start, used])?;
                }
                let over = i64::try_from(drop_before).unwrap_or(i64::MAX);
                tx.prepare_cached("DELETE FROM budget_usage WHERE start < ?1")?
                    .execute(params![over])?;
                Ok(())
            })
            .await
            .map_err(|e| self.fail(e))
    }
}
