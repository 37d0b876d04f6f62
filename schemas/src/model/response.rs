//! The answers of the standard A2A bindings that are not a bare Task: `SendMessageResponse`
//! and `ListTasksResponse`. Written in either dialect, like the types they hold.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use super::{Message, Task};
use crate::write::{Dialect, DialectSerialize, InDialect, InDialectSeq};

/// What `SendMessage` answers: the task the message started or continued, or a message.
#[derive(Debug, Clone, PartialEq)]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// One page of `ListTasks`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    /// The next page's token; empty on the last page (always present).
    pub next_page_token: String,
    pub page_size: i32,
    /// How many tasks the query selects, over all pages.
    pub total_size: i32,
}

impl DialectSerialize for SendMessageResponse {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        match self {
            SendMessageResponse::Task(t) => map.serialize_entry("task", &InDialect(t, dialect))?,
            SendMessageResponse::Message(m) => {
                map.serialize_entry("message", &InDialect(m, dialect))?;
            }
        }
        map.end()
    }
}

impl DialectSerialize for ListTasksResponse {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ListTasksResponse", 4)?;
        st.serialize_field("tasks", &InDialectSeq(&self.tasks, dialect))?;
        st.serialize_field("nextPageToken", &self.next_page_token)?;
        st.serialize_field("pageSize", &self.page_size)?;
        st.serialize_field("totalSize", &self.total_size)?;
        st.end()
    }
}

impl Serialize for SendMessageResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

impl Serialize for ListTasksResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::a2a_v1;
    use crate::{Schema, TaskState, TaskStatus};

    fn task() -> Task {
        let mut status = TaskStatus::new(TaskState::Completed);
        status.timestamp = Some("2026-01-01T00:00:00Z".into());
        Task {
            id: "t".into(),
            context_id: Some("c".into()),
            status,
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        }
    }

    #[test]
    fn both_responses_validate_against_the_a2a_schema() {
        let send = a2a_v1::to_value(&SendMessageResponse::Task(task()));
        Schema::A2aV1SendMessageResponse.validate(&send).unwrap();
        let list = a2a_v1::to_value(&ListTasksResponse {
            tasks: vec![task()],
            next_page_token: String::new(),
            page_size: 50,
            total_size: 1,
        });
        Schema::A2aV1ListTasksResponse.validate(&list).unwrap();
        assert_eq!(list["nextPageToken"], "", "present even when empty");
        assert_eq!(list["tasks"][0]["status"]["state"], "TASK_STATE_COMPLETED");
    }
}
