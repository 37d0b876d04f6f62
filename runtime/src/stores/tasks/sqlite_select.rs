//! How the SQLite task store selects without memory: the rows a caller may see, as SQL
//! ([`Visible`]), and `ListTasks`' pages among every task kept ([`select_rows`]), on the small
//! columns each task's row has before its body (see [`super::sqlite`]).

use rusqlite::Connection;

use super::list::{Asked, Selection, selected};
use crate::platform::identity::Caller;
use daedalus_contract::TaskState;

/// A state as its row's `state` column holds it: its place in [`TaskState::ALL`].
pub(super) fn state_code(state: TaskState) -> i64 {
    TaskState::ALL
        .iter()
        .position(|s| *s == state)
        .and_then(|n| i64::try_from(n).ok())
        .unwrap_or(-1)
}

/// Which tasks' rows a caller may see, as SQL ([`Caller::may_see`]): its own principal's, or,
/// an admin, every task of its tenant and those nobody owns. `None`: every task (anyone).
pub(super) struct Visible {
    admin: bool,
    /// The principal's key, or (an admin) its tenant's part with the dot after it.
    pub(super) value: String,
}

impl Visible {
    pub(super) fn to(caller: &Caller) -> Option<Self> {
        let Caller::Known(known) = caller else {
            return None;
        };
        let key = known.principal.key();
        Some(if known.admin {
            let tenant = key
                .split_once('.')
                .map_or(key.as_str(), |(tenant, _)| tenant);
            Self {
                admin: true,
                value: format!("{tenant}."),
            }
        } else {
            Self {
                admin: false,
                value: key,
            }
        })
    }

    /// The condition, its value bound as parameter `?n`. Never NULL: `NOT` of it holds for
    /// exactly the rows the caller may not see.
    pub(super) fn clause(&self, n: usize) -> String {
        if self.admin {
            format!("principal IS NULL OR substr(principal, 1, length(?{n})) IS ?{n}")
        } else {
            format!("principal IS ?{n}")
        }
    }
}

/// The page `asked` selects, and how many tasks it selects in all.
pub(super) fn select_rows(conn: &Connection, asked: &Asked) -> rusqlite::Result<Selection> {
    let mut filters = Vec::new();
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let bind = |values: &mut Vec<rusqlite::types::Value>, value: rusqlite::types::Value| {
        values.push(value);
        values.len()
    };
    if let Some(visible) = Visible::to(&asked.caller) {
        let n = bind(&mut values, visible.value.clone().into());
        filters.push(format!("({})", visible.clause(n)));
    }
    if let Some(context) = &asked.context_id {
        let n = bind(&mut values, context.clone().into());
        filters.push(format!("context = ?{n}"));
    }
    if let Some(state) = asked.state {
        let n = bind(&mut values, state_code(state).into());
        filters.push(format!("state = ?{n}"));
    }
    if let Some(after) = asked.status_after_micros {
        let n = bind(&mut values, after.into());
        filters.push(format!("status_us >= ?{n}"));
    }
    let selects = if filters.is_empty() {
        "1".to_owned()
    } else {
        filters.join(" AND ")
    };
    let total: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM a2a_tasks WHERE {selects}"))?
        .query_row(rusqlite::params_from_iter(&values), |row| row.get(0))?;
    let mut page_values = values.clone();
    let starts = match &asked.after {
        Some((micros, id)) => {
            let m = bind(&mut page_values, (*micros).into());
            let i = bind(&mut page_values, id.clone().into());
            format!(" AND (status_us < ?{m} OR (status_us = ?{m} AND id > ?{i}))")
        }
        None => String::new(),
    };
    let limit = bind(&mut page_values, i64::from(asked.page_size + 1).into());
    let mut statement = conn.prepare_cached(&format!(
        "SELECT id, status_us FROM a2a_tasks WHERE {selects}{starts} \
         ORDER BY status_us DESC, id ASC LIMIT ?{limit}"
    ))?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(&page_values), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(selected(
        rows,
        asked.page_size,
        u64::try_from(total).unwrap_or(0),
    ))
}

/// What the store selects on its own, without memory: `ListTasks`' pages among every task
/// kept, who a context is open to, the tasks a restart resumes; and a file an earlier
/// version wrote, rebuilt with its tasks' facts in columns.
#[cfg(test)]
mod selects {
    use std::collections::BTreeSet;

    use daedalus_contract::{Task, TaskState, TaskStatus};

    use std::time::Duration;

    use rusqlite::params;

    use super::*;
    use crate::platform::identity::{Known, Principal, Via};
    use crate::stores::tasks::backend::{StoredTask, TaskBackend};
    use crate::stores::tasks::list;
    use crate::stores::tasks::sqlite::SqliteTasks;

    fn principal(subject: &str, tenant: &str) -> Principal {
        Principal {
            issuer: None,
            subject: subject.into(),
            tenant: Some(tenant.into()),
        }
    }

    fn caller(principal: &Principal, admin: bool) -> Caller {
        Caller::known(Known {
            principal: principal.clone(),
            scopes: BTreeSet::new(),
            admin,
            via: Via::Token,
        })
    }

    /// Task `id` of `context`, in `state`, its status at second `second`, owned by `owner`.
    fn task(
        id: &str,
        context: &str,
        state: TaskState,
        second: u32,
        owner: Option<&Principal>,
    ) -> StoredTask {
        let mut status = TaskStatus::new(state);
        status.timestamp = Some(format!("2026-12-05T00:00:{second:02}Z"));
        let task = Task {
            id: id.into(),
            context_id: Some(context.into()),
            status,
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        let mut stored = StoredTask::new(task, "replica-a", None);
        stored.principal = owner.cloned();
        stored
    }

    fn asked(caller: Caller) -> Asked {
        Asked {
            context_id: None,
            state: None,
            status_after_micros: None,
            after: None,
            page_size: 2,
            caller,
        }
    }

    async fn kept(tasks: &[StoredTask]) -> SqliteTasks {
        // Kept for years: the tasks' status times are fixed.
        let store = SqliteTasks::open(":memory:", Duration::from_hours(24 * 3650), 100).unwrap();
        for task in tasks {
            store.write(task, 0).await.unwrap();
        }
        store
    }

    #[tokio::test]
    async fn pages_come_newest_status_first_each_task_once_only_to_whom_may_see_it() {
        let (ann, bob, eve) = (
            principal("ann", "blue"),
            principal("bob", "blue"),
            principal("eve", "red"),
        );
        let store = kept(&[
            task("a1", "c1", TaskState::Completed, 1, Some(&ann)),
            task("a2", "c1", TaskState::Failed, 3, Some(&ann)),
            task("a3", "c2", TaskState::Completed, 3, Some(&ann)),
            task("a4", "c2", TaskState::Completed, 5, Some(&ann)),
            task("b1", "c3", TaskState::Completed, 4, Some(&bob)),
            task("e1", "c4", TaskState::Completed, 6, Some(&eve)),
            task("n1", "c5", TaskState::Completed, 2, None),
        ])
        .await;
        let walk = |mut asked: Asked| {
            let store = store.clone();
            async move {
                let mut seen = Vec::new();
                loop {
                    let page = store.select(&asked).await.unwrap().expect("selects");
                    seen.push((page.ids.clone(), page.total_size));
                    if page.next_page_token.is_empty() {
                        return seen;
                    }
                    let next = list::Key::from_token_for_tests(&page.next_page_token);
                    asked.after = Some(next);
                }
            }
        };
        // Her own, newest first; a tie in time by id; the total on every page.
        assert_eq!(
            walk(asked(caller(&ann, false))).await,
            [
                (vec!["a4".to_owned(), "a2".to_owned()], 4),
                (vec!["a3".to_owned(), "a1".to_owned()], 4),
            ]
        );
        // An admin sees its tenant's and what nobody owns, never another tenant's.
        let admin = walk(asked(caller(&bob, true))).await;
        let ids: Vec<String> = admin.into_iter().flat_map(|(ids, _)| ids).collect();
        assert_eq!(ids, ["a4", "b1", "a2", "a3", "n1", "a1"]);
        // Filters: context, state, status time.
        let mut by_context = asked(Caller::Anyone);
        by_context.context_id = Some("c2".into());
        assert_eq!(
            walk(by_context).await,
            [(vec!["a4".into(), "a3".into()], 2)]
        );
        let mut by_state = asked(Caller::Anyone);
        by_state.state = Some(TaskState::Failed);
        assert_eq!(walk(by_state).await, [(vec!["a2".into()], 1)]);
        let mut since = asked(Caller::Anyone);
        since.status_after_micros = Some(list::micros_of(Some("2026-12-05T00:00:05Z")));
        assert_eq!(walk(since).await, [(vec!["e1".into(), "a4".into()], 2)]);
    }

    #[tokio::test]
    async fn a_context_is_closed_to_whoever_may_not_see_one_of_its_tasks() {
        let (ann, bob) = (principal("ann", "blue"), principal("bob", "blue"));
        let store = kept(&[
            task("a1", "ann's", TaskState::Completed, 1, Some(&ann)),
            task("n1", "nobody's", TaskState::Completed, 1, None),
        ])
        .await;
        let closed = |context: &'static str, caller: Caller| {
            let store = store.clone();
            async move {
                store
                    .context_closed_to(context, &caller)
                    .await
                    .unwrap()
                    .expect("tells")
            }
        };
        assert!(!closed("ann's", caller(&ann, false)).await);
        assert!(closed("ann's", caller(&bob, false)).await);
        assert!(
            !closed("ann's", caller(&bob, true)).await,
            "her tenant's admin"
        );
        assert!(closed("nobody's", caller(&ann, false)).await);
        assert!(!closed("nobody's", caller(&bob, true)).await);
        assert!(!closed("new", caller(&bob, false)).await);
        assert!(!closed("ann's", Caller::Anyone).await);
    }

    #[tokio::test]
    async fn a_restart_reads_back_only_the_tasks_left_running() {
        let store = kept(&[
            task("done", "c", TaskState::Completed, 1, None),
            task("asking", "c", TaskState::InputRequired, 1, None),
            task("working", "c", TaskState::Working, 1, None),
        ])
        .await;
        let running = store.left_running("replica-a").await.unwrap().unwrap();
        let ids: Vec<_> = running.iter().map(|v| v.stored.task.id.as_str()).collect();
        assert_eq!(ids, ["working"]);
        // Its end takes it out.
        let mut ended = running[0].stored.clone();
        ended.task.status = TaskStatus::new(TaskState::Completed);
        store.write(&ended, running[0].revision).await.unwrap();
        assert!(store.left_running("r").await.unwrap().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_file_from_before_the_columns_is_rebuilt_with_its_tasks_facts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let ann = principal("ann", "blue");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE a2a_tasks (id TEXT PRIMARY KEY, owner TEXT NOT NULL,
                    updated_ms INTEGER NOT NULL, body TEXT NOT NULL);
                 CREATE INDEX a2a_tasks_updated ON a2a_tasks (updated_ms);",
            )
            .unwrap();
            for stored in [
                task("old-done", "c", TaskState::Completed, 1, Some(&ann)),
                task("old-working", "c", TaskState::Working, 2, None),
            ] {
                conn.execute(
                    "INSERT INTO a2a_tasks (id, owner, updated_ms, body) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        stored.task.id,
                        stored.owner,
                        stored.updated_ms,
                        serde_json::to_string(&stored).unwrap()
                    ],
                )
                .unwrap();
            }
        }
        let store = SqliteTasks::open(path.to_str().unwrap(), Duration::from_hours(24 * 3650), 100)
            .expect("rebuilt");
        let done = store.load("old-done").await.unwrap().expect("kept");
        assert_eq!(done.revision, 1);
        let mine = store
            .select(&asked(caller(&ann, false)))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(mine.ids, ["old-done"]);
        let running = store.left_running("r").await.unwrap().unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].stored.task.id, "old-working");
        // Written again at its revision, as before.
        store.write(&done.stored, 1).await.unwrap();
    }
}
