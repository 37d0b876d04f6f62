//! What every JSON-RPC method of the A2A face shares, whichever protocol version names it
//! (v1 in [`super::jsonrpc`], v0.3 in [`super::v03`]): its params read into their type, and
//! its answer, one result or a stream.

use axum::response::Response;
use daedalus_contract::{A2aError, A2aErrorKind, JsonRpcId, JsonRpcResponse};
use serde_json::value::RawValue;

/// What a method answers: one result, already written as JSON, or a stream of them (SSE).
pub(super) enum Answer {
    Result(Box<RawValue>),
    Stream(Response),
}

/// The typed `value` written as a method's result (in the method's dialect: pass
/// `a2a_v1::of(..)` or `a2a_v03::of(..)` for the types that have one); a value that cannot be
/// written is an internal error, never a `null` result.
pub(super) fn result_of(value: &impl serde::Serialize) -> Result<Answer, A2aError> {
    serde_json::value::to_raw_value(value)
        .map(Answer::Result)
        .map_err(|e| crate::faces::a2a::error::unwritable(&e))
}

/// One JSON-RPC response as an SSE `data` line; one that cannot be written becomes the
/// internal error's response, for the same id.
pub(super) fn sse_data<T: serde::Serialize>(
    response: &JsonRpcResponse<T>,
    id: &JsonRpcId,
) -> String {
    serde_json::to_string(response).unwrap_or_else(|e| {
        let error = crate::faces::a2a::error::unwritable(&e);
        let failed = JsonRpcResponse::<()>::error(id.clone(), error.to_jsonrpc());
        serde_json::to_string(&failed).unwrap_or_else(|_| UNWRITABLE_RESPONSE.to_owned())
    })
}

/// What is left to say when not even an error response can be written.
const UNWRITABLE_RESPONSE: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the answer cannot be written"}}"#;

/// A method's params, read into its type.
pub(super) fn read<T: serde::de::DeserializeOwned>(
    params: Option<&RawValue>,
) -> Result<T, A2aError> {
    let raw = params.map_or("{}", RawValue::get);
    daedalus_contract::read::from_slice(raw.as_bytes()).map_err(|e| {
        A2aError::new(
            A2aErrorKind::InvalidParams,
            format!("Invalid parameters: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value with no JSON form.
    struct Unwritable;

    impl serde::Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no JSON form"))
        }
    }

    #[test]
    fn an_answer_that_cannot_be_written_is_an_internal_error_not_a_null() {
        let Err(error) = result_of(&Unwritable) else {
            panic!("no result stands for an answer that cannot be written");
        };
        assert_eq!(error.kind, A2aErrorKind::Internal);
        assert!(error.message.contains("no JSON form"), "{}", error.message);

        let id = JsonRpcId::Number(7);
        let line = sse_data(&JsonRpcResponse::result(id.clone(), Unwritable), &id);
        let written: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(written["id"], 7);
        assert_eq!(written["error"]["code"], -32603, "{line}");
        assert!(written.get("result").is_none());
    }
}
