//! What every JSON-RPC method of the A2A face shares, whichever protocol version names it
//! (v1 in [`super::jsonrpc`], v0.3 in [`super::v03`]): its params read into their type, and
//! its answer, one result or a stream.

use axum::response::Response;
use daedalus_contract::{A2aError, A2aErrorKind};
use serde_json::value::RawValue;

/// What a method answers: one result, or a stream of them (SSE).
pub(super) enum Answer {
    Result(serde_json::Value),
    Stream(Response),
}

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
