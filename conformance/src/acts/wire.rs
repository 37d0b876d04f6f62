//! Where the corpus's abstract names meet each binding, as the released specification maps
//! them (A2A v1.0 §5.3 methods, §5.4 errors): an operation's JSON-RPC method, gRPC method and
//! HTTP+JSON route; an error's JSON-RPC code, gRPC status, HTTP status and `ErrorInfo`
//! reason. Where the corpus's own spelling differs (`set_push_notification_config`,
//! `ExtendedCardNotSupportedError`, `StreamingNotSupportedError`), the row says which A2A name
//! answers it. Also the one reshaping of a step's params the request messages need.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::corpus::Operation;

/// How one operation travels on each binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The JSON-RPC method and the gRPC method (the same name in A2A v1).
    pub method: &'static str,
    pub http_method: &'static str,
    /// Under the interface's URL; `{name}` is a param moved out of the body.
    pub path: &'static str,
}

/// The agent card's well-known path.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The route of `operation` (the card has none: it is read over plain HTTP on every binding).
pub fn route(operation: Operation) -> Option<Route> {
    let r = |method, http_method, path| {
        Some(Route {
            method,
            http_method,
            path,
        })
    };
    match operation {
        Operation::SendMessage => r("SendMessage", "POST", "/message:send"),
        Operation::SendStreamingMessage => r("SendStreamingMessage", "POST", "/message:stream"),
        Operation::GetTask => r("GetTask", "GET", "/tasks/{id}"),
        Operation::ListTasks => r("ListTasks", "GET", "/tasks"),
        Operation::CancelTask => r("CancelTask", "POST", "/tasks/{id}:cancel"),
        Operation::SubscribeToTask => r("SubscribeToTask", "POST", "/tasks/{id}:subscribe"),
        Operation::GetExtendedAgentCard => r("GetExtendedAgentCard", "GET", "/extendedAgentCard"),
        Operation::SetPushNotificationConfig => r(
            "CreateTaskPushNotificationConfig",
            "POST",
            "/tasks/{taskId}/pushNotificationConfigs",
        ),
        Operation::GetPushNotificationConfig => r(
            "GetTaskPushNotificationConfig",
            "GET",
            "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ),
        Operation::ListPushNotificationConfigs => r(
            "ListTaskPushNotificationConfigs",
            "GET",
            "/tasks/{taskId}/pushNotificationConfigs",
        ),
        Operation::DeletePushNotificationConfig => r(
            "DeleteTaskPushNotificationConfig",
            "DELETE",
            "/tasks/{taskId}/pushNotificationConfigs/{id}",
        ),
        Operation::GetAgentCard => None,
    }
}

/// `get_agent_card` with `extended: true` is the extended card (the flag is the corpus's
/// selector, not a field of the request).
pub fn resolve(operation: Operation, params: Value) -> (Operation, Value) {
    match params {
        Value::Object(mut params)
            if operation == Operation::GetAgentCard
                && params.get("extended") == Some(&Value::Bool(true)) =>
        {
            params.remove("extended");
            (Operation::GetExtendedAgentCard, Value::Object(params))
        }
        params => (operation, params),
    }
}

/// `route.path` with its params filled in (percent-encoded), and the params left for the body
/// or the query.
pub fn fill_path(route: &Route, params: &Value) -> Result<(String, Map<String, Value>), String> {
    let mut rest = params.as_object().cloned().unwrap_or_default();
    let mut path = String::new();
    let mut template = route.path;
    while let Some(open) = template.find('{') {
        let close = template[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or("a broken route")?;
        let name = &template[open + 1..close];
        let value = rest
            .remove(name)
            .ok_or_else(|| format!("{} needs the param {name}", route.path))?;
        let text = match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        path.push_str(&template[..open]);
        path.push_str(&encode_segment(&text));
        template = &template[close + 1..];
    }
    path.push_str(template);
    Ok((path, rest))
}

/// `text` as one path segment.
pub fn encode_segment(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The step's params shaped as the operation's request message: a send's `taskId` and
/// `contextId` go on its message (they are the message's fields); a push config given nested
/// under `pushNotificationConfig` is the config itself (the request message is the config).
pub fn adapt(operation: Operation, params: Value) -> Value {
    let Value::Object(mut params) = params else {
        return params;
    };
    match operation {
        Operation::SendMessage | Operation::SendStreamingMessage => {
            if let Some(Value::Object(message)) = params.get_mut("message").map(Value::take) {
                let mut message = message;
                for key in ["taskId", "contextId"] {
                    if let Some(value) = params.remove(key) {
                        message.entry(key).or_insert(value);
                    }
                }
                params.insert("message".to_owned(), Value::Object(message));
            }
        }
        Operation::SetPushNotificationConfig => {
            if let Some(Value::Object(nested)) = params.remove("pushNotificationConfig") {
                for (key, value) in nested {
                    params.entry(key).or_insert(value);
                }
            }
        }
        _ => {}
    }
    Value::Object(params)
}

/// An A2A error as each binding says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorRow {
    /// The A2A name (what a wire error is reported as).
    pub name: &'static str,
    pub jsonrpc_code: i64,
    /// gRPC status name, HTTP status and `ErrorInfo` reason; none for the JSON-RPC-only errors.
    pub grpc: Option<&'static str>,
    pub http: Option<u16>,
    pub reason: Option<&'static str>,
}

const fn a2a(
    name: &'static str,
    jsonrpc_code: i64,
    grpc: &'static str,
    http: u16,
    reason: &'static str,
) -> ErrorRow {
    ErrorRow {
        name,
        jsonrpc_code,
        grpc: Some(grpc),
        http: Some(http),
        reason: Some(reason),
    }
}

const fn jsonrpc_only(name: &'static str, jsonrpc_code: i64) -> ErrorRow {
    ErrorRow {
        name,
        jsonrpc_code,
        grpc: None,
        http: None,
        reason: None,
    }
}

/// A2A v1.0 §5.4, and the standard JSON-RPC errors of §9.5.
pub const ERRORS: [ErrorRow; 14] = [
    a2a(
        "TaskNotFoundError",
        -32001,
        "NOT_FOUND",
        404,
        "TASK_NOT_FOUND",
    ),
    a2a(
        "TaskNotCancelableError",
        -32002,
        "FAILED_PRECONDITION",
        400,
        "TASK_NOT_CANCELABLE",
    ),
    a2a(
        "PushNotificationNotSupportedError",
        -32003,
        "FAILED_PRECONDITION",
        400,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    ),
    a2a(
        "UnsupportedOperationError",
        -32004,
        "FAILED_PRECONDITION",
        400,
        "UNSUPPORTED_OPERATION",
    ),
    a2a(
        "ContentTypeNotSupportedError",
        -32005,
        "INVALID_ARGUMENT",
        400,
        "CONTENT_TYPE_NOT_SUPPORTED",
    ),
    a2a(
        "InvalidAgentResponseError",
        -32006,
        "INTERNAL",
        500,
        "INVALID_AGENT_RESPONSE",
    ),
    a2a(
        "ExtendedAgentCardNotConfiguredError",
        -32007,
        "FAILED_PRECONDITION",
        400,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    ),
    a2a(
        "ExtensionSupportRequiredError",
        -32008,
        "FAILED_PRECONDITION",
        400,
        "EXTENSION_SUPPORT_REQUIRED",
    ),
    a2a(
        "VersionNotSupportedError",
        -32009,
        "FAILED_PRECONDITION",
        400,
        "VERSION_NOT_SUPPORTED",
    ),
    jsonrpc_only("JSONParseError", -32700),
    jsonrpc_only("InvalidRequestError", -32600),
    jsonrpc_only("MethodNotFoundError", -32601),
    jsonrpc_only("InvalidParamsError", -32602),
    jsonrpc_only("InternalError", -32603),
];

/// The corpus's names for A2A errors that A2A spells otherwise.
const ALIASES: [(&str, &str); 3] = [
    (
        "ExtendedCardNotSupportedError",
        "ExtendedAgentCardNotConfiguredError",
    ),
    // A server that cannot stream answers UnsupportedOperationError (A2A §3.3.2).
    ("StreamingNotSupportedError", "UnsupportedOperationError"),
    ("JSONRPCParseError", "JSONParseError"),
];

/// The A2A name of the error the corpus calls `name`.
pub fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, a2a)| a2a)
}

/// The A2A error a JSON-RPC code names.
pub fn error_by_code(code: i64) -> Option<&'static ErrorRow> {
    ERRORS.iter().find(|row| row.jsonrpc_code == code)
}

/// The A2A error an `ErrorInfo` reason names.
pub fn error_by_reason(reason: &str) -> Option<&'static ErrorRow> {
    ERRORS.iter().find(|row| row.reason == Some(reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_route_takes_its_params_out_of_the_body_encoded() {
        let route = route(Operation::GetPushNotificationConfig).expect("a route");
        let (path, rest) = fill_path(
            &route,
            &json!({"taskId": "t/1", "id": "c 2", "tenant": "x"}),
        )
        .expect("filled");
        assert_eq!(path, "/tasks/t%2F1/pushNotificationConfigs/c%202");
        assert_eq!(Value::Object(rest), json!({"tenant": "x"}));
        assert!(
            fill_path(&route, &json!({"taskId": "t"})).is_err(),
            "a missing param is named"
        );
        assert_eq!(route.method, "GetTaskPushNotificationConfig");
        assert!(super::route(Operation::GetAgentCard).is_none());
    }

    #[test]
    fn params_are_shaped_as_the_request_message() {
        let send = adapt(
            Operation::SendMessage,
            json!({"taskId": "t", "message": {"role": "ROLE_USER"}, "configuration": {}}),
        );
        assert_eq!(
            send,
            json!({"message": {"role": "ROLE_USER", "taskId": "t"}, "configuration": {}})
        );
        let push = adapt(
            Operation::SetPushNotificationConfig,
            json!({"taskId": "t", "pushNotificationConfig": {"url": "u"}}),
        );
        assert_eq!(push, json!({"taskId": "t", "url": "u"}));
        assert_eq!(
            resolve(Operation::GetAgentCard, json!({"extended": true})),
            (Operation::GetExtendedAgentCard, json!({}))
        );
    }

    #[test]
    fn errors_are_found_by_any_of_their_names_and_their_wire_forms() {
        assert_eq!(
            error_by_code(-32004).map(|e| e.name),
            Some(canonical("StreamingNotSupportedError"))
        );
        assert_eq!(
            Some(canonical("ExtendedCardNotSupportedError")),
            Some("ExtendedAgentCardNotConfiguredError")
        );
        assert_eq!(
            error_by_code(-32001).map(|e| e.name),
            Some("TaskNotFoundError")
        );
        assert_eq!(
            error_by_reason("VERSION_NOT_SUPPORTED").map(|e| e.http),
            Some(Some(400))
        );
        assert_eq!(
            error_by_code(-32601).and_then(|e| e.http),
            None,
            "JSON-RPC only"
        );
    }
}
