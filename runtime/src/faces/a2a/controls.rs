//! What a caller changes for one turn, read from `SendMessageRequest.metadata` the same way
//! on every binding of this face: `request_params` (sampling) and mcpctl's chat controls
//! (`personality`, `tools_allowlist`, `systemOverride`, `systemAppend`). Any other metadata key
//! gets one warning.

use daedalus_contract::Metadata;
use serde::Deserialize as _;
use serde_json::Value;

use crate::config::sampling::{SamplingError, SamplingParams};
use crate::platform::unknown_keys::warn_unknown_keys;
use crate::services::turns::TurnControls;

const SAMPLING_KEY: &str = "request_params";

/// `metadata.request_params`: the caller's sampling parameters for this turn.
pub(super) fn sampling(metadata: Option<&Metadata>) -> Result<SamplingParams, SamplingError> {
    const KEY: &str = "metadata.request_params";
    match metadata.and_then(|m| m.get(SAMPLING_KEY)) {
        None | Some(Value::Null) => Ok(SamplingParams::default()),
        Some(Value::Object(params)) => SamplingParams::from_map(params).map_err(|e| e.under(KEY)),
        Some(_) => Err(SamplingError {
            key: KEY.to_owned(),
            why: "must be an object".to_owned(),
        }),
    }
}

/// The chat controls in `metadata`; a value of the wrong type is an error naming its key.
pub(super) fn controls(metadata: Option<&Metadata>) -> Result<TurnControls, SamplingError> {
    let Some(metadata) = metadata else {
        return Ok(TurnControls::default());
    };
    warn_unknown_keys("A2A metadata", metadata.keys(), |key| {
        key == SAMPLING_KEY || TurnControls::KEYS.contains(&key)
    });
    let present: serde_json::Map<String, Value> = metadata
        .iter()
        .filter(|(k, _)| TurnControls::KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if present.is_empty() {
        return Ok(TurnControls::default());
    }
    TurnControls::deserialize(Value::Object(present)).map_err(|e| SamplingError {
        key: "metadata".to_owned(),
        why: e.to_string(),
    })
}
