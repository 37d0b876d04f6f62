//! Push records in SQLite (`TASKS_DB=<file>`): a table beside the tasks' in the same file,
//! one row per task with webhooks, compare-and-set on its revision.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::record::{PushBackend, PushRecord};
use crate::stores::sqlite_writer::JobError;
use crate::stores::tasks::{BackendError, SqliteTasks, WriteError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS a2a_push (
    task_id   TEXT    PRIMARY KEY,
    revision  INTEGER NOT NULL,
    body      TEXT    NOT NULL
);
";

/// A task's record, by task id.
const LOAD: &str = "SELECT body, revision FROM a2a_push WHERE task_id = ?1";
/// A record without webhooks is removed, if still at the revision its writer read.
const DELETE_AT: &str = "DELETE FROM a2a_push WHERE task_id = ?1 AND revision = ?2";
/// A task's first record, unless it has one already.
const INSERT: &str = "INSERT OR IGNORE INTO a2a_push (task_id, revision, body) VALUES (?1, 1, ?2)";
/// A record's next revision, if it is still at the one its writer read.
const UPDATE_AT: &str = "UPDATE a2a_push SET body = ?2, revision = revision + 1 \
                         WHERE task_id = ?1 AND revision = ?3";

/// Push records in the tasks' SQLite file, on its connection.
#[derive(Debug, Clone)]
pub struct SqlitePush {
    tasks: SqliteTasks,
}

impl SqlitePush {
    /// Push records beside `tasks` (the table made if absent).
    pub async fn beside(tasks: &SqliteTasks) -> Result<Self, BackendError> {
        tasks
            .with(|db| db.execute_batch(SCHEMA).map_err(Into::into))
            .await?;
        Ok(Self {
            tasks: tasks.clone(),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, JobError> + Send + 'static,
    ) -> Result<T, BackendError> {
        self.tasks.with(work).await
    }
}

fn parse(body: &str) -> serde_json::Result<PushRecord> {
    serde_json::from_str(body)
}

#[async_trait]
impl PushBackend for SqlitePush {
    async fn load(&self, task_id: &str) -> Result<Option<(PushRecord, u64)>, BackendError> {
        let task_id = task_id.to_owned();
        self.tasks
            .read(move |db| {
                let row = db.prepare_cached(LOAD).and_then(|mut load| {
                    load.query_row(params![task_id], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                    })
                    .optional()
                })?;
                row.map(|(body, revision)| {
                    Ok((parse(&body)?, u64::try_from(revision).unwrap_or_default()))
                })
                .transpose()
            })
            .await
    }

    async fn write(&self, record: &PushRecord, expected: u64) -> Result<u64, WriteError> {
        let body =
            serde_json::to_string(record).map_err(|e| BackendError::new("push records", e))?;
        let task_id = record.task_id.clone();
        let remove = record.webhooks.is_empty();
        let expected = i64::try_from(expected).unwrap_or(i64::MAX);
        let outcome = self
            .with(move |db| {
                let changed = match (remove, expected) {
                    (true, _) => db
                        .prepare_cached(DELETE_AT)
                        .and_then(|mut delete| delete.execute(params![task_id, expected])),
                    (false, 0) => db
                        .prepare_cached(INSERT)
                        .and_then(|mut insert| insert.execute(params![task_id, body])),
                    (false, _) => db
                        .prepare_cached(UPDATE_AT)
                        .and_then(|mut update| update.execute(params![task_id, body, expected])),
                }?;
                Ok(changed)
            })
            .await?;
        match (outcome, remove) {
            // Removing what is not there (any more) is done.
            (0, true) if expected == 0 => Ok(0),
            (0, _) => Err(WriteError::Conflict),
            (_, true) => Ok(0),
            (_, false) => Ok(u64::try_from(expected).unwrap_or_default() + 1),
        }
    }

    async fn all(&self) -> Result<Vec<(PushRecord, u64)>, BackendError> {
        self.tasks
            .read(|db| {
                let mut rows = db.prepare("SELECT body, revision FROM a2a_push")?;
                let read =
                    rows.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
                let mut out = Vec::new();
                for row in read {
                    let (body, revision) = row?;
                    match parse(&body) {
                        Ok(record) => {
                            out.push((record, u64::try_from(revision).unwrap_or_default()));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "an unreadable push record was skipped");
                        }
                    }
                }
                Ok(out)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::TaskPushNotificationConfig;

    use rusqlite::StatementStatus;

    use super::*;
    use crate::stores::push::record::Webhook;

    fn record(task: &str, urls: &[&str]) -> PushRecord {
        let mut r = PushRecord::new(task, None);
        for (i, url) in urls.iter().enumerate() {
            r.webhooks.push(Webhook {
                config: TaskPushNotificationConfig {
                    tenant: None,
                    id: format!("c{i}"),
                    task_id: task.to_owned(),
                    url: (*url).to_owned(),
                    token: None,
                    authentication: None,
                },
                delivered: 0,
            });
        }
        r
    }

    #[tokio::test]
    async fn writes_are_compare_and_set_and_outlive_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.sqlite");
        let path = path.to_str().unwrap();
        let tasks = SqliteTasks::open(path, std::time::Duration::from_mins(1), 100).unwrap();
        let db = SqlitePush::beside(&tasks).await.unwrap();
        let first = db.write(&record("t", &["https://a/"]), 0).await.unwrap();
        assert_eq!(first, 1);
        assert!(matches!(
            db.write(&record("t", &["https://b/"]), 0).await,
            Err(WriteError::Conflict)
        ));
        let second = db
            .write(&record("t", &["https://a/", "https://b/"]), first)
            .await
            .unwrap();
        assert!(matches!(
            db.write(&record("t", &["https://c/"]), first).await,
            Err(WriteError::Conflict)
        ));
        assert_eq!(runs_of(&db, [INSERT, UPDATE_AT]).await, [2, 2]);
        drop((db, tasks));
        let tasks = SqliteTasks::open(path, std::time::Duration::from_mins(1), 100).unwrap();
        let again = SqlitePush::beside(&tasks).await.unwrap();
        let (kept, revision) = again.load("t").await.unwrap().unwrap();
        assert_eq!((kept.webhooks.len(), revision), (2, second));
        assert_eq!(again.all().await.unwrap().len(), 1);
        assert_eq!(again.write(&record("t", &[]), second).await.unwrap(), 0);
        assert!(again.load("t").await.unwrap().is_none());
        assert_eq!(runs_of(&again, [DELETE_AT]).await, [1]);
        assert_eq!(
            reads_of(&again, [LOAD]).await,
            [2],
            "loads run on the readers' connection"
        );
    }

    /// How often each cached statement ran: every run of a write or a load counts only if
    /// the statement is prepared once and kept.
    async fn runs_of<const N: usize>(db: &SqlitePush, statements: [&'static str; N]) -> [i32; N] {
        db.with(move |conn| {
            Ok(statements.map(|sql| {
                conn.prepare_cached(sql)
                    .unwrap()
                    .get_status(StatementStatus::Run)
            }))
        })
        .await
        .unwrap()
    }

    /// [`runs_of`], of the statements reads run (on the readers' connection).
    async fn reads_of<const N: usize>(db: &SqlitePush, statements: [&'static str; N]) -> [i32; N] {
        db.tasks
            .read(move |conn| {
                Ok(statements.map(|sql| {
                    conn.prepare_cached(sql)
                        .unwrap()
                        .get_status(StatementStatus::Run)
                }))
            })
            .await
            .unwrap()
    }
}
