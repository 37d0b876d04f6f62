//! The A2A conventions (`model/a2a`): a span per A2A request, named `{a2a.method.name}`, SERVER
//! on every binding of the agent served here and CLIENT on every call to another agent; what a
//! request's message, its task and its error add to it.
//!
//! A span is opened with what the request says at once (the method, the protocol version, the
//! agent's card); the operation records the rest as it learns it (the message, the task and
//! its state, the context as `gen_ai.conversation.id`). A streamed answer's span lasts as long
//! as its stream and ends holding the last state the stream carried ([`LastState`]).
//!
//! Each attribute is recorded once per span: a field recorded twice is exported twice, and a
//! backend may keep either.

use daedalus_contract::{AgentCard, Dialect, Message, Task, TaskState};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// An A2A operation, as `a2a.method.name` names it (A2A v1.0 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum A2aMethod {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl A2aMethod {
    pub const ALL: [Self; 11] = [
        Self::SendMessage,
        Self::SendStreamingMessage,
        Self::GetTask,
        Self::ListTasks,
        Self::CancelTask,
        Self::SubscribeToTask,
        Self::CreateTaskPushNotificationConfig,
        Self::GetTaskPushNotificationConfig,
        Self::ListTaskPushNotificationConfigs,
        Self::DeleteTaskPushNotificationConfig,
        Self::GetExtendedAgentCard,
    ];

    /// The method's name in A2A v1 (its JSON-RPC method and its gRPC method).
    pub fn name(self) -> &'static str {
        match self {
            Self::SendMessage => "SendMessage",
            Self::SendStreamingMessage => "SendStreamingMessage",
            Self::GetTask => "GetTask",
            Self::ListTasks => "ListTasks",
            Self::CancelTask => "CancelTask",
            Self::SubscribeToTask => "SubscribeToTask",
            Self::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Self::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Self::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Self::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Self::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The method a v1 name (JSON-RPC or gRPC) or a v0.3 JSON-RPC name names.
    pub fn named(name: &str) -> Option<Self> {
        let v03 = match name {
            "message/send" => Some(Self::SendMessage),
            "message/stream" => Some(Self::SendStreamingMessage),
            "tasks/get" => Some(Self::GetTask),
            "tasks/list" => Some(Self::ListTasks),
            "tasks/cancel" => Some(Self::CancelTask),
            "tasks/resubscribe" => Some(Self::SubscribeToTask),
            "tasks/pushNotificationConfig/set" => Some(Self::CreateTaskPushNotificationConfig),
            "tasks/pushNotificationConfig/get" => Some(Self::GetTaskPushNotificationConfig),
            "tasks/pushNotificationConfig/list" => Some(Self::ListTaskPushNotificationConfigs),
            "tasks/pushNotificationConfig/delete" => Some(Self::DeleteTaskPushNotificationConfig),
            "agent/getAuthenticatedExtendedCard" => Some(Self::GetExtendedAgentCard),
            _ => None,
        };
        v03.or_else(|| Self::ALL.into_iter().find(|m| m.name() == name))
    }
}

/// Which end of the request a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This runtime answers it (`a2a.server`).
    Server,
    /// This runtime asks another agent (`a2a.client`).
    Client,
}

/// One A2A span's fields; `kind` is the span kind, the rest is what the conventions name.
macro_rules! a2a_span {
    ($kind:literal, $method:expr) => {
        tracing::info_span!(
            "a2a",
            otel.name = $method,
            otel.kind = $kind,
            otel.status_code = Empty,
            a2a.method.name = $method,
            a2a.protocol.version = Empty,
            a2a.tenant = Empty,
            a2a.message.id = Empty,
            a2a.task.id = Empty,
            a2a.task.state = Empty,
            gen_ai.conversation.id = Empty,
            gen_ai.agent.name = Empty,
            gen_ai.agent.description = Empty,
            gen_ai.agent.version = Empty,
            error.type = Empty,
            server.address = Empty,
            server.port = Empty,
            trace_id = Empty,
            span_id = Empty,
        )
    };
}

/// The span of one `method` request on `side`, in protocol `version` (when the binding has
/// one), of the agent `card` describes (ours on the server side, the other's on the client
/// side). A server span continues the caller's trace ([`super::continue_trace`]); a client
/// span is a child of the current one.
pub fn span(
    side: Side,
    method: A2aMethod,
    version: Option<&str>,
    card: Option<&AgentCard>,
) -> tracing::Span {
    let span = match side {
        Side::Server => a2a_span!("server", method.name()),
        Side::Client => a2a_span!("client", method.name()),
    };
    if let Some(version) = version {
        span.record("a2a.protocol.version", version);
    }
    if let Some(card) = card {
        let non_empty = |s: &str| !s.is_empty();
        span.record("gen_ai.agent.name", card.name.as_str());
        if non_empty(&card.description) {
            span.record("gen_ai.agent.description", card.description.as_str());
        }
        if non_empty(&card.version) {
            span.record("gen_ai.agent.version", card.version.as_str());
        }
    }
    span
}

/// `TASK_STATE_*`, as `a2a.task.state` names a state.
pub fn state_name(state: TaskState) -> &'static str {
    state.as_str(Dialect::A2aV1)
}

/// The tenant the request names.
pub fn record_tenant(span: &tracing::Span, tenant: Option<&str>) {
    if let Some(tenant) = tenant.filter(|t| !t.is_empty()) {
        span.record("a2a.tenant", tenant);
    }
}

/// What the request's `message` says of itself: its id and the tasks it refers to (the task
/// and context it continues are recorded as resolved, by [`record_ids`]).
pub fn record_message(span: &tracing::Span, message: &Message) {
    span.record("a2a.message.id", message.message_id.as_str());
    if let Some(ids) = message
        .reference_task_ids
        .as_ref()
        .filter(|ids| !ids.is_empty())
    {
        let ids = ids
            .iter()
            .cloned()
            .map(opentelemetry::StringValue::from)
            .collect();
        span.set_attribute(
            "a2a.message.reference_task_ids",
            opentelemetry::Value::Array(opentelemetry::Array::String(ids)),
        );
    }
}

/// The task and the context a request or an answer names.
pub fn record_ids(span: &tracing::Span, task_id: Option<&str>, context_id: Option<&str>) {
    if let Some(task_id) = task_id.filter(|t| !t.is_empty()) {
        span.record("a2a.task.id", task_id);
    }
    if let Some(context_id) = context_id.filter(|c| !c.is_empty()) {
        span.record("gen_ai.conversation.id", context_id);
    }
}

/// The task an answer holds: its id, its context and its state.
pub fn record_task(span: &tracing::Span, task: &Task) {
    record_ids(span, Some(&task.id), task.context_id.as_deref());
    record_state(span, task.status.state);
}

/// The task's state as the answer (or the stream's latest event) has it.
pub fn record_state(span: &tracing::Span, state: TaskState) {
    span.record("a2a.task.state", state_name(state));
}

/// A streamed answer's hold on its span: the span lasts as long as the stream, and ends
/// holding the last state the stream carried.
#[derive(Debug)]
pub struct LastState {
    span: tracing::Span,
    state: Option<TaskState>,
}

impl LastState {
    /// Holds `span` until dropped.
    pub fn of(span: tracing::Span) -> Self {
        Self { span, state: None }
    }

    /// One event of the stream went by.
    pub fn saw(&mut self, event: &daedalus_contract::StreamEvent) {
        use daedalus_contract::StreamEvent;
        match event {
            StreamEvent::Task(task) => self.state = Some(task.status.state),
            StreamEvent::StatusUpdate(update) => self.state = Some(update.status.state),
            StreamEvent::ArtifactUpdate(_) => {}
        }
    }
}

impl Drop for LastState {
    fn drop(&mut self) {
        if let Some(state) = self.state {
            record_state(&self.span, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_named_as_the_conventions_and_both_protocol_versions_name_it() {
        for method in A2aMethod::ALL {
            assert_eq!(A2aMethod::named(method.name()), Some(method));
        }
        assert_eq!(
            A2aMethod::named("message/stream"),
            Some(A2aMethod::SendStreamingMessage)
        );
        assert_eq!(
            A2aMethod::named("tasks/resubscribe"),
            Some(A2aMethod::SubscribeToTask)
        );
        assert_eq!(A2aMethod::named("SendMessages"), None);
    }

    #[test]
    fn a_state_is_named_as_a2a_v1_names_it() {
        assert_eq!(state_name(TaskState::Completed), "TASK_STATE_COMPLETED");
        assert_eq!(
            state_name(TaskState::InputRequired),
            "TASK_STATE_INPUT_REQUIRED"
        );
    }
}
