//! The typed model of the contract and of A2A v1.
//!
//! Field names follow the contract dialect (camelCase). Every struct reads leniently (see
//! [`crate::read`]) and writes the contract dialect (see [`crate::write`]).

mod a2a_error;
mod card;
mod compaction;
mod enums;
mod error_body;
mod jsonrpc;
mod manifest;
mod message;
mod part;
mod push;
mod rate_limit;
mod rebuild;
pub mod registry;
mod request;
mod response;
mod stream;
mod task;
mod task_requests;

pub use a2a_error::{
    A2aError, A2aErrorKind, ERROR_DOMAIN, ERROR_INFO_TYPE, ErrorInfo, JsonRpcError,
    OWN_ERROR_DOMAIN, StatusBody, StatusError,
};
pub use card::{
    AgentCapabilities, AgentCard, AgentCardSignature, AgentInterface, AgentProvider, AgentSkill,
};
pub use compaction::{COMPACTION_KEY, Compaction, CompactionStrategy};
pub use enums::{Role, TaskState};
pub use error_body::{ErrorBody, ErrorDetail};
pub use jsonrpc::{JsonRpcId, JsonRpcMarker, JsonRpcOutcome, JsonRpcRequest, JsonRpcResponse};
pub use manifest::{ManifestCapabilities, ManifestRuntime, ManifestServer, RuntimeContract};
pub use message::Message;
pub use part::{Part, PartContent};
pub use push::{
    AuthenticationInfo, ListPushConfigsRequest, ListPushConfigsResponse, PushConfigRequest,
    TaskPushNotificationConfig,
};
pub use rate_limit::{RateLimit, rate_limit_fields};
pub use rebuild::{RebuildError, TaskRebuilder};
pub use request::{SendMessageConfiguration, SendMessageRequest};
pub use response::{ListTasksResponse, SendMessageResponse};
pub use stream::{
    RETRY_ELSEWHERE, StreamEvent, StreamResponse, TaskArtifactUpdateEvent, TaskStatusUpdateEvent,
};
pub use task::{Artifact, Task, TaskStatus};
pub use task_requests::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SubscribeToTaskRequest, TaskIdRequest,
};

/// Free-form metadata: a JSON object, carried through untouched.
pub type Metadata = serde_json::Map<String, serde_json::Value>;
