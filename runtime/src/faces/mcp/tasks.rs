//! MCP's tasks extension (`io.modelcontextprotocol/tasks`) over the runtime's task store:
//! `tasks/get`, `tasks/update` and `tasks/cancel` are the A2A task of the same id, read,
//! continued and canceled through the turn service with the A2A bindings' owner rules (a task
//! the caller may not see is not found). Cancel stops the turn at every hop, as `CancelTask`
//! does.

use daedalus_contract::{Task, TaskState};
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CancelTaskParams, DetailedTask, GetTaskParams, GetTaskResult, TaskPayload, UpdateTaskParams,
};
use rmcp::service::RequestContext;

use super::stateless::{self, Answer};
use super::{Face, caller, send};
use crate::services::turns::CancelError;

fn not_found(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("task {task_id} not found"), None)
}

/// `tasks/get`: the task as it stands, on whichever replica ran it.
pub(super) async fn get(
    face: &Face,
    params: GetTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, ErrorData> {
    let task = face
        .core
        .turns()
        .find_task(&params.task_id, &caller::who(context))
        .await
        .ok_or_else(|| not_found(&params.task_id))?;
    Ok(GetTaskResult::new(detailed(&task, face)))
}

/// `task` as the tasks extension shows it: a finished turn's answer (a failure included) is
/// the `completed` task's `CallToolResult`, as the call itself would have answered.
fn detailed(task: &Task, face: &Face) -> DetailedTask {
    let payload = match task.status.state {
        TaskState::Submitted | TaskState::Working => TaskPayload::Working,
        TaskState::InputRequired | TaskState::AuthRequired => TaskPayload::InputRequired {
            input_requests: stateless::question(task),
        },
        TaskState::Canceled => TaskPayload::Cancelled,
        TaskState::Completed | TaskState::Failed | TaskState::Rejected => {
            let result = serde_json::to_value(send::answer(task))
                .ok()
                .and_then(|value| match value {
                    serde_json::Value::Object(fields) => Some(fields),
                    _ => None,
                })
                .unwrap_or_default();
            TaskPayload::Completed { result }
        }
    };
    let at =
        task.status.timestamp.clone().unwrap_or_else(|| {
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        });
    DetailedTask::new(
        stateless::mcp_task(&task.id, payload.status(), &at, face),
        payload,
    )
}

/// `tasks/update`: the answer to a waiting task's question; the task goes on in the
/// background, for the client to poll.
pub(super) async fn update(
    face: &Face,
    params: UpdateTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    let task_id = params.task_id;
    let answer = match stateless::answer_in(Some(&params.input_responses)) {
        Answer::Given(text) => text,
        Answer::Withheld => {
            return cancel_task(face, &task_id, context).await;
        }
        Answer::Missing => {
            return Err(ErrorData::invalid_params(
                format!(
                    "inputResponses for task {task_id} carry no answer: send the elicitation's result"
                ),
                None,
            ));
        }
    };
    let turn = stateless::answering(face, &task_id, answer, context);
    match face.core.turns().start(turn).await {
        Ok(_running) => Ok(()),
        Err(e) if e.kind() == crate::services::turns::TurnErrorKind::NotFound => {
            Err(not_found(&task_id))
        }
        Err(e) => Err(ErrorData::invalid_params(e.to_string(), None)),
    }
}

/// `tasks/cancel`: as A2A's `CancelTask`.
pub(super) async fn cancel(
    face: &Face,
    params: CancelTaskParams,
    context: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    cancel_task(face, &params.task_id, context).await
}

async fn cancel_task(
    face: &Face,
    task_id: &str,
    context: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    match face
        .core
        .turns()
        .cancel(task_id, &caller::who(context))
        .await
    {
        Ok(_) => Ok(()),
        Err(CancelError::NotFound(id)) => Err(not_found(&id)),
        Err(e @ CancelError::NotCancelable { .. }) => {
            Err(ErrorData::invalid_params(e.to_string(), None))
        }
        Err(e @ CancelError::Unsettled { .. }) => {
            Err(ErrorData::internal_error(e.to_string(), None))
        }
    }
}
