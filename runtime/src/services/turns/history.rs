//! How much of a task's history an answer shows (A2A §3.2.4), shaped in this one place for
//! every binding and operation: `historyLength` unset shows the operation's default
//! ([`Unset`]), 0 shows none (the `history` field left out), n the last n messages. The
//! history is the task's own messages, as the store holds them (the contract binding's
//! `POST /` shows its context's stored conversation instead; [`super::TurnService`] reads it).

use daedalus_contract::{Message, Task};

/// What an unset `historyLength` shows: the operation's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// All of it (`GetTask`, `SendMessage`).
    All,
    /// None (`ListTasks`: a page of tasks stays small unless the caller asks).
    Nothing,
}

/// `task` showing the last `length` messages of `history` (unset: as `unset` says).
pub fn shaped(
    mut task: Task,
    history: Option<Vec<Message>>,
    length: Option<u32>,
    unset: Unset,
) -> Task {
    let keep = match (length, unset) {
        (Some(n), _) => usize::try_from(n).unwrap_or(usize::MAX),
        (None, Unset::All) => usize::MAX,
        (None, Unset::Nothing) => 0,
    };
    task.history = history
        .map(|mut history| {
            history.drain(..history.len().saturating_sub(keep));
            history
        })
        .filter(|history| !history.is_empty());
    task
}

/// `task` showing the last `length` messages of its own history.
pub fn shape(mut task: Task, length: Option<u32>, unset: Unset) -> Task {
    let history = task.history.take();
    shaped(task, history, length, unset)
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Part, Role, TaskState, TaskStatus};

    use super::*;

    fn task_with(messages: usize) -> Task {
        Task {
            id: "t".into(),
            context_id: Some("c".into()),
            status: TaskStatus::now(TaskState::Completed),
            artifacts: Vec::new(),
            history: Some(
                (0..messages)
                    .map(|i| Message::new(format!("m-{i}"), Role::User, vec![Part::text("x")]))
                    .collect(),
            ),
            metadata: None,
        }
    }

    fn ids(task: &Task) -> Option<Vec<String>> {
        task.history
            .as_ref()
            .map(|h| h.iter().map(|m| m.message_id.clone()).collect())
    }

    #[test]
    fn a_length_keeps_the_last_messages_zero_none_and_unset_the_operations_default() {
        assert_eq!(
            ids(&shape(task_with(3), Some(2), Unset::All)),
            Some(vec!["m-1".into(), "m-2".into()])
        );
        assert_eq!(
            ids(&shape(task_with(3), Some(9), Unset::Nothing)).map(|h| h.len()),
            Some(3)
        );
        assert_eq!(
            ids(&shape(task_with(3), Some(0), Unset::All)),
            None,
            "omitted, not empty"
        );
        assert_eq!(
            ids(&shape(task_with(3), None, Unset::All)).map(|h| h.len()),
            Some(3)
        );
        assert_eq!(ids(&shape(task_with(3), None, Unset::Nothing)), None);
        assert_eq!(ids(&shape(task_with(0), None, Unset::All)), None);
    }
}
