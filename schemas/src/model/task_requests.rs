//! The task operations' requests of the standard A2A bindings: `GetTaskRequest`,
//! `ListTasksRequest`, and the id-only `CancelTaskRequest` and `SubscribeToTaskRequest`. They
//! read leniently like every type here (camelCase, snake_case aliases); on HTTP+JSON the same
//! names arrive as query parameters.

use serde::{Deserialize, Serialize};

use super::Metadata;

/// `GetTask`: a task by id, with at most `historyLength` messages of its history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// Routing only (`/{tenant}/…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
}

/// `CancelTask` and `SubscribeToTask`: a task by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    /// `CancelTask`'s free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `CancelTaskRequest`.
pub type CancelTaskRequest = TaskIdRequest;
/// `SubscribeToTaskRequest`.
pub type SubscribeToTaskRequest = TaskIdRequest;

/// `ListTasks`: every filter and page field of the spec. `status` is a `TaskState` name
/// (`TASK_STATE_WORKING`; `TASK_STATE_UNSPECIFIED` or empty for any); `statusTimestampAfter`
/// an RFC 3339 time (tasks whose status changed at or after it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, alias = "page_size", skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(
        default,
        alias = "history_length",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(
        default,
        alias = "status_timestamp_after",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_timestamp_after: Option<String>,
    #[serde(
        default,
        alias = "include_artifacts",
        skip_serializing_if = "Option::is_none"
    )]
    pub include_artifacts: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Schema;

    #[test]
    fn each_request_validates_against_the_a2a_schema_and_reads_back() {
        let list = ListTasksRequest {
            context_id: Some("c".into()),
            status: Some("TASK_STATE_WORKING".into()),
            page_size: Some(10),
            page_token: Some("t".into()),
            history_length: Some(2),
            status_timestamp_after: Some("2026-01-01T00:00:00Z".into()),
            include_artifacts: Some(true),
            ..ListTasksRequest::default()
        };
        let json = serde_json::to_value(&list).unwrap();
        Schema::A2aV1ListTasksRequest.validate(&json).unwrap();
        assert_eq!(
            crate::read::from_value::<ListTasksRequest>(json).unwrap(),
            list
        );
        let get = GetTaskRequest {
            id: "t".into(),
            history_length: Some(3),
            ..GetTaskRequest::default()
        };
        Schema::A2aV1GetTaskRequest
            .validate(&serde_json::to_value(&get).unwrap())
            .unwrap();
        let cancel = CancelTaskRequest {
            id: "t".into(),
            ..TaskIdRequest::default()
        };
        let json = serde_json::to_value(&cancel).unwrap();
        Schema::A2aV1CancelTaskRequest.validate(&json).unwrap();
        Schema::A2aV1SubscribeToTaskRequest.validate(&json).unwrap();
    }
}
