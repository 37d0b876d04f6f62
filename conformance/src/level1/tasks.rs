//! Checks of the Tasks `POST /` returns: schema, state, the id rules, and the completed/failed
//! rules.

use daedalus_contract::{Schema, Task, TaskRule, TaskState, read};

use super::{Evidence, Sent, Verdict, fail, skip};
use crate::check::Outcome;
use crate::client::Exchange;

/// The typed Task of an exchange, if it has a readable one.
pub(super) fn read_task(exchange: &Exchange) -> Result<Task, String> {
    let json = exchange.json_200()?;
    read::from_value(json).map_err(|e| format!("{}: not a Task: {e}", exchange.request))
}

/// Every probe whose answer should be a Task.
fn task_probes(e: &Evidence) -> impl Iterator<Item = &Sent> {
    [&e.ping, &e.bare, &e.failure, &e.input]
        .into_iter()
        .chain(e.input_answer.as_ref())
}

/// The readable Tasks of all probes.
fn tasks(e: &Evidence) -> Vec<Task> {
    task_probes(e)
        .filter_map(|s| read_task(&s.exchange).ok())
        .collect()
}

fn no_task() -> Outcome {
    skip("no readable Task (see L1-TASK-SCHEMA)")
}

/// Schema errors other than the completed/failed rules, which have checks of their own.
pub(super) fn schema(e: &Evidence) -> Verdict {
    let mut problems = Vec::new();
    for sent in task_probes(e) {
        let json = match sent.exchange.json_200() {
            Ok(json) => json,
            Err(reason) => {
                problems.push(reason);
                continue;
            }
        };
        if let Err(errors) = Schema::Task.validate(&json) {
            let own: Vec<String> = errors
                .errors
                .iter()
                .filter(|err| {
                    !err.breaks(TaskRule::CompletedHasArtifact)
                        && !err.breaks(TaskRule::FailedHasMessage)
                })
                .map(ToString::to_string)
                .collect();
            if !own.is_empty() {
                problems.push(format!("{}: {}", sent.exchange.request, own.join("; ")));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(fail(problems.join(" | ")))
    }
}

pub(super) fn state(e: &Evidence) -> Verdict {
    let tasks = tasks(e);
    if tasks.is_empty() {
        return Err(no_task());
    }
    let allowed = [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::InputRequired,
    ];
    match tasks.iter().find(|t| !allowed.contains(&t.status.state)) {
        None => Ok(()),
        Some(t) => Err(fail(format!(
            "task {} came back {}; POST / must end completed, failed or input-required",
            t.id, t.status.state
        ))),
    }
}

pub(super) fn id_from_task_id(e: &Evidence) -> Verdict {
    let task = read_task(&e.ping.exchange).map_err(|_| no_task())?;
    let expected = e.ping.task_id.as_deref().unwrap_or_default();
    if task.id == expected {
        Ok(())
    } else {
        Err(fail(format!(
            "sent taskId {expected:?}, got a Task with id {:?}",
            task.id
        )))
    }
}

pub(super) fn id_from_message_id(e: &Evidence) -> Verdict {
    let task = read_task(&e.bare.exchange).map_err(|_| no_task())?;
    if task.id == e.bare.message_id {
        Ok(())
    } else {
        Err(fail(format!(
            "sent messageId {:?} and no taskId, got a Task with id {:?}",
            e.bare.message_id, task.id
        )))
    }
}

pub(super) fn completed_artifact(e: &Evidence) -> Verdict {
    let completed: Vec<Task> = tasks(e)
        .into_iter()
        .filter(|t| t.status.state == TaskState::Completed)
        .collect();
    if completed.is_empty() {
        return Err(skip("no task completed, so there is nothing to inspect"));
    }
    for task in completed {
        if task.artifacts.is_empty() {
            return Err(fail(format!(
                "task {} is completed with no artifacts",
                task.id
            )));
        }
        if let Some(a) = task.artifacts.iter().find(|a| a.parts.is_empty()) {
            return Err(fail(format!(
                "task {}: artifact {} has no parts",
                task.id, a.artifact_id
            )));
        }
    }
    Ok(())
}

pub(super) fn failed_message(e: &Evidence) -> Verdict {
    let failed: Vec<Task> = tasks(e)
        .into_iter()
        .filter(|t| t.status.state == TaskState::Failed)
        .collect();
    if failed.is_empty() {
        return Err(skip(
            "no task failed, not even the failure probe; nothing to inspect",
        ));
    }
    match failed
        .iter()
        .find(|t| t.status.message.as_ref().is_none_or(|m| m.parts.is_empty()))
    {
        None => Ok(()),
        Some(t) => Err(fail(format!(
            "task {} failed without a status.message",
            t.id
        ))),
    }
}

pub(super) fn context_id(e: &Evidence) -> Verdict {
    let ping = read_task(&e.ping.exchange).map_err(|_| no_task())?;
    let sent = e.ping.context_id.as_deref().unwrap_or_default();
    if ping.context_id.as_deref() != Some(sent) {
        return Err(fail(format!(
            "sent contextId {sent:?}, got {:?}",
            ping.context_id
        )));
    }
    let bare = read_task(&e.bare.exchange).map_err(|_| no_task())?;
    match bare.context_id.as_deref() {
        Some(c) if !c.is_empty() => Ok(()),
        _ => Err(fail("a message without contextId got a Task without one")),
    }
}

pub(super) fn input_continue(e: &Evidence) -> Verdict {
    let first = read_task(&e.input.exchange).map_err(|_| no_task())?;
    let Some(answer) = &e.input_answer else {
        return Err(skip(format!(
            "the input probe came back {}, not input-required",
            first.status.state
        )));
    };
    let second = read_task(&answer.exchange).map_err(|r| fail(format!("the answer: {r}")))?;
    if second.id != first.id {
        return Err(fail(format!(
            "the answer opened task {:?}, not {:?}",
            second.id, first.id
        )));
    }
    if second.context_id != first.context_id {
        return Err(fail(format!(
            "the answer moved from context {:?} to {:?}",
            first.context_id, second.context_id
        )));
    }
    if second.status.state == TaskState::InputRequired {
        return Err(fail("the task still asks for input after the answer"));
    }
    Ok(())
}
