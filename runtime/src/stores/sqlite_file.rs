//! The default store: one SQLite file and its one writer ([`GroupCommit`]), shared by every
//! store kept in it — the tasks with their turns' records and push records, the conversations,
//! the budgets' usage — so what one turn writes shares its commits. A file is opened once
//! ([`SqliteFile::open`]) and handed to each store that lives in it.
//!
//! Reads do not go through the writer: they run at once on a connection of their own
//! ([`SqliteFile::read`]), which sees every commit made (WAL: a reader never waits for the
//! writer), so a read costs no round and no commit.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::sqlite_writer::{GroupCommit, JobError, WriterError, WriterStats, connect};

/// Why a SQLite file could not be opened, with what SQLite or the file system said.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the SQLite file {path}")]
pub struct OpenError {
    pub path: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// An open SQLite file (or `:memory:`) and its writer. Cheap to clone: clones share the
/// writer, whose thread ends when the last clone (and every store on it) is dropped.
#[derive(Debug, Clone)]
pub struct SqliteFile {
    path: String,
    writer: GroupCommit,
    /// The readers' connection (none for `:memory:`, whose one database is the writer's).
    reader: Option<Arc<Mutex<Connection>>>,
}

impl SqliteFile {
    /// Opens (creating it and its folder if needed) the file at `path`, `:memory:` for a
    /// private one, and starts its writer.
    pub fn open(path: &str) -> Result<Self, OpenError> {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| OpenError {
            path: path.to_owned(),
            source,
        };
        if path != ":memory:"
            && let Some(dir) = Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.into()))?;
        }
        let conn = connect(path).map_err(|e| fail(e.into()))?;
        let name = if path == ":memory:" {
            "sqlite-memory"
        } else {
            "sqlite-store"
        };
        let writer = GroupCommit::start(name, conn).map_err(|e| fail(e.into()))?;
        let reader = if path == ":memory:" {
            None
        } else {
            let reader = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .and_then(|reader| {
                reader.busy_timeout(std::time::Duration::from_secs(5))?;
                // Plans fixed when prepared, as the writer's (see `connect`).
                reader.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
                reader.set_prepared_statement_cache_capacity(32);
                Ok(reader)
            })
            .map_err(|e| fail(e.into()))?;
            Some(Arc::new(Mutex::new(reader)))
        };
        Ok(Self {
            path: path.to_owned(),
            writer,
            reader,
        })
    }

    /// Runs `read` on the file as every commit so far left it: at once on the readers'
    /// connection (a point read costs microseconds, no round of the writer), or in the
    /// writer's next round for `:memory:`.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, JobError> + Send + 'static,
    ) -> Result<T, WriterError> {
        match &self.reader {
            Some(reader) => {
                let reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
                read(&reader).map_err(WriterError::Job)
            }
            None => self.writer.with(move |tx| read(tx)).await,
        }
    }

    /// Where it is (`:memory:` for a private one).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its writer, which every store in it commits through.
    pub fn writer(&self) -> &GroupCommit {
        &self.writer
    }

    /// What its writer has done so far (commits, checkpoints, the WAL's size).
    pub fn stats(&self) -> WriterStats {
        self.writer.stats()
    }
}
