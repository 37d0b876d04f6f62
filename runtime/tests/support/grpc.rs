//! A client of the runtime's A2A gRPC binding, as a test uses it: the generated client over a
//! tonic channel to the runtime's port, each call carrying `a2a-version: 1.0`.

use daedalus_contract::grpc::v1;
use daedalus_contract::grpc::v1::a2a_service_client::A2aServiceClient;
use tonic::transport::Channel;

/// The generated `A2AService` client.
pub type Client = A2aServiceClient<Channel>;

/// A client of the runtime at `url` (`http://127.0.0.1:port`): gRPC on the HTTP port.
pub async fn connect(url: &str) -> Client {
    let channel = Channel::from_shared(url.to_owned())
        .expect("a URL")
        .connect()
        .await
        .expect("the gRPC port answers");
    A2aServiceClient::new(channel).max_decoding_message_size(usize::MAX)
}

/// A client whose HTTP/2 windows are `bytes` (the protocol's default is 64 KiB; hyper's client
/// asks for megabytes): a reader that stops reading holds the server's writes sooner.
pub async fn connect_with_window(url: &str, bytes: u32) -> Client {
    let channel = Channel::from_shared(url.to_owned())
        .expect("a URL")
        .initial_stream_window_size(bytes)
        .initial_connection_window_size(bytes)
        .connect()
        .await
        .expect("the gRPC port answers");
    A2aServiceClient::new(channel).max_decoding_message_size(usize::MAX)
}

/// `message` as a call of A2A 1.0.
pub fn call<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

/// A user's text message `id`, as a `SendMessageRequest`.
pub fn send(id: &str, text: &str) -> v1::SendMessageRequest {
    v1::SendMessageRequest::text(id, text)
}

/// The same, returning at once with the task working.
pub fn send_at_once(id: &str, text: &str) -> v1::SendMessageRequest {
    let mut request = send(id, text);
    request.configuration = Some(v1::SendMessageConfiguration {
        return_immediately: true,
        ..Default::default()
    });
    request
}

/// The task a `SendMessage` answered.
pub fn task_of(response: v1::SendMessageResponse) -> v1::Task {
    match response.payload {
        Some(v1::send_message_response::Payload::Task(task)) => task,
        other => panic!("a task, not {other:?}"),
    }
}

/// A task's state.
pub fn state(task: &v1::Task) -> v1::TaskState {
    task.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
}

/// The `ErrorInfo` reason and domain of a refused call.
pub fn reason(status: &tonic::Status) -> (String, String) {
    use tonic_types::StatusExt;
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("an ErrorInfo in {status:?}"));
    (info.reason, info.domain)
}

/// What a stream said: each response's kind (`task`, `status`, `artifact`, `message`), the
/// answer's text as a reader rebuilds it (a chunk with `append: false` starts it over), and the
/// last state.
#[derive(Debug, Default)]
pub struct Heard {
    pub kinds: Vec<&'static str>,
    pub text: String,
    pub state: Option<v1::TaskState>,
}

impl Heard {
    pub fn hear(&mut self, response: v1::StreamResponse) {
        use v1::stream_response::Payload;
        match response.payload {
            Some(Payload::Task(task)) => {
                self.kinds.push("task");
                self.state = Some(state(&task));
            }
            Some(Payload::StatusUpdate(update)) => {
                self.kinds.push("status");
                self.state = update.status.as_ref().map(v1::TaskStatus::state);
            }
            Some(Payload::ArtifactUpdate(update)) => {
                self.kinds.push("artifact");
                if !update.append {
                    self.text.clear();
                }
                for part in update.artifact.map(|a| a.parts).unwrap_or_default() {
                    if let Some(v1::part::Content::Text(text)) = part.content {
                        self.text.push_str(&text);
                    }
                }
            }
            Some(Payload::Message(_)) => self.kinds.push("message"),
            None => self.kinds.push("empty"),
        }
    }
}

/// Reads `stream` to its end.
pub async fn hear_all(mut stream: tonic::Streaming<v1::StreamResponse>) -> Heard {
    let mut heard = Heard::default();
    while let Some(response) = stream.message().await.expect("the stream goes on") {
        heard.hear(response);
    }
    heard
}
