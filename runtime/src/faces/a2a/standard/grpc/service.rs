//! `A2AService` over the shared A2A operations: each method reads its proto message as the
//! model type (through the message's ProtoJSON, [`daedalus_contract::grpc::from_proto`]), runs
//! the operation the JSON-RPC and HTTP+JSON bindings run, and writes the answer back as its
//! proto message. Nothing is decided here.
//!
//! The call's metadata are its headers: `a2a-version` is checked as `A2A-Version` is (§3.6),
//! `traceparent` joins the trace, `authorization` was checked before the call got here (the
//! [`Caller`] rides in the request's extensions), and a request's `tenant` narrows the caller
//! as the HTTP+JSON path's does.

use std::pin::Pin;

use axum::http::{HeaderMap, Uri};
use daedalus_contract::grpc::v1::a2a_service_server::A2aService;
use daedalus_contract::grpc::{from_proto, to_proto, v1, well_known};
use daedalus_contract::write::a2a_v1;
use daedalus_contract::{
    A2aError, A2aErrorKind, GetTaskRequest, ListPushConfigsRequest, ListTasksRequest,
    PushConfigRequest, SendMessageRequest, TaskPushNotificationConfig,
};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::{Request, Response, Status};

use super::status::status;
use crate::faces::a2a::events::Events;
use crate::faces::a2a::{A2aFace, operations};
use crate::platform::identity::Caller;

/// A server stream of the binding: the Task first, then its events, until the final one.
type EventStream = Pin<Box<dyn Stream<Item = Result<v1::StreamResponse, Status>> + Send>>;

/// The service over one A2A face's state (its agent, its card).
#[derive(Debug, Clone)]
pub(super) struct GrpcFace {
    state: A2aFace,
}

impl GrpcFace {
    pub(super) fn new(state: A2aFace) -> Self {
        Self { state }
    }
}

/// What a call brings besides its message.
struct Call {
    /// The metadata, as the headers they came in.
    headers: HeaderMap,
    caller: Caller,
}

/// The proto requests that name a tenant.
trait Tenanted {
    fn tenant(&self) -> &str;
}

macro_rules! tenanted {
    ($($message:ty),* $(,)?) => {
        $(impl Tenanted for $message {
            fn tenant(&self) -> &str {
                &self.tenant
            }
        })*
    };
}

tenanted!(
    v1::SendMessageRequest,
    v1::GetTaskRequest,
    v1::ListTasksRequest,
    v1::CancelTaskRequest,
    v1::SubscribeToTaskRequest,
    v1::TaskPushNotificationConfig,
    v1::GetTaskPushNotificationConfigRequest,
    v1::ListTaskPushNotificationConfigsRequest,
    v1::DeleteTaskPushNotificationConfigRequest,
    v1::GetExtendedAgentCardRequest,
);

/// The call's version checked, and its caller in the tenant it names.
fn call<M: Tenanted>(request: &Request<M>) -> Result<Call, Status> {
    let headers = request.metadata().clone().into_headers();
    operations::check_version(&headers, &Uri::default()).map_err(|e| status(&e))?;
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        // The route's authentication layer always leaves one.
        return Err(status(&A2aError::new(
            A2aErrorKind::Internal,
            "the call reached the service unauthenticated",
        )));
    };
    let caller = caller
        .in_tenant(Some(request.get_ref().tenant()))
        .map_err(|_| {
            status(&A2aError::new(
                A2aErrorKind::PermissionDenied,
                crate::platform::identity::Refusal::Tenant.to_string(),
            ))
        })?;
    Ok(Call { headers, caller })
}

/// A request message as the model type the operations take.
fn read<P: Serialize, T: DeserializeOwned>(message: &P) -> Result<T, Status> {
    from_proto(message).map_err(|e| {
        status(&A2aError::new(
            A2aErrorKind::InvalidParams,
            format!("Invalid parameters: {e}"),
        ))
    })
}

/// An answer as its proto message (through its A2A v1 JSON, the message's ProtoJSON: the one
/// mapping between them); one that has no such message is an internal error.
fn write<P: DeserializeOwned>(answer: &impl Serialize) -> Result<P, Status> {
    to_proto(answer).map_err(|e| {
        tracing::error!(error = %e, "an answer has no proto form");
        status(&A2aError::new(
            A2aErrorKind::Internal,
            "the answer could not be written as its proto message",
        ))
    })
}

fn event(event: &daedalus_contract::StreamResponse) -> Result<v1::StreamResponse, Status> {
    write(&a2a_v1::of(event))
}

#[tonic::async_trait]
impl A2aService for GrpcFace {
    async fn send_message(
        &self,
        request: Request<v1::SendMessageRequest>,
    ) -> Result<Response<v1::SendMessageResponse>, Status> {
        let call = call(&request)?;
        let params: SendMessageRequest = read(request.get_ref())?;
        let answer = operations::send_message(&self.state, &call.headers, &call.caller, params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&a2a_v1::of(&answer))?))
    }

    type SendStreamingMessageStream = EventStream;

    async fn send_streaming_message(
        &self,
        request: Request<v1::SendMessageRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let call = call(&request)?;
        let params: SendMessageRequest = read(request.get_ref())?;
        let (handle, inflight) =
            operations::start_stream(&self.state, &call.headers, &call.caller, params)
                .await
                .map_err(|e| status(&e))?;
        let Some(events) = Events::answering(handle) else {
            return Err(Status::internal("the turn's events were taken"));
        };
        Ok(Response::new(events.until_final(inflight, event).boxed()))
    }

    async fn get_task(
        &self,
        request: Request<v1::GetTaskRequest>,
    ) -> Result<Response<v1::Task>, Status> {
        let call = call(&request)?;
        let params: GetTaskRequest = read(request.get_ref())?;
        let task = operations::get_task(&self.state, &call.caller, &params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&a2a_v1::of(&task))?))
    }

    async fn list_tasks(
        &self,
        request: Request<v1::ListTasksRequest>,
    ) -> Result<Response<v1::ListTasksResponse>, Status> {
        let call = call(&request)?;
        let params: ListTasksRequest = read(request.get_ref())?;
        let page = operations::list_tasks(&self.state, &call.caller, params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&a2a_v1::of(&page))?))
    }

    async fn cancel_task(
        &self,
        request: Request<v1::CancelTaskRequest>,
    ) -> Result<Response<v1::Task>, Status> {
        let call = call(&request)?;
        let task = operations::cancel_task(&self.state, &call.caller, &request.get_ref().id)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&a2a_v1::of(&task))?))
    }

    type SubscribeToTaskStream = EventStream;

    async fn subscribe_to_task(
        &self,
        request: Request<v1::SubscribeToTaskRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let call = call(&request)?;
        let (task, subscription, inflight) =
            operations::subscribe(&self.state, &call.caller, &request.get_ref().id)
                .await
                .map_err(|e| status(&e))?;
        let events = Events::of_task(task, subscription);
        Ok(Response::new(events.until_final(inflight, event).boxed()))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<v1::TaskPushNotificationConfig>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        let call = call(&request)?;
        let config: TaskPushNotificationConfig = read(request.get_ref())?;
        let task_id = config.task_id.clone();
        let kept = operations::create_push_config(&self.state, &call.caller, &task_id, config)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&kept)?))
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<v1::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        let call = call(&request)?;
        let params: PushConfigRequest = read(request.get_ref())?;
        let config = operations::get_push_config(&self.state, &call.caller, &params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&config)?))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<v1::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<v1::ListTaskPushNotificationConfigsResponse>, Status> {
        let call = call(&request)?;
        let params: ListPushConfigsRequest = read(request.get_ref())?;
        let page = operations::list_push_configs(&self.state, &call.caller, &params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(write(&page)?))
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<v1::GetExtendedAgentCardRequest>,
    ) -> Result<Response<v1::AgentCard>, Status> {
        call(&request)?;
        let card = operations::extended_card(&self.state).map_err(|e| status(&e))?;
        Ok(Response::new(write(&a2a_v1::of(&*card))?))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<v1::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<well_known::Empty>, Status> {
        let call = call(&request)?;
        let params: PushConfigRequest = read(request.get_ref())?;
        operations::delete_push_config(&self.state, &call.caller, &params)
            .await
            .map_err(|e| status(&e))?;
        Ok(Response::new(well_known::Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    /// A value with no JSON form.
    struct Unwritable;

    impl Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no JSON form"))
        }
    }

    #[test]
    fn an_answer_that_cannot_be_written_is_an_internal_status_not_an_empty_message() {
        let Err(refused) = write::<v1::Task>(&Unwritable) else {
            panic!("a default Task stands for an answer that cannot be written");
        };
        assert_eq!(refused.code(), Code::Internal);
    }

    #[test]
    fn an_answer_whose_json_is_not_the_message_is_an_internal_status() {
        let not_a_task = serde_json::json!({"id": ["t-1"], "status": "done"});
        let Err(refused) = write::<v1::Task>(&not_a_task) else {
            panic!("a JSON that is not a Task became one");
        };
        assert_eq!(refused.code(), Code::Internal);
    }
}
