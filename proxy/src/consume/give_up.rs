//! The answer to a task given up, whichever path gives it up: a worker whose last delivery
//! failed, or the max-deliveries watcher once the server has stopped delivering it. Either
//! way the task is answered the same: a failed Task that says "gave up after N deliveries:
//! why", or, when the message names no usable task, its body dead-lettered with that reason.

use daedalus_contract::TaskState;

use crate::consume::disposition::Answer;
use crate::consume::intake::{self, Intake};
use crate::wire::ids::Ids;

/// What a given-up task is answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum GivenUp {
    /// A failed Task for the task's result subject.
    Failed { ids: Ids, answer: Answer },
    /// No usable task id: the body goes to the dead-letter subject with `reason`.
    DeadLetter { reason: String },
}

/// The answer to the task in `payload`, given up after `deliveries` deliveries because of `why`.
pub fn give_up(payload: &[u8], deliveries: u64, why: &str) -> GivenUp {
    let why = format!("gave up after {deliveries} deliveries: {why}");
    match intake::read_task(payload) {
        Intake::Unaddressable { reason } => GivenUp::DeadLetter {
            reason: format!("{why}; {reason}"),
        },
        Intake::Refused { ids, .. } | Intake::Task { ids, .. } => {
            let answer = Answer::failed(&ids, &why);
            debug_assert_eq!(answer.state, TaskState::Failed);
            GivenUp::Failed { ids, answer }
        }
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Task, read};

    use super::*;

    #[test]
    fn a_task_given_up_gets_a_failed_task_that_says_after_how_many_deliveries_and_why() {
        let payload = br#"{"message":{"messageId":"m-1","taskId":"t-1","contextId":"c-1","role":"user","parts":[{"text":"hi"}]}}"#;
        let GivenUp::Failed { ids, answer } = give_up(payload, 5, "the runtime kept failing")
        else {
            panic!("a task with ids is answered with a failed Task");
        };
        assert_eq!(ids.task_id, "t-1");
        let task: Task = read::from_slice(&answer.body).expect("a contract Task");
        assert_eq!(task.id, "t-1");
        assert_eq!(task.context_id.as_deref(), Some("c-1"));
        assert_eq!(task.status.state, TaskState::Failed);
        let said = serde_json::to_string(&task.status.message).expect("serializes");
        assert!(
            said.contains("gave up after 5 deliveries: the runtime kept failing"),
            "{said}"
        );
    }

    #[test]
    fn a_message_without_a_usable_task_id_is_dead_lettered_with_the_reason() {
        let GivenUp::DeadLetter { reason } = give_up(b"not json", 3, "the lease was lost") else {
            panic!("an unaddressable body is dead-lettered");
        };
        assert!(
            reason.starts_with("gave up after 3 deliveries: the lease was lost; "),
            "{reason}"
        );
    }
}
