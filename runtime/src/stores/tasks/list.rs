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
use crate::platform::identity::Caller;

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
    /// How many of each task's own messages the page shows (unset: none; the turn service
    /// shapes them).
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
pub(super) struct Key {
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

#[cfg(test)]
impl Key {
    /// Where a page token says the next page starts (status time, id).
    pub(super) fn from_token_for_tests(token: &str) -> (i64, String) {
        let key = Self::from_token(token).expect("a token this server gave");
        (key.newest_first.0, key.id)
    }
}

/// The time a task's status last changed, in microseconds (0 when it says none).
pub fn status_micros(task: &Task) -> i64 {
    micros_of(task.status.timestamp.as_deref())
}

/// An RFC 3339 time in microseconds (0 when there is none, or it does not read).
pub fn micros_of(timestamp: Option<&str>) -> i64 {
    timestamp
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(0, |t| t.timestamp_micros())
}

/// What a query is judged on, of one task.
#[derive(Debug, Clone, Copy)]
pub(super) struct Facts<'a> {
    pub(super) id: &'a str,
    pub(super) principal: Option<&'a crate::platform::identity::Principal>,
    pub(super) context_id: Option<&'a str>,
    pub(super) state: TaskState,
    /// When its status last changed, in microseconds (0 when it says none).
    pub(super) status_micros: i64,
}

/// The ids of one page of the tasks a query selects, in order, and what the page says.
#[derive(Debug, PartialEq, Eq)]
pub struct Selection {
    pub(super) ids: Vec<String>,
    pub(super) next_page_token: String,
    pub(super) page_size: u32,
    pub(super) total_size: u32,
}

/// A query as a backend that selects on its own runs it ([`super::TaskBackend::select`]):
/// its filters, and where its page starts. Tasks sort most recent status first, then by id.
#[derive(Debug, Clone)]
pub struct Asked {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks whose status changed at or after this time (microseconds).
    pub status_after_micros: Option<i64>,
    /// The page starts after this task (its status time in microseconds, and its id).
    pub after: Option<(i64, String)>,
    pub page_size: u32,
    /// Who asks: only what it may see is selected.
    pub caller: Caller,
}

impl Asked {
    /// What `query` asks, checked.
    pub(super) fn of(query: &ListQuery) -> Result<Self, ListError> {
        let page_size = query.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(ListError::PageSize(page_size));
        }
        let after = query
            .page_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(Key::from_token)
            .transpose()?
            .map(|key| (key.newest_first.0, key.id));
        Ok(Self {
            context_id: query.context_id.clone(),
            state: query.state,
            status_after_micros: query.status_after.map(|t| t.timestamp_micros()),
            after,
            page_size,
            caller: query.caller.clone(),
        })
    }
}

/// The page a backend selected: `rows` (id and status time, in order, at most one more than
/// the page holds), of `total` tasks the query selects.
pub fn selected(rows: Vec<(String, i64)>, page_size: u32, total: u64) -> Selection {
    let shown = rows.len().min(page_size as usize);
    let next_page_token = match shown.checked_sub(1).and_then(|last| rows.get(last)) {
        Some((id, micros)) if rows.len() > shown => Key {
            newest_first: std::cmp::Reverse(*micros),
            id: id.clone(),
        }
        .token(),
        _ => String::new(),
    };
    Selection {
        ids: rows.into_iter().take(shown).map(|(id, _)| id).collect(),
        next_page_token,
        page_size,
        total_size: u32::try_from(total).unwrap_or(u32::MAX),
    }
}

/// The page `query` selects among `tasks`.
pub(super) fn select<'a>(
    tasks: impl Iterator<Item = Facts<'a>>,
    query: &ListQuery,
) -> Result<Selection, ListError> {
    let asked = Asked::of(query)?;
    let mut chosen: Vec<Key> = tasks
        .filter(|t| asked.caller.may_see(t.principal))
        .filter(|t| {
            asked
                .context_id
                .as_deref()
                .is_none_or(|c| t.context_id == Some(c))
                && asked.state.is_none_or(|s| t.state == s)
                && asked
                    .status_after_micros
                    .is_none_or(|after| t.status_micros >= after)
        })
        .map(|t| Key {
            newest_first: std::cmp::Reverse(t.status_micros),
            id: t.id.to_owned(),
        })
        .collect();
    chosen.sort();
    let total = u64::try_from(chosen.len()).unwrap_or(u64::MAX);
    let start = asked.after.map_or(0, |(micros, id)| {
        let after = Key {
            newest_first: std::cmp::Reverse(micros),
            id,
        };
        chosen.partition_point(|key| *key <= after)
    });
    let rows = chosen
        .into_iter()
        .skip(start)
        .take(asked.page_size as usize + 1)
        .map(|key| (key.id, key.newest_first.0))
        .collect();
    Ok(selected(rows, asked.page_size, total))
}

/// The page of `cells` that `query` asks for.
pub(super) fn page(cells: &[Arc<TaskCell>], query: &ListQuery) -> Result<ListPage, ListError> {
    // What the query is judged on, read without copying any task whole.
    type Held<'c> = (
        (String, Option<String>, TaskState, i64),
        Option<crate::platform::identity::Principal>,
        &'c Arc<TaskCell>,
    );
    let held: Vec<Held<'_>> = cells
        .iter()
        .filter_map(|cell| {
            let facts = cell.peek(|t| {
                (
                    t.id.clone(),
                    t.context_id.clone(),
                    t.status.state,
                    status_micros(t),
                )
            })?;
            Some((facts, cell.principal(), cell))
        })
        .collect();
    let facts = held
        .iter()
        .map(|((id, context, state, micros), principal, _)| Facts {
            id,
            principal: principal.as_ref(),
            context_id: context.as_deref(),
            state: *state,
            status_micros: *micros,
        });
    let selection = select(facts, query)?;
    let by_id: std::collections::HashMap<&str, &Arc<TaskCell>> = held
        .iter()
        .map(|((id, ..), _, cell)| (id.as_str(), *cell))
        .collect();
    let tasks = selection
        .ids
        .iter()
        .filter_map(|id| by_id.get(id.as_str())?.task())
        .map(|task| shape(task, query))
        .collect();
    Ok(selection.into_page(tasks))
}

/// The page of `selection` holding `tasks`, read in the order of its ids (`None`: one no
/// longer found, left out), each shaped as `query` asks.
pub(super) fn shaped_page(
    selection: Selection,
    tasks: Vec<Option<Task>>,
    query: &ListQuery,
) -> ListPage {
    let tasks = tasks
        .into_iter()
        .flatten()
        .map(|task| shape(task, query))
        .collect();
    selection.into_page(tasks)
}

impl Selection {
    /// The page, holding `tasks` (those of [`Selection::ids`] still to be found).
    pub(super) fn into_page(self, tasks: Vec<Task>) -> ListPage {
        ListPage {
            tasks,
            next_page_token: self.next_page_token,
            page_size: self.page_size,
            total_size: self.total_size,
        }
    }
}

/// A listed task: artifacts only when asked for (its history is shaped by the turn service,
/// `services::turns::history`).
pub(super) fn shape(mut task: Task, query: &ListQuery) -> Task {
    if !query.include_artifacts {
        task.artifacts = Vec::new();
    }
    task
}
