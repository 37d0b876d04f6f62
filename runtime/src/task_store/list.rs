//! `ListTasks`: the tasks a query selects (context, state, status changed at or after a time),
//! most recent status first, one page at a time.
//!
//! Pages are cut by a cursor, not an offset: the page token names the last task of the page
//! before (its status time and id), and the next page starts after it in the same order, so a
//! task that changes between two calls moves, and none is shown twice in one walk.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use daedalus_contract::{Task, TaskState};

use super::TaskCell;
use crate::identity::Caller;

/// A page holds at most this many tasks, whatever is asked.
pub const MAX_PAGE_SIZE: u32 = 100;
/// A page holds this many tasks when the caller names no size.
pub const DEFAULT_PAGE_SIZE: u32 = 50;

/// What `ListTasks` asks for.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this time.
    pub status_after: Option<DateTime<Utc>>,
    pub page_size: Option<u32>,
    /// The previous page's `nextPageToken`.
    pub page_token: Option<String>,
    /// The last this many messages of each task's history (none when unset).
    pub history_length: Option<u32>,
    pub include_artifacts: bool,
    /// Who asks: only the tasks it may see are listed (spec §13.1).
    pub caller: Caller,
}

/// One page of tasks.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub tasks: Vec<Task>,
    /// The token of the next page; empty on the last.
    pub next_page_token: String,
    pub page_size: u32,
    /// How many tasks the query selects, over all pages.
    pub total_size: u32,
}

/// A query that cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error("pageSize must be between 1 and {MAX_PAGE_SIZE}, not {0}")]
    PageSize(u32),
    #[error("pageToken is not a token this server gave")]
    PageToken,
}

/// Where a task sorts: most recent status first, then by id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    newest_first: std::cmp::Reverse<i64>,
    id: String,
}

impl Key {
    fn token(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.newest_first.0, self.id))
    }

    fn from_token(token: &str) -> Result<Self, ListError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| ListError::PageToken)?;
        let text = String::from_utf8(bytes).map_err(|_| ListError::PageToken)?;
        let (micros, id) = text.split_once(':').ok_or(ListError::PageToken)?;
        Ok(Self {
            newest_first: std::cmp::Reverse(micros.parse().map_err(|_| ListError::PageToken)?),
            id: id.to_owned(),
        })
    }
}

/// The time a task's status last changed, in microseconds (0 when it says none).
fn status_micros(task: &Task) -> i64 {
    task.status
        .timestamp
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(0, |t| t.timestamp_micros())
}

/// The page of `cells` that `query` asks for.
pub(super) fn page(cells: &[Arc<TaskCell>], query: &ListQuery) -> Result<ListPage, ListError> {
    let page_size = query.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(ListError::PageSize(page_size));
    }
    let after = query
        .page_token
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(Key::from_token)
        .transpose()?;
    let after_micros = query.status_after.map(|t| t.timestamp_micros());
    let mut selected: Vec<(Key, &Arc<TaskCell>)> = cells
        .iter()
        .filter(|cell| query.caller.may_see(cell.principal().as_ref()))
        .filter_map(|cell| {
            let key = cell.peek(|task| {
                let micros = status_micros(task);
                let chosen = query
                    .context_id
                    .as_deref()
                    .is_none_or(|c| task.context_id.as_deref() == Some(c))
                    && query.state.is_none_or(|s| task.status.state == s)
                    && after_micros.is_none_or(|after| micros >= after);
                chosen.then(|| Key {
                    newest_first: std::cmp::Reverse(micros),
                    id: task.id.clone(),
                })
            })??;
            Some((key, cell))
        })
        .collect();
    selected.sort_by(|a, b| a.0.cmp(&b.0));
    let total_size = u32::try_from(selected.len()).unwrap_or(u32::MAX);
    let start = after.map_or(0, |after| {
        selected.partition_point(|(key, _)| *key <= after)
    });
    let rest = &selected[start..];
    let shown = &rest[..rest.len().min(page_size as usize)];
    let next_page_token = if rest.len() > shown.len() {
        shown.last().map(|(key, _)| key.token()).unwrap_or_default()
    } else {
        String::new()
    };
    let tasks = shown
        .iter()
        .filter_map(|(_, cell)| cell.task())
        .map(|task| shape(task, query))
        .collect();
    Ok(ListPage {
        tasks,
        next_page_token,
        page_size,
        total_size,
    })
}

/// A listed task: artifacts only when asked for, and the last `history_length` messages.
fn shape(mut task: Task, query: &ListQuery) -> Task {
    if !query.include_artifacts {
        task.artifacts = Vec::new();
    }
    match (query.history_length, task.history.as_mut()) {
        (Some(n), Some(history)) if n > 0 => {
            history.drain(..history.len().saturating_sub(n as usize));
        }
        _ => task.history = None,
    }
    task
}
