//! The contract's rules for an A2A task's turn: what a message must hold, which context it
//! belongs to, and the `Task` an outcome becomes (`completed` always carries an artifact and
//! `failed` a `status.message`).

use daedalus_contract::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};

use super::TurnError;
use crate::agents::agent_loop::AgentOutcome;

/// A message a turn can start from.
pub(super) fn check_message(message: &Message) -> Result<(), TurnError> {
    let invalid = |field, why| Err(TurnError::InvalidMessage { field, why });
    if message.message_id.is_empty() {
        return invalid("messageId", "must not be empty");
    }
    if message.parts.is_empty() {
        return invalid("parts", "must hold at least one part");
    }
    if message.role != Role::User {
        return invalid("role", "must be \"user\"");
    }
    Ok(())
}

/// The task's context: fixed by its first message (`known`); a new one when nobody named one.
pub(super) fn resolve_context(
    known: Option<&str>,
    message: &Message,
    task_id: &str,
) -> Result<String, TurnError> {
    match (known, &message.context_id) {
        (Some(known), Some(given)) if known != given => Err(TurnError::ContextMismatch {
            task_id: task_id.to_owned(),
            known: known.to_owned(),
            given: given.clone(),
        }),
        (Some(known), _) => Ok(known.to_owned()),
        (None, Some(given)) if !given.is_empty() => Ok(given.clone()),
        // Time-ordered, as new task ids: its conversation's rows go at the end of the store.
        (None, _) => Ok(uuid::Uuid::now_v7().to_string()),
    }
}

/// Task `task_id` as a turn of it begins: `working`, with its own messages as history.
pub(super) fn working(task_id: &str, context_id: &str, history: Vec<Message>) -> Task {
    Task {
        id: task_id.to_owned(),
        context_id: Some(context_id.to_owned()),
        status: TaskStatus::now(TaskState::Working),
        artifacts: Vec::new(),
        history: Some(history),
        metadata: None,
    }
}

/// The status message of a task whose turn is resumed from `record`: what it goes on from.
pub(super) fn resumed_note(
    record: &super::record::TurnRecord,
    task_id: &str,
    context_id: &str,
) -> Message {
    let from = record.checkpoint.as_ref().map_or_else(
        || "from the user's message (no step had completed)".to_owned(),
        |c| format!("from its last checkpoint (after step {})", c.step),
    );
    Message::from_agent(vec![daedalus_contract::Part::text(format!(
        "The runtime running this task stopped; the turn is resumed {from} (resume {}).",
        record.resumes + 1
    ))])
    .in_task(task_id, Some(context_id))
}

/// The contract Task for an outcome: completed ⇒ artifacts; failed, rejected, input- or
/// auth-required ⇒ `status.message`. A reply completes the task with the reply as its status
/// message and its parts as the output (the contract binding answers the Task, the A2A
/// bindings the message).
pub(super) fn finish(task_id: &str, context_id: &str, outcome: AgentOutcome) -> Task {
    let (state, said, artifacts) = ended_as(outcome);
    Task {
        id: task_id.to_owned(),
        context_id: Some(context_id.to_owned()),
        status: TaskStatus {
            message: said
                .map(|parts| Message::from_agent(parts).in_task(task_id, Some(context_id))),
            ..TaskStatus::now(state)
        },
        artifacts,
        history: None,
        metadata: None,
    }
}

/// How an outcome ends its task: the state, what its status message says (as the agent's
/// parts), and its artifacts. An outcome with nothing to show fails, or says why it waits.
fn ended_as(outcome: AgentOutcome) -> (TaskState, Option<Vec<Part>>, Vec<Artifact>) {
    let saying = |state, text: &str| (state, Some(vec![Part::text(text)]), Vec::new());
    match outcome {
        AgentOutcome::Completed { artifacts } if artifacts.iter().any(|a| !a.parts.is_empty()) => {
            let artifacts = artifacts
                .into_iter()
                .filter(|a| !a.parts.is_empty())
                .collect();
            (TaskState::Completed, None, artifacts)
        }
        AgentOutcome::Completed { .. } => saying(
            TaskState::Failed,
            "the agent finished without producing any output",
        ),
        AgentOutcome::Replied { parts } if !parts.is_empty() => {
            let artifact = Artifact::fresh(parts.clone()).named("response");
            (TaskState::Completed, Some(parts), vec![artifact])
        }
        AgentOutcome::Replied { .. } => {
            saying(TaskState::Failed, "the agent replied with an empty message")
        }
        AgentOutcome::Rejected { reason } => saying(TaskState::Rejected, &reason),
        AgentOutcome::InputRequired { question } if question.is_empty() => {
            saying(TaskState::InputRequired, "More input is needed.")
        }
        AgentOutcome::InputRequired { question } => {
            (TaskState::InputRequired, Some(question), Vec::new())
        }
        AgentOutcome::AuthRequired { challenge } if challenge.is_empty() => {
            saying(TaskState::AuthRequired, "Authentication is needed.")
        }
        AgentOutcome::AuthRequired { challenge } => {
            (TaskState::AuthRequired, Some(challenge), Vec::new())
        }
        AgentOutcome::Failed { reason } => saying(TaskState::Failed, &reason),
        AgentOutcome::Canceled => saying(TaskState::Canceled, "the task was canceled"),
    }
}
