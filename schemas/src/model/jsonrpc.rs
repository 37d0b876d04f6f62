//! The JSON-RPC 2.0 envelope of the A2A JSON-RPC binding (spec §9): a request with its method
//! and raw params (each method reads its own typed params), and a response holding a result
//! or an error.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::a2a_error::JsonRpcError;

/// A request's id: a string, a number, or null (JSON-RPC 2.0 §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum JsonRpcId {
    Number(i64),
    String(String),
    Null,
}

/// A JSON-RPC request as read: the method decides how its params read.
#[derive(Debug, Deserialize)]
pub struct JsonRpcRequest {
    pub jsonrpc: String,
    /// Absent on a notification (which A2A has none of).
    #[serde(default)]
    pub id: Option<JsonRpcId>,
    pub method: String,
    #[serde(default)]
    pub params: Option<Box<RawValue>>,
}

/// Just enough of a body to tell a JSON-RPC request from a contract request.
#[derive(Debug, Deserialize)]
pub struct JsonRpcMarker {
    #[serde(default)]
    pub jsonrpc: Option<serde::de::IgnoredAny>,
}

/// A JSON-RPC response: `result` or `error`, never both.
#[derive(Debug, Serialize)]
pub struct JsonRpcResponse<T> {
    pub jsonrpc: &'static str,
    pub id: JsonRpcId,
    #[serde(flatten)]
    pub outcome: JsonRpcOutcome<T>,
}

/// What a JSON-RPC response holds.
#[derive(Debug, Serialize)]
pub enum JsonRpcOutcome<T> {
    #[serde(rename = "result")]
    Result(T),
    #[serde(rename = "error")]
    Error(JsonRpcError),
}

impl<T> JsonRpcResponse<T> {
    pub fn result(id: JsonRpcId, result: T) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            outcome: JsonRpcOutcome::Result(result),
        }
    }

    pub fn error(id: JsonRpcId, error: JsonRpcError) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            outcome: JsonRpcOutcome::Error(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_with_its_params_raw_and_a_response_writes_either_side() {
        let request: JsonRpcRequest = serde_json::from_str(
            r#"{"jsonrpc": "2.0", "id": "r-1", "method": "GetTask", "params": {"id": "t"}}"#,
        )
        .unwrap();
        assert_eq!(request.id, Some(JsonRpcId::String("r-1".into())));
        assert_eq!(request.method, "GetTask");
        assert_eq!(request.params.unwrap().get(), r#"{"id": "t"}"#);

        let ok = JsonRpcResponse::result(JsonRpcId::Number(7), serde_json::json!({"x": 1}));
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "result": {"x": 1}})
        );
        let failed = JsonRpcResponse::<()>::error(
            JsonRpcId::Null,
            JsonRpcError {
                code: -32700,
                message: "Invalid JSON payload".into(),
                data: None,
            },
        );
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            serde_json::json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "Invalid JSON payload"}})
        );
    }

    #[test]
    fn the_marker_tells_a_jsonrpc_body_from_a_contract_one() {
        let rpc: JsonRpcMarker =
            serde_json::from_str(r#"{"jsonrpc": "2.0", "method": "x"}"#).unwrap();
        assert!(rpc.jsonrpc.is_some());
        let contract: JsonRpcMarker =
            serde_json::from_str(r#"{"message": {"parts": [{"text": "jsonrpc"}]}}"#).unwrap();
        assert!(contract.jsonrpc.is_none());
    }
}
