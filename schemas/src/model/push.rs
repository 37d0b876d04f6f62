//! Push notifications (A2A §4.3, §9.4.7): a task's webhook config
//! (`TaskPushNotificationConfig`) and the requests and answers of its four operations.
//!
//! Written in A2A v1.0.1's flat form (`{id, taskId, url, token, authentication}`); read
//! leniently: camelCase or snake_case, and v1.0.0's nested `pushNotificationConfig` too.

use serde::{Deserialize, Serialize};

/// How the agent authenticates to a webhook: `Authorization: <scheme> <credentials>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AuthenticationIn")]
pub struct AuthenticationInfo {
    /// An HTTP authentication scheme (`Bearer`, `Basic`, ...).
    pub scheme: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credentials: String,
}

/// A task's webhook: where its updates are POSTed, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "ConfigIn")]
pub struct TaskPushNotificationConfig {
    /// Routing only (`/{tenant}/…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The config's id among the task's (the server names one the client left empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The task it belongs to (empty inside a `SendMessage` configuration).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    pub url: String,
    /// A token the webhook can check (`X-A2A-Notification-Token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// `GetTaskPushNotificationConfig` and `DeleteTaskPushNotificationConfig`: one config of a task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    #[serde(default)]
    pub id: String,
}

/// `ListTaskPushNotificationConfigs`: a task's configs, a page at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "page_size", skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// What `ListTaskPushNotificationConfigs` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    /// The next page's token; empty on the last page.
    #[serde(default)]
    pub next_page_token: String,
}

/// Every spelling of authentication the reader takes: v1's `scheme`, v0.3's `schemes`.
#[derive(Deserialize)]
struct AuthenticationIn {
    #[serde(default)]
    scheme: Option<String>,
    #[serde(default)]
    schemes: Option<Vec<String>>,
    #[serde(default)]
    credentials: Option<String>,
}

impl TryFrom<AuthenticationIn> for AuthenticationInfo {
    type Error = String;

    fn try_from(a: AuthenticationIn) -> Result<Self, String> {
        let scheme = a
            .scheme
            .or_else(|| a.schemes.and_then(|s| s.into_iter().next()))
            .filter(|s| !s.trim().is_empty())
            .ok_or("authentication.scheme is required")?;
        Ok(Self {
            scheme,
            credentials: a.credentials.unwrap_or_default(),
        })
    }
}

/// Every spelling of a config the reader takes.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigIn {
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, alias = "task_id")]
    task_id: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    authentication: Option<AuthenticationInfo>,
    /// v1.0.0 (and v0.3): the config nested under `pushNotificationConfig`.
    #[serde(default, alias = "push_notification_config")]
    push_notification_config: Option<Box<ConfigIn>>,
}

impl TryFrom<ConfigIn> for TaskPushNotificationConfig {
    type Error = String;

    fn try_from(c: ConfigIn) -> Result<Self, String> {
        let nested = c.push_notification_config.map(|n| *n);
        let pick = |outer: Option<String>, inner: Option<String>| outer.or(inner);
        let (n_id, n_url, n_token, n_auth) = match nested {
            Some(n) => (n.id, n.url, n.token, n.authentication),
            None => (None, None, None, None),
        };
        let url = pick(c.url, n_url)
            .filter(|u| !u.trim().is_empty())
            .ok_or("url is required")?;
        Ok(Self {
            tenant: c.tenant.filter(|t| !t.is_empty()),
            id: pick(c.id, n_id).unwrap_or_default(),
            task_id: c.task_id.unwrap_or_default(),
            url,
            token: pick(c.token, n_token).filter(|t| !t.is_empty()),
            authentication: c.authentication.or(n_auth),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_the_flat_the_nested_and_the_snake_case_forms_and_writes_the_flat_one() {
        let flat: TaskPushNotificationConfig = serde_json::from_value(json!({
            "id": "c-1", "taskId": "t-1", "url": "https://hook.example/a", "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "s3cret"}
        }))
        .unwrap();
        let snake: TaskPushNotificationConfig = serde_json::from_value(json!({
            "id": "c-1", "task_id": "t-1", "url": "https://hook.example/a", "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "s3cret"}
        }))
        .unwrap();
        let nested: TaskPushNotificationConfig = serde_json::from_value(json!({
            "taskId": "t-1",
            "pushNotificationConfig": {"id": "c-1", "url": "https://hook.example/a",
                "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}
        }))
        .unwrap();
        assert_eq!(flat, snake);
        assert_eq!(flat, nested);
        assert_eq!(
            serde_json::to_value(&flat).unwrap(),
            json!({"id": "c-1", "taskId": "t-1", "url": "https://hook.example/a",
                "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "s3cret"}})
        );
    }

    #[test]
    fn a_config_without_a_url_or_a_scheme_is_refused() {
        let no_url = serde_json::from_value::<TaskPushNotificationConfig>(json!({"id": "c"}));
        assert!(no_url.unwrap_err().to_string().contains("url is required"));
        let no_scheme = serde_json::from_value::<TaskPushNotificationConfig>(
            json!({"url": "https://h/", "authentication": {"credentials": "x"}}),
        );
        assert!(
            no_scheme
                .unwrap_err()
                .to_string()
                .contains("authentication.scheme")
        );
    }
}
