//! Where state persists beyond memory: conversations (`SESSIONS_DB`) and A2A tasks
//! (`TASKS_DB`), each a SQLite file or a JetStream KV bucket (and tasks also memory only).

use serde::Serialize;

use super::redact_url;

/// Where conversations persist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionsDb {
    /// A SQLite file, or `:memory:`.
    Sqlite(String),
    /// A JetStream KV bucket, for several replicas.
    NatsKv {
        #[serde(serialize_with = "masked_url")]
        url: String,
        bucket: String,
    },
}

/// The bucket used when a `nats://` URL names none.
pub const DEFAULT_SESSIONS_BUCKET: &str = "daedalus-sessions";

/// The task bucket used when a `nats://` `TASKS_DB` names none.
pub const DEFAULT_TASKS_BUCKET: &str = "daedalus-tasks";

/// Where A2A tasks are kept beyond memory (`TASKS_DB`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TasksDb {
    /// Memory only: a restart forgets them.
    Memory,
    /// A SQLite file.
    Sqlite { path: String },
    /// A JetStream KV bucket shared by replicas.
    NatsKv {
        #[serde(serialize_with = "masked_url")]
        url: String,
        bucket: String,
    },
}

/// Why a `TASKS_DB` or `SESSIONS_DB` value names no store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreUrlError {
    #[error("empty; give a SQLite file, :memory:, a nats:// URL or off")]
    Empty,
    /// `postgres://…` or `redis://…`: a store this runtime does not have, not a file to
    /// create under that name.
    #[error(
        "{scheme}:// is not a store this runtime keeps state in; give a SQLite file, a nats:// or tls:// URL"
    )]
    UnknownScheme { scheme: String },
    #[error("{scheme} URL without a server")]
    NoServer { scheme: String },
    #[error("bucket {bucket:?}: a KV bucket name holds only letters, digits, - and _")]
    BadBucket { bucket: String },
}

impl TasksDb {
    /// Reads `TASKS_DB`: `memory`, a `nats://` or `tls://` URL (with an optional `/bucket`), or
    /// a SQLite file.
    pub fn parse(value: &str) -> Result<Self, StoreUrlError> {
        if value.trim() == "memory" {
            return Ok(Self::Memory);
        }
        match SessionsDb::parse_with(value, DEFAULT_TASKS_BUCKET)? {
            SessionsDb::Sqlite(path) => Ok(Self::Sqlite { path }),
            SessionsDb::NatsKv { url, bucket } => Ok(Self::NatsKv { url, bucket }),
        }
    }
}

impl SessionsDb {
    /// Reads `SESSIONS_DB`: `nats://` or `tls://` URLs (with an optional `/bucket`) name a KV
    /// bucket, anything else a SQLite file.
    pub fn parse(value: &str) -> Result<Self, StoreUrlError> {
        Self::parse_with(value, DEFAULT_SESSIONS_BUCKET)
    }

    /// [`SessionsDb::parse`], with `default_bucket` for a URL that names none.
    fn parse_with(value: &str, default_bucket: &str) -> Result<Self, StoreUrlError> {
        let Some(rest) = value
            .strip_prefix("nats://")
            .or_else(|| value.strip_prefix("tls://"))
        else {
            if value.trim().is_empty() {
                return Err(StoreUrlError::Empty);
            }
            if let Some((scheme, _)) = value.split_once("://") {
                return Err(StoreUrlError::UnknownScheme {
                    scheme: scheme.to_owned(),
                });
            }
            return Ok(Self::Sqlite(value.to_owned()));
        };
        let scheme = &value[..value.len() - rest.len()];
        let (server, bucket) = match rest.split_once('/') {
            Some((server, bucket)) if !bucket.is_empty() => (server, bucket),
            Some((server, _)) => (server, default_bucket),
            None => (rest, default_bucket),
        };
        if server.is_empty() {
            return Err(StoreUrlError::NoServer {
                scheme: scheme.to_owned(),
            });
        }
        if !bucket
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(StoreUrlError::BadBucket {
                bucket: bucket.to_owned(),
            });
        }
        Ok(Self::NatsKv {
            url: format!("{scheme}{server}"),
            bucket: bucket.to_owned(),
        })
    }
}

fn masked_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}
