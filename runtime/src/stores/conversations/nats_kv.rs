//! The conversation store for runtimes running as several replicas: a NATS JetStream key-value
//! bucket shared by all of them.
//!
//! Layout, with `<ctx>` = `token(context id)` (docs/design.md §5: the id itself when it is a plain
//! token, else base64url, else a hash; never more than 128 characters):
//! - `m.<ctx>` holds `{"next": n, "first": f}`: the next free turn of the context, and the
//!   first turn compaction left. Appending reserves turns by a compare-and-set on this entry,
//!   so two replicas writing one context never reuse a turn;
//! - `r.<ctx>.<turn>` holds one row, so no conversation runs into the server's payload limit;
//! - `p.<ctx>.<turn>` marks a row written `pending`, and is removed from the stream when the
//!   row settles, so recovery looks at pending rows only.
//!
//! Compaction writes the summary row first, then purges the rows it replaces from the stream
//! (no delete markers stay behind), then moves `first`: a crash half-way leaves rows that
//! rebuilding already reads safely (a call without its result is dropped).
//!
//! A row id is its turn. Recovery differs from SQLite's, where one process owns the file: other
//! replicas may be mid-turn while this one starts, so only `pending` rows older than
//! `stale_after` (longer than any turn may run) become `error`. With a retention
//! (`SESSION_TTL`), the bucket's `max_age` drops entries not written for that long.

use std::time::Duration;

use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::message::ToolCall;
use super::{ConversationStore, NewRow, Row, RowRole, RowStatus, StoreError};
use daedalus_contract::redact::redact_url;

/// How many rows are fetched at once when a conversation is read.
const READ_CONCURRENCY: usize = 32;
/// How often a compare-and-set that lost a race is tried again.
const CAS_ATTEMPTS: usize = 64;

/// Sessions in a JetStream KV bucket.
#[derive(Debug, Clone)]
pub struct NatsKvStore {
    location: String,
    kv: kv::Store,
    stale_after: Duration,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Meta {
    next: i64,
    /// The oldest turn compaction kept (rows before it are gone).
    #[serde(default)]
    first: i64,
}

/// A row as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    turn: i64,
    role: RowRole,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(default)]
    is_error: bool,
    status: RowStatus,
    /// When the row was written or last changed, in Unix milliseconds.
    written_ms: i64,
}

impl Stored {
    fn into_row(self) -> Row {
        Row {
            id: self.turn,
            turn: self.turn,
            role: self.role,
            content: self.content,
            message_id: self.message_id,
            tool_calls: self.tool_calls,
            tool_call_id: self.tool_call_id,
            is_error: self.is_error,
            status: self.status,
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The key token of `context`: never empty, only `[A-Za-z0-9_-]`, at most 128 characters.
fn encode(context: &str) -> std::borrow::Cow<'_, str> {
    daedalus_contract::token::token(context)
}

fn meta_key(context: &str) -> String {
    format!("m.{}", encode(context))
}

fn row_key(context: &str, turn: i64) -> String {
    format!("r.{}.{turn}", encode(context))
}

fn pending_key(context: &str, turn: i64) -> String {
    format!("p.{}.{turn}", encode(context))
}

impl NatsKvStore {
    /// Connects to `url` and opens `bucket`, creating it (file storage, one value per key) if
    /// it does not exist. Conversations are kept forever.
    pub async fn open(url: &str, bucket: &str, stale_after: Duration) -> Result<Self, StoreError> {
        Self::open_with_ttl(url, bucket, stale_after, None).await
    }

    /// [`NatsKvStore::open`], with entries dropped `ttl` after they were last written (the
    /// bucket's `max_age`, set on a new bucket and brought to `ttl` on an existing one).
    pub async fn open_with_ttl(
        url: &str,
        bucket: &str,
        stale_after: Duration,
        ttl: Option<Duration>,
    ) -> Result<Self, StoreError> {
        let ttl = ttl.filter(|t| !t.is_zero());
        let location = format!("nats bucket {bucket} at {}", redact_url(url));
        let fail = |e: crate::stores::kv_bucket::BucketError| StoreError::Backend {
            location: location.clone(),
            source: e.into(),
        };
        let bucket = crate::stores::kv_bucket::open(
            url,
            bucket,
            "Daedalus runtime conversations",
            ttl.unwrap_or_default(),
        )
        .await
        .map_err(fail)?;
        let kv = bucket.kv;
        Ok(Self {
            location,
            kv,
            stale_after,
        })
    }

    fn fail(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
        StoreError::Backend {
            location: self.location.clone(),
            source: e.into(),
        }
    }

    /// Reserves `count` turns of `context`; returns the first.
    async fn reserve(&self, context: &str, count: i64) -> Result<i64, StoreError> {
        let before = self
            .update_meta(context, |meta| Meta {
                next: meta.next + count,
                ..meta
            })
            .await?;
        Ok(before.next)
    }

    /// Changes the context's meta entry by `change`, by compare-and-set (read again when another
    /// writer got there first); returns the entry as it was.
    async fn update_meta(
        &self,
        context: &str,
        change: impl Fn(Meta) -> Meta,
    ) -> Result<Meta, StoreError> {
        let key = meta_key(context);
        for _ in 0..CAS_ATTEMPTS {
            let current = self.kv.entry(&key).await.map_err(|e| self.fail(e))?;
            let (meta, revision) = match &current {
                Some(entry) if entry.operation == kv::Operation::Put => {
                    let meta: Meta = serde_json::from_slice(&entry.value)
                        .map_err(|e| self.fail(format!("{key} is not a session entry: {e}")))?;
                    (meta, Some(entry.revision))
                }
                _ => (Meta { next: 0, first: 0 }, None),
            };
            let value = serde_json::to_vec(&change(meta)).expect("numbers serialize");
            let written = match revision {
                Some(revision) => self
                    .kv
                    .update(&key, value.into(), revision)
                    .await
                    .map_err(|e| e.kind() == kv::UpdateErrorKind::WrongLastRevision),
                None => self
                    .kv
                    .create(&key, value.into())
                    .await
                    .map_err(|e| e.kind() == kv::CreateErrorKind::AlreadyExists),
            };
            match written {
                Ok(_) => return Ok(meta),
                // Another writer got there first: read again.
                Err(true) => {}
                Err(false) => return Err(self.fail(format!("cannot update {key}"))),
            }
        }
        Err(self.fail(format!("{key}: too many concurrent writers")))
    }

    /// The context's meta entry, if it has one.
    async fn meta(&self, context: &str) -> Result<Option<Meta>, StoreError> {
        let key = meta_key(context);
        match self.kv.entry(&key).await.map_err(|e| self.fail(e))? {
            Some(entry) if entry.operation == kv::Operation::Put => {
                serde_json::from_slice(&entry.value)
                    .map(Some)
                    .map_err(|e| self.fail(format!("{key} is not a session entry: {e}")))
            }
            _ => Ok(None),
        }
    }

    async fn put(&self, context: &str, row: &Stored) -> Result<(), StoreError> {
        let value = serde_json::to_vec(row).map_err(|e| self.fail(e))?;
        self.kv
            .put(row_key(context, row.turn), value.into())
            .await
            .map_err(|e| self.fail(e))?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        match self.kv.get(key).await.map_err(|e| self.fail(e))? {
            Some(bytes) if !bytes.is_empty() => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| self.fail(format!("{key} is not a session row: {e}"))),
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl ConversationStore for NatsKvStore {
    async fn append(&self, context: &str, rows: Vec<NewRow>) -> Result<Vec<i64>, StoreError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let count = i64::try_from(rows.len()).map_err(|e| self.fail(e))?;
        let first = self.reserve(context, count).await?;
        let written_ms = now_ms();
        let stored: Vec<Stored> = (first..)
            .zip(rows)
            .map(|(turn, row)| Stored {
                turn,
                role: row.role,
                content: row.content,
                message_id: row.message_id,
                tool_calls: row.tool_calls,
                tool_call_id: row.tool_call_id,
                is_error: row.is_error,
                status: row.status,
                written_ms,
            })
            .collect();
        futures::future::try_join_all(stored.iter().map(|row| async move {
            if row.status == RowStatus::Pending {
                self.kv
                    .put(pending_key(context, row.turn), bytes::Bytes::new())
                    .await
                    .map_err(|e| self.fail(e))?;
            }
            self.put(context, row).await
        }))
        .await?;
        Ok(stored.iter().map(|r| r.turn).collect())
    }

    async fn set_status(
        &self,
        context: &str,
        ids: &[i64],
        status: RowStatus,
    ) -> Result<(), StoreError> {
        futures::future::try_join_all(ids.iter().map(|&turn| async move {
            let key = row_key(context, turn);
            if let Some(mut row) = self.get(&key).await? {
                row.status = status;
                row.written_ms = now_ms();
                self.put(context, &row).await?;
            }
            if status != RowStatus::Pending {
                self.unmark(&pending_key(context, turn)).await;
            }
            Ok::<_, StoreError>(())
        }))
        .await?;
        Ok(())
    }

    async fn rows(&self, context: &str, last: usize) -> Result<Vec<Row>, StoreError> {
        let Some(meta) = self.meta(context).await? else {
            return Ok(Vec::new());
        };
        // A turn reserved by a writer that has not stored it yet is simply not there yet.
        let first = meta
            .next
            .saturating_sub(i64::try_from(last).unwrap_or(i64::MAX))
            .max(meta.first)
            .max(0);
        let rows: Vec<Option<Stored>> = futures::stream::iter(first..meta.next)
            .map(|turn| async move { self.get(&row_key(context, turn)).await })
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(rows.into_iter().flatten().map(Stored::into_row).collect())
    }

    async fn compact(
        &self,
        context: &str,
        through: i64,
        summary: Option<String>,
    ) -> Result<u64, StoreError> {
        let Some(meta) = self.meta(context).await? else {
            return Ok(0);
        };
        let through = through.min(meta.next - 1);
        let mut replaced = 0;
        let kept_from = if let Some(content) = summary {
            if self.get(&row_key(context, through)).await?.is_some() {
                replaced = 1;
            }
            let row = Stored {
                turn: through,
                role: RowRole::Summary,
                content,
                message_id: None,
                tool_calls: Vec::new(),
                tool_call_id: None,
                is_error: false,
                status: RowStatus::Complete,
                written_ms: now_ms(),
            };
            self.put(context, &row).await?;
            through
        } else {
            through + 1
        };
        let removed: Vec<u64> = futures::stream::iter(meta.first.max(0)..kept_from)
            .map(|turn| async move {
                let subject = format!("{}{}", self.kv.prefix, row_key(context, turn));
                self.kv
                    .stream
                    .purge()
                    .filter(subject)
                    .await
                    .map(|purged| purged.purged)
                    .map_err(|e| self.fail(e))
            })
            .buffer_unordered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        self.update_meta(context, |meta| Meta {
            first: meta.first.max(kept_from),
            ..meta
        })
        .await?;
        Ok(removed.iter().sum::<u64>() + replaced)
    }

    async fn recover(&self) -> Result<u64, StoreError> {
        let stale_before =
            now_ms() - i64::try_from(self.stale_after.as_millis()).unwrap_or(i64::MAX);
        let marked = self.pending_marks().await?;
        let mut recovered = 0;
        for mark in marked {
            let row_key = format!("r.{}", &mark["p.".len()..]);
            let row = match self.get(&row_key).await {
                Ok(Some(row)) => row,
                Ok(None) => {
                    self.unmark(&mark).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(key = %row_key, error = %e, "skipping a session row that cannot be read");
                    continue;
                }
            };
            if row.status != RowStatus::Pending {
                self.unmark(&mark).await;
                continue;
            }
            if row.written_ms > stale_before {
                // Young enough to belong to another replica's running turn.
                continue;
            }
            let mut row = row;
            row.status = RowStatus::Error;
            row.written_ms = now_ms();
            let value = serde_json::to_vec(&row).map_err(|e| self.fail(e))?;
            self.kv
                .put(&row_key, value.into())
                .await
                .map_err(|e| self.fail(e))?;
            self.unmark(&mark).await;
            recovered += 1;
        }
        Ok(recovered)
    }
}

impl NatsKvStore {
    /// The keys of every pending mark (`p.<ctx>.<turn>`), from the stream's subject list: only
    /// marks of pending rows exist, so this is as long as the pending rows are few.
    async fn pending_marks(&self) -> Result<Vec<String>, StoreError> {
        let prefix = &self.kv.prefix;
        let mut subjects = self
            .kv
            .stream
            .info_with_subjects(format!("{prefix}p.>"))
            .await
            .map_err(|e| self.fail(e))?;
        let mut marks = Vec::new();
        while let Some(subject) = subjects.next().await {
            let (subject, _) = subject.map_err(|e| self.fail(e))?;
            if let Some(key) = subject.strip_prefix(prefix.as_str()) {
                marks.push(key.to_owned());
            }
        }
        Ok(marks)
    }

    /// Removes a pending mark from the stream altogether (no delete marker is left behind).
    async fn unmark(&self, key: &str) {
        let subject = format!("{}{key}", self.kv.prefix);
        if let Err(e) = self.kv.stream.purge().filter(subject).await {
            tracing::warn!(key, error = %e, "cannot clear a pending mark; recovery will look at it again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_context_id_becomes_a_valid_key_token() {
        let long = "x.".repeat(5_000);
        for context in [
            "plain",
            "with.dots and spaces",
            "ünïcode/*>",
            "",
            long.as_str(),
        ] {
            let key = row_key(context, 3);
            let token = key.split('.').nth(1).unwrap();
            assert!(
                token
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{key}"
            );
            assert!(token.len() <= 128, "{key}");
        }
        assert_ne!(meta_key("a"), meta_key("b"));
    }
}
