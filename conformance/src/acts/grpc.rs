//! The gRPC binding of a step: its params (ProtoJSON, as the corpus writes them) read into the
//! A2A proto's request message, the call made with the generated client, and the answer
//! written back as ProtoJSON for the assertions. A failed call's status is mapped to an HTTP
//! status as A2A §5.4 maps its errors (the corpus's binding-agnostic tests assert `status:
//! 200`), and its `ErrorInfo` reason names the error.

use std::time::Duration;

use daedalus_contract::grpc::v1;
use daedalus_contract::grpc::v1::a2a_service_client::A2aServiceClient;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

use super::corpus::Operation;
use super::dispatch::{Answer, Bound, DispatchError, Streamed, WireError};
use super::wire;

/// A client of the server's gRPC interface.
#[derive(Debug, Clone)]
pub struct GrpcDispatch {
    client: A2aServiceClient<Channel>,
    /// `authorization`, when the run carries credentials.
    authorization: Option<String>,
}

/// The HTTP status A2A §5.4 gives a gRPC status.
pub fn http_status(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::Cancelled => 499,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::Unauthenticated => 401,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    }
}

/// A failed call as the wire said it.
fn wire_error(status: &tonic::Status) -> (u16, WireError) {
    let info = status.get_error_details().error_info().cloned();
    let details = info.as_ref().map(|i| {
        json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": i.reason,
            "domain": i.domain,
            "metadata": i.metadata,
        })
    });
    let error = WireError {
        name: info
            .as_ref()
            .and_then(|i| wire::error_by_reason(&i.reason))
            .map(|row| row.name),
        code: None,
        message: status.message().to_owned(),
        data: details.clone().map(|d| Value::Array(vec![d])),
        details,
    };
    (http_status(status.code()), error)
}

fn encode<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, DispatchError> {
    serde_json::from_value(params.clone()).map_err(|e| {
        DispatchError::Unsupported(format!(
            "the params are not the proto's request message: {e}"
        ))
    })
}

fn decode(message: &impl serde::Serialize) -> Value {
    serde_json::to_value(message).unwrap_or_else(|e| Value::String(format!("unwritable: {e}")))
}

impl GrpcDispatch {
    /// A client of `interface` (`host:port`, or `http://host:port`).
    pub async fn connect(
        interface: &str,
        authorization: Option<String>,
        timeout: Duration,
    ) -> Result<Self, DispatchError> {
        // A card names a gRPC interface as `host:port`, or as a URL.
        let url = if interface.contains("://") {
            interface.to_owned()
        } else {
            format!("http://{interface}")
        };
        let channel = Channel::from_shared(url)
            .map_err(|e| DispatchError::Unreachable(e.to_string()))?
            .connect_timeout(timeout)
            .connect()
            .await
            .map_err(|e| DispatchError::Unreachable(e.to_string()))?;
        Ok(Self {
            client: A2aServiceClient::new(channel).max_decoding_message_size(usize::MAX),
            authorization,
        })
    }

    fn request<T>(&self, message: T, timeout: Option<Duration>) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.metadata_mut().insert(
            "a2a-version",
            tonic::metadata::MetadataValue::from_static("1.0"),
        );
        if let Some(value) = self.authorization.as_deref().and_then(|a| a.parse().ok()) {
            request.metadata_mut().insert("authorization", value);
        }
        if let Some(timeout) = timeout {
            request.set_timeout(timeout);
        }
        request
    }

    /// One unary call.
    pub async fn call(
        &self,
        operation: Operation,
        params: &Value,
        timeout: Duration,
    ) -> Result<Answer, DispatchError> {
        let mut client = self.client.clone();
        let t = Some(timeout);
        // One unary method: the params as its request message, its answer as ProtoJSON.
        macro_rules! unary {
            ($method:ident, $request:ty) => {{
                let m: $request = encode(params)?;
                client
                    .$method(self.request(m, t))
                    .await
                    .map(|r| decode(r.get_ref()))
            }};
        }
        let answered: Result<Value, tonic::Status> = match operation {
            Operation::SendMessage => unary!(send_message, v1::SendMessageRequest),
            Operation::GetTask => unary!(get_task, v1::GetTaskRequest),
            Operation::ListTasks => unary!(list_tasks, v1::ListTasksRequest),
            Operation::CancelTask => unary!(cancel_task, v1::CancelTaskRequest),
            Operation::GetExtendedAgentCard => {
                unary!(get_extended_agent_card, v1::GetExtendedAgentCardRequest)
            }
            Operation::SetPushNotificationConfig => unary!(
                create_task_push_notification_config,
                v1::TaskPushNotificationConfig
            ),
            Operation::GetPushNotificationConfig => unary!(
                get_task_push_notification_config,
                v1::GetTaskPushNotificationConfigRequest
            ),
            Operation::ListPushNotificationConfigs => unary!(
                list_task_push_notification_configs,
                v1::ListTaskPushNotificationConfigsRequest
            ),
            Operation::DeletePushNotificationConfig => {
                let m: v1::DeleteTaskPushNotificationConfigRequest = encode(params)?;
                client
                    .delete_task_push_notification_config(self.request(m, t))
                    .await
                    .map(|_| json!({}))
            }
            Operation::SendStreamingMessage
            | Operation::SubscribeToTask
            | Operation::GetAgentCard => {
                return Err(DispatchError::Unsupported(format!(
                    "{operation:?} is not a unary call"
                )));
            }
        };
        Ok(match answered {
            Ok(body) => Answer {
                status: 200,
                body,
                error: None,
                media_type: None,
            },
            Err(status) => {
                let (http, error) = wire_error(&status);
                Answer {
                    status: http,
                    body: Value::Null,
                    error: Some(error),
                    media_type: None,
                }
            }
        })
    }

    /// A server-streaming call: each `StreamResponse` as ProtoJSON.
    pub async fn stream(
        &self,
        operation: Operation,
        params: &Value,
        bound: Bound,
    ) -> Result<Streamed, DispatchError> {
        let mut client = self.client.clone();
        let opened = match operation {
            Operation::SendStreamingMessage => {
                let m: v1::SendMessageRequest = encode(params)?;
                client.send_streaming_message(self.request(m, None)).await
            }
            Operation::SubscribeToTask => {
                let m: v1::SubscribeToTaskRequest = encode(params)?;
                client.subscribe_to_task(self.request(m, None)).await
            }
            other => {
                return Err(DispatchError::Unsupported(format!(
                    "{other:?} is not a streaming call"
                )));
            }
        };
        let mut stream = match opened {
            Ok(response) => response.into_inner(),
            Err(status) => {
                let (http, error) = wire_error(&status);
                return Ok(Streamed {
                    status: http,
                    events: Vec::new(),
                    timed_out: false,
                    error: Some(error),
                });
            }
        };
        let mut events = Vec::new();
        let mut error = None;
        let read = async {
            while let Some(next) = stream.next().await {
                match next {
                    Ok(event) => {
                        events.push(decode(&event));
                        if bound.limit.is_some_and(|limit| events.len() >= limit) {
                            return;
                        }
                    }
                    Err(status) => {
                        error = Some(wire_error(&status).1);
                        return;
                    }
                }
            }
        };
        let timed_out = tokio::time::timeout(bound.deadline, read).await.is_err();
        Ok(Streamed {
            status: 200,
            events,
            timed_out,
            error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grpc_status_maps_to_the_http_status_of_its_a2a_errors() {
        for row in wire::ERRORS.iter().filter(|r| r.grpc.is_some()) {
            let code = match row.grpc {
                Some("NOT_FOUND") => Code::NotFound,
                Some("FAILED_PRECONDITION") => Code::FailedPrecondition,
                Some("INVALID_ARGUMENT") => Code::InvalidArgument,
                Some("INTERNAL") => Code::Internal,
                other => panic!("a status the table does not map: {other:?}"),
            };
            assert_eq!(Some(http_status(code)), row.http, "{}", row.name);
        }
    }

    #[test]
    fn a_status_with_error_info_names_its_error() {
        let details = tonic_types::ErrorDetails::with_error_info(
            "TASK_NOT_FOUND",
            "a2a-protocol.org",
            std::collections::HashMap::<String, String>::new(),
        );
        let status = tonic::Status::with_error_details(Code::NotFound, "no such task", details);
        let (http, error) = wire_error(&status);
        assert_eq!(http, 404);
        assert_eq!(error.name, Some("TaskNotFoundError"));
        assert_eq!(error.observed()["details"]["reason"], "TASK_NOT_FOUND");
    }

    #[test]
    fn params_are_read_as_protojson() {
        let request: v1::SendMessageRequest = encode(
            &json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        )
        .expect("ProtoJSON");
        assert_eq!(request.message.map(|m| m.message_id), Some("m".to_owned()));
        assert!(encode::<v1::GetTaskRequest>(&json!({"id": 7})).is_err());
    }
}
