//! `send_message` on MCP 2026-07-28, where there is no session: every call is a task of the
//! runtime's task store (one id space with the A2A bindings, the same owner rules), so any
//! replica can answer any call and nothing about the client is kept between requests beyond
//! what the stores hold.
//!
//! - **Conversation.** `shared`: everybody's (per principal when authentication is on), as on
//!   the legacy revisions. `connection`: the one the call names in `conversation_id` (an A2A
//!   context id: the same owner rules), else a new one, whose id the result's `_meta` gives.
//!   `request`: none carried over.
//! - **A question.** A turn that ends asking the user (`input-required`) answers with an
//!   `InputRequiredResult`: one form elicitation with the question, and the task id as
//!   `requestState`. The client's retry carries the answer and continues the same task.
//! - **Tasks.** A client that declares the tasks extension gets the task back at once
//!   (`CreateTaskResult`); `tasks.rs` serves `tasks/get`, `tasks/update` and
//!   `tasks/cancel` from the same store.

use daedalus_contract::{Message, Part, Role, Task};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, MetaObject, Task as McpTask,
    TaskStatus as McpTaskStatus,
};
use rmcp::service::RequestContext;

use super::Face;
use super::caller;
use super::send::{self, Prepared};
use crate::config::deployment::InstanceScope;
use crate::services::turns::{Memory, TurnRequest};

/// The `_meta` key of the result that names the conversation a `connection` call continued.
pub(super) const CONVERSATION_META: &str = "conversation_id";
/// The property of the elicitation form that carries the user's answer.
pub(super) const ANSWER_FIELD: &str = "answer";

/// A 2026-07-28 `send_message`.
pub(super) async fn send(
    face: &Face,
    call: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let prepared = match Prepared::read(face, call.arguments.unwrap_or_default()) {
        Ok(prepared) => prepared,
        Err(refused) => return refused.into(),
    };
    let turn = match call.request_state {
        None => first_turn(face, prepared, context),
        Some(task_id) => match answer_in(call.input_responses.as_ref()) {
            Answer::Given(text) => continuing(face, prepared, &task_id, text, context),
            Answer::Withheld => return withheld(face, &task_id, context).await.into(),
            Answer::Missing => {
                return send::failure(format!(
                    "the retry names task {task_id} in requestState but carries no answer: \
                     send inputResponses with the elicitation's result"
                ))
                .into();
            }
        },
    };
    if declares_tasks(context) {
        return as_task(face, turn).await;
    }
    match send::run_turn(face, turn, context).await {
        Ok(task) => respond(face, &task),
        Err(e) => send::refusal(&e).into(),
    }
}

/// How often a client is asked to poll a working task.
const POLL_INTERVAL_MS: u64 = 500;

/// A task just started, as `CreateTaskResult` names it.
fn working(task_id: &str, now: &str, face: &Face) -> McpTask {
    mcp_task(task_id, McpTaskStatus::Working, now, face)
}

pub(super) fn mcp_task(task_id: &str, status: McpTaskStatus, at: &str, face: &Face) -> McpTask {
    let ttl = u64::try_from(face.core.turns().task_ttl().as_millis()).unwrap_or(u64::MAX);
    McpTask::new(task_id, status, at, at)
        .with_ttl_ms(ttl)
        .with_poll_interval_ms(POLL_INTERVAL_MS)
}

/// Whether the request declares the tasks extension (`io.modelcontextprotocol/tasks`).
fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// The turn of a new call: its conversation by the agent's `instance_scope`.
fn first_turn(
    face: &Face,
    mut prepared: Prepared,
    context: &RequestContext<RoleServer>,
) -> TurnRequest {
    let named = prepared.conversation_id.take();
    task_turn(face, prepared, true, named, context)
}

/// The turn that continues task `task_id`, waiting for input, with the user's `answer`.
fn continuing(
    face: &Face,
    mut prepared: Prepared,
    task_id: &str,
    answer: String,
    context: &RequestContext<RoleServer>,
) -> TurnRequest {
    prepared.message = answer_message(task_id, answer);
    task_turn(face, prepared, false, None, context)
}

/// A turn continuing task `task_id` with `answer`, and nothing else from the caller (for
/// `tasks/update`).
pub(super) fn answering(
    face: &Face,
    task_id: &str,
    answer: String,
    context: &RequestContext<RoleServer>,
) -> TurnRequest {
    task_turn(
        face,
        Prepared::answer(answer_message(task_id, answer)),
        false,
        None,
        context,
    )
}

/// The A2A task turn `prepared` asks for, under the agent's `instance_scope` (the turn
/// service's rules, [`TurnRequest::scoped`]).
fn task_turn(
    face: &Face,
    prepared: Prepared,
    starts_task: bool,
    named: Option<String>,
    context: &RequestContext<RoleServer>,
) -> TurnRequest {
    prepared.turn(face, Memory::Task, context).scoped(
        face.scope(),
        starts_task,
        named,
        caller::conversation(face, context),
    )
}

fn answer_message(task_id: &str, answer: String) -> Message {
    let mut message = Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::User,
        vec![Part::text(answer)],
    );
    message.task_id = Some(task_id.to_owned());
    message
}

/// The user's answer to the question, as the client's retry carries it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Given(String),
    /// The user declined or cancelled the form.
    Withheld,
    Missing,
}

/// The answer among `responses`: the first elicitation result there (a task asks one
/// question at a time).
pub(super) fn answer_in(responses: Option<&InputResponses>) -> Answer {
    let Some(responses) = responses else {
        return Answer::Missing;
    };
    let mut results = responses
        .values()
        .filter_map(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok());
    let Some(result) = results.next() else {
        return Answer::Missing;
    };
    match result.action {
        ElicitationAction::Accept => {
            let text = result.content.as_ref().and_then(|content| match content {
                serde_json::Value::Object(fields) => fields
                    .get(ANSWER_FIELD)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned),
                serde_json::Value::String(text) => Some(text.clone()),
                _ => None,
            });
            text.map_or(Answer::Missing, Answer::Given)
        }
        _ => Answer::Withheld,
    }
}

/// The user would not answer task `task_id`'s question: the task is canceled.
async fn withheld(
    face: &Face,
    task_id: &str,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    match face
        .core
        .turns()
        .cancel(task_id, &caller::who(context))
        .await
    {
        Ok(_) => send::failure(format!(
            "the question was not answered, so task {task_id} was canceled"
        )),
        Err(e) => send::failure(e.to_string()),
    }
}

/// Starts `turn` and answers with its task at once, for the client to poll.
async fn as_task(face: &Face, turn: TurnRequest) -> CallToolResponse {
    match face.core.turns().start(turn).await {
        // The turn runs on the runtime's tracker; the handle is not needed to finish it.
        Ok(handle) => {
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let task = working(handle.task_id(), &now, face);
            CreateTaskResult::new(task).into()
        }
        Err(e) => send::refusal(&e).into(),
    }
}

/// The answer of a finished turn: a question as an `InputRequiredResult`, anything else as
/// the tool result (with the conversation's id, on a `connection` agent).
fn respond(face: &Face, task: &Task) -> CallToolResponse {
    if task.status.state.is_interrupted() {
        return InputRequiredResult::new(Some(question(task)), Some(task.id.clone())).into();
    }
    let mut result = send::answer(task);
    if face.scope() == InstanceScope::Connection
        && let Some(context_id) = &task.context_id
    {
        let mut meta = MetaObject::default();
        meta.insert(
            CONVERSATION_META.to_owned(),
            serde_json::Value::String(context_id.clone()),
        );
        result.meta = Some(meta);
    }
    result.into()
}

/// The question of a task waiting for input, as the one elicitation the client fulfils: a
/// form with one text field, [`ANSWER_FIELD`]. Keyed by the question's message id, unique
/// over the task's life.
pub(super) fn question(task: &Task) -> InputRequests {
    let text = task
        .status
        .message
        .as_ref()
        .map(Message::text)
        .unwrap_or_default();
    let key = task
        .status
        .message
        .as_ref()
        .map_or_else(|| format!("{}-input", task.id), |m| m.message_id.clone());
    let schema = ElicitationSchema::builder()
        .required_string(ANSWER_FIELD)
        .build_unchecked();
    let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: text,
        requested_schema: schema,
    });
    InputRequests::from([(key, InputRequest::Elicitation(request))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn responses(value: serde_json::Value) -> InputResponses {
        InputResponses::from([("q1".to_owned(), value)])
    }

    #[test]
    fn the_answer_is_the_form_field_of_an_accepted_elicitation() {
        let accepted = responses(json!({"action": "accept", "content": {"answer": "Lisbon"}}));
        assert_eq!(
            answer_in(Some(&accepted)),
            Answer::Given("Lisbon".to_owned())
        );
        let declined = responses(json!({"action": "decline"}));
        assert_eq!(answer_in(Some(&declined)), Answer::Withheld);
        let cancelled = responses(json!({"action": "cancel"}));
        assert_eq!(answer_in(Some(&cancelled)), Answer::Withheld);
        let empty = responses(json!({"action": "accept", "content": {"other": 1}}));
        assert_eq!(answer_in(Some(&empty)), Answer::Missing);
        assert_eq!(answer_in(None), Answer::Missing);
        let not_an_elicitation = responses(json!({"roots": []}));
        assert_eq!(answer_in(Some(&not_an_elicitation)), Answer::Missing);
    }

    #[test]
    fn a_question_is_one_form_with_an_answer_field() {
        let mut task = Task {
            id: "t1".into(),
            context_id: Some("c1".into()),
            status: daedalus_contract::TaskStatus::new(daedalus_contract::TaskState::InputRequired),
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        task.status.message = Some(Message::new(
            "m-q",
            Role::Agent,
            vec![Part::text("Which city?")],
        ));
        let wire = serde_json::to_value(question(&task)).unwrap();
        let form = &wire["m-q"];
        assert_eq!(form["method"], "elicitation/create");
        assert_eq!(form["params"]["message"], "Which city?");
        assert_eq!(form["params"]["mode"], "form");
        assert_eq!(
            form["params"]["requestedSchema"]["required"],
            json!([ANSWER_FIELD])
        );
    }
}
