//! The default store: one SQLite file and its one writer ([`GroupCommit`]), shared by every
//! store kept in it — the tasks with their turns' records and push records, the conversations,
//! the budgets' usage — so what one turn writes shares its commits. A file is opened once
//! ([`SqliteFile::open`]) and handed to each store that lives in it.

use std::path::Path;

use super::sqlite_writer::{GroupCommit, WriterStats, connect};

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
        Ok(Self {
            path: path.to_owned(),
            writer,
        })
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
