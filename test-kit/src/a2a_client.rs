//! An A2A v1 JSON-RPC client for tests: send, get, list, cancel and subscribe, each answering
//! plain JSON, so a test reads as what a user does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::SseEvents;

/// A client of one runtime's A2A JSON-RPC binding.
#[derive(Debug, Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    url: String,
    /// `Authorization: Bearer` on every request, when set.
    bearer: Option<String>,
}

/// What a `CancelTask` answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Canceled {
    /// The task, as canceled (its state as it came back).
    Task(Value),
    /// A JSON-RPC error: its `data[0].reason` (`TASK_NOT_CANCELABLE`, ...) and message.
    Refused { reason: String, message: String },
}

impl A2aClient {
    /// A client of the runtime whose JSON-RPC endpoint is `url` (`http://host:port/`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.into(),
            bearer: None,
        }
    }

    /// The same client, presenting `token` as its bearer.
    #[must_use]
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    fn post(&self) -> reqwest::RequestBuilder {
        let request = self.http.post(&self.url).header("A2A-Version", "1.0");
        match &self.bearer {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `method` with `params`: the HTTP response, whatever it is.
    pub async fn send_raw(&self, method: &str, params: Value) -> reqwest::Response {
        self.post()
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("the request is sent")
    }

    /// Calls `method` with `params`; the whole JSON-RPC response.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        self.send_raw(method, params)
            .await
            .json()
            .await
            .expect("a JSON-RPC response")
    }

    /// The JSON-RPC error `reason` (`data[0].reason`) `method` answered, or `None` for a
    /// result.
    pub async fn refusal(&self, method: &str, params: Value) -> Option<String> {
        let response = self.call(method, params).await;
        response.get("error").map(|e| {
            e["data"][0]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
    }

    /// Calls `method`, expecting a result.
    async fn result(&self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        assert!(
            response.get("result").is_some(),
            "{method} answered an error: {response}"
        );
        response["result"].clone()
    }

    /// Starts a new task saying `text` and answers its id at once (`returnImmediately`).
    pub async fn start_task(&self, text: &str) -> String {
        let sent = self.result("SendMessage", send(text, None, true)).await;
        id_of(&sent["task"])
    }

    /// Sends a new task saying `text` with a webhook at `url` (inline
    /// `taskPushNotificationConfig`, `Bearer <bearer>`), returning at once: its id.
    pub async fn start_task_pushing_to(&self, text: &str, url: &str, bearer: &str) -> String {
        let mut params = send(text, None, true);
        params["configuration"]["taskPushNotificationConfig"] = json!({
            "url": url,
            "authentication": {"scheme": "Bearer", "credentials": bearer},
        });
        let sent = self.result("SendMessage", params).await;
        id_of(&sent["task"])
    }

    /// Sets up a webhook at `url` for task `id` (`CreateTaskPushNotificationConfig`): the
    /// whole response.
    pub async fn push_to(&self, id: &str, url: &str) -> Value {
        self.call(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        )
        .await
    }

    /// Sends a new task saying `text` and waits for it: the task as it ended.
    pub async fn run_task(&self, text: &str) -> Value {
        self.result("SendMessage", send(text, None, false)).await["task"].clone()
    }

    /// Sends `text` in context `context_id` as a new task and waits: the whole response.
    pub async fn send_in_context(&self, context_id: &str, text: &str) -> Value {
        let mut params = send(text, None, false);
        params["message"]["contextId"] = json!(context_id);
        self.call("SendMessage", params).await
    }

    /// Sends `text` to task `id` (an answer to its question): the whole response.
    pub async fn send_to_task(&self, id: &str, text: &str) -> Value {
        self.call("SendMessage", send(text, Some(id), false)).await
    }

    /// Sends `text` to the task `id` (an answer to its question) and waits: the task.
    pub async fn continue_task(&self, id: &str, text: &str) -> Value {
        self.result("SendMessage", send(text, Some(id), false))
            .await["task"]
            .clone()
    }

    /// Task `id` as the runtime answers `GetTask`; `None` when it does not know it.
    pub async fn get(&self, id: &str) -> Option<Value> {
        let response = self.call("GetTask", json!({"id": id})).await;
        response.get("result").cloned()
    }

    /// The state task `id` is in (`TASK_STATE_…`), or `"unknown"`.
    pub async fn state_of(&self, id: &str) -> String {
        self.get(id)
            .await
            .map_or_else(|| "unknown".to_owned(), |task| state_of(&task))
    }

    /// Cancels task `id`.
    pub async fn cancel(&self, id: &str) -> Canceled {
        let response = self.call("CancelTask", json!({"id": id})).await;
        match response.get("result") {
            Some(task) => Canceled::Task(task.clone()),
            None => Canceled::Refused {
                reason: response["error"]["data"][0]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                message: response["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            },
        }
    }

    /// Every task `ListTasks` shows, page by page: its state by id.
    pub async fn list_states(&self) -> BTreeMap<String, String> {
        let mut states = BTreeMap::new();
        let mut token = String::new();
        loop {
            let page = self
                .result("ListTasks", json!({"pageSize": 100, "pageToken": token}))
                .await;
            for task in page["tasks"].as_array().into_iter().flatten() {
                states.insert(id_of(task), state_of(task));
            }
            page["nextPageToken"]
                .as_str()
                .unwrap_or_default()
                .clone_into(&mut token);
            if token.is_empty() {
                return states;
            }
        }
    }

    /// Subscribes to task `id`: its stream of results (the Task first), as they come.
    pub async fn subscribe(&self, id: &str) -> SseEvents {
        let response = self
            .post()
            .json(
                &json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask",
                "params": {"id": id}}),
            )
            .send()
            .await
            .expect("subscribed");
        SseEvents::of(response)
    }
}

/// A `messageId` no other message of this process has: the process, its start, a count.
fn message_id() -> String {
    static SENT: AtomicU64 = AtomicU64::new(0);
    static STARTED: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let started = STARTED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    });
    format!(
        "m-{}-{started}-{}",
        std::process::id(),
        SENT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `SendMessageRequest` saying `text`, to task `task_id` if given.
fn send(text: &str, task_id: Option<&str>, return_immediately: bool) -> Value {
    let mut message = json!({
        "messageId": message_id(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    });
    if let Some(id) = task_id {
        message["taskId"] = json!(id);
    }
    json!({
        "message": message,
        "configuration": {"returnImmediately": return_immediately},
    })
}

/// A task's id.
pub fn id_of(task: &Value) -> String {
    task["id"].as_str().unwrap_or_default().to_owned()
}

/// A task's state (`TASK_STATE_…`).
pub fn state_of(task: &Value) -> String {
    task["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The state a stream result tells: a status update's, or a task's.
pub fn state_told(result: &Value) -> Option<String> {
    result["statusUpdate"]["status"]["state"]
        .as_str()
        .or(result["task"]["status"]["state"].as_str())
        .map(str::to_owned)
}

/// Whether a stream result is a final status update (v1 has no `final`: a terminal or
/// interrupted state is the end).
pub fn ends_stream(result: &Value) -> bool {
    result["statusUpdate"]["status"]["state"]
        .as_str()
        .is_some_and(|state| {
            matches!(
                state,
                "TASK_STATE_COMPLETED"
                    | "TASK_STATE_FAILED"
                    | "TASK_STATE_CANCELED"
                    | "TASK_STATE_REJECTED"
                    | "TASK_STATE_INPUT_REQUIRED"
                    | "TASK_STATE_AUTH_REQUIRED"
            )
        })
}
